/**
 * The shape of `DIR/results.json` and its writer. The file is rewritten
 * (atomically: temp file + rename) after every run and phase, so a bench that
 * fails or is interrupted keeps everything measured up to that point, with
 * `status` saying how it ended.
 *
 * Used by the runner (writes), the report (reads) and the tests. Types and
 * the writer only; the numbers are derived in derive.ts and summaries.ts.
 */
import { renameSync, writeFileSync } from 'node:fs';
import type { ClientProtocol } from '../client/index.js';
import type { RunSample, TurnSample } from './replay.js';

export type Phase = 'grid' | 'overhead' | 'ablation';

/** The simulated model a run was served by; `tokens_per_second: null` is the instant model. */
export interface ModelConfig {
  tokens_per_second: number | null;
  ttft_ms: number;
  prefill_tokens_per_second: number | null;
  hop_ms: number;
  hops: number;
}

export interface RunMeta {
  phase: Phase;
  design: ClientProtocol;
  model: ModelConfig;
  rep: number;
  tool_factor: number;
  /** Ablations: the switch turned off (`--off`); null otherwise. */
  off: string | null;
}

/** A turn with what derive.ts derives from it. */
export interface TurnRecord extends TurnSample {
  /** `done_ms` minus the call's prefill and decode spans: what the API and transport added. */
  overhead_ms: number;
  /** `first_output_ms` minus the hidden-reasoning decode before it: time to the model's first token. */
  ttft_ms: number | null;
}

export interface MeasuredRun extends Omit<RunSample, 'turns'> {
  turns: TurnRecord[];
  /** Server process CPU time (user + system) over the run, from `GET /llr/stats`. */
  server_cpu_ms: number;
  /**
   * The API's measured work: the sum of the server's stage spans outside the
   * model (validate, render, safety, route, hops, store, post-inference on the
   * critical path) and its event emission (`emit`). See `residual_ms`.
   */
  api_overhead_ms: number;
  /** The `emit` total alone (building, serialising and writing events). */
  emit_ms: number;
  /** model_ms − model_ms_analytic: timer lateness and the simulator's own bookkeeping (prefix-cache hashing, replay policy); not API work. */
  model_excess_ms: number;
  /**
   * e2e − tool_ms − model_ms − api_overhead_ms: what no span explains —
   * loopback I/O, the client's parsing and bookkeeping, the server's work
   * outside the spans (edge parsing, frame writes after the sink returned),
   * event-loop waits. So e2e = model_ms_analytic + model_excess_ms + tool_ms
   * + api_overhead_ms + residual_ms, exactly.
   */
  residual_ms: number;
  /** The model time the settings and the run's own token counts call for (no timer lateness). */
  model_ms_analytic: number;
  /** model_ms_analytic + one measured loopback round trip per model call; null when no RTT was measured. */
  floor_ms: number | null;
  ttft_ms_median: number | null;
}

export type RunRecord = RunMeta & ({ ok: true } & MeasuredRun | { ok: false; error: string });

export interface SummaryRow {
  design: ClientProtocol;
  /** null: the instant model (overhead phase). */
  tokens_per_second: number | null;
  tool_factor: number;
  runs: number;
  model_calls: number;
  e2e_ms_median: number;
  e2e_ms_min: number;
  e2e_ms_max: number;
  api_overhead_ms_median: number;
  api_overhead_ms_min: number;
  api_overhead_ms_max: number;
  /** api_overhead_ms_median / e2e_ms_median. */
  api_overhead_share: number;
  /** Bootstrap 95 % interval of the e2e median (seeded). */
  e2e_ms_ci: { lo: number; hi: number };
  /** (max − min) / median of e2e over the repetitions. */
  e2e_spread: number;
  emit_ms_median: number;
  model_excess_ms_median: number;
  residual_ms_median: number;
  model_ms_analytic_median: number;
  /** Bootstrap 95 % interval of the TTFT median (over all model calls of all runs). */
  ttft_ms_ci: { lo: number; hi: number };
  ttft_ms_median: number;
  model_ms_median: number;
  floor_ms_median: number | null;
  server_cpu_ms_median: number;
  client_bytes_sent_median: number;
  server_bytes_sent_median: number;
  /** Median over model calls and runs of the per-call overhead. */
  turn_overhead_ms_median: number;
  /** Median over runs of the server's pipeline stage time (every llr:timing stage but prefill and decode). */
  pipeline_ms_median: number;
}

export interface AblationRow {
  off: string;
  runs: number;
  e2e_ms_median: number;
  e2e_ms_min: number;
  e2e_ms_max: number;
  api_overhead_ms_median: number;
  /** Median e2e with the switch off minus the ws baseline's: what the switch saves (positive = it helps). */
  contribution_ms: number;
  contribution_share: number;
  /** The same for the server's pipeline stage time: less noisy than e2e, blind to work outside the stages. */
  pipeline_ms_median: number;
  pipeline_delta_ms: number;
  server_cpu_ms_median: number;
  /** Counters that differ from the baseline: [baseline, off]. */
  counters_changed: Record<string, [number, number]>;
}

export interface TargetLine {
  id: 1 | 2 | 3 | 4;
  name: string;
  /** The figure, as printed. */
  figure: string;
  target: string;
  /** true/false: every checked row passes / one fails; null: not measured, or a reported target. */
  holds: boolean | null;
  /** From the targets table (targets.ts); absent in results written before it existed. */
  verdict?: 'holds' | 'does not hold' | 'not measured' | 'reported';
  /** Why it does not hold and what would fix it, or what the figure rests on. */
  note: string;
  values: Record<string, number | string | boolean | null>;
}

export interface StreamPhase {
  tokens_per_second: number;
  single: {
    tokens: number;
    deltas: number;
    /** Deltas per second between the first and the last delta, on the client. */
    client_rate: number;
    /** Output tokens / (decode span + emission), on the server. */
    server_rate: number;
    delta_frame_bytes: number;
  };
  concurrent: {
    streams: number;
    tokens_per_stream: number;
    deltas: number;
    events: number;
    seconds: number;
    events_per_second: number;
    /** Delta events per second the design would carry if every stream kept its rate. */
    demanded_events_per_second: number;
    raw_frames: number;
    raw_seconds: number;
    raw_frames_per_second: number;
    frame_bytes: number;
  };
}

export interface PausedPhase {
  runs: number;
  paused: number;
  resumed: number;
  prompt_tokens_per_run: number | null;
  before: { rss: number; heapUsed: number; external: number };
  after: { rss: number; heapUsed: number; external: number };
  gc_forced: boolean;
  /** Runs opened and paused with the measured ones, then resumed first and timed apart (absent in older files: none). */
  warmup_runs?: number;
  /** Per run of all paused at once (the measured runs and the warm-up runs). */
  rss_bytes_per_run: number;
  heap_bytes_per_run: number;
  append_to_resume_ms: { n: number; p50: number; p99: number; max: number };
  /** The warm-up runs' resumes (the server's first), when there were any. */
  cold_append_to_resume_ms?: { n: number; p50: number; p99: number; max: number };
  open_ms: number;
}

export interface Machine {
  cpus: number;
  cpu: string;
  memory_gb: number;
  node: string;
  platform: string;
  /** 1-, 5- and 15-minute load averages when the bench started: more than the CPU count means other work was competing. */
  loadavg?: number[];
}

export interface Results {
  schema: 'llr-bench/1';
  status: 'running' | 'complete' | 'failed';
  error: string | null;
  started_at: string;
  finished_at: string | null;
  machine: Machine;
  config: Record<string, unknown>;
  workload: { name: string; source: string; grid_model_calls: number; overhead_model_calls: number; summary: Record<string, unknown> };
  loopback_rtt_ms: { n: number; p50: number; p99: number } | null;
  runs: RunRecord[];
  /** Per design and model speed (grid phase). */
  summary: SummaryRow[];
  /** Per design, instant model, whole workload (overhead phase). */
  overhead_summary: SummaryRow[];
  ablations: { baseline: SummaryRow | null; rows: AblationRow[] };
  stream: StreamPhase | null;
  paused: PausedPhase | null;
  targets: TargetLine[];
  /** Phases that failed (the rest of the bench went on), with the message. */
  phase_errors: Array<{ phase: string; error: string }>;
  /** Wall time of each phase that ran, seconds (loopback, grid, overhead, ablations, stream, paused); absent in older files. */
  phase_seconds?: Record<string, number>;
}

/** Writes the results file after every change; never leaves a half-written file. */
export class ResultsFile {
  constructor(
    readonly path: string,
    readonly results: Results,
  ) {}

  write(): void {
    const tmp = `${this.path}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(this.results, null, 1)}\n`);
    renameSync(tmp, this.path);
  }
}
