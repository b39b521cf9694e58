/**
 * `llr bench` end to end, from the built CLI (the bench spawns `dist/cli.js
 * serve`, so dist is rebuilt first): a tiny synthetic bench writes a
 * results.json whose summary has finite numbers for every design, the
 * report, the charts and the page; a file that is not a rollout fails with
 * its line; a server that dies mid-run or cannot be reached fails the run
 * with a message instead of a hang.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Results } from '../../src/bench/results.js';
import { buildDist } from '../helpers/build.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist', 'cli.js');
const dir = mkdtempSync(join(tmpdir(), 'llr-bench-it-'));

/** The built module next to a source module, typed as the source. */
async function built<T>(rel: string): Promise<T> {
  return (await import(pathToFileURL(join(ROOT, 'dist', rel)).href)) as T;
}

beforeAll(async () => {
  // The tests run the built CLI: build it, and stop here if the build fails.
  await buildDist();
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('llr bench', () => {
  it('runs a tiny synthetic bench and writes the summary, report, charts and page', async () => {
    const out = join(dir, 'tiny');
    const { stdout } = await run(process.execPath, [CLI, 'bench', '--synthetic', '5,200,20', '--speeds', '4000', '--reps', '1', '--phases', 'grid,overhead', '--out', out], {
      timeout: 90_000,
    });
    const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
    expect(results.status).toBe('complete');
    expect(results.runs.every((r) => r.ok)).toBe(true);
    expect(results.summary.map((r) => r.design).sort()).toEqual(['http', 'http-stored', 'long-lived', 'long-lived-http', 'ws']);
    for (const row of results.summary) {
      expect(row.tokens_per_second).toBe(4000);
      for (const k of ['e2e_ms_median', 'api_overhead_ms_median', 'ttft_ms_median'] as const) {
        expect(Number.isFinite(row[k]), `${row.design} ${k}`).toBe(true);
      }
      expect(row.e2e_ms_median).toBeGreaterThan(row.api_overhead_ms_median);
    }
    expect(results.overhead_summary).toHaveLength(5);
    // Instant model: no analytic model time; emission is measured and counted as API work; the terms add up to e2e.
    for (const r of results.runs) {
      if (!r.ok || r.phase !== 'overhead') continue;
      expect(r.model_ms_analytic).toBe(0);
      expect(r.emit_ms, r.design).toBeGreaterThan(0);
      expect(r.stage_ms['emit']).toBe(r.emit_ms);
      expect(r.api_overhead_ms).toBeGreaterThanOrEqual(r.emit_ms);
      expect(r.model_excess_ms + r.tool_ms + r.api_overhead_ms + r.residual_ms).toBeCloseTo(r.e2e_ms, 6);
    }
    // The report shows one instant-model run per design whose terms add up (to the 0.1 ms shown):
    // model 0 by construction, overhead = API spans + residual, e2e = model + simulator + overhead.
    const report = readFileSync(join(out, 'report.md'), 'utf8');
    const table = report.split('### Instant model: where one run goes')[1]!.split('\n\n')[1]!.split('\n').slice(2);
    expect(table.map((line) => line.split(' | ')[0]!.slice(2)).sort()).toEqual(['http', 'http-stored', 'long-lived', 'long-lived-http', 'ws']);
    for (const line of table) {
      const cells = line.split(' | ');
      const [e2e, model, sim, tools, overhead, api, residual] = cells.slice(2, 9).map(Number) as [number, number, number, number, number, number, number];
      expect(model).toBe(0);
      expect(Math.abs(e2e - (model + sim + tools + overhead)), line).toBeLessThanOrEqual(0.2);
      expect(Math.abs(overhead - (api + residual)), line).toBeLessThanOrEqual(0.15);
      const stages = cells[9]!.replace(/ \|$/, '').split(', ').map((s) => Number(s.split(' ').at(-1)));
      expect(Math.abs(stages.reduce((a, b) => a + b, 0) - api), line).toBeLessThanOrEqual(0.05 * stages.length + 0.5);
      // The row is a real run of that design: its e2e.
      const design = cells[0]!.slice(2);
      expect(results.runs.some((r) => r.ok && r.phase === 'overhead' && r.design === design && r.e2e_ms.toFixed(1) === cells[2])).toBe(true);
    }
    expect(results.config['target_speed']).toBe(1000);
    expect(results.summary.every((r) => r.e2e_ms_ci.lo <= r.e2e_ms_median && r.e2e_ms_median <= r.e2e_ms_ci.hi)).toBe(true);
    expect(results.loopback_rtt_ms!.p50).toBeGreaterThan(0);
    expect(stdout).toMatch(/^target 1: .* → (holds|does not hold)/m);
    expect(stdout).toMatch(/^target 2: .*→/m);
    for (const f of ['report.md', 'index.html', 'charts/e2e.svg', 'charts/turn-overhead.svg', 'charts/stages-grid.svg']) expect(existsSync(join(out, f)), f).toBe(true);
    // The printed summary's columns line up: every row as long as its header (long-lived-http's ran three past).
    const lines = stdout.split('\n');
    const head = lines.findIndex((l) => l.startsWith('design '));
    const rows = lines.slice(head, lines.indexOf('', head));
    expect(rows).toHaveLength(11);
    expect(new Set(rows.map((l) => l.length)).size).toBe(1);
    expect(stdout).toMatch(/, overhead phase \d+\)$/m);
    // The same results without their overhead phase, printed again by --report: the header no longer names that phase.
    const gridOnly = join(dir, 'grid-only');
    mkdirSync(gridOnly, { recursive: true });
    writeFileSync(join(gridOnly, 'results.json'), JSON.stringify({ ...results, runs: results.runs.filter((r) => r.phase !== 'overhead'), overhead_summary: [] }));
    const again = await run(process.execPath, [CLI, 'bench', '--report', gridOnly], { timeout: 60_000 });
    expect(again.stdout).toMatch(/^workload: .* \(grid \d+ model calls\)$/m);
  }, 120_000);

  it('sweeps designs over http across hop latency with the production profile', async () => {
    const out = join(dir, 'sweep');
    const { stdout } = await run(
      process.execPath,
      [CLI, 'bench', '--synthetic', '3,200,5', '--sweep', '--sweep-speeds', '4000', '--sweep-hops', '0,2', '--sweep-calls', '3', '--profile', 'production', '--out', out],
      { timeout: 90_000 },
    );
    const sweep = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as { rows: Array<{ design: string; hop_ms: number }>; profile: string; call_hops: number; skipped: unknown[]; failures: unknown[] };
    expect(sweep.failures).toEqual([]);
    expect(sweep.profile).toBe('production');
    expect(sweep.call_hops).toBe(1);
    expect(sweep.rows.map((r) => `${r.design}@${r.hop_ms}`).sort()).toEqual(['http@0', 'http@2', 'long-lived-http@0', 'long-lived-http@2', 'long-lived@0', 'long-lived@2', 'ws@0', 'ws@2']);
    expect(stdout).toMatch(/long-lived (never reaches|reaches) 40\.0 % faster end to end over http/);
    for (const f of ['sweep.md', 'sweep-long-lived.svg', 'sweep-ws.svg', 'sweep-long-lived-http.svg']) expect(existsSync(join(out, f)), f).toBe(true);
    // The hop model: at 2 ms per hop, http routes each of its 3 requests (2 hops each), a ws
    // continuation skips one hop, a long-lived continuation routes nothing; every design pays
    // the profile's one safety-classifier call per model call.
    const cell = JSON.parse(readFileSync(join(out, 'cell-4000-2-3', 'results.json'), 'utf8')) as Results;
    const hops = Object.fromEntries(cell.runs.map((r) => [r.design, r.ok ? r.counters['remote_hops'] : NaN]));
    expect(hops).toEqual({ http: 3 * 2 + 3, ws: 2 + 1 + 1 + 3, 'long-lived': 2 + 3, 'long-lived-http': 2 + 3 });
  }, 120_000);

  it('names the line of a workload that is not a rollout, and starts nothing', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"timestamp":"t","type":"session_meta","payload":{}}\n{"timestamp":"t","type":"response_item","payl');
    const err = await run(process.execPath, [CLI, 'bench', '--workload', bad, '--out', join(dir, 'bad')], { timeout: 30_000 }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).toBe(2);
    expect(err?.stderr).toMatch(/bad\.jsonl:2: .*truncated/);
  });
});

describe('a server that dies or is not there', () => {
  it('fails a run at once when the server process dies mid-run', async () => {
    const { spawnServer } = await built<typeof import('../../src/bench/processes.js')>('bench/processes.js');
    const { ServerProcess } = await built<typeof import('../../src/bench/guard.js')>('bench/guard.js');
    const { replayRun } = await built<typeof import('../../src/bench/replay.js')>('bench/replay.js');
    const { syntheticFromSpec } = await built<typeof import('../../src/workload/synthetic.js')>('workload/synthetic.js');
    const workload = syntheticFromSpec('5,200,200');
    const server = new ServerProcess(await spawnServer(['--synthetic', '5,200,200', '--tokens-per-second', '65']), 'test server');
    const replay = server.race(replayRun({ design: 'long-lived', url: server.url, workload, nonce: 'n', toolFactor: 0, timeoutMs: 60_000 }));
    const settled = replay.then(
      () => 'finished',
      (e: Error) => e.message,
    );
    // Kill it once the run is under way on the server (its record exists).
    for (;;) {
      const { data } = await server.getJson<{ data: unknown[] }>('/llr/runs');
      if (data.length > 0) break;
      await new Promise((r) => setImmediate(r));
    }
    server.child.proc.kill('SIGKILL');
    const t = performance.now();
    expect(await settled).toMatch(/test server exited unexpectedly \(SIGKILL\)/);
    expect(performance.now() - t).toBeLessThan(5000);
  });

  it('fails a run with a message when nothing listens at the address', async () => {
    const { replayRun } = await built<typeof import('../../src/bench/replay.js')>('bench/replay.js');
    const { syntheticFromSpec } = await built<typeof import('../../src/workload/synthetic.js')>('workload/synthetic.js');
    // A port that was free a moment ago.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    for (const design of ['ws', 'http'] as const) {
      const message = await replayRun({ design, url: `http://127.0.0.1:${port}`, workload: syntheticFromSpec('2,10,5'), nonce: 'n', toolFactor: 0, timeoutMs: 10_000 }).then(
        () => 'finished',
        (e: Error) => e.message,
      );
      expect(message).toMatch(design === 'ws' ? /^ws: cannot connect to http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/ : /^http: user turn 1, model call 1: fetch failed/);
    }
  });
});
