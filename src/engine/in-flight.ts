/**
 * The responses being made now whose final state the store will keep (`store: true`), of every design and
 * transport, by id: what a retrieve (`GET /v1/responses/{id}`) and its `input_items` answer while the response is
 * in flight, `in_progress` with its output so far, as the API answers a response it is still making. Before, such a
 * response was `404 response_not_found` until it ended (the store has it then), though its id was already on the
 * wire (`response.created`). A background response has its own registry (modes/background.ts), read first.
 *
 * Bounded by what runs at once (one response per connection's session, each session bounded by the connection
 * caps); an entry is added as its run starts and removed once, when it has ended (sessions' `pump`, in a `finally`).
 */
import type { ResponseRun } from './run.js';

export class InFlightRuns {
  private readonly runs = new Map<string, { run: ResponseRun; owner: string | null }>();

  /** While `run` lives, `find(run.id, owner)` finds it; a response with `store: false` is not kept. */
  add(run: ResponseRun, owner: string | null): void {
    if (run.response.store) this.runs.set(run.id, { run, owner });
  }

  /** `run` has ended (its store write, before its terminal event, is done unless `overlap_persist` defers it). */
  remove(run: ResponseRun): void {
    if (this.runs.get(run.id)?.run === run) this.runs.delete(run.id);
  }

  /** `owner`'s run `id` while it has not ended; another key's is not found, as retrieve says of a stored one. */
  find(id: string, owner: string | null): ResponseRun | undefined {
    const entry = this.runs.get(id);
    return entry && entry.owner === owner && !entry.run.ended ? entry.run : undefined;
  }

  get size(): number {
    return this.runs.size;
  }
}
