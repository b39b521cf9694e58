/**
 * The tokenizer is linear on any input (over-long pre-tokens are merged in
 * bounded pieces) and, on ordinary text, gives exactly the library's tokens.
 * encode, count and pieces agree with each other, and pieces rejoin exactly.
 */
import { readFileSync } from 'node:fs';
import { encode as libraryEncode } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { MAX_PRETOKEN_CHARS, countTokens, encodeSlice, encodeStep, encodeText, tokenPieces, tokenizerState, type EncodeCursor } from '../../src/model/tokenizer.js';
import { mulberry32, pick } from '../../src/model/rng.js';
import { MERGE_CACHE_WEIGHT } from '../../src/model/bpe-merge.js';

const PLAIN = { disallowedSpecial: new Set<string>() };

/** Seeded text from words, punctuation, digits, whitespace and non-ASCII scripts: pre-tokens stay short. */
function ordinaryText(seed: number, pieces: number): string {
  const rng = mulberry32(seed);
  const parts = ['the', 'Server', 'API', "don't", 'naïve', '日本語', '한국어', '🎉', '👨‍👩‍👧', '12345', '3.14', '{"a":1}', '\n', '\r\n', '\t', '  ', ' ', '=>', '//', '-->', ` ${'x'.repeat(200)} `, '<|endoftext|>'];
  let s = '';
  for (let i = 0; i < pieces; i++) s += pick(rng, parts) + (rng() < 0.6 ? ' ' : '');
  return s;
}

describe('tokenizer: same as the library on ordinary text', () => {
  it('gives the library tokens for this repo’s docs and sources', () => {
    const text = readFileSync(new URL('../../docs/architecture.md', import.meta.url), 'utf8') + readFileSync(new URL('../../src/engine/run.ts', import.meta.url), 'utf8');
    expect(encodeText(text)).toEqual(libraryEncode(text, PLAIN));
  });

  it.each([1, 2, 3, 4, 5])('gives the library tokens for seeded mixed text %i (pre-tokens up to 200 chars)', (seed) => {
    const text = ordinaryText(seed, 2000);
    expect(encodeText(text)).toEqual(libraryEncode(text, PLAIN));
    expect(countTokens(text)).toBe(libraryEncode(text, PLAIN).length);
    expect(tokenPieces(text).join('')).toBe(text);
  });

  it('encodeStep in slices gives the same tokens as one pass', () => {
    const text = ordinaryText(9, 3000) + 'a'.repeat(5000) + ordinaryText(10, 100);
    const whole = encodeText(text);
    const sliced: number[] = [];
    let at = 0;
    let steps = 0;
    while (at < text.length) {
      at = encodeStep(text, at, sliced, 97);
      steps++;
    }
    expect(steps).toBeGreaterThan(10);
    expect(sliced).toEqual(whole);
  });
});

describe('tokenizer: encodeSlice stops inside one long pre-token', () => {
  // A run without a space is one pre-token however long: CJK, emoji (surrogate pairs) and combining marks.
  const rng = mulberry32(5);
  const cjk = Array.from({ length: 40_000 }, () => String.fromCharCode(0x4e00 + Math.floor(rng() * 20_000))).join('');
  const emoji = '🎉👍🏽'.repeat(6_000);
  const cases: Array<[string, string]> = [
    ['random CJK', `before ${cjk} after`],
    ['emoji', `x${emoji}y`],
    ['mixed', `${ordinaryText(3, 200)}${cjk.slice(0, 9_999)}${emoji}${ordinaryText(4, 200)}`],
  ];

  it.each(cases)('%s: slices of any size give the tokens of one pass, and a slice returns mid-run', (_name, text) => {
    const whole = encodeText(text);
    for (const size of [1, 97, 300, 4096]) {
      const cursor: EncodeCursor = { at: 0, end: 0 };
      const sliced: number[] = [];
      let insideRun = 0;
      let calls = 0;
      while (cursor.at < text.length) {
        const from = cursor.at;
        encodeSlice(text, cursor, sliced, size);
        calls++;
        expect(cursor.at).toBeGreaterThan(from);
        // One call never goes far past its budget: at most one pre-token of the cap, or one merge piece.
        expect(cursor.at - from).toBeLessThanOrEqual(size + MAX_PRETOKEN_CHARS);
        if (cursor.end > cursor.at) insideRun++;
      }
      expect(sliced).toEqual(whole);
      expect(insideRun).toBeGreaterThan(0);
      expect(calls).toBeGreaterThan(text.length / (size + MAX_PRETOKEN_CHARS));
    }
  });
});

describe('tokenizer: linear on whitespace-free runs', () => {
  const long: Array<[string, string]> = [
    ['a', 'a'.repeat(200_000)],
    ['A', 'A'.repeat(200_000)],
    ['space', ' '.repeat(200_000)],
    ['newline after slash', './\n'.repeat(70_000)],
    ['emoji', '🎉'.repeat(50_000)],
    ['combining marks', 'e\u0301'.repeat(100_000)],
  ];

  it.each(long)('tokenizes 200,000 chars of %s quickly, consistently, and rejoins exactly', (_name, text) => {
    const started = performance.now();
    const tokens = encodeText(text);
    const elapsed = performance.now() - started;
    // The library alone takes ~25 s on 200,000 'a's; linear work is ~50 ms (generous bound for a loaded machine).
    expect(elapsed).toBeLessThan(3000);
    expect(countTokens(text)).toBe(tokens.length);
    const pieces = tokenPieces(text);
    expect(pieces.join('')).toBe(text);
    expect(pieces.length).toBeLessThanOrEqual(tokens.length);
  });

  it('merges an over-long pre-token in pieces of at most MAX_PRETOKEN_CHARS', () => {
    const n = MAX_PRETOKEN_CHARS * 3;
    // Three full pieces of one letter encode to three times the tokens of one piece.
    expect(encodeText('q'.repeat(n)).length).toBe(3 * encodeText('q'.repeat(MAX_PRETOKEN_CHARS)).length);
    // At the cap the library's answer is kept unchanged.
    const atCap = 'q'.repeat(MAX_PRETOKEN_CHARS);
    expect(encodeText(atCap)).toEqual(libraryEncode(atCap, PLAIN));
  });

  it('never splits a surrogate pair at a piece boundary', () => {
    const text = 'a' + '𝔘'.repeat(MAX_PRETOKEN_CHARS);
    expect(tokenPieces(text).join('')).toBe(text);
  });
});

describe('tokenizer: hostile runs', () => {
  it('a run past the split regex’s stack (millions of one CJK character) encodes instead of throwing', () => {
    const text = `a${'中'.repeat(4_300_000)} tail`;
    const tokens = encodeText(text);
    expect(tokens.length).toBeGreaterThan(4_300_000 / MAX_PRETOKEN_CHARS);
    expect(tokens.length).toBeLessThan(text.length);
  }, 60_000);

  it('the merge cache stays within its weight when filled with long distinct pieces', () => {
    const rng = mulberry32(11);
    // ~11,700 distinct pieces of 256 random CJK characters; each encodes to more ids than characters.
    const text = Array.from({ length: 3_000_000 }, () => String.fromCharCode(0x4e00 + Math.floor(rng() * 20_000))).join('');
    const ids = encodeText(text);
    expect(ids.length).toBeGreaterThan(text.length);
    // So each cached piece weighs over 2 × 256: two generations of half the weight each hold fewer than this.
    expect(tokenizerState().merge_cache).toBeLessThanOrEqual(Math.ceil(MERGE_CACHE_WEIGHT / (2 * MAX_PRETOKEN_CHARS)) + 2);
  }, 60_000);
});
