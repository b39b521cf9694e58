/**
 * The rollout reader on files an outsider could hand it (Codex sessions the
 * repository has never seen): each either reads into a workload that the
 * bench's own server process accepts (the neutral format it writes for
 * them, read back) or is refused with a WorkloadError naming its line.
 * Before, these read cleanly and then failed inside the bench, in a child
 * server or mid-replay, with an error naming no line of the file.
 */
import { describe, expect, it } from 'vitest';
import { parseNeutral } from '../../src/workload/format.js';
import { parseWorkload, WorkloadError, type Workload } from '../../src/workload/load.js';
import { replayable } from '../../src/workload/replayable.js';

let clock = Date.parse('2026-10-05T17:45:00Z');
const rec = (type: string, payload: Record<string, unknown>) => JSON.stringify({ timestamp: new Date((clock += 250)).toISOString(), type, payload });
const meta = () => rec('session_meta', { id: 's1', source: 'cli', base_instructions: { text: 'You are Codex.' } });
const user = (text: string) => rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
const answer = (text: string) => rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
const call = (call_id: string, name = 'shell') => rec('response_item', { type: 'function_call', name, arguments: '{"command":["ls"]}', call_id });
const output = (call_id: string, out = 'ok') => rec('response_item', { type: 'function_call_output', call_id, output: out });
const usage = (input: number, out: number) => rec('event_msg', { type: 'token_count', info: { last_token_usage: { input_tokens: input, output_tokens: out } } });
const read = (lines: string[]) => parseWorkload(lines.join('\n') + '\n', 'x.jsonl', 'test');

/** What the bench hands its server process: the replayable workload in the neutral format, read back. */
const asServerReadsIt = (w: Workload) => parseNeutral(JSON.stringify({ llr_workload: 1, ...replayable(w) }), 'workload-whole.json', 'test');
const refusal = (lines: string[]) => {
  try {
    read(lines);
  } catch (err) {
    expect(err).toBeInstanceOf(WorkloadError);
    return (err as Error).message;
  }
  throw new Error('read without an error');
};

describe('rollouts from outside', () => {
  it('a call_id named __proto__ is an own entry of toolOutputs, answered with its output', () => {
    const w = read([meta(), user('x'), call('__proto__'), output('__proto__', 'the answer'), answer('done')]);
    expect(Object.hasOwn(w.toolOutputs, '__proto__')).toBe(true);
    expect(w.toolOutputs['__proto__']?.output).toBe('the answer');
    expect(Object.getPrototypeOf(w.toolOutputs)).toBe(Object.prototype);
    expect(asServerReadsIt(w).toolOutputs['__proto__']?.output).toBe('the answer');
  });
});
