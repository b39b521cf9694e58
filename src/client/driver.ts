/**
 * The one agent-loop driver interface every design's client implements, so
 * the same agent code runs over the long-lived protocol, WebSocket mode or
 * HTTP + SSE: `run(request, executeTool)` streams the server events, runs
 * the client tools the model asks for, sends their outputs back in the
 * design's own way, and resolves to the final Response.
 *
 * `AgentRun` is both an async iterable of events and a promise of the final
 * Response. Imports only `protocol/`.
 */
import type { ServerEvent, TimingEvent } from '../protocol/events.js';
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

export function toInputItems(input: string | InputItem[]): InputItem[] {
  return typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : input;
}

/** The events and the outcome of one agent run. */
export class AgentRun implements AsyncIterable<ServerEvent>, PromiseLike<Response> {
  /** Everything the conversation holds at the end: inputs, outputs, tool outputs, in order. */
  readonly transcript: InputItem[] = [];
  /** Each Response the run went through (one for long-lived, one per model call otherwise). */
  readonly responses: Response[] = [];
  readonly timings: TimingEvent[] = [];
  private readonly buffer: ServerEvent[] = [];
  private wake: (() => void) | null = null;
  private finished = false;
  private failure: unknown = null;
  private readonly result: Promise<Response>;
  private settle!: { resolve: (r: Response) => void; reject: (e: unknown) => void };

  constructor() {
    this.result = new Promise<Response>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // A caller that only iterates still gets errors through the iterator.
    this.result.catch(() => {});
  }

  push(e: ServerEvent): void {
    if (e.type === 'llr.timing') this.timings.push(e);
    this.buffer.push(e);
    this.wake?.();
  }

  resolve(r: Response): void {
    if (this.finished) return;
    this.finished = true;
    this.settle.resolve(r);
    this.wake?.();
  }

  reject(err: unknown): void {
    if (this.finished) return;
    this.finished = true;
    this.failure = err;
    this.settle.reject(err);
    this.wake?.();
  }

  get done(): boolean {
    return this.finished;
  }

  then<A = Response, B = never>(
    onfulfilled?: ((value: Response) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.result.then(onfulfilled, onrejected);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ServerEvent> {
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
  };
}

/** A run refused because the client already has one in flight (the WebSocket protocols allow one). */
export function busyRun(): AgentRun {
  const run = new AgentRun();
  run.reject(new Error('a run is already in progress on this client'));
  return run;
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
