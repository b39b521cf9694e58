/**
 * The `llr bench` runner: spawns a server process per configuration (model
 * speed, switch turned off) with the replay policy loaded from the exact
 * workload this process replays, drives the designs from this process,
 * interleaved (the order rotates every repetition), and writes results.json
 * after every run, then the report.
 *
 * Phases, in order: the loopback RTT; the grid (designs × speeds × reps);
 * the overhead phase (instant model, whole workload: per-call overhead as the
 * conversation grows); ablations (ws, each switch off alone, instant model);
 * streaming; paused runs. A failed run is recorded and the bench goes on; a
 * crashed server or a phase past its deadline fails that phase (stream,
 * paused) or the bench (replay phases), keeping what was measured.
 *
 * Returns the outcome; the CLI decides the exit code. On a signal the CLI
 * calls `interruptBenches()` (partial results kept, processes stopped).
 * Each phase is its own function over the run's `BenchSession` (session.ts).
 */
import { makeDirs } from '../make-dirs.js';
import os from 'node:os';
import { join, resolve } from 'node:path';
import type { ClientProtocol } from '../client/index.js';
import { DEFAULT_SWITCHES } from '../engine/services.js';
import { deadline, type ServerProcess } from './guard.js';
import { hiddenTokensPerCall } from './derive.js';
import { loopbackRtt, pausedPhase, pausedWorkload, streamPhase, streamWorkload } from './phases.js';
import { spawnFrameServer } from './processes.js';
import { Progress } from './progress.js';
import { ResultsFile, type Machine, type Results } from './results.js';
import { BenchSession, rotate } from './session.js';
import { writeReport } from './report.js';
import { writeWorkloadJson } from '../workload/format.js';
import { summarizeWorkload } from '../workload/load.js';
import { callsOf, modelCallCount } from '../workload/replayable.js';
import type { Workload } from '../workload/types.js';
import { truncateWorkload } from './workload-prep.js';

export type PhaseName = 'grid' | 'overhead' | 'ablations' | 'stream' | 'paused';
export const PHASES: readonly PhaseName[] = ['grid', 'overhead', 'ablations', 'stream', 'paused'];

export interface BenchConfig {
  mode: 'quick' | 'full';
  workload: Workload;
  out: string;
  /** Grid workload: the first N model calls; null = all. */
  gridCalls: number | null;
  speeds: number[];
  reps: number;
  designs: ClientProtocol[];
  /** Repetitions per design in the overhead phase. */
  overheadReps: Record<ClientProtocol, number>;
  ablationReps: number;
  toolFactor: number;
  ttftMs: number;
  prefillTps: number;
  hopMs: number;
  hops: number;
  phases: ReadonlySet<PhaseName>;
  stream: { tokensPerSecond: number; longTokens: number; shortTokens: number; streams: number };
  paused: { runs: number };
  /** Cap for one replay run; null: derived from the workload and speed. */
  runTimeoutMs: number | null;
  /** The servers' response store: a SQLite file per server in the output directory (as `llr serve` defaults to), or in memory. */
  store: 'sqlite' | 'memory';
  /** Target 2's model speed, tokens/s (default 1000; must be one of `speeds` to be measured). */
  targetSpeed: number;
  /** The cost profile's name (profiles.ts); its hops are in hopMs/hops/callHopMs/callHops. */
  profile: string;
  /** Remote hops paid before every model call, by every design (the profile's per-call services), and their latency. */
  callHopMs: number;
  callHops: number;
}

export interface BenchOutcome {
  results: Results;
  ok: boolean;
}

function machine(): Machine {
  return {
    cpus: os.cpus().length,
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    memory_gb: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

/** Benches in flight in this process, each with what to do when the process is interrupted. */
const inFlight = new Set<BenchSession>();

/** On SIGINT/SIGTERM (the CLI's handler): every bench in flight keeps its partial results and stops its servers. */
export function interruptBenches(): void {
  for (const s of inFlight) s.interrupt();
}

/** The switches the ablations turn off: those on by default (overlap_persist is off: it trades durability, not an optimization to ablate). */
function ablatedSwitches(): string[] {
  return Object.entries(DEFAULT_SWITCHES)
    .filter(([, on]) => on)
    .map(([name]) => name);
}

/** Progress steps: the loopback RTT, each phase's warm-ups and measured runs. */
function stepCount(cfg: BenchConfig, switches: readonly string[]): number {
  const has = (p: PhaseName) => cfg.phases.has(p);
  return (
    1 +
    (has('grid') ? cfg.speeds.length * (1 + cfg.reps * cfg.designs.length) : 0) +
    (has('overhead') ? 1 + cfg.designs.reduce((n, d) => n + cfg.overheadReps[d], 0) : 0) +
    (has('ablations') ? (switches.length + 1) * (1 + cfg.ablationReps) : 0) +
    (has('stream') ? 1 : 0) +
    (has('paused') ? 1 : 0)
  );
}

function initialResults(cfg: BenchConfig, grid: Workload, whole: Workload): Results {
  const full = cfg.workload;
  return {
    schema: 'llr-bench/1',
    status: 'running',
    error: null,
    started_at: new Date().toISOString(),
    finished_at: null,
    machine: machine(),
    config: {
      mode: cfg.mode,
      grid_model_calls: modelCallCount(grid),
      speeds: cfg.speeds,
      reps: cfg.reps,
      designs: cfg.designs,
      overhead_reps: cfg.overheadReps,
      ablation_reps: cfg.ablationReps,
      tool_factor: cfg.toolFactor,
      store: cfg.store,
      ttft_ms: cfg.ttftMs,
      prefill_tokens_per_second: cfg.prefillTps,
      hop_ms: cfg.hopMs,
      hops: cfg.hops,
      profile: cfg.profile,
      call_hop_ms: cfg.callHopMs,
      call_hops: cfg.callHops,
      target_speed: cfg.targetSpeed,
      phases: [...cfg.phases],
      stream: cfg.stream,
      paused: cfg.paused,
    },
    workload: {
      name: full.name,
      source: full.source,
      grid_model_calls: modelCallCount(grid),
      overhead_model_calls: modelCallCount(whole),
      summary: { ...summarizeWorkload(full) },
    },
    loopback_rtt_ms: null,
    runs: [],
    summary: [],
    overhead_summary: [],
    ablations: { baseline: null, rows: [] },
    stream: null,
    paused: null,
    targets: [],
    phase_errors: [],
    phase_seconds: {},
  };
}

async function loopbackPhase(s: BenchSession): Promise<void> {
  s.bar.step('loopback round trip (raw ws echo)');
  s.frames = await deadline(spawnFrameServer(), 30_000, 'starting the frame server');
  s.results.loopback_rtt_ms = await deadline(loopbackRtt(s.frames.url), 30_000, 'the loopback RTT');
  s.write();
  s.bar.tick(`p50 ${s.results.loopback_rtt_ms.p50.toFixed(3)} ms`);
}

async function gridPhase(s: BenchSession, grid: Workload): Promise<void> {
  for (const tps of s.cfg.speeds) {
    await s.withPlanned(`grid:${tps}`, async (server) => {
      await s.warm(server, grid, tps, `grid ${tps} tok/s`);
      await s.replayPhase('grid', server, grid, tps, s.interleaved(() => s.cfg.reps));
    });
    s.save();
  }
  s.lap('grid');
}

async function overheadPhase(s: BenchSession, whole: Workload): Promise<void> {
  await s.withPlanned('overhead', async (server) => {
    await s.warm(server, whole, null, 'overhead (instant model)');
    await s.replayPhase('overhead', server, whole, null, s.interleaved((d) => s.cfg.overheadReps[d]));
  });
  s.save();
  s.lap('overhead');
}

/**
 * Every configuration (the baseline with every switch on, and each switch
 * off) has its own warmed server; the repetitions are interleaved across
 * them, rotating, so a drift in the machine's speed spreads over all.
 */
async function ablationPhase(s: BenchSession, whole: Workload, switches: readonly string[]): Promise<void> {
  const configs = [null, ...switches];
  const servers = new Map<string | null, ServerProcess>();
  try {
    for (const name of configs) {
      const what = name === null ? 'ablation baseline (all switches on)' : `ablation --off ${name}`;
      const server = await s.take(`ablation:${name ?? ''}`);
      servers.set(name, server);
      await s.warm(server, whole, null, what, s.cfg.mode === 'quick');
    }
    const hidden = hiddenTokensPerCall(whole);
    for (let rep = 0; rep < s.cfg.ablationReps; rep++) {
      for (const name of rotate(configs, rep)) {
        await s.measure(servers.get(name)!, whole, { phase: 'ablation', design: 'ws', model: s.modelOf(null), rep, tool_factor: 0, off: name }, hidden);
      }
    }
  } finally {
    for (const server of servers.values()) await s.stop(server);
  }
  s.save();
  s.lap('ablations');
}

/**
 * A phase with its own workload and server whose failure (a crash, a
 * deadline) is recorded in `phase_errors` and does not stop the bench.
 */
async function sidePhase<T>(s: BenchSession, phase: 'stream' | 'paused', label: string, run: (server: ServerProcess) => Promise<T>, keep: (result: T) => void): Promise<void> {
  s.bar.step(label);
  try {
    const server = s.take(phase);
    // A server started ahead must be up (and idle) before the phase measures.
    await s.settle();
    keep(await s.withPlanned(phase, () => server.then(run)));
  } catch (err) {
    s.results.phase_errors.push({ phase, error: (err as Error).message });
    s.bar.log(`${phase} phase failed: ${(err as Error).message}`);
  }
  s.save();
  s.bar.tick();
  s.lap(phase);
}

function streamStep(s: BenchSession, sw: ReturnType<typeof streamWorkload>): Promise<void> {
  const cfg = s.cfg.stream;
  return sidePhase(
    s,
    'stream',
    `streaming at ${cfg.tokensPerSecond} tok/s`,
    (server) => {
      if (!s.frames) throw new Error('the frame server is not running');
      return streamPhase(server, s.frames, { ...cfg, longTokens: sw.longTokens, shortTokens: sw.shortTokens, timeoutMs: 120_000 });
    },
    (r) => (s.results.stream = r),
  );
}

function pausedStep(s: BenchSession, pw: Workload): Promise<void> {
  return sidePhase(
    s,
    'paused',
    `${s.cfg.paused.runs} paused long-lived runs`,
    (server) => pausedPhase(server, pw, { runs: s.cfg.paused.runs, timeoutMs: 120_000 }),
    (r) => (s.results.paused = r),
  );
}

/** The run's status from its runs and phases: complete, or failed with what failed. */
function settle(results: Results): boolean {
  results.status = results.runs.some((r) => !r.ok) || results.phase_errors.length ? 'failed' : 'complete';
  if (results.status === 'complete') return true;
  results.error = `${results.runs.filter((r) => !r.ok).length} run(s) and ${results.phase_errors.length} phase(s) failed`;
  return false;
}

export async function runBench(cfg: BenchConfig, progress?: Progress): Promise<BenchOutcome> {
  const out = resolve(cfg.out);
  makeDirs(out);
  const full = cfg.workload;
  const grid = cfg.gridCalls === null ? truncateWorkload(full, modelCallCount(full)) : truncateWorkload(full, cfg.gridCalls);
  const whole = truncateWorkload(full, modelCallCount(full));
  const gridFile = join(out, 'workload-grid.json');
  const wholeFile = join(out, 'workload-whole.json');
  writeWorkloadJson(gridFile, grid);
  writeWorkloadJson(wholeFile, whole);

  const switches = ablatedSwitches();
  const has = (p: PhaseName) => cfg.phases.has(p);
  const maxOverheadReps = Math.max(0, ...cfg.designs.map((d) => cfg.overheadReps[d]));
  const bar = progress ?? new Progress(stepCount(cfg, switches));
  const results = initialResults(cfg, grid, whole);
  const file = new ResultsFile(join(out, 'results.json'), results);
  file.write();
  const s = new BenchSession(cfg, out, results, file, bar);

  // Written up front: a server started ahead of its phase reads its file at start.
  const sw = streamWorkload(cfg.stream.longTokens, cfg.stream.shortTokens);
  const swFile = join(out, 'workload-stream.json');
  const pw = pausedWorkload();
  const pwFile = join(out, 'workload-paused.json');
  if (has('stream')) writeWorkloadJson(swFile, sw.workload);
  if (has('paused')) writeWorkloadJson(pwFile, pw);
  // Every server the selected phases need, in the order they take them (session.ts planServers).
  const order = [
    ...(has('grid') ? cfg.speeds.map((tps) => `grid:${tps}`) : []),
    ...(has('overhead') && maxOverheadReps > 0 ? ['overhead'] : []),
    ...(has('ablations') && cfg.ablationReps > 0 ? [null, ...switches].map((name) => `ablation:${name ?? ''}`) : []),
    ...(has('stream') ? ['stream'] : []),
    ...(has('paused') ? ['paused'] : []),
  ];
  // A recorded run's servers take what the run sent: a default limit it exceeds is raised to fit.
  const fit = fitLimits(whole);
  s.planServers(order, (key) => {
    const [kind, arg = ''] = key.split(':') as [string, string?];
    if (kind === 'grid') return s.start(`llr serve at ${arg} tok/s`, ['--workload', gridFile, '--tokens-per-second', arg, ...fit]);
    if (kind === 'overhead') return s.start('llr serve --instant', ['--workload', wholeFile, '--instant', ...fit]);
    if (kind === 'ablation') return s.start(`llr serve --instant${arg ? ` --off ${arg}` : ''}`, ['--workload', wholeFile, '--instant', ...(arg ? ['--off', arg] : []), ...fit]);
    if (kind === 'stream') return s.start('llr serve (stream phase)', ['--workload', swFile, '--tokens-per-second', String(cfg.stream.tokensPerSecond)]);
    return s.start('llr serve (paused phase)', ['--workload', pwFile, '--instant'], ['--expose-gc']);
  });

  let ok = true;
  inFlight.add(s);
  try {
    await loopbackPhase(s);
    s.lap('loopback');
    if (has('grid')) await gridPhase(s, grid);
    if (has('overhead') && maxOverheadReps > 0) await overheadPhase(s, whole);
    if (has('ablations') && cfg.ablationReps > 0) await ablationPhase(s, whole, switches);
    if (has('stream')) await streamStep(s, sw);
    if (has('paused')) await pausedStep(s, pw);
    ok = settle(results);
  } catch (err) {
    ok = false;
    results.status = 'failed';
    results.error = (err as Error).message;
  } finally {
    inFlight.delete(s);
    await s.close();
    results.finished_at = new Date().toISOString();
    s.save();
    writeReport(out, results);
    bar.finish();
  }
  return { results, ok };
}

/**
 * Server flags a workload needs beyond the defaults (docs/reliability.md):
 * more tools than one request may list (--max-tools, 128) or more parallel
 * calls in one model call than one pause waits for (--max-pending-calls,
 * 128). Empty for any workload within them, so the bench's servers stay the
 * defaults' unless the recording itself went past them.
 */
export function fitLimits(w: Workload): string[] {
  const args: string[] = [];
  if (w.tools.length > 128) args.push('--max-tools', String(w.tools.length));
  // A loop, not Math.max(...): a spread of 130k+ model calls overflows the stack.
  let calls = 0;
  for (const u of w.userTurns) for (const t of u.modelTurns) calls = Math.max(calls, callsOf(t).length);
  if (calls > 128) args.push('--max-pending-calls', String(calls));
  return args;
}
