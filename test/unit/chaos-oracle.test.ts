/**
 * The chaos suite's own pieces, without sockets: the fuzzer is deterministic
 * for a seed and its deep values expand to real nesting; the stream oracle
 * catches a gap, a missing or repeated terminal event and a stream that does
 * not open with response.created; the HTTP error check wants the full shape.
 */
import { describe, expect, it } from 'vitest';
import { Rng, QUICK_SCALE, corpus, damage, jsonSize, mutate, serialize, weirdValue, type Json } from '../../src/chaos/mutate.js';
import { StreamCheck, Tally, checkHttpErrorBody, checkWsError } from '../../src/chaos/oracle.js';
import { checkSse } from '../../src/chaos/http-peer.js';

function inputs(seed: number, n: number): string[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => serialize(mutate(rng.pick(corpus()), rng, QUICK_SCALE).value).slice(0, 2000));
}

describe('chaos fuzzer', () => {
  it('is deterministic for a seed and differs between seeds', () => {
    expect(inputs(3, 40)).toEqual(inputs(3, 40));
    expect(inputs(3, 40)).not.toEqual(inputs(4, 40));
  });

  it('mutates a copy, never the corpus', () => {
    const before = JSON.stringify(corpus());
    const rng = new Rng(1);
    for (let i = 0; i < 50; i++) mutate(corpus()[i % corpus().length]!, rng, QUICK_SCALE);
    expect(JSON.stringify(corpus())).toBe(before);
  });

  it('expands deep values into real nesting that JSON.parse accepts', () => {
    const rng = new Rng(9);
    let deep: string | null = null;
    for (let i = 0; i < 500 && !deep; i++) {
      const v = weirdValue(rng, QUICK_SCALE);
      if (typeof v === 'string' && v.includes('deep:')) deep = serialize({ x: v });
    }
    expect(deep).not.toBeNull();
    let depth = 0;
    let x: unknown = (JSON.parse(deep!) as { x: unknown }).x;
    while (typeof x === 'object' && x !== null) {
      x = Array.isArray(x) ? x[0] : (x as { a: unknown }).a;
      depth++;
    }
    expect(depth).toBeGreaterThan(500);
  });

  it('never grows a body past the scale by duplicating elements (the long form ran out of heap at --seed 1304)', () => {
    // A body that is one large element: every duplication multiplies it. With a 100 KB bound, 500 seeds.
    const scale = { maxString: 1_000, maxDepth: 100, maxWidth: 1_000, maxBytes: 100_000 };
    const wide: Json = { input: ['x'.repeat(50_000)] };
    let duplicated = 0;
    for (let seed = 0; seed < 500; seed++) {
      const m = mutate(wide, new Rng(seed), scale);
      if (m.how.includes('duplicate')) duplicated++;
      // Each mutation may add one weird value (a string of maxString, maxWidth elements) besides duplications.
      expect(serialize(m.value).length, m.how).toBeLessThanOrEqual(scale.maxBytes + 3 * 20_000);
    }
    expect(duplicated).toBeGreaterThan(5);
  });

  it('measures a body about as serialize writes it', () => {
    for (const v of corpus()) {
      const n = serialize(v).length;
      expect(jsonSize(v, 1e9)).toBeGreaterThanOrEqual(n * 0.8);
      expect(jsonSize(v, 1e9)).toBeLessThanOrEqual(n * 1.5);
    }
    expect(jsonSize({ a: 'x'.repeat(1_000) }, 100)).toBe(101);
  });

  it('damages bytes in ways the parser must refuse or survive', () => {
    const rng = new Rng(5);
    const hows = new Set(Array.from({ length: 200 }, () => damage('{"model":"m","input":"hi"}', rng).how.split(' ')[0]));
    expect(hows.size).toBeGreaterThanOrEqual(6);
  });
});

describe('chaos oracle', () => {
  const ev = (type: string, seq: number, extra: object = {}) => ({ type, sequence_number: seq, ...extra });

  it('accepts a gapless stream with one terminal event and its timing', () => {
    const s = new StreamCheck();
    s.feed(ev('response.created', 0, { response: { id: 'resp_1' } }));
    s.feed(ev('response.in_progress', 1));
    s.feed(ev('response.completed', 2, { response: { id: 'resp_1' } }));
    s.feed(ev('llr:timing', 3));
    expect(s.close()).toEqual([]);
    expect(s.id).toBe('resp_1');
  });

  it('reports a gap, an event after the terminal, a missing terminal, a wrong first event', () => {
    const gap = new StreamCheck();
    gap.feed(ev('response.created', 0));
    gap.feed(ev('response.in_progress', 2));
    gap.feed(ev('response.completed', 3));
    gap.feed(ev('response.output_text.delta', 4));
    expect(gap.close().join('\n')).toMatch(/expected 1[\s\S]*after the terminal/);
    const open = new StreamCheck();
    open.feed(ev('response.in_progress', 0));
    expect(open.close()).toEqual(['first event is response.in_progress, not response.created', 'no terminal event']);
  });

  it('parses SSE and wants [DONE]', () => {
    const body = 'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"r"}}\n\nevent: response.completed\ndata: {"type":"response.completed","sequence_number":1}\n\n';
    expect(checkSse(body).problems).toEqual(['no data: [DONE]']);
    expect(checkSse(body + 'data: [DONE]\n\n').problems).toEqual([]);
  });

  it('wants the full error shapes', () => {
    expect(checkHttpErrorBody({ error: { message: 'm', type: 't', param: null, code: 'c' } })).toBeNull();
    expect(checkHttpErrorBody({ error: { message: 'm', type: 't', code: 'c' } })).toMatch(/param/);
    expect(checkHttpErrorBody({ message: 'm' })).toMatch(/error body/);
    expect(checkWsError({ type: 'error', status: 400, error: { code: 'c', message: 'm', type: 't' } })).toBeNull();
    expect(checkWsError({ type: 'error', error: { code: 'c', message: 'm', type: 't' } })).toMatch(/status/);
  });

  it('counts failures by kind and keeps a few examples', () => {
    const t = new Tally('fuzz', 'ws');
    for (let i = 0; i < 8; i++) t.fail('hang', `input ${i}`, 'x'.repeat(1000));
    expect(t.count('hang')).toBe(8);
    expect(t.failed).toBe(8);
    expect(t.examples).toHaveLength(5);
    expect(t.examples[0]!.detail.length).toBeLessThan(450);
  });
});
