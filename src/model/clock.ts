/**
 * Injected time for the simulated model and the engine: `now()` in
 * milliseconds and an abortable `sleep`. The real clock uses
 * `performance.now()` and timers; tests and instant models skip sleeping.
 */

export interface Clock {
  now(): number;
  /** Resolves after `ms` (immediately when `ms <= 0`); rejects with the signal's reason on abort. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Wall-clock time in ms since the epoch, for timestamps on the wire; absent → `Date.now()`. */
  wallNow?(): number;
}

export const realClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  sleep(ms, signal) {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};
