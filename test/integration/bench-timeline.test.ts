/**
 * `npm run bench:timeline` end to end at a tiny size, from the built command:
 * the server and the echo run with the probe loaded, and every answer of the
 * measured loops is cut into its pieces on the clock both processes share.
 * Checks the matching, not the speed: every step is matched to a frame the
 * server read and a write of its that carried an `output_item.done` (the
 * probe in the other process, on the shared clock), no write came between
 * (the turn did not yield), each step's cut lies within the loop's own
 * measurement of the same step (the driver stamps inside it), and a probe
 * whose buffer is full says how many events it dropped (a bad command line:
 * test/integration/command-line.test.ts).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, ROOT } from '../helpers/build.js';

const run = promisify(execFile);

interface Spread {
  p50: number;
  p90: number;
}
interface Row {
  design: string;
  in_us: Spread;
  server_us: Spread;
  out_us: Spread;
  step_us: Spread;
  write_syscall_us: Spread;
  write_bytes_p50: number;
  loop_p50_us: number;
  steps: number;
  unmatched: number;
  earlier_writes: number;
  dropped: number;
}

beforeAll(async () => {
  await buildDist();
}, 120_000);

const script = () => join(ROOT, 'dist', 'bench', 'step-timeline.js');

describe('bench:timeline', () => {
  it('cuts every answer of each design and every echo into pieces that are in order', async () => {
    const { stdout } = await run(process.execPath, [script(), '--warm', '2', '--loops', '3', '--json'], { timeout: 120_000 });
    const out = JSON.parse(stdout) as { rows: Row[] };
    expect(out.rows.map((r) => r.design)).toEqual(['long-lived', 'ws', 'raw ws echo']);
    for (const r of out.rows) {
      // Three loops of 22 steps, each loop's last answer left out; the echo: as many round trips as steps.
      expect(r.steps, r.design).toBe(r.design === 'raw ws echo' ? 66 : 63);
      expect(r.unmatched, r.design).toBe(0);
      expect(r.dropped, r.design).toBe(0);
      // Each cut step is nested in the loop's own sample of it (stamped after its start, before its end): so is the p50.
      expect(r.step_us.p50, r.design).toBeLessThanOrEqual(r.loop_p50_us + 0.01);
      expect(r.step_us.p50, r.design).toBeGreaterThan(r.loop_p50_us / 2);
      expect(r.earlier_writes, r.design).toBe(0);
    }
    // The call's write carries at least the call's events; a ws continuation's also its two lifecycle events.
    const [ll, ws, echo] = out.rows;
    expect(ws!.write_bytes_p50).toBeGreaterThan(ll!.write_bytes_p50);
    expect(echo!.write_bytes_p50).toBeGreaterThan(1024);
  }, 180_000);

  it("says how many events a full probe dropped, and counts the steps it could not cut", async () => {
    const { stdout } = await run(process.execPath, [script(), '--warm', '1', '--loops', '1'], { timeout: 120_000, env: { ...process.env, LLR_TIMELINE_MAX: '5' } });
    expect(stdout).toMatch(/the probe dropped events \(over LLR_TIMELINE_MAX\): long-lived \d+, ws \d+, raw ws echo \d+/);
    expect(stdout).toMatch(/steps cut \/ not matched\s+\d+ \/ [1-9]\d*/);
  }, 180_000);
});
