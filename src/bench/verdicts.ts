/**
 * The four target lines: each target's figure, verdict (against the
 * thresholds in targets.ts) and the notes that explain it, from the
 * summaries and the stream and paused phases; `recompute` fills a
 * Results' summaries, ablation rows and target lines from its runs. Pure: no
 * I/O, no clocks. Used by the runner, `llr bench --report` and the tests.
 */
import type { ClientProtocol } from '../client/index.js';
import { f1, f2, kib, pct } from './format.js';
import type { PausedPhase, Results, StreamPhase, SummaryRow, TargetLine } from './results.js';
import { median } from './stats.js';
import { ablationRows, okRuns, overheadGrowth, summarize, type Growth, type OkRun } from './summaries.js';
import { TARGET_NAMES, fill, passes, spec, targetText, verdictOf } from './targets.js';

export function target1(overheadRuns: readonly OkRun[]): TargetLine {
  const ll = overheadGrowth(overheadRuns, 'long-lived');
  const ws = overheadGrowth(overheadRuns, 'ws');
  const http = overheadGrowth(overheadRuns, 'http');
  const stored = overheadGrowth(overheadRuns, 'http-stored');
  const name = TARGET_NAMES[1];
  const target = `${targetText(1)}; http growth reported`;
  if (!ll || !ws) {
    // Runs of both designs that measured no growth: their workload has no continuation call (a run of one model call),
    // not a phase that did not run (outside attack atk38 F6).
    const ran = (['long-lived', 'ws'] as const).every((d) => overheadRuns.some((r) => r.design === d));
    const calls = overheadRuns[0]?.turns.length ?? 0;
    const note = ran
      ? `the overhead phase ran, but its workload has ${calls} model call${calls === 1 ? '' : 's'} and no continuation call (a call after a tool's output) to compare over the run`
      : 'the overhead phase did not run or failed';
    return { id: 1, name, figure: 'not measured', target, holds: null, verdict: 'not measured', note, values: {} };
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
      'long-lived grows: each pause sends `response.done` with a snapshot of the whole Response (instructions, tools and every output item of the run so far) until its output passes --max-pause-snapshot-bytes (256 KiB), so what is serialised, sent and parsed per call grows with the run up to there; --on lean_pause_event sends only what a client needs from the first pause',
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
    // Say what is missing: a grid without one of the two designs read as if the speed or the RTT were.
    const absent = (['long-lived', 'ws'] as const).filter((d) => !row(d));
    const note = absent.length === 1
      ? `needs ${absent[0]} in the grid at ${speed} tokens/s with tool factor 0 (--designs)`
      : `needs the grid at ${speed} tokens/s with tool factor 0 and a loopback RTT`;
    return { id: 2, name, figure: 'not measured', target, holds: null, verdict: 'not measured', note, values: {} };
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
  const complete = paused.paused === paused.runs && paused.resumed === paused.runs;
  return {
    id: 4,
    name,
    figure: `${paused.paused}/${paused.runs} paused at once, ${paused.resumed} resumed: ${kib(paused.rss_bytes_per_run)} RSS and ${kib(paused.heap_bytes_per_run)} heap per paused run; append → resume p50 ${f2(paused.append_to_resume_ms.p50)} ms, p99 ${f2(paused.append_to_resume_ms.p99)} ms`,
    target,
    holds: null,
    verdict: verdictOf(4, { paused_rss: paused.rss_bytes_per_run / 1024, resume_p99: paused.append_to_resume_ms.p99 }),
    note: `each paused run holds one WebSocket connection, its session and its rendered context (${paused.prompt_tokens_per_run ?? '?'} prompt tokens); ${paused.gc_forced ? 'heap measured after a forced GC' : 'no forced GC (node without --expose-gc)'}; resumes one at a time while the others stay paused${complete ? '' : `; NOT every run paused and resumed (${paused.paused} paused, ${paused.resumed} resumed of ${paused.runs})`}`,
    values: { rss_bytes_per_run: paused.rss_bytes_per_run, heap_bytes_per_run: paused.heap_bytes_per_run, p50: paused.append_to_resume_ms.p50, p99: paused.append_to_resume_ms.p99, complete },
  };
}

/** Summaries, ablation rows and targets from the runs and phases (also for `llr bench --report DIR`). */
export function recompute(results: Results): void {
  results.summary = summarize(results.runs, 'grid');
  results.overhead_summary = summarize(results.runs, 'overhead');
  const baselineRuns = okRuns(results.runs, 'ablation').filter((r) => r.off === null);
  results.ablations.baseline = baselineRuns.length ? summarize(baselineRuns, 'ablation')[0]! : null;
  results.ablations.rows = ablationRows(results.runs, results.ablations.baseline, baselineRuns);
  results.targets = [
    target1(okRuns(results.runs, 'overhead')),
    target2(results.summary, results.loopback_rtt_ms?.p50 ?? null, okRuns(results.runs, 'grid'), Number(results.config['target_speed'] ?? 1000)),
    target3(results.stream),
    target4(results.paused),
  ];
}
