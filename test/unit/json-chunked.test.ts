/**
 * The sliced JSON parse (protocol/json-chunked.ts) gives exactly what
 * `JSON.parse` gives — key order, later duplicate keys winning, `__proto__`
 * as an own key, every scalar form — with slices small enough that every
 * container is split; it refuses what `JSON.parse` refuses, and enforces the
 * nesting limit while it walks. The shape check refuses an object with too
 * many keys, naming the top-level field.
 */
import { describe, expect, it } from 'vitest';
import { jsonBytesWork, jsonTextIfShortWork, jsonTextWork, NATIVE_TEXT_CHARS, parseJsonWork, stringifyWork, textOver, utf8BytesWork } from '../../src/protocol/json-chunked.js';
import { runSync } from '../../src/cooperative.js';
import { checkJsonDepth, parseJsonTextWork } from '../../src/protocol/json-text.js';
import { WireError } from '../../src/protocol/errors.js';
import { mulberry32 } from '../../src/model/rng.js';

function run<T>(work: Generator<void, T, void>): { value: T; yields: number } {
  let yields = 0;
  let r = work.next();
  while (!r.done) {
    yields++;
    r = work.next();
  }
  return { value: r.value, yields };
}

/** At least `chars` characters of `pick`'s pieces, chosen by `rng`. */
function randomText(rng: () => number, pick: readonly string[], chars: number): string {
  const parts: string[] = [];
  for (let len = 0; len < chars; ) {
    const p = pick[Math.floor(rng() * pick.length)]!;
    parts.push(p);
    len += p.length;
  }
  return parts.join('');
}

function randomValue(rng: () => number, depth: number): unknown {
  const r = rng();
  if (depth > 5 || r < 0.3) {
    const k = Math.floor(rng() * 7);
    return [null, true, false, -12.5e3, 0, `s"\\\n${Math.floor(rng() * 1e6)}\u00e9\ud83d\ude00`, 1234567890123][k];
  }
  const n = Math.floor(rng() * 12);
  if (r < 0.65) return Array.from({ length: n }, () => randomValue(rng, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) o[`k${Math.floor(rng() * 8)}${i % 3 === 0 ? '\\"x' : ''}`] = randomValue(rng, depth + 1);
  return o;
}

describe('parseJsonWork', () => {
  it('equals JSON.parse on random documents, with every container split into slices', () => {
    const rng = mulberry32(7);
    for (let n = 0; n < 80; n++) {
      const text = JSON.stringify(randomValue(rng, 0), null, n % 2 === 0 ? undefined : 1);
      for (const chunk of [1, 7, 64]) {
        const { value } = run(parseJsonWork(text, 64, chunk));
        expect(value).toEqual(JSON.parse(text));
        expect(JSON.stringify(value)).toBe(JSON.stringify(JSON.parse(text)));
      }
    }
  });

  it('keeps JSON.parse semantics for duplicate keys and __proto__', () => {
    const text = '{"a":1,"__proto__":{"polluted":true},"b":[1,2,{"a":3}],"a":4}';
    const { value } = run(parseJsonWork(text, 64, 4));
    const native = JSON.parse(text);
    expect(Object.keys(value as object)).toEqual(Object.keys(native));
    expect((value as { a: number }).a).toBe(4);
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(value, '__proto__')?.value).toEqual({ polluted: true });
  });

  it('refuses what JSON.parse refuses', () => {
    for (const bad of ['[1,2,]', '{"a":1,}', '{"a" 1}', '[1 2]', '{a:1}', '[1,2', '[1,2]x', '{"a":tru}', '["\\x"]', '[01]', '']) {
      expect(() => JSON.parse(bad), bad).toThrow();
      expect(() => run(parseJsonWork(bad, 64, 2)), bad).toThrow(SyntaxError);
    }
  });

  it('enforces the nesting limit while walking, naming the top-level key', () => {
    // The body object is level 1, as in checkJsonDepth: 1 + 10 arrays = 11 levels.
    const text = `{"ok":[1,2,3,4,5,6,7,8],"tools":${'['.repeat(10)}${']'.repeat(10)}}`;
    expect(() => checkJsonDepth(text, 11)).not.toThrow();
    expect(() => checkJsonDepth(text, 10)).toThrow(WireError);
    expect(() => run(parseJsonWork(text, 11, 3))).not.toThrow();
    const err = (() => {
      try {
        run(parseJsonWork(text, 10, 3));
      } catch (e) {
        return e;
      }
    })() as WireError;
    expect(err).toBeInstanceOf(WireError);
    expect(err.code).toBe('json_too_deep');
    expect(err.param).toBe('tools');
  });

  it('yields on a large text: a 2 MB body of small items is parsed over many slices', () => {
    const text = JSON.stringify({ model: 'm', input: Array.from({ length: 60_000 }, (_, i) => ({ role: 'user', content: `m${i}` })) });
    expect(text.length).toBeGreaterThan(2_000_000);
    const { value, yields } = run(parseJsonTextWork(text, 'body'));
    expect(yields).toBeGreaterThan(20);
    expect(value).toEqual(JSON.parse(text));
  });

  it('scans a long string once or twice, not once for every container around it', () => {
    // A 600,000-character string of escaped quotes inside 30 nested objects: each container too large for a slice
    // looked for its end by scanning every string in it to its end, so the string was scanned at every level, a
    // quote at a time (a stored row of such a member took 15 s of event loop in 400 ms turns to list, outside attack;
    // JSON.parse takes 60 ms). A container ends beyond its slice as soon as one of its strings does.
    const long = 'a"'.repeat(200_000);
    let v: unknown = long;
    for (let k = 0; k < 30; k++) v = { k, v };
    const text = JSON.stringify([{ type: 'message' }, v]);
    const quotes = 200_000;
    const { indexOf } = String.prototype;
    let calls = 0;
    String.prototype.indexOf = function (this: string, ...args: Parameters<string['indexOf']>) {
      calls++;
      return indexOf.apply(this, args);
    };
    let value: unknown;
    try {
      // Slices of 4 KiB: a container's own scan stops there (at most ~2,000 calls a level).
      value = run(parseJsonWork(text, 64, 4096)).value;
    } finally {
      String.prototype.indexOf = indexOf;
    }
    expect(value).toEqual(JSON.parse(text));
    // A quote at a time: each scan of the long string is ~200,000 calls; 30 levels made ~60 scans.
    expect(calls).toBeLessThan(3 * quotes);
  });
});

describe('the shape check', () => {
  it('refuses an object with more keys than the cap, naming the top-level field', () => {
    const meta = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, 'v']));
    const text = JSON.stringify({ model: 'm', metadata: meta });
    expect(() => checkJsonDepth(text, 64, 11)).not.toThrow();
    try {
      checkJsonDepth(text, 64, 10);
      expect.unreachable();
    } catch (e) {
      expect((e as WireError).code).toBe('object_above_max_properties');
      expect((e as WireError).param).toBe('metadata');
    }
  });
});

describe('jsonTextWork', () => {
  it("is JSON.stringify's text, short values natively, long ones in slices that never split a surrogate pair", () => {
    const rng = mulberry32(7);
    const pick = ['a', '"', '\\', '\n', '\u0001', '\ud800', '\udc00', '\ud83d\ude00', 'é'];
    for (let n = 0; n < 6; n++) {
      // Past a slice (256 K characters) and its multiples, with pairs and lone halves everywhere, at the cuts too.
      const value = { type: 'object', properties: { s: { description: randomText(rng, pick, NATIVE_TEXT_CHARS * 2 + n * 7919) } }, list: [1, null, true, 'x'] };
      expect(textOver(value, NATIVE_TEXT_CHARS)).toBe(true);
      expect(runSync(jsonTextWork(value))).toBe(JSON.stringify(value));
    }
    const small = { type: 'object', properties: { city: { type: 'string' } } };
    expect(textOver(small, NATIVE_TEXT_CHARS)).toBe(false);
    expect(runSync(jsonTextWork(small))).toBe(JSON.stringify(small));
  });
});

describe('utf8BytesWork', () => {
  it("is Buffer.byteLength's count, long texts in slices that never split a surrogate pair", () => {
    // A pair across every 256 K cut (split, each half would count as a lone one: 6 bytes, not 4), lone halves, CJK.
    const text = `${'a'.repeat(NATIVE_TEXT_CHARS - 1)}\ud83d\ude00`.repeat(4) + '\ud800\udc00\udfff語'.repeat(50_000);
    let steps = 0;
    const work = utf8BytesWork(text);
    let r = work.next();
    for (; !r.done; r = work.next()) steps++;
    expect(steps).toBeGreaterThan(4);
    expect(r.value).toBe(Buffer.byteLength(text));
    expect(runSync(utf8BytesWork('short é'))).toBe(Buffer.byteLength('short é'));
  });
});

describe('textOver on a wide array', () => {
  // Every element of an array was pushed on its stack before the first was counted: a `required` of 3 million
  // names took ~0.2 s in one turn only to answer true. It stops at the limit now, having read about limit / 8 leaves.
  it('reads no more leaves than its limit needs', () => {
    let reads = 0;
    const wide = new Proxy(Array(1_000_000).fill('a'), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
        return Reflect.get(target, key, receiver);
      },
    });
    expect(textOver({ required: wide }, NATIVE_TEXT_CHARS)).toBe(true);
    expect(reads).toBeLessThan(NATIVE_TEXT_CHARS / 4);
    expect(textOver({ required: ['a', 'b'] }, NATIVE_TEXT_CHARS)).toBe(false);
  });
});

describe('jsonTextWork on many pieces', () => {
  // One join of the 6 million pieces of a 3-million-name `required` held the loop ~0.15 s.
  it('joins them a slice at a time', () => {
    const v = { required: Array(400_000).fill('a') };
    const count = (work: Generator<void, unknown, void>) => {
      let yields = 0;
      let r = work.next();
      for (; !r.done; r = work.next()) yields++;
      return { yields, value: r.value };
    };
    const whole = count(jsonTextWork(v));
    expect(whole.value).toBe(JSON.stringify(v));
    expect(whole.yields).toBeGreaterThanOrEqual(count(stringifyWork(v)).yields + 10);
  });
});

describe('jsonBytesWork', () => {
  // A Response's echo of 2.4 million lone surrogates: the last join of its text (~75-160 ms) and the Buffer.from of it
  // (~50 ms) ran in one loop turn. The bytes are now written a part at a time, with no text of the whole built.
  it("is Buffer.from(JSON.stringify(v))'s bytes, a long value's written a part at a time", () => {
    const rng = mulberry32(11);
    const pick = ['a', '"', '\\', '\n', '\u0001', '\ud800', '\udc00', '\ud83d\ude00', 'é', '語'];
    for (let n = 0; n < 4; n++) {
      // A long string (pieces of a slice each), and many short ones (many pieces to a part).
      const value = { description: randomText(rng, pick, NATIVE_TEXT_CHARS * 3 + n * 7919), required: Array.from({ length: 70_000 + n }, (_, i) => `k${i}é`), list: [1, null, true, 'x'] };
      const { value: bytes, yields } = run(jsonBytesWork(value));
      expect(bytes.equals(Buffer.from(JSON.stringify(value), 'utf8'))).toBe(true);
      // The bytes written in several parts, besides the walk's own yields.
      expect(yields).toBeGreaterThanOrEqual(run(stringifyWork(value)).yields + 4);
    }
    const small = { type: 'object', properties: { city: { type: 'string', description: 'ü' } } };
    expect(runSync(jsonBytesWork(small)).equals(Buffer.from(JSON.stringify(small)))).toBe(true);
  });
});

describe('jsonTextIfShortWork', () => {
  it('is the text when at most the limit, else undefined, with a long value never joined', () => {
    const small = { type: 'object', properties: { city: { type: 'string' } } };
    expect(runSync(jsonTextIfShortWork(small, 1000))).toBe(JSON.stringify(small));
    expect(runSync(jsonTextIfShortWork(small, 10))).toBeUndefined();
    const long = { description: '\ud800'.repeat(NATIVE_TEXT_CHARS) };
    expect(textOver(long, NATIVE_TEXT_CHARS)).toBe(true);
    expect(runSync(jsonTextIfShortWork(long, 64 * 1024))).toBeUndefined();
    expect(runSync(jsonTextIfShortWork(long, 7 * NATIVE_TEXT_CHARS))).toBe(JSON.stringify(long));
    // What JSON.stringify throws, it throws.
    expect(() => runSync(jsonTextIfShortWork({ n: 1n }, 10))).toThrow(TypeError);
  });
});
