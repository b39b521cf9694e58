/**
 * The one agent-loop driver interface every design's client implements, so
 * the same agent code runs over the long-lived protocol, WebSocket mode or
 * HTTP + SSE: `run(request, executeTool)` streams the server events, runs
 * the client tools the model asks for, sends their outputs back in the
 * design's own way, and resolves to the final Response.
 *
 * `AgentRun` is both an async iterable of events and a promise of the final
 * Response. Imports only `protocol/`.
 *
 * Every client acts on the standard terminal events only, so it runs against
 * any Responses server. The server's `llr:timing` extension event is opt-in
 * (the clients ask for it by default, `timing: false` to not) and optional:
 * it arrives after the terminal event, possibly after the run resolved or
 * the next began, so it is routed by `response_id` to its run
 * (`TimingRoutes`), and a caller that wants every timing awaits
 * `run.telemetry()`.
 */
import { isTimingEvent, type ServerEvent, type SseErrorEvent, type TimingEvent } from '../protocol/events.js';
import type { FunctionCall, InputItem, Response, Tool, ToolChoice } from '../protocol/objects.js';
import type { Protocol } from '../protocol/designs.js';

export interface AgentRequest {
  model: string;
  input: string | InputItem[];
  instructions?: string;
  tools?: Tool[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  store?: boolean;
  metadata?: Record<string, string>;
  /** Server-side compaction, sent with every create of the run. */
  context_management?: Array<{ type: 'compaction'; compact_threshold?: number | null }>;
}

/** Runs one client tool call; its return value is the call's output. */
export type ToolExecutor = (call: FunctionCall) => Promise<string> | string;

export interface AgentClient {
  readonly protocol: Protocol;
  /** Run one user turn; a later run continues the same conversation. */
  run(request: AgentRequest, executeTool: ToolExecutor): AgentRun;
  /** Forget the conversation: the next run starts a new one. */
  newConversation(): void;
  close(): Promise<void>;
  /** Payload bytes (HTTP bodies, WebSocket frames; not the framing around them) sent since the client was made. */
  readonly bytesSent: number;
  /** Payload bytes received since the client was made. */
  readonly bytesReceived: number;
}

/** A wire error the server sent, surfaced to the caller. */
export class ServerError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly status = 400,
  ) {
    super(`${code}: ${message}`);
    this.name = new.target.name;
  }
}

/**
 * `err`, the server's refusal of this client's append to its paused run, as the run's failure: this client sends its
 * tools' outputs as they are and cannot send less, so it ends the run (a cancel, or closing its stream). The server's
 * own words ("Send a smaller one; the run stays paused.") read, as the failure, as if the run were still paused, and a
 * run the server ended `incomplete` after the refusal said only "the run ended incomplete" (outside attack atk89 F3).
 */
export function appendRefused(err: unknown): unknown {
  // Its run gone meanwhile (ended, or another key's): nothing was refused.
  if (!(err instanceof ServerError) || err.code === 'response_not_found') return err;
  const message = err.message.slice(err.code.length + 2);
  return new ServerError(err.code, `${message} (The server refused this client's append to its paused run, and the client ended the run: it cannot send less.)`, err.param, err.status);
}

/** A non-2xx answer as the server's error; a body that is not a Responses error (an HTML error page) by its status and first 200 characters. */
export function serverError(status: number, text: string): ServerError {
  let err: { code?: string; message?: string; param?: string | null } = {};
  try {
    err = (JSON.parse(text) as { error?: typeof err }).error ?? {};
  } catch {
    // Not a Responses error body: reported with the status alone.
  }
  return new ServerError(err.code ?? `http_${status}`, err.message ?? text.slice(0, 200), err.param ?? null, status);
}

/**
 * `fetch`, its failure said with its cause: undici's own message is only
 * `fetch failed` (`llr run --protocol http` against a port nobody listens
 * on said just that), the cause (`connect ECONNREFUSED 127.0.0.1:1`) says why.
 */
export async function fetchOrSay(url: string | URL, init: RequestInit): Promise<globalThis.Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const cause = (err as { cause?: { message?: unknown } }).cause?.message;
    throw typeof cause === 'string' && cause ? new Error(`${(err as Error).message}: ${cause}`, { cause: err }) : err;
  }
}

export function toInputItems(input: string | InputItem[]): InputItem[] {
  return typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : input;
}

/** An event of a run as its transport carried it: over SSE, `error` is flat. */
export type AgentEvent = ServerEvent | SseErrorEvent;

/**
 * The events and the outcome of one agent run. Its events are kept for an
 * iterator until the run is awaited without one: a caller that only awaits
 * the outcome (the demo's lanes, the bench's replay) held every event of the
 * run, each long-lived pause's `response.done` a snapshot of the whole output
 * so far, so a 2,500-step run's client held ~1 GB. Iterate before awaiting
 * (as `llr run` does) to see every event.
 */
export class AgentRun implements AsyncIterable<AgentEvent>, PromiseLike<Response> {
  /** Everything the conversation holds at the end: inputs, outputs, tool outputs, in order. */
  readonly transcript: InputItem[] = [];

  /**
   * Add `items` to the transcript, one at a time: `push(...items)` passes each as an argument, and a history of
   * ~125,000 items or more overflowed the stack (RangeError) on every design (outside attack atk86 F4).
   */
  record(...lists: ReadonlyArray<readonly InputItem[]>): void {
    for (const items of lists) for (const item of items) this.transcript.push(item);
  }
  /** Each Response the run went through (one for long-lived, one per model call otherwise). */
  readonly responses: Response[] = [];
  readonly timings: TimingEvent[] = [];
  private readonly buffer: AgentEvent[] = [];
  /** An iterator was started: events are kept for it. */
  private iterated = false;
  /** Awaited with no iterator started: events are no longer kept (see the class comment). */
  private awaitedOnly = false;
  /** `then` was called (awaited, alone or beside an iterator). */
  private awaited = false;
  private wake: (() => void) | null = null;
  private finished = false;
  private failure: unknown = null;
  private readonly result: Promise<Response>;
  private settle!: { resolve: (r: Response) => void; reject: (e: unknown) => void };
  private telemetryEnded: boolean;
  private telemetryWaiters: Array<() => void> = [];

  /** `expectTimings`: the client asked the server for `llr:timing` events. */
  constructor(expectTimings = false) {
    this.telemetryEnded = !expectTimings;
    this.result = new Promise<Response>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // A caller that only iterates still gets errors through the iterator.
    this.result.catch(() => {});
  }

  push(e: AgentEvent): void {
    if (isTimingEvent(e)) this.timings.push(e);
    if (!this.awaitedOnly) this.buffer.push(e);
    this.wake?.();
    this.checkTelemetry();
  }

  resolve(r: Response): void {
    this.finish(() => this.settle.resolve(r));
  }

  reject(err: unknown): void {
    this.finish(() => {
      this.failure = err;
      this.settle.reject(err);
    });
  }

  /** A run ends once: the first outcome settles it and wakes its readers. */
  private finish(settle: () => void): void {
    if (this.finished) return;
    this.finished = true;
    settle();
    this.wake?.();
    this.checkTelemetry();
  }

  /**
   * Resolves with the timings once the run is over and every response it went
   * through has its `llr:timing` event, or once no more can come (the client
   * did not ask for them, or its connection closed). Only for callers that
   * need the timings (the bench): against a server that ignores the opt-in
   * and keeps the connection open, it waits.
   */
  telemetry(): Promise<TimingEvent[]> {
    return new Promise((resolve) => {
      this.telemetryWaiters.push(() => resolve(this.timings));
      this.checkTelemetry();
    });
  }

  /** No more timing events will come for this run. */
  endTelemetry(): void {
    this.telemetryEnded = true;
    this.checkTelemetry();
  }

  private checkTelemetry(): void {
    if (this.telemetryWaiters.length === 0 || !this.finished) return;
    const timed = new Set(this.timings.map((t) => t.response_id));
    if (!this.telemetryEnded && !this.responses.every((r) => timed.has(r.id))) return;
    for (const w of this.telemetryWaiters.splice(0)) w();
  }

  get done(): boolean {
    return this.finished;
  }

  then<A = Response, B = never>(
    onfulfilled?: ((value: Response) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    this.awaited = true;
    if (!this.iterated && !this.awaitedOnly) {
      this.awaitedOnly = true;
      this.buffer.length = 0;
    }
    return this.result.then(onfulfilled, onrejected);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<AgentEvent> {
    this.iterated = true;
    try {
      for (;;) {
        const e = this.buffer.shift();
        if (e) {
          yield e;
          continue;
        }
        if (this.finished) {
          if (this.failure) throw this.failure;
          return;
        }
        await new Promise<void>((r) => (this.wake = r));
        this.wake = null;
      }
    } finally {
      // Left early (a `break` once the caller saw what it wanted, then awaited): no iterator reads on, so the run
      // is as one never iterated. Its events were kept for nobody until it ended: the ~1 GB of a long run again.
      if (!this.finished) {
        this.iterated = false;
        if (this.awaited) {
          this.awaitedOnly = true;
          this.buffer.length = 0;
        }
      }
    }
  }
}

/** The body of a create request for `request` (the same for every design). */
export function createBody(request: AgentRequest, input: InputItem[], previous: string | null, store: boolean): Record<string, unknown> {
  return {
    model: request.model,
    input,
    instructions: request.instructions,
    tools: request.tools ?? [],
    tool_choice: request.tool_choice,
    parallel_tool_calls: request.parallel_tool_calls,
    store,
    metadata: request.metadata,
    previous_response_id: previous,
    ...(request.context_management && { context_management: request.context_management }),
  };
}

/**
 * Where a late `llr:timing` event goes: the run whose response it describes.
 * A client registers each response at its terminal event (when it asked for
 * timings) and hands every timing event here. At most `max` responses wait
 * for theirs; an older one is given up (its run's telemetry ends).
 */
export class TimingRoutes {
  private readonly owners = new Map<string, AgentRun>();
  constructor(private readonly max = 64) {}

  expect(responseId: string, run: AgentRun): void {
    this.owners.set(responseId, run);
    if (this.owners.size > this.max) {
      const [oldest, owner] = this.owners.entries().next().value as [string, AgentRun];
      this.owners.delete(oldest);
      owner.endTelemetry();
    }
  }

  /** Give a timing event to its run; false when no run expects it. */
  deliver(e: TimingEvent): boolean {
    const run = this.owners.get(e.response_id);
    if (!run) return false;
    this.owners.delete(e.response_id);
    run.push(e);
    return true;
  }

  /** The connection is gone: no timing will come for anyone. */
  close(): void {
    for (const run of this.owners.values()) run.endTelemetry();
    this.owners.clear();
  }
}

/** A run refused because the client already has one in flight (the WebSocket protocols allow one). */
export function busyRun(): AgentRun {
  const run = new AgentRun();
  run.reject(new Error('a run is already in progress on this client'));
  return run;
}

/** The calls a pause (`response.done`) waits for: those it lists in `pending_tool_calls`, else every call since the last pause. */
export function pausedCalls(response: Response, calls: readonly FunctionCall[]): FunctionCall[] {
  const pending = new Set(response.pending_tool_calls ?? calls.map((c) => c.call_id));
  return calls.filter((c) => pending.has(c.call_id));
}

/** Run the calls of one model turn (concurrently) and build their outputs. */
export async function runTools(calls: FunctionCall[], exec: ToolExecutor): Promise<InputItem[]> {
  const outputs = await Promise.all(
    calls.map(async (call) => {
      let output: string;
      try {
        output = await exec(call);
      } catch (err) {
        output = `error: ${(err as Error).message}`;
      }
      return { type: 'function_call_output', call_id: call.call_id, output } as InputItem;
    }),
  );
  return outputs;
}
