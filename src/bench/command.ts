/**
 * `llr bench` (and `npm run bench`): flags, the `--quick` and `--full`
 * presets, and the lines printed at the end (the summary and one line per
 * target). The work is in runner.ts; this file only decides what to run.
 *
 * `--quick` (the default) is sized to finish in about 90 s on 2 idle cores
 * (the two-minute bound with a margin); what it cuts is listed in QUICK
 * below and in docs/benchmarks.md, with the wall time of each phase.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { numberFlag, refuseRepeats, stringOptions, UsageError } from '../flags.js';
import { quoted, shown } from '../terminal-text.js';
import { MAX_TIMER_MS } from '../limit-flags.js';
import { MAX_PAUSED_RUNS, MAX_REPS, MAX_STREAMS } from './guard.js';
import { CLIENT_PROTOCOLS, type ClientProtocol } from '../client/index.js';
import { targetLineText } from './format.js';
import { phaseTimes, writeReport } from './report.js';
import { ResultsFile, type Results } from './results.js';
import { PHASES, interruptBenches, runBench, type BenchConfig, type PhaseName } from './runner.js';
import { recompute } from './verdicts.js';
import { parseTurns, runScaling, type ScalingOptions } from './scaling.js';
import { DEFAULT_WORKLOAD, readWorkload, type Workload } from '../workload/load.js';
import { modelCallCount } from '../workload/replayable.js';
import { leastRunMs, runDeadlineMs } from './session.js';
import { truncateWorkload } from './workload-prep.js';
import { syntheticFromSpec, syntheticWorkload } from '../workload/synthetic.js';
import { PROFILE_NAMES, profileByName, profileKnobs } from './profiles.js';
import { SWEEP_DESIGNS, SWEEP_FULL, SWEEP_QUICK, parseList, rebuildSweep, runSweep, sweepGains, sweepLoadText, sweepMarkdown, sweepParagraph, sweepSkippedText, type SweepOptions } from './sweep.js';

export { DEFAULT_WORKLOAD };

/** `llr bench --help`; its overhead repetitions are read from the presets, so they cannot drift from them. */
export function benchHelp(): string {
  return `llr bench — replay an agent run through every design and report where the time goes

Usage: llr bench [--quick | --full] [options]

  --quick                 (default) grid on the first 6 model calls at 1000 and 4000
                          tokens/s, 3 reps; overhead phase on the whole workload
                          (${overheadRepsText(QUICK)});
                          ablations 1 rep (first-turn warm-ups); streams of 4000 / 100×500
                          tokens; 1000 paused runs. About 90 s on 2 idle cores (budget
                          per phase: docs/benchmarks.md).
  --full                  the whole workload at 65, 1000 and 4000 tokens/s, 3 reps;
                          overhead phase ${overheadRepsText(FULL)};
                          ablations 3; streams of 16000 / 100×4000 tokens
  --workload FILE         a Codex rollout or an llr workload (JSON, docs/workload.schema.json);
                          default: workloads/codex-rollout-a.jsonl, shipped in the package
  --synthetic T,B,K       a synthetic run instead: T model calls, B-byte tool outputs,
                          K output tokens per call (more where a call's text takes more)
  --out DIR               output directory (default bench-out/)
  --calls N|all           grid workload: the first N model calls
  --speeds A,B,...        model speeds, tokens/s
  --reps N                repetitions per grid configuration (at most 1000)
  --designs a,b,...       of ${CLIENT_PROTOCOLS.join(', ')}
  --tool-factor F         client tool time: 0 (default) or recorded duration × F
  --phases a,b,...        of ${PHASES.join(', ')} (default: all)
  --ttft-ms N --prefill-tps N --hop-ms N --hops N
                          the simulated model's knobs (defaults 150, 20000, 0, 2)
  --call-hop-ms N --call-hops N
                          remote calls every design pays before every model call
                          (default 0, 0; the production profile: 20 ms × 1)
  --streams N             concurrent streams in the stream phase (default 100, at most 10000)
  --paused-runs N         concurrent paused runs (default 1000, at most 50000)
  --run-timeout-ms N      cap on one replay run (default: from the workload, the speed and the run's length)
  --store sqlite|memory   the servers' response store (default: a SQLite file per
                          server in DIR, deleted at the end, as llr serve uses)
  --report DIR            rebuild DIR's summaries, targets and report from its results.json
                          (a sweep's DIR: its table, paragraph and heat maps from sweep.json)
  --profile NAME          cost profile: ${PROFILE_NAMES.join(', ')} (default loopback): the remote
                          hops and their latencies (docs/benchmarks.md); --hop-ms, --hops,
                          --call-hop-ms, --call-hops override its numbers
  --target-speed N        target 2's model speed, tokens/s (default 1000; must be in --speeds)
  --sweep                 the gain of each design over http across model speed × per-hop
                          latency × conversation length (default 65,1000,4000 × 0,1,2,5,10
                          × 6,20,66 calls; with --quick 1000,4000 × 0,10 × 3,6); override with
                          --sweep-speeds, --sweep-hops, --sweep-calls; cells whose decode alone
                          exceeds --sweep-max-decode-s (default 15) per run are skipped and
                          listed; designs: ${SWEEP_DESIGNS.join(', ')} (or --designs); writes
                          DIR/sweep.{json,md} and one heat map per design
  --scaling T1,T2,...     scaling curves instead: for each turn count a synthetic run
                          (--synthetic-bytes B, default 2000; --synthetic-tokens K,
                          default 100) through every design with the instant model;
                          writes DIR/scaling.{json,md} and two SVG charts

Writes DIR/results.json (after every run), DIR/report.md, DIR/charts/*.svg and
DIR/index.html; prints the summary and one line per target.
`;
}

/**
 * A preset's overhead-phase repetitions as the help says them, designs with the same count together in the
 * designs' order: "long-lived and ws 5 reps, long-lived-http 3, http and http-stored 1".
 */
export function overheadRepsText(preset: Pick<Preset, 'overheadReps' | 'designs'>): string {
  const groups = new Map<number, string[]>();
  for (const d of preset.designs) groups.set(preset.overheadReps[d], [...(groups.get(preset.overheadReps[d]) ?? []), d]);
  const names = (ds: string[]) => (ds.length === 1 ? ds[0]! : `${ds.slice(0, -1).join(', ')} and ${ds.at(-1)!}`);
  return [...groups].map(([n, ds], i) => `${names(ds)} ${n}${i === 0 ? ' reps' : ''}`).join(', ');
}

type Preset = Omit<BenchConfig, 'workload' | 'out' | 'phases'>;

const EVERY = Object.fromEntries(CLIENT_PROTOCOLS.map((d) => [d, 3])) as Record<ClientProtocol, number>;

export const QUICK: Preset = {
  mode: 'quick',
  gridCalls: 6,
  speeds: [1000, 4000],
  reps: 3,
  designs: [...CLIENT_PROTOCOLS],
  // long-lived and ws feed target 1's per-call medians; the others are reported only.
  // A design not named here gets EVERY's 3.
  overheadReps: { ...EVERY, 'long-lived': 5, ws: 5, http: 1, 'http-stored': 1 },
  // One run per switch: only rendered_token_cache moves e2e beyond the noise (by ~4×), and the counters are exact.
  ablationReps: 1,
  toolFactor: 0,
  ttftMs: 150,
  prefillTps: 20_000,
  hopMs: 0,
  hops: 2,
  // The single stream (target 3's rate) needs its second at 4,000 tok/s; the 100 concurrent ones report a throughput, ~1 s of it is enough.
  stream: { tokensPerSecond: 4000, longTokens: 4000, shortTokens: 500, streams: 100 },
  paused: { runs: 1000 },
  runTimeoutMs: null,
  store: 'sqlite',
  targetSpeed: 1000,
  profile: 'loopback',
  callHopMs: 0,
  callHops: 0,
};

export const FULL: Preset = {
  ...QUICK,
  mode: 'full',
  gridCalls: null,
  speeds: [65, 1000, 4000],
  overheadReps: { ...EVERY, 'long-lived': 9, ws: 9, 'long-lived-http': 9 },
  ablationReps: 3,
  stream: { tokensPerSecond: 4000, longTokens: 16_000, shortTokens: 4000, streams: 100 },
};

function list(v: string, what: string): string[] {
  const xs = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (xs.length === 0) throw new UsageError(`--${what} needs a comma-separated list`);
  return xs;
}

/** A number >= min (a plain decimal: '' was 0); `integer` for counts; times at most what a Node timer holds. */
function count(v: string, what: string, min = 0, integer = false, max = what.endsWith('-ms') ? MAX_TIMER_MS : Number.MAX_SAFE_INTEGER): number {
  return numberFlag(v, what, { min, integer, max })!;
}


function storeKind(v: string | undefined): 'sqlite' | 'memory' {
  if (v === undefined || v === 'sqlite' || v === 'memory') return v ?? 'sqlite';
  throw new UsageError(`--store is sqlite or memory, got ${quoted(v)}`);
}

/** A parser's refusal of a flag's value (`--synthetic`, `--scaling`, `--sweep-*`, `--profile`) as a usage error. */
function usage<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export function parseBenchArgs(argv: string[]): { config: BenchConfig; help: boolean; report: string | null; scaling: ScalingOptions | null; sweep: SweepOptions | null; gridNotes: GridRunTime[] } {
  const { values, tokens } = parseArgs({
    args: argv,
    tokens: true,
    options: {
      quick: { type: 'boolean' },
      full: { type: 'boolean' },
      ...stringOptions(['workload', 'synthetic', 'out', 'calls', 'speeds', 'reps', 'designs', 'tool-factor', 'phases', 'ttft-ms',
        'prefill-tps', 'hop-ms', 'hops', 'streams', 'paused-runs', 'run-timeout-ms', 'report', 'store', 'scaling', 'profile',
        'target-speed', 'call-hop-ms', 'call-hops', 'sweep-speeds', 'sweep-hops', 'sweep-calls', 'sweep-max-decode-s', 'synthetic-bytes',
        'synthetic-tokens']),
      help: { type: 'boolean', short: 'h' },
      sweep: { type: 'boolean' },
    },
  });
  refuseRepeats(tokens, values);
  // An empty value (`--speeds=`, `--out ''`) is a mistake, not "the default": --speeds, --designs, --phases and the
  // --sweep-* lists fell back to their defaults unsaid, and --out '' wrote results.json and the servers' files into the
  // current directory (outside attack). As for llr serve / llr run (cli.ts checkStrings).
  for (const [flag, v] of Object.entries(values)) if (v === '') throw new UsageError(`--${flag} needs a value, got ''`);
  if (values.quick && values.full) throw new UsageError('--quick and --full exclude each other');
  if (values.workload !== undefined && values.synthetic !== undefined) throw new UsageError('--workload and --synthetic exclude each other');
  const preset = values.full ? FULL : QUICK;
  let workload: Workload | null = null;
  const scaling =
    values.scaling === undefined
      ? null
      : {
          turns: usage(() => parseTurns(values.scaling!)),
          toolOutputBytes: values['synthetic-bytes'] === undefined ? 2000 : count(values['synthetic-bytes'], 'synthetic-bytes', 0, true),
          outputTokensPerTurn: values['synthetic-tokens'] === undefined ? 100 : count(values['synthetic-tokens'], 'synthetic-tokens', 1, true),
        };
  if (scaling && (values.workload !== undefined || values.synthetic !== undefined)) throw new UsageError('--scaling generates its own workloads: drop --workload / --synthetic');
  if (!values.help && values.report === undefined) {
    if (scaling) {
      // A placeholder: runScaling generates the workload of each point.
      workload = usage(() => syntheticWorkload({ turns: scaling.turns[0]!, toolOutputBytes: scaling.toolOutputBytes, outputTokensPerTurn: scaling.outputTokensPerTurn, seed: 1 }));
    } else if (values.synthetic !== undefined) {
      workload = usage(() => syntheticFromSpec(values.synthetic!));
    } else {
      const path = values.workload ?? process.env['LLR_BENCH_WORKLOAD'] ?? DEFAULT_WORKLOAD;
      if (values.workload === undefined && !existsSync(path)) throw new Error(`the default workload ${path} is missing; pass --workload FILE or --synthetic T,B,K`);
      workload = readWorkload(path);
    }
  }
  const designs = values.designs ? list(values.designs, 'designs') : values.sweep ? [...SWEEP_DESIGNS] : preset.designs;
  for (const d of designs) if (!CLIENT_PROTOCOLS.includes(d as ClientProtocol)) throw new UsageError(`unknown design ${quoted(d)}; known: ${CLIENT_PROTOCOLS.join(', ')}`);
  const phases = values.phases ? list(values.phases, 'phases') : [...PHASES];
  for (const p of phases) if (!PHASES.includes(p as PhaseName)) throw new UsageError(`unknown phase ${quoted(p)}; known: ${PHASES.join(', ')}`);
  const reps = values.reps === undefined ? null : count(values.reps, 'reps', 1, true, MAX_REPS);
  const profile = usage(() => profileByName(values.profile ?? preset.profile));
  const knobs = profileKnobs(profile);
  if (values.sweep && scaling) throw new UsageError('--sweep and --scaling exclude each other');
  const sweepBase = values.quick ? SWEEP_QUICK : SWEEP_FULL;
  const sweep: SweepOptions | null = values.sweep
    ? {
        speeds: values['sweep-speeds'] ? usage(() => parseList(values['sweep-speeds']!, 'sweep-speeds', 1)) : sweepBase.speeds,
        hopMs: values['sweep-hops'] ? usage(() => parseList(values['sweep-hops']!, 'sweep-hops', 0)) : sweepBase.hopMs,
        calls: values['sweep-calls'] ? usage(() => parseList(values['sweep-calls']!, 'sweep-calls', 1)).map(Math.round) : sweepBase.calls,
        reps: reps ?? sweepBase.reps,
        quick: values.quick ?? false,
        maxDecodeS: values['sweep-max-decode-s'] === undefined ? sweepBase.maxDecodeS : count(values['sweep-max-decode-s'], 'sweep-max-decode-s', 0),
      }
    : null;
  const config: BenchConfig = {
    ...preset,
    workload: workload as Workload,
    out: values.out ?? 'bench-out',
    gridCalls: values.calls === undefined ? preset.gridCalls : values.calls === 'all' ? null : count(values.calls, 'calls', 1, true),
    speeds: values.speeds ? list(values.speeds, 'speeds').map((s) => count(s, 'speeds', 1)) : preset.speeds,
    reps: reps ?? preset.reps,
    designs: designs as ClientProtocol[],
    // A scaling point gives every design the same repetitions (3 unless --reps).
    overheadReps:
      reps === null && !scaling ? preset.overheadReps : (Object.fromEntries(CLIENT_PROTOCOLS.map((d) => [d, reps ?? 3])) as Record<ClientProtocol, number>),
    ablationReps: reps ?? preset.ablationReps,
    toolFactor: values['tool-factor'] === undefined ? preset.toolFactor : count(values['tool-factor'], 'tool-factor'),
    ttftMs: values['ttft-ms'] === undefined ? preset.ttftMs : count(values['ttft-ms'], 'ttft-ms'),
    prefillTps: values['prefill-tps'] === undefined ? preset.prefillTps : count(values['prefill-tps'], 'prefill-tps', 1),
    hopMs: values['hop-ms'] === undefined ? knobs.hopMs : count(values['hop-ms'], 'hop-ms'),
    hops: values.hops === undefined ? knobs.hops : count(values.hops, 'hops', 0, true),
    callHopMs: values['call-hop-ms'] === undefined ? knobs.callHopMs : count(values['call-hop-ms'], 'call-hop-ms'),
    callHops: values['call-hops'] === undefined ? knobs.callHops : count(values['call-hops'], 'call-hops', 0, true),
    profile: profile.name,
    targetSpeed: values['target-speed'] === undefined ? preset.targetSpeed : count(values['target-speed'], 'target-speed', 1),
    phases: new Set(phases as PhaseName[]),
    stream: { ...preset.stream, streams: values.streams === undefined ? preset.stream.streams : count(values.streams, 'streams', 1, true, MAX_STREAMS) },
    paused: { runs: values['paused-runs'] === undefined ? preset.paused.runs : count(values['paused-runs'], 'paused-runs', 1, true, MAX_PAUSED_RUNS) },
    runTimeoutMs: values['run-timeout-ms'] === undefined ? null : count(values['run-timeout-ms'], 'run-timeout-ms', 1),
    store: storeKind(values.store),
  };
  // Target 2 reads the grid's runs at this speed: one the grid never runs was found out only after the whole bench, as
  // an unmeasured target. Checked when given (the default 1000 with other --speeds stays a target left unmeasured).
  if (values['target-speed'] !== undefined && config.phases.has('grid') && !sweep && !scaling && !config.speeds.includes(config.targetSpeed)) {
    throw new UsageError(`--target-speed ${config.targetSpeed} is not one of --speeds (${config.speeds.join(', ')}): target 2 reads the grid's runs at that speed`);
  }
  // A grid run that cannot end before its deadline is refused now, not found out when the deadline passes (up to
  // 24.8 days later, the bench silent meanwhile; outside attack atk38 F2): a workload's recorded token counts set its
  // decode time, at most 10^9 tokens a call.
  // Not for --help or --report, which read no workload (the check read the missing one: outside attack atk41 F1).
  const gridNotes = !values.help && values.report === undefined && !sweep && !scaling && config.phases.has('grid') ? gridRunTimes(config) : [];
  for (const g of gridNotes) {
    if (g.leastMs > g.deadlineMs) {
      throw new UsageError(
        `at ${g.tps} tokens/s one grid run takes at least ${spanText(g.leastMs)} (${runText(g)}${config.toolFactor > 0 ? ', with the recorded tool time' : ''}), past its deadline of ${spanText(g.deadlineMs)} (${config.runTimeoutMs === null ? 'the longest a timer waits, 2^31-1 ms' : '--run-timeout-ms'}): choose faster --speeds, fewer --calls${config.runTimeoutMs === null ? '' : ' or a longer --run-timeout-ms'}`,
      );
    }
  }
  return { config, help: values.help ?? false, report: values.report ?? null, scaling, sweep, gridNotes };
}

/** A grid run's least time (leastRunMs) and deadline at each speed. */
export interface GridRunTime {
  tps: number;
  leastMs: number;
  deadlineMs: number;
  calls: number;
  outputTokens: number;
  /** The context tokens the run prefills at the least (leastRunMs), and at what rate. */
  prefillTokens: number;
  prefillTps: number;
  runs: number;
}

/** What a grid run's least time is made of, in words. */
function runText(g: GridRunTime): string {
  return `${g.calls} model calls decoding ${g.outputTokens} output tokens (as recorded, or at least what each call shows)${g.prefillTokens > 0 ? `, prefilling at least ${g.prefillTokens} context tokens at ${g.prefillTps} tokens/s` : ''}`;
}

export function gridRunTimes(config: BenchConfig): GridRunTime[] {
  const full = config.workload;
  const grid = truncateWorkload(full, config.gridCalls ?? modelCallCount(full));
  return config.speeds.map((tps) => {
    const least = leastRunMs(grid, tps, config);
    return { tps, leastMs: least.ms, deadlineMs: runDeadlineMs(grid, tps, config), calls: least.calls, outputTokens: least.outputTokens, prefillTokens: least.prefillTokens, prefillTps: config.prefillTps, runs: config.reps * config.designs.length };
  });
}

/** A grid run's least time worth a line before the bench starts: ten minutes or more. */
export const LONG_RUN_MS = 600_000;

/** "250 ms", "8.2 s", "14 min 5 s", "3 h 12 min", "24.9 days", "534 days". */
export function spanText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
  if (s < 86_400 * 2) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  const days = s / 86_400;
  return `${days < 100 ? days.toFixed(1) : Math.round(days).toLocaleString('en-US')} days`;
}

export async function benchCommand(argv: string[]): Promise<void> {
  // Parsed (the workload read) before the handlers exist: reading a FIFO no one writes blocks the thread in open(2),
  // where a handler never runs, so a SIGTERM then was caught and never acted on (the process hung for good); without
  // one, the signal ends the process as it ends `llr serve` reading the same FIFO. Nothing is running to interrupt yet.
  const parsed = parseBenchArgs(argv);
  // Nor while a report is rebuilt from DIR's results.json (or sweep.json), read the same way (a FIFO there hung the
  // same way; outside attack): nothing runs then that a handler would stop.
  if (parsed.help || parsed.report !== null) return bench(argv, parsed);
  // A signal keeps each bench's partial results (results.json, status failed, 'interrupted') and stops its servers.
  const onSignal = () => {
    interruptBenches();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await bench(argv, parsed);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

async function bench(argv: string[], parsed: ReturnType<typeof parseBenchArgs>): Promise<void> {
  const { config, help, report, scaling, sweep } = parsed;
  if (help) {
    process.stdout.write(benchHelp());
    return;
  }
  if (sweep) {
    const t0 = performance.now();
    const { results, ok } = await runSweep(config, sweep, `llr bench ${argv.join(' ')}`);
    const skipped = sweepSkippedText(results.skipped, results.options.maxDecodeS);
    const load = sweepLoadText(results);
    process.stdout.write(`\n${sweepParagraph(sweepGains(results.rows, results.baseline))}\n\n${skipped ? `${skipped}\n\n` : ''}${load ? `${load}\n\n` : ''}${sweepMarkdown(results)}\n`);
    process.stdout.write(`\nsweep in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${config.out}/sweep.json · ${config.out}/sweep.md · ${config.out}/sweep-*.svg\n`);
    if (!ok) {
      process.stderr.write(`llr bench --sweep: ${shown(results.failures.map((f) => `${f.cell}: ${f.error}`).join('; '))}\n`);
      process.exitCode = 1;
    }
    return;
  }
  if (scaling) {
    const { results, ok } = await runScaling(config, scaling);
    process.stdout.write(`\n${'model calls'.padEnd(12)}${'design'.padEnd(13)}${'e2e ms'.padStart(9)}${'overhead ms'.padStart(13)}${'per call ms'.padStart(13)}\n`);
    for (const r of results.rows) {
      process.stdout.write(
        `${String(r.turns).padEnd(12)}${r.design.padEnd(13)}${r.e2e_ms_median.toFixed(0).padStart(9)}${r.api_overhead_ms_median.toFixed(1).padStart(13)}${r.api_overhead_per_call_ms.toFixed(2).padStart(13)}\n`,
      );
    }
    process.stdout.write(`\nscaling: ${config.out}/scaling.json · ${config.out}/scaling.md\n`);
    if (!ok) {
      process.stderr.write(`llr bench --scaling: ${shown(results.failures.map((f) => `${f.turns} turns: ${f.error}`).join('; '))}\n`);
      process.exitCode = 1;
    }
    return;
  }
  if (report !== null) {
    if (!existsSync(join(report, 'results.json')) && existsSync(join(report, 'sweep.json'))) {
      // A sweep's directory: its table, paragraph and heat maps from sweep.json and the cells' results.
      const s = rebuildSweep(report);
      const skipped = sweepSkippedText(s.skipped, s.options.maxDecodeS);
      const load = sweepLoadText(s);
      process.stdout.write(`${sweepParagraph(sweepGains(s.rows, s.baseline))}\n\n${skipped ? `${skipped}\n\n` : ''}${load ? `${load}\n\n` : ''}${sweepMarkdown(s)}\n`);
      return;
    }
    // Rebuild summaries, targets and the report from a results.json alone.
    const path = join(report, 'results.json');
    const results = JSON.parse(readFileSync(path, 'utf8')) as Results;
    recompute(results);
    new ResultsFile(path, results).write();
    writeReport(report, results);
    printOutcome(results, 0, report);
    return;
  }
  for (const g of parsed.gridNotes) {
    if (g.leastMs >= LONG_RUN_MS) {
      process.stderr.write(`llr bench: at ${g.tps} tokens/s each grid run takes at least ${spanText(g.leastMs)} (${runText(g)}); ${g.runs === 1 ? 'its one run' : `its ${g.runs} runs`} at least ${spanText(g.leastMs * g.runs)}\n`);
    }
  }
  const t0 = performance.now();
  const { results, ok } = await runBench(config);
  printOutcome(results, performance.now() - t0, config.out);
  if (!ok) {
    process.stderr.write(`llr bench: ${shown(results.error ?? 'failed')} (partial results kept in ${shown(config.out)}/results.json)\n`);
    process.exitCode = 1;
  }
}

function printOutcome(results: Results, ms: number, dir: string): void {
  const out = process.stdout;
  out.write(`\nllr bench ${String(results.config['mode'])}: ${results.status}${ms ? ` in ${(ms / 1000).toFixed(1)} s` : ''} · ${results.machine.cpus} × ${results.machine.cpu} · node ${results.machine.node}\n`);
  // The overhead phase's share of the workload only when that phase ran (it named 66 calls after a grid-only bench).
  const overheadRan = results.runs.some((r) => r.phase === 'overhead');
  const notes = (results.workload.summary['notes'] as { count?: number } | undefined)?.count ?? 0;
  const noted = notes > 0 ? `; ${notes} record(s) not replayed as recorded, noted in the report` : '';
  out.write(`workload: ${shown(results.workload.name)} (grid ${results.workload.grid_model_calls} model calls${overheadRan ? `, overhead phase ${results.workload.overhead_model_calls}` : ''}${noted})\n`);
  const times = phaseTimes(results);
  out.write(`${times ? `${times}\n` : ''}\n`);
  const rows = [...results.summary, ...results.overhead_summary];
  if (rows.length) {
    // As wide as the longest design's name and a space (long-lived-http pushed its row three columns right).
    const w = Math.max(12, ...rows.map((r) => r.design.length + 1));
    out.write(`${'design'.padEnd(w)}${'model'.padStart(12)}${'e2e ms'.padStart(10)}${'overhead ms'.padStart(13)}${'share'.padStart(8)}${'TTFT ms'.padStart(10)}${'runs'.padStart(6)}\n`);
    for (const r of rows) {
      out.write(
        `${r.design.padEnd(w)}${(r.tokens_per_second === null ? 'instant' : `${r.tokens_per_second} tok/s`).padStart(12)}${r.e2e_ms_median.toFixed(0).padStart(10)}${r.api_overhead_ms_median.toFixed(1).padStart(13)}${`${(r.api_overhead_share * 100).toFixed(1)}%`.padStart(8)}${(Number.isFinite(r.ttft_ms_median) ? r.ttft_ms_median.toFixed(1) : '–').padStart(10)}${String(r.runs).padStart(6)}\n`,
      );
    }
    out.write('\n');
  }
  for (const a of results.ablations.rows) {
    const pipe = Number.isFinite(a.pipeline_delta_ms) ? `, server pipeline ${a.pipeline_delta_ms >= 0 ? '+' : ''}${a.pipeline_delta_ms.toFixed(1)} ms` : '';
    out.write(`ablation --off ${a.off}: e2e ${a.e2e_ms_median.toFixed(0)} ms (${a.e2e_ms_min.toFixed(0)}–${a.e2e_ms_max.toFixed(0)}), ${a.contribution_ms >= 0 ? '+' : ''}${a.contribution_ms.toFixed(0)} ms vs all on${pipe}\n`);
  }
  if (results.ablations.rows.length) out.write('\n');
  for (const t of results.targets) out.write(`${targetLineText(t)}\n`);
  out.write(`\nresults: ${dir}/results.json · report: ${dir}/report.md · page: ${dir}/index.html\n`);
}
