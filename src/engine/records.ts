/**
 * The server's own record of every response it served: which protocol and
 * mode, its status, usage, counters and stage totals. Tests and benchmarks
 * read it (over `GET /llr/runs`) to prove what happened on the server side —
 * e.g. that Codex really used the long-lived protocol and did not silently
 * fall back to HTTP. Bounded: keeps the newest `limit` records.
 */
import type { TimingSpan } from '../protocol/events.js';
import type { Usage } from '../protocol/objects.js';

export interface RunRecord {
  response_id: string;
  /** The wire protocol that carried it: `long-lived`, `ws` or `http`. */
  protocol: string;
  connection: string | null;
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

export class RunRecords {
  private readonly byId = new Map<string, RunRecord>();

  constructor(private readonly limit = 10_000) {}

  upsert(rec: RunRecord): void {
    this.byId.delete(rec.response_id);
    this.byId.set(rec.response_id, rec);
    if (this.byId.size > this.limit) {
      const oldest = this.byId.keys().next().value;
      if (oldest !== undefined) this.byId.delete(oldest);
    }
  }

  get(id: string): RunRecord | undefined {
    return this.byId.get(id);
  }

  list(): RunRecord[] {
    return [...this.byId.values()];
  }
}
