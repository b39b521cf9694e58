/**
 * The policies: replay's stateless lookup, the auto policy's three behaviours
 * (shell lines, forced or named tools, plain replies) as Codex CLI and other
 * clients drive them, and schema-generated arguments.
 */
import { describe, expect, it } from 'vitest';
import type { PlannedOutput } from '../../src/model/policies.js';
import { autoPolicy, replayPolicy, ReplayExhaustedError, replayPositionNote, scriptPolicy, visibleTokens } from '../../src/model/policies.js';
import { TurnScan } from '../../src/model/conversation.js';
import { mulberry32 } from '../../src/model/rng.js';
import { argsFromSchema, type JsonSchema } from '../../src/model/schema-args.js';
import { SimulatedModel } from '../../src/model/simulated.js';
import { countTokens } from '../../src/model/tokenizer.js';
import type { ReplayTurn } from '../../src/model/types.js';
import type { InputItem } from '../../src/protocol/objects.js';
import { assistant, call, collect, EXEC_COMMAND, FakeClock, fnTool, output, outputOf, request, SHELL, user, validate } from './model-fixtures.js';

const rng = () => mulberry32(42);
const auto = autoPolicy();
function planAuto(items: InputItem[], over: Parameters<typeof request>[0] = {}): PlannedOutput {
  return auto.plan(request({ items, ...over }), rng());
}

describe('replayPolicy', () => {
  const turns: ReplayTurn[] = [
    { output: [{ type: 'function_call', name: 'read', arguments: '{"path":"a"}', call_id: 'call_r1' }] },
    {
      output: [
        { type: 'message', text: 'Done.' },
        { type: 'function_call', name: 'write', arguments: '{"path":"b"}', call_id: 'call_w1' },
        { type: 'function_call', name: 'write', arguments: '{"path":"c"}', call_id: 'call_w2' },
      ],
    },
    { output: [{ type: 'message', text: 'Done.' }], output_tokens: 50 },
  ];
  const policy = replayPolicy(turns);
  const itemsAfter = (turn: number): InputItem[] => {
    const items: InputItem[] = [user('go')];
    if (turn >= 0) items.push(call('call_r1', 'read', '{"path":"a"}'), output('call_r1', 'A'));
    if (turn >= 1) {
      items.push(assistant('Done.'), call('call_w1', 'write', '{"path":"b"}'), call('call_w2', 'write', '{"path":"c"}'));
      items.push(output('call_w1', 'ok'), output('call_w2', [{ type: 'input_text', text: 'ok' }]));
    }
    if (turn >= 2) items.push(assistant('Done.'));
    return items;
  };

  it('finds the turn from the conversation alone, in any order (concurrent runs share one policy)', () => {
    expect(policy.plan(request({ items: itemsAfter(1) }), rng()).items).toEqual(turns[2]!.output);
    expect(policy.plan(request({ items: itemsAfter(-1) }), rng()).items).toEqual(turns[0]!.output);
    expect(policy.plan(request({ items: itemsAfter(0) }), rng()).items).toEqual(turns[1]!.output);
    expect(policy.plan(request({ items: itemsAfter(-1) }), rng()).items).toEqual(turns[0]!.output);
  });

  it('places a conversation by any call item carrying a recorded call_id: a custom_tool_call and its output as a function call', () => {
    // Codex sends its apply_patch calls back as custom_tool_call items: placed only by function calls, the replay played
    // the call's turn again, under the id the context already held (the engine fails such a run duplicate_call_id).
    const items: InputItem[] = [
      user('go'),
      { type: 'custom_tool_call', call_id: 'call_r1', name: 'read', input: 'a' } as unknown as InputItem,
      { type: 'custom_tool_call_output', call_id: 'call_r1', output: 'A' } as unknown as InputItem,
    ];
    expect(policy.plan(request({ items }), rng()).items).toEqual(turns[1]!.output);
  });

  it('attributes a message text that two turns share to the right turn', () => {
    // "Done." is in turns 1 and 2; after turn 1 only, the next turn is 2, not 3.
    const items = itemsAfter(1);
    expect(policy.plan(request({ items }), rng()).items).toEqual(turns[2]!.output);
    expect(() => policy.plan(request({ items: itemsAfter(2) }), rng())).toThrow(ReplayExhaustedError);
  });

  it('decodes recorded output tokens beyond the visible ones as hidden reasoning', () => {
    const plan = policy.plan(request({ items: itemsAfter(1) }), rng());
    expect(plan.hiddenTokens).toBe(50 - visibleTokens(plan.items));
    expect(policy.plan(request({ items: itemsAfter(0) }), rng()).hiddenTokens).toBe(0);
  });

  it('keeps recorded call ids and totals the recorded output tokens through the model', async () => {
    const model = new SimulatedModel({ policy, clock: new FakeClock() });
    const first = await collect(model, request({ items: itemsAfter(-1) }));
    expect(outputOf(first)).toEqual([{ type: 'function_call', name: 'read', call_id: 'call_r1', arguments: '{"path":"a"}' }]);
    const last = await collect(model, request({ items: itemsAfter(1) }));
    const reasoning = last.find((e) => e.type === 'reasoning');
    const deltas = last.filter((e) => e.type === 'text.delta').length;
    expect(reasoning?.type === 'reasoning' ? reasoning.tokens + deltas : NaN).toBe(50);
  });

  it('answers a user message between the tool outputs and the next model call with the next call and a note of its position', () => {
    // A client compacting on its own side asks for a summary there; the recording has no answer for it.
    const items = [...itemsAfter(0), user('Summarise the conversation so far.')];
    const plan = policy.plan(request({ items }), rng());
    expect(plan.items).toEqual([turns[1]!.output[0], { type: 'message', text: replayPositionNote(2, 3) }, ...turns[1]!.output.slice(1)]);
    expect(plan.pieces).toHaveLength(plan.items.length);
    // A user message where the recording has one (after a model call with no calls) is answered as recorded.
    const twoUserTurns = replayPolicy([{ output: [{ type: 'message', text: 'Hi.' }] }, turns[0]!, turns[2]!]);
    expect(twoUserTurns.plan(request({ items: [user('a'), assistant('Hi.'), user('b')] }), rng()).items).toEqual(turns[0]!.output);
  });

  it('places a conversation whose history was replaced by the note a client kept (any role, anywhere in the text)', () => {
    // Codex's local compaction: the user's messages, then the summary (the model's last text) as a user message.
    const summary = `Another model started this task; its summary:\n${replayPositionNote(2, 3)}`;
    expect(policy.plan(request({ items: [user('go'), user(summary)] }), rng()).items).toEqual(turns[1]!.output);
    expect(policy.plan(request({ items: [user(summary), user('go')] }), rng()).items).toEqual([
      turns[1]!.output[0],
      { type: 'message', text: replayPositionNote(2, 3) },
      ...turns[1]!.output.slice(1),
    ]);
    expect(policy.plan(request({ items: [assistant(replayPositionNote(3, 3))] }), rng()).items).toEqual(turns[2]!.output);
    // A note never moves a conversation back, and a note of another trajectory (another length) places nothing.
    expect(policy.plan(request({ items: [...itemsAfter(1), user(replayPositionNote(1, 3))] }), rng()).items).toEqual(turns[2]!.output);
    expect(policy.plan(request({ items: [user(replayPositionNote(3, 4))] }), rng()).items).toEqual(turns[0]!.output);
    // Nothing to place: the first call.
    expect(policy.plan(request({ items: [user('go'), user('a summary without a note')] }), rng()).items).toEqual(turns[0]!.output);
  });

  it('reads only the items added since its last call on a growing context (a run is not quadratic in its length)', () => {
    const long: ReplayTurn[] = Array.from({ length: 200 }, (_, i) => ({
      output: [{ type: 'function_call', name: 'run', arguments: '{}', call_id: `c${i}` }],
    }));
    long.push({ output: [{ type: 'message', text: 'end' }] });
    const replay = replayPolicy(long);
    let reads = 0;
    // Each item counts the reads of its `type`: what a scan of it costs.
    const counted = (item: InputItem): InputItem => {
      const { type, ...rest } = item as InputItem & { type: string };
      return Object.defineProperty({ ...rest }, 'type', { enumerable: true, get: () => (reads++, type) }) as InputItem;
    };
    const scan = new TurnScan();
    const items: InputItem[] = [counted(user('go'))];
    const readsPerCall: number[] = [];
    for (let i = 0; i < 200; i++) {
      const before = reads;
      const plan = replay.plan(request({ items, turns: scan }), rng());
      readsPerCall.push(reads - before);
      expect(plan.items).toEqual(long[i]!.output);
      items.push(counted(call(`c${i}`, 'run', '{}')), counted(output(`c${i}`, 'ok')));
    }
    expect(replay.plan(request({ items, turns: scan }), rng()).items).toEqual(long[200]!.output);
    // The same reads at the 200th call as at the second: two new items each time.
    expect(Math.max(...readsPerCall.slice(1))).toBe(readsPerCall[1]);
    // Without a kept scan (no `turns`), the same answer from the whole conversation.
    expect(replay.plan(request({ items: items.slice(0, 21) }), rng()).items).toEqual(long[10]!.output);
  });

  it('places an assistant message by a text the run recorded at many calls without searching its list from the start', () => {
    // "Done." at each of 20,000 calls: each of a request's 100,000 such messages searched the list from its start
    // (1.5 s holding the event loop here); by bisection, tens of ms.
    const many: ReplayTurn[] = Array.from({ length: 20_000 }, () => ({ output: [{ type: 'message', text: 'Done.' }] }));
    many.push({ output: [{ type: 'message', text: 'end' }] });
    const replay = replayPolicy(many);
    const items = [user('go'), ...Array.from({ length: 100_000 }, () => assistant('Done.'))];
    const t = performance.now();
    expect(replay.plan(request({ items }), rng()).items).toEqual([{ type: 'message', text: 'end' }]);
    expect(performance.now() - t).toBeLessThan(500);
    // Placed as before: the third "Done." is the third call's, so the fourth call comes next.
    expect(replay.plan(request({ items: items.slice(0, 4) }), rng()).items).toEqual(many[3]!.output);
  });

  it('rejects a trajectory that reuses a call id', () => {
    const dup: ReplayTurn[] = [turns[0]!, turns[0]!];
    expect(() => replayPolicy(dup)).toThrow(/call_r1/);
  });
});

describe('scriptPolicy', () => {
  it('plays steps in order, text before calls, and reports what remains', () => {
    const policy = scriptPolicy([{ text: 'one' }, { text: 'two', calls: [{ name: 'f', arguments: '{"a":1}' }] }]);
    expect(policy.remaining()).toBe(2);
    expect(policy.plan(request(), rng()).items).toEqual([{ type: 'message', text: 'one' }]);
    expect(policy.plan(request(), rng()).items).toEqual([
      { type: 'message', text: 'two' },
      { type: 'function_call', name: 'f', arguments: '{"a":1}' },
    ]);
    expect(policy.remaining()).toBe(0);
  });

  it('refuses an empty step up front', () => {
    expect(() => scriptPolicy([{}])).toThrow(/step 0/);
  });
});

describe('autoPolicy: shell lines', () => {
  it('runs `$ echo hi` through Codex’s exec_command, then summarises the output', () => {
    const ask = user('Please run this:\n$ echo hi');
    const first = planAuto([ask], { tools: [EXEC_COMMAND] });
    expect(first.items).toEqual([{ type: 'function_call', name: 'exec_command', arguments: '{"cmd":"echo hi"}' }]);

    // Codex returns the output wrapped in a header, sometimes as input_text parts.
    const codexOutput = 'Chunk ID: 1a2b\nWall time: 0.0012 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\nhi\n';
    const items = [ask, call('call_1', 'exec_command', '{"cmd":"echo hi"}'), output('call_1', [{ type: 'input_text', text: codexOutput }])];
    expect(planAuto(items, { tools: [EXEC_COMMAND] }).items).toEqual([{ type: 'message', text: 'Ran 1 command.\n- `echo hi` → hi' }]);
  });

  it('uses the classic shell tool’s argv form and reads its JSON output', () => {
    const ask = user([{ type: 'input_text', text: '$ echo hi' }]);
    const first = planAuto([ask], { tools: [SHELL] });
    expect(first.items).toEqual([{ type: 'function_call', name: 'shell', arguments: '{"command":["bash","-lc","echo hi"]}' }]);
    const items = [
      ask,
      call('call_1', 'shell', '{"command":["bash","-lc","echo hi"]}'),
      output('call_1', '{"output":"hi\\n","metadata":{"exit_code":0,"duration_seconds":0.01}}'),
    ];
    expect(planAuto(items, { tools: [SHELL] }).items[0]).toEqual({ type: 'message', text: 'Ran 1 command.\n- `echo hi` → hi' });
  });

  it('calls every line at once with parallel_tool_calls, one at a time without', () => {
    const ask = user('$ echo one\n$ ls -la\n$ echo one');
    const parallel = planAuto([ask], { tools: [EXEC_COMMAND], parallel_tool_calls: true });
    expect(parallel.items.map((i) => i.type === 'function_call' && i.arguments)).toEqual([
      '{"cmd":"echo one"}',
      '{"cmd":"ls -la"}',
      '{"cmd":"echo one"}',
    ]);

    const serial = [ask, call('c1', 'exec_command', '{"cmd":"echo one"}'), output('c1', 'one')];
    expect(planAuto(serial, { tools: [EXEC_COMMAND] }).items).toEqual([
      { type: 'function_call', name: 'exec_command', arguments: '{"cmd":"ls -la"}' },
    ]);
    // A line written twice runs twice; then the answer covers all three, long output truncated.
    const long = 'x'.repeat(200);
    const done = [...serial, call('c2', 'exec_command', '{"cmd":"ls -la"}'), output('c2', long), call('c3', 'exec_command', '{"cmd":"echo one"}'), output('c3', '')];
    const text = planAuto(done, { tools: [EXEC_COMMAND] }).items[0];
    expect(text).toEqual({
      type: 'message',
      text: `Ran 3 commands.\n- \`echo one\` → one\n- \`ls -la\` → ${'x'.repeat(79)}…\n- \`echo one\` → (no output)`,
    });
  });

  it('answers in text when tools are off or no shell tool is offered', () => {
    expect(planAuto([user('$ echo hi')], { tools: [EXEC_COMMAND], tool_choice: 'none' }).items[0]?.type).toBe('message');
    expect(planAuto([user('$ echo hi')], { tools: [] }).items[0]?.type).toBe('message');
  });

  it('only counts calls made after the latest user message', () => {
    const items = [user('$ echo hi'), call('c1', 'exec_command', '{"cmd":"echo hi"}'), output('c1', 'hi'), assistant('Ran 1 command.'), user('again:\n$ echo hi')];
    expect(planAuto(items, { tools: [EXEC_COMMAND] }).items[0]).toMatchObject({ type: 'function_call', arguments: '{"cmd":"echo hi"}' });
  });
});

describe('autoPolicy: function tools', () => {
  const weather = fnTool('get_weather', {
    type: 'object',
    properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'unit', 'days'],
    additionalProperties: false,
  });
  const time = fnTool('get_time', { type: 'object', properties: {}, required: [] });

  it('calls a tool the message names, with schema-valid arguments, then summarises its output', () => {
    const ask = user('What does get_weather say for tomorrow?');
    const plan = planAuto([ask], { tools: [time, weather] });
    expect(plan.items).toHaveLength(1);
    const item = plan.items[0]!;
    expect(item).toMatchObject({ type: 'function_call', name: 'get_weather' });
    const args: unknown = JSON.parse(item.type === 'function_call' ? item.arguments : '');
    expect(validate(weather.parameters!, args)).toEqual([]);
    expect(args).toMatchObject({ unit: 'celsius' });

    const items = [ask, call('c1', 'get_weather', JSON.stringify(args)), output('c1', 'Sunny, 21°C\nwind: light')];
    expect(planAuto(items, { tools: [time, weather] }).items).toEqual([{ type: 'message', text: 'Called 1 tool.\n- `get_weather` → Sunny, 21°C' }]);
  });

  it('does not match a tool name inside another word', () => {
    expect(planAuto([user('my_get_weather_helper is broken')], { tools: [weather] }).items[0]?.type).toBe('message');
  });

  it('honours a forced function and "required"', () => {
    const forced = planAuto([user('hello')], { tools: [weather, time], tool_choice: { type: 'function', name: 'get_time' } });
    expect(forced.items).toEqual([{ type: 'function_call', name: 'get_time', arguments: '{}' }]);
    const required = planAuto([user('hello')], { tools: [weather, time], tool_choice: 'required' });
    expect(required.items[0]).toMatchObject({ type: 'function_call', name: 'get_weather' });
  });

  it('calls every named tool at once with parallel_tool_calls', () => {
    const plan = planAuto([user('use get_time and get_weather')], { tools: [weather, time], parallel_tool_calls: true });
    expect(plan.items.map((i) => i.type === 'function_call' && i.name)).toEqual(['get_weather', 'get_time']);
  });
});

describe('autoPolicy: plain replies', () => {
  it('is deterministic for the same seed and input, and 20–60 tokens long', () => {
    const a = planAuto([user('Tell me about prefix caching')]);
    const b = planAuto([user('Tell me about prefix caching')]);
    expect(a).toEqual(b);
    const text = a.items[0]?.type === 'message' ? a.items[0].text : '';
    expect(text).toContain('Tell me about prefix caching');
    expect(countTokens(text)).toBeGreaterThanOrEqual(20);
    expect(countTokens(text)).toBeLessThanOrEqual(60);
    const other = auto.plan(request({ items: [user('Tell me about prefix caching')] }), mulberry32(43));
    expect(other).not.toEqual(a);
  });

  it('gives the same text through the model regardless of call order or earlier calls', async () => {
    const req = request({ items: [user('What is a long-lived response?')] });
    const m1 = new SimulatedModel({ policy: autoPolicy(), clock: new FakeClock(), seed: 3 });
    const m2 = new SimulatedModel({ policy: autoPolicy(), clock: new FakeClock(), seed: 3 });
    await collect(m2, request({ items: [user('warm up')] }));
    expect(outputOf(await collect(m2, req))).toEqual(outputOf(await collect(m1, req)));
  });

  it('answers briefly when there is no user message (a client warm-up)', () => {
    const plan = planAuto([], { tools: [EXEC_COMMAND] });
    expect(plan.items).toHaveLength(1);
    const text = plan.items[0]?.type === 'message' ? plan.items[0].text : '';
    expect(countTokens(text)).toBeGreaterThan(0);
    expect(countTokens(text)).toBeLessThan(15);
  });
});

describe('argsFromSchema', () => {
  const schema: JsonSchema = {
    type: 'object',
    $defs: { Point: { type: 'object', properties: { x: { type: 'number', exclusiveMinimum: 0 }, y: { type: 'number' } }, required: ['x', 'y'] } },
    properties: {
      name: { type: 'string', minLength: 12, maxLength: 20 },
      count: { type: 'integer', minimum: 5, maximum: 6 },
      ratio: { type: 'number', minimum: 0.1, maximum: 0.2 },
      flag: { type: 'boolean' },
      mode: { enum: ['fast', 'slow'] },
      fixed: { const: 'v1' },
      tags: { type: 'array', items: { type: 'string' }, minItems: 2, maxItems: 3 },
      where: { $ref: '#/$defs/Point' },
      nested: { type: 'object', properties: { deep: { type: 'array', items: { $ref: '#/$defs/Point' } } }, required: ['deep'] },
      maybe: { anyOf: [{ type: 'null' }, { type: 'integer', minimum: 100 }] },
      either: { type: ['null', 'string'], format: 'date-time' },
      merged: { allOf: [{ $ref: '#/$defs/Point' }, { properties: { z: { type: 'integer' } }, required: ['z'] }] },
      withDefault: { type: 'string', default: 'dflt' },
    },
    required: ['name', 'count', 'ratio', 'flag', 'mode', 'fixed', 'tags', 'where', 'nested', 'maybe', 'either', 'merged', 'withDefault'],
    additionalProperties: false,
  };

  it('produces arguments that validate, for many seeds', () => {
    for (let seed = 0; seed < 50; seed++) {
      const args = argsFromSchema(schema, mulberry32(seed));
      expect(validate(schema, args, schema), `seed ${seed}: ${JSON.stringify(args)}`).toEqual([]);
    }
  });

  it('uses enum, const and default values, and honours required and bounds', () => {
    const args = argsFromSchema(schema, mulberry32(1));
    expect(args).toMatchObject({ mode: 'fast', fixed: 'v1', withDefault: 'dflt', flag: true });
    expect(Object.keys(args).sort()).toEqual([...(schema.required as string[])].sort());
    expect(args.count === 5 || args.count === 6).toBe(true);
    expect(typeof args.maybe).toBe('number');
  });

  it('is deterministic for a seed and gives {} without parameters', () => {
    expect(argsFromSchema(schema, mulberry32(9))).toEqual(argsFromSchema(schema, mulberry32(9)));
    expect(argsFromSchema(null, mulberry32(9))).toEqual({});
    expect(argsFromSchema(undefined, mulberry32(9))).toEqual({});
  });

  it('ends on recursive schemas', () => {
    const tree: JsonSchema = { $defs: { Node: { type: 'object', properties: { children: { type: 'array', items: { $ref: '#/$defs/Node' } } }, required: ['children'] } }, $ref: '#/$defs/Node' };
    const args = argsFromSchema(tree, mulberry32(1));
    expect(validate(tree, args, tree)).toEqual([]);
  });
});
