/**
 * engine/fifo-map.ts: a Map whose oldest key is found without walking the
 * holes deletions leave. Checked against a plain Map (what it replaces) over
 * a seeded random mix of inserts, updates, deletes of the oldest, of a key
 * in the middle and of the oldest but one (a pinned head: the run records
 * keep the record just put even when it is the oldest), across the array
 * rebuilds.
 */
import { describe, expect, it } from 'vitest';
import { FifoMap } from '../../src/engine/fifo-map.js';
import { mulberry32 } from '../../src/model/rng.js';

/** The reference: a Map's own order, its oldest found by iterating. */
function oldestOf(m: Map<string, number>, except?: string): string | undefined {
  for (const k of m.keys()) if (k !== except) return k;
  return undefined;
}

describe('FifoMap', () => {
  it('keeps a Map’s order, values and oldest key through 20,000 random operations', () => {
    const rng = mulberry32(7);
    const ref = new Map<string, number>();
    const fifo = new FifoMap<string, number>();
    let next = 0;
    let pinned: string | undefined;
    for (let step = 0; step < 20_000; step++) {
      const r = rng();
      if (r < 0.45 || ref.size === 0) {
        const k = `k${next++}`;
        ref.set(k, step);
        fifo.set(k, step);
      } else if (r < 0.55) {
        // An update keeps the key's age.
        const k = oldestOf(ref)!;
        ref.set(k, -step);
        fifo.set(k, -step);
      } else if (r < 0.8) {
        const k = oldestOf(ref, pinned);
        if (k !== undefined) {
          expect(fifo.delete(k)).toBe(true);
          ref.delete(k);
        }
      } else if (r < 0.95) {
        // A key from the middle leaves a hole that is not at the head.
        const keys = [...ref.keys()];
        const k = keys[Math.floor(rng() * keys.length)]!;
        expect(fifo.delete(k)).toBe(ref.delete(k));
      } else {
        pinned = rng() < 0.5 ? oldestOf(ref) : undefined;
      }
      expect(fifo.size).toBe(ref.size);
      expect(fifo.oldest()).toBe(oldestOf(ref));
      expect(fifo.oldest(pinned)).toBe(oldestOf(ref, pinned));
      if (step % 997 === 0) {
        expect([...fifo.entries()]).toEqual([...ref.entries()]);
        expect([...fifo.values()]).toEqual([...ref.values()]);
      }
    }
    expect(fifo.delete('absent')).toBe(false);
    expect(fifo.has('absent')).toBe(false);
  });

  it('empties and fills again', () => {
    const fifo = new FifoMap<string, number>();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 500; i++) fifo.set(`r${round}-${i}`, i);
      expect(fifo.oldest()).toBe(`r${round}-0`);
      for (let i = 0; i < 500; i++) fifo.delete(fifo.oldest()!);
      expect(fifo.size).toBe(0);
      expect(fifo.oldest()).toBeUndefined();
    }
  });
});
