/**
 * Codex CLI with a custom provider (`model_provider = "lab"`) and a small
 * `model_auto_compact_token_limit` compacts on its own side: mid-turn it sends
 * the history plus a summarisation request as a user message, keeps the
 * model's last text as the summary, and goes on from a new history of the
 * user's messages and that summary, with no call ids. The replay model placed
 * a request by its call ids and assistant texts only, so it started again from
 * its first call after each compaction and the run never ended (221-290
 * commands for a 29-call workload before a 120 s timeout, an outside attack).
 *
 * The replay model now answers a user message it has no recorded answer for
 * (one sent between a call's outputs and the next model call) with the next
 * recorded call and a note of its position, which the summary carries (docs/
 * protocol.md, "The replay model"). Each recorded command then runs once, in
 * order, and the run ends with the recorded answer, over HTTP and WebSocket
 * mode (CASES). A model call past a bound (three times the trajectory) fails,
 * so a run that loops ends instead of hanging the test.
 */
import { describe, expect, it } from 'vitest';
import { replayPolicy, type ModelPolicy } from '../../src/model/policies.js';
import type { ReplayTurn } from '../../src/model/types.js';
import { codexExec, completedItems, type CodexWire } from '../helpers/codex.js';
import { testServer } from '../helpers/server.js';

/**
 * The designs each version compacts over: 0.107 has no WebSocket mode for a custom provider (it falls back to HTTP)
 * and, over the long-lived protocol, made its 7 model calls without compacting; 0.169 and 0.171 speak WebSocket mode.
 */
const CASES: Array<[string, CodexWire]> = [
  ['0.107.0', 'http'],
  ['0.169.0', 'http'],
  ['0.169.0', 'ws'],
  ['0.171.0', 'http'],
  ['0.171.0', 'ws'],
];
const STEPS = 6;

function turns(): ReplayTurn[] {
  const calls: ReplayTurn[] = Array.from({ length: STEPS }, (_, i) => ({
    output: [{ type: 'function_call', name: 'exec_command', arguments: JSON.stringify({ cmd: `echo step-${i}; seq 1 1500` }), call_id: `call_step${i}` }],
  }));
  return [...calls, { output: [{ type: 'message', text: `Ran ${STEPS} steps.` }] }];
}

/** The replay policy, failing every model call past `max` (a run that loops ends). */
function bounded(policy: ModelPolicy, max: number): ModelPolicy & { calls: () => number } {
  let calls = 0;
  return {
    name: policy.name,
    random: policy.random!,
    plan(req, rng) {
      if (++calls > max) throw new Error(`more than ${max} model calls: the replay is looping`);
      return policy.plan(req, rng);
    },
    calls: () => calls,
  };
}

describe('Codex CLI, custom provider, compacting on its own side', () => {
  it.each(CASES)('%s over %s: each recorded call runs once and the run ends', async (version, wire) => {
    const t = turns();
    const policy = bounded(replayPolicy(t), 3 * t.length);
    const { server, port } = await testServer({ apiKeys: ['test-key'], policy });
    const result = await codexExec(version, port, wire, 'Run the steps.', { config: 'model_auto_compact_token_limit = 14000' });
    await server.ws.idle();
    await server.services.postWork.flush();
    const commands = completedItems(result, 'command_execution').map((c) => String(c['command']).match(/step-\d+/)?.[0]);
    expect(commands, result.stdout).toEqual(Array.from({ length: STEPS }, (_, i) => `step-${i}`));
    expect(String(completedItems(result, 'agent_message').at(-1)?.['text'])).toBe(`Ran ${STEPS} steps.`);
    expect(result.code, result.stderr).toBe(0);
    // Codex did compact (a request the recording has no answer for was made), over the design asked for.
    expect(policy.calls()).toBeGreaterThan(t.length);
    expect(new Set(server.services.records.list().map((r) => r.protocol))).toEqual(new Set([wire]));
  }, 120_000);
});
