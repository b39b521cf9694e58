/**
 * The server-wide queue of cold `input_items` listings: a listing whose list
 * is not yet in its store's `InputItemsCache` (store/input-items.ts) waits
 * here while the list is loaded (the SQLite store's row, parsed in slices) and
 * its ids derived, one list at a time (`COLD_LISTINGS_AT_ONCE`), each slice
 * run for at most `YIELD_BUDGET_MS` and the next one in a later turn of the
 * event loop (`setImmediate`, so I/O is polled between slices). Each of twenty
 * cold listings of 49,000 items derived at once (`runCooperative`) ran its own
 * slice in every turn: a turn was ~20 slices long, and `/health` waited for the
 * turns of all of them, 1.5–3.8 s (outside attack). Queued, a turn holds one
 * slice, whatever the number of listings waiting; the waiting listings' lists
 * are the same work, done in turn. Listings of a list already derived (the
 * cache's) do not queue.
 *
 * Bounded: at most `maxWaiting` listings (`--max-queued-listings`) wait or run
 * at once; past it 429 `too_many_listings`. Listings of one cached list share
 * its derivation. A listing whose client goes away (its `AbortSignal`) leaves
 * the queue at once; a derivation nobody waits for any more is dropped, queued
 * or running (its progress stays with its index, which a later listing of the
 * same cached list resumes).
 */
import { YIELD_BUDGET_MS } from '../cooperative.js';
import { WireError } from '../protocol/errors.js';
import type { InputItemIndex } from '../store/input-items.js';

/** Lists loaded and derived at once: one, as the loop runs one slice at a time anyway (a second only delays both). */
export const COLD_LISTINGS_AT_ONCE = 1;

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
  leave: () => void;
}

interface Job {
  index: InputItemIndex;
  waiters: Set<Waiter>;
  work: Generator<void, void, void> | null;
}

export class ColdListings {
  /** Longest one slice runs before the next waits for a later turn, ms (a test sets 0: one step a turn). */
  budgetMs = YIELD_BUDGET_MS;
  readonly #queue: Job[] = [];
  readonly #jobs = new Map<InputItemIndex, Job>();
  #running = 0;
  #waiting = 0;
  #closed = false;

  constructor(readonly maxWaiting: number) {}

  /** Listings waiting or running, and lists queued (not yet started). */
  get held(): { waiting: number; queued: number; running: number } {
    return { waiting: this.#waiting, queued: this.#queue.length, running: this.#running };
  }

  /**
   * Settles once `index` is loaded and derived (its listing may then be paged), queued behind the lists before it.
   * Rejects with 429 `too_many_listings` past `maxWaiting`, with the load's error if it failed, and with `signal`'s
   * reason once it aborts (the client went away).
   */
  ready(index: InputItemIndex, signal?: AbortSignal): Promise<void> {
    if (index.ready) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#closed) return Promise.reject(new WireError('server_shutting_down'));
    if (this.#waiting >= this.maxWaiting) {
      return Promise.reject(new WireError('too_many_listings', `Too many input_items listings are waiting for their lists to be read (${this.maxWaiting}, llr serve --max-queued-listings); try again shortly.`));
    }
    let job = this.#jobs.get(index);
    if (!job) {
      job = { index, waiters: new Set(), work: null };
      this.#jobs.set(index, job);
      this.#queue.push(job);
    }
    const j = job;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        if (!j.waiters.delete(waiter)) return;
        this.#waiting--;
        // Nobody waits for a queued list: it leaves the queue (a running one stops at its next slice).
        if (j.waiters.size === 0 && j.work === null) {
          this.#jobs.delete(j.index);
          const at = this.#queue.indexOf(j);
          if (at >= 0) this.#queue.splice(at, 1);
        }
        reject(signal!.reason);
      };
      const waiter: Waiter = {
        resolve,
        reject,
        leave: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      j.waiters.add(waiter);
      this.#waiting++;
      this.#next();
    });
  }

  /**
   * Shutdown (the HTTP transport's, before the server closes its connections and then the store): every listing waiting
   * or running is refused, 503 `server_shutting_down`, and later ones too; a running list stops at its next slice. A
   * listing whose slice came after the store closed (its socket's close not yet seen) read the closed database.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const err = new WireError('server_shutting_down');
    for (const job of this.#jobs.values()) {
      for (const w of job.waiters) {
        w.leave();
        w.reject(err);
      }
      job.waiters.clear();
    }
    for (const job of this.#queue) this.#jobs.delete(job.index);
    this.#queue.length = 0;
    this.#waiting = 0;
  }

  /** Start queued lists while fewer than `COLD_LISTINGS_AT_ONCE` run. */
  #next(): void {
    while (this.#running < COLD_LISTINGS_AT_ONCE && this.#queue.length > 0) {
      const job = this.#queue.shift()!;
      job.work = job.index.derive();
      this.#running++;
      setImmediate(() => this.#slice(job));
    }
  }

  /** One slice of `job` (at most `budgetMs`, at least one step), then the next in a later turn, or the end. */
  #slice(job: Job): void {
    if (job.waiters.size === 0) return this.#end(job, null);
    const start = performance.now();
    try {
      for (;;) {
        if (job.work!.next().done) return this.#end(job, null);
        if (performance.now() - start >= this.budgetMs) break;
      }
    } catch (err) {
      return this.#end(job, { err });
    }
    setImmediate(() => this.#slice(job));
  }

  #end(job: Job, failed: { err: unknown } | null): void {
    this.#jobs.delete(job.index);
    this.#running--;
    for (const w of job.waiters) {
      w.leave();
      if (failed) w.reject(failed.err);
      else w.resolve();
    }
    this.#waiting -= job.waiters.size;
    job.waiters.clear();
    job.work = null;
    this.#next();
  }
}
