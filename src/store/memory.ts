/**
 * `MemoryStore`: the response store in process memory, for tests and for
 * runs where persistence across restarts is not wanted (`--store memory`).
 *
 * Records are deep-copied on the way in and out, so a caller mutating a
 * Response it put or got cannot change stored state (the SQLite store gets
 * that for free from JSON). The copy (`copyJson`) shares strings, which are
 * immutable: `structuredClone` copied them too and held the event loop
 * ~0.4 s for a record with 16 MiB of instructions. Nothing is serialised, so
 * `bytes_written` stays 0: counting bytes would add the very work this store
 * exists to skip. Leaves out eviction and size limits: it grows until closed.
 */
import type { InputItem, OutputItem } from '../protocol/objects.js';
import { MAX_CHAIN_LINKS, itemsById, newCounters, type ResponseStore, type StoredResponse } from './types.js';

interface Entry {
  rec: StoredResponse;
  items: Map<string, InputItem | OutputItem>;
}

export class MemoryStore implements ResponseStore {
  readonly counters = newCounters();
  readonly #records = new Map<string, Entry>();
  /**
   * item id → ids of the responses holding it, oldest put first. A list, not
   * one id: input item ids are chosen by clients, so two owners (or two
   * responses) can hold the same id and neither may shadow the other.
   */
  readonly #itemIndex = new Map<string, string[]>();

  put(rec: StoredResponse): void {
    this.counters.writes++;
    const id = rec.response.id;
    this.#unindex(id);
    const copy = copyJson(rec);
    const items = itemsById(copy);
    this.#records.set(id, { rec: copy, items });
    for (const itemId of items.keys()) {
      const holders = this.#itemIndex.get(itemId);
      if (holders) holders.push(id);
      else this.#itemIndex.set(itemId, [id]);
    }
  }

  get(id: string, owner: string | null): StoredResponse | undefined {
    this.counters.reads++;
    const entry = this.#owned(id, owner);
    if (!entry) return undefined;
    this.counters.rows_read++;
    return copyJson(entry.rec);
  }

  delete(id: string, owner: string | null): boolean {
    this.counters.writes++;
    if (!this.#owned(id, owner)) return false;
    this.#unindex(id);
    this.#records.delete(id);
    return true;
  }

  chain(id: string, owner: string | null): StoredResponse[] | undefined {
    this.counters.reads++;
    const newestFirst: StoredResponse[] = [];
    let next: string | null = id;
    while (next !== null) {
      if (newestFirst.length >= MAX_CHAIN_LINKS) return undefined;
      const entry = this.#owned(next, owner);
      if (!entry) return undefined;
      newestFirst.push(entry.rec);
      next = entry.rec.response.previous_response_id;
    }
    this.counters.rows_read += newestFirst.length;
    return newestFirst.reverse().map((rec) => copyJson(rec));
  }

  getItem(itemId: string, owner: string | null): InputItem | OutputItem | undefined {
    this.counters.reads++;
    const holders = this.#itemIndex.get(itemId);
    if (!holders) return undefined;
    // Newest put wins, matching the SQLite store's rowid order.
    for (let i = holders.length - 1; i >= 0; i--) {
      const entry = this.#records.get(holders[i]!);
      if (!entry || entry.rec.owner !== owner) continue;
      const item = entry.items.get(itemId);
      if (item === undefined) continue;
      this.counters.rows_read++;
      return copyJson(item);
    }
    return undefined;
  }

  close(): void {
    this.#records.clear();
    this.#itemIndex.clear();
  }

  #owned(id: string, owner: string | null): Entry | undefined {
    const entry = this.#records.get(id);
    return entry && entry.rec.owner === owner ? entry : undefined;
  }

  /** Drop a response's item index entries (before a replace or a delete). */
  #unindex(responseId: string): void {
    const entry = this.#records.get(responseId);
    if (!entry) return;
    for (const itemId of entry.items.keys()) {
      const holders = this.#itemIndex.get(itemId);
      if (!holders) continue;
      const rest = holders.filter((h) => h !== responseId);
      if (rest.length === 0) this.#itemIndex.delete(itemId);
      else this.#itemIndex.set(itemId, rest);
    }
  }
}

/**
 * A deep copy of a JSON-shaped value (what records hold): arrays and plain
 * objects copied, strings and other primitives shared. `__proto__` stays an
 * own key, as JSON.parse makes it.
 */
export function copyJson<T>(v: T): T {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) return v.map(copyJson) as T;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const x = copyJson((v as Record<string, unknown>)[k]);
    if (k === '__proto__') Object.defineProperty(out, k, { value: x, writable: true, enumerable: true, configurable: true });
    else out[k] = x;
  }
  return out as T;
}
