/**
 * The chaos suite: each scenario against its own server process (a crash is
 * a crash), its RSS sampled throughout, and after its clients are gone the
 * server's records checked — every run ended, billed once, nothing in
 * flight. `runChaos` returns one tally per scenario and design; the CLI
 * prints them, the CI test asserts that every failure count is zero.
 *
 * Each scenario runs every design of the designs table it applies to
 * (applies.ts). Long form: ≥ 2,000 fuzz inputs per design, 1,000 concurrent
 * runs × 10 calls per design that pauses. Quick form (CI): a few hundred
 * inputs, 100 × 5.
 */
import * as concurrency from './concurrency.js';
import * as disconnect from './disconnect.js';
import { fuzzHttp } from './fuzz-http.js';
import { fuzzLongLivedHttp } from './fuzz-llhttp.js';
import { fuzzWs } from './fuzz-ws.js';
import { LONG_SCALE, QUICK_SCALE, type Scale } from './mutate.js';
import { Tally } from './oracle.js';
import { rowLine } from './report.js';
import { RssSampler, type ServerProcOptions } from './proc.js';
import { Target, checkQuiescent, type FuzzOptions } from './settle.js';
import type { Protocol } from '../protocol/designs.js';
import { designsFor, type ScenarioName } from './applies.js';
import * as signals from './signals.js';
import * as slowReader from './slow-reader.js';

export { designsFor, SCENARIOS, type ScenarioName } from './applies.js';

const MODULES = { disconnect, 'slow-reader': slowReader, concurrency, signals } as const;

/**
 * Each server design's fuzzer (the fuzz scenario runs them in the designs table's order, one row each): the one place a new design
 * adds its fuzzer, which the `Protocol` key makes a compile error to forget.
 */
const FUZZERS: { readonly [P in Protocol]: (target: Target, opts: FuzzOptions, tally: Tally) => Promise<void> } = {
  'long-lived': (target, opts, tally) => fuzzWs(target, { ...opts, protocol: 'long-lived' }, tally),
  ws: (target, opts, tally) => fuzzWs(target, { ...opts, protocol: 'ws' }, tally),
  http: fuzzHttp,
  'long-lived-http': fuzzLongLivedHttp,
};

/** The smallest run-record ring the harness starts a server with (the concurrency scenario's 1,000 runs, with room). */
const RUN_RECORDS_MIN = 10_000;
/** Estimated bytes allowed per kept record (engine/records.ts `recordBytes`: 4 KiB and 96 bytes a span): room for ~2,700 spans each. */
const RECORD_BYTES_EACH = 256 * 1024;

export interface ChaosOptions {
  /** Path of the built CLI (dist/cli.js). */
  cli: string;
  seed: number;
  /** Fuzz inputs per design. */
  inputs: number;
  quick: boolean;
  /** Bound on any one answer before it counts as a hang, ms. */
  hangMs: number;
  /** Bound on winding down after the clients close, ms. */
  settleMs: number;
  /** /health must answer within this, ms (250 in the long form; the quick form allows 2,000 so a loaded CI machine does not flake, while a freeze, 3 s of silence, still fails as a hang). */
  healthDeadlineMs: number;
  /** After a hang, how long /health may stay silent before the server counts as frozen and is restarted, ms. */
  freezeMs: number;
  only?: readonly ScenarioName[];
  /** Progress lines (the CLI prints them to stderr). */
  progress?: (line: string) => void;
}

export function defaultOptions(cli: string, quick: boolean): ChaosOptions {
  return { cli, seed: 1, inputs: quick ? 60 : 2_000, quick, hangMs: quick ? 5_000 : 10_000, settleMs: 5_000, healthDeadlineMs: quick ? 2_000 : 250, freezeMs: 3_000 };
}

export interface ScenarioContext {
  opts: ChaosOptions;
  scale: Scale;
  /** Start a server for this scenario, sampled for RSS into `tally`. */
  /** `strictHealth`: every /health over 250 ms during the scenario is a failure (fuzzing); otherwise counted in a note (deliberate load). */
  withServer<T>(tally: Tally, server: Omit<ServerProcOptions, 'cli'>, fn: (target: Target) => Promise<T>, strictHealth?: boolean): Promise<T>;
  /** In the quick form, rows of one scenario share a server under this key (a server start is most of a short row's time). */
  share: string | null;
}

export async function runChaos(opts: ChaosOptions): Promise<Tally[]> {
  const rows: Tally[] = [];
  const shared = new Map<string, { target: Target; last: Tally }>();
  const ctx: ScenarioContext = {
    opts,
    scale: opts.quick ? QUICK_SCALE : LONG_SCALE,
    share: null,
    async withServer(tally, server, fn, strictHealth = false) {
      const key = ctx.share;
      const reused = key ? shared.get(key) : undefined;
      // The server's run-record ring (default 1,000, and 64 MiB estimated) must hold every run a scenario judges, or records are
      // evicted before they are read: 64 MiB holds only ~5,700 records of a 10-step tool loop (an outside attack).
      const records = Math.max(RUN_RECORDS_MIN, opts.inputs * 4);
      const ring = ['--max-run-records', String(records), '--max-run-records-bytes', String(records * RECORD_BYTES_EACH)];
      const target = reused?.target ?? (await Target.start({ cli: opts.cli, ...server, args: [...ring, ...(server.args ?? [])] }));
      if (key) shared.set(key, { target, last: tally });
      target.freezeMs = opts.freezeMs;
      target.healthDeadlineMs = opts.healthDeadlineMs;
      target.watchHealth(tally, strictHealth);
      const rss = new RssSampler(() => target.server);
      try {
        return await fn(target);
      } finally {
        tally.rss = rss.stop();
        tally.healthMaxMs = target.healthMaxMs;
        if (target.slowUnderLoad) tally.notes.push(`${target.slowUnderLoad} /health answers over ${opts.healthDeadlineMs} ms under the scenario's load (watched from another process)`);
        target.slowUnderLoad = 0;
        if (!key) await finish(target, tally);
        opts.progress?.(`done: ${rowLine(tally)}${tally.failed ? ` · ${tally.failed} failures` : ''}`);
      }
    },
  };
  /** Stop a scenario's server: SIGTERM must end it with exit code 0. */
  async function finish(target: Target, tally: Tally): Promise<void> {
    const wasAlive = target.server.alive && !target.server.expectedExit;
    const exit = await target.stop();
    if (wasAlive && exit.code !== 0) tally.fail('crash', 'SIGTERM at the end of the scenario', `exit code ${exit.code} signal ${exit.signal}: ${target.server.stderr.slice(-600)}`);
    if (target.server.errorLineCount) tally.notes.push(`${target.server.errorLineCount} error-level log lines, first: ${target.server.errorLines[0]?.slice(0, 300)}`);
  }
  const endShare = async () => {
    for (const { target, last } of shared.values()) await finish(target, last);
    shared.clear();
    ctx.share = null;
  };
  const want = (s: ScenarioName) => !opts.only || opts.only.includes(s);
  const say = opts.progress ?? (() => {});
  if (want('fuzz')) {
    ctx.share = opts.quick ? 'fuzz' : null;
    for (const design of designsFor('fuzz')) {
      const tally = new Tally('fuzz', design);
      rows.push(tally);
      say(`fuzz ${design}: ${opts.inputs} inputs, seed ${opts.seed}`);
      await ctx.withServer(tally, {}, async (target) => {
        const common = { inputs: opts.inputs, seed: opts.seed, scale: ctx.scale, hangMs: opts.hangMs, batch: 50, settleMs: opts.settleMs };
        await FUZZERS[design](target, common, tally);
        tally.exercise(design, tally.inputs);
        await checkQuiescent(target.url, tally, opts.settleMs);
      }, true);
    }
    await endShare();
  }
  for (const name of ['disconnect', 'slow-reader', 'concurrency', 'signals'] as const) {
    if (!want(name)) continue;
    say(`${name}`);
    ctx.share = opts.quick && name === 'disconnect' ? name : null;
    rows.push(...(await MODULES[name].run(ctx)));
    await endShare();
  }
  return rows;
}
