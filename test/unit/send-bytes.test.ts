/**
 * The server-wide bound on unsent bytes' bookkeeping (modes/send-bytes.ts):
 * readers below the floor are not counted, the counter is checked against
 * the bound and the members measured again only past it, and a reader that
 * is gone or drained leaves the total.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SendBytes, stallCheckEveryMs, startWaitMs } from '../../src/modes/send-bytes.js';

const log = pino({ level: 'silent' });

describe('SendBytes', () => {
  it('counts readers from the floor, paces from the floor once the total, measured again, is past the bound', () => {
    const ledger = new SendBytes(1000, 400);
    expect(ledger.floor).toBe(200);
    const a = { n: 0, unsentBytes: () => a.n };
    const b = { n: 0, unsentBytes: () => b.n };
    const sa = ledger.share(a, log);
    const sb = ledger.share(b, log);
    a.n = 199;
    sa.note(a.n);
    expect(ledger.unsent()).toBe(0);
    a.n = 700;
    sa.note(a.n);
    b.n = 250;
    sb.note(b.n);
    expect(ledger.unsent()).toBe(950);
    expect(sb.pace(b.n)).toBe(false);
    b.n = 400;
    expect(sb.pace(b.n)).toBe(true);
    // Below the floor a reader is never paced by the total.
    expect(sb.pace(150)).toBe(false);
    // The counter is stale (a drained): past the bound the members are measured again, and it is not over.
    a.n = 0;
    b.n = 400;
    expect(sb.pace(b.n)).toBe(false);
    expect(ledger.unsent()).toBe(400);
    b.n = 1200;
    sb.note(b.n);
    expect(ledger.over()).toBe(true);
    sb.close();
    expect(ledger.over()).toBe(false);
    expect(ledger.unsent()).toBe(0);
  });

  it('a large response waits to start while every reader measured now is past the bound, at most the longest wait', async () => {
    const ledger = new SendBytes(1000, 400, 100);
    const a = { n: 0, unsentBytes: () => a.n };
    const sa = ledger.share(a, log);
    // Under the floor, a response never waits; nor while the total is within the bound.
    expect(sa.room(199)).toBeNull();
    expect(sa.room(5000)).toBeNull();
    // Past it, measured now although no send said so (the counter had none of it).
    a.n = 1500;
    const waited = sa.room(5000);
    expect(waited).not.toBeNull();
    // The reader drains: the wait ends (at the next look, every 50 ms).
    a.n = 0;
    expect(await waited).toBe(true);
    // A reader that never drains: the wait ends at the longest wait all the same, refused (not started past the
    // bound), and leaves nothing behind.
    a.n = 1500;
    const t0 = performance.now();
    const stuck = [sa.room(5000), sa.room(5000)];
    expect(await Promise.all(stuck)).toEqual([false, false]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    expect((ledger as unknown as { starters: unknown[] | null }).starters).toBeNull();
    expect((ledger as unknown as { startTimer: unknown }).startTimer).toBeUndefined();
    sa.close();
    expect(sa.room(5000)).toBeNull();
  });

  // Outside attack atk53 F2: every waiter was let go at the first look that found the total within the bound, and
  // each then echoed its request: 48 MB unsent past an 8 MiB bound.
  it('waiting responses go in order, each only while the total and what those let go will echo fit the bound', async () => {
    const ledger = new SendBytes(10_000, 400, 60_000);
    const a = { n: 0, unsentBytes: () => a.n };
    const sa = ledger.share(a, log);
    // Within the bound a large response starts at once; what it will echo (twice its request) is counted until the
    // next turn, when its events are in its socket's figure: another asking in the same turn waits.
    expect(sa.room(6000)).toBeNull();
    const same = sa.room(6000);
    expect(same).not.toBeNull();
    expect(await same).toBe(true);
    a.n = 20_000;
    const order: number[] = [];
    const waits = [1, 2, 3].map((i) => sa.room(6000)!.then((start) => (order.push(i), start)));
    // The reader drains: the first is let go; the second only at a later look (the first's echo, 12,000, counted,
    // is past the bound), never with it, and so on in order.
    a.n = 0;
    const first = await waits[0];
    expect(first).toBe(true);
    expect(order).toEqual([1]);
    expect(await Promise.all(waits)).toEqual([true, true, true]);
    expect(order).toEqual([1, 2, 3]);
    sa.close();
  });

  it('the longest wait covers the stall watches: the timeout, two of their looks, and two looks of its own', () => {
    expect(startWaitMs(0)).toBe(0);
    expect(startWaitMs(30_000)).toBe(30_000 + 2 * 1000 + 100);
    expect(startWaitMs(2000)).toBe(2000 + 2 * 500 + 100);
    expect(stallCheckEveryMs(20)).toBe(10);
  });

  it('the floor is 64 KiB, or half the send limit when less', () => {
    expect(new SendBytes(1, 4 * 1024 * 1024).floor).toBe(64 * 1024);
    expect(new SendBytes(1, Infinity).floor).toBe(64 * 1024);
    expect(new SendBytes(1, 0).floor).toBe(1);
  });
});
