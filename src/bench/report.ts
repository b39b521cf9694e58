/**
 * The bench report: `report.md` (tables), the SVG charts and `index.html`
 * showing them together, all built from a `Results` object (the same data
 * as `results.json`, so a report can be rebuilt from the file alone).
 *
 * `buildReport` is pure (tested on a small fake Results); `writeReport` puts
 * the files in the output directory. Leaves out the numbers' derivation
 * (derive.ts, summaries.ts, verdicts.ts) and any styling beyond a few lines of CSS.
 */
import { makeDirs } from '../make-dirs.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLIENT_PROTOCOLS } from '../client/index.js';
import { targetLineText } from './format.js';
import { okRuns, perCallMedians, stageBreakdown } from './summaries.js';
import type { Results, SummaryRow } from './results.js';
import { instantSplitTable } from './instant-split.js';
import { targetsMarkdown } from './targets.js';
import { esc, groupedBarChart, lineChart, stackedBarChart } from './svg.js';

export interface Chart {
  file: string;
  caption: string;
  svg: string;
}

export interface Table {
  title: string;
  head: string[];
  rows: string[][];
  note?: string;
}

export interface Report {
  markdown: string;
  html: string;
  charts: Chart[];
}

const DESIGNS = CLIENT_PROTOCOLS;
const n0 = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : Math.round(x).toLocaleString('en-US'));
const n1 = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(1));
const n2 = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(2));
const pc = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : `${(x * 100).toFixed(1)}%`);
const kb = (x: number) => (Number.isFinite(x) ? `${(x / 1024).toFixed(0)} KiB` : '–');
const speed = (tps: number | null) => (tps === null ? 'instant' : `${tps} tok/s`);

function byDesign<T extends { design: string }>(rows: readonly T[]): T[] {
  return [...rows].sort((a, b) => DESIGNS.indexOf(a.design as never) - DESIGNS.indexOf(b.design as never));
}

function summaryTable(title: string, rows: readonly SummaryRow[], note?: string): Table {
  const sorted = [...rows].sort((a, b) => (a.tokens_per_second ?? 0) - (b.tokens_per_second ?? 0) || DESIGNS.indexOf(a.design) - DESIGNS.indexOf(b.design));
  return {
    title,
    head: ['design', 'model', 'tool ×', 'runs', 'calls', 'e2e ms median [95% CI] (min–max)', 'model ms analytic', 'model spans − analytic', 'API overhead ms (share)', 'of which emit', 'residual ms', 'per-call overhead ms', 'TTFT ms [95% CI]', 'floor ms', 'server CPU ms', 'client→server', 'server→client'],
    rows: sorted.map((r) => [
      r.design,
      speed(r.tokens_per_second),
      String(r.tool_factor),
      String(r.runs),
      String(r.model_calls),
      `${n0(r.e2e_ms_median)} [${n0(r.e2e_ms_ci?.lo)}–${n0(r.e2e_ms_ci?.hi)}] (${n0(r.e2e_ms_min)}–${n0(r.e2e_ms_max)})`,
      n0(r.model_ms_analytic_median),
      n1(r.model_excess_ms_median),
      `${n1(r.api_overhead_ms_median)} (${pc(r.api_overhead_share)})`,
      n1(r.emit_ms_median),
      n1(r.residual_ms_median),
      n2(r.turn_overhead_ms_median),
      `${n1(r.ttft_ms_median)} [${n1(r.ttft_ms_ci?.lo)}–${n1(r.ttft_ms_ci?.hi)}]`,
      n0(r.floor_ms_median),
      n0(r.server_cpu_ms_median),
      kb(r.client_bytes_sent_median),
      kb(r.server_bytes_sent_median),
    ]),
    ...(note !== undefined && { note }),
  };
}

const COUNTER_COLUMNS = ['responses', 'tokens_tokenized', 'items_validated', 'bytes_scanned', 'render_full', 'render_incremental', 'store_reads', 'store_hydrations', 'persisted', 'route_full', 'events_sent'] as const;

function countersTable(results: Results): Table | null {
  const runs = okRuns(results.runs, 'overhead');
  if (runs.length === 0) return null;
  const rows = byDesign(DESIGNS.flatMap((d) => runs.filter((r) => r.design === d).slice(0, 1)));
  return {
    title: 'Stage counters per run (overhead phase, one run per design)',
    head: ['design', ...COUNTER_COLUMNS],
    rows: rows.map((r) => [r.design, ...COUNTER_COLUMNS.map((c) => n0(c === 'responses' ? r.responses : (r.counters[c] ?? 0)))]),
    note: 'What the server did, from the llr:timing counters: tokens it tokenized, items it validated, bytes its safety scan read, full vs incremental renders, store reads, responses persisted, full routing decisions, events sent.',
  };
}

function ablationTable(results: Results): Table | null {
  const { baseline, rows } = results.ablations;
  if (!baseline || rows.length === 0) return null;
  return {
    title: 'Ablations (ws mode, instant model, whole workload): each switch off alone',
    head: ['switch off', 'runs', 'e2e ms median (min–max)', 'Δ e2e vs all on', 'server pipeline ms (Δ)', 'server CPU ms', 'counters that changed (all on → off)'],
    rows: [
      ['(none: baseline)', String(baseline.runs), `${n0(baseline.e2e_ms_median)} (${n0(baseline.e2e_ms_min)}–${n0(baseline.e2e_ms_max)})`, '–', n1(baseline.pipeline_ms_median), n0(baseline.server_cpu_ms_median), ''],
      ...rows.map((r) => [
        r.off,
        String(r.runs),
        `${n0(r.e2e_ms_median)} (${n0(r.e2e_ms_min)}–${n0(r.e2e_ms_max)})`,
        `${r.contribution_ms >= 0 ? '+' : ''}${n0(r.contribution_ms)} ms (${pc(r.contribution_share)})`,
        `${n1(r.pipeline_ms_median)} (${r.pipeline_delta_ms >= 0 ? '+' : ''}${n1(r.pipeline_delta_ms)})`,
        n0(r.server_cpu_ms_median),
        Object.entries(r.counters_changed)
          .map(([k, [a, b]]) => `${k} ${n0(a)}→${n0(b)}`)
          .join(', '),
      ]),
    ],
    note: 'Δ is what the switch saves: the e2e with it off minus the baseline with every switch on (positive: the optimization helps). Each configuration runs on its own warmed server process, repetitions interleaved; e2e differences within the min–max spread are noise (this is a shared 2-vCPU VM). The server pipeline column (the sum of the llr:timing stages outside the model) is the less noisy measure of the work a switch removes. With hop latency 0 (the default) routing_reuse and skip_intermediate_hop save only the microseconds of a routing decision; the counters show the work each switch removes. With overlap on, billing and persistence run after the timing event, so the timing counters do not see them.',
  };
}

function phaseTables(results: Results): Table[] {
  const out: Table[] = [];
  if (results.stream) {
    const s = results.stream;
    out.push({
      title: `Streaming at ${s.tokens_per_second} tokens/s`,
      head: ['measure', 'value'],
      rows: [
        ['one stream: tokens / delta events', `${s.single.tokens} / ${s.single.deltas}`],
        ['one stream: deltas per second (client)', n0(s.single.client_rate)],
        ['one stream: tokens per second (server decode span)', n0(s.single.server_rate)],
        ['delta frame size', `${s.single.delta_frame_bytes} B`],
        [`${s.concurrent.streams} concurrent streams × ${s.concurrent.tokens_per_stream} tokens: events per second delivered`, n0(s.concurrent.events_per_second)],
        ['… demanded (every stream at its rate)', n0(s.concurrent.demanded_events_per_second)],
        [`raw ws frames per second (${s.concurrent.frame_bytes} B, ${s.concurrent.streams} connections, same client)`, n0(s.concurrent.raw_frames_per_second)],
      ],
    });
  }
  if (results.paused) {
    const p = results.paused;
    out.push({
      title: `${p.runs} concurrent paused long-lived runs`,
      head: ['measure', 'value'],
      rows: [
        ['paused at once / resumed', `${p.paused} / ${p.resumed}`],
        ['RSS per paused run', `${(p.rss_bytes_per_run / 1024).toFixed(1)} KiB`],
        ['heap per paused run', `${(p.heap_bytes_per_run / 1024).toFixed(1)} KiB`],
        ['append → resumed event p50 / p99 / max', `${n2(p.append_to_resume_ms.p50)} / ${n2(p.append_to_resume_ms.p99)} / ${n2(p.append_to_resume_ms.max)} ms`],
        ['prompt tokens per run', n0(p.prompt_tokens_per_run)],
        ['time to open and pause all', `${n0(p.open_ms)} ms`],
      ],
    });
  }
  return out;
}

function buildCharts(results: Results): Chart[] {
  const charts: Chart[] = [];
  const grid = results.summary.filter((r) => r.tool_factor === (results.summary[0]?.tool_factor ?? 0));
  const speeds = [...new Set(grid.map((r) => r.tokens_per_second))].sort((a, b) => (a ?? 0) - (b ?? 0));
  if (grid.length) {
    const groups = (f: (r: SummaryRow) => { value: number; min?: number; max?: number }) =>
      speeds.map((s) => ({
        label: speed(s),
        values: DESIGNS.map((d) => {
          const r = grid.find((x) => x.design === d && x.tokens_per_second === s);
          return r ? f(r) : null;
        }),
      }));
    charts.push({
      file: 'e2e.svg',
      caption: 'End-to-end time per design and model speed (median, whiskers min–max).',
      svg: groupedBarChart({ title: 'End-to-end agent run', yLabel: 'ms', series: DESIGNS, groups: groups((r) => ({ value: r.e2e_ms_median, min: r.e2e_ms_min, max: r.e2e_ms_max })) }),
    });
    charts.push({
      file: 'api-overhead.svg',
      caption: 'API overhead (the server\'s measured spans outside the model, event emission included; the residual — loopback, the client — is in the tables) per design and model speed (median, whiskers min–max).',
      svg: groupedBarChart({
        title: 'API overhead per agent run',
        yLabel: 'ms',
        series: DESIGNS,
        groups: groups((r) => ({ value: Math.max(0, r.api_overhead_ms_median), min: Math.max(0, r.api_overhead_ms_min), max: Math.max(0, r.api_overhead_ms_max) })),
      }),
    });
  }
  const overheadRuns = okRuns(results.runs, 'overhead');
  const lineRuns = overheadRuns.length ? overheadRuns : okRuns(results.runs, 'grid');
  if (lineRuns.length) {
    const series = DESIGNS.flatMap((d) => {
      const mine = lineRuns.filter((r) => r.design === d && r.model.tokens_per_second === lineRuns[0]!.model.tokens_per_second);
      if (!mine.length) return [];
      return [{ name: d, points: perCallMedians(mine, (t) => t.overhead_ms).map((v, i) => [i, v] as const) }];
    });
    charts.push({
      file: 'turn-overhead.svg',
      caption: `Per-call overhead against model call index (median over runs; ${speed(lineRuns[0]!.model.tokens_per_second)} model, ${overheadRuns.length ? 'whole workload' : 'grid workload'}).`,
      svg: lineChart({ title: 'Overhead per model call as the conversation grows', xLabel: 'model call', yLabel: 'ms (sent → can act, minus model spans)', series }),
    });
  }
  const stacked = (file: string, title: string, caption: string, runs: ReturnType<typeof okRuns>) => {
    const bars = DESIGNS.flatMap((d) => {
      const mine = runs.filter((r) => r.design === d);
      return mine.length ? [{ label: d, parts: stageBreakdown(mine) }] : [];
    });
    if (!bars.length) return;
    const names = [...new Set(bars.flatMap((b) => b.parts.map((p) => p.name)))];
    charts.push({
      file,
      caption,
      svg: stackedBarChart({ title, yLabel: 'ms per run (median)', segmentNames: names, bars: bars.map((b) => ({ label: b.label, segments: Object.fromEntries(b.parts.map((p) => [p.name, p.ms])) })) }),
    });
  };
  stacked('stages-instant.svg', 'Where the time goes: instant model, whole workload', 'Stacked breakdown by stage with the instant model over the whole workload. The analytic model time is zero; the model spans left are the simulated model\'s own bookkeeping (prefix-cache hashing, replay policy), emission is its own segment, and the residual is what no span explains (loopback, the client, server work outside spans).', overheadRuns);
  const gridRuns = okRuns(results.runs, 'grid');
  const gs = gridRuns.some((r) => r.model.tokens_per_second === 1000) ? 1000 : gridRuns[0]?.model.tokens_per_second;
  stacked('stages-grid.svg', `Where the time goes: ${speed(gs ?? null)}`, `Stacked breakdown by stage at ${speed(gs ?? null)} (grid workload, median run per design).`, gridRuns.filter((r) => r.model.tokens_per_second === gs && r.tool_factor === (results.summary[0]?.tool_factor ?? 0)));
  return charts;
}

function buildTables(results: Results): Table[] {
  const tables: Table[] = [];
  if (results.summary.length) {
    tables.push(summaryTable('Per design and model speed (grid)', results.summary, `Workload: ${results.workload.grid_model_calls} model calls. TTFT: sent → first output item, less hidden reasoning decode. Floor: model time from the settings + one loopback RTT per call.`));
  }
  if (results.overhead_summary.length) {
    tables.push(
      summaryTable(
        'API overhead with an instant model (whole workload)',
        results.overhead_summary,
        `Workload: ${results.workload.overhead_model_calls} model calls. The analytic model time is zero, so e2e = the simulator's own spans + API overhead (measured server spans, emission included) + the residual (loopback, client, work outside spans), each shown.`,
      ),
    );
  }
  const split = instantSplitTable(results.runs);
  if (split) tables.push(split);
  const counters = countersTable(results);
  if (counters) tables.push(counters);
  const ab = ablationTable(results);
  if (ab) tables.push(ab);
  tables.push(...phaseTables(results));
  return tables;
}

function mdTable(t: Table): string {
  const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [`### ${t.title}`, '', line(t.head), line(t.head.map(() => '---')), ...t.rows.map(line), ...(t.note ? ['', t.note] : []), ''].join('\n');
}

function htmlTable(t: Table): string {
  const head = t.head.map((h) => `<th>${esc(h)}</th>`).join('');
  const rows = t.rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('\n');
  return `<h3>${esc(t.title)}</h3>\n<table><thead><tr>${head}</tr></thead><tbody>\n${rows}\n</tbody></table>${t.note ? `<p class="note">${esc(t.note)}</p>` : ''}`;
}

/** The spread seen between repetitions of one configuration: median and largest (max − min) / median of e2e. */
function noiseLine(results: Results): string {
  const rows = [...results.summary, ...results.overhead_summary].filter((r) => Number.isFinite(r.e2e_spread));
  if (rows.length === 0) return 'Noise between repetitions: not measured (fewer than 2 runs per configuration).';
  const spreads = rows.map((r) => r.e2e_spread).sort((a, b) => a - b);
  const worst = rows.reduce((a, b) => (b.e2e_spread > a.e2e_spread ? b : a));
  return `Noise between repetitions (e2e (max − min) ÷ median, over ${rows.length} configurations): median ${pc(spreads[spreads.length >> 1]!)}, largest ${pc(worst.e2e_spread)} (${worst.design}, ${speed(worst.tokens_per_second)}). Intervals are percentile bootstrap 95 % intervals of the median (2,000 resamples, seed 1); with 3 runs they are about as wide as min–max.`;
}

function preamble(results: Results): string[] {
  const m = results.machine;
  return [
    `Status: **${results.status}**${results.error ? ` — ${results.error}` : ''}. Started ${results.started_at}${results.finished_at ? `, finished ${results.finished_at}` : ''}.`,
    `Machine: ${m.cpus} × ${m.cpu}, ${m.memory_gb} GB RAM, Node ${m.node}, ${m.platform}.${m.loadavg ? ` Load average at the start (1/5/15 min): ${m.loadavg.join(' / ')}${m.loadavg[0]! > m.cpus ? ` — above the ${m.cpus} CPUs: other work competed with the bench, and wall-clock spans include waiting for a CPU` : ''}.` : ''}`,
    `Workload: ${results.workload.name}. Source: ${results.workload.source}${tokenFigures(results.workload.summary['token_figures'])}`,
    `Config: \`${JSON.stringify(results.config)}\``,
    noiseLine(results),
    phaseTimes(results),
    results.loopback_rtt_ms ? `Loopback WebSocket round trip (raw ws echo, own process): p50 ${n2(results.loopback_rtt_ms.p50)} ms, p99 ${n2(results.loopback_rtt_ms.p99)} ms (${results.loopback_rtt_ms.n} samples).` : '',
  ].filter(Boolean);
}

/**
 * The workload reader's notes (what it could not replay as recorded), as results.json keeps them: a line each, the
 * rest counted. None for a results.json written before they were kept.
 */
function workloadNotes(results: Results): string[] {
  const notes = results.workload.summary['notes'] as { count: number; listed: Array<{ line: number; what: string; why: string; more?: number }> } | undefined;
  if (!notes || notes.count === 0) return [];
  const shown = notes.listed.reduce((n, s) => n + 1 + (s.more ?? 0), 0);
  return [
    ...notes.listed.map((s) => `line ${s.line}: ${s.what} — ${s.why}${s.more ? ` (and ${s.more} more like it)` : ''}`),
    ...(notes.count > shown ? [`… and ${notes.count - shown} more: \`llr workload inspect\` on the workload lists them all`] : []),
  ];
}

export function buildReport(results: Results): Report {
  const charts = buildCharts(results);
  const notes = workloadNotes(results);
  const tables = buildTables(results);
  // The CLI line carries the note only when a target fails; the report always shows it.
  const targets = results.targets.map((t) => (t.verdict === 'holds' || t.verdict === 'reported' || (t.verdict === undefined && t.holds) ? `${targetLineText(t)} (${t.note})` : targetLineText(t)));
  const failed = results.runs.filter((r) => !r.ok);
  const errors = [
    ...failed.map((r) => `${r.phase} ${r.design} ${speed(r.model.tokens_per_second)} rep ${r.rep}: ${(r as { error: string }).error}`),
    ...results.phase_errors.map((e) => `${e.phase}: ${e.error}`),
  ];
  const markdown = [
    '# llr bench report',
    '',
    ...preamble(results).map((l) => `${l}\n`),
    '## Targets',
    '',
    targetsMarkdown(Number(results.config['target_speed'] ?? 1000)),
    '',
    ...targets.map((t) => `- ${t}`),
    '',
    ...(errors.length ? ['## Failures', '', ...errors.map((e) => `- ${e}`), ''] : []),
    ...(notes.length ? ['## Workload notes', '', 'What the workload reader could not replay as recorded, and what it did instead:', '', ...notes.map((n) => `- ${n}`), ''] : []),
    '## Tables',
    '',
    ...tables.map(mdTable),
    '## Charts',
    '',
    ...charts.map((c) => `![${c.caption}](charts/${c.file})\n\n${c.caption}\n`),
  ].join('\n');
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>llr bench report</title>
<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
th{background:#f5f5f5}.note{color:#555;font-size:13px}figure{margin:1.5em 0}figcaption{color:#555;font-size:13px}
li{margin:.3em 0}code{font-size:12px}</style></head><body>
<h1>llr bench report</h1>
${preamble(results).map((l) => `<p>${esc(l.replace(/\*\*/g, ''))}</p>`).join('\n')}
<h2>Targets</h2><ul>${targets.map((t) => `<li>${esc(t)}</li>`).join('\n')}</ul>
${errors.length ? `<h2>Failures</h2><ul>${errors.map((e) => `<li>${esc(e)}</li>`).join('')}</ul>` : ''}
${notes.length ? `<h2>Workload notes</h2><p class="note">What the workload reader could not replay as recorded, and what it did instead:</p><ul>${notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>` : ''}
<h2>Charts</h2>
${charts.map((c) => `<figure>${c.svg}<figcaption>${esc(c.caption)}</figcaption></figure>`).join('\n')}
<h2>Tables</h2>
${tables.map(htmlTable).join('\n')}
</body></html>
`;
  return { markdown, html, charts };
}

export function writeReport(dir: string, results: Results): Report {
  const report = buildReport(results);
  makeDirs(join(dir, 'charts'));
  for (const c of report.charts) writeFileSync(join(dir, 'charts', c.file), c.svg);
  writeFileSync(join(dir, 'report.md'), report.markdown);
  writeFileSync(join(dir, 'index.html'), report.html);
  return report;
}

/** Wall time per phase (results.phase_seconds), the bench's own budget; '' for files written before it was recorded. */
export function phaseTimes(results: Results): string {
  const p = results.phase_seconds;
  if (!p || Object.keys(p).length === 0) return '';
  const total = Object.values(p).reduce((a, b) => a + b, 0);
  return `Wall time per phase: ${Object.entries(p).map(([k, v]) => `${k} ${v.toFixed(1)} s`).join(', ')} (${total.toFixed(1)} s in all).`;
}

/** Whether the workload's per-call token figures were recorded or inferred (docs/benchmarks.md, "Workloads"). */
function tokenFigures(f: unknown): string {
  if (typeof f !== 'object' || f === null) return '';
  const t = f as Record<string, number>;
  return ` Token figures per model call: input ${t['input_recorded']} recorded / ${t['input_inferred']} inferred, output ${t['output_recorded']} recorded / ${t['output_inferred']} inferred.`;
}
