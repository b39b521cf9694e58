/**
 * Workload files built to hurt the readers (outside attack, 2026-12-02): very
 * many records, very many calls in one user turn, very many skipped lines,
 * content parts of the wrong shape. Each either reads (and `llr workload
 * inspect` reports it in bounded time) or is refused with a WorkloadError
 * naming its line; never a TypeError or a RangeError from deep inside.
 */
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { fitLimits } from '../../src/bench/runner.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { missingToolOutput, pendingCallsOf, validateItems } from '../../src/pipeline/validate.js';
import type { Limits } from '../../src/engine/services.js';
import { fitToFootprint } from '../../src/workload/fit.js';
import { parseNeutral } from '../../src/workload/format.js';
import { workloadCommand } from '../../src/workload/inspect.js';
import { parseWorkload, readWorkload, readWorkloadText } from '../../src/workload/load.js';
import { replayFootprint } from '../../src/workload/replayable.js';
import { refusalOf } from '../helpers/workload.js';

const TS = '2026-10-05T17:45:00.000Z';
const rec = (type: string, payload: Record<string, unknown>) => JSON.stringify({ timestamp: TS, type, payload });
const meta = () => rec('session_meta', { id: 's1', source: 'cli', base_instructions: { text: 'You are Codex.' } });
const user = (text: string) => rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
const answer = (text: string) => rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
const call = (call_id: string) => rec('response_item', { type: 'function_call', name: 'shell', arguments: '{}', call_id });
const output = (call_id: string) => rec('response_item', { type: 'function_call_output', call_id, output: 'ok' });
const usage = (input: number, out: number) => rec('event_msg', { type: 'token_count', info: { last_token_usage: { input_tokens: input, output_tokens: out } } });
const read = (lines: string[]) => parseWorkload(lines.join('\n') + '\n', 'x.jsonl', 'test');

const dir = mkdtempSync(join(tmpdir(), 'llr-workload-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `llr workload inspect FILE`'s output for a rollout of `lines`, in process. */
async function inspect(lines: string[]): Promise<string> {
  return inspectText(lines.join('\n') + '\n', 'jsonl');
}

/** `llr workload inspect FILE`'s output for a file holding `text`, in process. */
async function inspectText(text: string, ext: 'jsonl' | 'json'): Promise<string> {
  const file = join(dir, `f${Math.random().toString(36).slice(2)}.${ext}`);
  writeFileSync(file, text);
  let out = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  try {
    await workloadCommand(['inspect', file]);
  } finally {
    spy.mockRestore();
  }
  return out;
}

describe('hostile workloads', () => {
  it("inspect keeps a space between columns when a figure fills its column (10^9 tokens read '31000000000 rec')", async () => {
    const out = await inspect([meta(), user('x'), answer('done'), usage(1e9, 1e9)]);
    const row = out.split('\n').find((l) => /^ {2}1 /.test(l));
    expect(row).toBeDefined();
    expect(row!.split(/\s+/).filter(Boolean)).toEqual(['1', '3', '1000000000', 'rec', '1000000000', 'rec', 'message', '4', 'chars']);
  });

  it('inspect lists a user turn\'s input kinds one by one up to 12 runs, then counts the rest (70,001 alternating roles made a 595,039-character line; atk86 I1)', async () => {
    const input = Array.from({ length: 40_001 }, (_, i) => ({ type: 'message', role: i % 2 === 0 ? 'user' : 'assistant', content: 'x' }));
    const out = await inspectText(JSON.stringify({ llr_workload: 1, userTurns: [{ input, modelTurns: [{ output: [{ type: 'message', text: 'done' }] }] }] }), 'json');
    const line = out.split('\n').find((l) => l.startsWith('user turn 1:'))!;
    expect(line).toContain('input 40001 item(s) (user, assistant, user, assistant, user, assistant, user, assistant, user, assistant, user, assistant, then user ×19995, assistant ×19994 in 39989 more runs)');
    expect(line.length).toBeLessThan(300);
  });

  it('one user turn of 150,000 model calls reads (its figures were push(...)ed: a RangeError, exit 1)', async () => {
    const n = 150_000;
    const lines = [meta(), user('x')];
    for (let i = 0; i < n; i++) lines.push(call(`c${i}`), usage(100 + i, 5), output(`c${i}`));
    lines.push(answer('done'), usage(100 + n, 3));
    const w = read(lines);
    expect(w.userTurns).toHaveLength(1);
    expect(w.userTurns[0]!.modelTurns).toHaveLength(n + 1);
    expect(w.calls).toHaveLength(n + 1);
    // The bench's server flags for it (fitLimits took Math.max(...) of every model call).
    expect(fitLimits(w)).toEqual([]);
    // And inspect (Math.max(...) of every tool duration).
    expect(await inspect(lines)).toMatch(/^tool durations: median 0 ms, max 0 ms$/m);
  }, 60_000);

  it('inspect groups 40,000 skipped lines in linear time (it copied the list per line: quadratic, no end)', async () => {
    const lines = [meta(), user('x')];
    for (let i = 0; i < 40_000; i++) lines.push(rec('zz_unknown', {}));
    lines.push(answer('done'));
    const t = performance.now();
    const out = await inspect(lines);
    expect(out).toMatch(/^ {2}lines 3, 4, 5, 6, 7, 8, … \(×40000\): a "zz_unknown" record — a record type this reader does not know$/m);
    // Linear: well under a second here; the quadratic copy took 20 s here, 140 s for 100,000 lines.
    expect(performance.now() - t).toBeLessThan(5_000);
  }, 60_000);

  it('a skipped note that repeats is kept six times and counted after (19 million unknown records held 4.2 GB while read, and converted to a neutral file past what the reader takes)', () => {
    const lines = [meta(), user('x')];
    for (let i = 0; i < 1_000; i++) lines.push(rec('zz_unknown', {}));
    lines.push(answer('done'));
    const w = read(lines);
    expect(w.skipped).toHaveLength(6);
    expect(w.skipped!.map((s) => s.line)).toEqual([3, 4, 5, 6, 7, 8]);
    expect(w.skipped![5]).toEqual({ line: 8, what: 'a "zz_unknown" record', why: 'a record type this reader does not know', more: 994 });
    // The neutral file carries the count, and reads back the same.
    const again = parseNeutral(JSON.stringify({ llr_workload: 1, ...w }), 'n.json', 'test');
    expect(again.skipped).toEqual(w.skipped);
  });

  it('notes of one reason are kept for their first 100 lines whatever they name, and counted after (a million records each of its own unknown type kept a million notes: a 32 MB rollout converted to 94 MB)', () => {
    const lines = [meta(), user('x')];
    for (let i = 0; i < 1_000; i++) lines.push(rec(`zz_unknown_${i}`, {}));
    lines.push(answer('done'));
    const w = read(lines);
    expect(w.skipped).toHaveLength(101);
    expect(w.skipped![99]).toEqual({ line: 102, what: 'a "zz_unknown_99" record', why: 'a record type this reader does not know' });
    expect(w.skipped![100]).toEqual({ line: 103, what: 'notes of this reason past its first 100, each naming its own record', why: 'a record type this reader does not know', more: 899 });
    expect(w.skipped!.reduce((n, s) => n + 1 + (s.more ?? 0), 0)).toBe(1_000);
  });
});

const refusal = refusalOf;

describe('hostile files', () => {
  it('a file past 512 MiB is refused as such, before it is read (it threw "Cannot create a string longer than 0x1fffffe8 characters", exit 1)', () => {
    const file = join(dir, 'sparse.jsonl');
    writeFileSync(file, '');
    truncateSync(file, 600 * 2 ** 20); // sparse: no disk, no memory
    expect(refusal(() => readWorkload(file))).toMatch(/sparse\.jsonl: the file is larger than 536870888 bytes \(512 MiB\), the most a workload may have/);
  });

  it('a device or pipe without end is read up to the cap, then refused (readFileSync of /dev/zero grew without bound)', () => {
    expect(refusal(() => readWorkloadText('/dev/zero', 2 ** 20))).toBe('/dev/zero: the file is larger than 1048576 bytes (1 MiB), the most a workload may have: the reader holds it as one string');
    expect(refusal(() => readWorkload(dir))).toMatch(/: cannot read the file \(it is a directory\)$/);
    expect(refusal(() => readWorkload(join(dir, 'none.jsonl')))).toMatch(/none\.jsonl: cannot read the file \(ENOENT: no such file or directory/);
  });
});

describe('hostile shapes', () => {
  it('a user message part that is not an object, or of no known type, is refused at its line (it crashed the inference: TypeError, exit 1)', () => {
    const msg = (content: unknown) => rec('response_item', { type: 'message', role: 'user', content });
    expect(refusal(() => read([meta(), msg([5, null]), answer('d')]))).toBe(
      "x.jsonl:2: user message content: Invalid 'message.content[0]': expected a content part object, got number. (the server would refuse it)",
    );
    expect(refusal(() => read([meta(), msg([{ type: 'input_text', text: 'a' }, null]), answer('d')]))).toMatch(/^x\.jsonl:2: user message content: Invalid 'message\.content\[1\]': expected a content part object, got null/);
    expect(refusal(() => read([meta(), msg([{ type: 'input_text', text: 5 }]), answer('d')]))).toMatch(/^x\.jsonl:2: user message content: Invalid type for 'message\.content\[0\]\.text': expected a string, but got 5/);
    expect(refusal(() => read([meta(), msg([{ type: 'banana' }]), answer('d')]))).toMatch(/^x\.jsonl:2: .*'banana' is not a supported content type/);
    // What Codex writes still reads: text and image parts, an empty list.
    const w = read([meta(), msg([{ type: 'input_text', text: 'a' }, { type: 'input_image', image_url: 'data:image/png;base64,AA==' }]), msg([]), answer('d')]);
    expect(w.userTurns[0]!.input).toHaveLength(2);
  });

  it('a call recorded with arguments that are not JSON is replayed as recorded (the server takes them back, as the API does; they were rewritten as a JSON string: atk65 F2)', () => {
    const bad = rec('response_item', { type: 'function_call', name: 'shell', arguments: '{"command": ["ls"]', call_id: 'c1' });
    const w = read([meta(), user('x'), bad, output('c1'), answer('done')]);
    const fc = w.userTurns[0]!.modelTurns[0]!.output[0]!;
    expect(fc).toEqual({ type: 'function_call', name: 'shell', arguments: '{"command": ["ls"]', call_id: 'c1' });
    expect((w.skipped ?? []).filter((s) => s.what === 'shell call c1')).toEqual([]);
    // What an http design sends back on the next call: the server takes it.
    expect(() => validateItems([{ ...fc }, { type: 'function_call_output', call_id: 'c1', output: 'ok' }] as never, { callIds: new Set() }, new RunMetrics())).not.toThrow();
  });

  it("a rollout's call arguments or tool output past the API's bounds are refused at their line (they were named only in the converted workload: atk66 F5)", () => {
    const long = rec('response_item', { type: 'function_call', name: 'shell', arguments: 'a'.repeat(1_048_577), call_id: 'c1' });
    expect(refusal(() => read([meta(), user('x'), long, output('c1'), answer('done')]))).toMatch(/^x\.jsonl:3: shell call c1: its arguments are 1048577 characters, past the 1048576/);
    const call = rec('response_item', { type: 'function_call', name: 'shell', arguments: '{}', call_id: 'c1' });
    const big = rec('response_item', { type: 'function_call_output', call_id: 'c1', output: 'o'.repeat(10_485_761) });
    expect(refusal(() => read([meta(), user('x'), call, big, answer('done')]))).toMatch(/^x\.jsonl:4: the output for call_id c1 is 10485761 characters, past the 10485760/);
  });

  it('a user message after a call was answered, before the model called again (steering), ends the user turn there, noted (the answered call and its output were dropped silently)', () => {
    const w = read([meta(), user('go'), call('c1'), output('c1'), user('also check X'), call('c2'), output('c2'), answer('done')]);
    expect(w.userTurns).toHaveLength(2);
    expect(w.skipped).toContainEqual({
      line: 3,
      what: '1 call(s) ending user turn 1',
      why: expect.stringMatching(/^1 answered, but a message \(the user's, or a developer or system message\) came before the model's next call: the replay ends the user turn there/),
    });
    // Never answered (the user interrupted): noted too.
    const cut = read([meta(), user('go'), call('c1'), user('stop'), answer('ok')]);
    expect(cut.skipped).toContainEqual({ line: 3, what: '1 call(s) ending user turn 1', why: expect.stringMatching(/^left without output: a user message came first \(interrupted\); the replay ends the user turn/) });
  });

  it('an abort followed by a compaction: its note says the next user turn starts a new conversation without the calls (not that it answers them)', () => {
    const aborted = rec('event_msg', { type: 'turn_aborted', turn_id: 't1', reason: 'interrupted' });
    const w = read([meta(), user('go'), call('c1'), aborted, rec('compacted', { message: 'summary' }), user('next'), answer('ok')]);
    expect(w.userTurns[1]!.replace_history).toBe(true);
    expect(w.userTurns[1]!.input.some((i) => i.type === 'function_call_output')).toBe(false);
    expect(w.skipped).toContainEqual({ line: 4, what: 'turn_aborted', why: 'the user turn was aborted (interrupted) with 1 call(s) left without output: the next user turn starts a new conversation (compaction) without them' });
  });

  it('a turn the user aborted after its last call was answered (turn_aborted, then the next user turn) is noted as aborted, not as steering', () => {
    const aborted = rec('event_msg', { type: 'turn_aborted', turn_id: 't1', reason: 'interrupted' });
    const w = read([meta(), user('go'), call('c1'), output('c1'), aborted, user('next'), answer('ok')]);
    expect(w.userTurns).toHaveLength(2);
    expect(w.skipped).toContainEqual({
      line: 3,
      what: '1 call(s) ending user turn 1',
      why: expect.stringMatching(/^1 answered, but the user turn was aborted \(turn_aborted\) before the model's next call: the replay ends the user turn there/),
    });
    // A turn_aborted before more calls of the same user turn does not make a later steering message an abort.
    const later = read([meta(), user('go'), aborted, user('more'), call('c1'), output('c1'), user('also X'), answer('ok')]);
    expect(later.skipped).toContainEqual({ line: 5, what: '1 call(s) ending user turn 1', why: expect.stringMatching(/^1 answered, but a message \(the user's, or a developer or system message\) came before the model's next call/) });
  });

  it("a rollout whose turn input passes the server's default items and content parts (50,001 parts) is read, and its footprint raises --max-context-items (atk84 F2)", () => {
    // Refused by the reader with the default, it could be neither read nor served whatever flag was given, though the
    // server takes it with --max-context-items raised.
    const parts = Array.from({ length: 50_001 }, () => ({ type: 'input_text', text: 'a' }));
    const w = read([meta(), rec('response_item', { type: 'message', role: 'user', content: parts }), answer('ok')]);
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, replayFootprint(w));
    expect(limits.maxContextItems).toBeGreaterThan(50_001);
  });

  it("a compaction's replacement history's output of a call it does not hold is dropped under a note that says so (it said reasoning, hosted calls or unknown items)", () => {
    const replacement = [
      { type: 'message', role: 'user', content: 'x' },
      { type: 'function_call_output', call_id: 'gone', output: 'o' },
    ];
    const w = read([meta(), user('x'), answer('d'), rec('compacted', { message: 's', replacement_history: replacement }), user('y'), answer('e')]);
    expect(w.userTurns[1]!.input.some((i) => (i as { call_id?: string }).call_id === 'gone')).toBe(false);
    expect(w.skipped).toContainEqual({ line: 4, what: '1 item(s) of the replacement history', why: expect.stringContaining('outputs of calls the history does not hold') });
  });

  it('a call a compaction\'s replacement history leaves without output is answered "aborted" after it (ws and http were refused: missing_tool_output)', () => {
    const replacement = [
      { type: 'message', role: 'user', content: 'x' },
      { type: 'function_call', name: 'shell', arguments: '{}', call_id: 'c1' },
    ];
    const w = read([meta(), user('x'), call('c1'), output('c1'), answer('d'), rec('compacted', { message: 's', replacement_history: replacement }), user('y'), answer('e')]);
    const input = w.userTurns[1]!.input;
    expect(w.userTurns[1]!.replace_history).toBe(true);
    expect(input.slice(0, 3)).toEqual([
      { type: 'message', role: 'user', content: 'x' },
      { type: 'function_call', name: 'shell', arguments: '{}', call_id: 'c1' },
      { type: 'function_call_output', call_id: 'c1', output: 'aborted' },
    ]);
    expect(missingToolOutput(pendingCallsOf(input))).toBeNull();
    expect(w.skipped).toContainEqual({ line: 6, what: '1 call(s) of the replacement history', why: 'without an output in it: answered "aborted" right after, as Codex does' });
  });

  it('a neutral file whose input or tools the server refuses is refused with its JSON pointer, not mid-bench with the request\'s param', () => {
    const turn = (input: unknown[], output: unknown[] = [{ type: 'message', text: 'd' }]) => ({ input, modelTurns: [{ output }] });
    const neutral = (o: Record<string, unknown>) => () => parseNeutral(JSON.stringify({ llr_workload: 1, ...o }), 'n.json', 'test');
    const hi = { type: 'message', role: 'user', content: 'hi' };
    expect(refusal(neutral({ userTurns: [turn([{}])] }))).toBe("n.json: /userTurns/0/input/0/type: Missing required parameter: 'input[0].type'. (the server refuses it)");
    expect(refusal(neutral({ userTurns: [turn([hi]), turn([{ type: 'message', role: 'tool', content: 'x' }])] }))).toMatch(/^n\.json: \/userTurns\/1\/input\/0\/role: Invalid value for 'input\[0\]\.role'/);
    expect(refusal(neutral({ userTurns: [turn([{ type: 'message', role: 'user', content: [5] }])] }))).toMatch(/^n\.json: \/userTurns\/0\/input\/0\/content\/0: /);
    expect(refusal(neutral({ userTurns: [turn([{ type: 'function_call_output', call_id: 'zz', output: 'x' }])] }))).toMatch(/^n\.json: \/userTurns\/0\/input\/0\/call_id: No tool call found for function call output with call_id 'zz'/);
    expect(refusal(neutral({ userTurns: [turn([{ type: 'message', role: 'user', content: JSON.parse('['.repeat(70) + ']'.repeat(70)) }])] }))).toMatch(/^n\.json: \/userTurns\/0\/input: The JSON nests deeper than 64 levels/);
    expect(refusal(neutral({ tools: [{ type: 'function', name: 'f', parameters: { type: 'string' } }], userTurns: [turn([hi])] }))).toMatch(/^n\.json: \/tools\/0\/parameters: Invalid schema for function 'f'/);
    expect(refusal(neutral({ tools: [{ type: 'function', name: 'f' }, { type: 'function', name: 'f' }], userTurns: [turn([hi])] }))).toMatch(/^n\.json: \/tools\/1\/name: Duplicate tool name 'f'/);
    const call = { type: 'function_call', name: 'f', arguments: '{oops', call_id: 'c1' };
    // Arguments that are not JSON read (replayed as recorded); past the API's bounds, what the replay sends back does not
    // (atk65 F1): a call's arguments, a model's text, a tool's output.
    const twoTurns = (output: unknown[], toolOutput = 'o') => neutral({ userTurns: [{ input: [hi], modelTurns: [{ output }, { output: [{ type: 'message', text: 'd' }] }] }], toolOutputs: { c1: { output: toolOutput } } });
    expect(twoTurns([call])().userTurns[0]!.modelTurns[0]!.output[0]).toMatchObject({ arguments: '{oops' });
    expect(refusal(twoTurns([{ ...call, arguments: 'a'.repeat(1_048_577) }]))).toMatch(
      /^n\.json: \/userTurns\/0\/modelTurns\/0\/output\/0\/arguments: Invalid 'arguments': string too long\. Expected a string with maximum length 1048576, but got a string with length 1048577 instead\. \(the server refuses it\)$/,
    );
    expect(refusal(twoTurns([{ type: 'message', text: 'm'.repeat(10_485_761) }, call]))).toMatch(/^n\.json: \/userTurns\/0\/modelTurns\/0\/output\/0\/text: .*maximum length 10485760/);
    expect(refusal(twoTurns([call], 'o'.repeat(10_485_761)))).toMatch(/^n\.json: \/toolOutputs\/c1\/output: .*maximum length 10485760/);
    // A JSON pointer's escapes for a call_id with `/` or `~` (atk66 F1).
    const odd = { ...call, call_id: 'c/1~x' };
    expect(refusal(neutral({ userTurns: [{ input: [hi], modelTurns: [{ output: [odd] }, { output: [{ type: 'message', text: 'd' }] }] }], toolOutputs: { 'c/1~x': { output: 'o'.repeat(10_485_761) } } }))).toMatch(
      /^n\.json: \/toolOutputs\/c~11~0x\/output: /,
    );
    // More tools than one request may list by default still read: the bench raises --max-tools to fit.
    const many = Array.from({ length: 130 }, (_, i) => ({ type: 'function', name: `t${i}` }));
    expect(neutral({ tools: many, userTurns: [turn([hi])] })().tools).toHaveLength(130);
    // An answer to a call of an earlier user turn (an interrupted one) is known; after a replace_history it is not.
    const interrupted = { input: [hi], modelTurns: [{ output: [{ ...call, arguments: '{}' }] }] };
    const answer = { type: 'function_call_output', call_id: 'c1', output: 'aborted' };
    expect(neutral({ userTurns: [interrupted, turn([answer, hi])] })().userTurns).toHaveLength(2);
    expect(refusal(neutral({ userTurns: [interrupted, { ...turn([answer, hi]), replace_history: true }] }))).toMatch(/^n\.json: \/userTurns\/1\/input\/0\/call_id: No tool call found/);
    // A model call's call_id past the API's 64 characters: the client sends it back, and the server refuses it so.
    const long = { ...call, arguments: '{}', call_id: 'c'.repeat(65) };
    expect(refusal(neutral({ userTurns: [{ input: [hi], modelTurns: [{ output: [long] }, { output: [{ type: 'message', text: 'd' }] }] }], toolOutputs: { [long.call_id]: { output: 'o' } } }))).toMatch(
      /^n\.json: .*\/userTurns\/0\/modelTurns\/0\/output\/0\/call_id.*64/,
    );
  });

  it('a neutral file nested thousands of levels deep (a tool schema, an unknown field): refused naming where, not a RangeError (exit 1, "Maximum call stack size exceeded")', () => {
    const hi = { type: 'message', role: 'user', content: 'hi' };
    const doc = (tools: string, extra = '') =>
      `{"llr_workload":1,"tools":${tools},"userTurns":[{"input":[${JSON.stringify(hi)}],"modelTurns":[{"output":[{"type":"message","text":"d"}]}]}]${extra}}`;
    const schema = (levels: number) => '{"type":"object","properties":{"a":'.repeat(levels) + '{}' + '}}'.repeat(levels);
    const deep = doc(`[{"type":"function","name":"f","parameters":${schema(3000)}}]`);
    expect(refusal(() => parseNeutral(deep, 'n.json', 'test'))).toMatch(/^n\.json: the document nests deeper than 256 levels \(in 'tools'\)/);
    expect(refusal(() => parseNeutral(doc('[]', `,"x":${'['.repeat(5000)}${']'.repeat(5000)}`), 'n.json', 'test'))).toMatch(/^n\.json: the document nests deeper than 256 levels \(in 'x'\)/);
    // Within the document's bound but past the server's 64 levels: refused at the tools, as an input is.
    expect(refusal(() => parseNeutral(doc(`[{"type":"function","name":"f","parameters":${schema(40)}}]`), 'n.json', 'test'))).toMatch(/^n\.json: \/tools: The JSON nests deeper than 64 levels/);
    expect(parseNeutral(doc(`[{"type":"function","name":"f","parameters":${schema(20)}}]`), 'n.json', 'test').tools).toHaveLength(1);
  });

  it("a compacted record whose replacement_history is not a list, or whose message is not text, is refused at its line (it was read as a compaction without a replacement history: the replay went on from another history than the recorded one)", () => {
    const lines = (payload: Record<string, unknown>) => [meta(), user('x'), answer('a'), rec('compacted', payload), user('y'), answer('b')];
    expect(refusal(() => read(lines({ message: 's', replacement_history: 'x' })))).toBe('x.jsonl:4: compacted record whose `replacement_history` is a string, not a list of items');
    expect(refusal(() => read(lines({ message: 's', replacement_history: { a: 1 } })))).toBe('x.jsonl:4: compacted record whose `replacement_history` is an object, not a list of items');
    expect(refusal(() => read(lines({ message: null })))).toBe('x.jsonl:4: compacted record whose `message` is null, not text');
    // As Codex writes them: no replacement history (null or absent), or a list.
    for (const payload of [{ message: 's' }, { message: 's', replacement_history: null }, { message: '', replacement_history: [] }]) expect(read(lines(payload)).userTurns).toHaveLength(2);
  });

  it('a record nested thousands of levels deep (a tool_search call\'s arguments, its tools, an unknown output answering a call, a local_shell action): refused at its line, not a RangeError', () => {
    const deep = '['.repeat(5000) + '1' + ']'.repeat(5000);
    const at = (line: string) => line.replace('"@deep@"', deep);
    const cases = [
      [rec('response_item', { type: 'tool_search_call', call_id: 't1', execution: 'client', arguments: '@deep@' })],
      [rec('response_item', { type: 'tool_search_call', call_id: 't1', execution: 'client', arguments: {} }), rec('response_item', { type: 'tool_search_output', call_id: 't1', execution: 'client', tools: '@deep@' })],
      [call('c1'), rec('response_item', { type: 'mcp_tool_call_output', call_id: 'c1', output: '@deep@' })],
      [call('c1'), rec('response_item', { type: 'mcp_tool_call_output', call_id: 'c1', result: '@deep@' })],
      [rec('response_item', { type: 'local_shell_call', call_id: 'c1', status: 'completed', action: '@deep@' })],
    ];
    for (const items of cases) {
      const lines = [meta(), user('x'), ...items.map(at), answer('done')];
      expect(refusal(() => read(lines))).toBe(`x.jsonl:${lines.length - 1}: the record nests deeper than 256 levels (no Codex record does): not read`);
    }
    // As deep as a real record goes is read.
    const hundred = '['.repeat(100) + '1' + ']'.repeat(100);
    expect(() => read([meta(), user('x'), rec('response_item', { type: 'tool_search_call', call_id: 't1', execution: 'client', arguments: '@deep@' }).replace('"@deep@"', hundred), rec('response_item', { type: 'tool_search_output', call_id: 't1', execution: 'client', tools: [] }), answer('done')])).not.toThrow();
  });

  it('a neutral file whose model output holds a lone surrogate is noted at its JSON pointer, as a rollout is (it replayed U+FFFD silently; atk66 F3)', async () => {
    const call = { type: 'function_call', name: 'f', arguments: '"\ud800x', call_id: 'c1' };
    const text = JSON.stringify({ llr_workload: 1, userTurns: [{ input: [{ type: 'message', role: 'user', content: 'hi' }], modelTurns: [{ output: [call] }, { output: [{ type: 'message', text: 'ok \udc00' }] }] }], toolOutputs: { c1: { output: 'ok' } } });
    const w = parseNeutral(text, 'n.json', 'test');
    expect(w.skipped?.map((n) => n.what)).toEqual(['/userTurns/0/modelTurns/0/output/0: model output', '/userTurns/0/modelTurns/1/output/0: model output']);
    expect(w.skipped?.[0]!.why).toMatch(/lone surrogate .* the replay decodes U\+FFFD in its place/);
    // Well-formed text (an emoji's pair) is not noted; inspect prints a JSON file's notes at their pointer, not at 'line 0'.
    expect(parseNeutral(text.replaceAll('\\ud800', '\\ud83d\\ude00').replaceAll(' \\udc00', ''), 'n.json', 'test').skipped).toBeUndefined();
    const out = await inspectText(text, 'json');
    expect(out).toContain('\n  /userTurns/0/modelTurns/0/output/0: model output — holds a lone surrogate');
    expect(out).not.toContain('line 0');
  });

  it("inspect prints a stranger's names, record types and texts with their control characters escaped (an OSC 52 in `originator` set the clipboard; atk68 F4)", async () => {
    const osc = 'codex\u001b]52;c;cm0gLXJmIH4K\u0007';
    const sessionMeta = rec('session_meta', { id: 's1', source: 'cli', originator: osc, cli_version: '0.1\u001b[2J', base_instructions: { text: 'x' } });
    const hidden = rec('response_item', { type: 'function_call', name: 'tool\u001b[8mhidden', arguments: '{}', call_id: 'c1' });
    const weird = JSON.stringify({ timestamp: TS, type: 'weird\u001b[31mtype', payload: {} });
    const out = await inspect([sessionMeta, user('x'), hidden, output('c1'), weird, answer('done\u202e')]);
    expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(out).toContain('codex\\u{1b}]52;c;cm0gLXJmIH4K\\u{7}');
    expect(out).toContain('tool\\u{1b}[8mhidden');
    expect(out).toContain('weird\\u{1b}[31mtype');
    // Its own layout kept: lines and the table's columns.
    expect(out.split('\n').length).toBeGreaterThan(8);
  });

  it("a turn_aborted whose call got its output later in the file says so, not that 'the file ends there' (atk68 F5)", () => {
    const abort = rec('event_msg', { type: 'turn_aborted', reason: 'interrupted' });
    const w = read([meta(), user('x'), call('ab'), usage(1000, 50), abort, call('ac'), usage(1100, 50), output('ab'), output('ac'), answer('y'), usage(1200, 5)]);
    expect(w.toolOutputs['ab']?.output).toBe('ok');
    const note = w.skipped?.find((n) => n.what === 'turn_aborted');
    expect(note?.why).toMatch(/its 1 call\(s\) left without output got it later in the file \(the last at line 8\), replayed with it/);
    expect(note?.why).not.toMatch(/the file ends there/);
  });

  it('a neutral file is checked as one conversation: a duplicate item id, an item_reference to nothing, a model call reusing an input call_id are refused at their pointer (they failed every design mid-run; atk68 F6)', () => {
    const neutral = (userTurns: unknown[], toolOutputs: Record<string, unknown> = {}) => () => parseNeutral(JSON.stringify({ llr_workload: 1, userTurns, toolOutputs }), 'n.json', 'test');
    const msg = (id: string, role = 'user') => ({ type: 'message', role, content: 'hi', id });
    const done = [{ output: [{ type: 'message', text: 'd' }] }];
    expect(refusal(neutral([{ input: [msg('msg_same')], modelTurns: done }, { input: [msg('msg_same')], modelTurns: done }]))).toMatch(/^n\.json: \/userTurns\/1\/input\/0\/id: Duplicate item found with id msg_same/);
    expect(refusal(neutral([{ input: [msg('msg_1'), msg('msg_1', 'assistant')], modelTurns: done }]))).toMatch(/^n\.json: \/userTurns\/0\/input\/1\/id: Duplicate item/);
    expect(refusal(neutral([{ input: [msg('msg_1'), { type: 'item_reference', id: 'msg_nowhere' }], modelTurns: done }]))).toMatch(/^n\.json: \/userTurns\/0\/input\/1: an item_reference cannot be replayed .*item_not_found\)/);
    // Nor one to an item before it, in its turn or an earlier one: item_not_found, duplicate_item (atk72 F1).
    expect(refusal(neutral([{ input: [msg('msg_1'), { type: 'item_reference', id: 'msg_1' }], modelTurns: done }]))).toMatch(/^n\.json: \/userTurns\/0\/input\/1: an item_reference cannot be replayed .*duplicate_item or item_not_found/);
    expect(refusal(neutral([{ input: [msg('msg_1')], modelTurns: done }, { input: [{ type: 'item_reference', id: 'msg_1' }], modelTurns: done }]))).toMatch(/^n\.json: \/userTurns\/1\/input\/0: an item_reference cannot be replayed/);
    const prefilled = [{ type: 'function_call', name: 'f', arguments: '{}', call_id: 'c1' }, { type: 'function_call_output', call_id: 'c1', output: 'x' }, { type: 'message', role: 'user', content: 'go' }];
    const reused = [{ output: [{ type: 'function_call', name: 'f', arguments: '{}', call_id: 'c1' }] }, ...done];
    expect(refusal(neutral([{ input: prefilled, modelTurns: reused }], { c1: { output: 'y' } }))).toMatch(/^n\.json: \/userTurns\/0\/modelTurns\/0\/output\/0\/call_id: call_id c1 is already in the conversation, from \/userTurns\/0\/input/);
    // What is fine stays so: the same id again once a turn replaces the history, an input call and the model's own.
    expect(neutral([{ input: [msg('msg_1')], modelTurns: done }, { input: [msg('msg_1')], replace_history: true, modelTurns: done }] as unknown[])).not.toThrow();
    const own = [{ output: [{ type: 'function_call', name: 'f', arguments: '{}', call_id: 'c2' }] }, ...done];
    expect(neutral([{ input: prefilled, modelTurns: own }], { c2: { output: 'y' } })).not.toThrow();
  });

  it('a neutral file\'s tool output for no call, and a per-call figure the replay does not use, are noted (outside attack atk99 F3, F4)', () => {
    const hi = { type: 'message', role: 'user', content: 'hi' };
    const call = { type: 'function_call', name: 'f', arguments: '{}', call_id: 'c1' };
    const w = parseNeutral(
      JSON.stringify({
        llr_workload: 1,
        userTurns: [{ input: [hi], modelTurns: [{ output: [call], output_tokens: 20 }, { output: [{ type: 'message', text: 'd' }], output_tokens: 5 }] }],
        toolOutputs: { c1: { output: 'o' }, 'gh/ost': { output: 'nobody asked' } },
        calls: [
          { input_tokens: 10, input_source: 'recorded', output_tokens: 999, output_source: 'recorded', line: 0 },
          { input_tokens: 12, input_source: 'recorded', output_tokens: 5, output_source: 'recorded', line: 0 },
        ],
      }),
      'n.json',
      'test',
    );
    // Dropped silently before: the Codex reader notes the same case.
    expect(w.skipped).toContainEqual({ line: 0, what: '/toolOutputs/gh~1ost', why: expect.stringContaining('answers no function_call of userTurns') });
    expect(Object.keys(w.toolOutputs)).toEqual(['c1']);
    // inspect listed 999 for a call whose replay decodes 20.
    expect(w.skipped).toContainEqual({ line: 0, what: '/calls/0/output_tokens: 999', why: 'differs from /userTurns/0/modelTurns/0/output_tokens (20), which the replay decodes' });
    expect((w.skipped ?? []).filter((s) => s.what.startsWith('/calls/'))).toHaveLength(1);
  });

  it('a rollout pretty-printed, or two joined on one line, is refused saying which (atk68 I2)', () => {
    const pretty = JSON.stringify(JSON.parse(meta()), null, 2).split('\n');
    expect(refusalOf(() => read(pretty))).toMatch(/:1: not valid JSON: .*it looks pretty-printed.*jq -c/);
    expect(refusalOf(() => read([meta(), user('x') + answer('y')]))).toMatch(/:2: not valid JSON: .*two JSON values on one line/);
  });
});
