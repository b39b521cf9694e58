/**
 * Coalesce the writes of one event-loop turn into one socket write. A model
 * call emits its events in bursts (an instant model: a whole tool call; a
 * paced one: whatever is due at once), and each `ws.send` / `res.write` is
 * otherwise its own `writev` system call — measured as about 60 % of the
 * server's CPU per streamed delta (`npm run bench:overhead`). The stream is
 * corked at the first write of a turn and uncorked in the same turn's check
 * phase (`setImmediate`), so the bytes, their order and their framing are
 * unchanged: only the number of system calls drops. Used by the WebSocket
 * and SSE transports; leaves out any size or time threshold (a turn is the
 * natural batch: nothing waits for a later one).
 *
 * One exception to "uncorked in the check phase": a call the client runs
 * (`readyToRun`, protocol/events.ts) is written as soon as its
 * `output_item.done` is, with what came before it: the session flushes the
 * transport after it (modes/session.ts, `Transport.flush`). The client can start the tool from that event, and the
 * rest of the turn (the pause's `response.done` with its snapshot of the
 * response, a ws-mode response's completion and bookkeeping) would hold it
 * back (docs/benchmarks.md, "Second pass at the tool step", compares the
 * loop phase of `npm run bench:overhead` before and after).
 * The bytes and their order are unchanged; that turn costs one more write.
 * The run also flushes when the model's stream is over, before its
 * post-inference work (engine/run.ts, `EventSink.flush`).
 *
 * A reader is judged on what it had a chance to read (`backlog`): while a
 * turn's writes are open, its send limit is checked against the bytes left
 * unsent when the turn's first write came, not against the turn's own
 * corked bytes, which no reader could have taken yet. Otherwise a reader
 * that reads was dropped for what one turn wrote: a request's 6 MB tools
 * echoed by `response.created`, `in_progress` and `completed`, then any
 * event in the same turn (`llr:timing`, an error) found 18 MB unsent, over
 * 4 MiB plus twice the largest event. The next turn judges the real backlog,
 * so one that does not read is still dropped, one turn later at most.
 */
export interface Corkable {
  cork(): void;
  uncork(): void;
}

export interface Batcher {
  /** Call before each write to the stream, with the bytes it holds unsent before that write. */
  (unsent: number): void;
  /** Write what this turn has batched now, without waiting for the check phase. */
  flush(): void;
  /** The unsent bytes a send limit judges: those at this turn's first write while its writes are open, else `now`. */
  backlog(now: number): number;
}

/** A function to call before each write to `stream`. */
export function batchWrites(stream: Corkable): Batcher {
  let corked = false;
  // Unsent bytes at this turn's first write; null until a turn writes, and again from its check phase.
  let turn: number | null = null;
  const flush = () => {
    if (!corked) return;
    corked = false;
    stream.uncork();
  };
  const endTurn = () => {
    turn = null;
    flush();
  };
  const batch = ((unsent: number) => {
    if (turn === null) {
      turn = unsent;
      setImmediate(endTurn);
    }
    if (corked) return;
    corked = true;
    stream.cork();
  }) as Batcher;
  batch.flush = flush;
  batch.backlog = (now) => turn ?? now;
  return batch;
}
