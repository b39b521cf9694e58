/**
 * `llr bench --sweep`: where the seed's "up to 40 % faster" does and does
 * not appear. For each model speed × per-hop latency × conversation length
 * it runs the bench's grid phase (every design in `designs`, interleaved,
 * warmed server per cell, same processes as `llr bench`) and reports each
 * design's end-to-end and time-to-first-token gain over the baseline
 * (`http`): a markdown table, one heat map per design, and one paragraph
 * computed from the data saying where the gain reaches the thresholds.
 *
 * The swept latency is the route hops' (`--hop-ms`; `--hops` of them per
 * routed request); the profile's per-call hops stay as the profile sets
 * them. The design list is data (`SWEEP_DESIGNS`), so a new design joins
 * the sweep by being a client protocol. Pure parts (gains, paragraph,
 * table, heat map) are exported for the tests.
 */
import { makeDirs } from '../make-dirs.js';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { CLIENT_PROTOCOLS, type ClientProtocol } from '../client/index.js';
import type { Results } from './results.js';
import { runBench, type BenchConfig } from './runner.js';
import { esc } from './svg.js';
import { quoted } from '../terminal-text.js';
import { flatModelTurns, modelCallCount } from '../workload/replayable.js';
import type { Workload } from '../workload/types.js';

/** The recorded output tokens of the first `calls` model calls (100 per call where none is recorded). */
export function outputTokens(w: Workload, calls: number): number {
  return flatModelTurns(w)
    .slice(0, calls)
    .reduce((n, t) => n + (t.output_tokens ?? 100), 0);
}

/** Every client protocol but http-stored (the baseline's own variant); `http` is the baseline. */
export const SWEEP_DESIGNS: readonly ClientProtocol[] = CLIENT_PROTOCOLS.filter((d) => d !== 'http-stored');
export const SWEEP_BASELINE: ClientProtocol = 'http';
/** The seed's figures: up to 40 % faster end to end, 45 % faster time to first token. */
export const SEED_E2E_GAIN = 0.4;
export const SEED_TTFT_GAIN = 0.45;

export interface SweepOptions {
  speeds: number[];
  hopMs: number[];
  /** Conversation lengths, model calls (capped at the workload's). */
  calls: number[];
  reps: number;
  quick: boolean;
  /**
   * Skip a cell whose decode alone (the workload's output tokens at that
   * speed) would take longer than this per run, seconds; recorded as skipped
   * with the estimate. Keeps the full sweep near 15 minutes on 2 cores.
   */
  maxDecodeS: number;
}

export const SWEEP_FULL: Omit<SweepOptions, 'quick'> = { speeds: [65, 1000, 4000], hopMs: [0, 1, 2, 5, 10], calls: [6, 20, 66], reps: 1, maxDecodeS: 15 };
export const SWEEP_QUICK: Omit<SweepOptions, 'quick'> = { speeds: [1000, 4000], hopMs: [0, 10], calls: [3, 6], reps: 1, maxDecodeS: 15 };

export interface SweepRow {
  speed: number;
  hop_ms: number;
  calls: number;
  design: ClientProtocol;
  runs: number;
  e2e_ms_median: number;
  e2e_ms_ci: { lo: number; hi: number };
  ttft_ms_median: number;
  /**
   * The 1-minute load average when the cell started (absent in files written
   * before it was recorded). Above the CPU count, other work competed for the
   * CPU: that slows the design with the most CPU work per run (http) more
   * than the others, and inflates their gain.
   */
  load_1m?: number;
  /** The server's CPU time per run (median), ms. */
  server_cpu_ms?: number;
}

export interface SweepGain {
  speed: number;
  hop_ms: number;
  calls: number;
  design: ClientProtocol;
  /** 1 − e2e(design) / e2e(baseline). */
  e2e_gain: number;
  /** 1 − TTFT(design) / TTFT(baseline), medians over every model call. */
  ttft_gain: number;
}

export interface SweepResults {
  schema: 'llr-bench-sweep/1';
  command: string;
  options: SweepOptions;
  profile: string;
  hops: number;
  call_hops: number;
  call_hop_ms: number;
  workload: string;
  designs: ClientProtocol[];
  baseline: ClientProtocol;
  machine: Record<string, unknown> | null;
  started_at: string;
  finished_at: string | null;
  /** Load averages (1/5/15 min) at the end; the start's are in `machine`. More than the CPU count: other work competed. */
  loadavg_at_end?: number[];
  rows: SweepRow[];
  failures: Array<{ cell: string; error: string }>;
  skipped: Array<{ cell: string; reason: string }>;
}

export function parseList(spec: string, what: string, min: number): number[] {
  const xs = spec.split(',').map((s) => Number(s.trim()));
  if (xs.length === 0 || xs.some((x) => !Number.isFinite(x) || x < min)) throw new RangeError(`--${what} needs a comma-separated list of numbers >= ${min}, got ${quoted(spec)}`);
  return xs;
}

export function sweepGains(rows: readonly SweepRow[], baseline: ClientProtocol = SWEEP_BASELINE): SweepGain[] {
  const out: SweepGain[] = [];
  for (const r of rows) {
    if (r.design === baseline) continue;
    const b = rows.find((x) => x.design === baseline && x.speed === r.speed && x.hop_ms === r.hop_ms && x.calls === r.calls);
    if (!b) continue;
    out.push({ speed: r.speed, hop_ms: r.hop_ms, calls: r.calls, design: r.design, e2e_gain: 1 - r.e2e_ms_median / b.e2e_ms_median, ttft_gain: 1 - r.ttft_ms_median / b.ttft_ms_median });
  }
  return out;
}

const pct = (x: number) => (Number.isFinite(x) ? `${(Math.abs(x) < 0.0005 ? 0 : x * 100).toFixed(1)} %` : '–');
const tps = (n: number) => `${n.toLocaleString('en-US')} tok/s`;

function cellsText(gs: readonly SweepGain[]): string {
  return gs.map((g) => `${tps(g.speed)}, ${g.hop_ms} ms/hop, ${g.calls} calls`).join('; ');
}

/** One paragraph, from the data: where each design's gain reaches the seed's figures and where it does not. */
export function sweepParagraph(gains: readonly SweepGain[], e2eTarget = SEED_E2E_GAIN, ttftTarget = SEED_TTFT_GAIN): string {
  if (gains.length === 0) return 'The sweep measured no cell with both a design and the baseline, so it says nothing about the gain.';
  const designs = [...new Set(gains.map((g) => g.design))];
  const parts: string[] = [];
  for (const d of designs) {
    const mine = gains.filter((g) => g.design === d);
    const best = [...mine].sort((a, b) => b.e2e_gain - a.e2e_gain)[0]!;
    const worst = [...mine].sort((a, b) => a.e2e_gain - b.e2e_gain)[0]!;
    const bestT = [...mine].sort((a, b) => b.ttft_gain - a.ttft_gain)[0]!;
    const reach = mine.filter((g) => g.e2e_gain >= e2eTarget);
    const reachT = mine.filter((g) => g.ttft_gain >= ttftTarget);
    const e2e =
      reach.length === mine.length
        ? `${d} reaches ${pct(e2eTarget)} faster end to end over ${SWEEP_BASELINE} in all ${mine.length} cells measured: its best is ${pct(best.e2e_gain)} (${cellsText([best])}), its worst ${pct(worst.e2e_gain)} (${cellsText([worst])})`
        : reach.length === 0
        ? `${d} never reaches ${pct(e2eTarget)} faster end to end over ${SWEEP_BASELINE} in the ${mine.length} cells measured: its best is ${pct(best.e2e_gain)} (${cellsText([best])}), its worst ${pct(worst.e2e_gain)} (${cellsText([worst])})`
        : `${d} reaches ${pct(e2eTarget)} faster end to end in ${reach.length} of ${mine.length} cells (${cellsText(reach)}; best ${pct(best.e2e_gain)}) and not in the other ${mine.length - reach.length} (worst ${pct(worst.e2e_gain)} at ${cellsText([worst])})`;
    const ttft =
      reachT.length === 0
        ? `its time to first token is never ${pct(ttftTarget)} faster (best ${pct(bestT.ttft_gain)} at ${cellsText([bestT])})`
        : `its time to first token is ${pct(ttftTarget)} or more faster in ${reachT.length} of ${mine.length} cells (${cellsText(reachT)})`;
    parts.push(`${e2e}; ${ttft}.`);
  }
  return parts.join(' ');
}

/**
 * The cells the sweep did not run (too slow a decode for --sweep-max-decode-s),
 * said beside the paragraph so that "never reaches" is read over the cells measured.
 */
export function sweepSkippedText(skipped: SweepResults['skipped'], maxDecodeS: number): string {
  if (skipped.length === 0) return '';
  return `Not run (${skipped.length} cell${skipped.length === 1 ? '' : 's'}, decode alone over --sweep-max-decode-s ${maxDecodeS} s per run): ${skipped.map((k) => `${k.cell} (${k.reason.replace(/ \(over .*\)$/, '')})`).join('; ')}. There the same API work is spread over a longer run, so the gain is expected to be smaller than in the same cells at a faster model; the sweep does not measure it.`;
}

/** Said beside the paragraph when cells ran while other work competed for the CPU ('' otherwise or when unknown). */
export function sweepLoadText(s: SweepResults): string {
  const cpus = Number(s.machine?.['cpus']);
  const cells = [...new Map(s.rows.filter((r) => r.load_1m !== undefined).map((r) => [`${r.speed}|${r.hop_ms}|${r.calls}`, r.load_1m!])).values()];
  if (!Number.isFinite(cpus) || cells.length === 0) return '';
  const over = cells.filter((l) => l > cpus);
  if (over.length === 0) return '';
  const range = `${Math.min(...cells).toFixed(1)}–${Math.max(...cells).toFixed(1)}`;
  return `${over.length === cells.length ? 'Every cell' : `${over.length} of ${cells.length} cells`} started with a load average above the ${cpus} CPUs (${range} over the cells measured): other work competed for the CPU, which slows ${s.baseline} (the most CPU work per run) more than the other designs, so these gains are larger than the same cells give on an idle machine.`;
}

export function sweepMarkdown(s: SweepResults): string {
  const gains = sweepGains(s.rows, s.baseline);
  const designs = s.designs.filter((d) => d !== s.baseline);
  const loads = s.rows.some((r) => r.load_1m !== undefined);
  const head = ['model', 'hop ms', 'calls', ...(loads ? ['load'] : []), `${s.baseline} e2e ms`, ...designs.flatMap((d) => [`${d} e2e gain`, `${d} TTFT gain`])];
  const cells = [...new Map(s.rows.map((r) => [`${r.speed}|${r.hop_ms}|${r.calls}`, r])).values()].sort((a, b) => a.speed - b.speed || a.calls - b.calls || a.hop_ms - b.hop_ms);
  const line = (xs: string[]) => `| ${xs.join(' | ')} |`;
  const rows = cells.map((c) => {
    const base = s.rows.find((r) => r.design === s.baseline && r.speed === c.speed && r.hop_ms === c.hop_ms && r.calls === c.calls);
    const g = (d: ClientProtocol) => gains.find((x) => x.design === d && x.speed === c.speed && x.hop_ms === c.hop_ms && x.calls === c.calls);
    const load = loads ? [base?.load_1m === undefined ? '–' : base.load_1m.toFixed(1)] : [];
    return line([tps(c.speed), String(c.hop_ms), String(c.calls), ...load, base ? Math.round(base.e2e_ms_median).toLocaleString('en-US') : '–', ...designs.flatMap((d) => [pct(g(d)?.e2e_gain ?? NaN), pct(g(d)?.ttft_gain ?? NaN)])]);
  });
  return [
    line(head),
    line(head.map(() => '---')),
    ...rows,
    '',
    `Gain = 1 − median(design) ÷ median(${s.baseline}), ${s.options.reps} run(s) per design and cell; TTFT is the median over every model call. Profile \`${s.profile}\`: ${s.hops} route hops at the swept latency per routed request${s.call_hops > 0 ? `, ${s.call_hops} per-call hop(s) of ${s.call_hop_ms} ms` : ''}. Workload: ${s.workload}.${loads ? ` Load: the 1-minute load average when the cell started, on ${String(s.machine?.['cpus'] ?? '?')} CPUs; above the CPU count other work competed for the CPU, which slows ${s.baseline} (the most CPU work per run) more than the other designs and inflates their gain.` : ''}`,
  ].join('\n');
}

/** Red (negative) → white (0) → green (≥ the target and beyond). */
export function gainColour(g: number, target = SEED_E2E_GAIN): string {
  if (!Number.isFinite(g)) return '#eeeeee';
  const t = Math.max(-1, Math.min(1, g / target));
  const mix = (a: number, b: number, k: number) => Math.round(a + (b - a) * k);
  const [r, gr, b] = t >= 0 ? [mix(255, 47, t), mix(255, 158, t), mix(255, 68, t)] : [mix(255, 214, -t), mix(255, 39, -t), mix(255, 40, -t)];
  return `#${[r, gr, b].map((x) => x.toString(16).padStart(2, '0')).join('')}`;
}

/** One heat map per design: rows model speed × calls, columns hop latency, the e2e gain (and TTFT gain) in each cell. */
export function sweepHeatmap(s: SweepResults, design: ClientProtocol): string {
  const gains = sweepGains(s.rows, s.baseline).filter((g) => g.design === design);
  const hops = [...new Set(gains.map((g) => g.hop_ms))].sort((a, b) => a - b);
  const rowsK = [...new Set(gains.map((g) => `${g.speed}|${g.calls}`))].sort((a, b) => {
    const [sa, ca] = a.split('|').map(Number);
    const [sb, cb] = b.split('|').map(Number);
    return sa! - sb! || ca! - cb!;
  });
  const cw = 92;
  const ch = 34;
  const left = 150;
  const top = 64;
  const width = left + cw * Math.max(1, hops.length) + 24;
  const height = top + ch * Math.max(1, rowsK.length) + 64;
  let out =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">` +
    `<rect width="100%" height="100%" fill="#fff"/>` +
    `<text x="12" y="22" font-size="14" font-weight="600">${esc(`${design} vs ${s.baseline}: end-to-end gain (TTFT gain)`)}</text>` +
    `<text x="${left}" y="${top - 10}" fill="#555">${esc('per-hop latency, ms →')}</text>`;
  hops.forEach((h, i) => (out += `<text x="${left + i * cw + cw / 2}" y="${top - 26}" text-anchor="middle" fill="#555">${h}</text>`));
  rowsK.forEach((k, j) => {
    const [sp, calls] = k.split('|').map(Number);
    const y = top + j * ch;
    out += `<text x="${left - 8}" y="${y + ch / 2 + 4}" text-anchor="end">${esc(`${tps(sp!)}, ${calls} calls`)}</text>`;
    hops.forEach((h, i) => {
      const g = gains.find((x) => x.speed === sp && x.calls === calls && x.hop_ms === h);
      const x = left + i * cw;
      out += `<rect x="${x}" y="${y}" width="${cw - 2}" height="${ch - 2}" fill="${gainColour(g?.e2e_gain ?? NaN)}"/>`;
      out += `<text x="${x + cw / 2 - 1}" y="${y + ch / 2 + 4}" text-anchor="middle">${esc(g ? `${Math.round(g.e2e_gain * 100)}% (${Math.round(g.ttft_gain * 100)}%)` : '–')}</text>`;
    });
  });
  out += `<text x="12" y="${height - 28}" fill="#555">${esc(`green: toward ${pct(SEED_E2E_GAIN)} faster (full green at or beyond it); red: slower than ${s.baseline}`)}</text>`;
  const loads = s.rows.flatMap((r) => (r.load_1m === undefined ? [] : [r.load_1m]));
  const loadText = loads.length ? `; load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} on ${String(s.machine?.['cpus'] ?? '?')} CPUs` : '';
  out += `<text x="12" y="${height - 10}" fill="#555">${esc(`profile ${s.profile}; ${s.options.reps} run(s) per cell; ${s.workload}${loadText}`)}</text>`;
  return `${out}</svg>\n`;
}

/**
 * Rebuild DIR/sweep.{md,json} and the heat maps from DIR/sweep.json (`llr
 * bench --report DIR` on a sweep's directory), filling each row's load and
 * server CPU from its cell's results.json where the sweep did not record them.
 */
export function rebuildSweep(dir: string): SweepResults {
  const s = JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8')) as SweepResults;
  for (const row of s.rows) {
    const cell = join(dir, `cell-${row.speed}-${row.hop_ms}-${row.calls}`, 'results.json');
    if ((row.load_1m !== undefined && row.server_cpu_ms !== undefined) || !existsSync(cell)) continue;
    const r = JSON.parse(readFileSync(cell, 'utf8')) as Results;
    row.load_1m ??= r.machine.loadavg?.[0];
    row.server_cpu_ms ??= r.summary.find((x) => x.design === row.design)?.server_cpu_ms_median;
  }
  writeSweep(dir, s);
  return s;
}

function writeSweep(out: string, s: SweepResults): void {
  writeFileSync(join(out, 'sweep.json'), `${JSON.stringify(s, null, 1)}\n`);
  for (const d of s.designs) if (d !== s.baseline) writeFileSync(join(out, `sweep-${d}.svg`), sweepHeatmap(s, d));
  const md = [
    '# Where the gain comes from: sweep',
    '',
    `Command: \`${s.command}\``,
    '',
    `Machine: ${s.machine ? `${String(s.machine['cpus'])} × ${String(s.machine['cpu'])}, ${String(s.machine['memory_gb'])} GB, Node ${String(s.machine['node'])}` : 'unknown'}; ${s.started_at} → ${s.finished_at ?? 'unfinished'}; load average at the start ${Array.isArray(s.machine?.['loadavg']) ? (s.machine['loadavg'] as number[]).join(' / ') : '?'}, at the end ${s.loadavg_at_end?.join(' / ') ?? '?'}.`,
    '',
    sweepParagraph(sweepGains(s.rows, s.baseline)),
    '',
    ...(s.skipped.length ? [sweepSkippedText(s.skipped, s.options.maxDecodeS), ''] : []),
    ...(sweepLoadText(s) ? [sweepLoadText(s), ''] : []),
    sweepMarkdown(s),
    '',
    ...s.designs.filter((d) => d !== s.baseline).map((d) => `![${d}](sweep-${d}.svg)\n`),
    ...s.failures.map((f) => `- ${f.cell} failed: ${f.error}`),
    ...s.skipped.map((f) => `- ${f.cell} skipped: ${f.reason}`),
  ].join('\n');
  writeFileSync(join(out, 'sweep.md'), `${md}\n`);
}

export async function runSweep(base: BenchConfig, opts: SweepOptions, command: string): Promise<{ results: SweepResults; ok: boolean }> {
  const out = resolve(base.out);
  makeDirs(out);
  const designs = base.designs.includes(SWEEP_BASELINE) ? base.designs : [SWEEP_BASELINE, ...base.designs];
  const available = modelCallCount(base.workload);
  const calls = [...new Set(opts.calls.map((c) => Math.min(c, available)))];
  const s: SweepResults = {
    schema: 'llr-bench-sweep/1',
    command,
    options: { ...opts, calls },
    profile: base.profile,
    hops: base.hops,
    call_hops: base.callHops,
    call_hop_ms: base.callHopMs,
    workload: base.workload.name,
    designs,
    baseline: SWEEP_BASELINE,
    machine: null,
    started_at: new Date().toISOString(),
    finished_at: null,
    rows: [],
    failures: [],
    skipped: [],
  };
  for (const speed of opts.speeds) {
    for (const n of calls) {
      for (const hop of opts.hopMs) {
        const cell = `${speed} tok/s, ${hop} ms/hop, ${n} calls`;
        const decodeS = outputTokens(base.workload, n) / speed;
        if (decodeS > opts.maxDecodeS) {
          s.skipped.push({ cell, reason: `decode alone would take ${decodeS.toFixed(0)} s per run (over --sweep-max-decode-s ${opts.maxDecodeS})` });
          continue;
        }
        process.stderr.write(`sweep: ${cell}\n`);
        const cfg: BenchConfig = { ...base, designs, speeds: [speed], hopMs: hop, gridCalls: n, reps: opts.reps, phases: new Set(['grid']), out: join(out, `cell-${speed}-${hop}-${n}`) };
        const { results: r, ok } = await runBench(cfg);
        s.machine ??= { ...r.machine };
        if (!ok) s.failures.push({ cell, error: r.error ?? 'failed' });
        for (const row of r.summary) {
          s.rows.push({
            speed,
            hop_ms: hop,
            calls: n,
            design: row.design,
            runs: row.runs,
            e2e_ms_median: row.e2e_ms_median,
            e2e_ms_ci: row.e2e_ms_ci,
            ttft_ms_median: row.ttft_ms_median,
            ...(r.machine.loadavg && { load_1m: r.machine.loadavg[0]! }),
            server_cpu_ms: row.server_cpu_ms_median,
          });
        }
        writeSweep(out, s);
      }
    }
  }
  s.finished_at = new Date().toISOString();
  s.loadavg_at_end = os.loadavg().map((x) => Math.round(x * 100) / 100);
  writeSweep(out, s);
  return { results: s, ok: s.failures.length === 0 };
}
