/**
 * One model call translated into wire events, without a run or socket: the
 * Responses API's streaming order for a message and for a function call,
 * output indexes that follow the response's output list, the finished items
 * and calls collected in order, the output tokens each model event carries,
 * and a loud error for a model stream out of order.
 */
import { describe, expect, it } from 'vitest';
import { Segment, carriesTokens } from '../../src/engine/segment.js';
import type { ModelEvent } from '../../src/model/types.js';
import type { UnnumberedEvent } from '../../src/protocol/events.js';
import type { OutputItem } from '../../src/protocol/objects.js';

type Applied = Exclude<ModelEvent, { type: 'prefill' }>;

function segment(output: OutputItem[] = []) {
  const events: UnnumberedEvent[] = [];
  const seg = new Segment((e) => events.push(e), output);
  const apply = (evs: Applied[]) => evs.reduce((tokens, ev) => tokens + seg.apply(ev), 0);
  return { seg, events, output, apply };
}

const message = (...deltas: string[]): Applied[] => [{ type: 'message.start' }, ...deltas.map((delta) => ({ type: 'text.delta' as const, delta })), { type: 'message.end' }];
const call = (call_id: string, name: string, ...deltas: string[]): Applied[] => [
  { type: 'call.start', call_id, name },
  ...deltas.map((delta) => ({ type: 'args.delta' as const, delta })),
  { type: 'call.end' },
];

describe('Segment', () => {
  it('a message streams added, part added, one delta per token, then the done events, and is collected completed', () => {
    const { seg, events, output, apply } = segment();
    expect(apply(message('Hel', 'lo', '!'))).toBe(3);
    expect(events.map((e) => e.type)).toEqual([
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
    ]);
    const done = events.find((e) => e.type === 'response.output_text.done') as Extract<UnnumberedEvent, { type: 'response.output_text.done' }>;
    expect(done.text).toBe('Hello!');
    const itemDone = events.at(-1) as Extract<UnnumberedEvent, { type: 'response.output_item.done' }>;
    expect(itemDone.item).toMatchObject({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello!' }] });
    // Every event names the same item and output index.
    const ids = new Set(events.map((e) => ('item_id' in e ? e.item_id : 'item' in e ? (e.item as { id: string }).id : null)));
    expect(ids.size).toBe(1);
    expect(new Set(events.map((e) => ('output_index' in e ? e.output_index : null)))).toEqual(new Set([0]));
    expect(seg.items).toHaveLength(1);
    expect(seg.items[0]).toMatchObject({ type: 'message', status: 'completed' });
    expect(seg.calls).toEqual([]);
    expect(output).toHaveLength(1);
    expect(output[0]).toMatchObject({ status: 'completed', content: [{ text: 'Hello!' }] });
  });

  it('the added event is a snapshot: later deltas do not change what was emitted', () => {
    const { events, apply } = segment();
    apply(message('abc'));
    const added = events[0] as Extract<UnnumberedEvent, { type: 'response.output_item.added' }>;
    expect(added.item).toMatchObject({ status: 'in_progress', content: [] });
  });

  it('a function call streams added, argument deltas, arguments done, item done, and is collected as a call', () => {
    const { seg, events, apply } = segment();
    expect(apply(call('call_1', 'exec_command', '{"cmd":', '"ls"}'))).toBe(2);
    expect(events.map((e) => e.type)).toEqual([
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
    ]);
    const argsDone = events[3] as Extract<UnnumberedEvent, { type: 'response.function_call_arguments.done' }>;
    expect(argsDone).toMatchObject({ name: 'exec_command', arguments: '{"cmd":"ls"}' });
    expect(seg.calls).toEqual([expect.objectContaining({ type: 'function_call', call_id: 'call_1', name: 'exec_command', arguments: '{"cmd":"ls"}', status: 'completed' })]);
    expect(seg.items).toEqual(seg.calls);
  });

  it('items take the next output indexes of the response, in order, across segments', () => {
    const output: OutputItem[] = [];
    const first = segment(output);
    first.apply(message('thinking aloud'));
    const second = segment(output);
    second.apply([...call('call_a', 'f', '{}'), ...call('call_b', 'g', '{}'), ...message('done')]);
    expect(output.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call', 'message']);
    const added = second.events.filter((e) => e.type === 'response.output_item.added') as Array<Extract<UnnumberedEvent, { type: 'response.output_item.added' }>>;
    expect(added.map((e) => e.output_index)).toEqual([1, 2, 3]);
    expect(second.seg.items.map((i) => i.type)).toEqual(['function_call', 'function_call', 'message']);
    expect(second.seg.calls.map((c) => c.call_id)).toEqual(['call_a', 'call_b']);
  });

  it('hidden reasoning counts its tokens and emits nothing', () => {
    const { seg, events } = segment();
    expect(seg.apply({ type: 'reasoning', tokens: 42 })).toBe(42);
    expect(events).toEqual([]);
    expect(seg.items).toEqual([]);
  });

  it('only deltas and reasoning carry tokens', () => {
    const kinds: Array<[ModelEvent, boolean]> = [
      [{ type: 'text.delta', delta: 'x' }, true],
      [{ type: 'args.delta', delta: 'x' }, true],
      [{ type: 'reasoning', tokens: 1 }, true],
      [{ type: 'message.start' }, false],
      [{ type: 'message.end' }, false],
      [{ type: 'call.start', call_id: 'c', name: 'n' }, false],
      [{ type: 'call.end' }, false],
      [{ type: 'prefill', prompt_tokens: 1, cached_tokens: 0, cache_write_tokens: 0, duration_ms: 0 }, false],
    ];
    for (const [ev, carries] of kinds) expect(carriesTokens(ev), ev.type).toBe(carries);
  });

  it('a model stream out of order is an error, not a silent corruption', () => {
    expect(() => segment().seg.apply({ type: 'text.delta', delta: 'x' })).toThrow(/text outside a message/);
    expect(() => segment().seg.apply({ type: 'message.end' })).toThrow(/did not start/);
    expect(() => segment().seg.apply({ type: 'args.delta', delta: 'x' })).toThrow(/arguments outside a call/);
    expect(() => segment().seg.apply({ type: 'call.end' })).toThrow(/did not start/);
    const { seg, apply } = segment();
    apply(message('a'));
    // A finished message cannot be continued.
    expect(() => seg.apply({ type: 'text.delta', delta: 'b' })).toThrow(/text outside a message/);
  });
});
