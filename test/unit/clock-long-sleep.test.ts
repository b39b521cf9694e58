/**
 * The real clock's sleep past 2^31-1 ms (a model rate so slow that one
 * token takes longer, `llr serve --tokens-per-second 1e-300`, or a long
 * prefill at a slow `--prefill-tps`): Node fires such a timer at once, with
 * a TimeoutOverflowWarning, so the slowest model answered instantly. It
 * sleeps the whole time, in timers Node honours, and stays abortable.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { realClock } from '../../src/model/clock.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('realClock.sleep past the longest timer', () => {
  it('waits the whole time, and an abort still ends it', async () => {
    vi.useFakeTimers();
    const MAX = 2 ** 31 - 1;
    let done = false;
    const ms = 3 * MAX + 5;
    const slept = realClock.sleep(ms).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(10);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(ms - 20);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(10);
    await slept;
    expect(done).toBe(true);

    const ac = new AbortController();
    const forever = realClock.sleep(Infinity, ac.signal);
    await vi.advanceTimersByTimeAsync(10 * MAX);
    ac.abort(new Error('stop'));
    await expect(forever).rejects.toThrow('stop');
  });
});
