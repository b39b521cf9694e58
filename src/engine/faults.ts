/**
 * Chaos knobs (`llr serve --chaos SPEC`, docs/reliability.md "Chaos knobs"):
 * faults injected on purpose so client-resilience research can watch what a
 * client does when the server misbehaves. Off by default; nothing here runs
 * unless a rule is configured.
 *
 * A rule is `KIND@POINT[:PROBABILITY[:MS]]`:
 *   KIND         error | disconnect | stall | latency
 *   POINT        first-token (each model call, before its first output event)
 *              | mid-stream  (each model call, after its first output token,
 *                             before the rest of its stream)
 *              | pause       (a model turn that ended with client tool calls,
 *                             before the client is told: long-lived before
 *                             `response.done`, ws/http before the terminal event)
 *   PROBABILITY  0–1, default 1; drawn per occurrence of the point
 *   MS           stall and latency only (required), 0–2^31-1
 *
 * Decisions are seeded and stateless: whether rule r fires at the k-th
 * occurrence of its point in the n-th run the server started is a hash of
 * (seed, n, r, k), so the same seed and the same order of runs give the same
 * faults whatever the interleaving inside the server. This module decides
 * and waits; `ResponseRun` applies an error or a disconnect (ending the run
 * once), and the transport drops the connection through the run's `drop`
 * hook. It leaves out faults outside a run (refused upgrades, slow accepts).
 */
import type { Logger } from 'pino';
import type { Clock } from '../model/clock.js';
import { hashString, mulberry32 } from '../model/rng.js';
import { quoted } from '../terminal-text.js';
import type { RunMetrics } from '../pipeline/metrics.js';

export const CHAOS_KINDS = ['error', 'disconnect', 'stall', 'latency'] as const;
export const CHAOS_POINTS = ['first-token', 'mid-stream', 'pause'] as const;
export type ChaosKind = (typeof CHAOS_KINDS)[number];
export type ChaosPoint = (typeof CHAOS_POINTS)[number];

export interface ChaosRule {
  kind: ChaosKind;
  point: ChaosPoint;
  probability: number;
  /** Delay of a stall or latency rule, ms (0 for error and disconnect). */
  ms: number;
}

/** The longest delay a Node timer honours. */
const MAX_MS = 2 ** 31 - 1;

export const CHAOS_GRAMMAR = 'KIND@POINT[:PROBABILITY[:MS]] (KIND: error|disconnect|stall|latency; POINT: first-token|mid-stream|pause; PROBABILITY 0-1, default 1; MS required for stall and latency)';

/** Parse one `--chaos` spec; throws an Error whose message names the spec and the grammar. */
export function parseChaosSpec(spec: string): ChaosRule {
  const bad = (why: string) => new Error(`--chaos ${quoted(spec)}: ${why}; expected ${CHAOS_GRAMMAR}, e.g. error@first-token:0.1 or stall@pause:0.2:3000`);
  const m = /^([a-z-]+)@([a-z-]+)(?::([^:]*))?(?::([^:]*))?$/.exec(spec.trim());
  if (!m) throw bad('malformed');
  const [, kind, point, p, ms] = m;
  if (!(CHAOS_KINDS as readonly string[]).includes(kind!)) throw bad(`unknown kind '${kind}'`);
  if (!(CHAOS_POINTS as readonly string[]).includes(point!)) throw bad(`unknown point '${point}'`);
  const probability = p === undefined ? 1 : strictNumber(p);
  if (!(probability >= 0 && probability <= 1)) throw bad(`the probability must be a number from 0 to 1, got ${quoted(p!)}`);
  const delays = kind === 'stall' || kind === 'latency';
  if (delays && ms === undefined) throw bad(`a ${kind} needs a duration in ms`);
  if (!delays && ms !== undefined) throw bad(`${kind === 'error' ? 'an' : 'a'} ${kind} takes no duration`);
  const d = ms === undefined ? 0 : strictNumber(ms);
  if (!(Number.isInteger(d) && d >= 0 && d <= MAX_MS)) throw bad(`the duration must be an integer number of ms from 0 to ${MAX_MS}, got ${quoted(ms!)}`);
  return { kind: kind as ChaosKind, point: point as ChaosPoint, probability, ms: d };
}

function strictNumber(s: string): number {
  return s.trim() === '' ? NaN : Number(s);
}

/** Whether rule `rule` fires at occurrence `occurrence` of its point in run number `run`: deterministic for a seed. */
export function chaosDraw(seed: number, run: number, rule: number, occurrence: number): number {
  return mulberry32(hashString(`${seed}:${run}:${rule}:${occurrence}`))();
}

/** The server's chaos configuration: numbers the runs and hands each its own `RunFaults`. */
export class Chaos {
  private runs = 0;

  constructor(
    readonly rules: readonly ChaosRule[],
    readonly seed: number,
    private readonly clock: Clock,
  ) {}

  /** The fault injector of a new run, or null when no rule is configured. */
  forRun(metrics: RunMetrics, log: Logger): RunFaults | null {
    if (this.rules.length === 0) return null;
    return new RunFaults(this.rules, this.seed, this.runs++, this.clock, metrics, log);
  }
}

/** What a point asks the run to do after its delays: nothing, fail, or drop the connection. */
export type Injected = 'error' | 'disconnect' | null;

export class RunFaults {
  private readonly seen = new Map<ChaosPoint, number>();

  constructor(
    private readonly rules: readonly ChaosRule[],
    private readonly seed: number,
    private readonly run: number,
    private readonly clock: Clock,
    private readonly metrics: RunMetrics,
    private readonly log: Logger,
  ) {}

  /**
   * One occurrence of `point`: its rules are tried in the order given;
   * stalls and latency wait here (ended early, timer cleared, when `signal`
   * aborts: a stop, a disconnect, a shutdown); the first error or
   * disconnect that fires is returned and the later rules are not tried.
   */
  async at(point: ChaosPoint, signal: AbortSignal, responseId: string): Promise<Injected> {
    const k = this.seen.get(point) ?? 0;
    this.seen.set(point, k + 1);
    for (const [i, rule] of this.rules.entries()) {
      if (rule.point !== point || signal.aborted) continue;
      if (chaosDraw(this.seed, this.run, i, k) >= rule.probability) continue;
      const m = this.metrics;
      this.log.info({ response_id: responseId, fault: rule.kind, point, ms: rule.ms, rule: i }, 'chaos: injected fault');
      switch (rule.kind) {
        case 'error':
          m.count('chaos_errors');
          return 'error';
        case 'disconnect':
          m.count('chaos_disconnects');
          return 'disconnect';
        case 'stall':
        case 'latency': {
          m.count(rule.kind === 'stall' ? 'chaos_stalls' : 'chaos_latency');
          const start = this.clock.now();
          try {
            await this.clock.sleep(rule.ms, signal);
          } catch {
            // Ended while waiting: the run is closing, the caller sees it.
          }
          const end = this.clock.now();
          m.count('chaos_delay_ms', Math.round(end - start));
          m.span(`chaos_${rule.kind}`, start, end);
          break;
        }
        default: {
          const never: never = rule.kind;
          throw new Error(`unknown chaos kind ${String(never)}`);
        }
      }
    }
    return null;
  }
}

/**
 * Where a model call's stream is, for the `first-token` and `mid-stream`
 * points: `next()` is called before each output event (not `prefill`) and
 * says which point, if any, that moment is. Each point happens at most once
 * per model call.
 */
export class StreamPoints {
  private events = 0;
  private tokens = 0;
  private midDone = false;

  next(carriesTokens: boolean): ChaosPoint | null {
    const first = this.events++ === 0;
    let point: ChaosPoint | null = null;
    if (first) point = 'first-token';
    else if (this.tokens > 0 && !this.midDone) {
      this.midDone = true;
      point = 'mid-stream';
    }
    if (carriesTokens) this.tokens++;
    return point;
  }
}
