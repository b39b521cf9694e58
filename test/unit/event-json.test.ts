/**
 * The pre-serialised delta events (protocol/event-json.ts) must be
 * byte-identical to `JSON.stringify` of the same event as the engine built
 * it before (a plain object in wire order): over many random strings with
 * unicode, lone surrogates, control characters and escapes, for both delta
 * kinds; and a segment's whole stream must serialise the same both ways.
 * A large instructions or tools echo is serialised once per Response and
 * sent as the same shared bytes by every event that carries it, the pieces
 * joined still exactly `JSON.stringify(event)`.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/model/rng.js';
import { ArgsDelta, DeltaHead, TextDelta, eventJson, eventPieces, piecesLength } from '../../src/protocol/event-json.js';
import type { ServerEvent, UnnumberedEvent } from '../../src/protocol/events.js';
import { Segment } from '../../src/engine/segment.js';
import { snapshot } from '../../src/engine/response.js';
import type { Response } from '../../src/protocol/objects.js';

const ALPHABET = [
  'a', 'Z', ' ', '0', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u001f', '\u007f', '\u2028', '\u2029',
  'é', 'ß', '中', '😀', '\ud83d', '\ude00', '\ufeff', '<', '>', '&', "'", '`', '{', '}', '[', ']', ':', ',',
];

function randomString(rng: () => number, max: number): string {
  const n = Math.floor(rng() * max);
  let s = '';
  for (let i = 0; i < n; i++) {
    s += rng() < 0.2 ? String.fromCharCode(Math.floor(rng() * 0x10000)) : ALPHABET[Math.floor(rng() * ALPHABET.length)]!;
  }
  return s;
}

describe('pre-serialised delta events', () => {
  it('text deltas serialise exactly as JSON.stringify of the plain event', () => {
    const rng = mulberry32(42);
    for (let i = 0; i < 5000; i++) {
      const itemId = i % 7 === 0 ? `msg_${randomString(rng, 12)}` : `msg_${i.toString(16)}`;
      const index = Math.floor(rng() * 1000);
      const delta = randomString(rng, 40);
      const seq = Math.floor(rng() * 1e9);
      const e = new TextDelta(new DeltaHead('response.output_text.delta', itemId, index, 0), delta);
      e.sequence_number = seq;
      const plain = { type: 'response.output_text.delta', item_id: itemId, output_index: index, content_index: 0, delta, logprobs: [], sequence_number: seq };
      expect(eventJson(e)).toBe(JSON.stringify(plain));
      expect(eventJson(e)).toBe(JSON.stringify(e));
    }
  });

  it('argument deltas serialise exactly as JSON.stringify of the plain event', () => {
    const rng = mulberry32(7);
    for (let i = 0; i < 5000; i++) {
      const itemId = `fc_${randomString(rng, 10)}`;
      const index = Math.floor(rng() * 50);
      const delta = randomString(rng, 40);
      const e = new ArgsDelta(new DeltaHead('response.function_call_arguments.delta', itemId, index, null), delta);
      e.sequence_number = i;
      const plain = { type: 'response.function_call_arguments.delta', item_id: itemId, output_index: index, delta, sequence_number: i };
      expect(eventJson(e)).toBe(JSON.stringify(plain));
      expect(JSON.parse(eventJson(e))).toEqual(plain);
    }
  });

  it('an unnumbered delta falls back to JSON.stringify', () => {
    const e = new TextDelta(new DeltaHead('response.output_text.delta', 'msg_1', 0, 0), 'x');
    expect(eventJson(e)).toBe(JSON.stringify(e));
    expect(JSON.parse(eventJson(e))).toMatchObject({ sequence_number: -1 });
  });

  it('a segment emits the same bytes as the plain events it replaced', () => {
    const events: UnnumberedEvent[] = [];
    const seg = new Segment((e) => events.push(e), []);
    const rng = mulberry32(3);
    seg.apply({ type: 'message.start' });
    for (let i = 0; i < 200; i++) seg.apply({ type: 'text.delta', delta: randomString(rng, 8) });
    seg.apply({ type: 'message.end' });
    seg.apply({ type: 'call.start', name: 'exec_command', call_id: 'call_1' });
    for (let i = 0; i < 50; i++) seg.apply({ type: 'args.delta', delta: randomString(rng, 8) });
    seg.apply({ type: 'call.end' });
    let deltas = 0;
    events.forEach((e, seq) => {
      if (e instanceof TextDelta || e instanceof ArgsDelta) {
        deltas++;
        e.sequence_number = seq;
        const plain =
          e instanceof TextDelta
            ? { type: e.type, item_id: e.item_id, output_index: e.output_index, content_index: e.content_index, delta: e.delta, logprobs: [], sequence_number: seq }
            : { type: e.type, item_id: e.item_id, output_index: e.output_index, delta: e.delta, sequence_number: seq };
        expect(eventJson(e)).toBe(JSON.stringify(plain));
      } else {
        const numbered = { ...e, sequence_number: seq } as ServerEvent;
        expect(eventJson(numbered)).toBe(JSON.stringify(numbered));
      }
    });
    expect(deltas).toBe(250);
  });
});

describe('the tools echo of lifecycle events', () => {
  const tools = Array.from({ length: 128 }, (_, i) => ({ type: 'function', name: `t${i}`, description: 'd"\u2028é😀'.repeat(200), parameters: { type: 'object' } }));
  const response = { id: 'resp_1', instructions: 'hi "there"', tools, output: [], status: 'in_progress' };

  it('is JSON.stringify of the event, the large echo as bytes shared by every event of the response', () => {
    const shared: Buffer[] = [];
    for (const type of ['response.created', 'response.in_progress', 'response.completed']) {
      const e = { type, sequence_number: 1, response: { ...response, status: type.slice(9) } };
      expect(eventJson(e)).toBe(JSON.stringify(e));
      const pieces = eventPieces(e);
      expect(pieces).toHaveLength(3);
      const middle = pieces[1];
      expect(Buffer.isBuffer(middle)).toBe(true);
      if (Buffer.isBuffer(middle)) shared.push(middle);
      const bytes = Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
      expect(bytes.equals(Buffer.from(JSON.stringify(e)))).toBe(true);
      // UTF-8 bytes, what the socket holds.
      expect(piecesLength(pieces)).toBe(bytes.length);
    }
    expect(shared[1]).toBe(shared[0]);
    expect(shared[2]).toBe(shared[0]);
  });

  it('a long instructions echo, with or without tools, is shared bytes too, spliced where it stands', () => {
    const long = 'instr "\ud83d\ude00"\n'.repeat(10_000);
    for (const t of [tools, []]) {
      const both = { type: 'response.created', sequence_number: 0, response: { ...response, tools: t, instructions: long } };
      const done = { ...both, type: 'response.completed' };
      expect(eventJson(both)).toBe(JSON.stringify(both));
      expect(eventJson(done)).toBe(JSON.stringify(done));
      const [a, b] = [eventPieces(both), eventPieces(done)];
      expect(a).toHaveLength(t.length > 0 ? 5 : 3);
      expect(b[1]).toBe(a[1]);
    }
  });

  it('sizes the pieces in UTF-8 bytes, what the socket holds, for multi-byte text in strings and shared bytes alike', () => {
    const small = 'é\ud83d\ude00中'.repeat(100);
    const long = 'é\ud83d\ude00中'.repeat(20_000);
    for (const instructions of [small, long]) {
      const e = { type: 'response.created', sequence_number: 0, response: { ...response, instructions, output: [{ type: 'message', text: small }] } };
      const pieces = eventPieces(e);
      expect(piecesLength(pieces)).toBe(Buffer.byteLength(JSON.stringify(e)));
    }
  });

  it('a tools array shared by two responses with different instructions gets each its own echo', () => {
    const shared: unknown[] = [];
    const one = { type: 'response.created', response: { id: 'resp_a', instructions: 'a'.repeat(70_000), tools: shared } };
    const two = { type: 'response.created', response: { id: 'resp_b', instructions: 'b'.repeat(70_000), tools: shared } };
    expect(eventJson(one)).toBe(JSON.stringify(one));
    expect(eventJson(two)).toBe(JSON.stringify(two));
    expect(eventJson(one)).toBe(JSON.stringify(one));
  });

  it('keeps as bytes an echo whose JSON is long only once escaped: control characters, lone surrogates, in tools, text and instructions', () => {
    // 20,000 characters each: counted short, six times that once escaped (past the 64 K characters an echo is kept from).
    for (const ch of ['\u0001', '\ud800']) {
      const long = ch.repeat(20_000);
      const cases = [
        { tools: [{ type: 'function', name: 'f', description: long, parameters: null, strict: true }] },
        { tools: [], text: { format: { type: 'json_schema', name: 's', schema: { type: 'object', description: long }, strict: false } } },
        { tools: [], instructions: long },
      ];
      for (const fields of cases) {
        const r = { ...response, ...fields };
        const created = { type: 'response.created', sequence_number: 0, response: r };
        const done = { type: 'response.completed', sequence_number: 9, response: r };
        const [a, b] = [eventPieces(created), eventPieces(done)];
        expect(a.some((p) => Buffer.isBuffer(p))).toBe(true);
        // Made once for the Response, shared by its events, and still exactly JSON.stringify of each.
        expect(b.find((p) => Buffer.isBuffer(p))).toBe(a.find((p) => Buffer.isBuffer(p)));
        expect(eventJson(created)).toBe(JSON.stringify(created));
        expect(eventJson(done)).toBe(JSON.stringify(done));
      }
    }
  });

  it('keeps small echoes, events without a response and deltas in one string', () => {
    const small = { type: 'response.created', response: { ...response, tools: tools.slice(0, 1) } };
    expect(eventPieces(small)).toEqual([JSON.stringify(small)]);
    const none = { type: 'response.output_text.delta', delta: 'x' };
    expect(eventPieces(none)).toEqual([JSON.stringify(none)]);
    const d = new TextDelta(new DeltaHead('response.output_text.delta', 'msg_1', 0, 0), 'x');
    d.sequence_number = 3;
    expect(eventPieces(d)).toEqual([JSON.stringify(d)]);
  });
});

describe('lifecycle events sharing one snapshot', () => {
  const rng = mulberry32(11);
  const response = (): Response =>
    ({
      id: 'resp_1',
      object: 'response',
      status: 'in_progress',
      instructions: randomString(rng, 40),
      tools: [{ type: 'function', name: 'f', description: randomString(rng, 30), parameters: { type: 'object', properties: {} }, strict: true }],
      output: [{ type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'f', arguments: randomString(rng, 50), status: 'completed' }],
      metadata: { k: randomString(rng, 20) },
    }) as unknown as Response;

  it('created, in_progress and a later event on the same snapshot are each exactly JSON.stringify of the event', () => {
    for (let i = 0; i < 200; i++) {
      const snap = snapshot(response());
      for (const [type, seq] of [['response.created', 0], ['response.in_progress', 1], ['response.done', 2 ** 40]] as const) {
        const e = { type, response: snap, sequence_number: seq };
        expect(eventPieces(e)).toEqual([JSON.stringify(e)]);
      }
    }
  });

  it('another shape on a snapshot already sent is stringified whole: extra or reordered keys, a number that is not an integer', () => {
    const snap = snapshot(response());
    eventPieces({ type: 'response.created', response: snap, sequence_number: 0 });
    for (const e of [
      { type: 'response.created', response: snap, sequence_number: 0, stream_id: 'a' },
      { response: snap, type: 'response.created', sequence_number: 0 },
      { type: 'response.created', response: snap, sequence_number: 0.5 },
      { type: 'response.created', response: snap, sequence_number: -0 },
      { type: 'response.created', sequence_number: 0, response: snap },
    ]) {
      expect(eventPieces(e)).toEqual([JSON.stringify(e)]);
    }
  });
});

describe('a long output in lifecycle events', () => {
  const rng = mulberry32(5);
  const text = (n: number) => Array.from({ length: n }, () => ['a', '"', '\\', '\n', 'é', '😀', '\u2028', '\ud800', ' '][Math.floor(rng() * 9)]).join('');
  const call = (i: number, status: string) => ({ type: 'function_call', id: `fc_${i}`, call_id: `call_${i}`, name: 'shell', arguments: JSON.stringify({ command: ['bash', '-lc', text(20)] }), status });
  const message = (i: number, status: string) => ({ id: `msg_${i}`, type: 'message', role: 'assistant', status, content: [{ type: 'output_text', text: text(40), annotations: [], logprobs: [] }] });

  it('is JSON.stringify of the event, with or without large echoes, finished items serialised once and shared', () => {
    const tools = [{ type: 'function', name: 'shell', description: 'd'.repeat(70_000), parameters: { type: 'object' } }];
    const output: Array<Record<string, unknown>> = [];
    for (let step = 0; step < 120; step++) {
      output.push(rng() < 0.7 ? call(step, 'completed') : message(step, 'completed'));
      // The item still streaming (copied by a snapshot, serialised afresh each time).
      const open = rng() < 0.5 ? [message(1000 + step, 'in_progress')] : [];
      for (const echo of [{ instructions: null, tools: [] }, { instructions: 'i'.repeat(70_000), tools }, { instructions: 'short', tools }]) {
        const e = { type: 'response.done', sequence_number: step, response: { id: 'resp_1', object: 'response', ...echo, output: [...output, ...open], usage: null, status: 'in_progress' } };
        const bytes = Buffer.concat(eventPieces(e).map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
        expect(bytes.equals(Buffer.from(JSON.stringify(e)))).toBe(true);
        expect(eventJson(e)).toBe(JSON.stringify(e));
      }
    }
  });

  it('a finished item changed in place is not assumed unchanged unless it is completed', () => {
    const items = Array.from({ length: 40 }, (_, i) => message(i, 'in_progress'));
    const e = () => ({ type: 'response.in_progress', response: { id: 'resp_2', output: items } });
    expect(eventJson(e())).toBe(JSON.stringify(e()));
    (items[3]!['content'] as Array<{ text: string }>)[0]!.text += 'more';
    items[5]!['status'] = 'incomplete';
    expect(eventJson(e())).toBe(JSON.stringify(e()));
  });

  it('snapshots of a growing Response: each is exactly JSON.stringify when sent and stays so, whatever changes after', () => {
    // What a run does to its output between events: items stream across snapshots (in_progress, text growing) and
    // then complete, compaction items (no status) join, and the run's end closes what is still open (`settle`).
    const r = { id: 'resp_6', object: 'response', status: 'in_progress', instructions: 'i', tools: [], output: [] as unknown[], usage: null } as unknown as Response;
    const output = r.output as unknown as Array<Record<string, unknown>>;
    const sent: Array<{ event: object; text: string }> = [];
    const send = (type: string) => {
      const event = { type, response: snapshot(r), sequence_number: sent.length };
      const text = eventJson(event);
      expect(text).toBe(JSON.stringify(event));
      expect(JSON.stringify(event.response.output)).toBe(JSON.stringify(r.output));
      sent.push({ event, text });
    };
    for (let step = 0; step < 90; step++) {
      if (step % 20 === 7) output.push({ id: `cmp_${step}`, type: 'compaction', encrypted_content: text(30) });
      if (step % 5 === 0) {
        const msg = message(step, 'in_progress');
        output.push(msg);
        for (let k = 0; k < 3; k++) {
          (msg['content'] as Array<{ text: string }>)[0]!.text += text(5);
          send('response.in_progress');
        }
        msg['status'] = 'completed';
      }
      output.push(call(step, 'completed'));
      send('response.done');
    }
    const open = call(999, 'in_progress');
    output.push(open);
    send('response.in_progress');
    open['arguments'] = `${open['arguments'] as string}${text(4)}`;
    open['status'] = 'incomplete';
    send('response.cancelled');
    // Nothing a snapshot shares changed after it was sent: each serialises as it did then.
    for (const { event, text: then } of sent) {
      expect(JSON.stringify(event)).toBe(then);
      expect(eventJson(event)).toBe(then);
    }
  });

  it('a pause looks only at the items after those already kept, and a compaction item does not end the kept ones', () => {
    // Each item counts the reads of its status: a long run's every pause read every item so far, twice (the snapshot
    // and the serialisation), and re-serialised all of them at every pause once a compaction item (no status) came.
    let reads = 0;
    const counted = (i: number) => {
      const item: Record<string, unknown> = call(i, 'completed');
      delete item['status'];
      Object.defineProperty(item, 'status', { enumerable: true, get: () => (reads++, 'completed') });
      return item;
    };
    const r = { id: 'resp_7', object: 'response', tools: [], output: [] as unknown[] } as unknown as Response;
    const output = r.output as unknown as Array<Record<string, unknown>>;
    output.push({ id: 'cmp_1', type: 'compaction', encrypted_content: text(30) });
    for (let i = 0; i < 300; i++) output.push(counted(i));
    /** One pause's event as the transport gets it; the status reads it took. */
    const pause = () => {
      reads = 0;
      const event = { type: 'response.done', response: snapshot(r), sequence_number: 1 };
      const pieces = eventPieces(event);
      const took = reads;
      expect(eventJson(event)).toBe(JSON.stringify(event));
      return { pieces, took };
    };
    pause();
    output.push(counted(300));
    const { pieces, took } = pause();
    // The kept bytes are sent as a view; only the new item was looked at (and serialised once).
    expect(pieces.some((p) => Buffer.isBuffer(p) && p.length > 300 * 50)).toBe(true);
    expect(took).toBeLessThan(10);
  });

  it('short outputs and responses without tools keep the one-string path', () => {
    const e = { type: 'response.done', response: { id: 'resp_3', output: [call(1, 'completed')] } };
    expect(eventPieces(e)).toEqual([JSON.stringify(e)]);
  });

  it('keeps no more memory than its items need: a paused run past 32 items does not hold a fixed 64 KiB', () => {
    // Each paused long-lived run with 32 or more finished items keeps these bytes for its life (2,000 paused runs
    // of 33 small calls held 128 MB with a 64 KiB start, for ~5 KB of JSON each).
    const items = Array.from({ length: 33 }, (_, i) => call(i, 'completed'));
    const e = { type: 'response.done', response: { id: 'resp_5', instructions: null, tools: [], output: items } };
    const view = eventPieces(e).find((p): p is Buffer => Buffer.isBuffer(p))!;
    expect(eventJson(e)).toBe(JSON.stringify(e));
    expect(view.buffer.byteLength).toBeLessThanOrEqual(view.length + 64);
    // Grown by doubling past the first fill; still exact.
    items.push(call(33, 'completed'));
    const e2 = { type: 'response.done', response: { ...e.response, output: items.slice() } };
    const view2 = eventPieces(e2).find((p): p is Buffer => Buffer.isBuffer(p))!;
    expect(eventJson(e2)).toBe(JSON.stringify(e2));
    expect(view2.buffer.byteLength).toBeLessThanOrEqual(2 * view2.length + 64);
  });

  it('keeps one growing buffer per output: a view sent earlier is never written again, and another output starting with the same item gets its own', () => {
    const items: Array<Record<string, unknown>> = [];
    const views: Array<{ view: Buffer; copy: Buffer }> = [];
    const ev = (output: unknown[]) => ({ type: 'response.done', response: { id: 'resp_4', instructions: null, tools: [], output } });
    // Enough items to outgrow the first 64 KiB buffer several times.
    for (let step = 0; step < 1500; step++) {
      items.push(call(step, 'completed'));
      const e = ev(items.slice());
      const pieces = eventPieces(e);
      expect(eventJson(e)).toBe(JSON.stringify(e));
      const view = pieces.find((p): p is Buffer => Buffer.isBuffer(p));
      if (step >= 31) {
        expect(view).toBeDefined();
        if (step % 100 === 0) views.push({ view: view!, copy: Buffer.from(view!) });
      }
    }
    for (const { view, copy } of views) expect(view.equals(copy)).toBe(true);
    // The same first item, then other items: not mistaken for the kept ones.
    const other = [items[0]!, ...Array.from({ length: 40 }, (_, i) => call(5000 + i, 'completed'))];
    expect(eventJson(ev(other))).toBe(JSON.stringify(ev(other)));
    // Fewer items than kept (a shorter output starting with the same item).
    const shorter = items.slice(0, 40);
    expect(eventJson(ev(shorter))).toBe(JSON.stringify(ev(shorter)));
    expect(eventJson(ev(items))).toBe(JSON.stringify(ev(items)));
  });
});


describe('every memoised echo field of lifecycle events', () => {
  it('is JSON.stringify of the event for short and long values of each field, tools arrays shared between responses alternating', () => {
    const rng = mulberry32(11);
    const long = (c: string) => `${c}"\ud800é😀\u2028`.repeat(14_000);
    const values: Record<string, Array<unknown>> = {
      instructions: [undefined, null, 'short', long('i')],
      user: [undefined, null, 'u', long('u')],
      safety_identifier: [undefined, 's', long('s')],
      prompt_cache_key: [undefined, 'k', long('k')],
      text: [{ format: { type: 'text' } }, { format: { type: 'json_schema', name: 'x', schema: { description: long('t') } } }],
      prompt_cache_options: [undefined, { comparison_response_id: 'resp_1' }, { comparison_response_id: long('p') }],
      tool_choice: ['auto', { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: long('c') }] }, { type: 'function', name: 'x' }],
    };
    const toolsArrays = [[], [{ type: 'function', name: 'f', description: long('d') }], [{ type: 'function', name: 'g' }]];
    for (let i = 0; i < 24; i++) {
      const response: Record<string, unknown> = { id: `resp_${i}`, object: 'response', output: [] };
      for (const [k, vs] of Object.entries(values)) {
        const v = vs[Math.floor(rng() * vs.length)];
        if (v !== undefined || rng() < 0.5) response[k] = v;
      }
      response['tools'] = toolsArrays[Math.floor(rng() * toolsArrays.length)];
      response['metadata'] = {};
      const e = { type: 'response.created', sequence_number: i, response };
      const pieces = eventPieces(e);
      const bytes = Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
      expect(bytes.equals(Buffer.from(JSON.stringify(e)))).toBe(true);
      expect(piecesLength(pieces)).toBe(bytes.length);
    }
  });
});
