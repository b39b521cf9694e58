/**
 * The Codex rollout reader: the shipped rollout read end to end, the grouping
 * rules on small hand-written rollouts, and the errors (with line numbers) for
 * files that are not rollouts or are cut short. Synthetic workloads are in
 * workload-synthetic.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_WORKLOAD, parseWorkload, readWorkload, summarizeWorkload, WorkloadError, type Workload } from '../../src/workload/load.js';

const SHIPPED = DEFAULT_WORKLOAD;

describe('the shipped rollout (codex-rollout-a.jsonl)', () => {
  const w = readWorkload(SHIPPED);
  const modelTurns = w.userTurns.flatMap((u) => u.modelTurns);
  const calls = modelTurns.flatMap((t) => t.output.filter((o) => o.type === 'function_call'));

  it('has 2 user turns and 66 model calls, one per token_count', () => {
    expect(w.userTurns).toHaveLength(2);
    expect(w.userTurns.map((u) => u.modelTurns.length)).toEqual([3, 63]);
    expect(modelTurns).toHaveLength(66);
    expect(w.recorded.model_calls).toBe(66);
    expect(modelTurns.map((t) => t.output_tokens)).toEqual(w.recorded.output_tokens);
  });

  it('starts the first user turn with the developer preamble and cites its source', () => {
    expect(w.userTurns[0]!.input.map((i) => ('role' in i ? i.role : i.type))).toEqual(['developer', 'user', 'user']);
    expect(w.userTurns[1]!.input.map((i) => ('role' in i ? i.role : i.type))).toEqual(['user']);
    expect(w.name).toBe('codex-rollout-a.jsonl');
    expect(w.source).toContain('codemie-ai/codemie-code');
    expect(w.source).toContain('Apache License 2.0');
    expect(w.instructions).toMatch(/^You are Codex/);
  });

  it('answers every function call, and only those', () => {
    expect(calls).toHaveLength(102);
    for (const c of calls) expect(w.toolOutputs[c.call_id], c.call_id).toBeDefined();
    expect(Object.keys(w.toolOutputs).sort()).toEqual(calls.map((c) => c.call_id).sort());
    // The user turns end with an answer, not with calls waiting for output.
    for (const u of w.userTurns) expect(u.modelTurns.at(-1)!.output.map((o) => o.type)).toEqual(['message']);
  });

  it('records growing input tokens per model call', () => {
    const input = w.recorded.input_tokens;
    expect(input).toHaveLength(66);
    expect(input[0]).toBe(18703);
    expect(input.at(-1)).toBe(131573);
    for (let i = 1; i < input.length; i++) expect(input[i]).toBeGreaterThanOrEqual(input[i - 1]!);
  });

  it('counts items and rebuilds the tools, replaying apply_patch as a function', () => {
    expect(w.stats).toEqual({ lines: 386, function_calls: 99, custom_tool_calls: 3, hosted_calls: 3, tool_output_bytes: 340817 });
    expect(w.tools.map((t) => t.name)).toEqual(['exec_command', 'write_stdin', 'update_plan', 'apply_patch']);
    const patch = calls.find((c) => c.name === 'apply_patch')!;
    expect(JSON.parse(patch.arguments)).toEqual({ input: expect.stringMatching(/^\*\*\* Begin Patch/) });
    expect(w.toolOutputs[patch.call_id]!.output).toMatch(/^\{"output":"Success/);
  });

  it('times tools from the call to the output record', () => {
    // 08:27:22.479 → 08:27:23.709; exec_command_end says 5.09 s (the process's whole life).
    expect(w.toolOutputs['call_Y2p6KmqwoTtpi6atpDPuxC5M']!.duration_ms).toBe(1230);
    expect(summarizeWorkload(w)).toEqual({
      user_turns: 2,
      model_calls: 66,
      tool_calls: 102,
      hosted_calls: 3,
      input_tokens_first: 18703,
      input_tokens_last: 131573,
      output_tokens_median: 96.5,
      tool_output_bytes: 340817,
      tool_duration_median_ms: 1257.5,
      token_figures: { input_recorded: 66, input_inferred: 0, output_recorded: 66, output_inferred: 0 },
      // The apply_patch call's input, wrapped as a function call's arguments, shows more tokens than were recorded (atk99 F2).
      notes: { count: 1, listed: [{ line: 280, what: "model call 46's output_tokens 113", why: 'below the 119 tokens its output shows: the replay decodes 119' }] },
    });
  });

  it("counts the tool calls the replay makes: not those an aborted turn ended in (results.json said 3 for the aborted fixture's 1)", () => {
    const aborted = readWorkload(new URL('../fixtures/workloads/rollout-aborted.jsonl', import.meta.url).pathname);
    expect(aborted.stats.function_calls).toBe(3);
    expect(summarizeWorkload(aborted)).toMatchObject({ model_calls: 4, tool_calls: 1 });
  });

  it('keeps the reader\'s notes for the bench: how many records they name and the first of them (atk46 F3: the report said nothing)', () => {
    const aborted = readWorkload(new URL('../fixtures/workloads/rollout-aborted.jsonl', import.meta.url).pathname);
    const { notes } = summarizeWorkload(aborted);
    expect(aborted.skipped!.length).toBeGreaterThan(0);
    expect(notes.listed).toEqual(aborted.skipped!.slice(0, 20));
    expect(notes.count).toBe(aborted.skipped!.reduce((n, s) => n + 1 + (s.more ?? 0), 0));
  });
});

// Small rollouts: one record per helper call, timestamps one second apart.
type Rec = { type: string; payload: Record<string, unknown>; timestamp?: string };
const meta = (): Rec => ({ type: 'session_meta', payload: { id: 's', base_instructions: { text: 'Be brief.' } } });
const msg = (role: string, text: string): Rec => ({
  type: 'response_item',
  payload: { type: 'message', role, content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }] },
});
const reasoning = (): Rec => ({ type: 'response_item', payload: { type: 'reasoning', summary: [], encrypted_content: 'x' } });
const call = (id: string, cmd = 'ls'): Rec => ({
  type: 'response_item',
  payload: { type: 'function_call', name: 'exec_command', arguments: JSON.stringify({ cmd }), call_id: id },
});
const out = (id: string, output = 'ok'): Rec => ({ type: 'response_item', payload: { type: 'function_call_output', call_id: id, output } });
const search = (): Rec => ({ type: 'response_item', payload: { type: 'web_search_call', status: 'completed', action: {} } });
let total = 0;
const usage = (input: number, output: number, repeat = false): Rec => {
  if (!repeat) total += input + output;
  const last = { input_tokens: input, cached_input_tokens: 0, output_tokens: output, reasoning_output_tokens: 0 };
  return { type: 'event_msg', payload: { type: 'token_count', info: { total_token_usage: { total_tokens: total }, last_token_usage: last } } };
};
const jsonl = (recs: Rec[], timestamps = true): string =>
  recs
    .map((r, i) => JSON.stringify(timestamps ? { timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), ...r } : r))
    .join('\n') + '\n';
const parse = (recs: Rec[], timestamps = true): Workload => parseWorkload(jsonl(recs, timestamps), 't.jsonl', 'test');

describe('grouping model calls', () => {
  it('keeps a hosted web search inside its model call and drops it from the output', () => {
    const w = parse([meta(), msg('user', 'hi'), reasoning(), search(), reasoning(), msg('assistant', 'found'), usage(10, 50)]);
    expect(w.userTurns[0]!.modelTurns).toEqual([{ output: [{ type: 'message', text: 'found' }], output_tokens: 50 }]);
    expect(w.stats.hosted_calls).toBe(1);
    expect(w.instructions).toBe('Be brief.');
  });

  it('gives the tokens of a call with nothing visible to the next call, or to the last one', () => {
    const w = parse([
      meta(), msg('user', 'hi'),
      reasoning(), search(), usage(10, 30), // only a hosted search: nothing to replay
      call('c1'), usage(12, 5), out('c1'),
      msg('assistant', 'done'), usage(14, 7),
      reasoning(), usage(15, 2), // nothing visible at the end of the user turn
    ]);
    expect(w.userTurns[0]!.modelTurns.map((t) => t.output_tokens)).toEqual([35, 9]);
    expect(w.recorded).toEqual({ model_calls: 4, input_tokens: [10, 12, 14, 15], output_tokens: [30, 5, 7, 2] });
  });

  it('ignores a repeated token_count', () => {
    const w = parse([meta(), msg('user', 'hi'), msg('assistant', 'a'), usage(10, 4), usage(10, 4, true)]);
    expect(w.recorded.model_calls).toBe(1);
    expect(w.userTurns[0]!.modelTurns).toEqual([{ output: [{ type: 'message', text: 'a' }], output_tokens: 4 }]);
  });

  it('reads usage without total_token_usage, and the older flat token_count', () => {
    const lastOnly: Rec = { type: 'event_msg', payload: { type: 'token_count', info: { last_token_usage: { input_tokens: 8, output_tokens: 2 } } } };
    const flat: Rec = { type: 'event_msg', payload: { type: 'token_count', input_tokens: 9, output_tokens: 3 } };
    const w = parse([meta(), msg('user', 'hi'), call('c1'), lastOnly, out('c1'), call('c2'), lastOnly, out('c2'), msg('assistant', 'b'), flat]);
    expect(w.recorded).toEqual({ model_calls: 3, input_tokens: [8, 8, 9], output_tokens: [2, 2, 3] });
  });

  it('notes model output holding a lone surrogate, which a model of UTF-8 tokens replays as U+FFFD (atk46 F6)', () => {
    const w = parse([meta(), msg('user', 'hi'), msg('assistant', 'x\ud83d end'), usage(5, 2), msg('user', 'again'), msg('assistant', 'a \ud83d\ude00 pair'), usage(6, 2)]);
    // Read with U+FFFD in its place, as the replay sends it and the client sends it back (atk117 F1).
    expect(w.userTurns[0]!.modelTurns[0]!.output).toEqual([{ type: 'message', text: 'x\ufffd end' }]);
    expect(w.userTurns[1]!.modelTurns[0]!.output).toEqual([{ type: 'message', text: 'a \ud83d\ude00 pair' }]);
    expect(w.skipped!.map((n) => [n.line, n.what])).toEqual([[3, 'model output']]);
    expect(w.skipped![0]!.why).toContain('U+FFFD');
  });

  it("notes a call's name holding a lone surrogate, and its arguments', each read as U+FFFD (atk84 F4, atk117 F2)", () => {
    // The name is streamed as read, not decoded from tokens: sent with its surrogate escaped, Codex's JSON reader
    // dropped every event naming it.
    const named: Rec = { type: 'response_item', payload: { type: 'function_call', name: 'exec\ud800_cmd', arguments: '{"cmd":"\udc00"}', call_id: 'c1' } };
    const w = parse([meta(), msg('user', 'hi'), named, usage(5, 2), out('c1'), msg('assistant', 'done'), usage(6, 2)]);
    // Besides the name no tool may have (noted first).
    expect(w.skipped!.map((n) => [n.line, n.what])).toEqual([[3, 'the tool name "exec\\ud800_cmd"'], [3, 'model output'], [3, "a call's name"]]);
    expect(w.skipped![1]!.why).toContain('U+FFFD');
    expect(w.skipped![2]!.why).toMatch(/sends the name with U\+FFFD in its place/);
    expect(w.userTurns[0]!.modelTurns[0]!.output).toEqual([{ type: 'function_call', name: 'exec\ufffd_cmd', arguments: '{"cmd":"\ufffd"}', call_id: 'c1' }]);
  });

  it('reads a call id holding a lone surrogate with U+FFFD in its place, its output and the call in a later input under it, noted (atk117 F2)', () => {
    const lone: Rec = { type: 'response_item', payload: { type: 'function_call', name: 'exec_command', arguments: '{}', call_id: 'call_s\ud800' } };
    const answered: Rec = { type: 'response_item', payload: { type: 'function_call_output', call_id: 'call_s\ud800', output: 'ok' } };
    const w = parse([meta(), msg('user', 'hi'), lone, usage(5, 2), answered, msg('assistant', 'done'), usage(6, 2)]);
    const [call] = w.userTurns[0]!.modelTurns[0]!.output;
    expect(call).toMatchObject({ type: 'function_call', call_id: 'call_s\ufffd' });
    expect(w.toolOutputs).toEqual({ 'call_s\ufffd': expect.objectContaining({ output: 'ok' }) });
    expect(w.skipped).toContainEqual({ line: 0, what: 'call_id "call_s\\ud800"', why: expect.stringContaining('U+FFFD') });
    // Every string the replay sends is Unicode text: JSON.stringify writes no escaped surrogate.
    expect(JSON.stringify(w.userTurns)).not.toMatch(/\\ud[89a-f]/i);
  });

  it("notes a call in a namespace (Codex's sub-agent tools) as replayed without it (atk117 F6)", () => {
    const spawn: Rec = { type: 'response_item', payload: { type: 'function_call', name: 'spawn_agent', namespace: 'collaboration', arguments: '{}', call_id: 'c1' } };
    const w = parse([meta(), msg('user', 'hi'), spawn, usage(5, 2), out('c1'), msg('assistant', 'done'), usage(6, 2)]);
    expect(w.skipped).toContainEqual({ line: 3, what: 'a call in the namespace "collaboration"', why: expect.stringContaining('replayed without its namespace') });
    expect(w.userTurns[0]!.modelTurns[0]!.output[0]).toEqual({ type: 'function_call', name: 'spawn_agent', arguments: '{}', call_id: 'c1' });
  });

  it('refuses two call ids that are one once their lone surrogates are sent as U+FFFD', () => {
    const a: Rec = { type: 'response_item', payload: { type: 'function_call', name: 'exec_command', arguments: '{}', call_id: 'c\ud800' } };
    const b: Rec = { type: 'response_item', payload: { type: 'function_call', name: 'exec_command', arguments: '{}', call_id: 'c\udc01' } };
    const out2 = (id: string): Rec => ({ type: 'response_item', payload: { type: 'function_call_output', call_id: id, output: 'ok' } });
    expect(() => parse([meta(), msg('user', 'hi'), a, b, usage(5, 2), out2('c\ud800'), out2('c\udc01'), msg('assistant', 'done'), usage(6, 2)])).toThrow(/are one id once a lone surrogate is sent as U\+FFFD/);
  });

  it('notes a rollback as not replayed, the turns it rolled back kept in the replayed history (atk84 I1)', () => {
    const rollback: Rec = { type: 'event_msg', payload: { type: 'thread_rolled_back', num_turns: 1 } };
    const w = parse([meta(), msg('user', 'one'), msg('assistant', 'a'), usage(5, 1), msg('user', 'two'), msg('assistant', 'b'), usage(7, 1), rollback, msg('user', 'two again'), msg('assistant', 'c'), usage(6, 1)]);
    // The rolled-back turn is replayed: three user turns, each in the next one's history.
    expect(w.userTurns).toHaveLength(3);
    expect(w.skipped).toContainEqual({ line: 8, what: 'thread_rolled_back', why: expect.stringMatching(/^rollbacks are not replayed: the turns it rolled back stay in the replayed history/) });
  });

  it("a call_id used again in a fork of a session the file also holds, before or after it, or in a resumed session's copy, is refused naming that cause (atk84 F5, atk86 F6)", () => {
    const session = (id: string, extra: Record<string, unknown> = {}): Rec => ({ type: 'session_meta', payload: { id, base_instructions: { text: 'Be brief.' }, ...extra } });
    const parent = [session('p'), msg('user', 'hi'), call('c1'), usage(5, 2), out('c1'), msg('assistant', 'done'), usage(6, 2)];
    const fork = [session('f', { forked_from_id: 'p' }), msg('user', 'hi'), call('c1'), usage(5, 2), out('c1'), msg('assistant', 'done'), usage(6, 2)];
    expect(() => parse([...parent, ...fork])).toThrow(/call_id c1 is used twice \(first by the call at line 3\): the session at line 8 is a fork of session p \(line 1\), which this file also holds/);
    // The parent after its fork (the files joined in the other order) is named too (atk86 F6).
    expect(() => parse([...fork, ...parent])).toThrow(/call_id c1 is used twice \(first by the call at line 3\): the session at line 8 is the parent of the fork at line 1 \(its forked_from_id\)/);
    // Resumed, its history written again with fields the first copy had not (not byte for byte).
    const copy: Rec = { type: 'response_item', payload: { type: 'function_call', name: 'shell', arguments: '{"cmd":"ls"}', call_id: 'c1', id: 'fc_1' } };
    expect(() => parse([...parent, session('p'), copy])).toThrow(/is used twice \(first by the call at line 3\): the session is resumed at line 8/);
    // Another session's own reuse of an id names no such cause.
    expect(() => parse([...parent, session('q'), msg('user', 'x'), call('c1'), usage(5, 2)])).toThrow(/is used twice \(first by the call at line 3\)$/);
  });

  it("a compaction's replacement history keeps the API's built-in client tools' calls and outputs, as replayed outside one (atk86 F3)", () => {
    const replacement = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'fix it' }] },
      { type: 'shell_call', id: 'sh_1', call_id: 'call_sh', status: 'completed', action: { commands: ['ls'] } },
      { type: 'shell_call_output', call_id: 'call_sh', output: [{ stdout: 'a\n', stderr: '', outcome: { type: 'exit', exit_code: 0 } }] },
    ];
    const w = parse([meta(), msg('user', 'x'), msg('assistant', 'd'), usage(5, 1), { type: 'compacted', payload: { message: 's', replacement_history: replacement } }, msg('user', 'y'), msg('assistant', 'e'), usage(6, 1)]);
    const input = w.userTurns[1]!.input as Array<{ type: string; name?: string; output?: string }>;
    expect(input.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call_output', 'message']);
    expect(input[1]!.name).toBe('shell');
    expect(JSON.parse(input[2]!.output!)).toEqual([expect.objectContaining({ stdout: 'a\n' })]);
  });

  it('splits calls at client items when there is no usage, and takes a late token_count', () => {
    const w = parse([meta(), msg('user', 'hi'), call('c1'), out('c1'), usage(9, 3), call('c2'), out('c2'), msg('assistant', 'b')]);
    // Calls without usage are inferred: visible tokens (o200k) + framing (14 per call, 10 per message).
    const inferredCall = encode(JSON.stringify({ cmd: 'ls' })).length + 14;
    const inferredMessage = encode('b').length + 10;
    expect(w.userTurns[0]!.modelTurns.map((t) => [t.output.length, t.output_tokens])).toEqual([[1, 3], [1, inferredCall], [1, inferredMessage]]);
    expect(w.calls!.map((c) => [c.input_source, c.output_source])).toEqual([['recorded', 'recorded'], ['inferred', 'inferred'], ['inferred', 'inferred']]);
    expect(w.recorded.model_calls).toBe(1);
  });

  it('starts a user turn at the messages that follow model output', () => {
    const w = parse([meta(), msg('developer', 'rules'), msg('user', 'one'), msg('assistant', 'a'), usage(5, 1), msg('user', 'two'), msg('assistant', 'b'), usage(7, 1), msg('user', 'unanswered')]);
    expect(w.userTurns.map((u) => u.input.length)).toEqual([2, 1]);
  });

  it('replays apply_patch as a function call taking {input}', () => {
    const patch: Rec = { type: 'response_item', payload: { type: 'custom_tool_call', status: 'completed', call_id: 'p1', name: 'apply_patch', input: '*** Begin Patch' } };
    const patchOut: Rec = { type: 'response_item', payload: { type: 'custom_tool_call_output', call_id: 'p1', output: '{"output":"Success"}' } };
    const w = parse([meta(), msg('user', 'fix'), patch, usage(5, 9), patchOut, msg('assistant', 'ok'), usage(6, 1)]);
    expect(w.userTurns[0]!.modelTurns[0]!.output).toEqual([{ type: 'function_call', name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}', call_id: 'p1' }]);
    expect(w.toolOutputs.p1).toEqual({ output: '{"output":"Success"}', duration_ms: 2000 });
    expect(w.tools).toEqual([expect.objectContaining({ name: 'apply_patch', parameters: expect.objectContaining({ properties: { input: { type: 'string' } } }) })]);
    expect(w.stats.custom_tool_calls).toBe(1);
  });

  it('answers an interrupted call "aborted" at the start of the next user turn', () => {
    const w = parse([meta(), msg('user', 'go'), call('c1'), usage(5, 2), msg('user', 'stop, do this instead'), msg('assistant', 'ok'), usage(9, 1)]);
    expect(w.userTurns[1]!.input[0]).toEqual({ type: 'function_call_output', call_id: 'c1', output: 'aborted' });
    expect(w.toolOutputs).toEqual({});
  });

  it('falls back to exec_command_end, then 0, when records have no timestamps', () => {
    const end: Rec = { type: 'event_msg', payload: { type: 'exec_command_end', call_id: 'c1', duration: { secs: 2, nanos: 500_000_000 } } };
    const w = parse([meta(), msg('user', 'go'), call('c1'), call('c2'), usage(5, 2), out('c1'), end, out('c2'), msg('assistant', 'ok'), usage(9, 1)], false);
    expect(w.toolOutputs).toEqual({ c1: { output: 'ok', duration_ms: 2500 }, c2: { output: 'ok', duration_ms: 0 } });
  });
});

describe('files that are not rollouts, or are cut short', () => {
  const shipped = readFileSync(SHIPPED, 'utf8');
  const shippedLines = shipped.trimEnd().split('\n');
  const fails = (text: string): WorkloadError => {
    try {
      parseWorkload(text, 'bad.jsonl', 'test');
    } catch (err) {
      expect(err).toBeInstanceOf(WorkloadError);
      expect((err as Error).name).toBe('WorkloadError');
      return err as WorkloadError;
    }
    throw new Error('expected a WorkloadError');
  };

  it('rejects an empty file', () => {
    expect(fails('')).toMatchObject({ line: 0, message: 'bad.jsonl: the file is empty: not a Codex rollout' });
    expect(fails('\n  \n').line).toBe(0);
  });

  it('rejects a JSON array, a CSV, and lines without type or payload', () => {
    expect(fails('[\n  {"type": "session_meta", "payload": {}}\n]\n')).toMatchObject({ line: 1, message: expect.stringMatching(/^bad\.jsonl:1: not valid JSON/) });
    expect(fails('[{"type":"session_meta","payload":{}}]\n')).toMatchObject({ line: 1, message: expect.stringContaining('got an array') });
    expect(fails('timestamp,type,payload\n2026-01-01,message,hi\n').line).toBe(1);
    expect(fails(`${shippedLines[0]}\n{"type":"response_item"}\n`)).toMatchObject({ line: 2, message: expect.stringContaining('`payload`') });
    expect(fails(`${shippedLines[0]}\n{"payload":{}}\n`)).toMatchObject({ line: 2, message: expect.stringContaining('`type`') });
  });

  it('rejects a last line cut mid-JSON as truncated', () => {
    const lastLine = shippedLines.at(-1)!;
    const cut = [...shippedLines.slice(0, -1), lastLine.slice(0, lastLine.length / 2)].join('\n');
    expect(fails(cut)).toMatchObject({ line: 386, message: expect.stringContaining('truncated') });
  });

  it('rejects a function call that never gets its output', () => {
    const err = fails(shippedLines.slice(0, 10).join('\n')); // line 9 is the first function_call, line 10 its token_count
    expect(err).toMatchObject({ line: 9, message: expect.stringMatching(/^bad\.jsonl:9: exec_command call call_Y2p6KmqwoTtpi6atpDPuxC5M has no output/) });
  });

  it('notes an output for an unknown call (not replayed) and rejects a rollout with no model call', () => {
    expect(fails(jsonl([meta(), msg('user', 'hi'), out('nope')])).line).toBe(0);
    expect(fails(jsonl([meta(), msg('user', 'hi')])).line).toBe(0);
    const w = parseWorkload(jsonl([meta(), msg('user', 'hi'), out('nope'), msg('assistant', 'hello'), usage(3, 1)]), 'x.jsonl', 'test');
    expect(w.toolOutputs).toEqual({});
    expect(w.skipped).toEqual([{ line: 3, what: 'an output for call_id nope', why: expect.stringMatching(/^answers no call recorded before it/) }]);
  });

  describe('readWorkload', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llr-workload-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('names other files by basename and cites them by path', () => {
      const path = join(dir, 'other.jsonl');
      writeFileSync(path, jsonl([meta(), msg('user', 'hi'), msg('assistant', 'hello'), usage(3, 1)]));
      const w = readWorkload(path);
      expect([w.name, w.source]).toEqual(['other.jsonl', path]);
    });

    const good = () => jsonl([meta(), msg('user', 'héllo'), msg('assistant', 'hello'), usage(3, 1)]);
    const refusal = (file: string, bytes: Buffer): WorkloadError => {
      const path = join(dir, file);
      writeFileSync(path, bytes);
      try {
        readWorkload(path);
      } catch (err) {
        expect(err).toBeInstanceOf(WorkloadError);
        return err as WorkloadError;
      }
      throw new Error('expected a WorkloadError');
    };

    it('accepts UTF-8 with a BOM, CRLF line endings, and CR-only line endings', () => {
      const expected = parseWorkload(good(), 'ok.jsonl', 'test');
      for (const [file, text] of [
        ['bom.jsonl', '\uFEFF' + good()],
        ['crlf.jsonl', good().replaceAll('\n', '\r\n')],
        ['cr.jsonl', good().replaceAll('\n', '\r')],
        ['bom-cr.jsonl', '\uFEFF' + good().replaceAll('\n', '\r')],
      ] as const) {
        const path = join(dir, file);
        writeFileSync(path, text);
        const w = readWorkload(path);
        expect({ ...w, name: 'ok.jsonl', source: 'test' }, file).toEqual(expected);
      }
      // The neutral format too, and its errors still name the line in a CR-only file.
      const neutral = join(dir, 'neutral-cr.json');
      writeFileSync(neutral, JSON.stringify({ llr_workload: 1, ...expected }, null, 2).replaceAll('\n', '\r'));
      expect(readWorkload(neutral).userTurns).toEqual(expected.userTurns);
      expect(refusal('broken-cr.json', Buffer.from('{\r  "llr_workload": 1,\r  oops: 1\r}\r'))).toMatchObject({ line: 3, message: expect.stringMatching(/^broken-cr\.json:3: not valid JSON/) });
    });

    it('says which line holds a lone CR in a file whose lines end in LF', () => {
      const lines = good().split('\n');
      const text = [lines[0], `${lines[1]}\r${lines[2]}`, ...lines.slice(3)].join('\n');
      expect(refusal('mixed.jsonl', Buffer.from(text))).toMatchObject({ line: 2, message: expect.stringMatching(/^mixed\.jsonl:2: not valid JSON.*a CR not followed by LF/) });
    });

    it('refuses invalid UTF-8 at its line, byte and offset, instead of reading U+FFFD', () => {
      const text = Buffer.from(good());
      const line2 = text.indexOf(0x0a) + 1;
      const at = text.indexOf('héllo') + 1; // the é: C3 A9
      for (const [bad, byte] of [
        [Buffer.from([0xe9]), 'E9'], // Latin-1 é
        [Buffer.from([0xc3, 0x28]), 'C3'], // a lead byte without its continuation
        [Buffer.from([0xed, 0xa0, 0x80]), 'ED'], // an encoded surrogate
        [Buffer.from([0xc0, 0xaf]), 'C0'], // overlong
      ] as const) {
        const bytes = Buffer.concat([text.subarray(0, at), bad, text.subarray(at + 2)]);
        expect(refusal('latin1.jsonl', bytes)).toMatchObject({
          line: 2,
          message: `latin1.jsonl:2: not valid UTF-8: byte 0x${byte} at byte ${at - line2 + 1} of the line (offset ${at} in the file); a workload file must be UTF-8 text, convert it to UTF-8`,
        });
      }
      // Cut inside a character at the very end; the line counted in a CR-only file too.
      expect(refusal('cut.jsonl', Buffer.concat([text, Buffer.from([0xf0, 0x9f, 0x98])]))).toMatchObject({ line: 5 });
      const cr = Buffer.from(good().replaceAll('\n', '\r'));
      expect(refusal('cr.jsonl', Buffer.concat([cr.subarray(0, at), Buffer.from([0xff]), cr.subarray(at + 2)]))).toMatchObject({ line: 2 });
    });

    it('refuses UTF-16 and UTF-32, with or without a BOM, saying so', () => {
      const text = good();
      const le = Buffer.from(text, 'utf16le');
      const be = Buffer.from(le).swap16();
      const cases: [string, Buffer, RegExp][] = [
        ['le-bom.jsonl', Buffer.concat([Buffer.from([0xff, 0xfe]), le]), /UTF-16LE \(little-endian, with a BOM\)/],
        ['be-bom.jsonl', Buffer.concat([Buffer.from([0xfe, 0xff]), be]), /UTF-16BE \(big-endian, with a BOM\)/],
        ['le.jsonl', le, /UTF-16LE \(little-endian, no BOM\)/],
        ['be.jsonl', be, /UTF-16BE \(big-endian, no BOM\)/],
        ['le32.jsonl', Buffer.from([0xff, 0xfe, 0, 0, 0x7b, 0, 0, 0]), /UTF-32LE \(little-endian, with a BOM\)/],
        ['be32.jsonl', Buffer.from([0, 0, 0xfe, 0xff, 0, 0, 0, 0x7b]), /UTF-32BE \(big-endian, with a BOM\)/],
      ];
      for (const [file, bytes, what] of cases) {
        const err = refusal(file, bytes);
        expect(err.line, file).toBe(0);
        expect(err.message, file).toMatch(new RegExp(`^${file.replace('.', '\\.')}: the file is ${what.source}; convert it to UTF-8`));
      }
    });

    it('refuses a compressed file as such, saying how to decompress it (a .jsonl.gz read as "not valid UTF-8: byte 0x8B")', () => {
      const text = Buffer.from(good());
      const cases: [string, Buffer, string][] = [
        ['r.jsonl.gz', gzipSync(text), 'gzip-compressed, not text; decompress it first: zcat FILE > rollout.jsonl'],
        ['r.jsonl.zst', Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x80]), 'zstd-compressed, not text; decompress it first: zstdcat FILE'],
        ['r.jsonl.xz', Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00]), 'xz-compressed'],
        ['r.jsonl.bz2', Buffer.from('BZh91AY&SY\xff', 'latin1'), 'bzip2-compressed'],
        ['r.zip', Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14]), 'zip-compressed, not text; decompress it first: unzip -p FILE'],
      ];
      for (const [file, bytes, what] of cases) {
        const err = refusal(file, bytes);
        expect(err.line, file).toBe(0);
        expect(err.message, file).toContain(`${file}: the file is ${what}`);
      }
      // Text that merely starts with "BZh" or "PK" is still read as text.
      expect(refusal('bz.jsonl', Buffer.from('BZhello\n')).message).toMatch(/^bz\.jsonl:1: not valid JSON/);
    });

    it('wraps a file it cannot read', () => {
      const path = join(dir, 'missing.jsonl');
      expect(() => readWorkload(path)).toThrow(expect.objectContaining({ name: 'WorkloadError', line: 0, cause: expect.objectContaining({ code: 'ENOENT' }) }));
    });
  });
});
