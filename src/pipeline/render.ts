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
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { encodeStep, encodeText } from '../model/tokenizer.js';
import { runCooperative, runSync, SLICE_CHARS, type Work } from './cooperative.js';
import type { FunctionTool, InputItem, Tool } from '../protocol/objects.js';
import { isFunctionTool } from '../protocol/objects.js';
import type { RunMetrics } from './metrics.js';
import { TokenBuffer } from './tokens.js';

const IM_START = encode('<|im_start|>', { allowedSpecial: 'all' })[0] ?? 0;
const IM_END = encode('<|im_end|>', { allowedSpecial: 'all' })[0] ?? 0;
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
  /** call_ids of function_call items in `items`, and of those answered by an output. */
  callIds: Set<string>;
  answeredCallIds: Set<string>;
}

/** The text an item contributes to the prompt (also what the safety scan reads). */
export function itemText(item: InputItem): { text: string; nonText: number } {
  const it = item as unknown as Record<string, unknown>;
  switch (item.type) {
    case 'function_call':
      return { text: `function_call ${it['name']} ${it['call_id']}\n${it['arguments']}`, nonText: 0 };
    case 'function_call_output':
      return partsText(`function_call_output ${it['call_id']}\n`, it['output']);
    case 'item_reference':
      return { text: '', nonText: 0 };
    case 'reasoning':
      // Encrypted reasoning is opaque to the API; only the summary is text.
      return { text: `reasoning\n${JSON.stringify(it['summary'] ?? [])}`, nonText: 0 };
    case 'message':
    case undefined:
      return partsText(`${it['role']}\n`, it['content']);
    default:
      return { text: `${item.type}\n${JSON.stringify(item)}`, nonText: 0 };
  }
}

function partsText(prefix: string, content: unknown): { text: string; nonText: number } {
  if (typeof content === 'string') return { text: prefix + content, nonText: 0 };
  let text = prefix;
  let nonText = 0;
  if (Array.isArray(content)) {
    for (const p of content as Array<Record<string, unknown>>) {
      if (typeof p['text'] === 'string') text += p['text'];
      else nonText++;
    }
  }
  return { text, nonText };
}

function headerText(instructions: string | null, tools: FunctionTool[]): string {
  let s = instructions ? `system\n${instructions}\n` : '';
  for (const t of tools) {
    s += `tool ${t.name}: ${t.description ?? ''}\n${JSON.stringify(t.parameters ?? {})}\n`;
  }
  return s;
}

/** Tokenize `text` in slices, yielding between them. */
function* tokenizeWork(text: string): Work<number[]> {
  const out: number[] = [];
  for (let at = 0; at < text.length; ) {
    at = encodeStep(text, at, out, SLICE_CHARS);
    yield;
  }
  return out;
}

function* tokenizeItemWork(item: InputItem, metrics: RunMetrics): Work<number[]> {
  const { text, nonText } = itemText(item);
  const toks = yield* tokenizeWork(text);
  metrics.count('items_tokenized');
  metrics.count('tokens_tokenized', toks.length);
  const out = new Array<number>(toks.length + nonText * NON_TEXT_PART_TOKENS + 2);
  let n = 0;
  out[n++] = IM_START;
  for (let i = 0; i < toks.length; i++) out[n++] = toks[i]!;
  for (let i = 0; i < nonText * NON_TEXT_PART_TOKENS; i++) out[n++] = IM_START;
  out[n++] = IM_END;
  return out;
}

function* renderFullWork(instructions: string | null, tools: Tool[], items: readonly InputItem[], metrics: RunMetrics): Work<RenderedContext> {
  metrics.count('render_full');
  const functionTools = tools.filter(isFunctionTool);
  const header = yield* tokenizeWork(headerText(instructions, functionTools));
  metrics.count('tokens_tokenized', header.length);
  const ctx: RenderedContext = {
    instructions,
    tools,
    functionTools,
    items: [],
    tokens: new TokenBuffer(header),
    headerTokens: header.length,
    callIds: new Set(),
    answeredCallIds: new Set(),
  };
  for (const item of items) {
    pushItem(ctx, item, yield* tokenizeItemWork(item, metrics));
    yield;
  }
  return ctx;
}

/** The new items' tokens, in order; nothing is added to any context yet. */
function* tokenizeItemsWork(items: readonly InputItem[], metrics: RunMetrics): Work<number[][]> {
  const out: number[][] = [];
  for (const item of items) {
    out.push(yield* tokenizeItemWork(item, metrics));
    yield;
  }
  return out;
}

/** Full render: tokenizes the header and every item. */
export function renderFull(instructions: string | null, tools: Tool[], items: readonly InputItem[], metrics: RunMetrics): RenderedContext {
  return metrics.time('render', () => runSync(renderFullWork(instructions, tools, items, metrics)));
}

/** Full render, yielding to the event loop on large inputs. */
export function renderFullAsync(instructions: string | null, tools: Tool[], items: readonly InputItem[], metrics: RunMetrics): Promise<RenderedContext> {
  return metrics.timeAsync('render', () => runCooperative(renderFullWork(instructions, tools, items, metrics)));
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
  commitItems(ctx, items, await tokenizeItems(items, metrics, stage));
}

/**
 * The tokens of new items, cooperatively, timed as `stage`, without touching
 * any context: the engine's append commits them (`commitItems`) only once
 * every check has passed.
 */
export function tokenizeItems(items: readonly InputItem[], metrics: RunMetrics, stage = 'render_append'): Promise<number[][]> {
  return metrics.timeAsync(stage, () => {
    metrics.count('render_incremental');
    return runCooperative(tokenizeItemsWork(items, metrics));
  });
}

/** Extend `ctx` with items and their tokens (from `tokenizeItems`), synchronously. */
export function commitItems(ctx: RenderedContext, items: readonly InputItem[], tokens: readonly number[][]): void {
  items.forEach((item, i) => pushItem(ctx, item, tokens[i]!));
}

/**
 * Add the model's own output items to the context. Their tokens came from
 * the model, so they are not counted as tokenization work of the request.
 */
export function appendOutput(ctx: RenderedContext, items: readonly InputItem[]): void {
  for (const item of items) pushItem(ctx, item, [IM_START, ...encodeText(itemText(item).text), IM_END]);
}

function pushItem(ctx: RenderedContext, item: InputItem, toks: number[]): void {
  ctx.items.push(item);
  ctx.tokens.pushAll(toks);
  const it = item as unknown as Record<string, unknown>;
  if (item.type === 'function_call' && typeof it['call_id'] === 'string') ctx.callIds.add(it['call_id']);
  if (item.type === 'function_call_output' && typeof it['call_id'] === 'string') ctx.answeredCallIds.add(it['call_id']);
}

/** A copy that a continuation can extend without touching the original (ws cache). */
export function forkContext(ctx: RenderedContext): RenderedContext {
  return {
    ...ctx,
    items: ctx.items.slice(),
    tokens: ctx.tokens.clone(),
    callIds: new Set(ctx.callIds),
    answeredCallIds: new Set(ctx.answeredCallIds),
  };
}
