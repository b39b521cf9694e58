/**
 * The real client for the two shipped designs: Codex CLI 0.169.0 and 0.171.0
 * (each pinned version in turn; LLR_CODEX_VERSION=a,b runs others, installed
 * with `.ci/install-codex a b`) run `codex exec` against the server over
 * HTTP + SSE and over WebSocket mode (`previous_response_id`, beta
 * 2026-02-06). The simulated model asks it to run a `$ echo` line; Codex
 * runs it, sends the output back, and prints the model's final answer.
 *
 * Codex falls back to HTTP silently (exit code 0) on any WebSocket failure,
 * so every claim about the protocol is proved from the server's own run
 * records, never from Codex's exit code; the 426 case proves the fallback
 * switch itself works.
 */
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import type { LlrServer } from '../../src/server.js';
import { codexExec, completedItems, type CodexResult } from '../helpers/codex.js';
import { testServer } from '../helpers/server.js';

const VERSIONS = process.env['LLR_CODEX_VERSION']?.split(',') ?? ['0.169.0', '0.171.0'];
const BUDGET_MS = 90_000;

/** Codex ran exactly the `echo` the model asked for and printed an answer quoting its output. */
function expectEchoRun(result: CodexResult, marker: string): void {
  expect(result.code, result.stderr).toBe(0);
  const commands = completedItems(result, 'command_execution');
  expect(commands).toHaveLength(1);
  expect(String(commands[0]!['command'])).toContain(`echo ${marker}`);
  expect(String(commands[0]!['aggregated_output'])).toContain(marker);
  expect(commands[0]!['exit_code']).toBe(0);
  const answer = completedItems(result, 'agent_message').at(-1);
  expect(String(answer?.['text'])).toContain(marker);
  expect(result.events.at(-1)?.['type']).toBe('turn.completed');
}

/** Every record once the server has wound down the sessions and deferred work. */
async function settledRecords(server: LlrServer): Promise<RunRecord[]> {
  await server.ws.idle();
  await server.services.postWork.flush();
  return server.services.records.list();
}

/** The records of a `previous_response_id` chain, oldest first, from the one with no predecessor. */
function chainOf(records: RunRecord[]): RunRecord[] {
  const byPrev = new Map(records.map((r) => [r.previous_response_id, r]));
  const chain: RunRecord[] = [];
  for (let r = byPrev.get(null); r; r = byPrev.get(r.response_id)) chain.push(r);
  return chain;
}

describe.each(VERSIONS)('Codex CLI %s over HTTP and WebSocket mode', (VERSION) => {
  it(
    'over HTTP + SSE: runs the command the model asks for; only http runs',
    async () => {
      const { server, port } = await testServer({ apiKeys: ['test-key'] });
      const marker = `llr-http-${process.pid}`;
      const result = await codexExec(VERSION, port, 'http', `Please run this:\n$ echo ${marker}`);
      expectEchoRun(result, marker);

      const records = await settledRecords(server);
      expect(records.map((r) => r.protocol)).toEqual(['http', 'http']);
      // Codex over HTTP re-sends the whole conversation: no chaining, a full render each time.
      for (const r of records) {
        expect(r.status).toBe('completed');
        expect(r.previous_response_id).toBeNull();
        expect(r.counters).toMatchObject({ render_full: 1, model_calls: 1 });
      }
    },
    BUDGET_MS,
  );

  it(
    'over WebSocket mode: warm-up, then chained responses served from the connection cache',
    async () => {
      const { server, port } = await testServer({ apiKeys: ['test-key'] });
      const marker = `llr-ws-${process.pid}`;
      const result = await codexExec(VERSION, port, 'ws', `Please run this:\n$ echo ${marker}`);
      expectEchoRun(result, marker);

      const records = await settledRecords(server);
      // The proof that Codex did not fall back: no HTTP run at all.
      expect(records.filter((r) => r.protocol !== 'ws')).toEqual([]);
      expect(records.every((r) => r.status === 'completed')).toBe(true);

      const chain = chainOf(records);
      expect(chain).toHaveLength(records.length);
      expect(chain.length).toBe(3);
      const [warmUp, call, answer] = chain as [RunRecord, RunRecord, RunRecord];
      // generate:false prepares state without a model call.
      expect(warmUp.counters['model_calls']).toBe(0);
      expect(warmUp.counters['render_full']).toBe(1);
      expect(call.counters['model_calls']).toBe(1);
      expect(answer.counters['model_calls']).toBe(1);
      for (const r of [call, answer]) {
        expect(r.previous_response_id).not.toBeNull();
        expect(r.counters['rendered_cache_hits']).toBeGreaterThanOrEqual(1);
        expect(r.counters['render_full'] ?? 0).toBe(0);
        expect(r.counters['store_hydrations'] ?? 0).toBe(0);
      }
      // One socket carried the whole session.
      expect(new Set(chain.map((r) => r.connection)).size).toBe(1);
    },
    BUDGET_MS,
  );

  it(
    'with WebSockets refused (426): the same run succeeds entirely over HTTP',
    async () => {
      const { server, port } = await testServer({ apiKeys: ['test-key'] });
      server.refuseWebSockets = true;
      const marker = `llr-426-${process.pid}`;
      const result = await codexExec(VERSION, port, 'ws', `Please run this:\n$ echo ${marker}`);
      expectEchoRun(result, marker);

      const records = await settledRecords(server);
      expect(records.length).toBeGreaterThanOrEqual(2);
      expect(records.filter((r) => r.protocol !== 'http')).toEqual([]);
      expect(server.ws.sessions.size).toBe(0);
    },
    BUDGET_MS,
  );
});
