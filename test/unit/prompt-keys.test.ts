/**
 * `PromptKeys` (model/prefix-cache.ts): the block keys of a growing prompt,
 * extended call by call, must be exactly the keys of hashing the whole
 * prompt each time, and give the same cached counts; a change of partition
 * or block size starts over; a clone grows independently. A cache given a
 * growing prompt's own key array again (the simulated model's every call)
 * looks up and places only the new blocks while nothing else was used or
 * evicted since, with exactly the hits and LRU order of checking them all.
 */
import { describe, expect, it } from 'vitest';
import { runSync } from '../../src/cooperative.js';
import { PrefixCache } from '../../src/model/prefix-cache.js';
import { mulberry32 } from '../../src/model/rng.js';
import { TokenBuffer } from '../../src/pipeline/tokens.js';

describe('PromptKeys', () => {
  it('extends to exactly the keys of the whole prompt, call after call', () => {
    const rng = mulberry32(9);
    const buf = new TokenBuffer();
    const whole = new PrefixCache();
    const incremental = new PrefixCache();
    for (let call = 0; call < 40; call++) {
      const n = Math.floor(rng() * 300);
      buf.pushAll(Array.from({ length: n }, () => Math.floor(rng() * 200_000)));
      const partition = call < 20 ? null : 'owner-a';
      const expected = runSync(whole.keysWork(buf.view(), partition));
      const keys = runSync(buf.keys.work(buf.view(), 64, partition));
      expect(keys.slice()).toEqual(expected);
      expect(buf.keys.covered(64, partition)).toBe(expected.length * 64);
      const a = whole.lookup(buf.view(), partition);
      const b = incremental.lookupKeys(keys, keys.length);
      expect(b).toBe(a);
      whole.insert(buf.view(), partition);
      incremental.insertKeys(keys, keys.length);
    }
  });

  it('starts over for another block size, and a clone grows on its own', () => {
    const buf = new TokenBuffer(Array.from({ length: 1000 }, (_, i) => i));
    const cache = new PrefixCache(100, 32);
    const k32 = runSync(buf.keys.work(buf.view(), 32, null)).slice();
    expect(k32).toEqual(runSync(cache.keysWork(buf.view(), null)));
    const fork = new TokenBuffer(buf.view(), 1024, buf.keys.clone());
    fork.pushAll(Array.from({ length: 100 }, () => 7));
    buf.pushAll(Array.from({ length: 100 }, () => 8));
    const a = runSync(buf.keys.work(buf.view(), 32, null)).slice();
    const b = runSync(fork.keys.work(fork.view(), 32, null)).slice();
    expect(a).toEqual(runSync(cache.keysWork(buf.view(), null)));
    expect(b).toEqual(runSync(cache.keysWork(fork.view(), null)));
    expect(a.slice(0, k32.length)).toEqual(k32);
    expect(a.at(-1)).not.toBe(b.at(-1));
    const k64 = runSync(buf.keys.work(buf.view(), 64, null)).slice();
    expect(k64).toEqual(runSync(new PrefixCache(100, 64).keysWork(buf.view(), null)));
  });

  it("a growing prompt's next call gives the hits and LRU order of checking every block, however prompts interleave, evict and abort", () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const rng = mulberry32(seed);
      // Small enough that inserts evict, sometimes the inserting prompt's own blocks.
      const max = 20 + Math.floor(rng() * 200);
      const fast = new PrefixCache(max, 16);
      const checked = new PrefixCache(max, 16);
      const prompts = Array.from({ length: 3 }, () => new TokenBuffer());
      for (let call = 0; call < 400; call++) {
        const p = Math.floor(rng() * (rng() < 0.7 ? 1 : prompts.length));
        const buf = prompts[p]!;
        buf.pushAll(Array.from({ length: Math.floor(rng() * 120) }, () => Math.floor(rng() * 50_000)));
        const partition = rng() < 0.05 ? 'other' : null;
        const keys = runSync(buf.keys.work(buf.view(), 16, partition));
        // The reference gets a fresh copy each time: nothing it remembers of an array applies. Its hits are
        // counted block by block from the start, against every block it holds.
        const copy = keys.slice();
        const held = new Set(checked.order());
        let hits = 0;
        while (hits < copy.length && held.has(copy[hits]!)) hits++;
        expect(fast.lookupKeys(keys, keys.length)).toBe(hits * 16);
        expect(checked.lookupKeys(copy, copy.length)).toBe(hits * 16);
        // A call aborted during prefill looks up and inserts nothing.
        if (rng() < 0.1) continue;
        fast.insertKeys(keys, keys.length);
        checked.insertKeys(copy, copy.length);
        expect(fast.order()).toEqual(checked.order());
        if (rng() < 0.02) {
          fast.clear();
          checked.clear();
        }
      }
    }
  });

  it('matches a plain Map LRU that touches every block, with prompts that interleave, outgrow the cache and abort', () => {
    // An independent reference (not a second PrefixCache): a Map in recency order, every block of a prompt
    // deleted and set again deepest first, the oldest evicted; hits counted block by block from the start.
    for (const seed of [11, 12, 13, 14, 15, 16, 17, 18]) {
      const rng = mulberry32(seed);
      const max = [1, 3, 8, 40][seed % 4]!;
      const cache = new PrefixCache(max, 4);
      const ref = new Map<number, true>();
      // Every prompt starts with the same two blocks (one chain root), as prompts with the same instructions do.
      const prompts = Array.from({ length: 3 }, () => new TokenBuffer([1, 2, 3, 4, 5, 6, 7, 8]));
      for (let call = 0; call < 600; call++) {
        const buf = prompts[Math.floor(rng() * prompts.length)]!;
        buf.pushAll(Array.from({ length: Math.floor(rng() * 12) }, () => Math.floor(rng() * 1000)));
        const partition = rng() < 0.1 ? 'other' : null;
        const keys = runSync(buf.keys.work(buf.view(), 4, partition));
        let hits = 0;
        while (hits < keys.length && ref.has(keys[hits]!)) hits++;
        expect(cache.lookupKeys(keys, keys.length)).toBe(hits * 4);
        if (rng() < 0.1) continue;
        cache.insertKeys(keys, keys.length);
        for (let i = keys.length - 1; i >= 0; i--) {
          ref.delete(keys[i]!);
          ref.set(keys[i]!, true);
        }
        while (ref.size > max) ref.delete(ref.keys().next().value!);
        expect(cache.order()).toEqual([...ref.keys()]);
        if (rng() < 0.01) {
          cache.clear();
          ref.clear();
        }
      }
    }
  });

  it('places at most maxInsertBlocks blocks per insert of a growing prompt beyond those in place: two that outgrow the cache together stop evicting each other wholesale', () => {
    const budget = 50;
    // A prompt's first insert places it whole; a growth past the budget is placed over its next inserts.
    const fresh = new PrefixCache(10_000, 4, budget);
    const big = Array.from({ length: 180 }, (_, i) => i + 1);
    fresh.insertKeys(big);
    expect(fresh.lookupKeys(big)).toBe(180 * 4);
    for (let i = 0; i < 120; i++) big.push(1_000 + i);
    for (const expected of [230, 280, 300, 300]) {
      fresh.insertKeys(big);
      expect(fresh.lookupKeys(big)).toBe(expected * 4);
      expect(fresh.size).toBe(expected);
    }
    // Two prompts growing in turn past a 400-block cache (an outside attack: each insert evicted the other's blocks and
    // placed all its own again, up to the whole cache per call). Each insert now adds at most `budget` blocks beyond
    // the new ones, what each finds cached is a leading run of its keys, and both keep a share of the cache.
    const cache = new PrefixCache(400, 4, budget);
    const a: number[] = [];
    const b: number[] = [];
    let next = 1_000_000;
    const leadingRun = (keys: readonly number[]) => {
      const order = new Set(cache.order());
      let n = 0;
      while (n < keys.length && order.has(keys[n]!)) n++;
      for (let i = n; i < keys.length; i++) expect(order.has(keys[i]!), `key ${i} of ${keys.length} cached after a gap`).toBe(false);
      return n;
    };
    for (let step = 0; step < 200; step++) {
      for (const keys of [a, b]) {
        for (let j = 0; j < 5; j++) keys.push(next++);
        const before = new Set(cache.order());
        const hits = cache.lookupKeys(keys) / 4;
        expect(hits).toBe(leadingRun(keys));
        cache.insertKeys(keys);
        const added = cache.order().filter((k) => !before.has(k)).length;
        expect(added).toBeLessThanOrEqual(budget);
        expect(cache.size).toBeLessThanOrEqual(400);
        leadingRun(keys);
      }
    }
    expect(cache.lookupKeys(a)).toBeGreaterThan(0);
    expect(cache.lookupKeys(b)).toBeGreaterThan(0);
  });
});
