/**
 * The Responses API objects as they travel on the wire: the Response, its
 * usage, output items, input items and tool definitions.
 *
 * Used by every layer (engine, pipeline, modes, clients). Field names are the
 * wire's snake_case so objects are sent as they are. Pure types plus a few
 * constructors; no I/O. Leaves out the hosted-tool item types we do not
 * serve (web search, file search, ...): they pass through as `UnknownItem`.
 */

export const RESPONSE_STATUSES = [
  'queued',
  'in_progress',
  'completed',
  'failed',
  'incomplete',
  'cancelled',
] as const;
export type ResponseStatus = (typeof RESPONSE_STATUSES)[number];

export interface Usage {
  input_tokens: number;
  /** `cache_write_tokens`: of the input, the tokens the model's prefix cache stored anew (the OpenAPI spec requires it). */
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface OutputText {
  type: 'output_text';
  text: string;
  annotations: unknown[];
  logprobs: unknown[];
}

export interface InputText {
  type: 'input_text';
  text: string;
}

/** Content parts we do not render as text (images, files) pass through. */
export interface OtherContentPart {
  type: string;
  [k: string]: unknown;
}

export type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

export interface AssistantMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  status: ItemStatus;
  content: OutputText[];
}

export interface FunctionCall {
  id: string;
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}

/**
 * A call of a custom (freeform) tool the request declares (`{type: "custom", name}`), its text in `input`
 * (openai-node's `ResponseCustomToolCall`, with the id and status an output item has): made only by the replay model,
 * for a recorded `custom_tool_call` whose tool the client declares custom (Codex's `apply_patch`).
 */
export type CustomToolCall = {
  id: string;
  type: 'custom_tool_call';
  call_id: string;
  name: string;
  input: string;
  status: ItemStatus;
};

/** A function call sent back as input: the API accepts it without the id and status it was given. */
export interface InputFunctionCall extends Omit<FunctionCall, 'id' | 'status'> {
  id?: string;
  status?: ItemStatus;
}

export interface FunctionCallOutput {
  type: 'function_call_output';
  call_id: string;
  output: string | Array<InputText | OtherContentPart>;
  id?: string;
  status?: ItemStatus;
}

export type InputRole = 'user' | 'system' | 'developer' | 'assistant';

export interface InputMessage {
  type?: 'message';
  id?: string;
  role: InputRole;
  content: string | Array<InputText | OutputText | OtherContentPart>;
  status?: ItemStatus;
}

/** Carried through untouched: the edge checks no field of it, so none is typed as checked. */
export interface ReasoningItem {
  type: 'reasoning';
  id?: string;
  summary?: unknown;
  encrypted_content?: string | null;
  [k: string]: unknown;
}

export interface ItemReference {
  type: 'item_reference';
  id: string;
}

/**
 * A compaction (`POST /v1/responses/compact`, or server-side compaction):
 * sent back as input, it stands for the history it summarises.
 */
export interface CompactionItem {
  id: string;
  type: 'compaction';
  encrypted_content: string;
  created_by?: string;
}

/**
 * Any other item type (hosted tool calls, custom tools): carried through
 * untouched. Its `type` is any string, so it matches every `item.type ===`
 * test: narrow with `isKnownItem` first, then `switch (item.type)` narrows.
 */
export interface UnknownItem {
  type: string;
  [k: string]: unknown;
}

export type OutputItem = AssistantMessage | FunctionCall | CustomToolCall | CompactionItem;

/** A compaction sent back as input: only its sealed content is required. */
export interface InputCompactionItem extends Omit<CompactionItem, 'id'> {
  id?: string;
}

/** The item types this server reads: the edge checks their shape (protocol/parse-input.ts). */
export type KnownItem = InputMessage | InputFunctionCall | FunctionCallOutput | ReasoningItem | ItemReference | InputCompactionItem;
export type InputItem = KnownItem | UnknownItem;

/** Keyed by type so the compiler checks the list against `KnownItem`. */
const KNOWN_ITEM_TYPES: Record<NonNullable<KnownItem['type']>, true> = {
  message: true,
  function_call: true,
  function_call_output: true,
  reasoning: true,
  item_reference: true,
  compaction: true,
};

/** A known item (a message has type 'message' or none); afterwards `item.type` discriminates. */
export function isKnownItem(item: InputItem): item is KnownItem {
  return item.type === undefined || Object.hasOwn(KNOWN_ITEM_TYPES, item.type);
}

export interface FunctionTool {
  type: 'function';
  name: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
  strict?: boolean | null;
}

/** Non-function tools (Codex sends several): accepted and ignored. */
export interface OtherTool {
  type: string;
  [k: string]: unknown;
}

export type Tool = FunctionTool | OtherTool;

export type ToolChoice =
  | 'auto'
  | 'none'
  | 'required'
  | { type: 'function'; name: string }
  | { type: string; [k: string]: unknown };

/** The answer of `POST /v1/responses/compact`. */
export interface CompactedResponse {
  id: string;
  object: 'response.compaction';
  created_at: number;
  output: Array<InputMessage | CompactionItem>;
  usage: Usage;
}

/** `text.format`: plain text, any JSON object, or JSON that follows a schema (structured outputs). */
export type TextFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict?: boolean | null; description?: string | null };

export interface TextConfig {
  format: TextFormat;
  verbosity?: 'low' | 'medium' | 'high' | null;
}

/**
 * `incomplete_details.reason` is a closed enum in the API (openai-node's
 * `Response.IncompleteDetails`, the OpenAPI spec): a strict client fails to
 * decode any other string. A run this server ends `incomplete` for a reason
 * of its own (a pause timeout, shutdown, the connection's lifetime) says so
 * in `llr_incomplete_reason` instead, with `incomplete_details: null`.
 */
export const INCOMPLETE_REASONS = ['max_output_tokens', 'content_filter'] as const;
export type IncompleteReason = (typeof INCOMPLETE_REASONS)[number];

export function isIncompleteReason(reason: string): reason is IncompleteReason {
  return (INCOMPLETE_REASONS as readonly string[]).includes(reason);
}

/** `prompt_cache_options` as a Response reports it (openai-node 7's `Response.PromptCacheOptions`). */
export interface PromptCacheOptions {
  mode: 'implicit' | 'explicit';
  ttl: string;
  comparison_response_id?: string | null;
}

export interface ResponseError {
  code: string;
  message: string;
}

export interface Response {
  id: string;
  object: 'response';
  created_at: number;
  completed_at: number | null;
  status: ResponseStatus;
  error: ResponseError | null;
  incomplete_details: { reason: IncompleteReason } | null;
  model: string;
  previous_response_id: string | null;
  instructions: string | null;
  output: OutputItem[];
  tools: Tool[];
  tool_choice: ToolChoice;
  truncation: string;
  parallel_tool_calls: boolean;
  text: TextConfig;
  top_p: number;
  presence_penalty: number;
  frequency_penalty: number;
  top_logprobs: number;
  temperature: number;
  reasoning: { effort: string | null; summary: string | null; context?: string; mode?: string } | null;
  user: string | null;
  usage: Usage | null;
  max_output_tokens: number | null;
  max_tool_calls: number | null;
  store: boolean;
  background: boolean;
  service_tier: string;
  metadata: Record<string, string>;
  safety_identifier: string | null;
  prompt_cache_key: string | null;
  /** Optional in the API's schema; the engine always sends them (null). */
  prompt_cache_retention?: string | null;
  /** As the create sent it, defaults filled in (openai-node 7's `Response.prompt_cache_options`); absent when not sent. */
  prompt_cache_options?: PromptCacheOptions;
  /**
   * The Cyber access program the response ran under (openai-node 7's `Response.access_programs`, declared
   * always present and nullable; `null` is the API's implicit Standard). No access programs are served: always null.
   */
  access_programs: { cyber: 'standard' | 'daybreak_blue' | 'daybreak_red' } | null;
  /** Conversations are not served: always null. */
  conversation?: { id: string } | null;
  /** Prompt templates are not served: always null. */
  prompt?: Record<string, unknown> | null;
  /** Long-lived protocol only: call ids the paused response waits for. */
  pending_tool_calls?: string[];
  /**
   * This server's extension: why a response ended `incomplete` when the API's
   * enum has no word for it (`pause_timeout`, `server_shutdown`,
   * `connection_limit_reached`); `incomplete_details` is then null. Absent otherwise.
   */
  llr_incomplete_reason?: string;
}

export function isFunctionTool(t: Tool): t is FunctionTool {
  return t.type === 'function' && typeof (t as FunctionTool).name === 'string';
}

/**
 * `reasoning`: of the `output` tokens, those the model spent on hidden
 * reasoning; `cacheWrites`: of the input, those the prefix cache stored anew.
 */
export function makeUsage(input: number, cached: number, output: number, reasoning = 0, cacheWrites = 0): Usage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached, cache_write_tokens: cacheWrites },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

const ID_ALPHABET = '0123456789abcdef';

/** Ids look like the API's (`resp_…`, `msg_…`, `fc_…`, `call_…`); random, not secret. */
export function newId(prefix: string, length = 32): string {
  let s = '';
  for (let i = 0; i < length; i++) s += ID_ALPHABET[Math.floor(Math.random() * 16)];
  return `${prefix}_${s}`;
}

/**
 * `item` as a context holds it: the same item, or, for a message whose `output_text` parts list logprobs, a copy whose
 * parts list none. The model reads the text, not its logprobs; a context that kept them counted them against
 * `--max-context-bytes` (a chain of answers with `top_logprobs` 20 was refused at its ninth turn) and held them twice.
 */
export function withoutLogprobs<T extends InputItem>(item: T): T {
  const content = (item as { type?: unknown; content?: unknown }).type === 'message' ? (item as { content?: unknown }).content : undefined;
  if (!Array.isArray(content) || !content.some(listsLogprobs)) return item;
  return { ...item, content: content.map((p: unknown) => (listsLogprobs(p) ? { ...(p as object), logprobs: [] } : p)) };
}

function listsLogprobs(part: unknown): boolean {
  if (typeof part !== 'object' || part === null) return false;
  const p = part as { type?: unknown; logprobs?: unknown };
  return p.type === 'output_text' && Array.isArray(p.logprobs) && p.logprobs.length > 0;
}

/**
 * Content parts as the API shows them back (an input_items listing, a compaction's output): an `input_image` sent
 * without `detail` has the API's default, `auto` (openai-node's `ResponseInputImage.detail` and the spec's
 * `InputImageContent` require it). The same array when nothing changes.
 */
export function withImageDetail<T>(parts: T[]): T[] {
  if (!parts.some((p) => isImageWithoutDetail(p))) return parts;
  return parts.map((p) => (isImageWithoutDetail(p) ? ({ ...p, detail: 'auto' } as T) : p));
}

function isImageWithoutDetail(p: unknown): p is Record<string, unknown> {
  return typeof p === 'object' && p !== null && (p as { type?: unknown }).type === 'input_image' && (p as { detail?: unknown }).detail == null;
}
