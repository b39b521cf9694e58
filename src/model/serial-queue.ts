/**
 * Work run one at a time, in the order it was queued: each job starts once every job queued before it has settled.
 * A job whose `signal` aborts is answered with the signal's reason at once and, if its turn has not come, never runs.
 * `maxWaiting` bounds the jobs waiting or running; `run` past it rejects with `full()`'s error.
 *
 * Used for the stored chains a server reads (modes/hydrate.ts) and the `GET /llr/runs` pages it makes
 * (transport/run-pages.ts): either, run all at once, took a slice of every loop turn each and held the server's memory
 * or its loop for seconds (outside attacks). Leaves out the work's own slicing (`runCooperative`).
 */
export class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();
  #waiting = 0;

  constructor(
    readonly maxWaiting = Infinity,
    private readonly full: () => Error = () => new Error('queue full'),
  ) {}

  /** Jobs waiting or running. */
  get waiting(): number {
    return this.#waiting;
  }

  run<T>(job: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#waiting >= this.maxWaiting) return Promise.reject(this.full());
    this.#waiting++;
    const result = this.#tail.then(() => {
      signal?.throwIfAborted();
      return job();
    });
    const settled = result.then(
      () => {
        this.#waiting--;
      },
      () => {
        this.#waiting--;
      },
    );
    this.#tail = settled;
    if (!signal) return result;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      result.then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }
}
