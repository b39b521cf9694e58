/**
 * Per-run derivation: from one replay's raw sample to the run's measured
 * figures (per-call overhead and time to first token, API overhead, model
 * time against its analytic value, the floor). Pure: no I/O, no clocks.
 * Used by the runner as each run ends; the summaries (summaries.ts) and
 * the target lines (verdicts.ts) read what it derives. Definitions (also in
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
import { visibleTokens } from '../model/policies.js';
import type { RunSample } from './replay.js';
import type { MeasuredRun, ModelConfig, TurnRecord } from './results.js';
import { median } from './stats.js';
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

/** The server's stage time outside the model: validate, render, safety, route, hops, store, post-inference, and event emission (`emit`). */
export function pipelineMs(r: { stage_ms: Record<string, number> }): number {
  return Object.entries(r.stage_ms).reduce((n, [k, v]) => (k === 'prefill' || k === 'decode' ? n : n + v), 0);
}

