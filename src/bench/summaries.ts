/**
 * Summaries over runs: one row per configuration (medians, spreads and
 * confidence intervals over repetitions), per-call medians, the stage
 * breakdown, the ablation table, and per-call overhead growth. Pure: no
 * I/O, no clocks. Used by the runner (as results come in), the report and
 * the target lines (verdicts.ts).
 */
import type { ClientProtocol } from '../client/index.js';
import { pipelineMs } from './derive.js';
import type { AblationRow, Phase, RunRecord, SummaryRow, TurnRecord } from './results.js';
import { bootstrapMedianCI, median, relativeSpread } from './stats.js';

export type OkRun = RunRecord & { ok: true };

export function okRuns(runs: readonly RunRecord[], phase: Phase): OkRun[] {
  return runs.filter((r): r is OkRun => r.ok && r.phase === phase);
}

function key(r: RunRecord): string {
  return `${r.design}|${r.model.tokens_per_second}|${r.tool_factor}|${r.off}`;
}

/** One row per design × model speed × tool factor (× switch), medians over repetitions. */
export function summarize(runs: readonly RunRecord[], phase: Phase): SummaryRow[] {
  const groups = new Map<string, OkRun[]>();
  for (const r of okRuns(runs, phase)) {
    const k = key(r);
    const g = groups.get(k) ?? [];
    g.push(r);
    groups.set(k, g);
  }
  return [...groups.values()].map((g) => summaryRow(g));
}

function summaryRow(g: readonly OkRun[]): SummaryRow {
  const first = g[0]!;
  const pick = (f: (r: OkRun) => number) => g.map(f);
  const e2e = pick((r) => r.e2e_ms);
  const ovh = pick((r) => r.api_overhead_ms);
  const floors = g.flatMap((r) => (r.floor_ms === null ? [] : [r.floor_ms]));
  const ttfts = g.flatMap((r) => r.turns.flatMap((t) => (t.ttft_ms === null ? [] : [t.ttft_ms])));
  const e2eMed = median(e2e);
  const ovhMed = median(ovh);
  const ci = (xs: number[]) => {
    const { lo, hi } = bootstrapMedianCI(xs);
    return { lo, hi };
  };
  return {
    design: first.design,
    tokens_per_second: first.model.tokens_per_second,
    tool_factor: first.tool_factor,
    runs: g.length,
    model_calls: first.turns.length,
    e2e_ms_median: e2eMed,
    e2e_ms_min: Math.min(...e2e),
    e2e_ms_max: Math.max(...e2e),
    api_overhead_ms_median: ovhMed,
    api_overhead_ms_min: Math.min(...ovh),
    api_overhead_ms_max: Math.max(...ovh),
    api_overhead_share: e2eMed > 0 ? ovhMed / e2eMed : 0,
    e2e_ms_ci: ci(e2e),
    e2e_spread: relativeSpread(e2e),
    emit_ms_median: median(pick((r) => r.emit_ms ?? 0)),
    model_excess_ms_median: median(pick((r) => r.model_excess_ms ?? NaN)),
    residual_ms_median: median(pick((r) => r.residual_ms ?? NaN)),
    model_ms_analytic_median: median(pick((r) => r.model_ms_analytic)),
    ttft_ms_median: ttfts.length ? median(ttfts) : NaN,
    ttft_ms_ci: ci(ttfts),
    model_ms_median: median(pick((r) => r.model_ms)),
    floor_ms_median: floors.length ? median(floors) : null,
    server_cpu_ms_median: median(pick((r) => r.server_cpu_ms)),
    client_bytes_sent_median: median(pick((r) => r.bytes.client_sent)),
    server_bytes_sent_median: median(pick((r) => r.bytes.server_sent)),
    turn_overhead_ms_median: median(g.flatMap((r) => r.turns.map((t) => t.overhead_ms))),
    pipeline_ms_median: median(pick((r) => pipelineMs(r))),
  };
}

/** Per model call, the median over repetitions of `f` (runs of one configuration). */
export function perCallMedians(runs: readonly OkRun[], f: (t: TurnRecord) => number): number[] {
  const n = Math.min(...runs.map((r) => r.turns.length));
  if (!Number.isFinite(n)) return [];
  return Array.from({ length: n }, (_, i) => median(runs.map((r) => f(r.turns[i]!))));
}

/** Median stage totals (ms) over runs, with the model, tools and the unaccounted rest. */
export function stageBreakdown(runs: readonly OkRun[]): Array<{ name: string; ms: number }> {
  if (runs.length === 0) return [];
  const groups: Array<[string, string[]]> = [
    ['parse (the request\'s JSON)', ['parse', 'parse_append']],
    ['validate', ['validate', 'validate_append']],
    ['render / tokenize', ['render', 'render_append']],
    ['safety scan', ['safety', 'safety_append']],
    ['auth · route · hops', ['auth', 'route', 'hop']],
    ['load state (store)', ['load_state']],
    ['post-inference', ['usage', 'billing', 'persist', 'log']],
    ['emit (build, serialise, write events)', ['emit']],
  ];
  const grouped = new Set(groups.flatMap(([, ks]) => ks));
  const rows = groups.map(([name, ks]) => ({ name, ms: median(runs.map((r) => ks.reduce((n, k) => n + (r.stage_ms[k] ?? 0), 0))) }));
  const otherStages = median(
    runs.map((r) =>
      Object.entries(r.stage_ms).reduce((n, [k, v]) => (grouped.has(k) || k === 'prefill' || k === 'decode' ? n : n + v), 0),
    ),
  );
  if (otherStages > 0) rows.push({ name: 'other server stages', ms: otherStages });
  const model = median(runs.map((r) => r.model_ms));
  const tools = median(runs.map((r) => r.tool_ms));
  const e2e = median(runs.map((r) => r.e2e_ms));
  const accounted = rows.reduce((n, r) => n + r.ms, 0) + model + tools;
  return [
    { name: 'model (prefill + decode spans, emission left out)', ms: model },
    ...rows,
    { name: 'client tools', ms: tools },
    { name: 'residual: loopback, client, work outside spans', ms: Math.max(0, e2e - accounted) },
  ];
}

export function ablationRows(runs: readonly RunRecord[], baseline: SummaryRow | null, baselineRuns: readonly OkRun[]): AblationRow[] {
  const byOff = new Map<string, OkRun[]>();
  for (const r of okRuns(runs, 'ablation')) {
    if (r.off === null) continue;
    const g = byOff.get(r.off) ?? [];
    g.push(r);
    byOff.set(r.off, g);
  }
  const baseCounters = medianCounters(baselineRuns);
  return [...byOff].map(([off, g]) => {
    const row = summaryRow(g);
    const counters = medianCounters(g);
    const changed: Record<string, [number, number]> = {};
    for (const k of new Set([...Object.keys(baseCounters), ...Object.keys(counters)])) {
      const a = baseCounters[k] ?? 0;
      const b = counters[k] ?? 0;
      if (a !== b && k !== 'events_sent') changed[k] = [a, b];
    }
    const contribution = baseline ? row.e2e_ms_median - baseline.e2e_ms_median : NaN;
    return {
      off,
      runs: g.length,
      e2e_ms_median: row.e2e_ms_median,
      e2e_ms_min: row.e2e_ms_min,
      e2e_ms_max: row.e2e_ms_max,
      api_overhead_ms_median: row.api_overhead_ms_median,
      contribution_ms: contribution,
      contribution_share: baseline && baseline.e2e_ms_median > 0 ? contribution / baseline.e2e_ms_median : NaN,
      pipeline_ms_median: row.pipeline_ms_median,
      pipeline_delta_ms: baseline ? row.pipeline_ms_median - baseline.pipeline_ms_median : NaN,
      server_cpu_ms_median: row.server_cpu_ms_median,
      counters_changed: changed,
    };
  });
}

function medianCounters(runs: readonly OkRun[]): Record<string, number> {
  const keys = new Set(runs.flatMap((r) => Object.keys(r.counters)));
  return Object.fromEntries([...keys].map((k) => [k, median(runs.map((r) => r.counters[k] ?? 0))]));
}

/** Calls that continue a user turn (the first call of each user turn pays the full pre-inference work in every design). */
function continuationIndexes(turns: readonly TurnRecord[]): number[] {
  return turns.flatMap((t, i) => (i > 0 && turns[i - 1]!.user_turn === t.user_turn ? [i] : []));
}

export const GROWTH_WINDOW = 5;

export interface Growth {
  design: ClientProtocol;
  /** As the issue words it: the last model call against the first (medians over runs). */
  first_call_ms: number;
  last_call_ms: number;
  literal_ratio: number;
  /** Like for like: windows of continuation calls of the most common shape, first vs last. */
  first_ms: number;
  last_ms: number;
  ratio: number;
  window: number;
  /** How many calls share that shape (same event count). */
  like_calls: number;
  /** The server's own pipeline spans per call over the same windows. */
  pipeline_first_ms: number;
  pipeline_last_ms: number;
  bytes_in_first: number;
  bytes_in_last: number;
  prompt_tokens_last: number | null;
  runs: number;
}

/**
 * Per-call overhead growth of one design over a run. One call's overhead is a
 * millisecond or two and depends on what the call carries (how many events it
 * streams, how big the tool outputs it sends are), so besides the literal
 * last-vs-first comparison it compares like with like: continuation calls
 * that stream the most common number of events, the median of the first
 * `GROWTH_WINDOW` of them against the median of the last ones, each call
 * first reduced to its median over repetitions.
 */
export function overheadGrowth(runs: readonly OkRun[], design: ClientProtocol): Growth | null {
  const mine = runs.filter((r) => r.design === design);
  if (mine.length === 0) return null;
  const ovh = perCallMedians(mine, (t) => t.overhead_ms);
  const pipe = perCallMedians(mine, (t) => t.server_pipeline_ms ?? 0);
  const bytesIn = perCallMedians(mine, (t) => t.bytes_in);
  const shape = mine[0]!.turns;
  const cont = continuationIndexes(shape).filter((i) => i < ovh.length);
  if (cont.length === 0 || ovh.length === 0) return null;
  const counts = new Map<number, number>();
  for (const i of cont) counts.set(shape[i]!.events, (counts.get(shape[i]!.events) ?? 0) + 1);
  const modal = [...counts].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]![0];
  const like = cont.filter((i) => shape[i]!.events === modal);
  const pool = like.length >= 4 ? like : cont;
  const k = Math.max(1, Math.min(GROWTH_WINDOW, Math.floor(pool.length / 2)));
  const head = pool.slice(0, k);
  const tail = pool.slice(-k);
  const win = (xs: number[], idx: number[]) => median(idx.map((i) => xs[i]!));
  const prompts = mine.flatMap((r) => {
    const p = r.turns.at(-1)?.prompt_tokens;
    return p === null || p === undefined ? [] : [p];
  });
  const first = win(ovh, head);
  const last = win(ovh, tail);
  return {
    design,
    first_call_ms: ovh[0]!,
    last_call_ms: ovh[ovh.length - 1]!,
    literal_ratio: ovh[ovh.length - 1]! / ovh[0]!,
    first_ms: first,
    last_ms: last,
    ratio: last / first,
    window: k,
    like_calls: pool.length,
    pipeline_first_ms: win(pipe, head),
    pipeline_last_ms: win(pipe, tail),
    bytes_in_first: win(bytesIn, head),
    bytes_in_last: win(bytesIn, tail),
    prompt_tokens_last: prompts.length ? median(prompts) : null,
    runs: mine.length,
  };
}

