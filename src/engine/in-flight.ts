/**
 * The responses being made now whose final state the store will keep (`store: true`), of every design and
 * transport, by id: what a retrieve (`GET /v1/responses/{id}`) and its `input_items` answer while the response is
 * in flight, `in_progress` with its output so far, as the API answers a response it is still making. Before, such a
 * response was `404 response_not_found` until it ended (the store has it then), though its id was already on the
 * wire (`response.created`). A background response has its own registry (modes/background.ts), read first.
 *
 * Bounded by what runs at once (one response per connection's session, each session bounded by the connection
 * caps) and by the store writes pending after a terminal event (`overlap_persist`); an entry is added as its run
 * starts and removed once, when it has ended (sessions' `pump`, in a `finally`) and the store has it.
 */
import type { ResponseRun } from './run.js';

export class InFlightRuns {
  private readonly runs = new Map<string, { run: ResponseRun; owner: string | null }>();

  /** While `run` lives, `find(run.id, owner)` finds it; a response with `store: false` is not kept. */
  add(run: ResponseRun, owner: string | null): void {
    if (run.response.store) this.runs.set(run.id, { run, owner });
  }

  /**
   * `run` has ended: its entry goes once the store has it, at once (its write came before its terminal event), or,
   * with `overlap_persist`, after its deferred write. Until then it is found ended (`find`): it was 404 meanwhile.
   */
  remove(run: ResponseRun): void {
    run.afterWrite(() => {
      if (this.runs.get(run.id)?.run === run) this.runs.delete(run.id);
    });
  }

  /**
   * `owner`'s run `id` while the store does not have it: not ended, or ended with its write to come
   * (`ResponseRun.writePending`); another key's is not found, as retrieve says of a stored one.
   */
  find(id: string, owner: string | null): ResponseRun | undefined {
    const entry = this.runs.get(id);
    return entry && entry.owner === owner && (!entry.run.ended || entry.run.writePending) ? entry.run : undefined;
  }

  get size(): number {
    return this.runs.size;
  }
}
