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
 */
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { encodeText } from '../model/tokenizer.js';
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

function tokenizeItem(item: InputItem, metrics: RunMetrics): number[] {
  const { text, nonText } = itemText(item);
  const toks = encodeText(text);
  metrics.count('items_tokenized');
  metrics.count('tokens_tokenized', toks.length);
  const out = [IM_START, ...toks];
  for (let i = 0; i < nonText * NON_TEXT_PART_TOKENS; i++) out.push(IM_START);
  out.push(IM_END);
  return out;
}

/** Full render: tokenizes the header and every item. */
export function renderFull(
  instructions: string | null,
  tools: Tool[],
  items: readonly InputItem[],
  metrics: RunMetrics,
): RenderedContext {
  return metrics.time('render', () => {
    metrics.count('render_full');
    const functionTools = tools.filter(isFunctionTool);
    const header = encodeText(headerText(instructions, functionTools));
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
    for (const item of items) pushItem(ctx, item, tokenizeItem(item, metrics));
    return ctx;
  });
}

/** Incremental render: tokenizes only `items` and appends them to `ctx` in place. */
export function renderAppend(ctx: RenderedContext, items: readonly InputItem[], metrics: RunMetrics, stage = 'render_append'): void {
  metrics.time(stage, () => {
    metrics.count('render_incremental');
    for (const item of items) pushItem(ctx, item, tokenizeItem(item, metrics));
  });
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
