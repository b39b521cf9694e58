/**
 * The tokenizer wrapper (pieces that rejoin exactly, special-token text as
 * plain text) and the block-hashed prefix cache (prefix hits, block
 * granularity, LRU eviction that keeps chains reachable).
 */
import { describe, expect, it } from 'vitest';
import { PrefixCache } from '../../src/model/prefix-cache.js';
import { countTokens, encodeText, tokenPieces } from '../../src/model/tokenizer.js';

describe('tokenizer', () => {
  const samples = [
    'Hello, world!',
    'café déjà vu — naïve façade',
    'emoji 🎉 and a family 👨‍👩‍👧 and flags 🇫🇷🇯🇵',
    '日本語のテキストと한국어 텍스트',
    '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters outside the BMP',
    '{"cmd":"echo \\"hé\\" | wc -c"}\n\ttabs and\r\nnewlines',
  ];

  it.each(samples)('splits %j into pieces that rejoin exactly', (s) => {
    const pieces = tokenPieces(s);
    expect(pieces.join('')).toBe(s);
    expect(pieces.every((p) => p.length > 0)).toBe(true);
    // A piece never holds half a character: no lone surrogates, no replacement characters.
    // (encodeURIComponent throws on a lone surrogate.)
    for (const p of pieces) expect(() => encodeURIComponent(p)).not.toThrow();
    expect(pieces.join('')).not.toContain('\uFFFD');
    // UTF-8 merging can only reduce the count.
    expect(pieces.length).toBeLessThanOrEqual(encodeText(s).length);
    expect(pieces.length).toBeGreaterThan(0);
  });

  it('gives one piece per token for plain ASCII', () => {
    const s = 'The server streams one delta per token.';
    expect(tokenPieces(s).length).toBe(encodeText(s).length);
    expect(countTokens(s)).toBe(encodeText(s).length);
  });

  it('merges multi-byte characters split across tokens, so there are fewer pieces than tokens', () => {
    const s = '👨‍👩‍👧👨‍👩‍👧👨‍👩‍👧';
    expect(tokenPieces(s).length).toBeLessThan(encodeText(s).length);
  });

  it('encodes special-token text as ordinary text instead of throwing', () => {
    const s = 'before <|endoftext|> after';
    expect(() => encodeText(s)).not.toThrow();
    expect(countTokens(s)).toBeGreaterThan(3);
    expect(tokenPieces(s).join('')).toBe(s);
  });

  it('returns no pieces for empty text', () => {
    expect(tokenPieces('')).toEqual([]);
    expect(countTokens('')).toBe(0);
  });
});

describe('PrefixCache', () => {
  const seq = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => i + offset);

  it('misses on a cold cache and hits every full block after insert', () => {
    const cache = new PrefixCache();
    const prompt = seq(200);
    expect(cache.lookup(prompt)).toBe(0);
    cache.insert(prompt);
    expect(cache.lookup(prompt)).toBe(192); // 3 full blocks; the last 8 tokens are never cached
    expect(cache.size).toBe(3);
  });

  it('reports a shared prefix of a longer prompt (the next turn of a conversation)', () => {
    const cache = new PrefixCache();
    cache.insert(seq(300));
    expect(cache.lookup([...seq(300), ...seq(500, 10_000)])).toBe(256);
  });

  it('stops at the first block that differs, even if later blocks match', () => {
    const cache = new PrefixCache();
    const a = seq(256);
    cache.insert(a);
    const b = [...a];
    b[70] = 999_999; // inside block 2
    expect(cache.lookup(b)).toBe(64);
    // Block keys are chained: identical block 3 content after a different block 2 is a miss.
    const c = [...seq(64, 50_000), ...a.slice(64)];
    expect(cache.lookup(c)).toBe(0);
  });

  it('always returns a multiple of the block size', () => {
    const cache = new PrefixCache(1000, 16);
    for (const n of [5, 16, 17, 100, 129]) {
      cache.insert(seq(n));
      const hit = cache.lookup(seq(n));
      expect(hit % 16).toBe(0);
      expect(hit).toBe(Math.floor(n / 16) * 16);
    }
  });

  it('evicts least recently used blocks beyond maxEntries, tail blocks before roots', () => {
    const cache = new PrefixCache(4, 64);
    const a = seq(256); // 4 blocks: fills the cache
    cache.insert(a);
    expect(cache.size).toBe(4);
    const b = seq(128, 100_000); // 2 more blocks: two of a's must go
    cache.insert(b);
    expect(cache.size).toBe(4);
    expect(cache.lookup(b)).toBe(128);
    // a's deepest blocks were evicted first, so its first two blocks still hit.
    expect(cache.lookup(a)).toBe(128);
  });

  it('refreshes blocks on lookup so a hot prefix survives', () => {
    const cache = new PrefixCache(3, 64);
    const hot = seq(64);
    cache.insert(hot);
    cache.insert(seq(64, 1000));
    cache.insert(seq(64, 2000));
    expect(cache.lookup(hot)).toBe(64); // now most recent
    cache.insert(seq(64, 3000)); // evicts the oldest: the 1000-block
    expect(cache.lookup(hot)).toBe(64);
    expect(cache.lookup(seq(64, 1000))).toBe(0);
  });

  it('keeps exactly the LRU order of deleting and re-adding every touched block (random growing and forking prompts)', () => {
    // The reference: a Map in insertion order, each touched block deleted and re-set, deepest first.
    const blockSize = 4;
    for (let seed = 1; seed <= 20; seed++) {
      let r = seed;
      const rand = (n: number) => ((r = (Math.imul(r, 1103515245) + 12345) >>> 0) % n);
      const cache = new PrefixCache(12, blockSize);
      const ref = new Map<string, true>();
      const touch = (keys: string[]) => {
        for (let i = keys.length - 1; i >= 0; i--) {
          ref.delete(keys[i]!);
          ref.set(keys[i]!, true);
        }
      };
      const keysOf = (p: number[]) => Array.from({ length: Math.floor(p.length / blockSize) }, (_, i) => p.slice(0, (i + 1) * blockSize).join(','));
      const prompts: number[][] = [[]];
      for (let step = 0; step < 300; step++) {
        // Grow a prompt (the usual case), fork one, or start a fresh one.
        const base = prompts[rand(prompts.length)]!;
        const op = rand(3);
        const p = op === 0 ? [...base, ...Array.from({ length: 1 + rand(9) }, () => rand(3))] : op === 1 ? base.slice(0, rand(base.length + 1)) : Array.from({ length: rand(20) }, () => rand(3));
        prompts.push(p);
        if (prompts.length > 8) prompts.shift();
        const keys = keysOf(p);
        let hits = 0;
        while (hits < keys.length && ref.has(keys[hits]!)) hits++;
        expect(cache.lookup(p)).toBe(hits * blockSize);
        touch(keys.slice(0, hits));
        if (rand(4) > 0) {
          cache.insert(p);
          touch(keys);
          for (const k of ref.keys()) {
            if (ref.size <= 12) break;
            ref.delete(k);
          }
        }
        expect(cache.size).toBe(ref.size);
      }
    }
  });

  it('caches nothing with maxEntries = 0 and rejects bad sizes', () => {
    const cache = new PrefixCache(0);
    cache.insert(seq(128));
    expect(cache.lookup(seq(128))).toBe(0);
    expect(() => new PrefixCache(10, 0)).toThrow(RangeError);
  });
});
