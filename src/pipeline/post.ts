/**
 * Post-inference work: the billing record (one ledger entry per response),
 * the persistence hook (stored responses go to the response store), and one
 * structured log line per response. Usage itself is summed by the engine as
 * the model calls finish.
 *
 * Used by the engine when a response ends, inline or overlapped with the next
 * request (a mode's choice). Persisting and accounting (billing + log) are
 * separate steps because they have different durability needs: by default
 * the engine persists a stored response before its terminal event and may
 * overlap only the accounting (see `Switches.overlap_persist`). `persist`
 * throws when the store does, so the caller can report the failure;
 * `PostWorkTracker` owns overlapped work so none is lost: shutdown awaits it
 * and its count is reported. Leaves out real payment: the ledger is in
 * memory (per-owner totals plus a bounded ring of recent entries), which is enough to pay the cost of computing and recording the
 * entry.
 */
import type { Logger } from 'pino';
import type { InputItem, Response } from '../protocol/objects.js';
import { runCooperative } from '../cooperative.js';
import type { AppendedItems, PreparedPut, ResponseStore, StoredResponse } from '../store/types.js';
import type { RunMetrics } from './metrics.js';
import type { Protocol } from '../protocol/designs.js';
import { ownValue } from '../protocol/fields.js';

/** Price per million tokens (USD), for the ledger's cost field. */
const PRICES: Record<string, { input: number; cached: number; output: number }> = {
  default: { input: 1.25, cached: 0.125, output: 10 },
};

export interface LedgerEntry {
  response_id: string;
  owner: string | null;
  model: string;
  input_tokens: number;
  cached_tokens: number;
  output_tokens: number;
  cost_usd: number;
  at: number;
}

/** What one owner (API key) has been billed since the server started. */
export interface LedgerTotals {
  responses: number;
  input_tokens: number;
  cached_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

/** Entries the ledger keeps in its ring of recent ones (`llr serve --ledger-entries N`). */
export const DEFAULT_LEDGER_ENTRIES = 10_000;

/**
 * The billing ledger: per-owner totals for the life of the server (one row
 * per API key, so bounded by the keys configured), plus a ring of the most
 * recent entries for inspection and the tests' exactly-once check. A ledger
 * that kept every entry grew without bound under a soak.
 */
export class Ledger {
  private readonly ring: LedgerEntry[] = [];
  private next = 0;
  /** Entries per response id, for responses still in the ring. */
  private readonly byResponse = new Map<string, number>();
  private readonly owners = new Map<string | null, LedgerTotals>();
  /** Entries recorded in total, evicted from the ring or not. */
  recorded = 0;
  /** Entries for a response that already had one in the ring: double billing, which must stay 0. */
  duplicates = 0;

  constructor(readonly maxEntries = DEFAULT_LEDGER_ENTRIES) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
  }

  record(response: Response, owner: string | null): LedgerEntry {
    const u = response.usage;
    // The model is the client's name for it, and `constructor` priced every token at NaN.
    const price = ownValue(PRICES, response.model) ?? PRICES['default']!;
    const input = u?.input_tokens ?? 0;
    const cached = u?.input_tokens_details.cached_tokens ?? 0;
    const output = u?.output_tokens ?? 0;
    const entry: LedgerEntry = {
      response_id: response.id,
      owner,
      model: response.model,
      input_tokens: input,
      cached_tokens: cached,
      output_tokens: output,
      cost_usd: ((input - cached) * price.input + cached * price.cached + output * price.output) / 1e6,
      at: Date.now(),
    };
    const seen = this.byResponse.get(response.id) ?? 0;
    if (seen > 0) this.duplicates++;
    this.byResponse.set(response.id, seen + 1);
    const t = this.owners.get(owner) ?? { responses: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, cost_usd: 0 };
    t.responses++;
    t.input_tokens += input;
    t.cached_tokens += cached;
    t.output_tokens += output;
    t.cost_usd += entry.cost_usd;
    this.owners.set(owner, t);
    if (this.ring.length < this.maxEntries) this.ring.push(entry);
    else {
      this.forget(this.ring[this.next]!);
      this.ring[this.next] = entry;
    }
    this.next = (this.next + 1) % this.maxEntries;
    this.recorded++;
    return entry;
  }

  private forget(old: LedgerEntry): void {
    const n = (this.byResponse.get(old.response_id) ?? 1) - 1;
    if (n > 0) this.byResponse.set(old.response_id, n);
    else this.byResponse.delete(old.response_id);
  }

  /** How many entries a response has (while it is among the recent ones): the tests' proof that billing ran exactly once. */
  countFor(responseId: string): number {
    return this.byResponse.get(responseId) ?? 0;
  }

  /** The most recent entries, oldest first. */
  get entries(): LedgerEntry[] {
    return this.ring.length < this.maxEntries ? this.ring.slice() : [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)];
  }

  /** Totals for one owner (null: no API keys configured). */
  totals(owner: string | null): LedgerTotals | undefined {
    return this.owners.get(owner);
  }
}

export interface PostInferenceJob {
  response: Response;
  /** The wall-clock ms the response's `created_at` (seconds) was taken from, for the store's age check; absent: `created_at`. */
  created_at_ms?: number;
  /** This response's own input items (for the store). */
  input: InputItem[];
  /** What clients appended to it while it ran (a long-lived run), for the store. */
  appended?: AppendedItems[];
  owner: string | null;
  mode: Protocol;
  metrics: RunMetrics;
  /** What `PostInference.prepare` had the store make of the record ahead of `persist` (a long one's JSON, in slices). */
  prepared?: PreparedPut;
}

export class PostInference {
  constructor(
    private readonly ledger: Ledger,
    private readonly store: ResponseStore,
    private readonly log: Logger,
  ) {}

  /** Whether `prepare(job)` would make anything (a `store:true` response whose record is long for its store): no work made. */
  prepares(job: PostInferenceJob): boolean {
    return job.response.store && this.store.prepare?.(storedRecord(job)) !== undefined;
  }

  /**
   * A `store:true` response whose record is long (its strings past `NATIVE_TEXT_CHARS`): the store's serialisation
   * of it (`ResponseStore.prepare`), in slices that give the event loop a turn, for `persist` to write; timed as
   * `persist`. Undefined when there is nothing to wait for (a short record, `store: false`, a store that serialises
   * nothing). Never rejects: a failure leaves `persist` to serialise the record itself (and to report what fails).
   * The record is the response as it is now: called once it is final (its status and usage set), and nothing may
   * change it before `persist`.
   */
  prepare(job: PostInferenceJob): Promise<void> | undefined {
    if (!job.response.store || this.store.prepare === undefined) return undefined;
    const rec = storedRecord(job);
    let work;
    try {
      work = this.store.prepare(rec);
    } catch {
      return undefined;
    }
    if (work === undefined) return undefined;
    return job.metrics.timeAsync('persist', () => runCooperative(work)).then(
      (prepared) => void (job.prepared = prepared),
      () => {},
    );
  }

  /** Write a `store:true` response to the store (a no-op otherwise), as `prepare` made it if it did. Throws when the store does. */
  persist(job: PostInferenceJob): void {
    const { response, metrics } = job;
    if (!response.store) return;
    metrics.time('persist', () => {
      const prepared = job.prepared;
      this.store.put(prepared?.rec ?? storedRecord(job), prepared);
      metrics.count('persisted');
    });
  }

  /** The billing record and the log line: once per response. */
  account(job: PostInferenceJob): void {
    const { response, metrics } = job;
    metrics.count('post_inference');
    metrics.time('billing', () => {
      this.ledger.record(response, job.owner);
      metrics.count('billing_records');
    });
    metrics.time('log', () => {
      this.log.info(
        {
          response_id: response.id,
          mode: job.mode,
          status: response.status,
          model: response.model,
          usage: response.usage,
          output_items: response.output.length,
          elapsed_ms: metrics.elapsed(),
        },
        'response finished',
      );
    });
  }
}

/** The record a job's response is stored as. */
function storedRecord(job: PostInferenceJob): StoredResponse {
  const { response } = job;
  const rec: StoredResponse = { response, input: job.input, owner: job.owner, created_at: response.created_at };
  if (job.created_at_ms !== undefined) rec.created_at_ms = job.created_at_ms;
  if (job.appended?.length) rec.appended = job.appended;
  rec.protocol = job.mode;
  return rec;
}

/** Owns post-inference work that runs after the terminal event. */
export class PostWorkTracker {
  private readonly pending = new Set<Promise<void>>();
  completed = 0;
  failed = 0;

  constructor(private readonly log: Logger) {}

  /** Run `fn` off the critical path (after the current I/O turn), tracked until done. */
  defer(fn: () => void | Promise<void>): void {
    const p = new Promise<void>((resolve) => setImmediate(resolve))
      .then(fn)
      .then(
        () => void this.completed++,
        (err: unknown) => {
          this.failed++;
          this.log.error({ err }, 'post-inference work failed');
        },
      )
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  get inFlight(): number {
    return this.pending.size;
  }

  /** Await all outstanding work, including work deferred meanwhile, until none is left (shutdown). */
  async flush(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /**
   * Await the work outstanding now (a snapshot), not work deferred later: under a steady load (other clients' runs
   * ending) `flush` may never find nothing pending, and a caller that is not shutting the server down (a demo race)
   * needs only what was there when it asked. Never rejects (each job's failure is counted and logged by `defer`).
   */
  async settled(): Promise<void> {
    if (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
