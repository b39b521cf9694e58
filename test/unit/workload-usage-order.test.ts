/**
 * Where a rollout's `token_count` events stand. Codex today records each
 * item as it arrives, so a model call's usage event follows its items (and
 * sometimes its tool outputs); Codex versions of 2025 recorded a response's
 * items only once it had completed, after the usage event its completion
 * sent, with each call's output right after the call. The same conversation
 * written in either order must read the same: every call its own figures,
 * a response's parallel calls one model call. Outside attack atk46 F1/F2.
 */
import { describe, expect, it } from 'vitest';
import { parseWorkload, type Workload } from '../../src/workload/load.js';
import { replayable } from '../../src/workload/replayable.js';

interface Call {
  text?: string;
  tools: Array<{ id: string; args: string; output: string }>;
  usage: [number, number] | null;
}
type Turn = { user: string; calls: Call[] };

let clock = 0;
const rec = (type: string, payload: Record<string, unknown>) => JSON.stringify({ timestamp: new Date(Date.UTC(2025, 9, 1, 10, 0, clock++)).toISOString(), type, payload });
const meta = () => rec('session_meta', { id: 'sess-order', timestamp: '2025-10-01T10:00:00Z', cwd: '/x', originator: 'codex_cli_rs', cli_version: '0.46.0', instructions: 'You are a coding agent.' });
const user = (text: string) => [rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text }] }), rec('event_msg', { type: 'user_message', message: text, images: [] })];
const reasoning = () => rec('response_item', { type: 'reasoning', summary: [{ type: 'summary_text', text: 'thinking it over' }], content: null, encrypted_content: 'gAAAA' });
const message = (text: string) => rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
const call = (t: Call['tools'][number]) => rec('response_item', { type: 'function_call', name: 'shell', arguments: t.args, call_id: t.id });
const output = (t: Call['tools'][number]) => rec('response_item', { type: 'function_call_output', call_id: t.id, output: t.output });
/** A usage event with a running total, as Codex writes it (a repeated total is skipped, so each must differ). */
function usageWriter() {
  let totalIn = 0;
  let totalOut = 0;
  let last: [number, number] = [0, 0];
  const u = (i: number, o: number) => ({ input_tokens: i, cached_input_tokens: 0, output_tokens: o, reasoning_output_tokens: 0, total_tokens: i + o });
  const event = () => rec('event_msg', { type: 'token_count', info: { total_token_usage: u(totalIn, totalOut), last_token_usage: u(...last), model_context_window: 272000 }, rate_limits: null });
  /** A response's usage; null: one the API sent none for, which Codex answers with its running total again. */
  return (usage: [number, number] | null) => {
    if (usage === null) return event();
    totalIn += usage[0];
    totalOut += usage[1];
    last = usage;
    return event();
  };
}
const rateLimitsOnly = () => rec('event_msg', { type: 'token_count', info: null, rate_limits: { primary: null } });

/**
 * Today's order: a call's items, its usage, then its outputs (or the outputs first: both occur). `steered`: each user
 * turn's last usage event comes after the next user message (the user typed while the model finished).
 */
function writeAfter(turns: Turn[], outputsFirst = false, steered = false, head = [meta()]): string {
  const usage = usageWriter();
  const lines = [...head];
  let late: string | null = null;
  for (const t of turns) {
    lines.push(...user(t.user));
    if (late !== null) lines.push(late);
    late = null;
    lines.push(rateLimitsOnly());
    for (const [i, c] of t.calls.entries()) {
      lines.push(reasoning());
      if (c.text !== undefined) lines.push(message(c.text));
      for (const tool of c.tools) lines.push(call(tool));
      if (outputsFirst) for (const tool of c.tools) lines.push(output(tool));
      if (steered && i === t.calls.length - 1) late = usage(c.usage);
      else lines.push(usage(c.usage));
      if (!outputsFirst) for (const tool of c.tools) lines.push(output(tool));
    }
  }
  if (late !== null) lines.push(late);
  return lines.join('\n') + '\n';
}

/** The 2025 order: the usage of a response, then its items, each call followed by its output. */
function writeFirst(turns: Turn[]): string {
  const usage = usageWriter();
  const lines = [meta()];
  for (const t of turns) {
    lines.push(...user(t.user), rateLimitsOnly());
    for (const c of t.calls) {
      lines.push(usage(c.usage));
      lines.push(reasoning());
      if (c.text !== undefined) lines.push(message(c.text));
      for (const tool of c.tools) lines.push(call(tool), output(tool));
    }
  }
  return lines.join('\n') + '\n';
}

const CONVERSATION: Turn[] = [
  {
    user: 'list the files, then read both',
    calls: [
      { tools: [{ id: 'c1', args: '{"command":["ls"]}', output: 'a.txt\nb.txt' }], usage: [1000, 50] },
      // Parallel calls of one response: one model call.
      {
        tools: [
          { id: 'c2', args: '{"command":["cat","a.txt"]}', output: 'alpha' },
          { id: 'c3', args: '{"command":["cat","b.txt"]}', output: 'beta' },
        ],
        usage: [1100, 60],
      },
      { text: 'Both files are read: alpha and beta.', tools: [], usage: [1300, 70] },
    ],
  },
  {
    user: 'count the lines',
    calls: [
      { tools: [{ id: 'c4', args: '{"command":["wc","-l","a.txt","b.txt"]}', output: '2 total' }], usage: [1500, 40] },
      { text: 'Two lines in all.', tools: [], usage: [1600, 30] },
    ],
  },
];

const read = (text: string): Workload => parseWorkload(text, 'order.jsonl', 'test');
/** What a replay depends on: the turns, outputs and each call's figures (not the lines they were read at). */
const replayed = (w: Workload) => ({
  userTurns: w.userTurns,
  toolOutputs: Object.fromEntries(Object.entries(w.toolOutputs).map(([k, v]) => [k, v.output])),
  figures: w.calls!.map(({ line: _line, ...f }) => f),
  recorded: w.recorded,
});

describe('usage events before or after their model call', () => {
  const after = read(writeAfter(CONVERSATION));

  it("today's order: each call its own figures, all recorded", () => {
    expect(after.calls!.map((c) => [c.input_tokens, c.output_tokens, c.input_source, c.output_source])).toEqual(
      CONVERSATION.flatMap((t) => t.calls.map((c) => [c.usage![0], c.usage![1], 'recorded', 'recorded'])),
    );
    expect(after.recorded.model_calls).toBe(5);
    expect(after.skipped).toEqual([]);
  });

  it('outputs before the usage event read the same', () => {
    expect(replayed(read(writeAfter(CONVERSATION, true)))).toEqual(replayed(after));
  });

  it('the 2025 order (usage first, each output right after its call) reads as the same conversation, with one note', () => {
    const first = read(writeFirst(CONVERSATION));
    expect(replayed(first)).toEqual(replayed(after));
    expect(first.userTurns[0]!.modelTurns.map((t) => t.output.map((o) => (o.type === 'function_call' ? o.call_id : 'text')))).toEqual([['c1'], ['c2', 'c3'], ['text']]);
    expect(first.skipped!).toHaveLength(1);
    expect(first.skipped![0]!.why).toContain("come before their model call's items");
    expect(first.skipped![0]!.line).toBe(5); // the first usage event: meta, user item, user event, rate limits, then it
    expect(replayable(first).userTurns).toHaveLength(2);
  });

  it('the 2025 order: a usage event whose call was never recorded (aborted) is noted, not given to the next call', () => {
    const text = writeFirst(CONVERSATION);
    const lines = text.trim().split('\n');
    // Before the second user turn: a usage event with no items after it, then the user's next message.
    const at = lines.findIndex((l) => l.includes('count the lines'));
    const usage = usageWriter();
    for (const c of CONVERSATION[0]!.calls) usage(c.usage!);
    lines.splice(at, 0, usage([9999, 999]));
    // The later totals now differ from those written: rewrite them from the stray one on.
    const w = read(lines.join('\n') + '\n');
    expect(w.calls!.map((c) => [c.input_tokens, c.output_tokens])).toEqual(CONVERSATION.flatMap((t) => t.calls.map((c) => c.usage!)));
    expect(w.recorded.model_calls).toBe(5);
    expect(w.skipped!.map((s) => [s.line, s.what, s.why])).toContainEqual([at + 1, 'token_count', expect.stringContaining('a user turn starts before any model call')]);
  });

  it("today's order: a usage event recorded after the next user message is still its call's", () => {
    const text = writeAfter(CONVERSATION);
    const lines = text.trim().split('\n');
    // The first turn's last usage event moved after the second turn's user message (the user steered).
    const late = lines.findIndex((l) => l.includes('"input_tokens":1300,"cached_input_tokens":0,"output_tokens":70,"reasoning_output_tokens":0,"total_tokens":1370}'));
    expect(late).toBeGreaterThan(0);
    const [moved] = lines.splice(late, 1);
    const next = lines.findIndex((l) => l.includes('count the lines') && l.includes('user_message'));
    lines.splice(next + 1, 0, moved!);
    const w = read(lines.join('\n') + '\n');
    expect(replayed(w)).toEqual(replayed(after));
    expect(w.skipped).toEqual([]);
  });

  it("today's order with outputs before their usage and every user turn steered reads as today's order (outside attack atk47 F1)", () => {
    // Each steer's usage event stands between the user's message and the model's next items, as the 2025 order's do;
    // read by counting such events, such a file was taken for the 2025 order and every call given the one before's.
    const turns = [...CONVERSATION, { user: 'and now?', calls: [{ text: 'Nothing more.', tools: [], usage: [1700, 20] as [number, number] }] }];
    const w = read(writeAfter(turns, true, true));
    expect(w.calls!.map((c) => [c.input_tokens, c.output_tokens, c.input_source])).toEqual(turns.flatMap((t) => t.calls.map((c) => [c.usage![0], c.usage![1], 'recorded'])));
    expect(w.skipped!.filter((n) => n.what === 'token_count events')).toEqual([]);
  });

  it('a file whose parts are in different orders (a session resumed by another Codex version) reads each part in its own (atk47 F2)', () => {
    const [older, newer] = [CONVERSATION.slice(0, 1), CONVERSATION.slice(1)];
    const first = writeFirst(older).trimEnd().split('\n');
    const rest = writeAfter(newer, false, false, [meta()]);
    const w = read(`${first.join('\n')}\n${rest}`);
    expect(w.calls!.map((c) => [c.input_tokens, c.output_tokens, c.input_source])).toEqual(CONVERSATION.flatMap((t) => t.calls.map((c) => [c.usage![0], c.usage![1], 'recorded'])));
    expect(w.skipped!.filter((n) => n.what === 'token_count events')).toHaveLength(1);
  });

  it('the 2025 order whose first response has no usage event at all still reads so (outside attack atk48 N1)', () => {
    // Its first usage event then follows that response's tool output, which says neither order.
    const lines = writeFirst(CONVERSATION).trimEnd().split('\n');
    const firstUsage = lines.findIndex((l) => l.includes('"last_token_usage":{"input_tokens":1000,'));
    lines.splice(firstUsage, 1);
    const w = read(lines.join('\n') + '\n');
    expect(w.calls!.map((c) => (c.input_source === 'recorded' ? c.input_tokens : 'inferred'))).toEqual(['inferred', 1100, 1300, 1500, 1600]);
  });

  it('a response without usage (Codex wrote its running total again) infers only its figures, in either order', () => {
    const sparse = CONVERSATION.map((t) => ({ ...t, calls: t.calls.map((c, i) => (i === 1 ? { ...c, usage: null } : c)) }));
    const w = read(writeFirst(sparse));
    expect(w.calls!.map((c) => c.output_source)).toEqual(['recorded', 'inferred', 'recorded', 'recorded', 'inferred']);
    expect(w.calls!.filter((c) => c.output_source === 'recorded').map((c) => c.output_tokens)).toEqual([50, 70, 40]);
    const later = read(writeAfter(sparse));
    expect(replayed(w)).toEqual(replayed(later));
    expect(w.skipped!.filter((s) => s.why === 'repeats the previous total_token_usage')).toHaveLength(2);
  });

  it('usage events with only a running total (no last_token_usage) give each call the difference, in either order (atk46 F7)', () => {
    const totalsOnly = (text: string) => text.replace(/"last_token_usage":\{[^}]*\}/g, '"last_token_usage":null');
    for (const text of [writeAfter(CONVERSATION), writeFirst(CONVERSATION)]) {
      const w = read(totalsOnly(text));
      expect(w.calls!.map((c) => [c.input_tokens, c.output_tokens, c.input_source])).toEqual(CONVERSATION.flatMap((t) => t.calls.map((c) => [c.usage![0], c.usage![1], 'recorded'])));
      expect(w.skipped!.filter((n) => /total_token_usage less the previous one/.test(n.why))).toHaveLength(1);
    }
    // A total below the previous one (a reset) gives nothing: that call's figures are inferred, and it is noted.
    const lines = totalsOnly(writeAfter(CONVERSATION)).trimEnd().split('\n');
    const third = lines.findIndex((l) => l.includes('"total_token_usage":{"input_tokens":3400,'));
    expect(third).toBeGreaterThan(0);
    lines[third] = lines[third]!.replace('"input_tokens":3400,', '"input_tokens":10,');
    const reset = read(lines.join('\n') + '\n');
    expect(reset.calls![2]!.input_source).toBe('inferred');
    expect(reset.skipped!.map((n) => [n.line, n.why])).toContainEqual([third + 1, expect.stringContaining('below the previous one')]);
  });

  it('total-only events mixed with last-only ones, a total repeated after a reset, and bad totals (outside attack atk51 F2–F4)', () => {
    const figures = (w: Workload) => w.calls!.map((c) => (c.input_source === 'recorded' ? [c.input_tokens, c.output_tokens] : 'inferred'));
    const expected = CONVERSATION.flatMap((t) => t.calls.map((c) => c.usage!));
    const usageLines = (text: string) => text.trimEnd().split('\n');
    const isUsage = (l: string) => l.includes('"type":"token_count"') && l.includes('"last_token_usage":{');
    // Every other usage event has only its last usage, the others only their total: each call still gets its own.
    let k = 0;
    const mixed = usageLines(writeAfter(CONVERSATION)).map((l) =>
      isUsage(l) ? (k++ % 2 === 0 ? l.replace(/"total_token_usage":\{[^}]*\}/, '"total_token_usage":null') : l.replace(/"last_token_usage":\{[^}]*\}/, '"last_token_usage":null')) : l,
    );
    expect(figures(read(mixed.join('\n') + '\n'))).toEqual(expected);
    // A total below the one before, then the same total again: the repeat is a repeat (it was read as a call of 0 / 0).
    const totalsOnly = usageLines(writeAfter(CONVERSATION).replace(/"last_token_usage":\{[^}]*\}/g, '"last_token_usage":null'));
    const third = totalsOnly.findIndex((l) => l.includes('"total_token_usage":{"input_tokens":3400,'));
    totalsOnly[third] = totalsOnly[third]!.replace('"input_tokens":3400,', '"input_tokens":10,');
    totalsOnly.splice(third + 1, 0, totalsOnly[third]!);
    const reset = read(totalsOnly.join('\n') + '\n');
    expect(figures(reset)[2]).toBe('inferred');
    expect(reset.skipped!.some((n) => n.why === 'repeats the previous total_token_usage')).toBe(true);
    // A total that is not a whole non-negative number is left alone (the file read, that call inferred), not fatal.
    for (const bad of ['-5', '2.5', '1e400', '9007199254740993']) {
      const lines = usageLines(writeAfter(CONVERSATION).replace(/"last_token_usage":\{[^}]*\}/g, '"last_token_usage":null'));
      const at = lines.findIndex((l) => l.includes('"total_token_usage":{"input_tokens":1000,'));
      lines[at] = lines[at]!.replace('"input_tokens":1000,', `"input_tokens":${bad},`);
      expect(figures(read(lines.join('\n') + '\n'))[0], bad).toBe('inferred');
    }
  });
});
