/**
 * The paused phase's lean client (src/bench/paused-runs.ts) against a real
 * server: every run pauses at its tool call, each resume is stamped and
 * completes while the others stay paused, and a run the server ends with an
 * error fails its resume with the server's message instead of hanging.
 */
import { describe, expect, it } from 'vitest';
import { pausedWorkload } from '../../src/bench/phases.js';
import { holdPausedRuns } from '../../src/bench/paused-runs.js';
import { replayPolicy } from '../../src/model/policies.js';
import { flatModelTurns } from '../../src/workload/replayable.js';
import { testServer } from '../helpers/server.js';

describe('paused runs (bench client)', () => {
  it('holds N runs paused, then resumes them one at a time with the others still paused', async () => {
    const w = pausedWorkload();
    const { url } = await testServer({ policy: replayPolicy(flatModelTurns(w)) });
    const held = await holdPausedRuns(url, w, 12);
    try {
      await held.allPaused;
      expect(held.paused()).toBe(12);
      const ids = new Set<string | null>();
      for (let i = 0; i < 12; i++) {
        const r = await held.resume(i);
        expect(r.firstMs).toBeGreaterThan(0);
        expect(r.responseId).toMatch(/^resp_/);
        ids.add(r.responseId);
      }
      // Twelve runs, each its own Response, each completed by its own append.
      expect(ids.size).toBe(12);
    } finally {
      held.close();
    }
  });

  it('rejects when a run cannot start, and fails a resume whose connection is gone', async () => {
    const w = pausedWorkload();
    const { server, url } = await testServer({ policy: replayPolicy(flatModelTurns(w)) });
    // A tool without a name is refused by the server's validation: the run never pauses.
    const refused = await holdPausedRuns(url, { ...w, tools: [{ type: 'function' } as never] }, 2);
    await expect(refused.allPaused).rejects.toThrow(/did not pause/);
    refused.close();

    const held = await holdPausedRuns(url, w, 2);
    await held.allPaused;
    await server.close();
    // Shutdown sends each paused run its terminal event before the close (docs/reliability.md).
    await expect(held.resume(1)).rejects.toThrow(/failed before its resume: (response\.incomplete \(server_shutdown\)|connection closed)|did not complete/);
    held.close();
  });

  it('closes the connections it did open when the server refuses the rest (connection cap)', async () => {
    const w = pausedWorkload();
    const { server, url } = await testServer({ policy: replayPolicy(flatModelTurns(w)), limits: { maxConnections: 3 } });
    // Eight opens in one batch: three are accepted, the rest answered 503 too_many_connections.
    await expect(holdPausedRuns(url, w, 8)).rejects.toThrow(/503/);
    // The three accepted connections were closed by the client, not left open (the server pings them,
    // so a leaked one would stay open for good and keep the bench process alive).
    await server.ws.idle();
  });
});
