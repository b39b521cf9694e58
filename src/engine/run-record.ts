/**
 * A response's record for `GET /llr/runs` (engine/records.ts keeps them), as
 * `ResponseRun` makes it: while the run lives, a live record that reads the
 * run's state when asked; once it ends, a plain frozen copy. Leaves out
 * where records are kept and listed (records.ts) and when a run records
 * (run.ts `record`).
 */
import type { TimingSpan } from '../protocol/events.js';
import type { Response } from '../protocol/objects.js';
import type { Protocol } from '../protocol/designs.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import type { RunRecord } from './records.js';
import type { RunPlan } from './run.js';

/**
 * A running response's record: status, usage, counters, totals and spans are
 * read from the run when asked for (and `toJSON` gives the plain record), so
 * nothing is copied while the run goes on. Holds the run's response and
 * metrics only while it is the record: the run replaces it with a frozen one
 * when it ends.
 */
export class LiveRunRecord implements RunRecord {
  readonly response_id: string;
  readonly protocol: Protocol;
  readonly connection: string | null;
  readonly owner: string | null;
  readonly model: string;
  readonly previous_response_id: string | null;
  readonly started_at: number;
  readonly ended_at = null;
  readonly #response: Response;
  readonly #metrics: RunMetrics;

  constructor(
    response: Response,
    metrics: RunMetrics,
    plan: RunPlan,
    readonly post_deferred: boolean,
    readonly post_done: boolean,
  ) {
    this.#response = response;
    this.#metrics = metrics;
    this.response_id = response.id;
    this.protocol = plan.protocol;
    this.connection = plan.connection;
    this.owner = plan.owner;
    this.model = plan.route.model;
    this.previous_response_id = response.previous_response_id;
    this.started_at = response.created_at;
  }

  get status(): string {
    return this.#response.status;
  }

  get usage(): Response['usage'] {
    return this.#response.usage;
  }

  get counters(): Record<string, number> {
    return { ...this.#metrics.counters };
  }

  get totals(): Record<string, number> {
    return this.#metrics.totals();
  }

  get spans(): TimingSpan[] {
    return this.#metrics.spans;
  }

  toJSON(): RunRecord {
    return plainRecord(this.#response, this.#metrics, this, null, this.post_deferred, this.post_done);
  }
}

/** A run's record as a plain object: copies of its counters, totals and spans (frozen, or a live record's snapshot). */
export function plainRecord(
  r: Response,
  m: RunMetrics,
  who: Pick<RunRecord, 'protocol' | 'connection' | 'owner' | 'model'>,
  endedAt: number | null,
  deferred: boolean,
  postDone: boolean,
): RunRecord {
  return {
    response_id: r.id,
    protocol: who.protocol,
    connection: who.connection,
    owner: who.owner,
    status: r.status,
    model: who.model,
    previous_response_id: r.previous_response_id,
    usage: r.usage,
    counters: { ...m.counters },
    totals: m.totals(),
    spans: m.spans,
    started_at: r.created_at,
    ended_at: endedAt,
    post_deferred: deferred,
    post_done: postDone,
  };
}
