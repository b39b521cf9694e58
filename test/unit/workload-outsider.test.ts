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
import { checkAnswered, parseWorkload, type Workload } from '../../src/workload/load.js';
import { refusalOf } from '../helpers/workload.js';
import { replayable } from '../../src/workload/replayable.js';
import { replacementItems, replayCallId } from '../../src/workload/codex-items.js';
import { NOTHING_SHOWN_TEXT } from '../../src/workload/codex-turns.js';
import { MAX_HELD_RECORDS } from '../../src/workload/repeats.js';

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
const refusal = (lines: string[]) => refusalOf(() => read(lines));

describe('files that are not Codex rollouts', () => {
  it('say what they look like instead: codex exec --json output, the legacy rollout format, another agent\'s log', () => {
    const lines = (...l: object[]) => l.map((x) => JSON.stringify(x));
    expect(refusal(lines({ type: 'thread.started', thread_id: 't' }, { type: 'turn.started' }))).toMatch(
      /^x\.jsonl:1: the "thread\.started" record has no `payload` object: not a Codex rollout record: this looks like `codex exec --json` output \(its events\), not the session's rollout; pass the rollout/,
    );
    expect(refusal(lines({ id: 'abc', timestamp: '2025-05-01T00:00:00Z', instructions: null }, { type: 'message', role: 'user', content: [] }))).toMatch(
      /^x\.jsonl:1: the record has no string `type`: .* \(a session header \{id, timestamp, …\}: the legacy rollout format of early Codex versions, not read\)$/,
    );
    expect(refusal(lines({ type: 'message', role: 'user', content: [] }))).toMatch(/the legacy rollout format of early Codex versions, not read\)$/);
    expect(refusal(lines({ type: 'user', message: { role: 'user', content: 'hi' }, uuid: 'u1' }))).toMatch(/not a Codex rollout record \(another agent's log\? convert it to the neutral format: docs\/workload\.schema\.json\)$/);
    // A Codex record missing its payload is a broken rollout: no hint.
    expect(refusal(lines({ type: 'response_item' }))).toBe('x.jsonl:1: the "response_item" record has no `payload` object: not a Codex rollout record');
  });
});

describe('what the reader hands on', () => {
  it('a call unanswered before its user turn goes on is refused at its line, not by the bench\'s server reading the copy (a JSON pointer into workload-grid.json)', () => {
    const w = read([meta(), user('x'), call('c1'), output('c1'), call('c2'), output('c2'), answer('done')]);
    expect(() => checkAnswered(w, 'x.jsonl')).not.toThrow();
    // As a reader that took a shape wrongly would hand it on: the first call's output missing.
    const { c1: _c1, ...rest } = w.toolOutputs;
    expect(refusalOf(() => checkAnswered({ ...w, toolOutputs: rest }, 'x.jsonl'))).toBe(
      'x.jsonl:3: shell call c1 has no output, yet the model called again in its user turn: not replayable as read',
    );
  });
});

describe('rollouts from outside', () => {
  it('a call_id used twice for another call is refused naming the first use', () => {
    const other = rec('response_item', { type: 'function_call', name: 'shell', arguments: '{"command":["pwd"]}', call_id: 'c1' });
    expect(refusal([meta(), user('x'), call('c1'), output('c1'), answer('a'), user('y'), other, output('c1'), answer('b')])).toBe(
      'x.jsonl:7: call_id c1 is used twice (first by the call at line 3)',
    );
    // A call answered "aborted" by the next user turn keeps its line too.
    expect(refusal([meta(), user('x'), call('c1'), user('y'), answer('a'), user('z'), other, output('c1'), answer('b')])).toBe(
      'x.jsonl:7: call_id c1 is used twice (first by the call at line 3)',
    );
  });

  it('a recorded call_id past the API\'s 64 characters is replayed under call_ and its SHA-256, the same for the call and its output, noted once', () => {
    const id = `codex_mcp__server__a_tool_with_a_long_name_exec-${'0123456789abcdef'.repeat(3)}`;
    expect(id.length).toBeGreaterThan(64);
    const w = read([meta(), user('x'), call(id), output(id, 'listed'), answer('done')]);
    const calls = w.userTurns[0]!.modelTurns.flatMap((t) => t.output.filter((o) => o.type === 'function_call'));
    expect(calls).toHaveLength(1);
    const wire = (calls[0] as { call_id: string }).call_id;
    expect(wire).toMatch(/^call_[A-Za-z0-9_-]{43}$/);
    expect(w.toolOutputs[wire]?.output).toBe('listed');
    expect((w.skipped ?? []).filter((s) => s.what.startsWith('call_id '))).toHaveLength(1);
    // What the bench's server reads back takes it (a longer id is refused there, as the API refuses it sent back).
    expect(() => asServerReadsIt(w)).not.toThrow();
    // The same recorded id maps to the same wire id in another read; another id to another.
    expect((read([meta(), user('x'), call(id), output(id), answer('d')]).userTurns[0]!.modelTurns[0]!.output[0] as { call_id: string }).call_id).toBe(wire);
    expect((read([meta(), user('x'), call(`${id}x`), output(`${id}x`), answer('d')]).userTurns[0]!.modelTurns[0]!.output[0] as { call_id: string }).call_id).not.toBe(wire);
    // A compaction's replacement history holding the call and its output: the same id for both, so the replayed input
    // pairs them (and an empty id, which the API refuses, is dropped).
    const replaced = replacementItems([
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x' }] },
      { type: 'function_call', call_id: id, name: 'shell', arguments: '{}' },
      { type: 'function_call_output', call_id: id, output: 'listed' },
      { type: 'function_call', call_id: '', name: 'shell', arguments: '{}' },
    ]);
    expect(replaced.items.filter((i) => 'call_id' in i).map((i) => (i as { call_id: string }).call_id)).toEqual([wire, wire]);
    expect(replaced.dropped).toBe(1);
    // Two ids that differ only in a lone surrogate are two ids (hashed as UTF-8, both were U+FFFD: one id; atk59).
    expect(replayCallId(`${id}\ud800`)).not.toBe(replayCallId(`${id}\udc00`));
    expect(replayCallId(`${id}\ud800`)).toMatch(/^call_[A-Za-z0-9_-]{43}$/);
  });

  it("a user turn whose last model call shows nothing after its tool call was answered (only reasoning, an empty message) keeps the call and ends in a marker (it was folded into the call before: the call and its output dropped as interrupted; atk57 F1)", () => {
    const reasoning = rec('response_item', { type: 'reasoning', summary: [], encrypted_content: 'x'.repeat(40) });
    const empty = rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: '' }] });
    for (const last of [reasoning, empty]) {
      const w = read([meta(), user('x'), call('c1'), usage(100, 40), output('c1'), last, usage(150, 30), user('y'), answer('b'), usage(200, 5)]);
      const turn = w.userTurns[0]!;
      expect(turn.modelTurns.map((t) => t.output.map((o) => o.type))).toEqual([['function_call'], ['message']]);
      expect(turn.modelTurns.map((t) => t.output_tokens)).toEqual([40, 30]);
      expect(turn.modelTurns[1]!.output[0]).toEqual({ type: 'message', text: NOTHING_SHOWN_TEXT });
      expect(w.toolOutputs['c1']?.output).toBe('ok');
      expect(w.skipped?.some((n) => n.why.includes('showed nothing after its tool calls were answered'))).toBe(true);
      // What the server replays is the same: the call is kept (replayable drops a turn's final calls as interrupted).
      expect(replayable(w).userTurns[0]!.modelTurns[0]!.output.map((o) => o.type)).toEqual(['function_call']);
      expect(() => asServerReadsIt(w)).not.toThrow();
    }
  });

  it('a timestamp that is no date (a string Date.parse refuses, a number) is noted, its tool time 0 ms (it was taken silently; atk57 F5)', () => {
    const bad = (ts: unknown, line: string) => JSON.stringify({ ...JSON.parse(line), timestamp: ts });
    const w = read([meta(), user('x'), call('c1'), bad('not-a-date', output('c1')), answer('done')]);
    expect(w.toolOutputs['c1']?.duration_ms).toBe(0);
    expect(w.skipped).toContainEqual({ line: 4, what: 'the timestamp "not-a-date" of a "response_item" record', why: expect.stringContaining('not a date') });
    const numbers = read([meta(), user('x'), bad(1780000000, call('c1')), output('c1'), answer('done')]);
    expect(numbers.skipped).toContainEqual({ line: 3, what: 'the timestamp (a number) of a "response_item" record', why: expect.stringContaining('not a date') });
    // A good one says nothing.
    expect(read([meta(), user('x'), call('c1'), output('c1'), answer('done')]).skipped ?? []).toEqual([]);
  });

  it('an output that answers no call, or a call answered already, is noted and not replayed (refused before: the whole file lost to one record)', () => {
    const twice = read([meta(), user('x'), call('c1'), output('c1'), output('c1', 'again'), answer('a')]);
    expect(twice.toolOutputs['c1']?.output).toBe('ok');
    expect(twice.skipped).toContainEqual({ line: 5, what: 'an output for call_id c1', why: 'the call (line 3) already has its output (line 4): this second one is not replayed' });
    const stray = read([meta(), user('x'), output('c9'), call('c1'), output('c1'), answer('a')]);
    expect(Object.keys(stray.toolOutputs)).toEqual(['c1']);
    expect(stray.skipped).toContainEqual({ line: 3, what: 'an output for call_id c9', why: expect.stringMatching(/^answers no call recorded before it .*: not replayed$/) });
    // The model call under way stays one call: a stray output between its items does not split it.
    const inside = read([meta(), user('x'), answer('Looking.'), output('c9'), call('c1'), output('c1'), answer('done')]);
    expect(inside.userTurns[0]!.modelTurns.map((t) => t.output.map((o) => o.type))).toEqual([['message', 'function_call'], ['message']]);
    const late = read([meta(), user('x'), call('c1'), user('y'), answer('a'), output('c1'), user('z'), answer('b')]);
    expect(late.skipped).toContainEqual({ line: 6, what: 'an output for call_id c1', why: 'comes after a new user turn began, which answered the call (line 3) "aborted" as Codex does: not replayed' });
    for (const w of [twice, stray, inside, late]) expect(asServerReadsIt(w).userTurns).toEqual(replayable(w).userTurns);
  });

  describe('history a resumed session wrote again (openai/codex#29531)', () => {
    // Sealed reasoning as the API writes it: long, unique to its model call.
    const reasoning = (enc: string) => rec('response_item', { type: 'reasoning', summary: [], encrypted_content: `gAAAAA${enc.padEnd(120, '=')}` });
    const turn1 = () => [user('list the files'), reasoning('enc-1'), call('c1'), usage(100, 10), output('c1', 'a.txt'), answer('One file.'), usage(120, 5)];

    it('is skipped once, with a note naming both runs of lines; the new turn after it continues the conversation', () => {
      // The copy holds response items only, with later timestamps; the new turn's records follow it.
      const copy = [user('list the files'), reasoning('enc-1'), call('c1'), output('c1', 'a.txt'), answer('One file.')];
      const w = read([meta(), ...turn1(), meta(), ...copy, rec('turn_context', {}), user('count them'), call('c2'), usage(140, 8), output('c2', '1'), answer('One.'), usage(150, 3)]);
      expect(w.userTurns).toHaveLength(2);
      expect(w.userTurns[1]!.input).toEqual([{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'count them' }] }]);
      expect(w.userTurns[1]!.replace_history).toBeUndefined();
      expect(Object.keys(w.toolOutputs)).toEqual(['c1', 'c2']);
      expect(w.skipped).toContainEqual({ line: 10, what: 'lines 10–14 (5 items), a copy of lines 2–7', why: expect.stringMatching(/^repeat earlier history item for item: the history a resumed session wrote again/) });
      expect(w.calls!.map((c) => c.input_tokens)).toEqual([100, 120, 140, 150]);
      expect(asServerReadsIt(w).userTurns).toEqual(replayable(w).userTurns);
    });

    it('a copy of every record kind (its events too) is skipped whole; an event-only user message right after it is kept', () => {
      const w = read([meta(), ...turn1(), ...turn1(), rec('event_msg', { type: 'user_message', message: 'count them', images: [] }), call('c2'), output('c2', '1'), answer('One.')]);
      expect(w.userTurns).toHaveLength(2);
      expect(JSON.stringify(w.userTurns[1]!.input)).toContain('count them');
      expect(w.recorded.model_calls).toBe(2);
      expect(w.skipped).toContainEqual({ line: 9, what: 'lines 9–14 (5 items, 1 other records), a copy of lines 2–7', why: expect.stringMatching(/^repeat earlier history/) });
    });

    it('a copy of part of the history (from a later turn on) is found too', () => {
      const turn2 = [user('and the dirs?'), reasoning('enc-2'), call('c2'), output('c2', 'd/'), answer('One dir.')];
      const w = read([meta(), ...turn1(), ...turn2, ...turn2, user('thanks'), answer('You are welcome.')]);
      expect(w.userTurns.map((u) => u.modelTurns.length)).toEqual([2, 2, 1]);
      expect(w.skipped).toContainEqual(expect.objectContaining({ line: 14, what: 'lines 14–18 (5 items), a copy of lines 9–13' }));
    });

    it('without proof (no call, no encrypted reasoning) a repeat is the user saying the same again, read as usual', () => {
      const w = read([meta(), user('hi'), answer('Hello.'), user('hi'), answer('Hello.')]);
      expect(w.userTurns).toHaveLength(2);
      const v = read([meta(), user('hi'), answer('Hello.'), user('hi'), answer('Hello again.')]);
      expect(v.userTurns.map((u) => u.modelTurns[0]!.output)).toEqual([[{ type: 'message', text: 'Hello.' }], [{ type: 'message', text: 'Hello again.' }]]);
      expect([...(w.skipped ?? []), ...(v.skipped ?? [])].filter((s) => s.why.includes('resumed'))).toEqual([]);
    });

    it('a long run without proof is read as usual; a long proven copy is skipped whole, as it comes', () => {
      const chat = Array.from({ length: 5000 }, (_, i) => [user(`q${i}`), answer(`a${i}`)]).flat();
      const w = read([meta(), ...chat, ...chat]);
      expect(w.userTurns).toHaveLength(chat.length);
      // Past what a run may hold, were its items held (a proven copy holds none).
      const calls = Array.from({ length: MAX_HELD_RECORDS / 2 + 10 }, (_, i) => [call(`c${i}`), output(`c${i}`)]).flat();
      const v = read([meta(), user('x'), ...calls, answer('done'), user('x'), ...calls, answer('done'), user('y'), answer('ok')]);
      expect(v.userTurns).toHaveLength(2);
      const n = calls.length + 2;
      expect(v.skipped).toContainEqual(expect.objectContaining({ what: `lines ${n + 2}–${2 * n + 1} (${n} items), a copy of lines 2–${n + 1}` }));
    });

    it('a new turn that asks again what the history asked after the part copied is the session\'s own, not the copy\'s', () => {
      const turn2 = [user('and the dirs?'), reasoning('enc-2'), call('c2'), output('c2', 'd/'), answer('One dir.')];
      // Turn 2 rolled back, the session resumed with turn 1 copied, and the user asks turn 2's question again.
      const w = read([meta(), ...turn1(), ...turn2, rec('event_msg', { type: 'thread_rolled_back', num_turns: 1 }), meta(), ...turn1(), rec('event_msg', { type: 'user_message', message: 'and the dirs?', images: [] }), user('and the dirs?'), reasoning('enc-3'), call('c3'), output('c3', 'd/'), answer('Still one.')]);
      expect(w.userTurns).toHaveLength(3);
      expect(JSON.stringify(w.userTurns[2]!.input)).toContain('and the dirs?');
      expect(w.userTurns[2]!.modelTurns.flatMap((t) => t.output.map((o) => (o.type === 'function_call' ? o.call_id : o.text)))).toEqual(['c3', 'Still one.']);
    });

    it('records with an `ordinal` after their timestamp, and a compaction inside the copy, are copies too', () => {
      const withOrdinal = (line: string, n: number) => line.replace(/^(\{"timestamp":"[^"]*",)/, `$1"ordinal":${n},`);
      let n = 0;
      const lines = [meta(), ...turn1(), rec('compacted', { message: 'summary of the work' }), user('next'), call('c2'), output('c2'), answer('ok')];
      const copy = lines.slice(1);
      const w = read([...lines, meta(), ...copy, user('new question'), answer('new answer')].map((l) => withOrdinal(l, n++)));
      expect(w.userTurns.map((u) => u.replace_history ?? false)).toEqual([false, true, false]);
      expect(w.skipped).toContainEqual(expect.objectContaining({ what: 'lines 15–26 (10 items, 2 other records), a copy of lines 2–13' }));
    });

    it('one placeholder for every sealed reasoning (a redacted rollout) proves nothing: nothing is skipped', () => {
      const redacted = rec('response_item', { type: 'reasoning', summary: [], encrypted_content: '[redacted]'.repeat(8) });
      const w = read([meta(), user('run the tests'), redacted, call('c1'), output('c1'), answer('Passed.'), user('run the tests'), redacted, call('c2'), output('c2'), answer('Passed again.')]);
      expect(w.userTurns).toHaveLength(2);
      expect((w.skipped ?? []).filter((x) => x.why.includes('resumed'))).toEqual([]);
    });

    it('a hand-made file reusing a call_id is refused as before; a second session in the file has history of its own', () => {
      expect(refusal([meta(), user('a'), call('call_0'), output('call_0'), answer('1'), user('b'), call('call_0'), output('call_0'), answer('2')])).toBe(
        'x.jsonl:7: call_id call_0 is used twice (first by the call at line 3)',
      );
      // A fork (another session id) begins with the history it forked: its own first records, read, not skipped.
      const fork = rec('session_meta', { id: 's2', source: 'cli', base_instructions: { text: 'You are Codex.' } });
      const w = read([meta(), ...turn1(), fork, user('list the files'), answer('One file, as before.'), user('delete it'), answer('Deleted.')]);
      expect(w.userTurns).toHaveLength(3);
      expect((w.skipped ?? []).filter((x) => x.why.includes('resumed'))).toEqual([]);
    });

    it('its notes fold past a hundred of them into one counted note', () => {
      const copies = Array.from({ length: 300 }, () => [meta(), user('list the files'), reasoning('enc-1'), call('c1'), output('c1', 'a.txt'), answer('One file.')]).flat();
      const w = read([meta(), ...turn1(), ...copies]);
      const notes = (w.skipped ?? []).filter((x) => x.why.includes('resumed'));
      expect(notes.length).toBeLessThanOrEqual(101);
      expect(notes.length + notes.reduce((t, x) => t + (x.more ?? 0), 0)).toBe(300);
    });

    it('a copy the file ends in is skipped; one that repeats earlier records out of order is not a copy', () => {
      const w = read([meta(), ...turn1(), user('list the files'), reasoning('enc-1'), call('c1')]);
      expect(w.userTurns).toHaveLength(1);
      expect(w.skipped).toContainEqual(expect.objectContaining({ line: 9, what: 'lines 9–11 (3 items), a copy of lines 2–4' }));
      // A call written twice on its own: a copy of history starts at an input message, so this is its call_id used twice.
      expect(refusal([meta(), ...turn1(), call('c1'), user('thanks'), answer('You are welcome.')])).toBe('x.jsonl:9: call_id c1 is used twice (first by the call at line 4)');
      // Reasoning with a short placeholder for its sealed content proves nothing: read as usual.
      const placeholder = rec('response_item', { type: 'reasoning', summary: [], encrypted_content: 'e' });
      const p = read([meta(), user('x'), placeholder, usage(10, 6), placeholder, call('c1'), usage(20, 6), output('c1'), answer('done'), usage(30, 1)]);
      expect(p.calls!.map((c) => c.output_tokens)).toEqual([12, 1]);
    });
  });

  it('a call_id named __proto__ is an own entry of toolOutputs, answered with its output', () => {
    const w = read([meta(), user('x'), call('__proto__'), output('__proto__', 'the answer'), answer('done')]);
    expect(Object.hasOwn(w.toolOutputs, '__proto__')).toBe(true);
    expect(w.toolOutputs['__proto__']?.output).toBe('the answer');
    expect(Object.getPrototypeOf(w.toolOutputs)).toBe(Object.prototype);
    expect(asServerReadsIt(w).toolOutputs['__proto__']?.output).toBe('the answer');
  });

  it('a call whose name no tool may have (multi_tool_use.parallel) is replayed as recorded and declares no tool; an empty or 257-character name, or an empty call_id, is refused at its line', () => {
    for (const name of ['multi_tool_use.parallel', 'bad name!', 'n'.repeat(65), 'caf\u00e9', 'n'.repeat(256)]) {
      const w = read([meta(), user('x'), call('c1', name), output('c1', `unsupported call: ${name}`), call('c2'), output('c2'), answer('done')]);
      expect(w.userTurns[0]!.modelTurns[0]!.output).toEqual([{ type: 'function_call', name, arguments: '{"command":["ls"]}', call_id: 'c1' }]);
      expect(w.tools.map((t) => t.name)).toEqual(['shell']);
      expect(w.skipped).toContainEqual({ line: 3, what: `the tool name ${JSON.stringify(name)}`, why: expect.stringMatching(/^no tool may have it/) });
      expect(asServerReadsIt(w).tools.map((t) => t.name)).toEqual(['shell']);
    }
    expect(refusal([meta(), user('x'), call('c1', ''), output('c1'), answer('done')])).toBe('x.jsonl:3: a call whose name is empty: names are 1 to 256 characters');
    expect(refusal([meta(), user('x'), call('c1', 'n'.repeat(257)), output('c1'), answer('done')])).toBe('x.jsonl:3: a call whose name is 257 characters long: names are 1 to 256 characters');
    // Characters are code points, as the neutral format's schema counts them: 200 emoji (400 UTF-16 units) read.
    expect(read([meta(), user('x'), call('c1', '🎉'.repeat(200)), output('c1'), answer('done')]).userTurns).toHaveLength(1);
    expect(refusal([meta(), user('x'), call('c1', '🎉'.repeat(257)), output('c1'), answer('done')])).toBe('x.jsonl:3: a call whose name is 257 characters long: names are 1 to 256 characters');
    expect(refusal([meta(), user('x'), call(''), output(''), answer('done')])).toBe('x.jsonl:3: a call with an empty call_id');
    // The longest name the API takes, and the characters it takes, still read and declare their tool.
    const ok = read([meta(), user('x'), call('c1', `mcp__a-b__${'n'.repeat(54)}`), output('c1'), answer('done')]);
    expect(asServerReadsIt(ok).tools.map((t) => t.name)).toEqual([`mcp__a-b__${'n'.repeat(54)}`]);
  });

  it('a token count that is negative, not whole or past 10^9 is refused at its line', () => {
    for (const [i, o] of [[-5, 10], [10, 2.5], [1e300, 1], [1e15, 1], [1, 1_000_000_001]]) {
      expect(refusal([meta(), user('x'), answer('done'), usage(i!, o!)])).toMatch(/^x\.jsonl:4: token_count with input_tokens .*: token counts are whole numbers from 0 to 1000000000 \(10\^9/);
    }
    // Calls with nothing visible give their output tokens to the next one: the sum is bounded too, at its line.
    const reasoning = rec('response_item', { type: 'reasoning', summary: [], encrypted_content: 'e' });
    expect(refusal([meta(), user('x'), reasoning, usage(10, 6e8), reasoning, usage(20, 6e8), answer('done'), usage(30, 1)])).toMatch(
      /^x\.jsonl:7: this model call decodes 1200000001 output tokens from 30 input tokens .*: token figures are at most 1000000000 \(10\^9\)$/,
    );
    // 10^15 a call read: nine such calls summed past 2^53 (a long-lived run's usage adds every call's), inexact.
    expect(read([meta(), user('x'), answer('done'), usage(1e9, 1e9)]).calls!.map((c) => [c.input_tokens, c.output_tokens])).toEqual([[1e9, 1e9]]);
  });

  it('a neutral workload with a token figure past 10^9 is refused (docs/workload.schema.json)', () => {
    const w = replayable(read([meta(), user('x'), answer('done'), usage(100, 5)]));
    const patched = (patch: (j: Record<string, any>) => void) => {
      const j = JSON.parse(JSON.stringify({ llr_workload: 1, ...w })) as Record<string, any>;
      patch(j);
      return () => parseNeutral(JSON.stringify(j), 'w.json', 'test');
    };
    const neutral = (patch: (j: Record<string, any>) => void) => refusalOf(patched(patch));
    expect(neutral((j) => (j.userTurns[0].modelTurns[0].output_tokens = 1e15))).toMatch(/^w\.json: not an llr workload .*\/userTurns\/0\/modelTurns\/0\/output_tokens must be <= 1000000000/);
    expect(neutral((j) => (j.calls[0].input_tokens = 1e300))).toMatch(/\/calls\/0\/input_tokens must be <= 1000000000/);
    expect(neutral((j) => (j.recorded.output_tokens = [1e16]))).toMatch(/\/recorded\/output_tokens\/0 must be <= 1000000000/);
    expect(patched((j) => (j.userTurns[0].modelTurns[0].output_tokens = 1e9))).not.toThrow();
  });

  it('a model call that shows only text before the user turn ends joins the next call, which the server replays', () => {
    const w = read([meta(), user('x'), answer('Let me look.'), usage(100, 5), call('c1'), usage(120, 20), output('c1'), answer('Done.'), usage(140, 4)]);
    expect(w.userTurns[0]!.modelTurns.map((t) => t.output.map((o) => o.type))).toEqual([['message', 'function_call'], ['message']]);
    expect(w.userTurns[0]!.modelTurns[0]!.output_tokens).toBe(25);
    expect(w.calls!.map((c) => [c.input_tokens, c.output_tokens, c.line])).toEqual([[100, 25, 3], [140, 4, 8]]);
    // Two texts with a token count between them at the end of a turn: one call, its texts in order.
    const two = read([meta(), user('x'), answer('one'), usage(10, 2), answer('two'), usage(12, 2)]);
    expect(two.userTurns[0]!.modelTurns).toEqual([{ output: [{ type: 'message', text: 'one' }, { type: 'message', text: 'two' }], output_tokens: 4 }]);
    expect(() => asServerReadsIt(w)).not.toThrow();
    expect(() => asServerReadsIt(two)).not.toThrow();
  });

  it("a compaction's replacement history keeps no answer to a call it does not hold", () => {
    const history = [
      { type: 'message', role: 'user', content: 'first' },
      { type: 'function_call_output', call_id: 'gone', output: 'orphan' },
      { type: 'function_call', call_id: 'kept', name: 'shell', arguments: '{}' },
      { type: 'function_call_output', call_id: 'kept', output: 'answered' },
    ];
    const w = read([meta(), user('first'), answer('one'), rec('compacted', { message: 's', replacement_history: history }), user('second'), answer('two')]);
    const input = w.userTurns[1]!.input;
    expect(input.filter((i) => i.type === 'function_call_output')).toEqual([{ type: 'function_call_output', call_id: 'kept', output: 'answered' }]);
    expect(() => asServerReadsIt(w)).not.toThrow();
  });

  it('a message whose content nests past what the server takes is refused at its line; a flat one with an image reads', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = { a: deep };
    const part = { type: 'input_text', text: 'hi', extra: deep };
    const line = rec('response_item', { type: 'message', role: 'user', content: [part] });
    expect(refusal([meta(), line, answer('done')])).toBe('x.jsonl:2: user message content nests deeper than 32 levels (no Codex message part does; the server would refuse it)');
    const image = { type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=' };
    const w = read([meta(), rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'see' }, image] }), answer('done')]);
    expect(asServerReadsIt(w).userTurns[0]!.input).toEqual([{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'see' }, image] }]);
  });

  it('a tool_search_call the client ran (execution "client") is a client tool call `tool_search`, not a hosted one', () => {
    const search = (execution: string) => rec('response_item', { type: 'tool_search_call', call_id: 'ts1', status: 'completed', execution, arguments: { query: 'calendar', limit: 1 } });
    const found = (execution: string) => rec('response_item', { type: 'tool_search_output', call_id: 'ts1', status: 'completed', execution, tools: [{ type: 'function', name: 'cal_create' }] });
    const w = read([meta(), user('x'), search('client'), usage(100, 10), found('client'), call('c1'), usage(150, 12), output('c1'), answer('done'), usage(200, 5)]);
    expect(w.stats).toMatchObject({ hosted_calls: 0, function_calls: 2 });
    expect(w.userTurns[0]!.modelTurns.map((t) => t.output.map((o) => (o.type === 'function_call' ? o.name : o.type)))).toEqual([['tool_search'], ['shell'], ['message']]);
    expect(w.userTurns[0]!.modelTurns[0]!.output[0]).toEqual({ type: 'function_call', name: 'tool_search', arguments: '{"query":"calendar","limit":1}', call_id: 'ts1' });
    expect(w.toolOutputs['ts1']?.output).toBe('[{"type":"function","name":"cal_create"}]');
    expect(w.calls!.map((c) => [c.input_tokens, c.output_tokens])).toEqual([[100, 10], [150, 12], [200, 5]]);
    expect(w.skipped).toEqual([]);
    expect(asServerReadsIt(w).tools.map((t) => t.name)).toEqual(['tool_search', 'shell']);
    // Run by the API (execution "server"): hosted, counted, its result kept in the context without a note.
    const hosted = read([meta(), user('x'), search('server'), found('server'), call('c1'), usage(150, 12), output('c1'), answer('done'), usage(200, 5)]);
    expect(hosted.stats).toMatchObject({ hosted_calls: 1, function_calls: 1 });
    expect(hosted.userTurns[0]!.modelTurns.map((t) => t.output.map((o) => o.type))).toEqual([['function_call'], ['message']]);
    expect(hosted.skipped).toEqual([]);
    // In a compaction's replacement history: the call and its answer, as elsewhere.
    const history = [{ type: 'message', role: 'user', content: 'x' }, JSON.parse(search('client')).payload, JSON.parse(found('client')).payload];
    const compacted = read([meta(), user('x'), answer('one'), rec('compacted', { message: 's', replacement_history: history }), user('y'), answer('two')]);
    expect(compacted.userTurns[1]!.input.slice(1, 3)).toEqual([
      { type: 'function_call', call_id: 'ts1', name: 'tool_search', arguments: '{"query":"calendar","limit":1}' },
      { type: 'function_call_output', call_id: 'ts1', output: '[{"type":"function","name":"cal_create"}]' },
    ]);
    expect(() => asServerReadsIt(compacted)).not.toThrow();
  });

  it('an output of a kind not known (mcp_tool_call_output) answering a client call is its output, noted (it read as truncated)', () => {
    const mcp = rec('response_item', { type: 'mcp_tool_call_output', call_id: 'c1', output: { content: [{ type: 'text', text: 'hi' }] } });
    const noted = { line: 5, what: 'a mcp_tool_call_output item', why: expect.stringMatching(/^answers shell call c1 \(line 3\): replayed as its function_call_output/) };
    const answer1 = '{"content":[{"type":"text","text":"hi"}]}';
    // At the end of the file it said "shell call c1 has no output: the file ends before it (truncated)".
    const atEnd = read([meta(), user('x'), call('c1'), usage(100, 10), mcp, answer('done')]);
    expect(atEnd.skipped).toContainEqual(noted);
    expect(atEnd.toolOutputs['c1']?.output).toBe(answer1);
    expect(() => asServerReadsIt(atEnd)).not.toThrow();
    // Before the model's next call (the replay had no output for it: the bench's server process refused the workload).
    const mid = read([meta(), user('x'), call('c1'), usage(100, 10), mcp, call('c2'), usage(120, 10), output('c2'), answer('done')]);
    expect(mid.toolOutputs['c1']?.output).toBe(answer1);
    expect(mid.skipped).toContainEqual(noted);
    expect(() => asServerReadsIt(mid)).not.toThrow();
    // A string output is the text itself; an item without `output` is its other fields as JSON.
    const text = read([meta(), user('x'), call('c1'), rec('response_item', { type: 'mcp_tool_call_output', call_id: 'c1', output: 'plain' }), answer('ok')]);
    expect(text.toolOutputs['c1']?.output).toBe('plain');
    const result = read([meta(), user('x'), call('c1'), rec('response_item', { type: 'mcp_tool_call_output', call_id: 'c1', result: { Ok: { content: [] } } }), answer('ok')]);
    expect(result.toolOutputs['c1']?.output).toBe('{"result":{"Ok":{"content":[]}}}');
    // One answering no call of the client's is skipped, as before.
    const other = rec('response_item', { type: 'mcp_tool_call_output', call_id: 'cu1', output: {} });
    expect(read([meta(), user('x'), call('c1'), output('c1'), other, answer('done')]).skipped).toContainEqual({ line: 5, what: 'a mcp_tool_call_output item', why: 'not part of what the model is sent or says (not replayed)' });
    // A built-in client tool's output answering no call is an output for a call the conversation does not hold.
    const stray = rec('response_item', { type: 'computer_call_output', call_id: 'cu1', output: { type: 'computer_screenshot', image_url: 'data:,' } });
    expect(read([meta(), user('x'), call('c1'), output('c1'), stray, answer('done')]).skipped).toContainEqual({ line: 5, what: 'an output for call_id cu1', why: expect.stringMatching(/^answers no call recorded before it/) });
  });
});
