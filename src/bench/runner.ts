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
 */
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import type { ClientProtocol } from '../client/index.js';
import { DEFAULT_SWITCHES } from '../engine/services.js';
import { ServerCrashedError, ServerProcess, cpuMs, deadline, type ServerStats } from './guard.js';
import { ablationRows, deriveRun, hiddenTokensPerCall, msPerToken, okRuns, summarize, target1, target2, target3, target4, targetLineText } from './measure.js';
import { loopbackRtt, pausedPhase, pausedWorkload, streamPhase, streamWorkload } from './phases.js';
import { spawnFrameServer, spawnServer, type Child } from './processes.js';
import { Progress } from './progress.js';
import { SpawnAhead } from './spawn-ahead.js';
import { replayRun } from './replay.js';
import { writeReport } from './report.js';
import { ResultsFile, type Machine, type ModelConfig, type Phase, type RunMeta, type RunRecord, type Results } from './results.js';
import { writeWorkloadJson } from '../workload/format.js';
import { summarizeWorkload } from '../workload/load.js';
import { flatModelTurns, modelCallCount } from '../workload/replayable.js';
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

function rotate<T>(xs: readonly T[], by: number): T[] {
  const k = xs.length ? by % xs.length : 0;
  return [...xs.slice(k), ...xs.slice(0, k)];
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

export async function runBench(cfg: BenchConfig, progress?: Progress): Promise<BenchOutcome> {
  const out = resolve(cfg.out);
  mkdirSync(out, { recursive: true });
  const full = cfg.workload;
  const grid = cfg.gridCalls === null ? truncateWorkload(full, modelCallCount(full)) : truncateWorkload(full, cfg.gridCalls);
  const whole = truncateWorkload(full, modelCallCount(full));
  const gridFile = join(out, 'workload-grid.json');
  const wholeFile = join(out, 'workload-whole.json');
  writeWorkloadJson(gridFile, grid);
  writeWorkloadJson(wholeFile, whole);
  const sw = streamWorkload(cfg.stream.longTokens, cfg.stream.shortTokens);
  const swFile = join(out, 'workload-stream.json');
  const pw = pausedWorkload();
  const pwFile = join(out, 'workload-paused.json');
  // Written up front: a server started ahead of its phase reads its file at start.
  if (cfg.phases.has('stream')) writeWorkloadJson(swFile, sw.workload);
  if (cfg.phases.has('paused')) writeWorkloadJson(pwFile, pw);

  // Ablations turn off what is on by default (overlap_persist is off: it trades durability, not an optimization to ablate).
  const switches = Object.entries(DEFAULT_SWITCHES).filter(([, on]) => on).map(([name]) => name);
  const has = (p: PhaseName) => cfg.phases.has(p);
  const maxOverheadReps = Math.max(0, ...cfg.designs.map((d) => cfg.overheadReps[d]));
  const total =
    1 +
    (has('grid') ? cfg.speeds.length * (1 + cfg.reps * cfg.designs.length) : 0) +
    (has('overhead') ? 1 + cfg.designs.reduce((n, d) => n + cfg.overheadReps[d], 0) : 0) +
    (has('ablations') ? (switches.length + 1) * (1 + cfg.ablationReps) : 0) +
    (has('stream') ? 1 : 0) +
    (has('paused') ? 1 : 0);
  const bar = progress ?? new Progress(total);

  const results: Results = {
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
  const file = new ResultsFile(join(out, 'results.json'), results);
  file.write();

  let frames: Child | null = null;
  let runNo = 0;
  const servers = new Set<ServerProcess>();
  let serverNo = 0;
  const dbFiles: string[] = [];
  const start = async (what: string, args: string[], nodeArgs: string[] = []): Promise<ServerProcess> => {
    // --instant sets the model's knobs itself; passing them too would override it.
    const knobs = args.includes('--instant') ? [] : ['--ttft-ms', String(cfg.ttftMs), '--prefill-tps', String(cfg.prefillTps)];
    const db = join(out, `llr-server-${++serverNo}.sqlite`);
    if (cfg.store === 'sqlite') dbFiles.push(db, `${db}-wal`, `${db}-shm`);
    const callHops = cfg.callHops > 0 && cfg.callHopMs > 0 ? ['--call-hop-ms', String(cfg.callHopMs), '--call-hops', String(cfg.callHops)] : [];
    const common = [...knobs, '--hop-ms', String(cfg.hopMs), '--hops', String(cfg.hops), ...callHops, '--store', cfg.store === 'sqlite' ? db : 'memory'];
    const s = new ServerProcess(await deadline(spawnServer([...common, ...args], { nodeArgs }), 30_000, `starting ${what}`), what);
    servers.add(s);
    return s;
  };
  const stop = async (s: ServerProcess) => {
    servers.delete(s);
    await s.stop();
  };

  // Every server the selected phases need, in the order they need them; each
  // warm-up starts the next two (spawn-ahead.ts), and settles them before it returns.
  const ablationConfigs = [null, ...switches];
  const order = [
    ...(has('grid') ? cfg.speeds.map((tps) => `grid:${tps}`) : []),
    ...(has('overhead') && maxOverheadReps > 0 ? ['overhead'] : []),
    ...(has('ablations') && cfg.ablationReps > 0 ? ablationConfigs.map((name) => `ablation:${name ?? ''}`) : []),
    ...(has('stream') ? ['stream'] : []),
    ...(has('paused') ? ['paused'] : []),
  ];
  const ahead = new SpawnAhead<ServerProcess>((key) => {
    const [kind, arg = ''] = key.split(':') as [string, string?];
    if (kind === 'grid') return start(`llr serve at ${arg} tok/s`, ['--workload', gridFile, '--tokens-per-second', arg]);
    if (kind === 'overhead') return start('llr serve --instant', ['--workload', wholeFile, '--instant']);
    if (kind === 'ablation') return start(`llr serve --instant${arg ? ` --off ${arg}` : ''}`, ['--workload', wholeFile, '--instant', ...(arg ? ['--off', arg] : [])]);
    if (kind === 'stream') return start('llr serve (stream phase)', ['--workload', swFile, '--tokens-per-second', String(cfg.stream.tokensPerSecond)]);
    return start('llr serve (paused phase)', ['--workload', pwFile, '--instant'], ['--expose-gc']);
  });
  let nextUp = 0;
  const take = (key: string) => {
    nextUp = Math.max(nextUp, order.indexOf(key) + 1);
    return ahead.take(key);
  };
  const prepareNext = (n = 2) => {
    for (; n > 0 && nextUp < order.length; n--) ahead.prepare(order[nextUp++]!);
  };
  let lapStart = performance.now();
  /** Wall time of a phase, seconds (results.phase_seconds: the quick form's budget, docs/benchmarks.md). */
  const lap = (name: string) => {
    results.phase_seconds![name] = Math.round((performance.now() - lapStart) / 100) / 10;
    lapStart = performance.now();
  };

  const modelOf = (tps: number | null): ModelConfig => ({
    tokens_per_second: tps,
    ttft_ms: tps === null ? 0 : cfg.ttftMs,
    prefill_tokens_per_second: tps === null ? null : cfg.prefillTps,
    hop_ms: cfg.hopMs,
    hops: cfg.hops,
  });
  const timeoutFor = (w: Workload, tps: number | null) => {
    if (cfg.runTimeoutMs !== null) return cfg.runTimeoutMs;
    const calls = modelCallCount(w);
    const outTokens = flatModelTurns(w).reduce((n, t) => n + (t.output_tokens ?? 100), 0);
    const tools = Object.values(w.toolOutputs).reduce((n, o) => n + o.duration_ms, 0) * cfg.toolFactor;
    const model = tps === null ? 0 : calls * (cfg.ttftMs + 2 * cfg.hops * cfg.hopMs + cfg.callHops * cfg.callHopMs) + outTokens * msPerToken(tps) + (w.recorded.input_tokens.at(-1) ?? 50_000) * msPerToken(cfg.prefillTps) * 2;
    return Math.round(60_000 + 3 * (model + tools));
  };

  /** One measured replay; a failure is recorded, a crash is thrown. */
  const measure = async (server: ServerProcess, w: Workload, meta: RunMeta, hidden: number[]): Promise<RunRecord> => {
    const label = `${meta.phase} ${meta.design} ${meta.model.tokens_per_second ?? 'instant'}${meta.model.tokens_per_second ? ' tok/s' : ''}${meta.off ? ` --off ${meta.off}` : ''} rep ${meta.rep + 1}`;
    bar.step(label);
    let record: RunRecord;
    try {
      const before = await server.getJson<ServerStats>('/llr/stats');
      const sample = await server.race(
        replayRun({
          design: meta.design,
          url: server.url,
          workload: w,
          nonce: `[llr bench run ${String(++runNo).padStart(5, '0')}]`,
          toolFactor: meta.tool_factor,
          timeoutMs: timeoutFor(w, meta.model.tokens_per_second),
        }),
      );
      const after = await server.getJson<ServerStats>('/llr/stats');
      const derived = deriveRun(sample, { model: meta.model, hiddenTokens: hidden, rttMs: results.loopback_rtt_ms?.p50 ?? null, serverCpuMs: cpuMs(before, after) });
      record = { ...meta, ok: true, ...derived };
    } catch (err) {
      if (err instanceof ServerCrashedError) throw err;
      record = { ...meta, ok: false, error: (err as Error).message };
      bar.log(`run failed: ${label}: ${(err as Error).message}`);
    }
    results.runs.push(record);
    file.write();
    bar.tick(record.ok ? `${Math.round(record.e2e_ms)} ms` : 'failed');
    return record;
  };

  /**
   * An unmeasured run: JIT, tokenizer tables and the shared preamble's prefix
   * cache. With a timed model only the first user turn is replayed (the
   * replay policy is stateless, so a shorter conversation is still on script);
   * so it is for quick's ablation servers (`firstTurn`), whose single run per
   * switch reads only the rendered-token cache's ~4× and exact counters, and
   * where the cache-off server's whole-run warm-up alone took ~5 s.
   */
  const warm = async (server: ServerProcess, w: Workload, tps: number | null, what: string, firstTurn = tps !== null) => {
    bar.step(`${what}: warm-up`);
    const short = firstTurn && w.userTurns.length > 1 ? { ...w, userTurns: w.userTurns.slice(0, 1) } : w;
    // The next servers start while this unmeasured run goes on, and are up before the measured runs begin.
    prepareNext();
    await server.race(replayRun({ design: 'ws', url: server.url, workload: short, nonce: `[llr bench warm ${String(++runNo).padStart(4, '0')}]`, toolFactor: 0, timeoutMs: timeoutFor(short, tps) }));
    await ahead.settle();
    bar.tick();
  };

  const replayPhase = async (phase: Phase, server: ServerProcess, w: Workload, tps: number | null, plan: Array<{ design: ClientProtocol; rep: number }>, off: string | null = null) => {
    const hidden = hiddenTokensPerCall(w);
    for (const { design, rep } of plan) {
      await measure(server, w, { phase, design, model: modelOf(tps), rep, tool_factor: phase === 'grid' ? cfg.toolFactor : 0, off }, hidden);
    }
  };

  const interleaved = (reps: (d: ClientProtocol) => number) => {
    const plan: Array<{ design: ClientProtocol; rep: number }> = [];
    const most = Math.max(0, ...cfg.designs.map(reps));
    for (let rep = 0; rep < most; rep++) for (const design of rotate(cfg.designs, rep)) if (rep < reps(design)) plan.push({ design, rep });
    return plan;
  };

  const refresh = () => recompute(results);

  let ok = true;
  const onSignal = () => {
    results.status = 'failed';
    results.error = 'interrupted';
    results.finished_at = new Date().toISOString();
    refresh();
    file.write();
    for (const s of servers) void s.stop();
    void frames?.stop();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    bar.step('loopback round trip (raw ws echo)');
    frames = await deadline(spawnFrameServer(), 30_000, 'starting the frame server');
    results.loopback_rtt_ms = await deadline(loopbackRtt(frames.url), 30_000, 'the loopback RTT');
    file.write();
    bar.tick(`p50 ${results.loopback_rtt_ms.p50.toFixed(3)} ms`);
    lap('loopback');

    if (has('grid')) {
      for (const tps of cfg.speeds) {
        const server = await take(`grid:${tps}`);
        try {
          await warm(server, grid, tps, `grid ${tps} tok/s`);
          await replayPhase('grid', server, grid, tps, interleaved(() => cfg.reps));
        } finally {
          await stop(server);
        }
        refresh();
        file.write();
      }
      lap('grid');
    }

    if (has('overhead') && maxOverheadReps > 0) {
      const server = await take('overhead');
      try {
        await warm(server, whole, null, 'overhead (instant model)');
        await replayPhase('overhead', server, whole, null, interleaved((d) => cfg.overheadReps[d]));
      } finally {
        await stop(server);
      }
      refresh();
      file.write();
      lap('overhead');
    }

    if (has('ablations') && cfg.ablationReps > 0) {
      // Every configuration (the baseline with every switch on, and each switch
      // off) has its own warmed server; the repetitions are interleaved across
      // them, rotating, so a drift in the machine's speed spreads over all.
      const configs = ablationConfigs;
      const ablationServers = new Map<string | null, ServerProcess>();
      try {
        for (const name of configs) {
          const what = name === null ? 'ablation baseline (all switches on)' : `ablation --off ${name}`;
          const server = await take(`ablation:${name ?? ''}`);
          ablationServers.set(name, server);
          await warm(server, whole, null, what, cfg.mode === 'quick');
        }
        const hidden = hiddenTokensPerCall(whole);
        for (let rep = 0; rep < cfg.ablationReps; rep++) {
          for (const name of rotate(configs, rep)) {
            await measure(ablationServers.get(name)!, whole, { phase: 'ablation', design: 'ws', model: modelOf(null), rep, tool_factor: 0, off: name }, hidden);
          }
        }
      } finally {
        for (const server of ablationServers.values()) await stop(server);
      }
      refresh();
      file.write();
      lap('ablations');
    }

    if (has('stream')) {
      bar.step(`streaming at ${cfg.stream.tokensPerSecond} tok/s`);
      try {
        const server = await take('stream');
        await ahead.settle();
        try {
          results.stream = await streamPhase(server, frames, { ...cfg.stream, longTokens: sw.longTokens, shortTokens: sw.shortTokens, timeoutMs: 120_000 });
        } finally {
          await stop(server);
        }
      } catch (err) {
        results.phase_errors.push({ phase: 'stream', error: (err as Error).message });
        bar.log(`stream phase failed: ${(err as Error).message}`);
      }
      refresh();
      file.write();
      bar.tick();
      lap('stream');
    }

    if (has('paused')) {
      bar.step(`${cfg.paused.runs} paused long-lived runs`);
      try {
        const server = await take('paused');
        await ahead.settle();
        try {
          results.paused = await pausedPhase(server, pw, { runs: cfg.paused.runs, timeoutMs: 120_000 });
        } finally {
          await stop(server);
        }
      } catch (err) {
        results.phase_errors.push({ phase: 'paused', error: (err as Error).message });
        bar.log(`paused phase failed: ${(err as Error).message}`);
      }
      refresh();
      file.write();
      bar.tick();
      lap('paused');
    }
    results.status = results.runs.some((r) => !r.ok) || results.phase_errors.length ? 'failed' : 'complete';
    if (results.status === 'failed') {
      ok = false;
      results.error = `${results.runs.filter((r) => !r.ok).length} run(s) and ${results.phase_errors.length} phase(s) failed`;
    }
  } catch (err) {
    ok = false;
    results.status = 'failed';
    results.error = (err as Error).message;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await ahead.drain();
    for (const s of [...servers]) await stop(s).catch(() => {});
    await frames?.stop().catch(() => {});
    for (const f of dbFiles) rmSync(f, { force: true });
    results.finished_at = new Date().toISOString();
    refresh();
    file.write();
    writeReport(out, results);
    bar.finish();
  }
  return { results, ok };
}

export { targetLineText };
