/**
 * `npm run bench:overhead` end to end at a tiny size, from the built
 * command (it spawns `dist/cli.js serve`): the stream phase repeats rounds
 * until the server is warm and reports the median of the measured ones
 * with every round listed; the paused phase opens its warm-up runs with the
 * measured ones, resumes them first, and times them apart; the loop phase
 * reads the server's stage times of a long-lived step and of ws continuations from its run records,
 * and times the append's stages in a hot loop
 * (a bad command line: test/integration/command-line.test.ts). Checks the
 * bookkeeping, not the speed (benchmarks print figures; tests do not time).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, ROOT } from '../helpers/build.js';
import type { LongResult } from '../../src/bench/overhead.js';

const run = promisify(execFile);

interface Round {
  streams: number;
  deltas: number;
  deltas_per_cpu_second: number;
}
interface Out {
  stream: { figure: Round; warmup: Round[]; measured: Round[] };
  paused: {
    runs: number;
    paused: number;
    resumed: number;
    warmup_runs: number;
    append_to_resume_ms: { n: number; p50: number; p99: number };
    cold_append_to_resume_ms: { n: number; p50: number; p99: number };
  };
  targets: Array<{ what: string; measured: string; holds: boolean | null }>;
}

beforeAll(async () => {
  await buildDist();
}, 120_000);

describe('bench:overhead', () => {
  it('warms the stream phase up until rounds agree and the paused phase on runs of its own', async () => {
    const args = ['--phases', 'stream,paused', '--streams', '3', '--stream-tokens', '40', '--paused-runs', '15', '--paused-warmup', '6', '--json'];
    const { stdout } = await run(process.execPath, [join(ROOT, 'dist', 'bench', 'overhead.js'), ...args], { timeout: 120_000, maxBuffer: 8 * 2 ** 20 });
    const out = JSON.parse(stdout) as Out;

    const { warmup, measured, figure } = out.stream;
    // At least two warm-up rounds, at most eight; then three measured, each with every delta of every stream.
    expect(warmup.length).toBeGreaterThanOrEqual(2);
    expect(warmup.length).toBeLessThanOrEqual(8);
    expect(measured).toHaveLength(3);
    for (const r of [...warmup, ...measured]) expect(r.deltas).toBe(3 * 40);
    // The figure is the median measured round.
    const rates = measured.map((r) => r.deltas_per_cpu_second).sort((a, b) => a - b);
    expect(figure.deltas_per_cpu_second).toBe(rates[1]);
    // Warm-up stopped early only on two rounds in a row within 10 %.
    if (warmup.length < 8) {
      const [a, b] = warmup.slice(-2).map((r) => r.deltas_per_cpu_second);
      expect(Math.abs(a! - b!)).toBeLessThanOrEqual(0.1 * Math.max(a!, b!));
    }
    const rounds = out.targets.find((t) => t.what.startsWith('stream rounds'));
    expect(rounds?.measured.split('→')[1]!.split(',')).toHaveLength(3);

    const p = out.paused;
    // All 21 runs were paused at once; the six warm-up runs were resumed first and timed apart.
    expect(p.paused).toBe(21);
    expect(p.warmup_runs).toBe(6);
    expect(p.cold_append_to_resume_ms.n).toBe(6);
    expect(p.runs).toBe(15);
    expect(p.resumed).toBe(15);
    expect(p.append_to_resume_ms.n).toBe(15);
    expect(p.append_to_resume_ms.p99).toBeGreaterThanOrEqual(p.append_to_resume_ms.p50);
  }, 150_000);

  it("reports the server's timed stages of a long-lived step from its run record", async () => {
    const args = ['--phases', 'loop', '--loops', '1', '--steps', '4', '--warm-steps', '5', '--json'];
    const { stdout } = await run(process.execPath, [join(ROOT, 'dist', 'bench', 'overhead.js'), ...args], { timeout: 120_000, maxBuffer: 8 * 2 ** 20 });
    const out = JSON.parse(stdout) as {
      loop: {
        stages: { steps: number; p50_us: Record<string, number>; emit_us_per_event: number } | null;
        ws_stages: { responses: number; p50_us: Record<string, number>; emit_us_per_response: number; events_per_response: number } | null;
        hot_stages: { calls: number; us: Record<string, number> };
        floor: Record<'long_lived' | 'ws', { n: number; p50: number; p99: number }>;
        warm_loops: number;
        server_threads_us_per_step: { main: number; background: number } | null;
        server_gc: Record<'minor' | 'major', { count: number; total_ms: number; max_ms: number }> | null;
        echo: { n: number };
        echo_over_1ms: number;
        long_lived: { n: number; over_1ms: number };
      };
      targets: Array<{ what: string; measured: string }>;
    };
    // The server's GC pauses over the measured loops (/llr/stats before and after), next to the samples of 1 ms or
    // more: counts, never negative, never more samples than were taken.
    const gc = out.loop.server_gc;
    expect(gc).not.toBeNull();
    for (const kind of ['minor', 'major'] as const) {
      const p = gc![kind];
      expect(Number.isInteger(p.count) && p.count >= 0, kind).toBe(true);
      // The window's pauses, none longer than the longest since the server started (each figure rounded to 1 µs).
      expect(p.total_ms, kind).toBeGreaterThanOrEqual(0);
      expect(p.total_ms, kind).toBeLessThanOrEqual(p.count * p.max_ms + 0.002);
    }
    expect(out.loop.long_lived.over_1ms).toBeGreaterThanOrEqual(0);
    expect(out.loop.long_lived.over_1ms).toBeLessThanOrEqual(out.loop.long_lived.n);
    expect(out.loop.echo_over_1ms).toBeLessThanOrEqual(out.loop.echo.n);
    expect(out.targets.some((t) => t.what.startsWith("server's GC pauses over the measured") && /^scavenges \d+.*; mark-compacts \d+; ≥ 1 ms: long-lived \d+\/3, ws \d+\/3, echo \d+\/\d+$/.test(t.measured))).toBe(true);
    const st = out.loop.stages;
    // The newest long-lived run is a measured loop of 4 tool steps: 4 appends, each stage timed at every step.
    expect(st?.steps).toBe(4);
    expect(Object.keys(st!.p50_us).sort()).toEqual(['decode', 'parse_append', 'prefill', 'render_append', 'safety_append', 'validate_append']);
    for (const v of Object.values(st!.p50_us)) expect(v).toBeGreaterThan(0);
    expect(st!.emit_us_per_event).toBeGreaterThan(0);

    // The ws chain's continuations (its 4 tool answers; the chain's first create is a cache miss, left out):
    // each checked, rendered, sampled and accounted once, and its snapshots and deltas emitted.
    const ws = out.loop.ws_stages;
    expect(ws?.responses).toBeGreaterThanOrEqual(4);
    expect(Object.keys(ws!.p50_us).sort()).toEqual(['billing', 'decode', 'log', 'parse', 'prefill', 'render', 'safety', 'usage', 'validate']);
    for (const v of Object.values(ws!.p50_us)) expect(v).toBeGreaterThan(0);
    expect(ws!.emit_us_per_response).toBeGreaterThan(0);
    // created, in_progress, the call's added / delta(s) / arguments.done / done, completed.
    expect(ws!.events_per_response).toBeGreaterThanOrEqual(7);
    // The append's stages on the loop's own item, hot, in the bench process.
    const hot = out.loop.hot_stages;
    expect(hot.calls).toBe(2000);
    expect(Object.keys(hot.us).sort()).toEqual(['parse', 'render', 'safety', 'validate']);
    for (const v of Object.values(hot.us)) expect(v).toBeGreaterThan(0);
    expect(out.targets.some((t) => t.what.startsWith('the same append stages in a hot loop') && /the server's step: \d+ = [\d.]+×/.test(t.measured))).toBe(true);
    expect(out.targets.some((t) => t.what.startsWith("server's timed stages per ws continuation") && /= \d+; emit \d+ per response/.test(t.measured))).toBe(true);
    // --warm-steps 5 at 4 steps a loop: two warm-up loops of each kind. The server's threads over the measured
    // loops, read from /proc where there is one: its main thread did the steps' work.
    expect(out.loop.warm_loops).toBe(2);
    if (existsSync('/proc/self/task')) {
      // (One measured loop of 4 steps is below the 10 ms clock tick: the figures may be 0, but they are read.)
      expect(out.loop.server_threads_us_per_step).not.toBeNull();
      expect(out.targets.some((t) => t.what.startsWith("server's threads over the measured") && /^main \d+; background \(V8's compiler, GC helpers\) \d+$/.test(t.measured))).toBe(true);
    } else expect(out.loop.server_threads_us_per_step).toBeNull();
    // Each loop's frames replayed by the frame server (its wire floor): one measured loop of 4 steps, the step
    // before the final message left out as in every tool-step figure.
    for (const kind of ['long_lived', 'ws'] as const) {
      expect(out.loop.floor[kind].n).toBe(3);
      expect(out.loop.floor[kind].p50).toBeGreaterThan(0);
    }
    for (const name of ['long-lived', 'ws']) {
      expect(out.targets.some((t) => t.what.startsWith(`${name} loop's frames replayed`) && /ms = [\d.]+× echo$/.test(t.measured))).toBe(true);
      expect(out.targets.some((t) => t.what === `${name} step over its wire floor, p50` && /= floor \+ -?[\d.]+ ms = [\d.]+× floor$/.test(t.measured))).toBe(true);
    }
  }, 150_000);

  it('the long phase: one long-lived run per server (full and lean pause events), cancelled after its steps, its tenths compared', async () => {
    const args = ['--phases', 'long', '--long-steps', '30', '--long-output-bytes', '200', '--warm-steps', '150', '--json'];
    const { stdout } = await run(process.execPath, [join(ROOT, 'dist', 'bench', 'overhead.js'), ...args], { timeout: 120_000, maxBuffer: 8 * 2 ** 20 });
    const out = JSON.parse(stdout) as { long: LongResult; long_lean: LongResult; targets: Array<{ what: string }> };
    for (const l of [out.long, out.long_lean]) {
      // Every step answered, then the run cancelled: no more, no fewer.
      expect(l.steps).toBe(30);
      expect(l.output_bytes).toBe(200);
      for (const v of [l.first_p50, l.last_p50, l.first_wall_ms_per_step, l.last_wall_ms_per_step, l.server_cpu_ms_per_step, l.heap_before, l.heap_after]) expect(v).toBeGreaterThan(0);
      // The server's own account of the run's steps, from its record: every stage timed in both tenths.
      expect(l.stages_us!.first).toBeGreaterThan(0);
      expect(l.stages_us!.last).toBeGreaterThan(0);
    }
    // The full pause snapshot carries every call so far; the lean one only what the pause waits for.
    expect(out.long.last_pause_bytes).toBeGreaterThan(30 * 100);
    expect(out.long_lean.last_pause_bytes).toBeLessThan(1000);
    expect(out.targets.filter((t) => t.what.startsWith('long run'))).toHaveLength(8);
  }, 150_000);

  it('the long-full phase, only when named: the long run on a server whose pauses are all full (--max-pause-snapshot-bytes Infinity)', async () => {
    const args = ['--phases', 'long-full', '--long-steps', '30', '--long-output-bytes', '200', '--warm-steps', '150', '--json'];
    const { stdout } = await run(process.execPath, [join(ROOT, 'dist', 'bench', 'overhead.js'), ...args], { timeout: 120_000, maxBuffer: 8 * 2 ** 20 });
    const out = JSON.parse(stdout) as { long?: LongResult; long_lean?: LongResult; long_full: LongResult; targets: Array<{ what: string }> };
    expect(out.long).toBeUndefined();
    expect(out.long_lean).toBeUndefined();
    expect(out.long_full.steps).toBe(30);
    expect(out.long_full.last_pause_bytes).toBeGreaterThan(30 * 100);
    expect(out.targets.filter((t) => t.what.startsWith('long run, --max-pause-snapshot-bytes Infinity'))).toHaveLength(4);
  }, 150_000);
});

