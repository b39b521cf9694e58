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
 * (`readyToRun`) is written as soon as its `output_item.done` is, with what
 * came before it. The client can start the tool from that event, and the
 * rest of the turn (the pause's `response.done` with its snapshot of the
 * response, a ws-mode response's completion and bookkeeping) would hold it
 * back by about 0.1 ms per tool step (`npm run bench:overhead`, the loop
 * phase: the p50 from the append to the next call's `output_item.done`).
 * The bytes and their order are unchanged; that turn costs one more write.
 * The run also flushes when the model's stream is over, before its
 * post-inference work (engine/run.ts, `EventSink.flush`).
 */
import type { ServerEvent } from '../protocol/events.js';

export interface Corkable {
  cork(): void;
  uncork(): void;
}

export interface Batcher {
  /** Call before each write to the stream. */
  (): void;
  /** Write what this turn has batched now, without waiting for the check phase. */
  flush(): void;
}

/** Item types the client executes: once one is done, the client can start it. */
const CLIENT_CALLS: ReadonlySet<string> = new Set(['function_call', 'custom_tool_call', 'local_shell_call', 'computer_call']);

/** `e` hands the client a call to run: the transport writes it out at once (`Batcher.flush`). */
export function readyToRun(e: ServerEvent): boolean {
  return e.type === 'response.output_item.done' && CLIENT_CALLS.has(e.item.type);
}

/** A function to call before each write to `stream`. */
export function batchWrites(stream: Corkable): Batcher {
  let corked = false;
  const flush = () => {
    if (!corked) return;
    corked = false;
    stream.uncork();
  };
  const batch = (() => {
    if (corked) return;
    corked = true;
    stream.cork();
    setImmediate(flush);
  }) as Batcher;
  batch.flush = flush;
  return batch;
}
