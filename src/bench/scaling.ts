/**
 * `llr bench --scaling 10,25,50,100,200`: scaling curves over conversation
 * length. For each turn count it generates a synthetic agent run (seeded;
 * `--synthetic-bytes`, `--synthetic-tokens` set the tool-output size and
 * output tokens per call) and runs the bench's overhead phase on it — the
 * instant model, every design: the analytic model time is zero, so e2e is
 * the API's measured spans (emission included), the simulator's own
 * bookkeeping and the residual (loopback, client), each reported — in
 * `DIR/scaling-T/`. Then it writes `DIR/scaling.json`, `DIR/scaling.md` and
 * two SVG charts: API overhead per model call, and in all, against turns.
 *
 * It reuses `runBench` for each point (same processes, warm-up, rotation
 * and deadlines); it adds only the sweep and its report.
 */
import { makeDirs } from '../make-dirs.js';
import { quoted } from '../terminal-text.js';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { ClientProtocol } from '../client/index.js';
import { runBench, type BenchConfig } from './runner.js';
import { lineChart } from './svg.js';
import { syntheticWorkload } from '../workload/synthetic.js';

export interface ScalingOptions {
  turns: number[];
  toolOutputBytes: number;
  outputTokensPerTurn: number;
}

export interface ScalingRow {
  turns: number;
  design: ClientProtocol;
  runs: number;
  e2e_ms_median: number;
  api_overhead_ms_median: number;
  /** api_overhead_ms_median ÷ model calls. */
  api_overhead_per_call_ms: number;
  /** What no server span explains (loopback, the client, work outside spans); absent in files written before it existed. */
  residual_ms_median?: number;
  server_cpu_ms_median: number;
  client_bytes_sent_median: number;
}

export interface ScalingResults {
  schema: 'llr-bench-scaling/1';
  options: ScalingOptions;
  rows: ScalingRow[];
  failures: Array<{ turns: number; error: string }>;
}

export function parseTurns(spec: string): number[] {
  const turns = spec.split(',').map((s) => Number(s.trim()));
  if (turns.length === 0 || turns.some((t) => !Number.isSafeInteger(t) || t < 2)) {
    throw new RangeError(`--scaling needs a comma-separated list of turn counts >= 2, got ${quoted(spec)}`);
  }
  return turns;
}

export async function runScaling(base: BenchConfig, opts: ScalingOptions): Promise<{ results: ScalingResults; ok: boolean }> {
  const out = resolve(base.out);
  makeDirs(out);
  const results: ScalingResults = { schema: 'llr-bench-scaling/1', options: opts, rows: [], failures: [] };
  for (const turns of opts.turns) {
    process.stderr.write(`scaling: ${turns} turns\n`);
    const workload = syntheticWorkload({ turns, toolOutputBytes: opts.toolOutputBytes, outputTokensPerTurn: opts.outputTokensPerTurn, seed: 1 });
    const cfg: BenchConfig = { ...base, workload, out: join(out, `scaling-${turns}`), phases: new Set(['overhead']) };
    const { results: r, ok } = await runBench(cfg);
    if (!ok) results.failures.push({ turns, error: r.error ?? 'failed' });
    for (const s of r.overhead_summary) {
      results.rows.push({
        turns,
        design: s.design,
        runs: s.runs,
        e2e_ms_median: s.e2e_ms_median,
        api_overhead_ms_median: s.api_overhead_ms_median,
        api_overhead_per_call_ms: s.api_overhead_ms_median / s.model_calls,
        residual_ms_median: s.residual_ms_median,
        server_cpu_ms_median: s.server_cpu_ms_median,
        client_bytes_sent_median: s.client_bytes_sent_median,
      });
    }
    // Written after every point, so an interrupted sweep keeps what it measured.
    writeScaling(out, results);
  }
  return { results, ok: results.failures.length === 0 };
}

export function scalingCharts(results: ScalingResults): { perCall: string; total: string } {
  const designs = [...new Set(results.rows.map((r) => r.design))];
  const series = (f: (r: ScalingRow) => number) =>
    designs.map((d) => ({
      name: d,
      points: results.rows.filter((r) => r.design === d).map((r) => [r.turns, f(r)] as const),
    }));
  return {
    perCall: lineChart({
      title: 'API overhead per model call vs conversation length (instant model)',
      xLabel: 'model calls in the run',
      yLabel: 'ms per call',
      series: series((r) => r.api_overhead_per_call_ms),
    }),
    total: lineChart({
      title: 'API overhead of the whole run vs conversation length (instant model)',
      xLabel: 'model calls in the run',
      yLabel: 'ms',
      series: series((r) => r.api_overhead_ms_median),
    }),
  };
}

export function scalingMarkdown(results: ScalingResults): string {
  const o = results.options;
  const lines = [
    '# Scaling with conversation length',
    '',
    `Synthetic runs (seed 1): each model call runs one \`exec_command\` whose output is ${o.toolOutputBytes} bytes; ${o.outputTokensPerTurn} output tokens per call. Instant model: the analytic model time is zero. API overhead is the server's measured spans outside the model, event emission included; the residual is the rest of e2e that no span explains (loopback, the client's parsing and bookkeeping, server work outside spans), plus the simulated model's own bookkeeping. Medians over the runs of each point.`,
    '',
    '| model calls | design | runs | e2e ms | API overhead ms | per call ms | residual ms | server CPU ms | client bytes sent |',
    '|---|---|---|---|---|---|---|---|---|',
    ...results.rows.map(
      (r) =>
        `| ${r.turns} | ${r.design} | ${r.runs} | ${r.e2e_ms_median.toFixed(0)} | ${r.api_overhead_ms_median.toFixed(1)} | ${r.api_overhead_per_call_ms.toFixed(2)} | ${r.residual_ms_median === undefined ? '–' : r.residual_ms_median.toFixed(1)} | ${r.server_cpu_ms_median.toFixed(0)} | ${r.client_bytes_sent_median.toFixed(0)} |`,
    ),
    '',
    '![per call](scaling-per-call.svg)',
    '',
    '![whole run](scaling-total.svg)',
    '',
  ];
  for (const f of results.failures) lines.push(`- ${f.turns} turns failed: ${f.error}`);
  return `${lines.join('\n')}\n`;
}

function writeScaling(out: string, results: ScalingResults): void {
  writeFileSync(join(out, 'scaling.json'), `${JSON.stringify(results, null, 2)}\n`);
  const charts = scalingCharts(results);
  writeFileSync(join(out, 'scaling-per-call.svg'), charts.perCall);
  writeFileSync(join(out, 'scaling-total.svg'), charts.total);
  writeFileSync(join(out, 'scaling.md'), scalingMarkdown(results));
}
