/**
 * Per-response instrumentation: a timeline of spans (one per stage run) and
 * counters (items validated, tokens tokenized, bytes scanned, ...).
 *
 * Every pipeline stage and the engine record into one `RunMetrics`; the
 * timing event and the server's run records are built from it. Times are
 * milliseconds relative to the response's start, from an injected `now()`.
 */
import type { TimingSpan } from '../protocol/events.js';

export const COUNTERS = [
  'auth_checks',
  'validate_full',
  'validate_incremental',
  'items_validated',
  'render_full',
  'render_incremental',
  'items_tokenized',
  'tokens_tokenized',
  'rendered_cache_hits',
  'safety_full',
  'safety_incremental',
  'bytes_scanned',
  'route_full',
  'route_reused',
  'remote_hops',
  'store_hydrations',
  'store_reads',
  'model_calls',
  'prompt_tokens',
  'cached_tokens',
  'output_tokens',
  'pauses',
  'appends',
  'duplicate_items_dropped',
  'duplicate_appends',
  'post_inference',
  'post_inference_failed',
  'billing_records',
  'persisted',
  'events_sent',
  /** Events a throwing sink did not take (the run then fails once). */
  'events_unsent',
  /** A stored response's write that failed. */
  'persist_failed',
  /** Engine steps (records, lifecycle bookkeeping) that threw and were contained. */
  'engine_faults',
  /** Compaction items read back (they replaced the history they summarise). */
  'compactions_applied',
  /** Server-side compactions (`context_management`) done during a run. */
  'compactions',
  /** Spans past the run's bound (`--max-run-spans`): added to their stage's total, not listed. */
  'spans_dropped',
  /** Chaos knobs (engine/faults.ts): faults injected into this run, by kind, and the ms its injected delays took. */
  'chaos_errors',
  'chaos_disconnects',
  'chaos_stalls',
  'chaos_latency',
  'chaos_delay_ms',
] as const;
export type Counter = (typeof COUNTERS)[number];
/** Every counter at 0: copied per response (building it from the list each time cost more than the copy). */
const ZERO_COUNTERS = Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Record<Counter, number>;

/**
 * What one listed span holds while its run lives (its stage's reference and two unboxed numbers, with the arrays'
 * spare capacity): 31 bytes measured on Node 20 over 2 million spans. Charged to the server-wide byte budget.
 */
export const SPAN_HELD_BYTES = 32;
/** Spans paid for at once: one charge per this many, so a short response makes one. */
export const SPAN_CHUNK = 64;

/**
 * Where a timeline's spans are charged (the server-wide byte budget, modes/server-bytes.ts `RunCharge`): false when
 * the bytes would pass it (nothing charged); the span is then not listed.
 */
export interface SpanBudget {
  tryAdd(bytes: number): boolean;
  /**
   * Token ids a render or an append is making, charged as they are made, checked: throws `server_busy` (nothing
   * charged) when they would pass the budget. Held until the run keeps them under its own charge (`keptHeld`) or
   * `madeDone` gives them back.
   */
  make?(bytes: number): void;
  /** `bytes` of the ids made (all, without it) are now kept under the run's charge, or were thrown away (a refused append): release them. */
  madeDone?(bytes?: number): void;
}

/** What a token id holds in a prompt (`TokenBuffer.bytes`: a Uint32Array). */
export const TOKEN_HELD_BYTES = 4;

export class RunMetrics {
  /**
   * The timeline, kept flat: each span's stage, and its start and duration
   * (two numbers per span, in an array V8 stores unboxed) — not an object and
   * two heap numbers per span for as long as the run lives. `spans`
   * builds the objects when the timeline is read (the timing event, a record).
   */
  private readonly stages: string[] = [];
  private readonly times: number[] = [];
  readonly counters: Record<Counter, number>;
  readonly t0: number;
  /**
   * Event emission (building wire events and the sink's serialisation and
   * socket write), accumulated rather than one span per event: a delta is
   * microseconds, a span object per delta would cost more than it measures.
   * Reported as the `emit` total; the engine subtracts the part spent inside
   * a model call from that call's decode span.
   */
  emitMs = 0;
  /** Events sent inside the timed emission. */
  emitCount = 0;

  /** Durations of the spans past `maxSpans`, per stage: still in `totals()`, never listed. */
  private dropped: Map<string, number> | null = null;

  /** Spans listed before the next charge to `budget` (a chunk at a time); Infinity without a budget. */
  private paidSpans: number;

  /**
   * `maxSpans` bounds the timeline (`--max-run-spans`): a long-lived run
   * records spans at every append, refused or empty ones included, so a
   * client could otherwise grow it without bound while the run kept nothing
   * else (outside attack).
   */
  constructor(
    readonly now: () => number = () => performance.now(),
    readonly maxSpans: number = Infinity,
    /**
     * The server-wide byte budget the spans are charged to while the run lives (`SPAN_HELD_BYTES` each, by
     * `SPAN_CHUNK`): a paused run's timeline grows with every append, refused ones included, and up to `maxSpans`
     * (~3 MB at the default) per run it was counted nowhere (outside attack). Past the budget a span is not listed,
     * as past `maxSpans`. The owner gives the charge back when the run ends (modes/session.ts).
     */
    private readonly budget: SpanBudget | null = null,
  ) {
    this.t0 = now();
    this.counters = { ...ZERO_COUNTERS };
    this.paidSpans = budget === null ? Infinity : 0;
  }

  count(c: Counter, n = 1): void {
    this.counters[c] += n;
  }

  /**
   * `tokens` more token ids made for this run's prompt (a slice of a render or an append being tokenized): charged to
   * the server-wide byte budget as they are made, checked (`server_busy` past it, thrown). They were charged only at
   * the next model call, unchecked, so text of a token a byte, admitted at its size, held four times that in ids
   * beyond the budget: 12 creates of 4 MB held 149 MiB under a 32 MiB budget (outside attack atk45 F1). A field, so
   * the tokenizer's loops take it as it is.
   */
  readonly chargeTokens = (tokens: number): void => {
    if (tokens <= 0 || this.budget?.make === undefined) return;
    this.budget.make(tokens * TOKEN_HELD_BYTES);
    this.tokenBytes += tokens * TOKEN_HELD_BYTES;
  };

  /** Bytes of token ids `chargeTokens` charged so far, ever: a mark for `releaseTokensSince`. */
  tokenBytes = 0;

  /** The token ids charged since `mark` were thrown away (an append refused after they were made): released. */
  releaseTokensSince(mark: number): void {
    if (this.tokenBytes > mark) this.budget?.madeDone?.(this.tokenBytes - mark);
  }

  /** Record a span measured elsewhere (e.g. auth at the upgrade, before the run existed). */
  span(stage: string, startAbs: number, endAbs: number): void {
    const listed = this.stages.length;
    if (listed >= this.maxSpans || (listed >= this.paidSpans && !this.pay(listed))) {
      this.dropped ??= new Map();
      this.dropped.set(stage, (this.dropped.get(stage) ?? 0) + (endAbs - startAbs));
      this.counters.spans_dropped++;
      return;
    }
    this.stages.push(stage);
    this.times.push(round(startAbs - this.t0), round(endAbs - startAbs));
  }

  /** Charge the budget for the next chunk of spans (no more than `maxSpans` allows); false when it is full. */
  private pay(listed: number): boolean {
    const n = Math.min(SPAN_CHUNK, this.maxSpans - listed);
    if (!this.budget!.tryAdd(n * SPAN_HELD_BYTES)) return false;
    this.paidSpans = listed + n;
    return true;
  }

  /** The spans so far, in order: a new array of new objects at each read (the caller may keep it). */
  get spans(): TimingSpan[] {
    const { stages, times } = this;
    const out: TimingSpan[] = new Array(stages.length);
    for (let i = 0; i < stages.length; i++) out[i] = { stage: stages[i]!, start_ms: times[2 * i]!, duration_ms: times[2 * i + 1]! };
    return out;
  }

  /** Time a synchronous stage. */
  time<T>(stage: string, fn: () => T): T {
    const s = this.now();
    try {
      return fn();
    } finally {
      this.span(stage, s, this.now());
    }
  }

  async timeAsync<T>(stage: string, fn: () => Promise<T>): Promise<T> {
    const s = this.now();
    try {
      return await fn();
    } finally {
      this.span(stage, s, this.now());
    }
  }

  /** Add the time of one timed piece of emission and the events it sent (see `emitMs`). */
  emitted(ms: number, events: number): void {
    this.emitMs += ms;
    this.emitCount += events;
  }

  /**
   * Total duration per stage name (a stage may run many times in a run), in
   * the order each stage first ran (stages seen only past `maxSpans` last),
   * spans past the bound included, and `emit` when anything was emitted.
   * Added up when asked (a run's timing event and final record, a live
   * record when it is read), which copies the spans anyway: no running sums
   * kept per run.
   */
  totals(): Record<string, number> {
    const out: Record<string, number> = {};
    const { stages, times } = this;
    for (let i = 0; i < stages.length; i++) {
      const stage = stages[i]!;
      out[stage] = round((Object.hasOwn(out, stage) ? out[stage]! : 0) + times[2 * i + 1]!);
    }
    if (this.dropped) for (const [stage, ms] of this.dropped) out[stage] = round((Object.hasOwn(out, stage) ? out[stage]! : 0) + ms);
    if (this.emitMs > 0 || this.emitCount > 0) out['emit'] = round(this.emitMs);
    return out;
  }

  elapsed(): number {
    return round(this.now() - this.t0);
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
