/**
 * `GET /llr/stats` reports the process's GC pauses by kind (src/gc-stats.ts),
 * which `npm run bench:overhead` reads around its measured loops to tell the
 * server's scavenges from the host's own tail. Real sockets; the scavenge is
 * waited for as an event (this test's own `PerformanceObserver`), never a sleep.
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { gcStats, watchGc } from '../../src/gc-stats.js';
import { testServer } from '../helpers/server.js';

interface Stats {
  gc_pauses: Record<'minor' | 'major' | 'other', { count: number; total_ms: number; max_ms: number }>;
}

const stats = async (url: string) => (await (await fetch(`${url}/llr/stats`)).json()) as Stats;

/** Allocates short-lived objects, a turn at a time, until this process's observer reports a scavenge. */
function scavenge(): Promise<void> {
  return new Promise((resolve) => {
    let seen = false;
    const obs = new PerformanceObserver((list) => {
      if (list.getEntries().some((e) => (e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR)) {
        seen = true;
        obs.disconnect();
        resolve();
      }
    });
    obs.observe({ entryTypes: ['gc'] });
    const churn = () => {
      if (seen) return;
      let junk: object[] = [];
      for (let i = 0; i < 200_000; i++) {
        junk.push({ i, s: `x${i}` });
        if (junk.length > 1_000) junk = [];
      }
      setImmediate(churn);
    };
    churn();
  });
}

describe('GET /llr/stats: GC pauses', () => {
  it('reports each kind with a count, a total and a longest pause', async () => {
    const { url } = await testServer();
    const s = await stats(url);
    for (const kind of ['minor', 'major', 'other'] as const) {
      const p = s.gc_pauses[kind];
      expect(Number.isInteger(p.count) && p.count >= 0, kind).toBe(true);
      expect(p.total_ms).toBeGreaterThanOrEqual(p.max_ms);
      expect(p.max_ms).toBeGreaterThanOrEqual(0);
    }
  });

  it('counts a scavenge that happens while the server listens', async () => {
    const { url } = await testServer();
    const before = (await stats(url)).gc_pauses.minor;
    await scavenge();
    // The fetch takes turns of the event loop: the server's observer has had the same entries delivered by then.
    const after = (await stats(url)).gc_pauses.minor;
    expect(after.count).toBeGreaterThan(before.count);
    expect(after.total_ms).toBeGreaterThan(before.total_ms);
    expect(after.max_ms).toBeGreaterThan(0);
  });

  it('keeps observing while any server in the process listens, and stops with the last (each stop counted once)', async () => {
    const a = watchGc();
    const b = watchGc();
    a();
    a(); // a second call of the same stop is a no-op: it must not stop b's share
    const before = gcStats().minor.count;
    await scavenge();
    await new Promise<void>((r) => setImmediate(r));
    expect(gcStats().minor.count).toBeGreaterThan(before);
    b();
  });
});
