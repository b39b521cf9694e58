/**
 * Codex CLI 0.169.0 and 0.171.0 with their built-in OpenAI provider pointed at
 * the server (`openai_base_url`) and a small `model_auto_compact_token_limit`:
 * Codex compacts mid-turn with "remote compaction v2", a create whose input
 * ends with `{"type": "compaction_trigger"}`, and fails the turn unless the
 * response's output is exactly one compaction item ("remote compaction v2
 * expected exactly one compaction output item, got 0 from 1 output items",
 * exit 1, before the server knew the trigger). It then starts a new window
 * from that item, and the run goes on where it was.
 *
 * The model replays a fixed run of shell calls (each printing a few thousand
 * tokens), so the conversation passes the limit after a step or two whatever
 * Codex's own prompt weighs. Over WebSocket mode (Codex's default for this
 * provider) and over HTTP (WebSockets refused, 426).
 */
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { replayPolicy } from '../../src/model/policies.js';
import type { ReplayTurn } from '../../src/model/types.js';
import { codexExec, completedItems } from '../helpers/codex.js';
import { testServer } from '../helpers/server.js';

const VERSIONS = process.env['LLR_CODEX_VERSION']?.split(',') ?? ['0.169.0', '0.171.0'];
const STEPS = 6;

function turns(): ReplayTurn[] {
  const calls: ReplayTurn[] = Array.from({ length: STEPS }, (_, i) => ({
    output: [{ type: 'function_call', name: 'exec_command', arguments: JSON.stringify({ cmd: `echo step-${i}; seq 1 1500` }), call_id: `call_step${i}` }],
  }));
  return [...calls, { output: [{ type: 'message', text: `Ran ${STEPS} steps.` }] }];
}

async function run(version: string, websockets: boolean) {
  const { server, port } = await testServer({ apiKeys: ['test-key'], policy: replayPolicy(turns()) });
  server.refuseWebSockets = !websockets;
  const result = await codexExec(version, port, 'ws', 'Run the steps.', { provider: 'openai', config: 'model_auto_compact_token_limit = 14000' });
  await server.ws.idle();
  await server.services.postWork.flush();
  return { result, records: server.services.records.list() };
}

function expectCompactedRun(result: Awaited<ReturnType<typeof run>>['result'], records: RunRecord[], protocol: string): void {
  const errors = result.events.filter((e) => e['type'] === 'error' || e['type'] === 'turn.failed');
  expect(errors, result.stdout).toEqual([]);
  expect(result.code, result.stderr).toBe(0);
  const commands = completedItems(result, 'command_execution');
  expect(commands.map((c) => String(c['command']).match(/step-\d+/)?.[0])).toEqual(Array.from({ length: STEPS }, (_, i) => `step-${i}`));
  expect(String(completedItems(result, 'agent_message').at(-1)?.['text'])).toBe(`Ran ${STEPS} steps.`);

  expect(records.filter((r) => r.protocol !== protocol)).toEqual([]);
  // The trigger's responses: a compaction and no model call; a later response starts from the compaction item.
  const triggers = records.filter((r) => r.counters['compactions'] === 1 && r.counters['model_calls'] === 0);
  expect(triggers.length).toBeGreaterThanOrEqual(1);
  for (const r of triggers) expect(r.status).toBe('completed');
  expect(records.some((r) => (r.counters['compactions_applied'] ?? 0) > 0 && r.counters['model_calls'] === 1)).toBe(true);
}

describe.each(VERSIONS)('Codex CLI %s: remote compaction v2 (compaction_trigger)', (version) => {
  it('over WebSocket mode: compacts mid-turn and finishes the run', async () => {
    const { result, records } = await run(version, true);
    expectCompactedRun(result, records, 'ws');
  }, 120_000);

  it('over HTTP: compacts mid-turn and finishes the run', async () => {
    const { result, records } = await run(version, false);
    expectCompactedRun(result, records, 'http');
  }, 120_000);
});
