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

/** The longest delay a Node timer honours. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const realClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  sleep(ms, signal) {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      // Node fires a timer longer than 2^31-1 ms at once (a TimeoutOverflowWarning): a longer sleep (a model rate so
      // slow a token takes that long, --tokens-per-second 1e-300) answered instantly. It is slept in timers Node honours.
      let timer: NodeJS.Timeout;
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const wait = (left: number) => {
        timer = setTimeout(() => {
          if (left > MAX_TIMER_MS) return wait(left - MAX_TIMER_MS);
          signal?.removeEventListener('abort', onAbort);
          resolve();
        }, Math.min(left, MAX_TIMER_MS));
      };
      wait(ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};
