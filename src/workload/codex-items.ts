/**
 * Helpers for the Codex rollout reader (`codex.ts`): the text of a recorded
 * item, the replacement history of a compaction as input items, and the
 * permissive tool schemas rebuilt from the calls a rollout recorded (Codex
 * does not record the tool definitions it sent).
 *
 * Pure functions and one small accumulator; no I/O, no knowledge of record
 * order. Leaves out images (a tool output's image or file part becomes a marker naming its type).
 */
import { createHash } from 'node:crypto';
import { longerThan } from '../protocol/fields.js';
import { CALL_ID_MAX_CHARS } from '../protocol/parse-input.js';
import type { FunctionTool, InputItem } from '../protocol/objects.js';
import { estimateEncryptedTokens } from './infer.js';

export type Json = Record<string, unknown>;
type JsonType = 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'object' | 'null';

export const CUSTOM_TOOL_DESCRIPTION =
  'A Codex custom (freeform) tool replayed as a function tool: the recorded text is in `input`.';

export function isJson(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function describe(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  if (v === null) return 'null';
  const t = typeof v;
  return `${/^[aeiou]/.test(t) ? 'an' : 'a'} ${t}`;
}

/** What a `session_meta` says about where the rollout comes from (for `Workload.origin`). */
export function sessionOrigin(p: Json): Record<string, string> {
  const origin: Record<string, string> = {};
  for (const key of ['originator', 'cli_version', 'model_provider', 'forked_from_id'] as const) {
    if (typeof p[key] === 'string') origin[key] = p[key];
  }
  const src = p.source;
  if (typeof src === 'string') origin['session_source'] = src;
  else if (isJson(src) && 'subagent' in src) {
    // {subagent: "review" | "compact" | {thread_spawn: {parent_thread_id, depth, ...}} | {other: "..."}}
    const sub = src.subagent;
    origin['session_source'] = `subagent:${typeof sub === 'string' ? sub : isJson(sub) ? (Object.keys(sub)[0] ?? 'other') : 'other'}`;
    const spawn = isJson(sub) && isJson(sub.thread_spawn) ? sub.thread_spawn : null;
    if (spawn && typeof spawn.parent_thread_id === 'string') origin['parent_thread_id'] = spawn.parent_thread_id;
  }
  return origin;
}

/** The `instructions` of every call: `base_instructions.text` (older Codex: `instructions`). */
export function sessionInstructions(p: Json): string | null {
  const base = p.base_instructions;
  if (typeof base === 'string') return base;
  if (isJson(base) && typeof base.text === 'string') return base.text;
  return typeof p.instructions === 'string' ? p.instructions : null;
}

/** The text of a message's content: a string, or the `text` of its parts joined (with `refusals`, a refusal part's `refusal` too). */
export function messageText(content: unknown, refusals = false): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part) => (!isJson(part) ? '' : typeof part.text === 'string' ? part.text : refusals && part.type === 'refusal' && typeof part.refusal === 'string' ? part.refusal : '')).join('');
}

/**
 * A tool output as the text the client sent; null when it is not an output shape Codex writes. An array of content
 * items (Codex's `view_image`, an MCP tool's image result) is its text parts joined, each other part (`input_image`,
 * `input_file`, ...) a short marker naming its type: the neutral format's tool outputs are text. Read as the array's
 * JSON before, an image's base64 data URL became text, so a 300 KB screenshot was inferred as 200,000 input tokens
 * (the server counts an image part as 85) and replayed as that much text.
 */
export function outputText(output: unknown): string | null {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) return output.map(partText).join('');
  if (isJson(output) && typeof output.content === 'string') return output.content;
  return null;
}

/**
 * The API's built-in tools the client runs (`shell`, `apply_patch`, computer use): the client sends `<type>_output`
 * back, so each call is its own model call. Replayed as function calls of these names taking the call's `action` or
 * `operation`, each answered by its output's text (`builtinOutputText`).
 */
export const CLIENT_BUILTINS: Readonly<Record<string, { name: string; field: 'action' | 'operation' }>> = {
  shell_call: { name: 'shell', field: 'action' },
  apply_patch_call: { name: 'apply_patch', field: 'operation' },
  computer_call: { name: 'computer', field: 'action' },
};
export const CLIENT_BUILTIN_OUTPUTS: ReadonlySet<string> = new Set(Object.keys(CLIENT_BUILTINS).map((t) => `${t}_output`));

/**
 * The text a built-in client tool's output (`CLIENT_BUILTINS`) is replayed as: its `output` as text when it is text,
 * else as JSON (a shell call's list of `{stdout, stderr, outcome}`); without one, its `status`. A computer call's
 * screenshot is an image: a marker naming it (`image` says which, for a note), its data not sent.
 */
export function builtinOutputText(p: Json): { text: string; image: string | null } {
  const out = p.output;
  if (isJson(out) && typeof out.type === 'string' && /screenshot|image/.test(out.type)) {
    const kind = out.type.slice(0, 40);
    return { text: `[${kind}: not replayed]`, image: kind };
  }
  if (out === undefined || out === null) return { text: JSON.stringify({ status: typeof p.status === 'string' ? p.status : 'completed' }), image: null };
  // A shell call's results are objects, not content parts: as JSON, each command's stdout, stderr and outcome.
  if (Array.isArray(out)) return { text: JSON.stringify(out), image: null };
  return { text: outputText(out) ?? JSON.stringify(out), image: null };
}

/** How many parts of an array output `outputText` replaced by a marker (0 for any other output). */
export function nonTextParts(output: unknown): number {
  return Array.isArray(output) ? output.filter((part) => !(isJson(part) && typeof part.text === 'string')).length : 0;
}

function partText(part: unknown): string {
  if (isJson(part) && typeof part.text === 'string') return part.text;
  return `[${isJson(part) && typeof part.type === 'string' ? part.type.slice(0, 40) : 'part'}: not replayed]`;
}

/** The text of a reasoning item Codex can read: its summary and (open-weight models) raw content. */
export function reasoningText(p: Json): string {
  const parts = [...(Array.isArray(p.summary) ? p.summary : []), ...(Array.isArray(p.content) ? p.content : [])];
  return parts.map((part) => (isJson(part) && typeof part.text === 'string' ? part.text : '')).join('\n');
}

/**
 * A stand-in for an encrypted compaction item: a user message of about as
 * many tokens as the encrypted summary is estimated to hold, so the replayed
 * context after a compaction has the recorded size, not the summary's text
 * (which the rollout does not have).
 */
export function compactionStandIn(encrypted: string): InputItem {
  const tokens = estimateEncryptedTokens(encrypted.length);
  return {
    type: 'message',
    role: 'user',
    content: `(compacted context, encrypted in the recording: about ${tokens} tokens)${' context'.repeat(tokens)}`,
  };
}

/**
 * The id a recorded call is replayed under: as recorded, or, past the API's 64 characters (`CALL_ID_MAX_CHARS`: the
 * server refuses a longer one when the client sends the call or its output back, as the API does), `call_` and the 43
 * characters of the SHA-256 of its UTF-16 units (base64url): deterministic, so a call, its outputs and a compaction's copy of them agree.
 */
export function replayCallId(raw: string): string {
  // Hashed as UTF-16 units, not UTF-8: UTF-8 encodes every lone surrogate as U+FFFD, so two ids differing only in one
  // had the same hash, and the file was refused as using one id twice (outside attack atk59).
  return longerThan(raw, CALL_ID_MAX_CHARS) ? `call_${createHash('sha256').update(Buffer.from(raw, 'utf16le')).digest('base64url')}` : raw;
}

/**
 * A compaction's replacement history (Responses API items) as input items.
 * Messages, calls and their outputs are kept (an output whose call comes
 * before it in the history, as the API requires); custom tool calls become
 * function calls taking `{input}` (as everywhere in replay); an encrypted
 * `compaction` item gets a stand-in of its estimated size; a client-run
 * `tool_search_call` and its output become a function call `tool_search` and
 * its output (the tools found, as JSON), and the API's built-in client tools (`CLIENT_BUILTINS`) function calls and
 * their outputs' text; reasoning and hosted calls are dropped (the API would not show them as input text); a
 * call left without output is answered "aborted" right after it. Returns the
 * items, how many were dropped and how many calls were answered so.
 */
export function replacementItems(history: readonly unknown[]): { items: InputItem[]; dropped: number; aborted: number } {
  const items: InputItem[] = [];
  const calls = new Set<string>();
  let dropped = 0;
  for (const raw of history) {
    if (!isJson(raw)) {
      dropped++;
      continue;
    }
    let h: Json = raw;
    const type = h.type;
    // Ids as the reader replays them (`replayCallId`), and an empty one (which the API refuses) dropped.
    if (typeof h.call_id === 'string') {
      if (h.call_id === '') {
        dropped++;
        continue;
      }
      h = { ...h, call_id: replayCallId(h.call_id) };
    }
    if (type === 'message' && typeof h.role === 'string' && ['user', 'developer', 'system', 'assistant'].includes(h.role)) {
      items.push({ type: 'message', role: h.role as 'user', content: h.role === 'assistant' ? messageText(h.content) : inputContent(h.content) });
    } else if (type === 'function_call' && typeof h.call_id === 'string' && typeof h.name === 'string' && typeof h.arguments === 'string') {
      items.push({ type: 'function_call', call_id: h.call_id, name: h.name, arguments: h.arguments });
      calls.add(h.call_id);
    } else if (type === 'custom_tool_call' && typeof h.call_id === 'string' && typeof h.name === 'string' && typeof h.input === 'string') {
      items.push({ type: 'function_call', call_id: h.call_id, name: h.name, arguments: JSON.stringify({ input: h.input }) });
      calls.add(h.call_id);
    } else if (type === 'tool_search_call' && h.execution === 'client' && typeof h.call_id === 'string') {
      // Run by the client: a function call `tool_search`, as the reader replays it outside a compaction.
      items.push({ type: 'function_call', call_id: h.call_id, name: 'tool_search', arguments: JSON.stringify(h.arguments ?? {}) });
      calls.add(h.call_id);
    } else if (type === 'tool_search_output' && h.execution === 'client' && typeof h.call_id === 'string' && Array.isArray(h.tools) && calls.has(h.call_id)) {
      items.push({ type: 'function_call_output', call_id: h.call_id, output: JSON.stringify(h.tools) });
    } else if (
      (type === 'function_call_output' || type === 'custom_tool_call_output') &&
      typeof h.call_id === 'string' &&
      outputText(h.output) !== null &&
      // An answer to a call the replacement does not hold is refused by the API (unknown call_id): dropped.
      calls.has(h.call_id)
    ) {
      items.push({ type: 'function_call_output', call_id: h.call_id, output: outputText(h.output)! });
    } else if (typeof type === 'string' && CLIENT_BUILTINS[type] !== undefined && typeof h.call_id === 'string') {
      // A built-in client tool's call and output, as the reader replays them outside a compaction (atk86 F3).
      const b = CLIENT_BUILTINS[type]!;
      items.push({ type: 'function_call', call_id: h.call_id, name: b.name, arguments: JSON.stringify(h[b.field] ?? {}) });
      calls.add(h.call_id);
    } else if (typeof type === 'string' && CLIENT_BUILTIN_OUTPUTS.has(type) && typeof h.call_id === 'string' && calls.has(h.call_id)) {
      items.push({ type: 'function_call_output', call_id: h.call_id, output: builtinOutputText(h).text });
    } else if ((type === 'compaction' || type === 'compaction_summary') && typeof h.encrypted_content === 'string') {
      items.push(compactionStandIn(h.encrypted_content));
    } else {
      dropped++;
    }
  }
  // A call the replacement leaves unanswered is answered "aborted" right after it, as Codex answers a call
  // without output in the history it sends: left open, the ws and http designs' requests were refused
  // (missing_tool_output) and long-lived replayed the turn short (outside attack).
  const callIdOf = (it: InputItem) => (it as { call_id?: string }).call_id ?? '';
  const answered = new Set<string>();
  for (const it of items) if (it.type === 'function_call_output') answered.add(callIdOf(it));
  let aborted = 0;
  const out: InputItem[] = [];
  for (const it of items) {
    out.push(it);
    const callId = callIdOf(it);
    if (it.type === 'function_call' && !answered.has(callId)) {
      out.push({ type: 'function_call_output', call_id: callId, output: 'aborted' });
      answered.add(callId);
      aborted++;
    }
  }
  return { items: out, dropped, aborted };
}

/**
 * A replacement history's input message content: its text, or with images (a screenshot the user attached, kept by
 * the compaction) its text and `input_image` parts in order. Flattened to text before, the images were dropped from
 * the replayed context and from the inferred input tokens.
 */
type InputPart = { type: 'input_text'; text: string } | { type: 'input_image'; image_url: string };
function inputContent(content: unknown): string | InputPart[] {
  if (!Array.isArray(content)) return messageText(content);
  const images = content.filter((part) => isJson(part) && part.type === 'input_image' && typeof part.image_url === 'string');
  if (images.length === 0) return messageText(content);
  return content.flatMap((part): InputPart[] => {
    if (!isJson(part)) return [];
    if (part.type === 'input_image' && typeof part.image_url === 'string') return [{ type: 'input_image', image_url: part.image_url }];
    return typeof part.text === 'string' ? [{ type: 'input_text', text: part.text }] : [];
  });
}

/** A name a function tool may have (the API refuses a tool definition with any other). */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Widens a permissive object schema per tool from the arguments seen. */
export class ToolSchemas {
  private readonly schemas = new Map<string, { custom: boolean; props: Map<string, JsonType | null> }>();

  /** Notes a call's arguments; false when they are not JSON text (models do emit malformed arguments). */
  note(name: string, args: string, custom: boolean): boolean {
    let tool = this.schemas.get(name);
    if (!tool) this.schemas.set(name, (tool = { custom, props: new Map() }));
    let parsed: unknown;
    try {
      parsed = JSON.parse(args);
    } catch {
      return false;
    }
    if (!isJson(parsed)) return true;
    for (const [key, value] of Object.entries(parsed)) {
      const t = jsonType(value);
      const seen = tool.props.get(key);
      if (seen === undefined) tool.props.set(key, t);
      else if (seen !== t) tool.props.set(key, (seen === 'integer' || seen === 'number') && (t === 'integer' || t === 'number') ? 'number' : null);
    }
    return true;
  }

  /** One function tool per name a tool may have (a call's invented name, such as `multi_tool_use.parallel`, declares none). */
  tools(): FunctionTool[] {
    return [...this.schemas].filter(([name]) => TOOL_NAME.test(name)).map(([name, { custom, props }]) => ({
      type: 'function',
      name,
      description: custom ? CUSTOM_TOOL_DESCRIPTION : null,
      parameters: {
        type: 'object',
        properties: Object.fromEntries([...props].map(([k, t]) => [k, t === null ? {} : { type: t }])),
        additionalProperties: true,
      },
      strict: false,
    }));
  }
}

function jsonType(v: unknown): JsonType {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  if (typeof v === 'string' || typeof v === 'boolean') return typeof v as 'string' | 'boolean';
  return 'object';
}
