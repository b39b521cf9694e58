/**
 * Cooperative pipeline work: a stage written as a generator that `yield`s
 * at cheap, safe points (after an item, after a slice of text) can run to
 * completion at once (`runSync`, for tests and small inputs) or give the
 * event loop a turn whenever it has held it longer than a small budget
 * (`runCooperative`), so one 16 MiB request cannot stall `/health`, other
 * connections or other runs.
 *
 * Used by the render, validate and safety stages, the engine's append, the
 * simulated model's conversation digest, and protocol/'s JSON readers and
 * writers. A leaf module (it imports nothing), beside the layers rather than
 * in one of them, so every layer, protocol/ the lowest, can use it (it lived
 * in model/, and protocol/ imported it from there against the layering of
 * docs/architecture.md: outside reviewer atk64 F5). Leaves out worker threads:
 * the work stays on the loop (it is what the benchmarks measure), it only
 * stops monopolising it.
 */

/** A stage's work: yields at points where it may pause, returns the result. */
export type Work<T> = Generator<void, T, void>;

/**
 * Longest the pipeline holds the event loop before yielding, ms. Small
 * against the 250 ms a request may stall the loop in the worst case; large
 * against the cost of one `setImmediate` turn (~0.05 ms), so normal requests
 * (which finish inside one budget) never yield at all.
 */
export const YIELD_BUDGET_MS = 8;

/** Characters of text tokenized or scanned between yield points (~1–4 ms of work). */
export const SLICE_CHARS = 16 * 1024;

export function runSync<T>(work: Work<T>): T {
  let r = work.next();
  while (!r.done) r = work.next();
  return r.value;
}

/** Run `work`, yielding to the event loop whenever it has run `budgetMs` since the last turn. */
export async function runCooperative<T>(work: Work<T>, budgetMs = YIELD_BUDGET_MS): Promise<T> {
  let sliceStart = performance.now();
  let r = work.next();
  while (!r.done) {
    if (performance.now() - sliceStart >= budgetMs) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
    r = work.next();
  }
  return r.value;
}

/**
 * `work`, stopped at its first yield after `signal` aborts: the work is closed (`return`, so its `finally` blocks
 * and open iterators end) and the signal's reason thrown. Used where nobody waits for the result any more (a chain
 * read whose client went away).
 */
export function* abortableWork<T>(work: Work<T>, signal: AbortSignal | undefined): Work<T> {
  if (!signal) return yield* work;
  signal.throwIfAborted();
  let r = work.next();
  while (!r.done) {
    yield;
    if (signal.aborted) {
      work.return(undefined as T);
      signal.throwIfAborted();
    }
    r = work.next();
  }
  return r.value;
}
