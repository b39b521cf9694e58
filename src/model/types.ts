/**
 * The Model seam: what the engine asks a model for and what it streams back.
 *
 * The engine calls `sample()` once per model call (once per segment of a
 * long-lived run) and consumes the events in order. Each `text.delta` /
 * `args.delta` is exactly one output token; a `text.deltas` / `args.deltas`
 * batch carries several, one token each, and is only sent to a caller that
 * asked for batches (`ModelRequest.batchTokens`). Leaves out real network models:
 * this project measures the API around the model, so the model is simulated.
 */
import type { FunctionTool, InputItem, TextFormat, ToolChoice } from '../protocol/objects.js';
import type { PromptKeys } from './prefix-cache.js';
import type { ConversationDigest, TurnScan } from './conversation.js';
import type { TokenLogprob } from './logprobs.js';

export interface ModelSettings {
  /** Decode speed; `Infinity` streams as fast as the loop can. */
  tokensPerSecond: number;
  /** Fixed part of time to first token, ms. */
  ttftBaseMs: number;
  /** Prefill speed for uncached prompt tokens; `Infinity` makes prefill free. */
  prefillTokensPerSecond: number;
}

export interface ModelRequest {
  /** The resolved model name (after routing). */
  model: string;
  settings: ModelSettings;
  instructions: string | null;
  /** The whole context: inputs and earlier outputs, in order. */
  items: readonly InputItem[];
  /**
   * The call ids of the client calls in `items`, when the caller keeps them (a rendered context does): a call the model
   * makes takes an id none of them has. Absent: read from `items`.
   */
  callIds?: ReadonlySet<string>;
  tools: readonly FunctionTool[];
  /** The names of the custom (freeform) tools the request declares (`{type: "custom"}`); absent: none. */
  customTools?: ReadonlySet<string>;
  tool_choice: ToolChoice;
  parallel_tool_calls: boolean;
  /** The rendered prompt (o200k token ids) the prefix cache is keyed on. */
  promptTokens: ArrayLike<number>;
  /**
   * Prefill the prompt into the prefix cache and stop: the call ends after its `prefill` event, having sampled and
   * planned nothing (a create's `prompt_cache_options.prewarm`). The engine stops reading there whatever the model does.
   */
  prefillOnly?: true;
  /**
   * The prompt's prefix-cache block keys kept between calls (the prompt only
   * grows): the model hashes only the new blocks. Absent: it hashes the prompt.
   */
  promptKeys?: PromptKeys;
  /** Characters of text in `items` (model/conversation.ts `itemTextChars`), when the caller keeps the sum; absent: counted. */
  conversationChars?: number;
  /**
   * The conversation's digest kept between calls (its items only grow): the
   * model hashes only the new items. Absent: it hashes the whole conversation.
   */
  digest?: ConversationDigest;
  /** The conversation's turn scan kept between calls (model/conversation.ts): a policy reads only the new items. Absent: it scans them all. */
  turns?: TurnScan;
  maxOutputTokens: number | null;
  /** The format the text answer must follow (`text.format`); absent means plain text. */
  textFormat?: TextFormat;
  /** Whose prefix-cache namespace this call uses (the API key's owner id); absent or null = the anonymous one. */
  cachePartition?: string | null;
  /**
   * The most output tokens the caller takes in one `text.deltas` /
   * `args.deltas` event: tokens already due at once (an instant model: all
   * of them; a paced one: those its schedule has reached) come as one batch
   * of up to this many. Absent or 1: one `text.delta` / `args.delta` per token.
   */
  batchTokens?: number;
  /**
   * Log probabilities for the text's pieces, with `top` of the most likely tokens at each (0 to 20: the create's
   * `top_logprobs`), for the call's first `pieces` text pieces (what the response may still list), when the create
   * asked for them (`include: ["message.output_text.logprobs"]`). Absent: none. A call's arguments carry none, as
   * the API gives none for them.
   */
  logprobs?: { top: number; pieces: number };
}

export type ModelEvent =
  /** Prefill is over: the first output token follows. */
  /** `cache_write_tokens`: the prompt's full blocks the prefix cache did not hold and stored after this prefill. */
  | { type: 'prefill'; prompt_tokens: number; cached_tokens: number; cache_write_tokens: number; duration_ms: number }
  /** Hidden reasoning tokens decoded (counted as output, not streamed). */
  | { type: 'reasoning'; tokens: number }
  | { type: 'message.start' }
  /** `logprobs`: the piece's log probabilities, when the request asked for them (`ModelRequest.logprobs`). */
  | { type: 'text.delta'; delta: string; logprobs?: TokenLogprob }
  /** Several tokens of text due at once, one piece each (only when the request asked for `batchTokens` > 1); `logprobs` one per piece, for the first of them (all, or those within `ModelRequest.logprobs.pieces`). */
  | { type: 'text.deltas'; deltas: readonly string[]; logprobs?: readonly TokenLogprob[] }
  /**
   * `tokens`: the o200k ids of the item's whole text as streamed, when the
   * model has them; the engine then appends the item to the prompt without
   * encoding it again. Absent: the engine encodes the text.
   */
  | { type: 'message.end'; tokens?: readonly number[] }
  /** `custom`: a call of a custom tool the request declares (`ModelRequest.customTools`), its deltas the call's `input`. */
  | { type: 'call.start'; name: string; call_id: string; custom?: true }
  | { type: 'args.delta'; delta: string }
  | { type: 'args.deltas'; deltas: readonly string[] }
  | { type: 'call.end'; tokens?: readonly number[] };

export interface Model {
  /** Stream one model call. Aborting `signal` ends the stream with the signal's reason. */
  sample(req: ModelRequest, signal: AbortSignal): AsyncIterable<ModelEvent>;
}

/**
 * One recorded model call for the `replay` policy: the visible output in
 * order, and the recorded output token count (tokens beyond the visible ones
 * are decoded as hidden reasoning, so replay takes the recorded decode time).
 */
export interface ReplayTurn {
  output: Array<
    | { type: 'message'; text: string }
    | { type: 'function_call'; name: string; arguments: string; call_id: string }
  >;
  output_tokens?: number;
}
