/**
 * The sliced serialiser (transport/json-out.ts) writes exactly what
 * `JSON.stringify` writes for the JSON-shaped values the server answers
 * with, including `undefined` members (left out of objects, `null` in
 * arrays), non-finite numbers, escapes and surrogate pairs; and it yields on
 * a large value. (The tools echo of events: test/unit/event-json.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { stringifyWork } from '../../src/transport/json-out.js';
import { mulberry32 } from '../../src/model/rng.js';
import { stringifyInto } from '../../src/protocol/json-chunked.js';

function run(value: unknown): { text: string; yields: number } {
  const work = stringifyWork(value);
  let yields = 0;
  let r = work.next();
  while (!r.done) {
    yields++;
    r = work.next();
  }
  return { text: r.value.join(''), yields };
}

function randomValue(rng: () => number, depth: number): unknown {
  const r = rng();
  if (depth > 4 || r < 0.3) return [null, true, 0.5, -3, NaN, Infinity, undefined, 'a"b\\c\n\u2028\ud83d\ude00', ''][Math.floor(rng() * 9)];
  const n = Math.floor(rng() * 8);
  if (r < 0.6) return Array.from({ length: n }, () => randomValue(rng, depth + 1));
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}"\u00e9`, randomValue(rng, depth + 1)]));
}

describe('stringifyWork', () => {
  it('equals JSON.stringify on random JSON-shaped values', () => {
    const rng = mulberry32(3);
    for (let i = 0; i < 500; i++) {
      const v = randomValue(rng, 0);
      expect(run(v).text).toBe(JSON.stringify(v) ?? 'null');
    }
  });

  it('yields on a large value', () => {
    const v = { tools: Array.from({ length: 50_000 }, (_, i) => ({ name: `t${i}`, parameters: { type: 'object' } })) };
    const { text, yields } = run(v);
    expect(text).toBe(JSON.stringify(v));
    expect(yields).toBeGreaterThan(10);
  });

  it('stringifies small containers natively, one piece each, and walks a large one or one holding a toJSON', () => {
    // A page of run records: walked member by member it cost ~20 times JSON.stringify's time (outside attack).
    const records = Array.from({ length: 1_000 }, (_, i) => ({ id: `r${i}`, counters: { a: i, b: 2 }, spans: [{ stage: 'parse', ms: 0.5 }] }));
    const out: string[] = [];
    const work = stringifyInto({ data: records }, out);
    for (let r = work.next(); !r.done; r = work.next());
    expect(out.join('')).toBe(JSON.stringify({ data: records }));
    // One piece per record, one comma between each, and the page's own punctuation.
    expect(out.length).toBeLessThan(2 * records.length + 10);
    expect(out).toContain(JSON.stringify(records[7]));
    // A small value with a toJSON inside is walked, so its toJSON's own output (which the count does not see) is used.
    const live = { a: 1, inner: { toJSON: () => ({ made: 'x'.repeat(100_000) }) } };
    expect(run([live]).text).toBe(JSON.stringify([live]));
  });

  // Only objects and arrays were counted: an array of 3 million one-character strings (a strict text.format
  // schema's `required`, 12 MB) was stringified in one turn, ~1.4 s, as were many strings each under a slice.
  it('yields on many leaves: short strings, numbers, and strings each just under a slice', () => {
    for (const v of [{ required: Array(200_000).fill('a') }, Array(200_000).fill(1), Array.from({ length: 16 }, () => '\ud800'.repeat(100_000))]) {
      const { text, yields } = run(v);
      expect(text).toBe(JSON.stringify(v));
      expect(yields).toBeGreaterThan(8);
    }
  });
});

describe('stringifyWork on long strings', () => {
  it('escapes a string over 1 Mi characters in slices, surrogate pairs and escapes intact', () => {
    for (const shift of [0, 1]) {
      const s = `${'x'.repeat(shift)}${'\ud83d\ude00"\\\n\u2028'.repeat(500_000)}`;
      const v = { instructions: s, lone: '\ud83d' };
      const { text, yields } = run(v);
      expect(text).toBe(JSON.stringify(v));
      expect(yields).toBeGreaterThan(1);
    }
  });
});

describe('stringifyWork and toJSON', () => {
  // A live run's record is a class whose `toJSON` gives its plain form: `GET /llr/runs`, written by this walker,
  // listed only its own fields (no counters, totals or spans) until toJSON was honoured.
  it('calls toJSON as JSON.stringify does: with the key, once, on the root, members and elements', () => {
    class Live {
      readonly id = 'r1';
      readonly #n = 3;
      get counters() {
        return { pauses: this.#n };
      }
      toJSON(key: string) {
        return { id: this.id, key, counters: this.counters, inner: { toJSON: () => ({ toJSON: () => 'not called twice' }) } };
      }
    }
    const values: unknown[] = [new Live(), { data: [new Live(), new Live()], at: new Date(0) }, [new Live(), { toJSON: () => undefined }], { x: { toJSON: () => undefined } }];
    for (const v of values) expect(run(v).text).toBe(JSON.stringify(v));
  });
});

describe('stringifyInto, its pieces taken at each yield', () => {
  // sendJsonCooperative writes what `out` holds at a yield and empties it: the text must come out whole and in
  // order whatever the yields cut (long strings, many members, escapes and surrogate pairs across slices).
  it('gives JSON.stringify text when the caller empties `out` at every yield', () => {
    const rng = mulberry32(11);
    const values: unknown[] = [
      { instructions: `${'\ud83d\ude00"\\\n'.repeat(300_000)}`, tools: Array.from({ length: 3_000 }, (_, i) => ({ name: `t${i}`, parameters: { type: 'object' } })) },
      Array.from({ length: 4_000 }, () => randomValue(rng, 0)),
      Array(200_000).fill('a'),
    ];
    for (const v of values) {
      const out: string[] = [];
      const taken: string[] = [];
      const work = stringifyInto(v, out);
      let yields = 0;
      for (let r = work.next(); !r.done; r = work.next()) {
        yields++;
        taken.push(out.join(''));
        out.length = 0;
      }
      taken.push(out.join(''));
      expect(taken.join('')).toBe(JSON.stringify(v));
      expect(yields).toBeGreaterThan(2);
    }
  });
});
