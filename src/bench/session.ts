/**
 * One `llr bench` run's moving parts, shared by its phases (runner.ts): the
 * server processes it started (each with its SQLite file, removed at the
 * end), the results file written after every run, the progress bar, and the
 * measured replay itself (`measure`: one run recorded, a failure kept and
 * the bench going on, a crashed server thrown), with its unmeasured
 * warm-up.
 *
 * Leaves out the order of the phases and what each measures (runner.ts,
 * phases.ts) and the numbers' derivation (derive.ts, summaries.ts).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { ClientProtocol } from '../client/index.js';
import { ServerCrashedError, ServerProcess, cpuMs, deadline, type ServerStats } from './guard.js';
import { deriveRun, hiddenTokensPerCall, msPerToken } from './derive.js';
import { spawnServer, type Child } from './processes.js';
import type { Progress } from './progress.js';
import { replayRun } from './replay.js';
import { SpawnAhead } from './spawn-ahead.js';
import type { ModelConfig, Phase, Results, ResultsFile, RunMeta, RunRecord } from './results.js';
import type { BenchConfig } from './runner.js';
import { recompute } from './verdicts.js';
import { flatModelTurns, modelCallCount, presentedContextBytes } from '../workload/replayable.js';
import { toolWaitMs, type Workload } from '../workload/types.js';
import type { ReplayTurn } from '../model/types.js';
import { MAX_TIMER_MS } from '../limit-flags.js';

/** One repetition of one design in a replay phase. */
export type PlanStep = { design: ClientProtocol; rep: number };

export function rotate<T>(xs: readonly T[], by: number): T[] {
  const k = xs.length ? by % xs.length : 0;
  return [...xs.slice(k), ...xs.slice(0, k)];
}

export class BenchSession {
  /** The raw WebSocket echo server (loopback RTT, the stream phase's reference). */
  frames: Child | null = null;
  private runNo = 0;
  private serverNo = 0;
  private readonly servers = new Set<ServerProcess>();
  private readonly dbFiles: string[] = [];
  /** Servers started ahead of need (spawn-ahead.ts): keys in the order the phases take them. */
  private ahead: SpawnAhead<ServerProcess> | null = null;
  private order: string[] = [];
  private nextUp = 0;
  private lapStart = performance.now();

  constructor(
    readonly cfg: BenchConfig,
    readonly out: string,
    readonly results: Results,
    private readonly file: ResultsFile,
    readonly bar: Progress,
  ) {}

  /** Recompute summaries and targets and write results.json. */
  save(): void {
    recompute(this.results);
    this.file.write();
  }

  /** Write results.json as it is. */
  write(): void {
    this.file.write();
  }

  async start(what: string, args: string[], nodeArgs: string[] = []): Promise<ServerProcess> {
    const cfg = this.cfg;
    // --instant sets the model's knobs itself; passing them too would override it.
    const knobs = args.includes('--instant') ? [] : ['--ttft-ms', String(cfg.ttftMs), '--prefill-tps', String(cfg.prefillTps)];
    const db = join(this.out, `llr-server-${++this.serverNo}.sqlite`);
    if (cfg.store === 'sqlite') this.dbFiles.push(db, `${db}-wal`, `${db}-shm`);
    const callHops = cfg.callHops > 0 && cfg.callHopMs > 0 ? ['--call-hop-ms', String(cfg.callHopMs), '--call-hops', String(cfg.callHops)] : [];
    const common = [...knobs, '--hop-ms', String(cfg.hopMs), '--hops', String(cfg.hops), ...callHops, '--store', cfg.store === 'sqlite' ? db : 'memory'];
    const s = new ServerProcess(await deadline(spawnServer([...common, ...args], { nodeArgs }), 30_000, `starting ${what}`), what);
    this.servers.add(s);
    return s;
  }

  async stop(s: ServerProcess): Promise<void> {
    this.servers.delete(s);
    await s.stop();
  }

  /**
   * The servers the phases will need, by key, in the order they take them,
   * and how to start each: every warm-up starts the next two while it runs
   * and settles them before it returns, so a measured run never shares the
   * CPU with a starting server.
   */
  planServers(order: string[], spawn: (key: string) => Promise<ServerProcess>): void {
    this.order = order;
    this.ahead = new SpawnAhead(spawn);
  }

  /** The server for `key`: started ahead, or now. */
  take(key: string): Promise<ServerProcess> {
    if (!this.ahead) throw new Error('planServers() was not called');
    this.nextUp = Math.max(this.nextUp, this.order.indexOf(key) + 1);
    return this.ahead.take(key);
  }

  /** Start the next `n` servers of the plan (they start while unmeasured work runs). */
  prepareNext(n = 2): void {
    for (; this.ahead && n > 0 && this.nextUp < this.order.length; n--) this.ahead.prepare(this.order[this.nextUp++]!);
  }

  /** Wait until no server is starting (before a measured run). */
  async settle(): Promise<void> {
    await this.ahead?.settle();
  }

  /** The planned server `key` for the duration of `use`, stopped however it ends. */
  async withPlanned<T>(key: string, use: (s: ServerProcess) => Promise<T>): Promise<T> {
    const server = await this.take(key);
    try {
      return await use(server);
    } finally {
      await this.stop(server);
    }
  }

  /** Wall time since the last lap, seconds, as `results.phase_seconds[name]` (the quick form's budget, docs/benchmarks.md). */
  lap(name: string): void {
    (this.results.phase_seconds ??= {})[name] = Math.round((performance.now() - this.lapStart) / 100) / 10;
    this.lapStart = performance.now();
  }

  /** A server for the duration of `use`, stopped however it ends. */
  async withServer<T>(what: string, args: string[], use: (s: ServerProcess) => Promise<T>, nodeArgs: string[] = []): Promise<T> {
    const server = await this.start(what, args, nodeArgs);
    try {
      return await use(server);
    } finally {
      await this.stop(server);
    }
  }

  modelOf(tps: number | null): ModelConfig {
    const cfg = this.cfg;
    return {
      tokens_per_second: tps,
      ttft_ms: tps === null ? 0 : cfg.ttftMs,
      prefill_tokens_per_second: tps === null ? null : cfg.prefillTps,
      hop_ms: cfg.hopMs,
      hops: cfg.hops,
    };
  }

  private timeoutFor(w: Workload, tps: number | null, design: ClientProtocol): number {
    return runDeadlineMs(w, tps, this.cfg, design);
  }

  /** One measured replay; a failure is recorded, a crash is thrown. */
  async measure(server: ServerProcess, w: Workload, meta: RunMeta, hidden: number[]): Promise<RunRecord> {
    const { bar, results } = this;
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
          nonce: `[llr bench run ${String(++this.runNo).padStart(5, '0')}]`,
          toolFactor: meta.tool_factor,
          timeoutMs: this.timeoutFor(w, meta.model.tokens_per_second, meta.design),
          onCall: (call, total) => bar.note(`model call ${call} of ${total}`),
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
    this.file.write();
    bar.tick(record.ok ? `${Math.round(record.e2e_ms)} ms` : 'failed');
    return record;
  }

  /**
   * An unmeasured run: JIT, tokenizer tables and the shared preamble's prefix
   * cache. With a timed model only the first user turn is replayed (the
   * replay policy is stateless, so a shorter conversation is still on script);
   * so it is for quick's ablation servers (`firstTurn`), whose single run per
   * switch reads only the rendered-token cache's ~4x and exact counters, and
   * where the cache-off server's whole-run warm-up alone took ~5 s.
   */
  async warm(server: ServerProcess, w: Workload, tps: number | null, what: string, firstTurn = tps !== null): Promise<void> {
    this.bar.step(`${what}: warm-up`);
    const short = firstTurn && w.userTurns.length > 1 ? { ...w, userTurns: w.userTurns.slice(0, 1) } : w;
    // The next servers start while this unmeasured run goes on, and are up before the measured runs begin.
    this.prepareNext();
    await server.race(
      replayRun({
        design: 'ws',
        url: server.url,
        workload: short,
        nonce: `[llr bench warm ${String(++this.runNo).padStart(4, '0')}]`,
        toolFactor: 0,
        timeoutMs: this.timeoutFor(short, tps, 'ws'),
        onCall: (call, total) => this.bar.note(`model call ${call} of ${total}`),
      }),
    );
    await this.settle();
    this.bar.tick();
  }

  async replayPhase(phase: Phase, server: ServerProcess, w: Workload, tps: number | null, plan: PlanStep[], off: string | null = null): Promise<void> {
    const hidden = hiddenTokensPerCall(w);
    for (const { design, rep } of plan) {
      await this.measure(server, w, { phase, design, model: this.modelOf(tps), rep, tool_factor: phase === 'grid' ? this.cfg.toolFactor : 0, off }, hidden);
    }
  }

  /** Every design `reps(design)` times, the order rotating each repetition. */
  interleaved(reps: (d: ClientProtocol) => number): PlanStep[] {
    const designs = this.cfg.designs;
    const plan: PlanStep[] = [];
    const most = Math.max(0, ...designs.map(reps));
    for (let rep = 0; rep < most; rep++) for (const design of rotate(designs, rep)) if (rep < reps(design)) plan.push({ design, rep });
    return plan;
  }

  /**
   * Interrupted (a signal): keep what was measured, marked failed, and stop
   * the processes without waiting. The caller decides how the process exits.
   */
  interrupt(): void {
    const results = this.results;
    results.status = 'failed';
    results.error = 'interrupted';
    results.finished_at = new Date().toISOString();
    this.save();
    for (const s of this.servers) void s.stop();
    void this.frames?.stop();
  }

  /** Stop what is still running and remove the servers' database files. */
  async close(): Promise<void> {
    // Spawns still in flight finish first, so every process started is stopped.
    await this.ahead?.drain();
    for (const s of [...this.servers]) await this.stop(s).catch(() => {});
    await this.frames?.stop().catch(() => {});
    for (const f of this.dbFiles) rmSync(f, { force: true });
  }
}

/**
 * A run's deadline: a minute plus three times what its model, tools and the API's own work should take
 * (`--run-timeout-ms` overrides it), at most MAX_TIMER_MS (2^31 - 1 ms, the longest a Node timer takes): a workload recording 1e30 output tokens made it
 * 7.5e29 ms, which Node's timer fired after 1 ms ("ws: cannot connect …: the run did not finish within 7.5e+29 ms").
 */
export function runDeadlineMs(w: Workload, tps: number | null, cfg: Pick<BenchConfig, 'runTimeoutMs' | 'toolFactor' | 'ttftMs' | 'hops' | 'hopMs' | 'callHops' | 'callHopMs' | 'prefillTps'>, design?: ClientProtocol): number {
  return Math.min(MAX_TIMER_MS, uncappedDeadlineMs(w, tps, cfg, design));
}

/**
 * Whether `design` sends the whole conversation again at every call (the http designs; undefined: any design of a
 * grid, the longest): only those present what `presentedTokens` counts. Counted for every design, a hung ws or
 * long-lived replay of 2,000 calls of 100 KB outputs ran 41.8 h before its deadline (outside attack atk72 F2).
 */
function resends(design: ClientProtocol | undefined): boolean {
  return design === undefined || design === 'http' || design === 'http-stored';
}

function uncappedDeadlineMs(w: Workload, tps: number | null, cfg: Pick<BenchConfig, 'runTimeoutMs' | 'toolFactor' | 'ttftMs' | 'hops' | 'hopMs' | 'callHops' | 'callHopMs' | 'prefillTps'>, design?: ClientProtocol): number {
  if (cfg.runTimeoutMs !== null) return cfg.runTimeoutMs;
  const least = leastRunMs(w, tps, cfg);
  // The context as recorded, else as its text suggests (4 characters a token), at least 50,000 tokens: a workload
  // without counts whose tool outputs held millions of tokens was allowed 50,000 tokens' prefill (outside attack).
  const context = w.recorded.input_tokens.at(-1) ?? Math.max(50_000, least.prefillTokens * (MAX_CHARS_PER_TOKEN / 4));
  const prefill = tps === null ? 0 : context * msPerToken(cfg.prefillTps) * 2;
  return Math.round(60_000 + 3 * (least.ms + prefill + apiWorkMs(w, least.calls, resends(design) ? presentedTokens(w) : 0)));
}

/** Each workload's presented tokens, worked out once (a deadline is asked for at every run). */
const presented = new WeakMap<Workload, number>();

/**
 * The context tokens a replay of `w` presents over its calls, at the most characters a token (MAX_CHARS_PER_TOKEN) of
 * its JSON: a floor, whatever the recording counted.
 */
function presentedTokens(w: Workload): number {
  let n = presented.get(w);
  if (n === undefined) {
    n = Math.floor(presentedContextBytes(w) / MAX_CHARS_PER_TOKEN);
    presented.set(w, n);
  }
  return n;
}

/**
 * Characters of text a run's conversation holds: its user turns' input (as JSON), the model's text and call arguments,
 * and the tools' outputs (instructions and tool definitions left out: runs may share their prefill through the cache).
 */
export function workloadTextChars(w: Workload): number {
  let chars = 0;
  for (const u of w.userTurns) {
    chars += JSON.stringify(u.input).length;
    for (const t of u.modelTurns) for (const o of t.output) chars += o.type === 'message' ? o.text.length : o.type === 'function_call' ? o.arguments.length : 0;
  }
  for (const o of Object.values(w.toolOutputs)) chars += o.output.length;
  return chars;
}

/**
 * Characters per token at the most, for the least prefill a conversation's text needs: o200k averages ~4 on prose and
 * code; twice that keeps the estimate a floor for all but long runs of one repeated character.
 */
const MAX_CHARS_PER_TOKEN = 8;

/**
 * Tokens a model call's visible output (its text, its calls' names and arguments) decodes at the least, estimated
 * without the tokenizer: its characters over MAX_CHARS_PER_TOKEN, or, for text outside ASCII, a token for each code
 * point past U+FFFF (o200k spells an emoji as one to three tokens) and one for every two others past U+007F (a
 * common pair of CJK characters is one token, a rare character one or more; accented Latin merges inside words). `test/unit/bench-deadline.test.ts` holds it
 * to within a third of the real count on such texts.
 */
export function shownTokensFloor(turn: ReplayTurn): number {
  let chars = 0;
  let bmp = 0;
  let astral = 0;
  for (const o of turn.output) {
    const texts = o.type === 'message' ? [o.text] : o.type === 'function_call' ? [o.name, o.arguments] : [];
    for (const t of texts) {
      chars += t.length;
      for (let i = 0; i < t.length; i++) {
        const c = t.charCodeAt(i);
        // A surrogate pair is one code point: its high half counts it.
        if (c >= 0xd800 && c <= 0xdbff) astral++;
        else if (c > 0x7f && (c < 0xdc00 || c > 0xdfff)) bmp++;
      }
    }
  }
  return Math.max(Math.ceil(chars / MAX_CHARS_PER_TOKEN), astral + Math.ceil(bmp / 2));
}

/**
 * The least time one replay run of `w` takes at `tps` (null: the instant model), ms: each model call's time to first
 * token and remote hops, the recorded output tokens (100 a call where none is recorded), or the tokens of what the call shows at the least
 * (shownTokensFloor) where that is more, at the decode rate, its
 * conversation's text prefilled once at the prefill rate (a character count over MAX_CHARS_PER_TOKEN), and the
 * recorded tool time × --tool-factor. The API's own work is left out.
 */
export function leastRunMs(w: Workload, tps: number | null, cfg: Pick<BenchConfig, 'toolFactor' | 'ttftMs' | 'hops' | 'hopMs' | 'callHops' | 'callHopMs' | 'prefillTps'>): { ms: number; calls: number; outputTokens: number; prefillTokens: number } {
  const calls = modelCallCount(w);
  // A replay decodes at least the tokens of what a call shows, whatever it recorded: a call of 1,048,576 emoji
  // recording no count was allowed 100 tokens and missed its deadline by minutes (outside attack atk66 F2).
  const outputTokens = flatModelTurns(w).reduce((n, t) => n + Math.max(t.output_tokens ?? 100, shownTokensFloor(t)), 0);
  const tools = Object.values(w.toolOutputs).reduce((n, o) => n + toolWaitMs(o.duration_ms), 0) * cfg.toolFactor;
  // Every token of the conversation is prefilled once at least (a run shares only its preamble with others through the
  // cache): left out, a run of large tool outputs at a slow prefill rate waited silently (outside attack atk41 F2).
  const prefillTokens = tps === null ? 0 : Math.floor(workloadTextChars(w) / MAX_CHARS_PER_TOKEN);
  const model = tps === null ? 0 : calls * (cfg.ttftMs + 2 * cfg.hops * cfg.hopMs + cfg.callHops * cfg.callHopMs) + outputTokens * msPerToken(tps) + prefillTokens * msPerToken(cfg.prefillTps);
  return { ms: model + tools, calls, outputTokens, prefillTokens };
}

/**
 * A generous allowance for the API's own work over a run, for its deadline: 20 ms a model call and 2 µs for
 * every token of context a call presents (what the http design re-processes on every call, so its share grows
 * with the square of the run's length): as recorded, or as the replay presents it (`presentedTokens`, its JSON
 * over MAX_CHARS_PER_TOKEN) where that is more. Without it the deadline was a minute whatever the run's length with
 * the instant model, and a replay of 5,000 tool steps failed on long-lived and http (outside attack).
 */
export function apiWorkMs(w: Workload, calls: number, presentedTokens = 0): number {
  const recorded = w.recorded.input_tokens;
  let tokens = 0;
  for (const n of recorded) tokens += n;
  // Calls the recording has no count for are taken at its last count (or 50,000 tokens).
  tokens += Math.max(0, calls - recorded.length) * (recorded.at(-1) ?? 50_000);
  // Or what the replay presents, where more: a run the recorded agent kept small by compacting inside a user turn
  // presents its full history (1.5 G tokens against 46 M recorded over 400 calls), and a file without counts may
  // present far more than 50,000 tokens a call; the http replay of either missed its deadline (outside attack atk68 F3).
  return calls * 20 + Math.max(tokens, presentedTokens) * 0.002;
}
