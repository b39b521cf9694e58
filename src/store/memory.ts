/**
 * `MemoryStore`: the response store in process memory, for tests and for
 * runs where persistence across restarts is not wanted (`--store memory`).
 *
 * Records are deep-copied on the way in and out, so a caller mutating a
 * Response it put or got cannot change stored state (the SQLite store gets
 * that for free from JSON); only `inputItems` (a listing's read-only view)
 * hands out the stored items themselves. The copy (`copyJson`) shares strings, which are
 * immutable: `structuredClone` copied them too and held the event loop
 * ~0.4 s for a record with 16 MiB of instructions. Nothing is serialised, so
 * `bytes_written` stays 0.
 *
 * Bounded (`MemoryBounds`: `--max-memory-store-responses`,
 * `--max-memory-store-bytes`): past either bound the oldest puts are evicted,
 * as the API lets stored responses expire. A record's size is estimated
 * during the copy (its strings' UTF-8 bytes plus a few bytes per value:
 * about its JSON), so bounding it costs no second walk. The record just put is never
 * the one evicted. A record older than `ttlMs` (`--store-ttl-ms`) is gone
 * for every read at once, and dropped by later puts and by the idle sweep
 * (`ExpirySweep`: a timer set for when the oldest put expires), the oldest
 * puts first, `EXPIRE_BATCH` at a time. The oldest put holds back the ones
 * after it: one put after a younger one (a long run ending after a short one
 * that began later) is dropped at most its run's length after it expired.
 */
import { runSync, type Work } from '../cooperative.js';
import type { InputItem, OutputItem } from '../protocol/objects.js';

import { InputItemsCache, type InputItemIndex } from './input-items.js';
import { EXPIRE_BATCH, ExpirySweep, MAX_CHAIN_LINKS, PutOrder, UNBOUNDED, createdMs, expiryCutoff, itemsById, newCounters, ownInputItems, type ResponseStore, type StoreBounds, type StoreLog, type StoredResponse } from './types.js';

interface Entry {
  rec: StoredResponse;
  items: Map<string, InputItem | OutputItem>;
  /** `createdMs(rec)`: what its age is counted from. */
  created: number;
}

/** What indexing one item id holds (a Map entry in its record, one in the store's index and its one-id array). */
export const ITEM_INDEX_BYTES = 180;

export class MemoryStore implements ResponseStore {
  readonly counters = newCounters();
  readonly #records = new Map<string, Entry>();
  /**
   * item id → ids of the responses holding it, oldest put first. A list, not
   * one id: input item ids are chosen by clients, so two owners (or two
   * responses) can hold the same id and neither may shadow the other.
   */
  readonly #itemIndex = new Map<string, string[]>();
  /** Sizes in put order: what the bounds evict (estimated by `copyJson` as it copies). */
  readonly #order: PutOrder;
  /** Listed records' input item ids (`inputItems`): the items are the records' own, not copies. */
  readonly #listed = new InputItemsCache();
  /** Deletes expired records with no put to do it (only with a TTL): set for when the oldest put expires. */
  readonly #sweep: ExpirySweep;

  constructor(
    readonly bounds: StoreBounds = UNBOUNDED,
    log?: StoreLog,
  ) {
    this.#order = new PutOrder(bounds);
    this.#sweep = new ExpirySweep(bounds, () => this.#expire() === EXPIRE_BATCH, () => this.#nextExpiry(), log);
  }

  /** Whether the idle sweep has a wake (or a batch) pending: none without a TTL, nor once closed. */
  get sweeping(): boolean {
    return this.#sweep.pending;
  }

  /** Estimated bytes held (what `bounds.maxBytes` limits). */
  get bytes(): number {
    return this.#order.bytes;
  }

  get size(): number {
    return this.#records.size;
  }

  put(rec: StoredResponse): void {
    this.counters.writes++;
    const id = rec.response.id;
    this.#drop(id);
    const sized = { bytes: 0 };
    const copy = copyJson(rec, sized);
    const items = itemsById(copy);
    this.#records.set(id, { rec: copy, items, created: createdMs(copy) });
    for (const itemId of items.keys()) {
      const holders = this.#itemIndex.get(itemId);
      if (holders) holders.push(id);
      else this.#itemIndex.set(itemId, [id]);
    }
    // Each item with an id is indexed twice besides its copy (its record's `items` and the store's `#itemIndex`): ~180
    // bytes of heap an item, measured, counted with it. Uncounted, 40 responses of 40,000 items with ids held ~2.3
    // times the bound (outside attack atk62 F2).
    for (const old of this.#order.put(id, sized.bytes + ITEM_INDEX_BYTES * items.size)) {
      this.#drop(old);
      this.counters.evicted++;
    }
    this.#expire();
    this.#sweep.wake();
  }

  /**
   * Drop up to EXPIRE_BATCH expired records from the oldest puts, stopping at the first live one (reads hide the
   * rest); how many went. A put's, and each step of the idle sweep.
   */
  #expire(): number {
    const cutoff = expiryCutoff(this.bounds);
    if (cutoff === -Infinity) return 0;
    let n = 0;
    for (const id of this.#order.ids()) {
      if (n === EXPIRE_BATCH || this.#records.get(id)!.created > cutoff) break;
      this.#drop(id);
      this.counters.expired++;
      n++;
    }
    return n;
  }

  /** When the oldest put expires (`#expire` stops at it); undefined when nothing is held. */
  #nextExpiry(): number | undefined {
    for (const id of this.#order.ids()) return this.#records.get(id)!.created + (this.bounds.ttlMs ?? Infinity);
    return undefined;
  }

  get(id: string, owner: string | null): StoredResponse | undefined {
    this.counters.reads++;
    const entry = this.#owned(id, owner, expiryCutoff(this.bounds));
    if (!entry) return undefined;
    this.counters.rows_read++;
    return copyJson(entry.rec);
  }

  runner(id: string, owner: string | null): string | undefined {
    this.counters.reads++;
    return this.#owned(id, owner, expiryCutoff(this.bounds))?.rec.runner;
  }

  has(id: string, owner: string | null): boolean {
    this.counters.reads++;
    return this.#owned(id, owner, expiryCutoff(this.bounds)) !== undefined;
  }

  previousOf(id: string, owner: string | null): string | null | undefined {
    this.counters.reads++;
    return this.#owned(id, owner, expiryCutoff(this.bounds))?.rec.response.previous_response_id;
  }

  delete(id: string, owner: string | null): boolean {
    this.counters.writes++;
    const entry = this.#records.get(id);
    if (!entry || entry.rec.owner !== owner) return false;
    this.#drop(id);
    // An expired record goes all the same, but it was already gone: not found.
    if (entry.created > expiryCutoff(this.bounds)) return true;
    this.counters.expired++;
    return false;
  }

  chain(id: string, owner: string | null): StoredResponse[] | undefined {
    return runSync(this.chainWork(id, owner));
  }

  /** The links walked first (no copy for a broken chain), then each record copied, oldest first, a yield after each. */
  *chainWork(id: string, owner: string | null): Work<StoredResponse[] | undefined> {
    this.counters.reads++;
    const newestFirst: string[] = [];
    const cutoff = expiryCutoff(this.bounds);
    let next: string | null = id;
    while (next !== null) {
      if (newestFirst.length >= MAX_CHAIN_LINKS) return undefined;
      const entry = this.#owned(next, owner, cutoff);
      if (!entry) return undefined;
      newestFirst.push(next);
      next = entry.rec.response.previous_response_id;
    }
    const records: StoredResponse[] = [];
    for (let i = newestFirst.length - 1; i >= 0; i--) {
      // Gone or put again meanwhile (by the time a yield let other requests in): not the chain walked.
      const entry = this.#owned(newestFirst[i]!, owner, cutoff);
      if (!entry || entry.rec.response.previous_response_id !== (i + 1 < newestFirst.length ? newestFirst[i + 1]! : null)) return undefined;
      records.push(copyJson(entry.rec));
      yield;
    }
    this.counters.rows_read += records.length;
    return records;
  }

  /** The stored record's own items, not a copy (a page of 20 of 50,000 items copied all 50,000 with `get`): read-only. */
  inputItems(id: string, owner: string | null): InputItemIndex | undefined {
    this.counters.reads++;
    const entry = this.#owned(id, owner, expiryCutoff(this.bounds));
    if (!entry) return undefined;
    this.counters.rows_read++;
    return this.#listed.get(id, entry.rec, () => ({ items: ownInputItems(entry.rec), bytes: 0 }));
  }

  getItem(itemId: string, owner: string | null): InputItem | OutputItem | undefined {
    this.counters.reads++;
    const holders = this.#itemIndex.get(itemId);
    if (!holders) return undefined;
    const cutoff = expiryCutoff(this.bounds);
    // Newest put wins, matching the SQLite store's rowid order.
    for (let i = holders.length - 1; i >= 0; i--) {
      const entry = this.#records.get(holders[i]!);
      if (!entry || entry.rec.owner !== owner || entry.created <= cutoff) continue;
      const item = entry.items.get(itemId);
      if (item === undefined) continue;
      this.counters.rows_read++;
      return copyJson(item);
    }
    return undefined;
  }

  close(): void {
    this.#sweep.close();
    this.#records.clear();
    this.#itemIndex.clear();
    this.#order.clear();
    this.#listed.clear();
  }

  /** The owner's live record: undefined when missing, foreign, or created at or before `cutoff` (expired). */
  #owned(id: string, owner: string | null, cutoff: number): Entry | undefined {
    const entry = this.#records.get(id);
    return entry && entry.rec.owner === owner && entry.created > cutoff ? entry : undefined;
  }

  /** Remove a response and its item index entries (a replace, a delete, an eviction). */
  #drop(responseId: string): void {
    const entry = this.#records.get(responseId);
    if (!entry) return;
    this.#records.delete(responseId);
    this.#order.delete(responseId);
    this.#listed.delete(responseId);
    for (const itemId of entry.items.keys()) {
      // In place, no copy: an eviction drops the oldest put, first in each of its lists (a shift), and runs on
      // every put past the bound. Copying each list (filter) cost O(items × holders) per put, so a put grew with
      // the records held when every record repeats the same input item ids (store.test.ts checks a put while
      // evicting against a put while filling).
      const holders = this.#itemIndex.get(itemId);
      const at = holders ? holders.indexOf(responseId) : -1;
      if (at < 0) continue;
      if (holders!.length === 1) this.#itemIndex.delete(itemId);
      else if (at === 0) holders!.shift();
      else holders!.splice(at, 1);
    }
  }
}

/** What an object or array costs the estimate besides its values and keys (`copyJson`): about a V8 empty one's heap. */
export const CONTAINER_BYTES = 32;

/**
 * A deep copy of a JSON-shaped value (what records hold): arrays and plain
 * objects copied, strings and other primitives shared. `__proto__` stays an
 * own key, as JSON.parse makes it. With `sized` (a put), an estimate of
 * `v`'s size is added to `sized.bytes` on the way: the strings' UTF-8
 * bytes, the keys, plus 8 per value and `CONTAINER_BYTES` per object or array.
 */
export function copyJson<T>(v: T, sized?: { bytes: number }): T {
  if (sized) {
    sized.bytes += 8;
    // UTF-8 bytes, not UTF-16 units: CJK text is 3 bytes a character, and counting units let it hold 3× the bound.
    // And at least the two bytes a unit V8 keeps a string in once it holds a character past U+00FF: ASCII text with
    // one emoji in it is two bytes a character in the heap, one in UTF-8 (a fuzz's such texts held ~2.3× the bound:
    // outside fuzzer atk61 F9). Text with any non-ASCII character counts so (Latin-1 alone, one byte, is over-counted).
    if (typeof v === 'string') {
      const utf8 = Buffer.byteLength(v);
      sized.bytes += utf8 > v.length ? Math.max(utf8, 2 * v.length) : utf8;
    }
  }
  if (typeof v !== 'object' || v === null) return v;
  // An object or array is a heap object of its own (~40 bytes when empty): 8 bytes let a body of 199,000 empty
  // arrays, 597 KB of JSON, count 2 MB and hold 8 MB, so the byte bound held ~5x its value (outside attack).
  if (sized) sized.bytes += CONTAINER_BYTES;
  if (Array.isArray(v)) return v.map((x) => copyJson(x, sized)) as T;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    if (sized) sized.bytes += k.length;
    const x = copyJson((v as Record<string, unknown>)[k], sized);
    if (k === '__proto__') Object.defineProperty(out, k, { value: x, writable: true, enumerable: true, configurable: true });
    else out[k] = x;
  }
  return out as T;
}
