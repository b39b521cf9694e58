/**
 * Compaction: shrinking a conversation's window into kept items plus one
 * opaque `compaction` item, and reading such an item back when a client
 * sends it as input.
 *
 * What a compaction keeps (deterministic, no model call): every user
 * message, the function calls still waiting for their output (so a later
 * `function_call_output` still matches), and a summary the simulated model
 * "writes": one line per other item (assistant text, a tool call and the
 * first line of its output, …), at most `SUMMARY_LINES` lines of at most
 * `SUMMARY_LINE_CHARS` characters. Its `encrypted_content` is those carried
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
import { newId, type CompactionItem, type InputItem, type InputMessage } from '../protocol/objects.js';

/** The summary quotes at most this many items... */
export const SUMMARY_LINES = 40;
/** ...each cut to this many characters. */
export const SUMMARY_LINE_CHARS = 120;

const KEY = createHash('sha256').update('llr compaction v1').digest();
const VERSION = 1;

interface Payload {
  v: number;
  items: InputItem[];
}

export function isCompaction(item: InputItem): item is CompactionItem {
  return item.type === 'compaction';
}

function seal(payload: Payload): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', KEY, iv);
  const body = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
}

function open(content: unknown, param: string): Payload {
  const bad = () => new WireError('invalid_value', `Invalid '${param}.encrypted_content': not a compaction this server produced.`, `${param}.encrypted_content`);
  if (typeof content !== 'string') throw bad();
  try {
    const raw = Buffer.from(content, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', KEY, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    const payload = JSON.parse(text) as Payload;
    if (payload.v !== VERSION || !Array.isArray(payload.items)) throw new Error('unknown compaction version');
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
  let last = -1;
  for (let i = items.length - 1; i >= 0; i--) {
    if (isCompaction(items[i]!)) {
      last = i;
      break;
    }
  }
  if (last < 0) return items.slice();
  const { items: carried } = open((items[last] as CompactionItem).encrypted_content, `${param}[${last}]`);
  return [...carried, ...items.slice(last + 1)];
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

/** Compact a window (already expanded with `applyCompaction`). */
export function compact(window: readonly InputItem[]): Compacted {
  const users: InputMessage[] = [];
  const answered = new Set<string>();
  for (const item of window) {
    if (item.type === 'function_call_output') answered.add((item as { call_id: string }).call_id);
  }
  const pending: InputItem[] = [];
  const lines: string[] = [];
  const outputs = new Map<string, string>();
  for (const item of window) {
    if (item.type === 'function_call_output') {
      const it = item as { call_id: string; output: unknown };
      outputs.set(it.call_id, firstLine(textOf(it.output)));
    }
  }
  let summarised = 0;
  for (const item of window) {
    const it = item as unknown as Record<string, unknown>;
    if ((item.type === 'message' || item.type === undefined) && it['role'] === 'user') {
      users.push({ type: 'message', role: 'user', content: normalise(it['content']) });
      continue;
    }
    if (item.type === 'function_call_output') continue;
    if (item.type === 'function_call' && !answered.has(String(it['call_id']))) {
      pending.push(item);
      continue;
    }
    summarised++;
    const line = summaryLine(item, outputs);
    if (line !== null && lines.length < SUMMARY_LINES) lines.push(line.length > SUMMARY_LINE_CHARS ? `${line.slice(0, SUMMARY_LINE_CHARS - 1)}…` : line);
  }
  const summary = [`Summary of ${summarised} earlier item${summarised === 1 ? '' : 's'}:`, ...lines.map((l) => `- ${l}`)].join('\n');
  const summaryItem: InputMessage = { type: 'message', role: 'developer', content: [{ type: 'input_text', text: summary }] };
  const carried: InputItem[] = [summaryItem, ...users, ...pending];
  const item: CompactionItem = { id: newId('cmp'), type: 'compaction', encrypted_content: seal({ v: VERSION, items: carried }) };
  return { output: [...users.map((u) => ({ ...u })), item], carried, summary };
}

function summaryLine(item: InputItem, outputs: Map<string, string>): string | null {
  const it = item as unknown as Record<string, unknown>;
  switch (item.type) {
    case 'message':
    case undefined:
      return `${String(it['role'])}: ${firstLine(textOf(it['content']))}`;
    case 'function_call': {
      const out = outputs.get(String(it['call_id']));
      return `called ${String(it['name'])}(${String(it['arguments'])})${out === undefined ? '' : ` → ${out}`}`;
    }
    case 'reasoning':
    case 'item_reference':
      return null;
    default:
      return `${item.type} item`;
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

/** A user message's content in the list form the API returns. */
function normalise(content: unknown): InputMessage['content'] {
  if (typeof content === 'string') return [{ type: 'input_text', text: content }];
  return Array.isArray(content) ? (content as InputMessage['content']) : [];
}
