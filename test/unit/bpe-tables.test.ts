/**
 * The o200k tables read from gpt-tokenizer's data file are the library's
 * tables: the same entry (string or bytes) at every rank, the same answer to
 * every rank lookup by bytes (byte-order-mark quirk included), and the same
 * tokens and pieces on seeded text full of the awkward cases (byte-order
 * marks, lone surrogates, U+FFFD, emoji, CJK, special-token text). Also: a
 * malformed data file is refused, and the build yields in slices.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import o200k, { decodeGenerator as libraryDecode, encode as libraryEncode } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { buildTablesWork, LINES_PER_SLICE, rankOfBytes, tokenBytes, type BpeTables } from '../../src/model/bpe-tables.js';
import { runSync } from '../../src/cooperative.js';
import { encodeText, tokenPieces } from '../../src/model/tokenizer.js';
import { mulberry32, pick } from '../../src/model/rng.js';

const require = createRequire(import.meta.url);
const data = readFileSync(require.resolve('gpt-tokenizer/data/o200k_base.tiktoken'));
const libraryRanks = (require('gpt-tokenizer/cjs/bpeRanks/o200k_base') as { default: Array<string | number[]> }).default;
/** The library's byte-pair core (not in its typed API): its rank lookup by bytes is the reference for ours. */
const libraryCore = (o200k as unknown as { bytePairEncodingCoreProcessor: { getBpeRankFromBytes(b: Uint8Array): number | undefined } }).bytePairEncodingCoreProcessor;
const PLAIN = { disallowedSpecial: new Set<string>() };

let built: BpeTables | null = null;
function tables(): BpeTables {
  built ??= runSync(buildTablesWork(data));
  return built;
}

describe('bpe tables: the library’s, entry by entry', () => {
  it('holds the same string or bytes at every rank', () => {
    const t = tables();
    const dec = new TextDecoder('utf-8', { ignoreBOM: true });
    expect(t.size).toBe(libraryRanks.length);
    const mismatches: number[] = [];
    libraryRanks.forEach((want, r) => {
      const got = tokenBytes(t, r);
      const same = typeof want === 'string' ? t.isString[r] === 1 && dec.decode(got) === want : t.isString[r] === 0 && Buffer.from(want).equals(got);
      if (!same) mismatches.push(r);
    });
    expect(mismatches).toEqual([]);
    // Both kinds occur (so the comparison above tested both).
    expect(t.isString.includes(0)).toBe(true);
  });

  it('ranks every byte sequence as the library’s lookup does, byte-order marks included', () => {
    const t = tables();
    const rng = mulberry32(7);
    const interesting = [0xef, 0xbb, 0xbf, 0xe6, 0x97, 0xa5, 0xf0, 0x9f, 0x8e, 0x89, 0xc3, 0xa9, 0x20, 0x61, 0x0a, 0x80, 0xff, 0xc0, 0xed, 0xa0];
    const keys: Uint8Array[] = [];
    // Every token's own bytes, a BOM in front of some, and random short sequences.
    for (let r = 0; r < t.size; r += 7) keys.push(tokenBytes(t, r).slice());
    for (let r = 0; r < t.size; r += 97) keys.push(Uint8Array.from([0xef, 0xbb, 0xbf, ...tokenBytes(t, r)]));
    for (let i = 0; i < 20_000; i++) {
      const n = 1 + Math.floor(rng() * 6);
      keys.push(Uint8Array.from({ length: n }, () => (rng() < 0.7 ? pick(rng, interesting) : Math.floor(rng() * 256))));
    }
    const differ = keys.filter((k) => rankOfBytes(t, k) !== libraryCore.getBpeRankFromBytes(k));
    expect(differ.map((k) => [...k])).toEqual([]);
  });
});

describe('bpe tables: refuse a malformed file, build in slices', () => {
  const build = (text: string) => () => runSync(buildTablesWork(Buffer.from(text)));
  it.each([
    ['no space', 'IQ==0\n'],
    ['not base64', 'I*Q== 0\n'],
    ['ranks going down', 'IQ== 1\nIg== 0\n'],
    ['no rank', 'IQ== \n'],
    ['empty', ''],
  ])('refuses %s', (_, text) => {
    expect(build(text)).toThrow(/o200k data/);
  });

  it('fills a gap in the ranks with an empty string token, as the library does', () => {
    const t = runSync(buildTablesWork(Buffer.from('IQ== 0\nIg== 2\n')));
    expect(t.size).toBe(3);
    expect([...t.isString]).toEqual([1, 1, 1]);
    expect(tokenBytes(t, 1).length).toBe(0);
    expect(rankOfBytes(t, Buffer.from('"'))).toBe(2);
  });

  it('yields every LINES_PER_SLICE lines', () => {
    const work = buildTablesWork(data);
    let yields = 0;
    while (!work.next().done) yields++;
    expect(yields).toBeGreaterThanOrEqual(Math.floor(libraryRanks.length / LINES_PER_SLICE));
  });
});

describe('tokenizer over these tables: the library’s tokens on awkward text', () => {
  const parts = ['\uFEFF', '\uFEFFword', 'a\uFEFF', '\uD800', '\uDC00x', '\uFFFD', '日本語', '한국어', '🎉', '👨‍👩‍👧', 'é', 'e\u0301', ' the', 'Hello', '123', '4567', '\n', '\r\n', '\t', '  ', '<|endoftext|>', '<|im_start|>', "'s", '{"a":1}', 'ſ', 'ǅ', 'ℌ', '\u0000', '\u007f', '\u0085', '\u2028'];
  it.each([1, 2, 3, 4, 5, 6, 7, 8])('seed %i: same ids as the library, pieces rejoin', (seed) => {
    const rng = mulberry32(seed);
    for (let n = 0; n < 300; n++) {
      let s = '';
      const len = 1 + Math.floor(rng() * 12);
      for (let i = 0; i < len; i++) s += pick(rng, parts) + (rng() < 0.3 ? ' ' : '');
      expect(encodeText(s)).toEqual(libraryEncode(s, PLAIN));
      if ((s as unknown as { isWellFormed(): boolean }).isWellFormed()) {
        expect(tokenPieces(s).join('')).toBe(s);
        // The library's pieces, where its shared decoder has no quirk to show (no byte-order mark).
        if (!s.includes('\uFEFF')) expect(tokenPieces(s)).toEqual([...libraryDecode(libraryEncode(s, PLAIN))]);
      }
    }
  });
});
