/**
 * A recorded output count below what the call's output shows: the replay decodes at least the tokens of a call's
 * texts and arguments, so such a call decodes more than recorded. That was done without a word, and `llr workload
 * inspect` showed the recorded figure (outside attack atk99 F2). Now each such call is noted as the workload is made
 * replayable, at its line, a repeated note kept six times and counted after; a converted file read back keeps its
 * notes as they were.
 */
import { describe, expect, it } from 'vitest';
import { visibleTokens } from '../../src/model/policies.js';
import { parseNeutral } from '../../src/workload/format.js';
import { parseWorkload } from '../../src/workload/load.js';
import { flatModelTurns, replayable } from '../../src/workload/replayable.js';

let clock = Date.parse('2026-11-05T09:00:00Z');
const rec = (type: string, payload: Record<string, unknown>) => JSON.stringify({ timestamp: new Date((clock += 250)).toISOString(), type, payload });
const meta = () => rec('session_meta', { id: 's1', source: 'cli', base_instructions: { text: 'You are Codex.' } });
const user = (text: string) => rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
const answer = (text: string) => rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
const call = (call_id: string) => rec('response_item', { type: 'function_call', name: 'shell', arguments: '{"command":["ls","-la","/tmp"]}', call_id });
const output = (call_id: string) => rec('response_item', { type: 'function_call_output', call_id, output: 'ok' });
const usage = (out: number) => rec('event_msg', { type: 'token_count', info: { last_token_usage: { input_tokens: 500, output_tokens: out } } });
const read = (lines: string[]) => parseWorkload(lines.join('\n') + '\n', 'x.jsonl', 'test');

describe('recorded output counts below what a call shows', () => {
  it('are noted at the call\'s line with both figures; a count at or above it is not', () => {
    const text = 'word '.repeat(200);
    const w = replayable(read([meta(), user('go'), call('c1'), usage(2), output('c1'), call('c2'), usage(500), output('c2'), answer(text), usage(1)]));
    const turns = flatModelTurns(w);
    const shown = turns.map((t) => visibleTokens(t.output));
    expect(shown[0]).toBeGreaterThan(2);
    expect(shown[2]).toBeGreaterThan(100);
    expect(w.skipped).toEqual([
      { line: 3, what: "model call 1's output_tokens 2", why: `below the ${shown[0]} tokens its output shows: the replay decodes ${shown[0]}` },
      { line: 9, what: "model call 3's output_tokens 1", why: `below the ${shown[2]} tokens its output shows: the replay decodes ${shown[2]}` },
    ]);
  });

  it('a converted file read back keeps its notes as they were (replayable twice is replayable once)', () => {
    const w = replayable(read([meta(), user('go'), call('c1'), usage(1), output('c1'), answer('done'), usage(1)]));
    expect(w.skipped).toHaveLength(1);
    const back = parseNeutral(JSON.stringify({ llr_workload: 1, ...w }), 'w.json', 'test');
    expect(replayable(back).skipped).toEqual(w.skipped);
    expect(replayable(w)).toEqual(w);
  });

  it('past six such calls, the later ones are counted in a note of their own, not in the sixth call\'s (atk114 F2, atk117 F4)', () => {
    const lines = [meta(), user('go')];
    for (let i = 0; i < 20; i++) lines.push(call(`c${i}`), usage(1), output(`c${i}`));
    lines.push(answer('done'), usage(1));
    const w = replayable(read(lines));
    const notes = w.skipped ?? [];
    expect(notes).toHaveLength(7);
    expect(notes.slice(0, 6).map((n) => n.what)).toEqual([1, 2, 3, 4, 5, 6].map((g) => `model call ${g}'s output_tokens 1`));
    expect(notes[5]!.more).toBeUndefined();
    // Calls 7 to 20 (the first of them the note, 13 more); the answer "done" takes its one recorded token.
    expect(visibleTokens(flatModelTurns(w).at(-1)!.output)).toBe(1);
    expect(notes[6]).toEqual({ line: 0, what: 'model calls past the first 6 whose output_tokens are below what their output shows', why: 'each decodes what its output shows, as the ones above', more: 13 });
    expect(replayable(w)).toEqual(w);
  });

  it('a steered turn, its call answered before the user\'s next message, ends in a marker that does not say the call went unanswered (atk114 F1)', () => {
    const w = replayable(read([meta(), user('steer'), call('s1'), usage(5), output('s1'), user('actually do this'), call('s2'), usage(5), output('s2'), answer('ok'), usage(1)]));
    const first = w.userTurns[0]!.modelTurns.at(-1)!.output;
    expect(first).toEqual([{ type: 'message', text: '(interrupted: the recorded turn ended in tool calls that the model did not go on from)' }]);
  });
});
