/**
 * A recorded run that edits files, replayed to the real Codex CLI: Codex's own
 * `apply_patch` tool must make the recorded edits in its workspace.
 *
 * Codex declares `apply_patch` as a custom (freeform) tool only for a model
 * slug it knows (0.107: `gpt-5-codex`; 0.169 and 0.171: `gpt-5.5`); for an
 * unknown slug (`sim-model`) it declares none and answers each replayed patch
 * `unsupported call`. The server takes any slug. The replay model plays a
 * recorded `custom_tool_call` as one when the request declares the tool custom
 * (src/model/policies.ts), so Codex applies the recorded patches, then runs the
 * recorded `cat` and sees the edited file. In all three designs; the protocol
 * that served the turns is read from the server's own records (Codex falls
 * back to HTTP silently).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { replayPolicy } from '../../src/model/policies.js';
import { loadWorkloadFile } from '../../src/workload/load.js';
import { flatModelTurns } from '../../src/workload/replayable.js';
import { codexExec, completedItems, type CodexResult, type CodexWire } from '../helpers/codex.js';
import { testServer } from '../helpers/server.js';

const WORKLOAD = fileURLToPath(new URL('../fixtures/workloads/shapes/rollout-apply-patch.jsonl', import.meta.url));
const EDITED = 'hello from a replayed patch\nsecond line: right\ncafé ✓\n';
const VERSIONS = process.env['LLR_CODEX_VERSION']?.split(',') ?? ['0.169.0', '0.171.0'];
const BUDGET_MS = 120_000;

async function replayTo(version: string, wire: CodexWire, model: string) {
  const { server, port } = await testServer({ apiKeys: ['test-key'], policy: replayPolicy(flatModelTurns(loadWorkloadFile(WORKLOAD))) });
  server.refuseWebSockets = wire === 'http';
  let file: string | null = null;
  const result = await codexExec(version, port, wire, 'Write a greeting file, fix its second line, then show it.', {
    model,
    workspace: (dir) => {
      const path = join(dir, 'greeting.txt');
      file = existsSync(path) ? readFileSync(path, 'utf8') : null;
    },
  });
  await server.ws.idle();
  await server.services.postWork.flush();
  return { result, file, records: server.services.records.list() };
}

/** Codex applied both recorded patches (an add, then an update), ran the recorded `cat` on the edited file and answered as recorded. */
function expectEdited(result: CodexResult, file: string | null): void {
  const failures = result.events.filter((e) => e['type'] === 'error' || e['type'] === 'turn.failed');
  expect(failures, result.stdout).toEqual([]);
  expect(result.code, result.stderr).toBe(0);
  const changes = completedItems(result, 'file_change').map((i) => (i['changes'] as Array<{ path: string; kind: string }>).map((c) => [c.path.split('/').at(-1), c.kind]));
  expect(changes).toEqual([[['greeting.txt', 'add']], [['greeting.txt', 'update']]]);
  for (const i of completedItems(result, 'file_change')) expect(i['status']).toBe('completed');
  const commands = completedItems(result, 'command_execution');
  expect(commands.map((c) => c['aggregated_output'])).toEqual([EDITED]);
  expect(completedItems(result, 'agent_message').at(-1)?.['text']).toBe('greeting.txt is written and fixed.');
  expect(file).toBe(EDITED);
}

describe('Codex CLI 0.107.0 over the long-lived protocol: a replayed run that edits files', () => {
  it(
    'applies the recorded patches in its workspace, in one long-lived response',
    async () => {
      const { result, file, records } = await replayTo('0.107.0', 'long-lived', 'gpt-5-codex');
      expectEdited(result, file);
      expect(records.map((r) => [r.protocol, r.status, r.counters['model_calls']])).toEqual([['long-lived', 'completed', 4]]);
    },
    BUDGET_MS,
  );
});

describe.each(VERSIONS)('Codex CLI %s: a replayed run that edits files', (version) => {
  it.each(['ws', 'http'] as const)(
    'over %s: applies the recorded patches in its workspace',
    async (wire) => {
      const { result, file, records } = await replayTo(version, wire, 'gpt-5.5');
      expectEdited(result, file);
      // One response per model call, each served over the wire asked for.
      const served = records.filter((r) => (r.counters['model_calls'] ?? 0) > 0);
      expect(served.map((r) => [r.protocol, r.status])).toEqual(Array.from({ length: 4 }, () => [wire, 'completed']));
    },
    BUDGET_MS,
  );
});
