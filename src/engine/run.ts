/**
 * One Response: the async sampling loop. It streams each model call's items
 * as wire events and, when the model calls client tools, either ends the
 * response (ws, http: the client continues with a new one) or pauses on the
 * pause registry and resumes in the same response when the client appends
 * the outputs (long-lived). The response ends exactly once — completed,
 * cancelled, incomplete or failed — whatever throws (the model, the sink,
 * records, billing, the store): `done` never rejects. A stored response is
 * written before its terminal event (unless `overlap_persist`); billing and
 * the log run once, inline or overlapped, and a timing event closes the
 * stream.
 *
 * Pre-inference work is done before a run exists (by the mode, see
 * `RunPlan`); the run only does the incremental work of appended items.
 * Translating one model call into wire events is `Segment`'s job. The run
 * numbers its own events; the sink must serialise or copy synchronously.
 */
import type { ModelRequest } from '../model/types.js';
import { WireError, responseErrorCode, toWireError } from '../protocol/errors.js';
import { DeltaBatch, echoesLong, forgetOutputBytes, keptOutputBytes, numberedInPlace, warmEchoes, type DeltaHead, type EventLogprob } from '../protocol/event-json.js';
import { TIMING_EVENT, type CreateParams, type LifecycleType, type ServerEvent, type UnnumberedEvent } from '../protocol/events.js';
import { isIncompleteReason, makeUsage, type InputItem, type Response, type ResponseStatus } from '../protocol/objects.js';
import { withFields } from '../protocol/fields.js';
import { ownInputItems, type AppendedItems, type PreparedPut, type StoredResponse } from '../store/types.js';
import { THIS_RUNNER } from '../store/runner.js';
import { runCooperative } from '../cooperative.js';
import type { Counter, RunMetrics } from '../pipeline/metrics.js';
import { appendOutputCooperative, commitItems, reserveFor, tokenizeItems, type RenderedContext } from '../pipeline/render.js';
import type { RouteDecision } from '../pipeline/route.js';
import { checkFull, checkIncremental } from '../pipeline/checks.js';
import { answeredCallId, clientCallId, missingToolOutput, pendingCallsOf } from '../pipeline/validate.js';
import type { PostInferenceJob } from '../pipeline/post.js';
import { compactContext, compactThreshold, compactionDue } from '../pipeline/compaction.js';
import { PauseRegistry, RunClosedError, duplicateCallId } from './pause.js';
import { checkContext, ITEM_HELD_BYTES, RunKeep } from './budget.js';
import { Segment, carriesTokens, type ClientToolCall, type LogprobAllowance } from './segment.js';
import { leanSnapshot, newResponse, snapshot } from './response.js';
import type { RunRecord } from './records.js';
import { LiveRunRecord, plainRecord } from './run-record.js';
import type { Services } from './services.js';
import { StreamPoints, type ChaosPoint, type RunFaults } from './faults.js';

import type { Protocol } from '../protocol/designs.js';
/**
 * When a transport parsed a client's create or append (its frame or body:
 * the JSON and the event's shape), on the services' clock: charged to the
 * response it starts or extends as the `parse` / `parse_append` span.
 */
export interface ParseSpan {
  start: number;
  end: number;
}

export type { Protocol };

/** Why the pause watcher's sleep is aborted when the run ends (a shared reason: aborting without one builds a DOMException). */
const RUN_ENDED = new Error('run ended');

/**
 * The next run's abort controller, its signal already made. Node makes a controller's `AbortSignal` when it is first
 * read, an EventTarget costing ~4 µs, and every run reads it before its first model call: on a ws-mode continuation
 * that was on the path from `response.create` to the first event. One is made ahead in a later turn of the event
 * loop (`setImmediate`, after what the turn that took the last one writes), so a run takes a ready one.
 */
let spareAbort: AbortController | null = null;
let makingSpare = false;

function withSignal(c: AbortController): AbortController {
  void c.signal;
  return c;
}

function takeAbortController(): AbortController {
  const c = spareAbort ?? withSignal(new AbortController());
  spareAbort = null;
  if (!makingSpare) {
    makingSpare = true;
    setImmediate(() => {
      makingSpare = false;
      spareAbort ??= withSignal(new AbortController());
    });
  }
  return c;
}

/**
 * Appends that may wait behind the one being processed on a run (then `queue_full`), at least: a run admits as
 * many as a pause may wait for calls (`--max-pending-calls`), so a client answering each pending call in its own
 * append, all sent at once, is never refused (with 64 against 128 calls, 63 of them were: outside attack). Their
 * bytes are bounded besides, by `--max-server-bytes` (a WebSocket frame or HTTP body is charged while it waits).
 */
export const MAX_QUEUED_APPENDS = 64;
/**
 * Where a run's events go. `deltas`, when present, takes a batch of
 * consecutive deltas at once (each still its own numbered event: the
 * transport frames them into one write) and advances `batch.sent` as it
 * hands each over; absent, each delta goes through the sink alone.
 */
/** `backlog`: the transport's `Transport.backlog` (modes/transport.ts), a wait for a reader that fell behind. */
export type EventSink = ((event: ServerEvent) => void) & { deltas?: (batch: DeltaBatch) => void; flush?: () => void; backlog?: () => Promise<void> | null };

/**
 * The most output tokens the run takes from the model in one batch (the
 * model's `batchTokens`): tokens due at once go out in one hand-over and one
 * socket write. Equal to the simulated model's cooperative yield interval
 * (`YIELD_EVERY_TOKENS`), so an instant stream still gives the event loop a
 * turn between batches, and one batch holds the loop for well under 1 ms.
 */
export const DELTA_BATCH_TOKENS = 64;

/** Everything pre-inference work produced; the mode builds it, the run consumes it. */
export interface RunPlan {
  protocol: Protocol;
  params: CreateParams;
  context: RenderedContext;
  route: RouteDecision;
  /** This response's own input items (what the store keeps for it). */
  input: InputItem[];
  owner: string | null;
  connection: string | null;
  metrics: RunMetrics;
  /** What a client tool call does to the response. */
  onToolCalls: 'pause' | 'end';
  /**
   * What of `context` someone else already charges to the server-wide byte budget (a ws-mode connection's cache,
   * extended in place by this response): its token ids' bytes and its items then. The run charges only what grows
   * past them (`chargeKept`); absent: the whole context is the run's.
   */
  contextCharged?: { tokenBytes: number; items: number };
  postInference: 'inline' | 'overlapped';
  /**
   * An append's items as the mode reads them before any check (the long-lived designs replace each
   * `item_reference` by the stored item it names, or by the item of this run it names, `held`: the run is stored
   * only when it ends; or refuse it, `item_not_found`); absent, as sent.
   */
  resolveAppend?(items: readonly InputItem[], metrics: RunMetrics, signal: AbortSignal, held: (id: string) => InputItem | undefined): Promise<readonly InputItem[]>;
}

/** What the run may ask of whoever carries it. */
export interface RunHooks {
  /**
   * Drop the client's connection as a server-side fault (chaos knobs,
   * engine/faults.ts): WS closes with 1011, SSE ends without a terminal
   * event. Absent: the run just ends, detached.
   */
  drop?(): void;
  /**
   * A model call or a pause began, and what the run keeps that no client frame or body stands for now holds
   * `bytes`: its output (engine/budget.ts `itemBytes` of its items), its prompt's token ids (`TokenBuffer.bytes`) and
   * each context item's overhead (`ITEM_HELD_BYTES`). Kept while the model streams and while the client runs its
   * tools, so the session charges it to the server-wide byte budget (modes/server-bytes.ts `RunCharge`) until the
   * run ends.
   */
  keptHeld?(bytes: number): void;
}

type EndStatus = Exclude<ResponseStatus, 'queued' | 'in_progress'>;
interface EndReason {
  status: EndStatus;
  reason: string;
  error?: WireError;
}

export class ResponseRun {
  readonly response: Response;
  readonly metrics: RunMetrics;
  private seq = 0;
  private state: 'streaming' | 'paused' | 'ended' = 'streaming';
  /** `response.created` was sent (`streaming`). */
  private createdSent = false;
  private end: EndReason | null = null;
  private readonly pauses: PauseRegistry;
  private readonly abort = takeAbortController();
  private promptTokens = 0;
  private cachedTokens = 0;
  private cacheWriteTokens = 0;
  private outputTokens = 0;
  /** Of `outputTokens`, the model's hidden reasoning (usage.output_tokens_details.reasoning_tokens). */
  private reasoningTokens = 0;
  /** Text pieces this response may still list logprobs for (`Limits.maxLogprobTokens`), over all its model calls. */
  private readonly logprobs: LogprobAllowance;
  /** The custom (freeform) tools the request declares, by name (`ModelRequest.customTools`). */
  private readonly customTools: ReadonlySet<string>;
  private lastAppendAt = 0;
  /** Pauses so far: the pause-timeout watcher ends the run only if the pause it watched is still the current one. */
  private pauseNo = 0;
  private pausedAt = 0;
  /**
   * Whether the pause-timeout watcher's sleep on the injected clock is
   * running: one per run at a time, not one per pause (see `watchPause`).
   * It sleeps on the run's own abort signal, aborted when the run ends.
   */
  private watching = false;
  private inEmit = false;
  /**
   * While paused: ends the pause from `halt`, whatever the registry does
   * with its waits (a registry that lost one must not leave the run paused).
   */
  private endPause: ((err: Error) => void) | null = null;
  /** Times the run waited for its reader (`waitForReader`): the first is logged. */
  private readerWaits = 0;
  /** What clients appended, each batch after the output items it followed: stored with the response (store/types.ts). */
  private readonly appended: AppendedItems[] = [];
  /** What the run keeps besides its context (its appended items and output), held to the context's budget (engine/budget.ts). */
  private readonly keep: RunKeep;
  /** The wall-clock ms `response.created_at` was taken from (whole seconds on the wire): a stored response's age counts from it. */
  private readonly createdMs: number;
  /** Appends run one at a time (see `append`). */
  private appendTail: Promise<void> = Promise.resolve();
  private appendsWaiting = 0;
  /** A long stored record's serialisation, made by `prepareRecord` for the write in `finish`. */
  private prepared: PreparedPut | undefined;
  /** Chaos knobs for this run; null (the default) when none are configured. */
  private readonly faults: RunFaults | null;
  /** Resolves with the final Response after the terminal event; never rejects. */
  readonly done: Promise<Response>;
  /**
   * What waits for its store write when that follows its terminal event (`overlap_persist`): null when none is
   * pending (written, not stored, or written before its end). Ended, such a response is not yet in the store.
   */
  private unwritten: Array<() => void> | null = null;

  constructor(
    private readonly plan: RunPlan,
    private readonly services: Services,
    private sink: EventSink,
    private readonly hooks: RunHooks = {},
  ) {
    this.metrics = plan.metrics;
    this.faults = services.chaos?.forRun(plan.metrics, services.log) ?? null;
    this.pauses = new PauseRegistry(services.limits.maxPendingCalls);
    this.createdMs = this.wallNow();
    this.response = newResponse(plan.params, this.createdMs);
    this.logprobs = { left: services.limits.maxLogprobTokens };
    this.customTools = new Set((plan.params.tools ?? []).filter((t) => t.type === 'custom' && typeof t.name === 'string').map((t) => t.name as string));
    this.keep = new RunKeep(this.response.output);
    this.done = this.loop();
  }

  get id(): string {
    return this.response.id;
  }

  /** This response's own input items so far, as a listing shows them: its input, then what was appended to it. */
  get ownInput(): InputItem[] {
    return ownInputItems({ input: this.plan.input, appended: this.appended });
  }

  get paused(): boolean {
    return this.state === 'paused';
  }

  get ended(): boolean {
    return this.state === 'ended';
  }

  /** The design that runs it. */
  get protocol(): Protocol {
    return this.plan.protocol;
  }

  /** Ended, with its store write still to come (`overlap_persist`): the store does not have it yet. */
  get writePending(): boolean {
    return this.unwritten !== null;
  }

  /** `fn` once its store write is done (now when none is pending): the in-flight registry keeps it until then. */
  afterWrite(fn: () => void): void {
    if (this.unwritten !== null) this.unwritten.push(fn);
    else fn();
  }

  /**
   * Whether its stream is open: `response.created` was sent and the terminal event not yet. An event numbered in
   * its stream before then (an error answering another client event while its long echo is made, `warmEchoes`)
   * went out ahead of its `response.created`, which then had sequence number 1.
   */
  get streaming(): boolean {
    return this.createdSent && this.state !== 'ended';
  }

  /**
   * Whether how the run ends is decided, so that `stop` changes nothing: it has ended, or its end was set (a stop,
   * or the model done) and its terminal event is still to come (a long stored record being serialised in slices,
   * `prepareRecord`, holds it there for turns).
   */
  get ending(): boolean {
    return this.state === 'ended' || this.end !== null;
  }

  pendingCalls(): string[] {
    // An ended run waits for nothing, whatever its registry still indexes.
    return this.state === 'ended' ? [] : this.pauses.pending();
  }

  /** Stop sending events (the peer is gone); the run still ends and is accounted. */
  detach(): void {
    this.sink = () => {};
  }

  /**
   * Append client items to a paused run. Atomic: on any error nothing is
   * applied and the run stays paused. Re-sent function_call items and
   * outputs for already answered calls are dropped (older Codex re-sends).
   *
   * The checks and tokenization of a large append yield to the event loop
   * (src/cooperative.ts), so appends are serialised: one arriving while
   * another is processed waits for it (at most `MAX_QUEUED_APPENDS` or `--max-pending-calls`, then
   * `queue_full`) and is then handled exactly as if it had arrived after it —
   * e.g. refused with `no_paused_response` if the first one resumed the run.
   * The context is extended in one synchronous step once every check passed;
   * `committed` is called in that step, before any pending call is resolved
   * (a `response.inject` is acknowledged before the sampling it resumes).
   */
  append(items: readonly InputItem[], parse: ParseSpan | null = null, committed?: () => void): Promise<readonly string[] | null> {
    const queued = Math.max(MAX_QUEUED_APPENDS, this.services.limits.maxPendingCalls);
    if (this.appendsWaiting >= queued) {
      return Promise.reject(new WireError('queue_full', `At most ${queued} appends may wait behind the one being processed.`, null));
    }
    this.appendsWaiting++;
    const turn = this.appendTail.then(() => {
      this.appendsWaiting--;
      return this.applyAppend(items, parse, committed);
    });
    // The next append waits for this one whatever its outcome; its error goes to this caller only.
    this.appendTail = turn.then(
      () => {},
      () => {},
    );
    return turn;
  }

  /**
   * The call ids of `items` when every one is a `function_call_output` for a call this run already holds the output of:
   * a retry of an append whose answer the client did not see (over HTTP, a lost 202). Such an append is a duplicate:
   * nothing to do, whether the run is paused again or streaming meanwhile; before, it was `no_paused_response` while
   * the run streamed and a silent no-op once it paused, so the client could not tell what had happened. Null when
   * any item is anything else (or there are none). Counted (`duplicate_appends`) when it says so: a caller asks once
   * per append.
   */
  heldAlready(items: readonly InputItem[]): string[] | null {
    if (items.length === 0 || this.ended) return null;
    const answered = this.plan.context.answeredCallIds;
    const ids: string[] = [];
    for (const item of items) {
      const callId = answeredCallId(item);
      if (callId === undefined || !answered.has(callId)) return null;
      ids.push(callId);
    }
    this.metrics.count('duplicate_appends');
    return ids;
  }

  /** Null once the items are appended; their call ids when the append was a duplicate (`heldAlready`), nothing done. */
  private async applyAppend(items: readonly InputItem[], parse: ParseSpan | null, committed?: () => void): Promise<readonly string[] | null> {
    // The transport's parse of this append (frame or body), charged whatever the append's outcome, like its checks.
    if (parse) this.metrics.span('parse_append', parse.start, parse.end);
    // Checked at its turn: a retry queued behind the append it repeats finds it committed.
    const held = this.heldAlready(items);
    if (held !== null) {
      committed?.();
      return held;
    }
    if (this.state !== 'paused') {
      throw new WireError('no_paused_response', `Response '${this.id}' is not paused; there is nothing to append to.`, null);
    }
    const ctx = this.plan.context;
    const fresh: InputItem[] = [];
    const answering = new Set<string>();
    // The run's signal stops the resolution early when the run ends (a cancel, a dropped client, the pause timeout).
    const resolved = this.plan.resolveAppend ? await this.plan.resolveAppend(items, this.metrics, this.abort.signal, heldItems(ctx.items)) : items;
    // The resolution may yield (many references): the run may have ended meanwhile.
    if (!this.paused || this.end) throw this.endedWhileAppending();
    for (const [i, item] of resolved.entries()) {
      const callId = (item as { call_id?: unknown }).call_id;
      const known = typeof callId === 'string';
      // Any client call the context holds already (a custom tool's too: a re-sent custom_tool_call was kept, and its
      // patch was in the context twice; outside attack atk101 F3).
      if (known && clientCallId(item) !== undefined && ctx.callIds.has(callId)) {
        this.metrics.count('duplicate_items_dropped');
        continue;
      }
      // Any output type answers a pending call (a custom_tool_call_output a function call's, as over ws and http): a
      // custom_tool_call_output for the pending call was appended and left the run paused, nothing sent, until the
      // pause timeout (outside conformance tester).
      const answers = answeredCallId(item);
      if (answers !== undefined && (ctx.answeredCallIds.has(answers) || answering.has(answers))) {
        this.metrics.count('duplicate_items_dropped');
        continue;
      }
      if (answers !== undefined && !this.pauses.has(answers)) {
        throw new WireError('unknown_call_id', `No pending tool call with call_id '${answers}' in response '${this.id}'.`, `input[${i}].call_id`);
      }
      if (answers !== undefined) answering.add(answers);
      fresh.push(item);
    }
    // A client call appended without its output in the same append: the run waits only for the model's calls, so its
    // output could never be taken (`unknown_call_id`), and the stored response was a dead end (outside attack atk89 F6).
    const dangling = missingToolOutput(pendingCallsOf(fresh));
    if (dangling) throw dangling;
    checkContext(ctx, fresh, this.services.limits);
    this.keep.check(fresh, this.services.limits);
    const arrivedAt = this.services.clock.now();
    const m = this.metrics;
    // Only the appended items (pipeline/checks.ts); with `incremental_checks` off, the whole context again.
    if (this.services.switches.incremental_checks) await checkIncremental({ tools: [], instructions: null }, ctx.callIds, fresh, m, 'append');
    else await checkFull(this.plan.params, ctx.items, fresh, m, 'append');
    // The run may have ended (cancel, disconnect, pause timeout) while the work yielded: then the append is
    // refused at once, not tokenised first (seconds of work for a 16 MiB append to a run that is over).
    if (!this.paused || this.end) throw this.endedWhileAppending();
    // The append's token ids are charged as they are made (past the server-wide byte budget: `server_busy`, the
    // append refused and the run still paused); refused or ended before its commit, they are given back.
    const mark = m.tokenBytes;
    let tokens: Awaited<ReturnType<typeof tokenizeItems>>;
    try {
      tokens = await tokenizeItems(fresh, m);
      if (this.paused && !this.end) await reserveFor(ctx, tokens);
      if (!this.paused || this.end) throw this.endedWhileAppending();
    } catch (err) {
      // What it needed at least: the ids made before the refused slice too (`SessionHost.heldForPeers` weighs it).
      if (err instanceof WireError && err.code === 'server_busy') err.budgetAsk = m.tokenBytes - mark + (err.budgetAsk ?? 0);
      m.releaseTokensSince(mark);
      throw err;
    }
    this.lastAppendAt = arrivedAt;
    m.count('appends');
    commitItems(ctx, fresh, tokens);
    if (fresh.length > 0) this.appended.push({ at: this.response.output.length, items: fresh });
    this.keep.add(fresh);
    committed?.();
    for (const item of fresh) {
      const answers = answeredCallId(item);
      if (answers !== undefined) this.pauses.resolve(answers);
    }
    return null;
  }

  private endedWhileAppending(): WireError {
    return new WireError('no_paused_response', `Response '${this.id}' ended while the append was being processed; nothing was appended.`, null);
  }

  /**
   * Wait for a reader that fell behind (`EventSink.backlog`), or for the run
   * to end (a stop, the reader dropped): the `send_wait` span, its ms returned.
   */
  private async waitForReader(behind: Promise<void>): Promise<number> {
    const { clock } = this.services;
    const signal = this.abort.signal;
    const start = clock.now();
    if (this.readerWaits++ === 0) this.services.log.info({ code: 'send_paced', response_id: this.id }, 'the client reads more slowly than the model writes; the run waits for it');
    if (!signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        signal.addEventListener('abort', done, { once: true });
        void behind.then(done, done);
      });
    }
    const end = clock.now();
    this.metrics.span('send_wait', start, end);
    return end - start;
  }

  /**
   * Tell whoever carries the run what it keeps now that no client frame or body stands for (`RunHooks.keptHeld`):
   * its output so far, its prompt's token ids, and each context item's overhead. At each model call and pause.
   */
  private chargeKept(): void {
    const kept = this.hooks.keptHeld;
    if (kept === undefined) return;
    const ctx = this.plan.context;
    const base = this.plan.contextCharged;
    const tokenBytes = ctx.tokens.bytes - (base?.tokenBytes ?? 0);
    const items = ctx.items.length - (base?.items ?? 0);
    kept(this.keep.outputSize() + keptOutputBytes(this.response.output) + Math.max(0, tokenBytes) + ITEM_HELD_BYTES * Math.max(0, items));
  }

  /** End the run from outside (cancel, disconnect, timeout, shutdown). Idempotent. */
  stop(status: 'cancelled' | 'incomplete', reason: string): void {
    this.halt({ status, reason });
  }

  /**
   * Decide how the run ends, once, and make every wait end: the model's
   * stream (abort), the pause registry (close) and a pause however the
   * registry got there (`endPause`). The loop then finishes the run.
   */
  private halt(end: EndReason): void {
    if (this.state === 'ended' || this.end) return;
    this.end = end;
    this.pauses.close(end.reason);
    this.abort.abort(new RunClosedError(end.reason));
    this.endPause?.(new RunClosedError(end.reason));
  }

  /**
   * Send one event; false when the sink threw. A sink that throws (an event
   * that cannot be serialised, a broken transport) fails the run once with a
   * server_error instead of escaping; its sequence number is not spent, so
   * what the client does receive stays gapless.
   */
  private emit(e: UnnumberedEvent): boolean {
    return this.emitting(() => {
      try {
        // Deltas are built fresh for this one emission: numbered in place, they keep their pre-serialised form.
        if (numberedInPlace(e)) {
          e.sequence_number = this.seq;
          this.sink(e);
        } else this.sink(withFields(e, { sequence_number: this.seq }) as ServerEvent);
      } catch (err) {
        this.sinkFailed(err, e.type);
        return false;
      }
      this.seq++;
      this.metrics.count('events_sent');
      return true;
    });
  }

  /**
   * Send consecutive deltas of one item, each its own numbered event, in one
   * hand-over when the sink takes batches; returns how many the stream took
   * (all, or up to and including the one whose send failed, or up to the one
   * after which the run ended), as one `emit` per delta would have.
   */
  private emitDeltas(head: DeltaHead, deltas: readonly string[], logprobs?: readonly EventLogprob[][]): number {
    return this.emitting(() => {
      const many = this.sink.deltas;
      // Deltas with logprobs are each their own JSON (no shared head and tail to frame them in place).
      if (many === undefined || logprobs !== undefined) {
        for (let i = 0; i < deltas.length; i++) {
          const e = head.event(deltas[i]!, logprobs?.[i]);
          if (!this.emit(e) || this.end) return i + 1;
        }
        return deltas.length;
      }
      const batch = new DeltaBatch(head, deltas, this.seq);
      try {
        many(batch);
      } catch (err) {
        this.seq += batch.sent;
        this.metrics.count('events_sent', batch.sent);
        this.sinkFailed(err, head.type);
        return Math.min(batch.sent + 1, deltas.length);
      }
      this.seq += deltas.length;
      this.metrics.count('events_sent', deltas.length);
      return deltas.length;
    });
  }

  private sinkFailed(err: unknown, type: string): void {
    const m = this.metrics;
    if (m.counters['events_unsent']++ === 0) {
      this.services.log.error({ err, response_id: this.id, event: type }, 'could not send an event; the response fails');
    }
    this.halt({
      status: 'failed',
      reason: 'server_error',
      error: new WireError('server_error', `The server could not send this response's '${type}' event.`, null, { cause: err }),
    });
  }

  /**
   * Time a piece of event emission (building events, the sink's
   * serialisation and write) into the metrics' accumulated `emit` total;
   * nested calls are timed once, by the outermost.
   */
  private emitting<T>(f: () => T): T {
    if (this.inEmit) return f();
    const m = this.metrics;
    const s = m.now();
    const events = m.counters.events_sent;
    this.inEmit = true;
    try {
      return f();
    } finally {
      this.inEmit = false;
      m.emitted(m.now() - s, m.counters.events_sent - events);
    }
  }

  /** Emit an error event in this response's stream (numbered). */
  emitError(err: WireError): boolean {
    return this.emit(err.toEvent());
  }

  /** Emit the session's answer to a client event (`response.inject.created` / `.failed`) in this response's stream (numbered). */
  emitNotice(e: UnnumberedEvent): boolean {
    return this.emit(e);
  }

  /** `snap`: the response as it is now (`snapshot`), given when two events in a row carry the same one. */
  private lifecycle(type: LifecycleType, snap = snapshot(this.response)): boolean {
    return this.emitting(() => this.emit({ type, response: snap }));
  }

  private async loop(): Promise<Response> {
    try {
      this.record();
      // Long instructions or tools: their echo in every lifecycle event is made in slices first (awaited only then).
      if (echoesLong(this.response)) await warmEchoes(this.response);
      if (this.response.background && this.response.store) await this.storeStarted();
      // Nothing changes between the two: one snapshot, whose JSON text the transport makes once (protocol/event-json.ts).
      const opened = snapshot(this.response);
      this.lifecycle('response.created', opened);
      this.createdSent = true;
      this.lifecycle('response.in_progress', opened);
      if (this.plan.params.generate && this.plan.params.compaction_trigger) {
        await this.compactOnTrigger();
      } else if (this.plan.params.generate) {
        while (!this.end) {
          const calls = await this.sample();
          if (calls.length > 0 && !this.end) await this.chaos('pause');
          if (this.end || calls.length === 0 || this.plan.onToolCalls === 'end') break;
          await this.pause(calls);
        }
      } else if (this.plan.params.prewarm) {
        // `prompt_cache_options.prewarm`: the prompt prefilled into the model's prefix cache, nothing sampled.
        await this.sample(true);
      }
      this.end ??= { status: 'completed', reason: 'completed' };
    } catch (err) {
      if (!this.end) {
        const wire = toWireError(err);
        // A bound the model's output hit (more calls than a pause may wait for, a repeated call id) is foreseen and
        // a client can provoke it: a warning with its code, not an error with a stack trace (fuzzer's finding).
        // So is a failure the error itself marks foreseen (a replay past its recording's end: WireError.foreseen).
        if (wire.foreseen || wire.code === 'too_many_pending_calls' || wire.code === 'duplicate_call_id') {
          this.services.log.warn({ code: wire.code, response_id: this.id, msg_detail: wire.message }, 'run failed at a bound');
        } else if (wire.type === 'server_error') this.services.log.error({ err, response_id: this.id }, 'run failed');
        this.end = { status: 'failed', reason: wire.code, error: wire };
      }
    }
    // What the model streamed leaves before the post-inference work (the store write, the record, billing,
    // the log): that work, and any garbage collection it sets off, must not hold back what the client reads.
    this.contain('flush', () => this.sink.flush?.());
    const ended = this.end;
    const completedAt = Math.floor(this.wallNow() / 1000);
    await this.prepareRecord(ended, completedAt);
    this.finish(ended, completedAt);
    return this.response;
  }

  /**
   * A stored response whose record is long (its strings past `NATIVE_TEXT_CHARS`: `PostInference.prepares`): its
   * store's serialisation made in slices (`PostInference.prepare`) before the run ends, for the write `finish` does
   * where it always did (before the terminal event, unless `overlap_persist`). Made of the Response as `finish` will
   * leave it (`settle` on a snapshot): the run's own Response is settled only by `finish`, so nothing reads a final
   * status (a background response's retrieve, from its run while in flight) before the store has it. One
   * `JSON.stringify` of a Response echoing 2.5 million lone surrogates held the loop ~0.4 s in the write's turn.
   * No await at all for any other response.
   */
  private async prepareRecord(ended: EndReason, completedAt: number): Promise<void> {
    if (this.plan.postInference === 'overlapped' && this.services.switches.overlap_persist) return;
    const post = this.services.post;
    let job: PostInferenceJob | undefined;
    this.contain('persist_prepare', () => {
      const probe = this.postJob(this.response);
      if (!post.prepares(probe)) return;
      const view = snapshot(this.response);
      this.settle(view, ended, completedAt);
      job = this.postJob(view);
    });
    if (job === undefined) return;
    await post.prepare(job);
    this.prepared = job.prepared;
  }

  /**
   * A background response is stored as it starts (`in_progress`, with this process as its runner), before the create
   * is answered: its final write replaces it. A server restarted after a crash (or one beside this on the same file)
   * then finds it: readers answer it `failed` once its runner is gone (modes/host.ts), where a poller was told it had
   * never existed (404 after a restart). A write that fails is logged; the run goes on (its final write may work).
   */
  private async storeStarted(): Promise<void> {
    const r = this.response;
    const rec: StoredResponse = { response: snapshot(r), input: this.plan.input, owner: this.plan.owner, created_at: r.created_at, created_at_ms: this.createdMs, runner: THIS_RUNNER, protocol: this.plan.protocol };
    try {
      const work = this.services.store.prepare?.(rec);
      const prepared = work ? await runCooperative(work) : undefined;
      this.services.store.put(rec, prepared);
    } catch (err) {
      this.services.log.warn({ err, response_id: this.id }, 'a background response could not be stored as it started (a restart would not find it)');
    }
  }

  /** One model call; `prefillOnly`: its prompt prefilled into the prefix cache and nothing sampled (a prewarm). */
  private async sample(prefillOnly = false): Promise<ClientToolCall[]> {
    // Awaited only when a compaction is due: a step that compacts nothing pays no extra turn of the microtask queue.
    // A prewarm compacts nothing: a compaction is output, and a prewarm has none (it had a compaction item and its
    // output tokens past `context_management`'s threshold; outside attack atk112 F2).
    const compacting = prefillOnly ? null : this.compactIfOver();
    if (compacting !== null) {
      await compacting;
      // Ended (a cancel, a disconnect, a stop) while the compaction yielded: no model call.
      if (this.end) return [];
    }
    const { context: ctx, route, params } = this.plan;
    const m = this.metrics;
    const items = itemsAsOf(ctx.items);
    const req: ModelRequest = {
      model: route.model,
      settings: route.settings,
      instructions: ctx.instructions,
      // As of this call: the context keeps growing after it, what the request holds must not (itemsAsOf).
      get items() {
        return items();
      },
      callIds: ctx.callIds,
      tools: ctx.functionTools,
      ...(this.customTools.size > 0 && { customTools: this.customTools }),
      tool_choice: params.tool_choice,
      parallel_tool_calls: params.parallel_tool_calls,
      promptTokens: ctx.tokens.view(),
      promptKeys: ctx.tokens.keys,
      conversationChars: ctx.textChars,
      digest: ctx.digest,
      turns: ctx.turns,
      maxOutputTokens: params.max_output_tokens,
      ...(params.text && { textFormat: params.text.format }),
      // Asked for, and the response may still list some (`--max-logprob-tokens`): the model makes no more than that.
      ...(params.logprobs === true && this.logprobs.left > 0 && { logprobs: { top: params.top_logprobs ?? 0, pieces: this.logprobs.left } }),
      cachePartition: this.plan.owner,
    };
    if (prefillOnly) req.prefillOnly = true;
    m.count('model_calls');
    // The prompt is held for as long as the model streams (slowly, at a real model's pace): counted from here.
    this.chargeKept();
    // The per-call remote services (default none), before the model is asked.
    await this.services.router.callHop(m, this.abort.signal);
    const clock = this.services.clock;
    const started = clock.now();
    let firstToken = started;
    const segment = new Segment((e) => void this.emit(e), this.response.output, (head, deltas, lp) => this.emitDeltas(head, deltas, lp), this.logprobs);
    const emitBefore = m.emitMs;
    const budget = params.max_output_tokens;
    const points = this.faults && new StreamPoints();
    // Chaos points fall between single tokens (the mid-stream one after the first): with chaos knobs, one token per event.
    if (!points) req.batchTokens = DELTA_BATCH_TOKENS;
    const delayBefore = m.counters.chaos_delay_ms;
    let readerWaitMs = 0;
    try {
      for await (const ev of this.services.model.sample(req, this.abort.signal)) {
        // Ended from elsewhere (a sink failure, a stop) while the model ignores its signal.
        if (this.end) break;
        const point = ev.type !== 'prefill' && points?.next(carriesTokens(ev));
        if (point) await this.chaos(point);
        if (this.end) break;
        if (ev.type === 'prefill') {
          firstToken = clock.now();
          m.span('prefill', started, firstToken);
          m.count('prompt_tokens', ev.prompt_tokens);
          m.count('cached_tokens', ev.cached_tokens);
          this.promptTokens += ev.prompt_tokens;
          this.cachedTokens += ev.cached_tokens;
          this.cacheWriteTokens += ev.cache_write_tokens;
          // A prewarm reads no further, whatever the model would write.
          if (prefillOnly) break;
          continue;
        }
        if (budget !== null && carriesTokens(ev) && this.outputTokens >= budget) {
          // The whole response (a long-lived run included) has spent its output
          // budget: leaving the loop closes the model's stream.
          this.end = { status: 'incomplete', reason: 'max_output_tokens' };
          break;
        }
        // A batch the budget ends part-way: the deltas within it go out, then the run ends as at the next token.
        // Hidden reasoning counts toward the budget too (one event carries a whole burst): it is cut at the budget.
        const over =
          budget !== null &&
          (((ev.type === 'text.deltas' || ev.type === 'args.deltas') && this.outputTokens + ev.deltas.length > budget) ||
            (ev.type === 'reasoning' && this.outputTokens + ev.tokens > budget));
        const applied = !over
          ? ev
          : ev.type === 'reasoning'
            ? { type: ev.type, tokens: budget - this.outputTokens }
            : ev.type === 'text.deltas'
              ? { type: ev.type, deltas: ev.deltas.slice(0, budget - this.outputTokens), ...(ev.logprobs && { logprobs: ev.logprobs.slice(0, budget - this.outputTokens) }) }
              : { type: ev.type, deltas: ev.deltas.slice(0, budget - this.outputTokens) };
        const tokens = this.emitting(() => segment.apply(applied));
        this.outputTokens += tokens;
        if (ev.type === 'reasoning') this.reasoningTokens += tokens;
        m.count('output_tokens', tokens);
        if (over && !this.end) {
          this.end = { status: 'incomplete', reason: 'max_output_tokens' };
          break;
        }
        // A reader behind by half the send limit: the model's next tokens wait until it has read (not charged to decode).
        const behind = this.sink.backlog?.() ?? null;
        if (behind) readerWaitMs += await this.waitForReader(behind);
      }
    } catch (err) {
      // Ended from outside (a cancel, a disconnect, a timeout, shutdown) while the model was writing: the model's
      // stream ends with the abort's error. The item it was writing is closed in the stream (below), as a
      // max_output_tokens cut closes it, so every output_item.added has its output_item.done before the terminal
      // event; then the run ends as before, without the rest of this call's accounting.
      if (!this.end) throw err;
      this.emitting(() => segment.truncate());
      throw err;
    }
    if (this.end) segment.truncate();
    // Emission is API work, not the model's: the decode span leaves it out (it stays in the `emit` total).
    // Injected delays (chaos knobs) are left out too: they have their own spans.
    const injected = m.counters.chaos_delay_ms - delayBefore + readerWaitMs;
    m.span('decode', firstToken, Math.max(firstToken, clock.now() - (m.emitMs - emitBefore) - injected));
    // Before the calls join the context (whose ids they would then be among).
    if (!this.end) assertDistinctCallIds(segment.calls, this.plan.context.callIds);
    await appendOutputCooperative(this.plan.context, segment.items, segment.itemTokens);
    if (this.end) return [];
    return segment.calls;
  }

  /**
   * Server-side compaction (`context_management`): once the rendered prompt
   * passes the threshold, the context is replaced by its compacted window
   * before the model call, and the compaction item joins the output. A live
   * long-lived run shrinks too: later appends extend the smaller context.
   * After a compaction that could not get under the threshold, the next
   * waits for the context to grow (`compactionDue`). The compaction yields
   * to the event loop (it seals and renders what it keeps, the whole context
   * when nothing shrinks), so the run may end meanwhile.
   */
  private compactIfOver(): Promise<void> | null {
    const threshold = compactThreshold(this.plan.params);
    if (threshold === null || !compactionDue(this.plan.context, threshold)) return null;
    return this.compactNow();
  }

  /**
   * A create whose input ended with a `compaction_trigger` (Codex's "remote compaction v2"): the context is
   * compacted now, as a server-side compaction would (the turn in progress kept), and the response ends with that
   * compaction item as its one output item, without a model call. Its prompt is the rendered window, as the compact
   * endpoint's usage has it. Before, the trigger was carried as an unknown item and the model answered: Codex failed
   * the turn ("remote compaction v2 expected exactly one compaction output item, got 0").
   */
  private async compactOnTrigger(): Promise<void> {
    const prompt = this.plan.context.tokens.length;
    this.promptTokens += prompt;
    this.metrics.count('prompt_tokens', prompt);
    await this.compactNow();
  }

  private async compactNow(): Promise<void> {
    const { item, context, outputTokens } = await compactContext(this.plan.context, this.metrics);
    // Ended while it yielded: its terminal event is out, so nothing joins the output (the context stays as it was).
    if (this.end) return;
    this.plan.context = context;
    this.outputTokens += outputTokens;
    this.metrics.count('output_tokens', outputTokens);
    const index = this.response.output.push(item) - 1;
    this.emit({ type: 'response.output_item.added', output_index: index, item: { ...item } });
    this.emit({ type: 'response.output_item.done', output_index: index, item: { ...item } });
  }

  /**
   * A chaos point (engine/faults.ts): injected delays wait there (a stop
   * ends the wait); an injected error fails the run, an injected disconnect
   * ends it cancelled and asks the transport to drop the connection. Either
   * ends the run through `halt`, so once.
   */
  private async chaos(point: ChaosPoint): Promise<void> {
    if (!this.faults) return;
    const fault = await this.faults.at(point, this.abort.signal, this.id);
    if (fault === 'error') {
      this.halt({ status: 'failed', reason: 'injected_fault', error: new WireError('injected_fault', `An injected fault (llr serve --chaos error@${point}) failed this response.`) });
    } else if (fault === 'disconnect') {
      this.halt({ status: 'cancelled', reason: 'injected_disconnect' });
      this.detach();
      this.contain('drop', () => this.hooks.drop?.());
    }
  }

  private async pause(calls: readonly ClientToolCall[]): Promise<void> {
    const ctx = this.plan.context;
    const ids = calls.map((c) => c.call_id).filter((id) => !ctx.answeredCallIds.has(id));
    if (ids.length === 0) return;
    const waiting = this.pauses.wait(ids);
    // What the model made so far and the prompt's token ids are held while the client runs its tools, however
    // long: counted (outside attacks: 23 MB of output per run, and 4 to 8 times an append's bytes in token ids).
    this.chargeKept();
    const clock = this.services.clock;
    const pausedAt = clock.now();
    this.lastAppendAt = pausedAt;
    this.state = 'paused';
    this.metrics.count('pauses');
    this.response.pending_tool_calls = ids;
    // Lean when asked, or past `--max-pause-snapshot-bytes` of output: each full snapshot repeats everything so far.
    if (this.services.switches.lean_pause_event || this.keep.outputSize() > this.services.limits.maxPauseSnapshotBytes) {
      this.emitting(() => this.emit({ type: 'response.done', response: leanSnapshot(this.response) }));
    } else this.lifecycle('response.done');
    // Again once its event is made: the full snapshot keeps its finished items' JSON from then (event-json.ts
    // `keptOutputBytes`), this pause's items included.
    this.chargeKept();
    delete this.response.pending_tool_calls;
    this.pauseNo++;
    this.pausedAt = pausedAt;
    this.watchPause();
    try {
      // `endPause` ends the pause even if a wait were somehow left unsettled; a halt that came first (the sink
      // failing on response.done) ends it at once. (A run-wide `stopped` promise raced here instead was kept
      // for the run's life, with a reaction per pause until the run ended.)
      await new Promise<void>((resolve, reject) => {
        if (this.end) reject(new RunClosedError(this.end.reason));
        this.endPause = reject;
        waiting.then(resolve, reject);
      });
    } finally {
      this.endPause = null;
      this.metrics.span('paused', pausedAt, Math.max(pausedAt, this.lastAppendAt));
      if (this.state === 'paused') this.state = 'streaming';
    }
  }

  /**
   * The pause timeout (`--pause-timeout-ms`): the run ends `incomplete` once
   * one pause has lasted that long. One sleep watches every pause of the
   * run: a pause that starts while the sleep of an earlier one is still
   * running needs no timer of its own (an AbortController, a timer and an
   * abort per pause showed in a CPU profile of every tool step). When the sleep
   * ends, the pause it watched still current times the run out; a later
   * pause is watched for what is left of its own timeout; no pause at all
   * leaves the next pause to start a new watch. Node fires a timer longer
   * than 2^31-1 ms at once: past that (Infinity included) there is no timeout.
   */
  private watchPause(): void {
    const timeout = this.services.limits.pauseTimeoutMs;
    if (this.watching || timeout > 2 ** 31 - 1) return;
    this.watching = true;
    const clock = this.services.clock;
    // The run's own signal, not an AbortController of the watch's: each is kept for as long as the run
    // lives, and Node gives every AbortSignal a map of its own. A halt aborts it too; the run is ending then.
    const signal = this.abort.signal;
    const sleep = (pause: number, ms: number): void => {
      clock.sleep(ms, signal).then(
        () => {
          if (!this.watching) return;
          if (this.state !== 'paused') this.watching = false;
          else if (this.pauseNo === pause) this.stop('incomplete', 'pause_timeout');
          else sleep(this.pauseNo, this.pausedAt + timeout - clock.now());
        },
        () => {},
      );
    };
    sleep(this.pauseNo, timeout);
  }

  /**
   * End the run: usage, then (by default) the store write of a stored
   * response, then the terminal event, then billing and the log (inline or
   * overlapped). Never throws: each step is contained, so a fault in one
   * still lets the others run and the terminal event go out.
   */
  private finish(ended: EndReason, completedAt: number): void {
    const { response, metrics: m } = this;
    this.state = 'ended';
    this.contain('close', () => {
      this.pauses.close(ended.reason);
      // Ends the pause watch's sleep (and its timer); nothing else uses the signal once the run ends.
      if (this.watching) this.abort.abort(RUN_ENDED);
      this.watching = false;
    });
    this.contain('usage', () => m.time('usage', () => this.settle(response, ended, completedAt)));
    const job = this.postJob(response);
    // What `prepareRecord` made of the Response as settled here, its serialisation for the store.
    if (this.prepared !== undefined) job.prepared = this.prepared;
    this.prepared = undefined;
    const overlapped = this.plan.postInference === 'overlapped';
    const persistAfter = overlapped && this.services.switches.overlap_persist;
    let end = ended;
    let postOk = true;
    if (!persistAfter && !this.persist(job)) {
      postOk = false;
      end = this.storageFailed(end);
    }
    if (!overlapped) postOk = this.account(job) && postOk;
    const errorSent = end.error ? this.emitError(end.error) : false;
    if (!this.lifecycle(TERMINAL[end.status]) && !errorSent) {
      // The client must learn the response is over even if its final snapshot cannot be sent.
      this.emitError(new WireError('server_error', "The server could not send this response's terminal event."));
    }
    this.emitTiming(overlapped);
    // Its events are all made: the output's kept JSON is dropped, not kept with the items by whatever holds them next.
    this.contain('output_json', () => forgetOutputBytes(response.output));
    this.record(overlapped, !overlapped && postOk);
    if (overlapped) {
      const rest = (): void => {
        const ok = (!persistAfter || this.persist(job)) && postOk;
        this.record(true, this.account(job) && ok);
      };
      // Until it is written, retrieve, delete and a continuation find it in the in-flight registry (engine/in-flight.ts):
      // it was 404 for that moment, between a terminal event the client had read and the write.
      if (persistAfter && response.store) this.unwritten = [];
      // Written after the terminal event: a long record's serialisation is made in slices there too.
      this.services.postWork.defer(async () => {
        try {
          const prepared = persistAfter ? this.services.post.prepare(job) : undefined;
          if (prepared !== undefined) await prepared;
          rest();
        } finally {
          this.written();
        }
      });
    }
  }

  /** Its deferred store write is done (or failed, counted): what waited for it runs, each contained. */
  private written(): void {
    const waiting = this.unwritten;
    this.unwritten = null;
    for (const fn of waiting ?? []) this.contain('after_write', fn);
  }

  /** What the run's end sets on its Response (`r`: the run's own, or `prepareRecord`'s snapshot of it). */
  private settle(r: Response, ended: EndReason, completedAt: number): void {
    r.status = ended.status;
    r.completed_at = ended.status === 'completed' ? completedAt : null;
    r.usage = makeUsage(this.promptTokens, this.cachedTokens, this.outputTokens, this.reasoningTokens, this.cacheWriteTokens);
    if (ended.status === 'incomplete') {
      // Only the API's reasons go in incomplete_details (a closed enum that typed clients decode); ours has its own field.
      if (isIncompleteReason(ended.reason)) r.incomplete_details = { reason: ended.reason };
      else r.llr_incomplete_reason = ended.reason;
    }
    if (ended.error) r.error = { code: responseErrorCode(ended.error), message: ended.error.message };
    for (const item of r.output) if ('status' in item && item.status === 'in_progress') item.status = 'incomplete';
  }

  /** The post-inference work's view of this run, storing `response`. */
  private postJob(response: Response): PostInferenceJob {
    return {
      response,
      created_at_ms: this.createdMs,
      input: this.plan.input,
      appended: this.appended,
      owner: this.plan.owner,
      mode: this.plan.protocol,
      metrics: this.metrics,
    };
  }

  /** Run one finishing step; a throw is logged and counted, never escapes. */
  private contain(step: string, fn: () => void): boolean {
    return this.guarded(fn, 'engine_faults', { step }, 'a step of ending the response failed');
  }

  /** Write a stored response; false (logged, counted) when the store failed. */
  private persist(job: PostInferenceJob): boolean {
    return this.guarded(() => this.services.post.persist(job), 'persist_failed', {}, 'the response could not be stored');
  }

  /** Billing and the log line; a failure is logged and counted, and never loses the terminal event. */
  private account(job: PostInferenceJob): boolean {
    return this.guarded(() => this.services.post.account(job), 'post_inference_failed', {}, 'post-inference work failed');
  }

  /** `fn`, with a throw counted under `counter` and logged, never escaping: true when it did not throw. */
  private guarded(fn: () => void, counter: Counter, fields: object, msg: string): boolean {
    try {
      fn();
      return true;
    } catch (err) {
      this.metrics.count(counter);
      this.services.log.error({ err, response_id: this.id, ...fields }, msg);
      return false;
    }
  }

  /**
   * A stored response that is not in the store is not reported as a success:
   * it ends `failed` with a server_error saying so (its output is still in
   * the event). A response that had already failed keeps its first error.
   */
  private storageFailed(end: EndReason): EndReason {
    if (end.status === 'failed') return end;
    const error = new WireError(
      'server_error',
      'The response was generated but could not be stored, so it is not available for retrieval or previous_response_id. Retry the request.',
    );
    const r = this.response;
    r.status = 'failed';
    r.completed_at = null;
    r.incomplete_details = null;
    delete r.llr_incomplete_reason;
    r.error = { code: responseErrorCode(error), message: error.message };
    this.end = { status: 'failed', reason: 'storage_failed', error };
    return this.end;
  }

  /** The extension event, only to a client that opted in; the run record keeps the same figures regardless. */
  private emitTiming(overlapped: boolean): void {
    if (this.plan.params.llr?.timing !== true) return;
    const m = this.metrics;
    this.emit({
      type: TIMING_EVENT,
      response_id: this.id,
      mode: this.plan.protocol,
      spans: m.spans,
      totals: withFields(m.totals(), { total: m.elapsed() }),
      counters: { ...m.counters },
      switches: withFields(this.services.switches, { post_inference_deferred: overlapped }),
    });
  }

  /** Wall-clock ms for timestamps on the wire (the injected clock is monotonic). */
  private wallNow(): number {
    return this.services.clock.wallNow?.() ?? Date.now();
  }

  /**
   * The run's record for `GET /llr/runs`. While the run lives, one live
   * record reads its status, usage, counters, totals and spans when it is
   * read, so a pause costs nothing here (a copy per pause was quadratic over
   * a long run and a measurable part of each tool step). At the end the
   * record is frozen: a plain object holding copies and the usage, not the
   * run. Both are built field by field (object spreads and property
   * definitions made records the costliest part of starting a response).
   */
  private record(deferred = false, postDone = !deferred && this.state === 'ended'): void {
    this.contain('record', () => {
      const r = this.response;
      const m = this.metrics;
      const plan = this.plan;
      const rec: RunRecord =
        this.state !== 'ended'
          ? new LiveRunRecord(r, m, plan, deferred, postDone)
          : plainRecord(r, m, { protocol: plan.protocol, connection: plan.connection, owner: plan.owner, model: plan.route.model }, Math.floor(this.wallNow() / 1000), deferred, postDone);
      this.services.records.upsert(rec);
    });
  }
}

/**
 * Two calls of one model turn sharing a call_id, or a call taking the id of one already in the context, could not be
 * answered apart: the model's fault. A call under an answered id was not paused for (`pause` waits only for ids not
 * answered), so the run went on without it and the client never ran it (an outside attack: a restarted server's
 * model drew the ids it drew before, and a full-history create ended `completed` past its new call).
 */
function assertDistinctCallIds(calls: readonly ClientToolCall[], context: ReadonlySet<string>): void {
  const seen = new Set<string>();
  for (const c of calls) {
    if (seen.has(c.call_id) || context.has(c.call_id)) throw duplicateCallId(c.call_id);
    seen.add(c.call_id);
  }
}

const TERMINAL: Record<EndStatus, LifecycleType> = {
  completed: 'response.completed',
  failed: 'response.failed',
  incomplete: 'response.incomplete',
  cancelled: 'response.cancelled',
};

/**
 * The items of a run's context by id, for an append's `item_reference` to an item of its own run (its input, its
 * output items, what was appended before): indexed at the first reference the store does not have, once per append,
 * a copy of each item found. The first item with an id wins, as a listing's first does.
 */
function heldItems(items: readonly InputItem[]): (id: string) => InputItem | undefined {
  let byId: Map<string, InputItem> | undefined;
  return (id) => {
    if (byId === undefined) {
      byId = new Map();
      for (const item of items) {
        const own = (item as { id?: unknown }).id;
        if (typeof own === 'string' && own !== '' && item.type !== 'item_reference' && !byId.has(own)) byId.set(own, item);
      }
    }
    const found = byId.get(id);
    return found === undefined ? undefined : structuredClone(found);
  };
}

/**
 * A context's items as a model call sees them, without copying them at every call: a copy per call was O(n) per step,
 * and past 16,384 items a fresh large object each time, so a 20,000-step run spent 3–6× the CPU per step of a
 * 5,000-step one (outside attack). A context's list only grows (pipeline/render.ts `pushItem`; a compaction makes a
 * new one), so while it holds as many items as at the call it is the call's list as it stands; once it has grown (a
 * request read after its run went on: a recorded one, `SimulatedModel.calls`) the call's prefix, copied once.
 */
function itemsAsOf(items: readonly InputItem[]): () => readonly InputItem[] {
  const count = items.length;
  let copy: readonly InputItem[] | undefined;
  return () => copy ?? (items.length === count ? items : (copy = items.slice(0, count)));
}
