/**
 * The response store contract: what a stored response is, the synchronous
 * `ResponseStore` interface both stores implement, and the one rule for which
 * items of a record can be found by id.
 *
 * Used by the HTTP mode (GET/DELETE /v1/responses/{id}, previous_response_id
 * chains, item_reference resolution) and by the persist stage. Synchronous
 * on purpose: better-sqlite3 does its work on the calling thread, and that
 * cost on the request path is part of what the HTTP baseline measures.
 * Both stores are bounded (`StoreBounds`): a count and bytes past which the
 * oldest puts are evicted, and an age past which a response is gone.
 * Leaves out listing responses (a response's own input items are listed, a
 * page at a time: store/input-items.ts) and any async/remote store.
 */
import type { InputItem, OutputItem, Response } from '../protocol/objects.js';
import type { InputItemIndex } from './input-items.js';

export interface StoredResponse {
  /** The final Response object. */
  response: Response;
  /** This response's own input items as given (after item_reference resolution), not earlier responses' items. */
  input: InputItem[];
  /**
   * Items a client appended to this response while it ran (a long-lived
   * run's `response.append`: the tool outputs), in order, each batch with
   * the number of output items it followed. Absent (or empty) for a
   * response that took no appends. Without them a stored long-lived run
   * lost its tool outputs: its input items listed only the create's, and a
   * chain from it handed the model calls with no outputs.
   */
  appended?: AppendedItems[];
  /** API key identity (a hash of the key, never the key), or null when auth is off. */
  owner: string | null;
  /** Unix seconds (the Response's `created_at`, as on the wire). */
  created_at: number;
  /**
   * Unix ms of the same moment, when the writer knows it (the run's wall clock): the age `ttlMs` is counted from
   * it, so a response does not expire up to a second early for `created_at` being whole seconds. Ignored unless it
   * falls within `created_at`'s second; without it the age counts from `created_at * 1000` (`createdMs`).
   */
  created_at_ms?: number;
}

/** One `response.append` kept with its response: its items, after the first `at` items of `response.output`. */
export interface AppendedItems {
  at: number;
  items: InputItem[];
}

/**
 * What a stored response adds to a chain's context, in the order the model
 * read it: its input, then its output with each appended batch after the
 * output items it followed.
 */
export function contextItems(rec: StoredResponse, into: InputItem[] = []): InputItem[] {
  for (const item of rec.input) into.push(item);
  const output = rec.response.output;
  let next = 0;
  for (const batch of rec.appended ?? []) {
    const at = Math.min(Math.max(next, batch.at), output.length);
    for (; next < at; next++) into.push(output[next]!);
    for (const item of batch.items) into.push(item);
  }
  for (; next < output.length; next++) into.push(output[next]!);
  return into;
}

/** A record's input items as a listing shows them: its input, then what was appended to it. */
export function ownInputItems(rec: Pick<StoredResponse, 'input' | 'appended'>): InputItem[] {
  if (!rec.appended?.length) return rec.input;
  const all = rec.input.slice();
  for (const batch of rec.appended) for (const item of batch.items) all.push(item);
  return all;
}

/**
 * Real work done, for the benchmark. `reads`/`writes` count store calls
 * (get, chain, getItem / put, delete); `rows_read` counts records and items
 * materialised for callers; `bytes_written` counts serialised bytes (UTF-8).
 */
export interface StoreCounters {
  reads: number;
  writes: number;
  rows_read: number;
  bytes_written: number;
  /** Responses a store dropped to stay within its count and byte bounds (oldest first). */
  evicted: number;
  /** Responses a store deleted for being older than its `ttlMs` (a few at a time, by later puts). */
  expired: number;
}

/**
 * How much a store keeps: past `maxResponses` or `maxBytes` the oldest puts
 * go (`--max-memory-store-*` for the in-memory stores, `--max-file-store-*`
 * for a file), and a response older than `ttlMs` (`--store-ttl-ms`) is gone.
 */
export interface StoreBounds {
  maxResponses: number;
  maxBytes: number;
  /**
   * Age (ms after its creation: `created_at_ms`, else `created_at`) at which a stored response is gone, as
   * the API keeps stored responses 30 days: reads treat it as missing at
   * once, and later puts delete it (`EXPIRE_BATCH` at a time). Default (and
   * Infinity): kept until evicted.
   */
  ttlMs?: number;
  /** The wall clock the age is measured on, ms since the epoch (tests inject one); default `Date.now`. */
  now?: () => number;
}

/** The in-memory stores' bounds: the same shape (kept as a name for callers). */
export type MemoryBounds = StoreBounds;

export const UNBOUNDED: StoreBounds = { maxResponses: Infinity, maxBytes: Infinity };

/** Expired responses one put deletes at most: the rest wait for later puts (reads already treat them as gone). */
export const EXPIRE_BATCH = 64;

/**
 * A record created at `createdMs(rec)` (Unix ms) is alive while that is above
 * this (Unix ms): gone once `ttlMs` ms have passed since. -Infinity when
 * nothing expires.
 */
export function expiryCutoff(bounds: StoreBounds): number {
  const ttl = bounds.ttlMs ?? Infinity;
  if (!Number.isFinite(ttl)) return -Infinity;
  return (bounds.now ?? Date.now)() - ttl;
}

/**
 * When a record was created, Unix ms: its `created_at_ms` when that lies in its `created_at`'s second (a writer
 * that knows the millisecond), else the start of that second (records written without it, rows of older files).
 */
export function createdMs(rec: Pick<StoredResponse, 'created_at' | 'created_at_ms'>): number {
  const ms = rec.created_at_ms;
  return ms !== undefined && Number.isFinite(ms) && Math.floor(ms / 1000) === rec.created_at ? ms : rec.created_at * 1000;
}

/**
 * The bounded part of an in-memory store: each stored response's size, in
 * put order (a replaced one becomes the newest), and which to evict past
 * `bounds`: the oldest first, never the one just put.
 */
export class PutOrder {
  readonly #sizes = new Map<string, number>();
  #bytes = 0;

  constructor(readonly bounds: StoreBounds) {}

  get bytes(): number {
    return this.#bytes;
  }

  /** Record a put of `bytes`; returns the ids the store must now drop, oldest first (already forgotten here). */
  put(id: string, bytes: number): string[] {
    this.delete(id);
    this.#sizes.set(id, bytes);
    this.#bytes += bytes;
    const evicted: string[] = [];
    const { maxResponses, maxBytes } = this.bounds;
    for (const [oldest, size] of this.#sizes) {
      if (this.#sizes.size <= maxResponses && this.#bytes <= maxBytes) break;
      if (oldest === id) continue;
      this.#sizes.delete(oldest);
      this.#bytes -= size;
      evicted.push(oldest);
    }
    return evicted;
  }

  /** Ids in put order, oldest first (live: delete only what was already passed). */
  ids(): IterableIterator<string> {
    return this.#sizes.keys();
  }

  /** Forget a response (deleted, or replaced before its put); nothing when it is not here. */
  delete(id: string): void {
    const size = this.#sizes.get(id);
    if (size === undefined) return;
    this.#sizes.delete(id);
    this.#bytes -= size;
  }

  clear(): void {
    this.#sizes.clear();
    this.#bytes = 0;
  }
}

export interface ResponseStore {
  /** Insert, or replace by response.id (the record's items are re-indexed). */
  put(rec: StoredResponse): void;
  /** Undefined when missing OR owned by someone else, so existence never leaks across owners. */
  get(id: string, owner: string | null): StoredResponse | undefined;
  /** Whether `get` would find it, without reading the record (a large one costs its copy or its parse). */
  has(id: string, owner: string | null): boolean;
  /** True when a record owned by `owner` was removed. Responses chained onto it lose their chain. */
  delete(id: string, owner: string | null): boolean;
  /**
   * Walk previous_response_id links from `id` back to the root: records oldest
   * first. Undefined when any link is missing, owned by someone else, or the
   * walk exceeds MAX_CHAIN_LINKS (a cycle).
   */
  chain(id: string, owner: string | null): StoredResponse[] | undefined;
  /**
   * What `GET /v1/responses/{id}/input_items` lists of the owner's stored response `id` (its input, then what was
   * appended to it), undefined as for `get`. Read-only (the items may be the store's own objects), and kept in the
   * store's bounded `InputItemsCache` for the record's current version, so paging through a long list reads, copies or
   * parses its record once, not once a page.
   */
  inputItems(id: string, owner: string | null): InputItemIndex | undefined;
  /** A stored item by its id (an output item, or an input item that carries an id), scoped to owner. */
  getItem(itemId: string, owner: string | null): InputItem | OutputItem | undefined;
  /** Live counters; copy them (`{...store.counters}`) to take a snapshot. */
  readonly counters: StoreCounters;
  close(): void;
}

/** Longest previous_response_id walk; past it the chain is treated as broken (it can only be a cycle or abuse). */
export const MAX_CHAIN_LINKS = 10_000;

export function newCounters(): StoreCounters {
  return { reads: 0, writes: 0, rows_read: 0, bytes_written: 0, evicted: 0, expired: 0 };
}

/**
 * The items of a record that getItem can find, keyed by item id. Input items
 * come first and output items last, so when one record holds the same id in
 * both, the output item wins. An `item_reference` is skipped: its id names
 * another item, not itself (and input should already be resolved anyway).
 */
export function itemsById(rec: StoredResponse): Map<string, InputItem | OutputItem> {
  const byId = new Map<string, InputItem | OutputItem>();
  for (const item of ownInputItems(rec)) {
    if (item.type === 'item_reference') continue;
    const id = (item as { id?: unknown }).id;
    if (typeof id === 'string' && id !== '') byId.set(id, item);
  }
  for (const item of rec.response.output) byId.set(item.id, item);
  return byId;
}
