/**
 * The rollout reader on hand-built rollouts of every variant
 * (test/fixtures/workloads/): what it infers is checked against counts made
 * here, independently, with gpt-tokenizer on the fixture's own text; the
 * neutral format against its schema; and files told apart by content.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { afterAll, describe, expect, it } from 'vitest';
import { truncateWorkload } from '../../src/bench/workload-prep.js';
import { DEFAULT_WORKLOAD, parseWorkload, readWorkload, WorkloadError, type Workload } from '../../src/workload/load.js';
import { modelCallCount, replayable } from '../../src/workload/replayable.js';

const DIR = fileURLToPath(new URL('../fixtures/workloads/', import.meta.url));
const SCHEMA = fileURLToPath(new URL('../../docs/workload.schema.json', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'llr-variants-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

type Rec = { type: string; payload: Record<string, unknown> };
const records = (file: string): Rec[] => readFileSync(DIR + file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Rec);
const items = (recs: Rec[], type: string) => recs.filter((r) => r.type === 'response_item' && r.payload['type'] === type).map((r) => r.payload);
const read = (file: string) => readWorkload(DIR + file);
/** The fixture with every token_count removed: a rollout whose figures must all be inferred. */
const withoutUsage = (file: string): Workload =>
  parseWorkload(readFileSync(DIR + file, 'utf8').split('\n').filter((l) => !l.includes('"type":"token_count"')).join('\n'), file, 'test');

// Independent counts: o200k tokens of an item as the prompt frames it (start and end marker around its text).
const tok = (text: string) => encode(text).length;
const framed = (text: string) => tok(text) + 2;
const callText = (p: Record<string, unknown>) => `function_call ${String(p['name'])} ${String(p['call_id'])}\n${String(p['arguments'])}`;
const outText = (p: Record<string, unknown>) => `function_call_output ${String(p['call_id'])}\n${String(p['output'])}`;
const reasoningItemText = (p: Record<string, unknown>) => `reasoning\n${JSON.stringify(p['summary'])}`;
/** The documented reasoning estimate, restated: summary tokens, or (encrypted length − 850) / 8 when larger. */
const reasoningEstimate = (p: Record<string, unknown>) => {
  const summary = (p['summary'] as Array<{ text: string }>).map((s) => s.text).join('\n');
  return Math.max(summary ? tok(summary) : 0, Math.max(0, Math.round((String(p['encrypted_content']).length - 850) / 8)));
};

describe('Codex Desktop: user turn only as an event, no turn_context, developer message or token_count', () => {
  const w = read('rollout-desktop-event-only.jsonl');
  const recs = records('rollout-desktop-event-only.jsonl');
  const [r1, r2, r3] = items(recs, 'reasoning');
  const [c1, c2] = items(recs, 'function_call');
  const [o1, o2] = items(recs, 'function_call_output');

  it('takes the user message from the event', () => {
    expect(w.userTurns).toHaveLength(1);
    expect(w.userTurns[0]!.input).toEqual([
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Why does the cart total ignore the discount code? Find it and tell me.' }] },
    ]);
    expect(w.userTurns[0]!.modelTurns.map((t) => t.output.map((o) => o.type))).toEqual([['function_call'], ['function_call'], ['message']]);
    expect(w.skipped).toEqual([]);
  });

  it('infers output tokens: visible + framing + reasoning estimate', () => {
    const msg = items(recs, 'message').find((m) => m['role'] === 'assistant')!;
    const text = (msg['content'] as Array<{ text: string }>)[0]!.text;
    expect(w.calls!.map((c) => c.output_source)).toEqual(['inferred', 'inferred', 'inferred']);
    expect(w.calls!.map((c) => c.output_tokens)).toEqual([
      tok(String(c1!['arguments'])) + 14 + reasoningEstimate(r1!),
      tok(String(c2!['arguments'])) + 14 + reasoningEstimate(r2!),
      tok(text) + 10 + reasoningEstimate(r3!),
    ]);
    expect(w.userTurns[0]!.modelTurns.map((t) => t.output_tokens)).toEqual(w.calls!.map((c) => c.output_tokens));
  });

  it('infers input tokens by rendering the context: each call adds what came since the last', () => {
    const [i1, i2, i3] = w.calls!.map((c) => c.input_tokens);
    expect(w.calls!.map((c) => c.input_source)).toEqual(['inferred', 'inferred', 'inferred']);
    expect(i2! - i1!).toBe(framed(reasoningItemText(r1!)) + framed(callText(c1!)) + framed(outText(o1!)));
    expect(i3! - i2!).toBe(framed(reasoningItemText(r2!)) + framed(callText(c2!)) + framed(outText(o2!)));
    // The first prompt holds at least the instructions and the user's message.
    expect(i1!).toBeGreaterThan(tok(w.instructions!) + tok('Why does the cart total ignore the discount code? Find it and tell me.'));
  });
});

describe('codex exec: no token_count, apply_patch, a hosted web search', () => {
  const w = read('rollout-exec-no-usage.jsonl');

  it('keeps the developer message, takes the user message once, drops the hosted search', () => {
    expect(w.origin).toMatchObject({ originator: 'codex_exec', session_source: 'exec' });
    expect(w.userTurns[0]!.input.map((i) => ('role' in i ? i.role : i.type))).toEqual(['developer', 'user']);
    expect(w.stats).toMatchObject({ function_calls: 2, custom_tool_calls: 1, hosted_calls: 1 });
    const names = w.userTurns[0]!.modelTurns.flatMap((t) => t.output.flatMap((o) => (o.type === 'function_call' ? [o.name] : [])));
    expect(names).toEqual(['exec_command', 'apply_patch', 'exec_command']);
  });

  it('gives the first call the reasoning on both sides of the search, and times tools from call to output', () => {
    const recs = records('rollout-exec-no-usage.jsonl');
    const [r1, r2] = items(recs, 'reasoning');
    const [c1] = items(recs, 'function_call');
    expect(w.calls![0]!.output_tokens).toBe(tok(String(c1!['arguments'])) + 14 + reasoningEstimate(r1!) + reasoningEstimate(r2!));
    expect(w.toolOutputs['call_exec_tst3']!.duration_ms).toBe(7250);
    expect(w.calls!.every((c) => c.input_source === 'inferred' && c.output_source === 'inferred')).toBe(true);
  });
});

describe('IDE extension: several user turns, the event before the item, parallel calls', () => {
  const w = read('rollout-ide-multi-turn.jsonl');

  it('reads three user turns, each user message once, and the recorded figures', () => {
    expect(w.userTurns.map((u) => u.input.map((i) => ('role' in i ? i.role : i.type)))).toEqual([['developer', 'user'], ['user'], ['user']]);
    expect(w.userTurns.map((u) => u.modelTurns.length)).toEqual([2, 2, 1]);
    expect(w.calls!.map((c) => [c.input_tokens, c.output_tokens])).toEqual([
      [3210, 52],
      [3302, 19],
      [3390, 141],
      [3560, 27],
      [3602, 6],
    ]);
    expect(w.calls!.every((c) => c.input_source === 'recorded' && c.output_source === 'recorded')).toBe(true);
    expect(w.userTurns[1]!.modelTurns[0]!.output.map((o) => (o.type === 'function_call' ? o.call_id : ''))).toEqual(['call_ide_t1', 'call_ide_t2']);
  });
});

describe('compaction: the history is replaced', () => {
  const w = read('rollout-compacted.jsonl');
  const recs = records('rollout-compacted.jsonl');

  it('starts a new conversation from the replacement between user turns, keeps the history inside one', () => {
    expect(w.userTurns.map((u) => u.replace_history ?? false)).toEqual([false, true, true]);
    const second = w.userTurns[1]!.input;
    expect(second.map((i) => ('role' in i ? i.role : i.type))).toEqual(['user', 'user', 'user']);
    // The encrypted compaction item stands in as a message of its estimated size.
    const compaction = (recs.find((r) => r.type === 'compacted')!.payload['replacement_history'] as Array<Record<string, unknown>>)[1]!;
    const estimate = Math.round((String(compaction['encrypted_content']).length - 850) / 8);
    const standIn = String((second[1] as { content: string }).content);
    expect(standIn).toContain(`about ${estimate} tokens`);
    expect(tok(standIn)).toBeGreaterThanOrEqual(estimate);
    expect(w.skipped!.map((s) => [s.line, s.what])).toEqual([
      [11, 'a compacted record'],
      [20, 'a compacted record without replacement_history'],
      [21, 'compaction at line 20'],
      [27, 'a compaction item'],
    ]);
  });

  it('infers input tokens from the replaced history, not the whole one', () => {
    const inf = withoutUsage('rollout-compacted.jsonl');
    const input = inf.calls!.map((c) => c.input_tokens);
    const firstUser = 'Summarise what src/orders does.';
    const header = input[0]! - framed(`user\n${firstUser}`);
    // Call 3 (first of user turn 2): header + the replacement (user message, stand-in) + the new user message.
    const [u1, standIn, u2] = inf.userTurns[1]!.input as Array<{ content: unknown }>;
    const text = (c: unknown) => (typeof c === 'string' ? c : (c as Array<{ text: string }>).map((p) => p.text).join(''));
    expect(input[2]).toBe(header + framed(`user\n${text(u1!.content)}`) + framed(`user\n${text(standIn!.content)}`) + framed(`user\n${text(u2!.content)}`));
    // Call 4 follows the legacy compaction inside the turn: the user messages so far and the summary.
    const summary = String(recs.find((r) => r.type === 'compacted' && !('replacement_history' in r.payload))!.payload['message']);
    expect(input[3]).toBe(header + framed(`user\n${firstUser}`) + framed('user\nNow add a test for refunds.') + framed(`user\n${summary}`));
    // The replay still sends the whole history in that turn, so its input stays as recorded.
    expect(inf.userTurns[1]!.modelTurns).toHaveLength(3);
  });

  it('anchors a new conversation on the previous turn\'s answer, once', () => {
    const r = replayable(w);
    expect(r.userTurns[1]!.input[0]).toEqual({ type: 'message', role: 'assistant', content: 'src/orders creates orders and refunds them; index.ts re-exports both.' });
    expect(r.userTurns[2]!.input[0]).toEqual({ type: 'message', role: 'assistant', content: 'Added test/refund.test.ts.' });
    expect(replayable(r)).toEqual(r);
  });
});

describe('aborted turns', () => {
  const w = read('rollout-aborted.jsonl');

  it('answers the interrupted call "aborted" in the next turn and accepts a file ending in an abort', () => {
    expect(w.userTurns).toHaveLength(3);
    expect(w.userTurns[1]!.input[0]).toEqual({ type: 'function_call_output', call_id: 'call_abt_e2e1', output: 'aborted' });
    expect(w.skipped!.filter((s) => s.what === 'turn_aborted').map((s) => s.line)).toEqual([8, 23]);
    // The last call has no token_count: its figures are inferred.
    expect(w.calls!.map((c) => c.output_source)).toEqual(['recorded', 'recorded', 'recorded', 'inferred']);
  });

  it("notes each abort in words that agree: the calls were left without output (not 'answered' by one note and 'never answered' by the other)", () => {
    const notes = w.skipped!.map((s) => `${s.line}: ${s.what} — ${s.why}`);
    expect(notes).toEqual([
      '8: turn_aborted — the user turn was aborted (interrupted) with 1 call(s) left without output: Codex answers them "aborted" at the start of the next user turn',
      `5: 1 call(s) ending user turn 1 — left without output: the user turn was aborted (turn_aborted); the replay ends the user turn with the call's text or a marker instead of the calls and their "aborted" answers`,
      // The file ends after the abort: no next user turn answers the call.
      '23: turn_aborted — the user turn was aborted (interrupted) with 1 call(s) left without output: the file ends there, so no user turn answers them',
      `21: 1 call(s) ending user turn 3 — left without output: the user turn was aborted (turn_aborted); the replay ends the user turn with the call's text or a marker instead of the calls`,
    ]);
    for (const n of notes) expect(n).not.toMatch(/never answered|answered "aborted" by/);
  });

  it('replays each aborted turn as ending in an answer, without the dropped calls', () => {
    const r = replayable(w);
    expect(r.userTurns[0]!.modelTurns[0]!.output.map((o) => o.type)).toEqual(['message']);
    expect(r.userTurns[1]!.input.map((i) => i.type)).toEqual(['message']);
    expect(r.userTurns[2]!.modelTurns[0]!.output.map((o) => o.type)).toEqual(['message']);
    expect(Object.keys(r.toolOutputs)).toEqual(['call_abt_cart2']);
  });

  it('still rejects a call without output when no turn_aborted follows it (truncated file)', () => {
    const text = readFileSync(DIR + 'rollout-aborted.jsonl', 'utf8').trimEnd().split('\n').slice(0, -1).join('\n');
    expect(() => parseWorkload(text, 'cut.jsonl', 'test')).toThrow(/^cut\.jsonl:22: exec_command call call_abt_pr3 has no output: the file ends before it \(truncated\)$/);
  });
});

describe('a sub-agent session', () => {
  it('reads as its own workload and says whose sub-agent it is', () => {
    const w = read('rollout-subagent.jsonl');
    expect(w.origin).toMatchObject({ session_source: 'subagent:thread_spawn', parent_thread_id: '019a-par-0000' });
    expect(w.userTurns[0]!.input).toHaveLength(1);
    expect(w.userTurns[0]!.modelTurns).toHaveLength(2);
  });
});

describe('model output before any input', () => {
  it('gets a placeholder user message and a note, not an error', () => {
    const text = [
      { type: 'session_meta', payload: { id: 's' } },
      { type: 'response_item', payload: { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hello' }] } },
    ]
      .map((r) => JSON.stringify(r))
      .join('\n');
    const w = parseWorkload(text, 'x.jsonl', 'test');
    expect(w.userTurns[0]!.input).toEqual([{ type: 'message', role: 'user', content: '(the rollout records no user input before this model output)' }]);
    expect(w.skipped).toEqual([{ line: 2, what: 'model output', why: 'comes before any user input: the replay sends a placeholder user message' }]);
  });
});

describe('inference against the recorded figures of the shipped rollout', () => {
  it('infers output within a few percent and input as a lower bound', () => {
    const full = readWorkload(DEFAULT_WORKLOAD);
    const text = readFileSync(DEFAULT_WORKLOAD, 'utf8').split('\n').filter((l) => !l.includes('"type":"token_count"')).join('\n');
    const inf = parseWorkload(text, 'stripped', 'test');
    expect(inf.calls).toHaveLength(66);
    const sum = (w: Workload, k: 'output_tokens') => w.calls!.reduce((n, c) => n + c[k], 0);
    // Recorded 9118 output tokens; the rules give 8698 (the constants were fitted on this file).
    expect(sum(inf, 'output_tokens') / sum(full, 'output_tokens')).toBeGreaterThan(0.9);
    expect(sum(inf, 'output_tokens') / sum(full, 'output_tokens')).toBeLessThan(1.05);
    // The rollout lacks Codex's tool definitions and encrypted reasoning: inferred input is below recorded.
    inf.calls!.forEach((c, i) => expect(c.input_tokens).toBeLessThan(full.calls![i]!.input_tokens));
    expect(inf.calls![65]!.input_tokens / full.calls![65]!.input_tokens).toBeGreaterThan(0.8);
  });
});

describe('the neutral format', () => {
  const ajv = new Ajv({ allErrors: true, strict: false });
  const check = ajv.compile(JSON.parse(readFileSync(SCHEMA, 'utf8')) as object);

  it('is what the bench writes: its JSON validates against docs/workload.schema.json', () => {
    for (const w of [truncateWorkload(readWorkload(DEFAULT_WORKLOAD), 6), replayable(read('rollout-compacted.jsonl')), replayable(read('rollout-aborted.jsonl'))]) {
      const json = JSON.parse(JSON.stringify({ llr_workload: 1, ...w })) as unknown;
      expect(check(json), JSON.stringify(check.errors)).toBe(true);
    }
  });

  it('reads a hand-written file with only the required fields, rebuilding the tools', () => {
    const w = read('other-agent.json');
    expect(check(JSON.parse(readFileSync(DIR + 'other-agent.json', 'utf8')))).toBe(true);
    expect(w.tools.map((t) => t.name)).toEqual(['read_file', 'write_file', 'run']);
    expect(w.userTurns.map((u) => u.modelTurns.length)).toEqual([3, 1]);
    expect(w.toolOutputs['run_3']).toEqual({ output: 'Tests: 6 passed, 6 total\n', duration_ms: 2300 });
  });

  it('tells the formats apart by content, not by extension', () => {
    const asJsonl = join(tmp, 'neutral.jsonl');
    writeFileSync(asJsonl, readFileSync(DIR + 'other-agent.json'));
    expect(readWorkload(asJsonl).name).toBe('other-agent: fix a failing test');
    const asJson = join(tmp, 'rollout.json');
    writeFileSync(asJson, readFileSync(DIR + 'rollout-subagent.jsonl'));
    expect(readWorkload(asJson).origin?.['format']).toBe('codex-rollout');
    // One line, with a `payload` key inside an input item: still the neutral format.
    const oneLine = { llr_workload: 1, userTurns: [{ input: [{ type: 'message', role: 'user', content: 'hi', payload: {} }], modelTurns: [{ output: [{ type: 'message', text: 'ok' }] }] }] };
    expect(parseWorkload(JSON.stringify(oneLine), 'one.jsonl', 'test').userTurns[0]!.modelTurns).toEqual([{ output: [{ type: 'message', text: 'ok' }] }]);
  });

  const fails = (text: string): WorkloadError => {
    try {
      parseWorkload(text, 'w.json', 'test');
    } catch (err) {
      expect(err).toBeInstanceOf(WorkloadError);
      return err as WorkloadError;
    }
    throw new Error('expected a WorkloadError');
  };

  it('names what is wrong: the JSON line, the schema path, an unanswered call', () => {
    expect(fails('{"llr_workload": 1,\n  "userTurns": [\n    {"input": [], }\n  ]\n}')).toMatchObject({ line: 3, message: expect.stringMatching(/^w\.json:3: not valid JSON/) });
    expect(fails('{"llr_workload": 1}').message).toMatch(/^w\.json: not an llr workload \(docs\/workload\.schema\.json\): \(top level\) must have required property 'userTurns'/);
    expect(fails('{"llr_workload": 1, "userTurns": [{"input": [], "modelTurns": [{"output": [{"type": "image"}]}]}]}').message).toMatch(/\/userTurns\/0\/modelTurns\/0\/output\/0/);
    const unanswered = {
      llr_workload: 1,
      userTurns: [{ input: [], modelTurns: [{ output: [{ type: 'function_call', name: 'f', arguments: '{}', call_id: 'c1' }] }, { output: [{ type: 'message', text: 'ok' }] }] }],
    };
    expect(fails(JSON.stringify(unanswered)).message).toBe('w.json: /userTurns/0/modelTurns/0/output/0: call c1 has no entry in toolOutputs (only a user turn\'s last model call may leave calls unanswered)');
  });

  it('refuses a model call that answers without a tool call before its user turn\'s last one, and names the constant a field must be', () => {
    // Schema-valid, but no design makes another model call after an answer: the replay failed at run time.
    const early = {
      llr_workload: 1,
      userTurns: [{ input: [], modelTurns: [{ output: [{ type: 'message', text: 'thinking' }] }, { output: [{ type: 'function_call', name: 'f', arguments: '{}', call_id: 'c1' }] }, { output: [{ type: 'message', text: 'ok' }] }] }],
      toolOutputs: { c1: { output: 'x' } },
    };
    expect(fails(JSON.stringify(early)).message).toBe("w.json: /userTurns/0/modelTurns/0: this model call has no function_call, so the run would end here; only a user turn's last model call may answer without calling a tool (start a new user turn instead)");
    expect(fails('{"llr_workload": 2, "userTurns": [{"input": [], "modelTurns": [{"output": [{"type": "message", "text": "ok"}]}]}]}').message).toBe('w.json: not an llr workload (docs/workload.schema.json): /llr_workload must be equal to constant 1');
  });

  it('refuses a tool definition named as the server would refuse it (the API\'s ^[a-zA-Z0-9_-]{1,64}$), naming where it is; a call may carry a name a model invented, and declares no tool', () => {
    const call = (name: string) => ({ llr_workload: 1, userTurns: [{ input: [], modelTurns: [{ output: [{ type: 'function_call', name, arguments: '{}', call_id: 'c1' }] }] }] });
    const tool = { ...call('ok_name-1'), tools: [{ type: 'function', name: 'has space' }] };
    expect(fails(JSON.stringify(tool)).message).toMatch(/\/tools\/0\/name must match pattern/);
    expect(fails(JSON.stringify(call(''))).message).toMatch(/\/userTurns\/0\/modelTurns\/0\/output\/0\/name must NOT have fewer than 1 characters/);
    expect(fails(JSON.stringify(call('x'.repeat(257)))).message).toMatch(/\/output\/0\/name must NOT have more than 256 characters/);
    for (const name of ['x'.repeat(64), 'ok_name-1']) expect(parseWorkload(JSON.stringify(call(name)), 'w.json', 'test').tools.map((t) => t.name)).toEqual([name]);
    for (const name of ['multi_tool_use.parallel', 'sql.query', 'x'.repeat(65)]) {
      const w = parseWorkload(JSON.stringify(call(name)), 'w.json', 'test');
      expect(w.userTurns[0]!.modelTurns[0]!.output).toEqual([{ type: 'function_call', name, arguments: '{}', call_id: 'c1' }]);
      expect(w.tools).toEqual([]);
    }
  });
});

describe('docs/benchmarks.md', () => {
  it('shows the schema file itself', () => {
    const doc = readFileSync(fileURLToPath(new URL('../../docs/benchmarks.md', import.meta.url)), 'utf8');
    const block = /### The neutral format[\s\S]*?```json\n([\s\S]*?)\n```/.exec(doc)?.[1];
    expect(block).toBe(readFileSync(SCHEMA, 'utf8').trimEnd());
  });
});

describe('a recorded replay position note', () => {
  // The replay model places a conversation by a note in any message, so a recorded one naming this run's length made
  // it skip recorded calls in every design, the run still `completed` (outside attack).
  const w = read('rollout-compacted.jsonl');
  const total = modelCallCount(w);
  const note = (n: number, of: number) => `[llr replay: position ${n} of ${of}]`;
  const withUserText = (text: string): Workload => {
    const c = structuredClone(w);
    c.userTurns[0]!.input.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] } as never);
    return c;
  };
  const withModelText = (text: string): Workload => {
    const c = structuredClone(w);
    const out = c.userTurns[0]!.modelTurns[0]!.output;
    const msg = out.find((o) => o.type === 'message');
    if (msg && msg.type === 'message') msg.text = text;
    else out.unshift({ type: 'message', text });
    return c;
  };

  it("refuses a workload whose user or model text holds one naming this run's calls, saying where", () => {
    expect(() => replayable(withUserText(`please go on ${note(2, total)} thanks`))).toThrow(WorkloadError);
    expect(() => replayable(withUserText(note(total, total)))).toThrow(/user turn 1's input.*replay position note naming this run's/);
    expect(() => replayable(withModelText(`Done. ${note(2, total)}`))).toThrow(/the model's text at model call 1 holds/);
  });

  it('keeps one naming another length, or no call of it, and its own anchors', () => {
    expect(() => replayable(withUserText(note(2, total + 1)))).not.toThrow();
    expect(() => replayable(withUserText(note(total + 1, total)))).not.toThrow();
    const r = replayable(w);
    expect(() => replayable(r)).not.toThrow();
  });
});

describe('an assistant message whose content is a refusal part (outside attack atk38 F3)', () => {
  // Read as no text, the call was taken as one that showed nothing: merged into the next, or refused at a turn's end.
  const text = readFileSync(DIR + 'rollout-ide-multi-turn.jsonl', 'utf8');
  const refusal = 'I cannot help with running those tests.';
  const refused = text
    .split('\n')
    .map((l) => (l.includes('"role":"assistant"') && l.includes('Two: test/cart.test.ts') ? l.replace(/"content":\[[^\]]*\]/, `"content":[{"type":"refusal","refusal":"${refusal}"}]`) : l))
    .join('\n');

  it('replays the refusal as the call\'s text, the calls as recorded, with a note', () => {
    expect(refused).not.toBe(text);
    const before = parseWorkload(text, 'a.jsonl', 'test');
    const after = parseWorkload(refused, 'b.jsonl', 'test');
    expect(modelCallCount(after)).toBe(modelCallCount(before));
    expect(after.userTurns.map((u) => u.modelTurns.length)).toEqual(before.userTurns.map((u) => u.modelTurns.length));
    const last = after.userTurns[0]!.modelTurns.at(-1)!;
    expect(last.output).toEqual([{ type: 'message', text: refusal }]);
    expect(last.output_tokens).toBe(before.userTurns[0]!.modelTurns.at(-1)!.output_tokens);
    expect(after.skipped).toContainEqual(expect.objectContaining({ what: '1 refusal part(s) of an assistant message', why: expect.stringMatching(/replayed as the message's text/) }));
    expect((before.skipped ?? []).some((s) => s.what.includes('refusal'))).toBe(false);
  });

  const withContent = (content: string) =>
    text
      .split('\n')
      .map((l) => (l.includes('"role":"assistant"') && l.includes('Two: test/cart.test.ts') ? l.replace(/"content":\[[^\]]*\]/, `"content":${content}`) : l))
      .join('\n');

  it('notes a refusal part with no text to replay (not a non-empty string), and does not call a part with text a refusal replayed (outside attack atk41 F3)', () => {
    for (const bad of ['42', 'null', '""']) {
      const w = parseWorkload(withContent(`[{"type":"refusal","refusal":${bad}},{"type":"output_text","text":"ok"}]`), 'c.jsonl', 'test');
      expect(w.skipped, bad).toContainEqual(expect.objectContaining({ what: '1 refusal part(s) of an assistant message', why: expect.stringMatching(/^no text to replay/) }));
      expect(w.userTurns[0]!.modelTurns.at(-1)!.output, bad).toEqual([{ type: 'message', text: 'ok' }]);
    }
    const both = parseWorkload(withContent('[{"type":"refusal","refusal":"no","text":"the text"}]'), 'd.jsonl', 'test');
    expect(both.userTurns[0]!.modelTurns.at(-1)!.output).toEqual([{ type: 'message', text: 'the text' }]);
    expect((both.skipped ?? []).some((s) => s.what.includes('refusal'))).toBe(false);
  });
});
