/**
 * Seeded randomness for the simulated model: a small PRNG (mulberry32), a
 * string hash to derive per-request seeds, and helpers for ids and words.
 *
 * Used by the simulated model and its policies so that the same seed and the
 * same requests always give the same output. Not cryptographic and not meant
 * to be: ids only need to look like the API's and not collide in one run.
 */

export type Rng = () => number;

/** mulberry32: 32 bits of state, full period, good enough for text and ids. */
export function mulberry32(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a over UTF-16 code units, continuing from `h` so hashes can be chained. */
export function hashString(s: string, h = 0x811c9dc5): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** An integer in `[lo, hi]` (inclusive). */
export function intBetween(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

export function pick<T>(rng: Rng, xs: readonly T[]): T {
  const x = xs[Math.floor(rng() * xs.length)];
  if (x === undefined) throw new RangeError('pick() from an empty list');
  return x;
}

const HEX = '0123456789abcdef';

/** `length` decimal digits from `rng`. */
export function digitString(rng: Rng, length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) s += String(Math.floor(rng() * 10));
  return s;
}

export function hexString(rng: Rng, length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) s += HEX[Math.floor(rng() * 16)];
  return s;
}

/**
 * Plain, common words: each is usually a single o200k token with its leading
 * space, which keeps generated text's token count close to its word count.
 */
export const WORDS = [
  'the', 'model', 'server', 'response', 'token', 'stream', 'request', 'agent',
  'tool', 'call', 'output', 'input', 'state', 'cache', 'prompt', 'event',
  'loop', 'time', 'first', 'next', 'result', 'value', 'update', 'check',
  'run', 'step', 'plan', 'note', 'file', 'line', 'test', 'build',
  'simple', 'quick', 'small', 'clear', 'ready', 'done', 'open', 'close',
  'read', 'write', 'send', 'wait', 'start', 'finish', 'keep', 'move',
  'data', 'text', 'task', 'list', 'item', 'path', 'name', 'field',
  'good', 'fast', 'new', 'same', 'each', 'other', 'more', 'well',
] as const;

export function words(rng: Rng, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(pick(rng, WORDS));
  return out;
}
