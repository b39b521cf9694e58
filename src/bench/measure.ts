/**
 * From raw samples to the numbers the report stands on: per-call overhead
 * and time to first token, per-run API overhead, model time and floor, the
 * per-design summaries, the ablation table, and the four targets (thresholds in targets.ts).
 *
 * Pure: no I/O, no clocks. Used by the runner (as results come in) and the
 * tests (on small hand-made results). Definitions (also in
 * docs/benchmarks.md):
 *
 * - model time: the server's prefill + decode spans (what the simulated model
 *   actually took, timer lateness included);
 * - API overhead of a run: the server's measured stage spans outside the
 *   model plus its event emission (`emit`); with the analytic model time,
 *   the model spans' excess over it, and the client's tool time, what is
 *   left of end-to-end is the residual, reported on its own (loopback,
 *   client, work outside any span): e2e = analytic model + model excess +
 *   tools + API overhead + residual;
 * - overhead of a model call: sent → client can act, minus its prefill and
 *   decode spans;
 * - time to first token: sent → first output item, minus the hidden
 *   reasoning tokens decoded before it (recorded tokens / rate);
 * - floor: the model time the settings call for, from the run's own token
 *   counts (no timer lateness), plus one measured loopback round trip per
 *   model call.
 */
import type { ClientProtocol } from '../client/index.js';
import { visibleTokens } from '../model/policies.js';
import type { RunSample } from './replay.js';
import type {
  AblationRow,
  MeasuredRun,
  ModelConfig,
  PausedPhase,
  Phase,
  RunRecord,
  StreamPhase,
  SummaryRow,
  TargetLine,
  TurnRecord,
} from './results.js';
import { bootstrapMedianCI, median, relativeSpread } from './stats.js';
import { TARGET_NAMES, fill, passes, spec, targetText, verdictOf } from './targets.js';
import { flatModelTurns } from '../workload/replayable.js';
import type { Workload } from '../workload/types.js';

/** Hidden (reasoning) tokens the model decodes before each call's visible output. */
export function hiddenTokensPerCall(w: Workload): number[] {
  return flatModelTurns(w).map((t) => (t.output_tokens === undefined ? 0 : Math.max(0, t.output_tokens - visibleTokens(t.output))));
}

export function msPerToken(tps: number | null): number {
  return tps === null || !Number.isFinite(tps) ? 0 : 1000 / tps;
}

export interface DeriveContext {
  model: ModelConfig;
  /** By global model call index. */
  hiddenTokens: readonly number[];
  rttMs: number | null;
  serverCpuMs: number;
}

export function deriveRun(sample: RunSample, ctx: DeriveContext): MeasuredRun {
  const perToken = msPerToken(ctx.model.tokens_per_second);
  const turns: TurnRecord[] = sample.turns.map((t) => ({
    ...t,
    overhead_ms: t.done_ms - t.prefill_ms - t.decode_ms,
    ttft_ms: t.first_output_ms === null ? null : t.first_output_ms - (ctx.hiddenTokens[t.call] ?? 0) * perToken,
  }));
  const c = sample.counters;
  const calls = c['model_calls'] ?? turns.length;
  const uncached = (c['prompt_tokens'] ?? 0) - (c['cached_tokens'] ?? 0);
  const analytic =
    ctx.model.tokens_per_second === null
      ? 0
      : calls * ctx.model.ttft_ms + uncached * msPerToken(ctx.model.prefill_tokens_per_second) + (c['output_tokens'] ?? 0) * perToken;
  const ttfts = turns.flatMap((t) => (t.ttft_ms === null ? [] : [t.ttft_ms]));
  const api = pipelineMs(sample);
  return {
    ...sample,
    turns,
    server_cpu_ms: ctx.serverCpuMs,
    api_overhead_ms: api,
    emit_ms: sample.stage_ms['emit'] ?? 0,
    model_excess_ms: sample.model_ms - analytic,
    residual_ms: sample.e2e_ms - sample.tool_ms - sample.model_ms - api,
    model_ms_analytic: analytic,
    floor_ms: ctx.rttMs === null ? null : analytic + calls * ctx.rttMs,
    ttft_ms_median: ttfts.length ? median(ttfts) : null,
  };
}

type OkRun = RunRecord & { ok: true };

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

export function summaryRow(g: readonly OkRun[]): SummaryRow {
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

/** The server's stage time outside the model: validate, render, safety, route, hops, store, post-inference, and event emission (`emit`). */
export function pipelineMs(r: { stage_ms: Record<string, number> }): number {
  return Object.entries(r.stage_ms).reduce((n, [k, v]) => (k === 'prefill' || k === 'decode' ? n : n + v), 0);
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

// ---------------------------------------------------------------- targets

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

const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

export function target1(overheadRuns: readonly OkRun[]): TargetLine {
  const ll = overheadGrowth(overheadRuns, 'long-lived');
  const ws = overheadGrowth(overheadRuns, 'ws');
  const http = overheadGrowth(overheadRuns, 'http');
  const stored = overheadGrowth(overheadRuns, 'http-stored');
  const name = TARGET_NAMES[1];
  const target = `${targetText(1)}; http growth reported`;
  if (!ll || !ws) {
    return { id: 1, name, figure: 'not measured', target, holds: null, verdict: 'not measured', note: 'the overhead phase did not run or failed', values: {} };
  }
  const show = (g: Growth) => `${g.design} ${f2(g.first_ms)} → ${f2(g.last_ms)} ms (×${f2(g.ratio)})`;
  const verdict = verdictOf(1, { growth_long_lived: ll.ratio, growth_ws: ws.ratio });
  const holds = verdict === 'holds';
  const figure = [ll, ws, http, stored].flatMap((g) => (g ? [show(g)] : [])).join('; ');
  const notes: string[] = [
    `like-for-like: continuation calls streaming the most common number of events, median of the first ${ll.window} vs the last ${ll.window}, each call the median of ${ll.runs} (long-lived) / ${ws.runs} (ws) runs, instant model; the last call's prompt is ${ws.prompt_tokens_last ?? '?'} tokens`,
    `read literally (last call vs first call, which includes the initial full render): long-lived ×${f2(ll.literal_ratio)}, ws ×${f2(ws.literal_ratio)}${http ? `, http ×${f2(http.literal_ratio)}` : ''}`,
    `server pipeline spans per call over the same windows: ${[ll, ws, http, stored].flatMap((g) => (g ? [`${g.design} ${f2(g.pipeline_first_ms)} → ${f2(g.pipeline_last_ms)} ms`] : [])).join(', ')}`,
    `server→client bytes per call: ${[ll, ws].map((g) => `${g.design} ${Math.round(g.bytes_in_first)} → ${Math.round(g.bytes_in_last)}`).join(', ')}`,
  ];
  if (passes(spec('growth_long_lived'), ll.ratio) === false) {
    notes.push(
      'long-lived grows: each pause sends `response.done` with a snapshot of the whole Response (instructions, tools and every output item of the run so far), so what is serialised, sent and parsed per call grows with the run; sending only the pending calls in response.done would keep it flat',
    );
  }
  if (passes(spec('growth_ws'), ws.ratio) === false) notes.push('ws grows: see the server pipeline spans and bytes per call above');
  return {
    id: 1,
    name,
    figure,
    target,
    holds,
    verdict,
    note: notes.join('; '),
    values: {
      long_lived_ratio: ll.ratio,
      ws_ratio: ws.ratio,
      http_ratio: http?.ratio ?? null,
      http_stored_ratio: stored?.ratio ?? null,
      long_lived_literal_ratio: ll.literal_ratio,
      ws_literal_ratio: ws.literal_ratio,
      http_literal_ratio: http?.literal_ratio ?? null,
    },
  };
}

export function target2(summary: readonly SummaryRow[], rttMs: number | null, gridRuns: readonly OkRun[] = [], speed = 1000): TargetLine {
  const name = fill(TARGET_NAMES[2], speed);
  const target = targetText(2);
  const row = (d: ClientProtocol) => summary.find((r) => r.design === d && r.tokens_per_second === speed && r.tool_factor === 0);
  const ll = row('long-lived');
  const ws = row('ws');
  if (!ll || !ws || ll.floor_ms_median === null || ws.floor_ms_median === null) {
    return { id: 2, name, figure: 'not measured', target, holds: null, verdict: 'not measured', note: `needs the grid at ${speed} tokens/s with tool factor 0 and a loopback RTT`, values: {} };
  }
  const over = (r: SummaryRow) => r.e2e_ms_median / r.floor_ms_median! - 1;
  const a = over(ll);
  const b = over(ws);
  const verdict = verdictOf(2, { floor_long_lived: a * 100, floor_ws: b * 100 });
  const holds = verdict === 'holds';
  const mine = (d: ClientProtocol) => gridRuns.filter((r) => r.design === d && r.model.tokens_per_second === speed && r.tool_factor === 0);
  // Where the overhead sits: the first call of each user turn pays the full pre-inference work.
  const startShare = (d: ClientProtocol) => {
    const runs = mine(d);
    if (!runs.length) return null;
    const starts = median(runs.map((r) => r.turns.filter((t, i) => i === 0 || r.turns[i - 1]!.user_turn !== t.user_turn).reduce((n, t) => n + t.overhead_ms, 0)));
    const all = median(runs.map((r) => r.turns.reduce((n, t) => n + t.overhead_ms, 0)));
    return { starts, all };
  };
  const lateness = (d: ClientProtocol) => {
    const runs = mine(d);
    return runs.length ? median(runs.map((r) => r.model_ms - r.model_ms_analytic)) : null;
  };
  const s = startShare('long-lived');
  const late = lateness('long-lived');
  const notes = [
    `floor = model time from the settings and the run's token counts + ${ll.model_calls} × loopback RTT ${rttMs === null ? '?' : f2(rttMs)} ms; medians of ${ll.runs} runs of ${ll.model_calls} model calls`,
    `long-lived: API overhead ${f1(ll.api_overhead_ms_median)} ms (${pct(ll.api_overhead_share)} of e2e)` +
      (s ? `, of which ${f1(s.starts)} ms in the first call of each user turn (the full render of the whole prompt; the long-lived protocol re-sends the whole conversation at a new user turn)` : '') +
      (late !== null ? `; the simulated model's timer lateness adds ${f1(late)} ms (model spans over the floor's model time)` : ''),
    `ws: API overhead ${f1(ws.api_overhead_ms_median)} ms (${pct(ws.api_overhead_share)})`,
  ];
  if (!holds && ll.model_calls < 20) notes.push(`with only ${ll.model_calls} model calls the one-off first-call work is not amortised: --full replays the whole run`);
  return {
    id: 2,
    name,
    figure: `long-lived ${f1(ll.e2e_ms_median)} ms vs floor ${f1(ll.floor_ms_median!)} ms (+${pct(a)}); ws ${f1(ws.e2e_ms_median)} ms vs ${f1(ws.floor_ms_median!)} ms (+${pct(b)})`,
    target,
    holds,
    verdict,
    note: notes.join('; '),
    values: { long_lived_over_floor: a, ws_over_floor: b, model_calls: ll.model_calls },
  };
}

export function target3(stream: StreamPhase | null): TargetLine {
  const name = TARGET_NAMES[3];
  const target = `${targetText(3)}; 100 streams reported against raw ws`;
  if (!stream) return { id: 3, name, figure: 'not measured', target, holds: null, verdict: 'not measured', note: 'the stream phase did not run or failed', values: {} };
  const s = stream.single;
  const c = stream.concurrent;
  const dev = s.client_rate / stream.tokens_per_second - 1;
  const lost = Math.max(0, s.tokens - s.deltas);
  const verdict = verdictOf(3, { deltas_lost: lost, rate_deviation: dev * 100 });
  const share = c.events_per_second / c.raw_frames_per_second;
  const notes = [
    `server-side rate ${Math.round(s.server_rate)} tokens/s`,
    `100 streams: ${Math.round(c.events_per_second)} events/s delivered (demanded ${Math.round(c.demanded_events_per_second)}), raw ws ${Math.round(c.raw_frames_per_second)} frames/s of ${c.frame_bytes} B from one process to the same client (${pct(share)} of raw)`,
  ];
  if (s.deltas !== s.tokens) notes.push(`${s.deltas} deltas for ${s.tokens} tokens`);
  if (passes(spec('rate_deviation'), dev * 100) === false) notes.push('the client saw the stream off its rate: a busy event loop (server or client) delays deltas');
  return {
    id: 3,
    name,
    figure: `${Math.round(s.client_rate)} deltas/s for ${s.tokens} tokens (${dev >= 0 ? '+' : ''}${pct(dev)}), ${lost} lost; ${c.streams} streams ${Math.round(c.events_per_second)} events/s vs raw ${Math.round(c.raw_frames_per_second)} frames/s`,
    target,
    holds: verdict === 'holds',
    verdict,
    note: notes.join('; '),
    values: { client_rate: s.client_rate, deviation: dev, deltas_lost: lost, one_delta_per_token: s.deltas === s.tokens, events_per_second: c.events_per_second, raw_frames_per_second: c.raw_frames_per_second },
  };
}

export function target4(paused: PausedPhase | null): TargetLine {
  const name = TARGET_NAMES[4];
  const target = targetText(4);
  if (!paused) return { id: 4, name, figure: 'not measured', target, holds: null, verdict: 'not measured', note: 'the paused phase did not run or failed', values: {} };
  const kb = (b: number) => `${(b / 1024).toFixed(1)} KiB`;
  const complete = paused.paused === paused.runs && paused.resumed === paused.runs;
  return {
    id: 4,
    name,
    figure: `${paused.paused}/${paused.runs} paused at once, ${paused.resumed} resumed: ${kb(paused.rss_bytes_per_run)} RSS and ${kb(paused.heap_bytes_per_run)} heap per paused run; append → resume p50 ${f2(paused.append_to_resume_ms.p50)} ms, p99 ${f2(paused.append_to_resume_ms.p99)} ms`,
    target,
    holds: null,
    verdict: verdictOf(4, { paused_rss: paused.rss_bytes_per_run / 1024, resume_p99: paused.append_to_resume_ms.p99 }),
    note: `each paused run holds one WebSocket connection, its session and its rendered context (${paused.prompt_tokens_per_run ?? '?'} prompt tokens); ${paused.gc_forced ? 'heap measured after a forced GC' : 'no forced GC (node without --expose-gc)'}; resumes one at a time while the others stay paused${complete ? '' : `; NOT every run paused and resumed (${paused.paused} paused, ${paused.resumed} resumed of ${paused.runs})`}`,
    values: { rss_bytes_per_run: paused.rss_bytes_per_run, heap_bytes_per_run: paused.heap_bytes_per_run, p50: paused.append_to_resume_ms.p50, p99: paused.append_to_resume_ms.p99, complete },
  };
}

export function targetLineText(t: TargetLine): string {
  const verdict = t.verdict ?? (t.holds === null ? 'not measured' : t.holds ? 'holds' : 'does not hold');
  return `target ${t.id}: ${t.figure} vs ${t.target} → ${verdict}${verdict === 'does not hold' || verdict === 'not measured' ? ` (${t.note})` : ''}`;
}
