/**
 * One Response: the async sampling loop. It streams each model call's items
 * as wire events and, when the model calls client tools, either ends the
 * response (ws, http: the client continues with a new one) or pauses on the
 * pause registry and resumes in the same response when the client appends
 * the outputs (long-lived). The response ends exactly once — completed,
 * cancelled, incomplete or failed — and then post-inference work runs once,
 * inline or overlapped, and a timing event closes the stream.
 *
 * Pre-inference work is done before a run exists (by the mode, see
 * `RunPlan`); the run only does the incremental work of appended items.
 * Translating one model call into wire events is `Segment`'s job. The run
 * numbers its own events; the sink must serialise or copy synchronously.
 */
import type { ModelRequest } from '../model/types.js';
import { WireError, toWireError } from '../protocol/errors.js';
import type { CreateParams, LifecycleType, ServerEvent, UnnumberedEvent } from '../protocol/events.js';
import { makeUsage, type FunctionCall, type InputItem, type Response, type ResponseStatus } from '../protocol/objects.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import { appendOutput, commitItems, reserveFor, tokenizeItems, type RenderedContext } from '../pipeline/render.js';
import type { RouteDecision } from '../pipeline/route.js';
import { safetyScanAsync } from '../pipeline/safety.js';
import { validateItemsAsync } from '../pipeline/validate.js';
import { PauseRegistry, RunClosedError } from './pause.js';
import { Segment, carriesTokens } from './segment.js';
import { newResponse, snapshot } from './response.js';
import type { RunRecord } from './records.js';
import type { Services } from './services.js';

export type Protocol = 'long-lived' | 'ws' | 'http';

/** Appends that may wait behind the one being processed on a run (then `queue_full`). */
export const MAX_QUEUED_APPENDS = 64;
export type EventSink = (event: ServerEvent) => void;

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
  postInference: 'inline' | 'overlapped';
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
  private end: EndReason | null = null;
  private readonly pauses: PauseRegistry;
  private readonly abort = new AbortController();
  private promptTokens = 0;
  private cachedTokens = 0;
  private outputTokens = 0;
  private lastAppendAt = 0;
  private pauseTimer: NodeJS.Timeout | null = null;
  /** Appends run one at a time (see `append`). */
  private appendTail: Promise<void> = Promise.resolve();
  private appendsWaiting = 0;
  /** Resolves with the final Response after the terminal event; never rejects. */
  readonly done: Promise<Response>;

  constructor(
    private readonly plan: RunPlan,
    private readonly services: Services,
    private sink: EventSink,
  ) {
    this.metrics = plan.metrics;
    this.pauses = new PauseRegistry(services.limits.maxPendingCalls);
    this.response = newResponse(plan.params, plan.route.model);
    this.done = this.loop();
  }

  get id(): string {
    return this.response.id;
  }

  get paused(): boolean {
    return this.state === 'paused';
  }

  get ended(): boolean {
    return this.state === 'ended';
  }

  pendingCalls(): string[] {
    return this.pauses.pending();
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
   * (model/cooperative.ts), so appends are serialised: one arriving while
   * another is processed waits for it (at most `MAX_QUEUED_APPENDS`, then
   * `queue_full`) and is then handled exactly as if it had arrived after it —
   * e.g. refused with `no_paused_response` if the first one resumed the run.
   * The context is extended in one synchronous step once every check passed.
   */
  append(items: readonly InputItem[]): Promise<void> {
    if (this.appendsWaiting >= MAX_QUEUED_APPENDS) {
      return Promise.reject(new WireError('queue_full', `At most ${MAX_QUEUED_APPENDS} appends may wait behind the one being processed.`, null));
    }
    this.appendsWaiting++;
    const turn = this.appendTail.then(() => {
      this.appendsWaiting--;
      return this.applyAppend(items);
    });
    // The next append waits for this one whatever its outcome; its error goes to this caller only.
    this.appendTail = turn.catch(() => {});
    return turn;
  }

  private async applyAppend(items: readonly InputItem[]): Promise<void> {
    if (this.state !== 'paused') {
      throw new WireError('no_paused_response', `Response '${this.id}' is not paused; there is nothing to append to.`, null);
    }
    const ctx = this.plan.context;
    const fresh: InputItem[] = [];
    const answering = new Set<string>();
    for (const item of items) {
      const callId = (item as { call_id?: unknown }).call_id;
      const known = typeof callId === 'string';
      if (item.type === 'function_call' && known && ctx.callIds.has(callId)) {
        this.metrics.count('duplicate_items_dropped');
        continue;
      }
      if (item.type === 'function_call_output' && known && (ctx.answeredCallIds.has(callId) || answering.has(callId))) {
        this.metrics.count('duplicate_items_dropped');
        continue;
      }
      if (item.type === 'function_call_output' && known && !this.pauses.has(callId)) {
        throw new WireError('unknown_call_id', `No pending tool call with call_id '${callId}' in response '${this.id}'.`, 'input.call_id');
      }
      if (item.type === 'function_call_output' && known) answering.add(callId);
      fresh.push(item);
    }
    const arrivedAt = this.services.clock.now();
    const m = this.metrics;
    await m.timeAsync('validate_append', async () => {
      m.count('validate_incremental');
      await validateItemsAsync(fresh, { callIds: ctx.callIds }, m);
    });
    await m.timeAsync('safety_append', async () => {
      m.count('safety_incremental');
      await safetyScanAsync(fresh, m);
    });
    const tokens = await tokenizeItems(fresh, m);
    if (this.state === 'paused') await reserveFor(ctx, tokens);
    // The run may have ended (cancel, disconnect, pause timeout) while the work yielded.
    if (this.state !== 'paused') {
      throw new WireError('no_paused_response', `Response '${this.id}' ended while the append was being processed; nothing was appended.`, null);
    }
    this.lastAppendAt = arrivedAt;
    m.count('appends');
    commitItems(ctx, fresh, tokens);
    for (const item of fresh) {
      if (item.type === 'function_call_output') this.pauses.resolve((item as { call_id: string }).call_id);
    }
  }

  /** End the run from outside (cancel, disconnect, timeout, shutdown). Idempotent. */
  stop(status: 'cancelled' | 'incomplete', reason: string): void {
    if (this.state === 'ended' || this.end) return;
    this.end = { status, reason };
    this.pauses.close(reason);
    this.abort.abort(new RunClosedError(reason));
  }

  private emit(e: UnnumberedEvent): void {
    this.metrics.count('events_sent');
    this.sink({ ...e, sequence_number: this.seq++ } as ServerEvent);
  }

  /** Emit an error event in this response's stream (numbered). */
  emitError(err: WireError): void {
    this.emit(err.toEvent());
  }

  private lifecycle(type: LifecycleType): void {
    this.emit({ type, response: snapshot(this.response) });
  }

  private async loop(): Promise<Response> {
    this.record();
    this.lifecycle('response.created');
    this.lifecycle('response.in_progress');
    try {
      if (this.plan.params.generate) {
        for (;;) {
          const calls = await this.sample();
          if (calls.length === 0 || this.plan.onToolCalls === 'end') break;
          await this.pause(calls);
        }
      }
      this.end ??= { status: 'completed', reason: 'completed' };
    } catch (err) {
      if (!this.end) {
        const wire = toWireError(err);
        if (wire.code === 'server_error') this.services.log.error({ err, response_id: this.id }, 'run failed');
        this.end = { status: 'failed', reason: wire.code, error: wire };
      }
    }
    this.finish(this.end);
    return this.response;
  }

  private async sample(): Promise<FunctionCall[]> {
    const { context: ctx, route, params } = this.plan;
    const m = this.metrics;
    const req: ModelRequest = {
      model: route.model,
      settings: route.settings,
      instructions: ctx.instructions,
      // Snapshots: the context keeps growing after this call, the request must not.
      items: ctx.items.slice(),
      tools: ctx.functionTools,
      tool_choice: params.tool_choice,
      parallel_tool_calls: params.parallel_tool_calls,
      promptTokens: ctx.tokens.view(),
      maxOutputTokens: params.max_output_tokens,
      cachePartition: this.plan.owner,
    };
    m.count('model_calls');
    const clock = this.services.clock;
    const started = clock.now();
    let firstToken = started;
    const segment = new Segment((e) => this.emit(e), this.response.output);
    const budget = params.max_output_tokens;
    for await (const ev of this.services.model.sample(req, this.abort.signal)) {
      if (ev.type === 'prefill') {
        firstToken = clock.now();
        m.span('prefill', started, firstToken);
        m.count('prompt_tokens', ev.prompt_tokens);
        m.count('cached_tokens', ev.cached_tokens);
        this.promptTokens += ev.prompt_tokens;
        this.cachedTokens += ev.cached_tokens;
        continue;
      }
      if (budget !== null && carriesTokens(ev) && this.outputTokens >= budget) {
        // The whole response (a long-lived run included) has spent its output
        // budget: leaving the loop closes the model's stream.
        this.end = { status: 'incomplete', reason: 'max_output_tokens' };
        break;
      }
      const tokens = segment.apply(ev);
      this.outputTokens += tokens;
      m.count('output_tokens', tokens);
    }
    m.span('decode', firstToken, clock.now());
    appendOutput(this.plan.context, segment.items);
    return this.end ? [] : segment.calls;
  }

  private async pause(calls: FunctionCall[]): Promise<void> {
    const ctx = this.plan.context;
    const ids = calls.map((c) => c.call_id).filter((id) => !ctx.answeredCallIds.has(id));
    if (ids.length === 0) return;
    const waiting = this.pauses.wait(ids);
    const clock = this.services.clock;
    const pausedAt = clock.now();
    this.lastAppendAt = pausedAt;
    this.state = 'paused';
    this.metrics.count('pauses');
    this.response.pending_tool_calls = ids;
    this.lifecycle('response.done');
    delete this.response.pending_tool_calls;
    this.record();
    this.pauseTimer = setTimeout(() => this.stop('incomplete', 'pause_timeout'), this.services.limits.pauseTimeoutMs);
    try {
      await waiting;
    } finally {
      clearTimeout(this.pauseTimer);
      this.pauseTimer = null;
      this.metrics.span('paused', pausedAt, Math.max(pausedAt, this.lastAppendAt));
      if (this.state === 'paused') this.state = 'streaming';
    }
  }

  private finish(end: EndReason): void {
    const { response, metrics: m } = this;
    this.state = 'ended';
    this.pauses.close(end.reason);
    if (this.pauseTimer) clearTimeout(this.pauseTimer);
    m.time('usage', () => {
      response.status = end.status;
      response.completed_at = end.status === 'completed' ? Math.floor(Date.now() / 1000) : null;
      response.usage = makeUsage(this.promptTokens, this.cachedTokens, this.outputTokens);
      if (end.status === 'incomplete') response.incomplete_details = { reason: end.reason };
      if (end.error) response.error = { code: end.error.code, message: end.error.message };
      for (const item of response.output) if (item.status === 'in_progress') item.status = 'incomplete';
    });
    const job = { response, input: this.plan.input, owner: this.plan.owner, mode: this.plan.protocol, metrics: m };
    const overlapped = this.plan.postInference === 'overlapped';
    if (!overlapped) this.postInference(job);
    if (end.error) this.emitError(end.error);
    this.lifecycle(TERMINAL[end.status]);
    this.emitTiming(overlapped);
    this.record(overlapped);
    if (overlapped) {
      this.services.postWork.defer(() => {
        this.postInference(job);
        this.record(true, true);
      });
    }
  }

  /** Post-inference work; a failure there is logged and counted, and never loses the terminal event. */
  private postInference(job: Parameters<Services['post']['run']>[0]): void {
    try {
      this.services.post.run(job);
    } catch (err) {
      this.metrics.count('post_inference_failed');
      this.services.log.error({ err, response_id: this.id }, 'post-inference work failed');
    }
  }

  private emitTiming(overlapped: boolean): void {
    const m = this.metrics;
    this.emit({
      type: 'llr.timing',
      response_id: this.id,
      mode: this.plan.protocol,
      spans: m.spans,
      totals: { ...m.totals(), total: m.elapsed() },
      counters: { ...m.counters },
      switches: { ...this.services.switches, post_inference_deferred: overlapped },
    });
  }

  private record(deferred = false, postDone = !deferred && this.state === 'ended'): void {
    const r = this.response;
    const rec: RunRecord = {
      response_id: r.id,
      protocol: this.plan.protocol,
      connection: this.plan.connection,
      status: r.status,
      model: r.model,
      previous_response_id: r.previous_response_id,
      usage: r.usage,
      counters: { ...this.metrics.counters },
      totals: this.metrics.totals(),
      spans: this.metrics.spans.slice(),
      started_at: r.created_at,
      ended_at: this.state === 'ended' ? Math.floor(Date.now() / 1000) : null,
      post_deferred: deferred,
      post_done: postDone,
    };
    this.services.records.upsert(rec);
  }
}

const TERMINAL: Record<EndStatus, LifecycleType> = {
  completed: 'response.completed',
  failed: 'response.failed',
  incomplete: 'response.incomplete',
  cancelled: 'response.cancelled',
};
