/**
 * The server-wide bound on unsent bytes' bookkeeping (modes/send-bytes.ts):
 * readers below the floor are not counted, the counter is checked against
 * the bound and the members measured again only past it, and a reader that
 * is gone or drained leaves the total.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SendBytes } from '../../src/modes/send-bytes.js';

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
    await waited;
    // A reader that never drains: the wait ends at the longest wait all the same, and leaves nothing behind.
    a.n = 1500;
    const t0 = performance.now();
    const stuck = [sa.room(5000), sa.room(5000)];
    await Promise.all(stuck);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    expect((ledger as unknown as { starters: unknown[] | null }).starters).toBeNull();
    expect((ledger as unknown as { startTimer: unknown }).startTimer).toBeUndefined();
    sa.close();
    expect(sa.room(5000)).toBeNull();
  });

  it('the floor is 64 KiB, or half the send limit when less', () => {
    expect(new SendBytes(1, 4 * 1024 * 1024).floor).toBe(64 * 1024);
    expect(new SendBytes(1, Infinity).floor).toBe(64 * 1024);
    expect(new SendBytes(1, 0).floor).toBe(1);
  });
});
