/**
 * Rollouts an outsider could hand the bench (shapes a real Codex session can
 * have that the fixtures do not), read as `llr serve --workload` reads them
 * and replayed through every design by the bench's replay driver on a real
 * server on port 0. A replay that goes off script fails (ReplayError), so
 * "completes" means the model made exactly the recorded calls.
 */
import { describe, expect, it } from 'vitest';
import { replayRun } from '../../src/bench/replay.js';
import { CLIENT_PROTOCOLS } from '../../src/client/index.js';
import { replayPolicy } from '../../src/model/policies.js';
import { parseWorkload } from '../../src/workload/load.js';
import { flatModelTurns, replayable } from '../../src/workload/replayable.js';
import { testServer } from '../helpers/server.js';

let clock = Date.parse('2026-11-01T10:00:00Z');
const rec = (type: string, payload: Record<string, unknown>) => JSON.stringify({ timestamp: new Date((clock += 250)).toISOString(), type, payload });
const meta = () => rec('session_meta', { id: 's1', source: 'cli', base_instructions: { text: 'You are Codex.' } });
const user = (text: string) => rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
const answer = (text: string) => rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
const call = (call_id: string) => rec('response_item', { type: 'function_call', name: 'shell', arguments: '{"command":["ls"]}', call_id });
const output = (call_id: string) => rec('response_item', { type: 'function_call_output', call_id, output: 'ok' });
const load = (lines: string[]) => replayable(parseWorkload(lines.join('\n') + '\n', 'x.jsonl', 'test'));

async function replaysThroughEveryDesign(lines: string[]): Promise<void> {
  const w = load(lines);
  const turns = flatModelTurns(w);
  const { url } = await testServer({ policy: replayPolicy(turns) });
  for (const design of CLIENT_PROTOCOLS) {
    const sample = await replayRun({ design, url, workload: w, nonce: design, toolFactor: 0, timeoutMs: 20_000 });
    expect(sample.turns, design).toHaveLength(turns.length);
  }
}

describe('rollouts from outside replay to the end through every design', () => {
  it('a compaction after user turns that all ended "Done." (the anchor placed the new conversation at the first: replay diverged)', async () => {
    const lines = [meta()];
    for (const k of [1, 2, 3]) lines.push(user(`task ${k}`), call(`a${k}`), output(`a${k}`), answer('Done.'));
    lines.push(rec('compacted', { message: 'summary' }), user('after the compaction'), call('z1'), output('z1'), answer('Finished.'));
    await replaysThroughEveryDesign(lines);
    // Read again, as the bench's server process reads the copy it is handed, the anchor stays one message.
    const w = load(lines);
    expect(replayable(w)).toEqual(w);
    expect(w.userTurns[3]!.input.filter((i) => 'role' in i && i.role === 'assistant')).toHaveLength(1);
  });

  it('a compaction whose replacement history holds an answer a later call repeats (the model, placed past it, replayed a call ahead: diverged)', async () => {
    const history: unknown[] = [];
    const lines = [meta()];
    for (const k of [1, 2]) {
      lines.push(user(`task ${k}`), call(`a${k}`), output(`a${k}`), answer('Done.'));
      history.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: `task ${k}` }] }, { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Done.' }] });
    }
    lines.push(rec('compacted', { message: '', replacement_history: history }));
    lines.push(user('task 3'), call('b1'), output('b1'), answer('Done.'), user('task 4'), call('b2'), output('b2'), answer('Finished.'));
    await replaysThroughEveryDesign(lines);
    const w = load(lines);
    expect(replayable(w)).toEqual(w);
  });

  it('a file that begins from a compacted history holding an answer the model says again (a resumed or forked session): that message is left out (the model started past the end)', async () => {
    const history = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'task 1' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Done.' }] },
    ];
    const lines = [meta(), rec('compacted', { message: '', replacement_history: history }), user('task 2'), call('b1'), output('b1'), answer('Done.')];
    await replaysThroughEveryDesign(lines);
    const w = load(lines);
    expect(w.userTurns[0]!.input.filter((i) => 'role' in i && i.role === 'assistant')).toEqual([]);
    expect(w.skipped?.at(-1)).toMatchObject({ what: "1 assistant message(s) of user turn 1's input" });
    expect(replayable(w)).toEqual(w);
  });

  it('a compaction after a call that said the same text twice (the anchor placed the conversation at the first, and the next answer at the second: a call replayed twice)', async () => {
    const lines = [meta(), user('go'), answer('Done.'), answer('Done.')];
    lines.push(rec('compacted', { message: 'summary' }), user('next'), answer('Done.'), user('last'), call('z1'), output('z1'), answer('Finished.'));
    await replaysThroughEveryDesign(lines);
  });

  it('a turn_aborted the model went on after with no new user message: its calls are answered "aborted" where the model called again (the bench\'s server refused the copy: no entry in toolOutputs)', async () => {
    const abort = rec('event_msg', { type: 'turn_aborted', reason: 'interrupted' });
    const lines = [meta(), user('go'), call('c1'), abort, call('c2'), output('c2'), answer('Done.')];
    await replaysThroughEveryDesign(lines);
    const w = load(lines);
    expect(w.toolOutputs['c1']?.output).toBe('aborted');
    expect(w.skipped).toEqual([
      { line: 4, what: 'turn_aborted', why: 'the user turn was aborted (interrupted) with 1 call(s) left without output: the model called again with no new user message, and Codex sent them "aborted" there' },
    ]);
  });

  it('a call left without output while the model called again in the same user turn is answered "aborted", as Codex sends it (it was refused as truncated)', async () => {
    const lines = [meta(), user('go'), call('c1'), call('c2'), output('c2'), call('c3'), output('c3'), answer('Done.')];
    await replaysThroughEveryDesign(lines);
    const w = load(lines);
    expect(w.toolOutputs['c1']).toEqual({ output: 'aborted', duration_ms: 0 });
    expect(w.skipped).toEqual([expect.objectContaining({ line: 6, what: 'shell call c1 (line 3; the model called again at line 6)' })]);
    // An output recorded after the model's next call began is still the call's.
    const late = [meta(), user('go'), call('c1'), call('c2'), output('c2'), call('c3'), output('c1'), output('c3'), answer('Done.')];
    await replaysThroughEveryDesign(late);
    expect(load(late).toolOutputs['c1']?.output).toBe('ok');
  });

  it('an answer holding a lone surrogate, then more text-only turns: each later turn gets its own answer (the first was played at every turn: atk117 F1)', async () => {
    // The client sends back the U+FFFD it was given; the recorded text is read so, and the replay places the
    // conversation by it. The driver checks each turn's text, so a turn answered with another's fails.
    const lines = [meta(), user('one'), answer('First answer \ud83d.'), user('two'), answer('Second answer.'), user('three'), answer('Third answer.')];
    await replaysThroughEveryDesign(lines);
    // And with calls, and a call id and name holding one (Codex's JSON reader refuses the escape).
    const callLines = [meta(), user('one'), rec('response_item', { type: 'function_call', name: 'sh\udc00', arguments: '{"c":"\ud800"}', call_id: 'call_s\ud800' })];
    callLines.push(rec('response_item', { type: 'function_call_output', call_id: 'call_s\ud800', output: 'ok' }), answer('Half \ud83d.'), user('two'), call('b1'), output('b1'), answer('Done.'));
    await replaysThroughEveryDesign(callLines);
  });

  it("the driver fails a replay whose text-only turn is answered with another turn's text", async () => {
    const w = load([meta(), user('one'), answer('First.'), user('two'), answer('Second.')]);
    // A server replaying the first call only, as the surrogate's replay did.
    const { url } = await testServer({ policy: replayPolicy([flatModelTurns(w)[0]!, flatModelTurns(w)[0]!]) });
    await expect(replayRun({ design: 'http', url, workload: w, nonce: 'n', toolFactor: 0, timeoutMs: 20_000 })).rejects.toThrow(
      /replay diverged at user turn 2: the server's model answered "First\.", where the workload answers "Second\."/,
    );
  });
});
