/**
 * The chaos suite: each scenario against its own server process (a crash is
 * a crash), its RSS sampled throughout, and after its clients are gone the
 * server's records checked — every run ended, billed once, nothing in
 * flight. `runChaos` returns one tally per scenario and design; the CLI
 * prints them, the CI test asserts that every failure count is zero.
 *
 * Long form: ≥ 2,000 fuzz inputs per design, 1,000 concurrent long-lived
 * runs × 10 calls. Quick form (CI): a few hundred inputs, 100 × 5.
 */
import { fuzzHttp } from './fuzz-http.js';
import { fuzzWs } from './fuzz-ws.js';
import { LONG_SCALE, QUICK_SCALE, type Scale } from './mutate.js';
import { Tally } from './oracle.js';
import { RssSampler, type ServerProcOptions } from './proc.js';
import { Target, checkQuiescent, checkRecords } from './settle.js';

export const SCENARIOS = ['fuzz', 'disconnect', 'slow-reader', 'concurrency', 'signals'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

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
  only?: readonly ScenarioName[];
  /** Progress lines (the CLI prints them to stderr). */
  progress?: (line: string) => void;
}

export function defaultOptions(cli: string, quick: boolean): ChaosOptions {
  return { cli, seed: 1, inputs: quick ? 150 : 2_000, quick, hangMs: quick ? 10_000 : 15_000, settleMs: 5_000 };
}

export interface ScenarioContext {
  opts: ChaosOptions;
  scale: Scale;
  /** Start a server for this scenario, sampled for RSS into `tally`. */
  /** `strictHealth`: every /health over 250 ms during the scenario is a failure (fuzzing); otherwise counted in a note (deliberate load). */
  withServer<T>(tally: Tally, server: Omit<ServerProcOptions, 'cli'>, fn: (target: Target) => Promise<T>, strictHealth?: boolean): Promise<T>;
}

export async function runChaos(opts: ChaosOptions): Promise<Tally[]> {
  const rows: Tally[] = [];
  const ctx: ScenarioContext = {
    opts,
    scale: opts.quick ? QUICK_SCALE : LONG_SCALE,
    async withServer(tally, server, fn, strictHealth = false) {
      const target = await Target.start({ cli: opts.cli, ...server });
      target.freezeMs = opts.hangMs * 2;
      target.watchHealth(tally, strictHealth);
      const rss = new RssSampler(() => target.server);
      try {
        return await fn(target);
      } finally {
        tally.rss = rss.stop();
        tally.healthMaxMs = target.healthMaxMs;
        if (target.slowUnderLoad) tally.notes.push(`${target.slowUnderLoad} /health answers over 250 ms under the scenario's load (watched from another process)`);
        const wasAlive = target.server.alive && !target.server.expectedExit;
        const exit = await target.stop();
        if (wasAlive && exit.code !== 0) tally.fail('crash', 'SIGTERM at the end of the scenario', `exit code ${exit.code} signal ${exit.signal}: ${target.server.stderr.slice(-600)}`);
        if (target.server.errorLineCount) tally.notes.push(`${target.server.errorLineCount} error-level log lines, first: ${target.server.errorLines[0]?.slice(0, 300)}`);
      }
    },
  };
  const want = (s: ScenarioName) => !opts.only || opts.only.includes(s);
  const say = opts.progress ?? (() => {});
  if (want('fuzz')) {
    for (const design of ['long-lived', 'ws', 'http'] as const) {
      const tally = new Tally('fuzz', design);
      rows.push(tally);
      say(`fuzz ${design}: ${opts.inputs} inputs, seed ${opts.seed}`);
      await ctx.withServer(tally, {}, async (target) => {
        const common = { inputs: opts.inputs, seed: opts.seed, scale: ctx.scale, hangMs: opts.hangMs, batch: 50 };
        const ids = design === 'http' ? await fuzzHttp(target, common, tally) : await fuzzWs(target, { ...common, protocol: design }, tally);
        await checkRecords(target.url, ids, tally, opts.settleMs);
        await checkQuiescent(target.url, tally, opts.settleMs);
      }, true);
    }
  }
  for (const name of ['disconnect', 'slow-reader', 'concurrency', 'signals'] as const) {
    if (!want(name)) continue;
    say(`${name}`);
    const mod = await import(`./${name}.js`);
    rows.push(...((await mod.run(ctx)) as Tally[]));
  }
  return rows;
}
