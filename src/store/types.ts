/**
 * The response store contract: what a stored response is, the synchronous
 * `ResponseStore` interface both stores implement, and the one rule for which
 * items of a record can be found by id.
 *
 * Used by the HTTP mode (GET/DELETE /v1/responses/{id}, previous_response_id
 * chains, item_reference resolution) and by the persist stage. Synchronous
 * on purpose: better-sqlite3 does its work on the calling thread, and that
 * cost on the request path is part of what the HTTP baseline measures; only
 * a long record's serialisation may be made ahead, in slices (`prepare`),
 * the write itself staying one synchronous step.
 * Both stores are bounded (`StoreBounds`): a count and bytes past which the
 * oldest puts are evicted, and an age past which a response is gone.
 * Leaves out listing responses (a response's own input items are listed, a
 * page at a time: store/input-items.ts) and any async/remote store.
 */
import type { Work } from '../cooperative.js';
import { withoutLogprobs, type InputItem, type OutputItem, type Response } from '../protocol/objects.js';
import type { Protocol } from '../protocol/designs.js';
import type { Logger } from 'pino';

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
  /**
   * The process running this response (`THIS_RUNNER`, store/runner.ts), set only on a record stored before the run
   * ended (a background response's, `in_progress`, stored when it starts); the final write replaces that record.
   */
  runner?: string;
  /**
   * The design that made it (`Protocol`: `long-lived-http` is the one a cancel reads, to answer a repeated cancel of
   * a run that has ended with its final Response, as a background response's is). Absent in a record stored before
   * the SQLite schema's version 6.
   */
  protocol?: Protocol;
}

/**
 * A record stored before its run ended (`in_progress` or `queued`): its final write replaces it. One whose runner is
 * gone (`runnerElsewhere`) never ends: readers answer it `failed` (`orphanedResponse`).
 */
export function unfinished(rec: Pick<StoredResponse, 'response'>): boolean {
  const status = rec.response.status;
  return status === 'in_progress' || status === 'queued';
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
  // The response's own output as a context holds it: its text without the logprobs it listed (protocol/objects.ts).
  for (const batch of rec.appended ?? []) {
    const at = Math.min(Math.max(next, batch.at), output.length);
    for (; next < at; next++) into.push(withoutLogprobs(output[next]!));
    for (const item of batch.items) into.push(item);
  }
  for (; next < output.length; next++) into.push(withoutLogprobs(output[next]!));
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
  /** Responses a store deleted for being older than its `ttlMs` (a few at a time, by later puts and the idle sweep). */
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
   * once, and later puts and the idle sweep (`ExpirySweep`) delete it (`EXPIRE_BATCH` at a time). Default (and
   * Infinity): kept until evicted.
   */
  ttlMs?: number;
  /** The wall clock the age is measured on, ms since the epoch (tests inject one); default `Date.now`. */
  now?: () => number;
}

/** The in-memory stores' bounds: the same shape (kept as a name for callers). */
export type MemoryBounds = StoreBounds;

export const UNBOUNDED: StoreBounds = { maxResponses: Infinity, maxBytes: Infinity };

/**
 * Expired responses one put, or one step of the idle sweep (`ExpirySweep`), deletes at most: the rest wait for
 * later puts or the sweep's next step (reads already treat them as gone).
 */
export const EXPIRE_BATCH = 64;

/**
 * Bytes of expired rows one step of a SQLite store's expiry (a put's, a step of the idle sweep) deletes at most, at
 * least one row whatever its size: freeing a row walks its overflow pages, and 64 rows of 16 MiB (a body's limit)
 * held the event loop about a second (8 MiB rows: 0.57 s). The rest go at the next step, after a yield.
 */
export const EXPIRE_BATCH_BYTES = 8 * 1024 * 1024;

/**
 * The idle sweep's shortest wait between two wakes (ms): it never wakes more often than this, whatever the TTL,
 * so a record expires from memory or disk at most this long after its age passes `ttlMs` (reads hide it at once).
 */
export const SWEEP_MIN_DELAY_MS = 1_000;

/**
 * The idle sweep's longest wait (ms): past it the store looks again even when nothing is due. A TTL of 30 days
 * is past what a timer can wait (2^31-1 ms, about 24.8 days: Node fires a longer one at once), and the wait is
 * on the monotonic clock while ages are on the wall clock, so a wall-clock step forward is caught within this.
 */
export const SWEEP_MAX_DELAY_MS = 60 * 60 * 1000;

/** Where a store reports what goes wrong with no caller to tell (its idle sweep): the server's pino logger. */
export type StoreLog = Pick<Logger, 'warn' | 'info'>;

/**
 * A store's idle expiry sweep, when it has a TTL (none at all without one): one unref'd timer (it never keeps the
 * process alive) that wakes when the store's oldest record would expire (`next`), no sooner than
 * `SWEEP_MIN_DELAY_MS` after it was set and no later than `SWEEP_MAX_DELAY_MS`, and deletes expired records
 * `EXPIRE_BATCH` at a time (`step`, the store's own expiry, counted in `counters.expired`), yielding to the event
 * loop (setImmediate) between batches. Without it an idle store kept its expired records for good: they were
 * deleted only by later puts. `close` stops it, a step under way included. A step that throws is tried again after
 * the shortest wait; the first failure is logged (`store_sweep_failed`, at `warn`, with the error) and no other
 * until a step succeeds (`store_sweep_recovered`, at `info`, with how many failed): a sweep that kept failing (a
 * file locked by another process, made unreadable, corrupted) was retried every second, unseen, or would have
 * logged a line a second.
 */
export class ExpirySweep {
  readonly #now: () => number;
  readonly #enabled: boolean;
  #timer: NodeJS.Timeout | undefined;
  /** When the armed timer fires, on the store's clock (`bounds.now`); Infinity when none is armed. */
  #at = Infinity;
  #immediate: NodeJS.Immediate | undefined;
  #closed = false;
  /** Steps (or `next`) that threw since the last that did not: only the first is logged. */
  #failures = 0;

  /**
   * `step` deletes up to `EXPIRE_BATCH` expired records and says whether it stopped at its batch's bound (more may
   * be due: the next step after a yield) rather than at the first live record; `next` is when the store's
   * next record expires at the earliest (Unix ms on `bounds.now`), Infinity to look again after the longest wait,
   * undefined when the store holds nothing to wait for.
   */
  constructor(
    bounds: StoreBounds,
    private readonly step: () => boolean,
    private readonly next: () => number | undefined,
    private readonly log?: StoreLog,
  ) {
    this.#now = bounds.now ?? (() => Date.now());
    this.#enabled = Number.isFinite(bounds.ttlMs ?? Infinity);
  }

  /** Whether a wake (or a step) is pending: tests look. */
  get pending(): boolean {
    return this.#timer !== undefined || this.#immediate !== undefined;
  }

  /**
   * A record was put (or the store opened): make sure a wake is pending, by `at` (a record expiring then; ms on the
   * store's clock) when given, else by the store's `next`. Moves an armed wake earlier, never later.
   */
  wake(at?: number): void {
    if (this.#closed || !this.#enabled || this.#immediate !== undefined) return;
    if (this.#timer !== undefined && (at === undefined || this.#fireAt(at) >= this.#at)) return;
    const when = at ?? this.next();
    if (when !== undefined) this.#arm(when);
  }

  close(): void {
    this.#closed = true;
    this.#clear();
  }

  #fireAt(at: number): number {
    const now = this.#now();
    return now + Math.min(Math.max(at - now, SWEEP_MIN_DELAY_MS), SWEEP_MAX_DELAY_MS);
  }

  #arm(at: number): void {
    this.#clear();
    const fireAt = this.#fireAt(at);
    this.#at = fireAt;
    this.#timer = setTimeout(this.#run, fireAt - this.#now());
    this.#timer.unref();
  }

  #clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#immediate !== undefined) clearImmediate(this.#immediate);
    this.#timer = undefined;
    this.#immediate = undefined;
    this.#at = Infinity;
  }

  readonly #run = (): void => {
    this.#timer = undefined;
    this.#immediate = undefined;
    this.#at = Infinity;
    if (this.#closed) return;
    let when: number | undefined;
    try {
      if (this.step()) {
        this.#recovered();
        // Perhaps more: the next batch after whatever else the event loop has to do.
        this.#immediate = setImmediate(this.#run);
        this.#immediate.unref();
        return;
      }
      when = this.next();
      this.#recovered();
    } catch (err) {
      // A delete refused (another process holding a SQLite file's write lock, a full disk, a file made unreadable
      // or corrupted): thrown from a timer it would end the process. Tried again after the shortest wait; reads still
      // hide what expired, and puts still delete it. Logged once, not once a second, until a step succeeds.
      if (this.#failures++ === 0) {
        this.log?.warn({ err, code: 'store_sweep_failed' }, "the store's expiry sweep failed; it tries again every second (not logged again until it succeeds)");
      }
      when = -Infinity;
    }
    if (when !== undefined) this.#arm(when);
  };

  /** A step succeeded: if steps had failed, that they no longer do (once). */
  #recovered(): void {
    if (this.#failures === 0) return;
    this.log?.info({ code: 'store_sweep_recovered', failures: this.#failures }, "the store's expiry sweep succeeded again");
    this.#failures = 0;
  }
}

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

/** What a store's `prepare` made of a record ahead of its put (its JSON, in slices): for `put(rec, prepared)` of that record only. */
export interface PreparedPut {
  readonly rec: StoredResponse;
}

export interface ResponseStore {
  /**
   * Insert, or replace by response.id (the record's items are re-indexed), in one synchronous step. `prepared`: what
   * `prepare(rec)` made of this same record, unchanged since (anything else is ignored: the record is serialised here).
   */
  put(rec: StoredResponse, prepared?: PreparedPut): void;
  /**
   * Work (yielding between slices: run it with `runCooperative`) that serialises a record whose strings are long
   * (`textOver` past `NATIVE_TEXT_CHARS`) for its `put`, so the put's own turn only writes; undefined when the put
   * serialises nothing long (a short record, or a store that serialises nothing, as the in-memory one, which shares
   * strings). Writes nothing: the put still does, when it is called, so what it guarantees (a response stored before
   * its terminal event, the order of puts and deletes) is the put's. The SQLite store's `JSON.stringify` of a
   * Response echoing 2.5 million lone surrogates (six-character escapes each) held the loop ~0.4 s in the put's turn.
   */
  prepare?(rec: StoredResponse): Work<PreparedPut> | undefined;
  /** Undefined when missing OR owned by someone else, so existence never leaks across owners. */
  get(id: string, owner: string | null): StoredResponse | undefined;
  /** Whether `get` would find it, without reading the record (a large one costs its copy or its parse). */
  has(id: string, owner: string | null): boolean;
  /**
   * The `previous_response_id` of the owner's stored response `id` (null for a root), read without the record;
   * undefined when `get` would not find it. What names a broken chain's missing link walks (`brokenChain`): with `get`
   * it parsed every link of a 9,001-link chain in one turn (~0.4 s; outside attack).
   */
  previousOf(id: string, owner: string | null): string | null | undefined;
  /**
   * The `runner` of the owner's stored response `id` when it was stored before its end (a background response's
   * record as it started), read without the record; undefined for any other, or when `get` would not find it.
   */
  runner(id: string, owner: string | null): string | undefined;
  /** True when a record owned by `owner` was removed. Responses chained onto it lose their chain. */
  delete(id: string, owner: string | null): boolean;
  /**
   * Walk previous_response_id links from `id` back to the root: records oldest
   * first. Undefined when any link is missing, owned by someone else, or the
   * walk exceeds MAX_CHAIN_LINKS (a cycle).
   */
  chain(id: string, owner: string | null): StoredResponse[] | undefined;
  /**
   * `chain`, yielding between records (a long chain's records are megabytes: read and parsed or copied in one turn,
   * 9,001 of them held the event loop 0.5–1 s). Undefined also when a link is gone before it is read.
   */
  chainWork(id: string, owner: string | null): Work<StoredResponse[] | undefined>;
  /**
   * What `GET /v1/responses/{id}/input_items` lists of the owner's stored response `id` (its input, then what was
   * appended to it), undefined as for `get`. Read-only (the items may be the store's own objects), and kept in the
   * store's bounded `InputItemsCache` for the record's current version, so paging through a long list reads, copies or
   * parses its record once, not once a page. A store may hand back an index whose items are not read yet (the SQLite
   * store: the row is read and parsed by `InputItemIndex.derive`, in slices, when the listing's turn comes in the
   * session layer's queue of cold listings); such an index is `gone` if the response was by then.
   */
  inputItems(id: string, owner: string | null): InputItemIndex | undefined;
  /** A stored item by its id (an output item, or an input item that carries an id), scoped to owner. */
  getItem(itemId: string, owner: string | null): InputItem | OutputItem | undefined;
  /** Live counters; copy them (`{...store.counters}`) to take a snapshot. */
  readonly counters: StoreCounters;
  /** Responses it holds, and their bytes as its bounds count them (`GET /llr/stats`). */
  readonly size: number;
  readonly bytes: number;
  /**
   * The responses other processes sharing the store deleted since the last call (`'all'`: more than it can name);
   * absent for a store no other process shares (the memory store).
   */
  othersDeletes?(): Array<{ id: string; owner: string | null }> | 'all';
  close(): void;
}

/** Longest previous_response_id walk; past it the chain is treated as broken (it can only be a cycle or abuse). */
export const MAX_CHAIN_LINKS = 10_000;
/** Links, and bytes of their JSON (a larger record alone), a store on SQLite reads with one query of a chain's records. */
export const CHAIN_PAGE_LINKS = 256;
export const CHAIN_PAGE_BYTES = 1024 * 1024;

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
