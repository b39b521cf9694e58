/**
 * The event unions: what the server streams (SSE events or WebSocket frames)
 * and what a client may send on a WebSocket.
 *
 * Each wire `type` string is declared here once; everything else derives from
 * these unions (`ServerEventOf<'response.done'>`). Pure types; no I/O.
 */
import type {
  InputItem,
  OutputItem,
  OutputText,
  PromptCacheOptions,
  Response,
  TextConfig,
  Tool,
  ToolChoice,
} from './objects.js';

interface Seq {
  sequence_number: number;
}

/** One event type per member, so `Extract<ServerEvent, {type: K}>` finds each. */
type Each<T extends string, Body> = T extends string ? Seq & { type: T } & Body : never;

export type LifecycleType =
  | 'response.created'
  | 'response.in_progress'
  | 'response.completed'
  | 'response.failed'
  | 'response.incomplete'
  | 'response.cancelled'
  /** Long-lived protocol: the response is paused for client tool outputs. */
  | 'response.done';

export type ResponseLifecycleEvent = Each<LifecycleType, { response: Response }>;

export type OutputItemEvent = Each<
  'response.output_item.added' | 'response.output_item.done',
  { output_index: number; item: OutputItem }
>;

export type ContentPartEvent = Each<
  'response.content_part.added' | 'response.content_part.done',
  { item_id: string; output_index: number; content_index: number; part: OutputText }
>;

export type TextDeltaEvent = Seq & {
  type: 'response.output_text.delta';
  item_id: string;
  output_index: number;
  content_index: number;
  delta: string;
  logprobs: unknown[];
};

export type TextDoneEvent = Seq & {
  type: 'response.output_text.done';
  item_id: string;
  output_index: number;
  content_index: number;
  text: string;
  logprobs: unknown[];
};

export type ArgsDeltaEvent = Seq & {
  type: 'response.function_call_arguments.delta';
  item_id: string;
  output_index: number;
  delta: string;
};

export type ArgsDoneEvent = Seq & {
  type: 'response.function_call_arguments.done';
  item_id: string;
  output_index: number;
  name: string;
  arguments: string;
};

/** openai-node's `ResponseCustomToolCallInputDeltaEvent`: a piece of a custom tool call's `input`. */
export type CustomInputDeltaEvent = Seq & {
  type: 'response.custom_tool_call_input.delta';
  item_id: string;
  output_index: number;
  delta: string;
};

/** openai-node's `ResponseCustomToolCallInputDoneEvent`: a custom tool call's whole `input`. */
export type CustomInputDoneEvent = Seq & {
  type: 'response.custom_tool_call_input.done';
  item_id: string;
  output_index: number;
  input: string;
};

export interface WireErrorBody {
  type: 'invalid_request_error' | 'server_error' | 'rate_limit_error';
  code: string;
  message: string;
  param: string | null;
}

/**
 * WebSocket shape: the nested `status` and `error` OpenAI's spec gives a
 * WebSocket error (`ResponseWsError`, what Codex reads), and the flat `code`,
 * `message`, `param` openai-node's `ResponsesServerEvent` types as required
 * (its `ResponseErrorEvent`); SSE drops `status` (the HTTP one is sent), see
 * `sseFrame` in transport/sse.ts. Always numbered: in the stream of the
 * response in flight, or by the connection's own counter when none is.
 */
export type ErrorEvent = Seq & {
  type: 'error';
  status: number;
  error: WireErrorBody;
} & Pick<WireErrorBody, 'code' | 'message' | 'param'>;

/**
 * The `error` event as an SSE stream carries it: flat, as openai-node reads
 * it (written by `sseFrame`, transport/sse.ts); no status, the HTTP one is
 * already sent.
 */
export type SseErrorEvent = Seq & { type: 'error' } & Pick<WireErrorBody, 'code' | 'message' | 'param'>;

/** What an SSE stream carries: the server events, `error` in its flat shape. */
export type SseEvent = Exclude<ServerEvent, ErrorEvent> | SseErrorEvent;

export interface TimingSpan {
  stage: string;
  start_ms: number;
  duration_ms: number;
}

/**
 * The server's extension event: timing and counters of one response, sent
 * right after its terminal event. Named with the implementor prefix the Open
 * Responses specification asks of extension events, and opt-in (see
 * `LlrOptions`): a client that did not ask never receives it.
 */
export const TIMING_EVENT = 'llr:timing' as const;

export type TimingEvent = Seq & {
  type: typeof TIMING_EVENT;
  response_id: string;
  mode: string;
  spans: TimingSpan[];
  totals: Record<string, number>;
  counters: Record<string, number>;
  switches: Record<string, boolean | number>;
};

export function isTimingEvent(e: { type: string }): e is TimingEvent {
  return e.type === TIMING_EVENT;
}

/**
 * The acknowledgement of a `response.inject` (the `responses_multi_agent=v1`
 * beta's name for appending to a response that waits for client tool outputs,
 * openai/openai-openapi `BetaResponseInjectCreatedEvent`): every injected
 * item was validated and committed. Sent in the response's stream, before
 * any event of the sampling it resumes.
 */
export type InjectCreatedEvent = Seq & { type: 'response.inject.created'; response_id: string };

/**
 * A `response.inject` that named no response waiting on this connection
 * (`BetaResponseInjectFailedEvent`): the uncommitted items come back so the
 * client can send them elsewhere. Items refused on their merits (an output
 * for a call that is not pending, a flagged credential) get an `error` event,
 * as a `response.append` does.
 */
export type InjectFailedEvent = Seq & {
  type: 'response.inject.failed';
  response_id: string;
  input: InputItem[];
  error: { code: 'response_already_completed' | 'response_not_found'; message: string };
};

/**
 * A `response.steer` this server did not commit (OpenAI's `ResponseSteerFailedEvent`, openai-node 7): it
 * steers no response, so every steer comes back with its input, `invalid_input` for input that is not steering
 * input, `steering_not_supported` for a response on this connection (in that response's lane) and
 * `response_not_found` otherwise. No `steer.id`: none is
 * allocated before a refusal.
 */
export type SteerFailedEvent = Seq & {
  type: 'response.steer.failed';
  steer: { input: unknown; previous_response_id: string };
  error: { code: 'invalid_input' | 'steering_not_supported' | 'response_not_found'; message: string; type: 'invalid_request_error' };
};

export type ServerEvent =
  | ResponseLifecycleEvent
  | OutputItemEvent
  | ContentPartEvent
  | TextDeltaEvent
  | TextDoneEvent
  | ArgsDeltaEvent
  | ArgsDoneEvent
  | CustomInputDeltaEvent
  | CustomInputDoneEvent
  | ErrorEvent
  | TimingEvent
  | InjectCreatedEvent
  | InjectFailedEvent
  | SteerFailedEvent;

export type ServerEventType = ServerEvent['type'];
export type ServerEventOf<K extends ServerEventType> = Extract<ServerEvent, { type: K }>;

/** Terminal lifecycle events: after one of these the response is over. */
const TERMINAL_EVENT_TYPES = [
  'response.completed',
  'response.failed',
  'response.incomplete',
  'response.cancelled',
] as const;
export type TerminalEventType = (typeof TERMINAL_EVENT_TYPES)[number];

export function isTerminalEvent(e: { type: string }): e is ServerEventOf<TerminalEventType> {
  return (TERMINAL_EVENT_TYPES as readonly string[]).includes(e.type);
}

/** The body of `POST /v1/responses` and of a `response.create` frame. */
export interface CreateParams {
  model: string;
  input: InputItem[];
  instructions: string | null;
  tools: Tool[];
  tool_choice: ToolChoice;
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  store: boolean;
  stream: boolean;
  /**
   * `background: true`: the run goes on server-side whatever becomes of the request (HTTP only; modes/background.ts).
   * Absent unless the client asked for it (a WebSocket create refuses it: the API does not support it there).
   */
  background?: true;
  /** WebSocket mode: `false` prepares state without sampling. */
  generate: boolean;
  /**
   * `prompt_cache_options.prewarm: true`: the prompt is prefilled into the model's prefix cache and nothing is
   * sampled (`generate` is then false). Absent otherwise.
   */
  prewarm?: true;
  max_output_tokens: number | null;
  metadata: Record<string, string>;
  temperature: number | null;
  top_p: number | null;
  user: string | null;
  reasoning: { effort: string | null; summary: string | null; context?: string; mode?: string } | null;
  prompt_cache_key: string | null;
  safety_identifier: string | null;
  service_tier: string | null;
  /** Echoed only (the simulated model has no prompt cache to keep); absent in params built before it was parsed. */
  prompt_cache_retention?: string | null;
  /** Echoed only, as applied (`mode` and `ttl` defaults filled in); absent unless sent. */
  prompt_cache_options?: PromptCacheOptions;
  /** Echoed only (it bounds built-in tool calls, which the simulated model never makes); absent unless sent. */
  max_tool_calls?: number;
  /** The most likely tokens listed with each text token's logprob (0–20), when `logprobs`; echoed; absent unless sent. */
  top_logprobs?: number;
  /** The create's `include` named `message.output_text.logprobs`: its text lists logprobs. Absent otherwise. */
  logprobs?: true;
  /** This server's own options (absent unless the client sent or opted in to some). */
  llr?: LlrOptions;
  /** Server-side compaction (absent unless the client asked for it). */
  context_management?: ContextManagement[];
  /**
   * The create's input ended with `{"type": "compaction_trigger"}` (taken off the input): the response compacts its
   * context now, without a model call, and its output is that one compaction item. Absent otherwise.
   */
  compaction_trigger?: true;
  /** `text.format` (structured outputs) and verbosity; absent means plain text. */
  text?: TextConfig;
  /** Echoed only (the simulated model has no context limit to truncate at, and does not sample). */
  truncation?: 'auto' | 'disabled';
  presence_penalty?: number;
  frequency_penalty?: number;
}

/**
 * `context_management: [{type: "compaction", compact_threshold}]`: compact
 * the context before a model call once its rendered prompt passes the
 * threshold (tokens; `null` takes the server's default,
 * `DEFAULT_COMPACT_THRESHOLD` in pipeline/compaction.ts).
 */
export interface ContextManagement {
  type: 'compaction';
  compact_threshold: number | null;
}

/**
 * Options for this server's extensions, opt-in per request: the create
 * body's `"llr": {"timing": true}`, or for a whole connection the header
 * `X-LLR-Timing: 1` (HTTP request or WebSocket upgrade) or the upgrade query
 * `?llr_timing=1` (browsers cannot set headers).
 */
export interface LlrOptions {
  /** Send `llr:timing` after the terminal event. Default false. */
  timing: boolean;
}

export const CLIENT_EVENT_TYPES = [
  'response.create',
  'response.append',
  'response.inject',
  'response.cancel',
  'response.processed',
  'response.steer',
] as const;
export type ClientEventType = (typeof CLIENT_EVENT_TYPES)[number];

export type ClientEvent =
  /** `stream_id`: the WebSocket lane (`STREAM_ID`), echoed on the response's events; absent when not sent. */
  | ({ type: 'response.create'; stream_id?: string } & CreateParams)
  | { type: 'response.append'; input: InputItem[]; response_id: string | null }
  /** `response.append` under the `responses_multi_agent=v1` beta's name: the response is named, and acknowledged. */
  | { type: 'response.inject'; input: InputItem[]; response_id: string }
  | { type: 'response.cancel'; response_id: string | null }
  | { type: 'response.processed' }
  /** OpenAI's `ResponseSteerEvent`; `input` as sent (it is never committed, only returned). */
  | { type: 'response.steer'; input: unknown; previous_response_id: string; /** Why it is not steering input (parse.ts `unsteerable`). */ invalid?: string };

/** Events as the engine produces them, before the stream numbers them. */
export type UnnumberedEvent = ServerEvent extends infer E
  ? E extends ServerEvent
    ? Omit<E, 'sequence_number'>
    : never
  : never;

/** Item types the client executes: once one is done, the client can start it. */
const CLIENT_CALLS: ReadonlySet<string> = new Set(['function_call', 'custom_tool_call', 'local_shell_call', 'computer_call']);

/** `e` hands the client a call to run: the session has the transport write it out at once (`Transport.flush`). */
export function readyToRun(e: ServerEvent): boolean {
  return e.type === 'response.output_item.done' && CLIENT_CALLS.has(e.item.type);
}
