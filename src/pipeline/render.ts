/**
 * The render stage: turns the request context (instructions, tool
 * definitions, items) into the model's prompt, a flat array of o200k token
 * ids, with real BPE tokenization of every item.
 *
 * Rendering is item-wise (header, then each item framed by <|im_start|> /
 * <|im_end|>), so the prompt of a continuation is exactly the previous prompt
 * plus the new items' tokens: that is what lets the long-lived and ws designs
 * tokenize only what is new, and lets a test check that the incremental
 * prompt equals a full re-render. Leaves out images and files: they count a
 * fixed number of tokens, as vision models bill them, without decoding.
 *
 * Each form exists twice over one implementation (a `Work` generator):
 * synchronous, and cooperative (`…Async`), which tokenizes in slices of
 * `SLICE_CHARS` and yields to the event loop past `YIELD_BUDGET_MS`, so a
 * 16 MiB input never stalls other connections. An incremental render
 * tokenizes every new item first and only then extends the context, in one
 * synchronous step: a failure or a concurrent reader never sees half of it.
 */
import { afterTokenizer, encodeSlice, encodeText, IM_END, IM_START, type EncodeCursor } from '../model/tokenizer.js';
import { runCooperative, runSync, SLICE_CHARS, type Work } from '../cooperative.js';
import { isFunctionTool, isKnownItem, type FunctionTool, type InputItem, type Tool } from '../protocol/objects.js';
import type { RunMetrics } from './metrics.js';
import { ConversationDigest, itemTextChars, TurnScan } from '../model/conversation.js';
import { TokenBuffer } from './tokens.js';
import { jsonTextWork } from '../protocol/json-chunked.js';
import { answeredCallId, clientCallId } from './validate.js';

/** What a non-text part (image, file) costs in the prompt. */
export const NON_TEXT_PART_TOKENS = 85;

export interface RenderedContext {
  instructions: string | null;
  tools: Tool[];
  functionTools: FunctionTool[];
  /** Every item the model sees, in order: inputs, earlier outputs, tool outputs. */
  items: InputItem[];
  /** The prompt: header tokens then each item's tokens. Append-only. */
  tokens: TokenBuffer;
  headerTokens: number;
  /** call_ids of the client calls in `items` (function_call, custom_tool_call, local_shell_call, …), and of those answered by a function_call_output. */
  callIds: Set<string>;
  answeredCallIds: Set<string>;
  /** Characters of text in `items` (`itemTextChars`), kept as items are added so no model call counts them again. */
  textChars: number;
  /** The simulated model's digest of `items`, extended as they grow so no model call hashes them again (model/conversation.ts). */
  digest: ConversationDigest;
  /** The latest user message and the calls since, extended as items are added (model/conversation.ts `TurnScan`). */
  turns: TurnScan;
  /**
   * What the latest compaction left this context: its first `items` items are
   * the ones that compaction carries, `tokens` the prompt they made (header
   * included). Set by a server-side compaction and by a render of a window a
   * compaction item was expanded into; absent when no compaction made it.
   * Server-side compaction reads it to tell growth since that compaction
   * (pipeline/compaction.ts `compactionDue`).
   */
  compacted?: { items: number; tokens: number };
}

/**
 * The text an item contributes to the prompt, as a short `prefix` (the role
 * or call header, always ending in a line break) and the `body` segments
 * that follow it: the item's text is `prefix + body.join('')`. Kept apart so
 * a 16 MiB body is never copied into a new string only to be read (one such
 * copy holds the loop for ~0.2 s).
 */
export interface ItemParts {
  prefix: string;
  body: string[];
  nonText: number;
}

export function itemParts(item: InputItem): ItemParts {
  const custom = customCallParts(item);
  if (custom !== null) return custom;
  if (!isKnownItem(item)) return runSync(shownAsJsonWork(item));
  switch (item.type) {
    case 'function_call':
      return { prefix: `function_call ${item.name} ${item.call_id}\n`, body: [item.arguments], nonText: 0 };
    case 'function_call_output':
      return contentParts(`function_call_output ${item.call_id}\n`, item.output);
    case 'item_reference':
      return { prefix: '', body: [], nonText: 0 };
    case 'reasoning':
      return runSync(shownAsJsonWork(item));
    case 'message':
    case undefined:
      return contentParts(`${item.role}\n`, item.content);
    case 'compaction':
      return runSync(shownAsJsonWork(item));
    default: {
      const never: never = item;
      throw new Error(`unhandled item ${JSON.stringify(never)}`);
    }
  }
}

/**
 * An item the prompt shows as JSON: as its type and its JSON (a compaction not expanded, hosted tool items, a type the
 * server does not know), or a reasoning item as its summary's (encrypted reasoning is opaque to the API; only the
 * summary is text). Its strings are the client's: made in slices where they are long (`itemPartsWork`).
 */
function* shownAsJsonWork(item: InputItem): Work<ItemParts> {
  if (item.type === 'reasoning') return { prefix: 'reasoning\n', body: [yield* jsonTextWork((item as { summary?: unknown }).summary ?? [])], nonText: 0 };
  return { prefix: `${item.type}\n`, body: [yield* jsonTextWork(item)], nonText: 0 };
}

/**
 * `itemParts`, with the JSON an item is shown as (one the server does not know, a compaction not expanded, a
 * reasoning item's summary) made in slices: its strings are the client's, and one `JSON.stringify` of an item typed
 * by 1 M lone surrogates (each escaped in six characters) held the loop ~110 ms in the render and again in the
 * safety scan (the long-form chaos fuzzer, --seed 1304). The same text as `itemParts`.
 */
export function* itemPartsWork(item: InputItem): Work<ItemParts> {
  const custom = customCallParts(item);
  if (custom !== null) return custom;
  if (!isKnownItem(item) || item.type === 'compaction' || item.type === 'reasoning') return yield* shownAsJsonWork(item);
  return itemParts(item);
}

/**
 * A custom tool's call (`custom_tool_call`, protocol/parse-input.ts checked its `call_id`, `name` and `input` are
 * strings) shown as a function call is: its name and call_id, then its input. Shown as its JSON, it held the server's
 * random item id and its status, so the same replay's input tokens differed from run to run and between designs, and
 * the prefix cache missed from the call on (outside attack atk101 F1). Null for any other item.
 */
function customCallParts(item: InputItem): ItemParts | null {
  if (item.type !== 'custom_tool_call') return null;
  const { name, call_id: id, input } = item as { name?: unknown; call_id?: unknown; input?: unknown };
  if (typeof name !== 'string' || typeof id !== 'string' || typeof input !== 'string') return null;
  return { prefix: `custom_tool_call ${name} ${id}\n`, body: [input], nonText: 0 };
}

/** The text an item contributes to the prompt (also what the safety scan reads). */
export function itemText(item: InputItem): { text: string; nonText: number } {
  const { prefix, body, nonText } = itemParts(item);
  return { text: prefix + body.join(''), nonText };
}

function contentParts(prefix: string, content: unknown): ItemParts {
  if (typeof content === 'string') return { prefix, body: [content], nonText: 0 };
  const body: string[] = [];
  let nonText = 0;
  if (Array.isArray(content)) {
    for (const p of content as Array<Record<string, unknown>>) {
      if (typeof p['text'] === 'string') body.push(p['text']);
      else nonText++;
    }
  }
  return { prefix, body, nonText };
}

/** The instructions and tools as prompt text; yields between tools (128 tools' schemas can fill 16 MiB). */
function* headerText(instructions: string | null, tools: FunctionTool[]): Work<string> {
  const parts = instructions ? [`system\n${instructions}\n`] : [];
  for (const t of tools) {
    parts.push(`tool ${t.name}: ${t.description ?? ''}\n${yield* jsonTextWork(t.parameters ?? {})}\n`);
    yield;
  }
  return parts.join('');
}

/**
 * An item's prompt tokens as a list of chunks (one per tokenized slice):
 * one JS array of millions of numbers stalls the loop for hundreds of ms
 * when V8 grows it, chunks never do.
 */
type Chunks = number[][];
/** Chunks as read: the model's own token ids among them. */
type ChunksView = ReadonlyArray<ArrayLike<number>>;

/** Tokenize `text` in slices from offset `from` (a pre-token boundary), yielding between them. */
function* tokenizeWork(text: string, into: Chunks, charge: (tokens: number) => void, from = 0): Work<number> {
  let count = 0;
  // The cursor also stops inside one long pre-token (a megabyte run without a space), between its merge pieces.
  const cursor: EncodeCursor = { at: from, end: from };
  while (cursor.at < text.length) {
    const out: number[] = [];
    encodeSlice(text, cursor, out, SLICE_CHARS);
    // Charged as made (the server-wide byte budget: RunMetrics.chargeTokens), before the next slice is.
    charge(out.length);
    into.push(out);
    count += out.length;
    yield;
  }
  return count;
}

/** Above this many characters a single body is tokenized in place instead of being joined to its prefix. */
export const JOIN_LIMIT_CHARS = 1024 * 1024;
/** Characters of the body read together with the prefix to find the first pre-token boundary inside the body. */
const HEAD_CHARS = 4096;

/**
 * Tokenize `prefix + body` exactly as one text. A large single body is not
 * joined: the pre-tokens of the prefix and the start of the body are read in
 * a small window until a boundary inside the body that the window's end did
 * not decide (the split regex has no look-behind, so the rest of the body,
 * tokenized from that boundary on its own, gives the same tokens).
 */
function* tokenizePartsWork(prefix: string, body: readonly string[], into: Chunks, charge: (tokens: number) => void): Work<number> {
  const single = body.length === 1 ? body[0]! : undefined;
  if (single === undefined || prefix.length + single.length <= JOIN_LIMIT_CHARS) return yield* tokenizeWork(prefix + body.join(''), into, charge);
  const head = prefix + single.slice(0, HEAD_CHARS);
  // A chunk a slice, as `tokenizeWork` makes them: one array of the 8 M-letter prefix's tokens grew in one push
  // that held the loop ~200 ms (V8 copies the whole array when it grows).
  const first: Chunks = [];
  let count = 0;
  // In slices too: a prefix is short but where the client names it (an item of a type the server does not know is
  // shown as its type: 8 M characters of it held the loop ~280 ms; the long-form chaos fuzzer, --seed 1304). Each
  // slice stops once it passed the prefix's end, at a pre-token boundary, as one `encodeStep` at a time did.
  const cursor: EncodeCursor = { at: 0, end: 0 };
  while (cursor.at < prefix.length || cursor.end > cursor.at) {
    const out: number[] = [];
    encodeSlice(head, cursor, out, Math.max(1, Math.min(SLICE_CHARS, prefix.length - cursor.at)));
    charge(out.length);
    first.push(out);
    count += out.length;
    if (cursor.at < prefix.length || cursor.end > cursor.at) yield;
  }
  const at = cursor.at;
  // A pre-token that reached the window's end might continue past it: join after all (rare: a prefix glued to a huge first pre-token).
  if (at >= head.length) return yield* tokenizeWork(prefix + single, into, charge);
  for (const chunk of first) into.push(chunk);
  return count + (yield* tokenizeWork(single, into, charge, at - prefix.length));
}

function* tokenizeItemWork(item: InputItem, metrics: RunMetrics): Work<Chunks> {
  const { prefix, body, nonText } = yield* itemPartsWork(item);
  const chunks: Chunks = [[IM_START]];
  const count = yield* tokenizePartsWork(prefix, body, chunks, metrics.chargeTokens);
  metrics.count('items_tokenized');
  metrics.count('tokens_tokenized', count);
  if (nonText > 0) chunks.push(new Array<number>(nonText * NON_TEXT_PART_TOKENS).fill(IM_START));
  chunks.push([IM_END]);
  return chunks;
}

/**
 * Room a new prompt has past its header before the items' reservation
 * (`reserveWork`) and later pushes grow it (doubling, so a growing prompt
 * reallocates O(log n) times). It is memory every held context keeps (a
 * paused run's prompt among them), so it starts small.
 */
const PROMPT_SLACK_TOKENS = 256;

function* renderFullWork(instructions: string | null, tools: Tool[], items: readonly InputItem[], metrics: RunMetrics, carried?: number): Work<RenderedContext> {
  metrics.count('render_full');
  // Usually every tool is a function tool: then the context shares the request's array instead of a copy of it
  // (neither is ever changed), which a paused run would keep for its whole life.
  const functionTools = tools.every(isFunctionTool) ? tools : tools.filter(isFunctionTool);
  const header: Chunks = [];
  const headerTokens = yield* tokenizeWork(yield* headerText(instructions, functionTools), header, metrics.chargeTokens);
  metrics.count('tokens_tokenized', headerTokens);
  const tokens = new TokenBuffer([], headerTokens + PROMPT_SLACK_TOKENS);
  for (const c of header) tokens.pushAll(c);
  const ctx: RenderedContext = {
    instructions,
    tools,
    functionTools,
    items: [],
    tokens,
    headerTokens,
    callIds: new Set(),
    answeredCallIds: new Set(),
    textChars: 0,
    digest: new ConversationDigest(),
    turns: new TurnScan(),
  };
  const itemTokens = yield* tokenizeItemsWork(items, metrics);
  yield* tokens.reserveWork(chunkTotal(itemTokens));
  // The context is this render's own until it returns, so committing 49k items may yield between them.
  for (let i = 0; i < items.length; i++) {
    pushItem(ctx, items[i]!, itemTokens[i]!);
    if ((i & 1023) === 1023) yield;
  }
  if (carried !== undefined) ctx.compacted = { items: carried, tokens: headerTokens + chunkTotal(itemTokens.slice(0, carried)) };
  return ctx;
}

function chunkTotal(items: readonly ChunksView[]): number {
  let n = 0;
  for (const chunks of items) for (const c of chunks) n += c.length;
  return n;
}

/** The new items' tokens, in order; nothing is added to any context yet. */
function* tokenizeItemsWork(items: readonly InputItem[], metrics: RunMetrics): Work<Chunks[]> {
  const out: Chunks[] = [];
  for (const item of items) {
    out.push(yield* tokenizeItemWork(item, metrics));
    yield;
  }
  return out;
}

/**
 * Full render: tokenizes the header and every item. `carried`: the first
 * that many items are what a compaction left (`RenderedContext.compacted`).
 */
export function renderFull(instructions: string | null, tools: Tool[], items: readonly InputItem[], metrics: RunMetrics, carried?: number): RenderedContext {
  return metrics.time('render', () => runSync(renderFullWork(instructions, tools, items, metrics, carried)));
}

/**
 * Full render, yielding to the event loop on large inputs. The first
 * tokenizing stage of a request: it waits for the tokenizer's tables if they
 * are still loading (model/tokenizer.ts), so nothing later in the request
 * finds them unloaded.
 */
export function renderFullAsync(instructions: string | null, tools: Tool[], items: readonly InputItem[], metrics: RunMetrics, carried?: number): Promise<RenderedContext> {
  return metrics.timeAsync('render', () => afterTokenizer(() => runCooperative(renderFullWork(instructions, tools, items, metrics, carried))));
}

/** Incremental render: tokenizes only `items` and appends them to `ctx` in place. */
export function renderAppend(ctx: RenderedContext, items: readonly InputItem[], metrics: RunMetrics, stage = 'render_append'): void {
  metrics.time(stage, () => {
    metrics.count('render_incremental');
    commitItems(ctx, items, runSync(tokenizeItemsWork(items, metrics)));
  });
}

/** Incremental render, yielding on large inputs; `ctx` is extended in one step at the end. */
export async function renderAppendAsync(ctx: RenderedContext, items: readonly InputItem[], metrics: RunMetrics, stage = 'render_append'): Promise<void> {
  const tokens = await tokenizeItems(items, metrics, stage);
  await reserveFor(ctx, tokens);
  commitItems(ctx, items, tokens);
}

/** Make room in `ctx`'s prompt for tokens about to be committed, cooperatively (a quick commit after). */
export function reserveFor(ctx: RenderedContext, tokens: readonly Chunks[]): Promise<void> {
  return runCooperative(ctx.tokens.reserveWork(chunkTotal(tokens)));
}

/**
 * The tokens of new items, cooperatively, timed as `stage`, without touching
 * any context: the engine's append commits them (`commitItems`) only once
 * every check has passed.
 */
export function tokenizeItems(items: readonly InputItem[], metrics: RunMetrics, stage = 'render_append'): Promise<Chunks[]> {
  return metrics.timeAsync(stage, () => {
    metrics.count('render_incremental');
    // Waits for the tokenizer's tables too (a continuation can be a process's first tokenizing request).
    return afterTokenizer(() => runCooperative(tokenizeItemsWork(items, metrics)));
  });
}

/**
 * The same tokens as `tokenizeItems`, synchronously and untimed, counted in
 * `metrics`: for a caller that has waited for the tokenizer's tables
 * (`tokenizerReady`) and tokenizes small inputs in a loop (bench:overhead's
 * hot-loop row).
 */
export function tokenizeItemsSync(items: readonly InputItem[], metrics: RunMetrics): Chunks[] {
  return runSync(tokenizeItemsWork(items, metrics));
}

/** Extend `ctx` with items and their tokens (from `tokenizeItems`), synchronously. */
export function commitItems(ctx: RenderedContext, items: readonly InputItem[], tokens: readonly ChunksView[]): void {
  items.forEach((item, i) => pushItem(ctx, item, tokens[i]!));
}

/**
 * Add the model's own output items to the context. Their tokens came from
 * the model, so they are not counted as tokenization work of the request;
 * where the model reported an item's token ids (`tokens[i]`, see
 * model/types.ts), the item's text is not encoded again.
 */
export function appendOutput(ctx: RenderedContext, items: readonly InputItem[], tokens: ReadonlyArray<readonly number[] | undefined> = []): void {
  commitItems(ctx, items, outputTokens(items, tokens));
}

/**
 * `appendOutput` for the engine: when the output's tokens do not fit the prompt's buffer, the larger buffer is made
 * in slices first (`reserveWork`), then the commit. A buffer's growth copies the whole prompt: for a prompt of a few
 * million tokens (16 MiB of input) that one copy held the loop ~200 ms of CPU in the model call's last turn. Output
 * that fits (every call of an ordinary run) is committed at once, without an await.
 */
export async function appendOutputCooperative(ctx: RenderedContext, items: readonly InputItem[], tokens: ReadonlyArray<readonly number[] | undefined> = []): Promise<void> {
  const chunks = outputTokens(items, tokens);
  const total = chunkTotal(chunks);
  if (!ctx.tokens.fits(total)) await runCooperative(ctx.tokens.reserveWork(total));
  commitItems(ctx, items, chunks);
}

/** The tokens of the model's output items, as `appendOutput` adds them. */
function outputTokens(items: readonly InputItem[], tokens: ReadonlyArray<readonly number[] | undefined>): ChunksView[] {
  return items.map((item, i) => {
    const { prefix, body } = itemParts(item);
    const known = tokens[i];
    // The prefix ends in a line break: before a body that does not start with
    // white space or '/' (a punctuation pre-token may swallow `[\r\n/]*`), no
    // pre-token spans the two, so the item's tokens are the prefix's, then the body's.
    const single = body.length === 1 ? body[0]! : null;
    const split = known !== undefined && single !== null && single.length > 0 && !/^[\s/]/.test(single) && prefix.endsWith('\n');
    return split ? [[IM_START], encodeText(prefix), known, [IM_END]] : [[IM_START], encodeText(prefix + body.join('')), [IM_END]];
  });
}

function pushItem(ctx: RenderedContext, item: InputItem, toks: ReadonlyArray<ArrayLike<number>>): void {
  ctx.items.push(item);
  ctx.textChars += itemTextChars(item);
  for (const c of toks) ctx.tokens.pushAll(c);
  // Every client call's id (a function_call_output may answer any of them: validate.ts), the function_call's among them.
  const callId = clientCallId(item);
  if (callId !== undefined) ctx.callIds.add(callId);
  // Any output type answers a call (a custom_tool_call_output a function call's, as the missing-output check pairs them).
  const answered = answeredCallId(item);
  if (answered !== undefined) ctx.answeredCallIds.add(answered);
}
