/**
 * The server's own record of every response it served: which protocol and
 * mode, its status, usage, counters and stage totals. Tests and benchmarks
 * read it (over `GET /llr/runs`) to prove what happened on the server side —
 * e.g. that Codex really used the long-lived protocol and did not silently
 * fall back to HTTP. Bounded: a ring of the newest `limit` records
 * (`llr serve --max-run-records`, default 1,000) whose estimated size stays
 * within `maxBytes` (`--max-run-records-bytes`, 64 MiB): a record keeps a
 * span per stage run, so a long-lived run of thousands of steps makes one of
 * hundreds of kilobytes, and a thousand of them outgrew any memory budget
 * (found by bench:overhead's long phase, whose heap grew with its warm-up
 * runs). The newest record is kept whatever its size: it holds what its run
 * held while it lived. Each record names its
 * owner (the API key's hash, null without keys) so a caller lists only its
 * own; `page()` is the paginated list `GET /llr/runs` serves.
 */
import { WireError } from '../protocol/errors.js';
import type { TimingSpan } from '../protocol/events.js';
import type { Usage } from '../protocol/objects.js';
import type { Protocol } from '../protocol/designs.js';
import { FifoMap } from './fifo-map.js';

export interface RunRecord {
  response_id: string;
  /** The design that carried it (`Protocol`, protocol/designs.ts). */
  protocol: Protocol;
  connection: string | null;
  /** Who asked for it: the API key's owner id, null when the server has no keys. */
  owner: string | null;
  status: string;
  model: string;
  previous_response_id: string | null;
  usage: Usage | null;
  counters: Record<string, number>;
  totals: Record<string, number>;
  spans: TimingSpan[];
  started_at: number;
  ended_at: number | null;
  /** Post-inference work ran after the terminal event; filled in when it finished. */
  post_deferred: boolean;
  post_done: boolean;
}

export interface RecordPage {
  object: 'list';
  data: RunRecord[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export interface PageQuery {
  /** Only this owner's records (null: the server has no keys, every record). */
  owner: string | null;
  limit: number;
  /** Cursor: the id of the last record of the previous page. */
  after?: string | null;
  /** Newest first (the default, like OpenAI list endpoints) or oldest first. */
  order?: 'asc' | 'desc';
}

/** A record's fields, counters and totals, estimated (bytes). */
const RECORD_BASE_BYTES = 4096;
/** One span as an object in a record (its stage, start and duration): an outside attack measured ~100 bytes on the heap of a 21,000-span record. */
const SPAN_BYTES = 96;

/**
 * A record's estimated heap size: a fixed part and its spans. A live
 * record (a running response's, whose spans the run itself holds and whose
 * `spans` builds them when read) counts its fixed part only until the run
 * ends and replaces it with its final record.
 */
export function recordBytes(rec: RunRecord): number {
  const spans: unknown = Object.getOwnPropertyDescriptor(rec, 'spans')?.value;
  return RECORD_BASE_BYTES + (Array.isArray(spans) ? spans.length * SPAN_BYTES : 0);
}

/** Dropped records whose place a cursor can still resume from (~100 bytes each, whatever `--max-run-records` is). */
const DROPPED_KEPT = 10_000;

/** A kept record, its `recordBytes` when it was put, and its place: a number that grows with each record put for the first time (the ring's order). */
interface Kept {
  rec: RunRecord;
  bytes: number;
  place: number;
}

export class RunRecords {
  /** Oldest first; the oldest found without a walk over the holes of those dropped before it (engine/fifo-map.ts). */
  private readonly byId = new FifoMap<string, Kept>();
  /** The kept records' `bytes`, summed. */
  private total = 0;
  private nextPlace = 0;
  /**
   * The places and owners of the most recently dropped records (`DROPPED_KEPT`), so a
   * cursor naming one still resumes after it: a client paging through while records were dropped (one long
   * run's record can push out the whole ring at once) got an empty last page and `has_more: false`, and
   * never saw the records that remained. A ring, newest at `droppedNext - 1`: written at every drop, read only by a
   * page whose cursor is not a kept record (a scan), so a response's record costs no lookups here.
   */
  private readonly dropped: Array<{ id: string; place: number; owner: string | null }> = [];
  private droppedNext = 0;
  /** Who wants each version of the records of a model put (`watch`), by model; null while nobody does (one check per put). */
  private watchers: Map<string, (rec: RunRecord) => void> | null = null;

  constructor(
    private readonly limit = 1000,
    private readonly maxBytes = Infinity,
  ) {}

  /** Estimated bytes of the records kept (`recordBytes` summed). */
  get bytes(): number {
    return this.total;
  }

  /** Insert or update; an update keeps the record's place (creation order), so cursors stay valid. */
  upsert(rec: RunRecord): void {
    const id = rec.response_id;
    if (this.watchers !== null) this.watchers.get(rec.model)?.(rec);
    const bytes = recordBytes(rec);
    const kept = this.byId.get(id);
    if (kept) {
      this.total += bytes - kept.bytes;
      kept.rec = rec;
      kept.bytes = bytes;
    } else {
      this.total += bytes;
      // A dropped record put again (a long run's final record) is found here first: its ring entry is never read.
      this.byId.set(id, { rec, bytes, place: this.nextPlace++ });
    }
    // Oldest first, never the one just put (the final record of a long run keeps its early place: the ones after it go).
    while (this.byId.size > 1 && (this.byId.size > this.limit || this.total > this.maxBytes)) {
      const oldest = this.byId.oldest(id)!;
      const old = this.byId.get(oldest)!;
      this.dropped[this.droppedNext] = { id: oldest, place: old.place, owner: old.rec.owner };
      this.droppedNext = (this.droppedNext + 1) % DROPPED_KEPT;
      this.byId.delete(oldest);
      this.total -= old.bytes;
    }
  }

  /** The most recent drop of record `id` still in the ring, if any. */
  private droppedEntry(id: string): { place: number; owner: string | null } | undefined {
    const n = this.dropped.length;
    for (let k = 1; k <= n; k++) {
      const d = this.dropped[(this.droppedNext - k + n) % n]!;
      if (d.id === id) return d;
    }
    return undefined;
  }

  get(id: string): RunRecord | undefined {
    return this.byId.get(id)?.rec;
  }

  /**
   * `f` gets each version of every record of model `model` put from now on, until `unwatch(model)`, whether or not
   * the ring still keeps it: a reader that needs its responses' final records (a demo lane, whose model name is its
   * own) has them even when other clients' records pushed them out of the ring meanwhile, or before the reader saw
   * the response start (outside attack atk50 F1). One watcher per model.
   */
  watch(model: string, f: (rec: RunRecord) => void): void {
    (this.watchers ??= new Map()).set(model, f);
  }

  unwatch(model: string): void {
    if (this.watchers === null) return;
    this.watchers.delete(model);
    if (this.watchers.size === 0) this.watchers = null;
  }

  /** Every record, oldest first (tests and benchmarks in process). */
  list(): RunRecord[] {
    return Array.from(this.byId.values(), (k) => k.rec);
  }

  /**
   * One page of `owner`'s records. An `after` id no longer in the ring but recently dropped resumes where
   * it was; one never seen (or another owner's, or dropped before the last `DROPPED_KEPT`) is refused, a
   * `WireError` (400 `invalid_value`, `param: after`), as `input_items` refuses a cursor.
   */
  page(q: PageQuery): RecordPage {
    let all = [...this.byId.values()];
    if (q.owner !== null) all = all.filter((k) => k.rec.owner === q.owner);
    const desc = (q.order ?? 'desc') === 'desc';
    if (desc) all.reverse();
    let start = 0;
    // An empty `?after=` is a cursor naming nothing, refused as input_items refuses it (it was read as no cursor).
    if (q.after !== null && q.after !== undefined) {
      const i = all.findIndex((k) => k.rec.response_id === q.after);
      const gone = i < 0 ? this.droppedEntry(q.after) : undefined;
      if (i >= 0) start = i + 1;
      else if (gone !== undefined && (q.owner === null || gone.owner === q.owner)) {
        // The first record past the dropped one's place, in the page's order.
        const past = all.findIndex((k) => (desc ? k.place < gone.place : k.place > gone.place));
        start = past < 0 ? all.length : past;
      } else {
        // As input_items refuses a cursor naming no item of its list: an empty page would read as the list's end.
        throw new WireError('invalid_value', `Invalid 'after': no run record '${q.after.slice(0, 100)}' (unknown, another key's, or dropped too long ago to resume after).`, 'after');
      }
    }
    const data = all.slice(start, start + q.limit).map((k) => k.rec);
    return {
      object: 'list',
      data,
      first_id: data[0]?.response_id ?? null,
      last_id: data.at(-1)?.response_id ?? null,
      has_more: start + data.length < all.length,
    };
  }
}
