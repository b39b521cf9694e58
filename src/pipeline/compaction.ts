/**
 * Compaction: shrinking a conversation's window into kept items plus one
 * opaque `compaction` item, and reading such an item back when a client
 * sends it as input.
 *
 * What a compaction keeps (deterministic, no model call): every user
 * message; the turn in progress (from the latest user message on: the calls
 * the model made for it and their outputs, so the agent loop goes on where
 * it was) with each tool output and assistant text cut to its first line,
 * itself cut to `SUMMARY_LINE_CHARS` characters (a one-line text that
 * short is kept as it is);
 * the function calls still waiting for their output (so a later
 * `function_call_output` still matches); and, for everything else before the
 * latest user message, a summary the simulated model "writes": one line per
 * item (assistant text, a tool call and the first line of its output, …), at
 * most `SUMMARY_LINES` lines of at most `SUMMARY_LINE_CHARS` characters (a
 * summary of an earlier summary keeps its first line). Its `encrypted_content` is those carried
 * items sealed with AES-256-GCM: opaque and tamper-evident, so the server can
 * read back only what it wrote; the key is fixed (the content is not a
 * secret from someone holding this source, only opaque on the wire).
 *
 * Reading back (`applyCompaction`): the latest compaction item of a context
 * replaces everything before it (the history it summarises, including the
 * kept user messages the client sent back beside it) with the items it
 * carries, rendered like any others, so the new window's tokens are real.
 * Used by the compact endpoint, by full pre-inference work on every design,
 * and by server-side compaction (`context_management`). Leaves out any real
 * summarisation: the summary only quotes.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { WireError } from '../protocol/errors.js';
import { checkJsonDepth } from '../protocol/json-text.js';
import type { CreateParams } from '../protocol/events.js';
import { isKnownItem, newId, withImageDetail, type CompactionItem, type InputCompactionItem, type InputItem, type InputMessage } from '../protocol/objects.js';
import { countTokens } from '../model/tokenizer.js';
import type { RunMetrics } from './metrics.js';
import { renderFullAsync, type RenderedContext } from './render.js';
import { runCooperative, runSync, type Work } from '../cooperative.js';
import { stringifyWork } from '../protocol/json-chunked.js';

/** The summary quotes at most this many items... */
export const SUMMARY_LINES = 40;
/** ...each cut to this many characters. */
export const SUMMARY_LINE_CHARS = 120;

/** Server-side compaction threshold (rendered prompt tokens) when a request gives none. */
export const DEFAULT_COMPACT_THRESHOLD = 100_000;

const KEY = createHash('sha256').update('llr compaction v1').digest();
/**
 * Deepest nesting a payload may have when read back: what this server seals
 * nests no deeper than the request it came from (`{v, items: [item]}` puts an
 * item as deep as `{input: [item]}` does), which `--max-json-depth` bounds
 * (64 by default); this leaves room for a raised limit and stays far inside
 * what the recursive walks over items take.
 */
const PAYLOAD_MAX_DEPTH = 1024;
const VERSION = 1;

interface Payload {
  v: number;
  items: InputItem[];
}

function isCompaction(item: InputItem): item is InputCompactionItem {
  return item.type === 'compaction';
}

/** Characters encrypted, or bytes base64-encoded, between yields (~1–3 ms). */
const SEAL_SLICE = 1024 * 1024;

/**
 * `iv ‖ tag ‖ AES-256-GCM(JSON)` as base64url, in slices: a compaction of a
 * 16 MiB window held the event loop ~0.7 s when stringified, encrypted and
 * encoded in one go.
 */
function* sealWork(payload: Payload): Work<string> {
  const json = (yield* stringifyWork(payload)).join('');
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', KEY, iv);
  const body: Buffer[] = [];
  for (let at = 0; at < json.length; ) {
    let end = Math.min(json.length, at + SEAL_SLICE);
    // Never split a surrogate pair between two slices (each is encoded to UTF-8 on its own).
    const last = json.charCodeAt(end - 1);
    if (end < json.length && last >= 0xd800 && last <= 0xdbff) end--;
    body.push(cipher.update(json.slice(at, end), 'utf8'));
    at = end;
    yield;
  }
  body.push(cipher.final());
  // base64 of a concatenation is the concatenation of base64 of pieces cut at multiples of 3 bytes.
  const out: string[] = [];
  let carry: Buffer = Buffer.alloc(0);
  for (const b of [iv, cipher.getAuthTag(), ...body]) {
    const buf: Buffer = carry.length > 0 ? Buffer.concat([carry, b]) : b;
    const n = buf.length - (buf.length % 3);
    out.push(buf.subarray(0, n).toString('base64url'));
    carry = buf.subarray(n);
    if (n >= SEAL_SLICE) yield;
  }
  out.push(carry.toString('base64url'));
  return out.join('');
}

function open(content: unknown, param: string): Payload {
  const bad = () => new WireError('invalid_value', `Invalid '${param}.encrypted_content': not a compaction this server produced.`, `${param}.encrypted_content`);
  if (typeof content !== 'string') throw bad();
  try {
    const raw = Buffer.from(content, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', KEY, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    // The key is fixed, so anyone can seal a payload: it is read like a request's items, whose nesting the edge
    // bounds (a forged item nested 200,000 deep was stored, then overflowed the stack of a continuation: 500).
    checkJsonDepth(text, PAYLOAD_MAX_DEPTH);
    const payload = JSON.parse(text) as Payload;
    if (payload.v !== VERSION || !Array.isArray(payload.items)) throw new Error('unknown compaction version');
    // A forged `null` or number item failed every later step with a TypeError (500).
    if (!payload.items.every((i) => typeof i === 'object' && i !== null && !Array.isArray(i))) throw new Error('not an item');
    return payload;
  } catch (err) {
    throw Object.assign(bad(), { cause: err });
  }
}

/**
 * The context a list of items stands for: from the latest compaction item
 * on, that item replaced by what it carries. `param` names the list in
 * errors (`input`, `previous_response_id`).
 */
export function applyCompaction(items: readonly InputItem[], param = 'input'): InputItem[] {
  return expandCompaction(items, param).items;
}

/** A list with its latest compaction item replaced by what it carries (`expandCompaction`). */
export interface Expanded {
  items: InputItem[];
  /** How many of the first items the compaction item carries (0 without one). */
  carried: number;
  /** Where the compaction item is in the client's list (-1 without one). */
  at: number;
}

/**
 * `applyCompaction`, also telling how many of the first items are the ones
 * the compaction item carries (0 without one): what that compaction left,
 * the rest being what came after it (`RenderedContext.compacted`).
 */
export function expandCompaction(items: readonly InputItem[], param = 'input'): Expanded {
  const last = items.findLastIndex(isCompaction);
  const item = items[last];
  if (item === undefined || !isCompaction(item)) return { items: items.slice(), carried: 0, at: -1 };
  const { items: carried } = open(item.encrypted_content, `${param}[${last}]`);
  return { items: [...carried, ...items.slice(last + 1)], carried: carried.length, at: last };
}

/**
 * An error the checks raised on an expanded list (`expandCompaction`), whose
 * param (`input[i]…`) counts positions in that list, renamed to the client's
 * list `param`: an item that came after the compaction item gets its own
 * position back (`input[i]` → `input[at + 1 + i - carried]`); an item the
 * compaction item carries is named by that item's `encrypted_content`
 * (`input[at].encrypted_content`), the message telling which carried item
 * (`items[i]`) and what is wrong with it. Without this, `input[1]` of an
 * error named the second item of what the compaction carried, or an item of
 * the client's input that was not the one refused (outside attack). Any
 * other error is returned as it is.
 */
export function nameInClientList(err: unknown, expanded: Expanded, param = 'input'): unknown {
  if (!(err instanceof WireError) || expanded.at < 0 || err.param === null) return err;
  const m = /^\[(\d+)\]/.exec(err.param.startsWith(param) ? err.param.slice(param.length) : '');
  if (m === null) return err;
  const i = Number(m[1]);
  const rest = err.param.slice(param.length + m[0].length);
  // The message quotes the param (or a longer path under it); `input[1]` must not match `input[10]`.
  const quoted = new RegExp(`'${escapeRegExp(`${param}[${i}]`)}(?=[.\\['])`, 'g');
  const { carried, at } = expanded;
  if (i >= carried) {
    const own = `${param}[${at + 1 + i - carried}]`;
    return new WireError(err.code, err.message.replace(quoted, `'${own}`), `${own}${rest}`, { cause: err });
  }
  const where = `${param}[${at}].encrypted_content`;
  const what = err.message.replace(quoted, `'items[${i}]`);
  return new WireError(err.code, `Invalid '${where}': item ${i} of the ${carried} this compaction item carries is refused: ${what}`, where, { cause: err });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function hasCompaction(items: readonly InputItem[]): boolean {
  return items.some(isCompaction);
}

export interface Compacted {
  /** What the client gets: the kept user messages, then the compaction item. */
  output: Array<InputMessage | CompactionItem>;
  /** What the compaction stands for in a later context. */
  carried: InputItem[];
  /** The summary text (what the simulated model wrote: the compaction's output tokens). */
  summary: string;
}

/**
 * Compact a window (already expanded with `applyCompaction`). Before the
 * latest user message: user messages kept, everything else summarised. From
 * it on (the turn in progress, which the model is still acting on): kept,
 * with each tool output and assistant text cut to its first line.
 */
export function compact(window: readonly InputItem[]): Compacted {
  return runSync(compactWork(window));
}

/** `compact`, yielding to the event loop on a large window (the compact endpoint). */
export function compactAsync(window: readonly InputItem[]): Promise<Compacted> {
  return runCooperative(compactWork(window));
}

function* compactWork(window: readonly InputItem[]): Work<Compacted> {
  let lastUser = -1;
  window.forEach((item, i) => {
    if (isUserMessage(item)) lastUser = i;
  });
  const earlier = lastUser < 0 ? window : window.slice(0, lastUser);
  const turn = lastUser < 0 ? [] : window.slice(lastUser);
  const outputs = new Map<string, string>();
  for (const item of window) {
    if (isKnownItem(item) && item.type === 'function_call_output') outputs.set(item.call_id, firstLine(textOf(item.output)));
  }
  const users: InputMessage[] = [];
  const pending: InputItem[] = [];
  const lines: string[] = [];
  let summarised = 0;
  // Every loop over the window yields every 1,024 items: at the 50,000-item cap each was tens of ms in one turn.
  for (let i = 0; i < earlier.length; i++) {
    if ((i & 1023) === 1023) yield;
    const item = earlier[i]!;
    if (isUserMessage(item)) {
      users.push({ type: 'message', role: 'user', content: normalise(item.content) });
      continue;
    }
    if (item.type === 'function_call_output') continue;
    if (isKnownItem(item) && item.type === 'function_call' && !outputs.has(item.call_id)) {
      pending.push(item);
      continue;
    }
    summarised++;
    const line = summaryLine(item, outputs);
    if (line !== null && lines.length < SUMMARY_LINES) lines.push(cut(line));
  }
  const kept = turn.map((item) => shorten(item));
  const turnUser = kept.length > 0 ? [kept[0] as InputMessage] : [];
  const summary = [`Summary of ${summarised} earlier item${summarised === 1 ? '' : 's'}:`, ...lines.map((l) => `- ${l}`)].join('\n');
  const summaryItem: InputMessage = { type: 'message', role: 'developer', content: [{ type: 'input_text', text: summary }] };
  const carried: InputItem[] = [summaryItem, ...users, ...pending, ...kept];
  const item: CompactionItem = { id: newId('cmp'), type: 'compaction', encrypted_content: yield* sealWork({ v: VERSION, items: carried }) };
  // Shown as output items (an id and a status, as the API's compact answer has them and as the
  // Open Responses `Message` schema requires); read back by position, so the ids carry no meaning.
  const shown: Compacted['output'] = [];
  for (const u of [...users, ...turnUser]) {
    shown.push({ id: newId('msg'), type: 'message', status: 'completed', role: 'user', content: normalise(u.content) });
    if ((shown.length & 1023) === 0) yield;
  }
  shown.push(item);
  return { output: shown, carried, summary };
}

/** The threshold a create asked for with `context_management`, or null when it asked for none. */
export function compactThreshold(params: Pick<CreateParams, 'context_management'>): number | null {
  const entry = params.context_management?.find((c) => c.type === 'compaction');
  return entry ? (entry.compact_threshold ?? DEFAULT_COMPACT_THRESHOLD) : null;
}

/**
 * Whether a server-side compaction is due before a model call: the prompt
 * has passed the threshold, and either no compaction made this context or
 * the latest one got it under the threshold (then nothing else is asked:
 * the documented "crosses the threshold"), or, when the latest one could not
 * (what a compaction keeps, every user message and the turn in progress,
 * was itself over it), the context has since grown by more than
 * half of what that compaction left (which is over the threshold, so by
 * more than half the threshold too). A compaction only
 * shrinks what came after the latest one (what that one left is already
 * compacted: compacting it again gains next to nothing and costs a pass over
 * the whole context), so without that wait a context stuck over its
 * threshold was compacted again before every model call, each pass longer
 * than the last. With it, compactions follow the context's growth (at most
 * one each time it grows by half, so never more than one per half-threshold
 * of new tokens), not its model calls; the context's
 * budget (`--max-context-items`, `--max-context-bytes`) still bounds a run.
 */
export function compactionDue(ctx: RenderedContext, threshold: number): boolean {
  const tokens = ctx.tokens.length;
  if (tokens <= threshold) return false;
  const left = ctx.compacted?.tokens;
  if (left === undefined || left <= threshold) return true;
  // Half of what it left (over the threshold, so more than half the threshold): with half the threshold alone, a
  // run whose every step adds more than that (a long one-line tool output, which compaction then kept whole) was
  // compacted before every model call, each pass and each compaction item (sealing the whole turn) as large as
  // the context, so its output grew with the square of its steps. Relative growth keeps the passes, and the bytes
  // of the compaction items, in proportion to the context's growth (outside attack).
  return tokens - left > left / 2;
}

/**
 * Server-side compaction of a live context: compact its items and render the
 * carried items as the new context (a full render of the smaller window,
 * timed as the `compact` stage). Returns the compaction item for the
 * response's output and the summary's tokens (what the model wrote).
 */
export function compactContext(ctx: RenderedContext, metrics: RunMetrics): Promise<{ item: CompactionItem; context: RenderedContext; outputTokens: number }> {
  // Yielding as the compact endpoint does: what a compaction keeps whole (a user message, a short one-line output) is
  // sealed and rendered again, and a 16 MiB context held the loop over a second in one turn (outside attack).
  return metrics.timeAsync('compact', async () => {
    metrics.count('compactions');
    const { output, carried, summary } = await compactAsync(ctx.items);
    const context = await renderFullAsync(ctx.instructions, ctx.tools, carried, metrics, carried.length);
    return { item: output.at(-1) as CompactionItem, context, outputTokens: countTokens(summary) };
  });
}

function isMessage(item: InputItem): item is InputMessage {
  return isKnownItem(item) && (item.type === 'message' || item.type === undefined);
}

function isUserMessage(item: InputItem): item is InputMessage {
  return isMessage(item) && item.role === 'user';
}

function cut(line: string): string {
  return line.length > SUMMARY_LINE_CHARS ? `${line.slice(0, SUMMARY_LINE_CHARS - 1)}…` : line;
}

/**
 * An item of the turn in progress, kept with long text cut: a tool output or
 * assistant text that is more than one line, or one line longer than
 * `SUMMARY_LINE_CHARS`, becomes its first line cut to that many characters
 * and marked `[compacted]`. A one-line text of at most that many is kept as
 * it is. (A long one-line output was kept whole, so every compaction item
 * sealed every such output of the turn again, and a run of 10 KB one-line
 * outputs passed its kept-bytes budget at step ~700: outside attack.)
 */
function shorten(item: InputItem): InputItem {
  if (isKnownItem(item) && item.type === 'function_call_output') {
    const text = textOf(item.output);
    const first = firstLine(text);
    return keptWhole(text, first) ? item : { ...item, output: `${cut(first)} [compacted]` };
  }
  if (isMessage(item) && item.role === 'assistant') {
    const text = textOf(item.content);
    const first = firstLine(text);
    if (keptWhole(text, first)) return item;
    return { ...item, content: [{ type: 'output_text', text: `${cut(first)} [compacted]`, annotations: [], logprobs: [] }] };
  }
  return item;
}

/** Whether `text` (whose first non-blank line is `first`) is one line short enough to keep as it is. */
function keptWhole(text: string, first: string): boolean {
  return first === text.trim() && first.length <= SUMMARY_LINE_CHARS;
}

function summaryLine(item: InputItem, outputs: Map<string, string>): string | null {
  if (!isKnownItem(item)) return `${item.type} item`;
  switch (item.type) {
    case 'message':
    case undefined:
      return `${item.role}: ${firstLine(textOf(item.content))}`;
    case 'function_call': {
      const out = outputs.get(item.call_id);
      return `called ${item.name}(${item.arguments})${out === undefined ? '' : ` → ${out}`}`;
    }
    case 'reasoning':
    case 'item_reference':
      return null;
    case 'function_call_output':
    case 'compaction':
      return `${item.type} item`;
    default: {
      const never: never = item;
      throw new Error(`unhandled item ${JSON.stringify(never)}`);
    }
  }
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Array<Record<string, unknown>>)
    .map((p) => (typeof p['text'] === 'string' ? p['text'] : ''))
    .filter((t) => t !== '')
    .join('\n');
}

function firstLine(text: string): string {
  return text.split(/\r?\n/).find((l) => l.trim() !== '')?.trim() ?? '';
}

/**
 * A user message's content in the list form the API returns: an image part without `detail` with the API's default,
 * as input_items lists it (the compact answer showed it without, which openai-node's `ResponseInputImage` requires).
 */
function normalise(content: unknown): InputMessage['content'] {
  if (typeof content === 'string') return [{ type: 'input_text', text: content }];
  return Array.isArray(content) ? withImageDetail(content as Exclude<InputMessage['content'], string>) : [];
}
