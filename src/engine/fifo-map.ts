/**
 * A Map whose oldest entry is found in constant time, however many entries
 * were deleted before it. V8 keeps a deleted Map entry as a hole until the
 * table is rebuilt, and an iterator walks the holes one by one from the
 * start: a ring that deletes its oldest at every insert (`keys().next()`, or
 * a `for … of` that breaks at once) walked up to half its capacity each time.
 * Measured (node 20): ~5.6 µs per insert-and-drop-oldest on a Map of 10,000
 * entries, ~1 µs on one of 1,000. The run records (engine/records.ts, 1,000
 * by default) drop their oldest at every response's first record, on the
 * path from a ws-mode `response.create` to its first event
 * (docs/benchmarks.md, "Twenty-first pass").
 *
 * Here the keys are also kept in an array in insertion order with a head
 * index: a deleted key leaves an `undefined` slot, the head steps over the
 * leading ones, and the array is rebuilt once its holes outnumber a quarter
 * of the live keys (so each delete pays a constant share). Keys may not be
 * `undefined`. Setting a key already present updates its value in place
 * (its age is unchanged), as a Map does. Pure.
 */
interface Slot<V> {
  value: V;
  /** Index in `keys`. */
  at: number;
}

/** Holes tolerated before a rebuild, whatever the size (a small map is rebuilt rarely). */
const MIN_HOLES = 64;

export class FifoMap<K, V> {
  readonly #map = new Map<K, Slot<V>>();
  #keys: Array<K | undefined> = [];
  #head = 0;
  /** `undefined` slots from `head` on. */
  #holes = 0;

  get size(): number {
    return this.#map.size;
  }

  get(key: K): V | undefined {
    return this.#map.get(key)?.value;
  }

  has(key: K): boolean {
    return this.#map.has(key);
  }

  /** A new key becomes the newest; a present one keeps its age. */
  set(key: K, value: V): this {
    const slot = this.#map.get(key);
    if (slot !== undefined) {
      slot.value = value;
      return this;
    }
    this.#map.set(key, { value, at: this.#keys.length });
    this.#keys.push(key);
    return this;
  }

  delete(key: K): boolean {
    const slot = this.#map.get(key);
    if (slot === undefined) return false;
    this.#map.delete(key);
    this.#keys[slot.at] = undefined;
    this.#holes++;
    this.#trim();
    return true;
  }

  /** The oldest key other than `except`, or undefined when there is none. */
  oldest(except?: K): K | undefined {
    const keys = this.#keys;
    for (let i = this.#head; i < keys.length; i++) {
      const k = keys[i];
      if (k !== undefined && k !== except) return k;
    }
    return undefined;
  }

  /** Values, oldest first. */
  values(): IterableIterator<V> {
    return Array.from(this.#map.values(), (s) => s.value).values();
  }

  /** Entries, oldest first. */
  *entries(): IterableIterator<[K, V]> {
    for (const [k, s] of this.#map) yield [k, s.value];
  }

  #trim(): void {
    const keys = this.#keys;
    while (this.#head < keys.length && keys[this.#head] === undefined) {
      this.#head++;
      this.#holes--;
    }
    if (this.#head === keys.length) {
      this.#keys = [];
      this.#head = 0;
      return;
    }
    const wasted = this.#head + this.#holes;
    if (wasted > MIN_HOLES && wasted * 4 > this.#map.size) this.#rebuild();
  }

  #rebuild(): void {
    const keys: K[] = [];
    for (let i = this.#head; i < this.#keys.length; i++) {
      const k = this.#keys[i];
      if (k === undefined) continue;
      this.#map.get(k)!.at = keys.length;
      keys.push(k);
    }
    this.#keys = keys;
    this.#head = 0;
    this.#holes = 0;
  }
}
