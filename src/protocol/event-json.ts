/**
 * Server events as the JSON text a transport sends, in the two forms that
 * make a stream cheap: byte-identical to `JSON.stringify` of the event
 * either way (the unit tests compare the two), only the work differs.
 *
 * - Deltas, almost every event of a stream: the engine builds them as
 *   `TextDelta` / `ArgsDelta` instances whose JSON is a pre-serialised head,
 *   shared by all the deltas of one item (type, item_id, output_index,
 *   content_index), then the escaped delta and the sequence number (the
 *   class fields are declared in the wire order).
 * - A large tools echo, once per Response: `response.created`,
 *   `…in_progress` and the terminal event each carry the Response, which
 *   echoes the request's `tools` (up to 128 tools whose schemas, with
 *   descriptions, can fill the 16 MiB body). Stringifying them for every
 *   event, then UTF-8-encoding the frame on write, held the event loop
 *   0.3–0.8 s (issue 7). Every snapshot of one Response shares its tools
 *   array (engine/response.ts), so its UTF-8 bytes are kept in a WeakMap
 *   keyed by the array and the event goes out as pieces (`eventPieces`):
 *   the text before the tools, the shared bytes, the text after (found by
 *   a sentinel string carrying a per-process random nonce, which no client
 *   string can collide with).
 *
 * Used by the WebSocket and SSE transports (serialising), the in-memory
 * transport, and engine/segment.ts (building deltas). Every other event
 * keeps the general path: one `JSON.stringify`.
 */
import { randomBytes } from 'node:crypto';
import type { ArgsDeltaEvent, TextDeltaEvent } from './events.js';

/** What the deltas of one item share; built once per item. */
export class DeltaHead {
  /** `{"type":…,"item_id":…,"output_index":…[,"content_index":…],"delta":` */
  readonly json: string;

  constructor(
    readonly type: 'response.output_text.delta' | 'response.function_call_arguments.delta',
    readonly itemId: string,
    readonly outputIndex: number,
    /** The text part's index; null for function call arguments (their delta has no content_index). */
    readonly contentIndex: number | null,
  ) {
    const idx = contentIndex === null ? '' : `,"content_index":${JSON.stringify(contentIndex)}`;
    this.json = `{"type":${JSON.stringify(type)},"item_id":${JSON.stringify(itemId)},"output_index":${JSON.stringify(outputIndex)}${idx},"delta":`;
  }
}

/** `response.output_text.delta`; the fields in wire order (the order JSON.stringify writes them). */
export class TextDelta implements TextDeltaEvent {
  readonly type = 'response.output_text.delta' as const;
  readonly item_id: string;
  readonly output_index: number;
  readonly content_index: number;
  readonly delta: string;
  readonly logprobs: unknown[] = [];
  /** Set by the run when it numbers the event (-1 until then). */
  sequence_number = -1;
  readonly #head: DeltaHead;

  constructor(head: DeltaHead, delta: string) {
    this.item_id = head.itemId;
    this.output_index = head.outputIndex;
    this.content_index = head.contentIndex ?? 0;
    this.delta = delta;
    this.#head = head;
  }

  toWire(): string {
    if (this.logprobs.length !== 0 || !Number.isSafeInteger(this.sequence_number)) return JSON.stringify(this);
    return `${this.#head.json}${JSON.stringify(this.delta)},"logprobs":[],"sequence_number":${this.sequence_number}}`;
  }
}

/** `response.function_call_arguments.delta`; the fields in wire order. */
export class ArgsDelta implements ArgsDeltaEvent {
  readonly type = 'response.function_call_arguments.delta' as const;
  readonly item_id: string;
  readonly output_index: number;
  readonly delta: string;
  sequence_number = -1;
  readonly #head: DeltaHead;

  constructor(head: DeltaHead, delta: string) {
    this.item_id = head.itemId;
    this.output_index = head.outputIndex;
    this.delta = delta;
    this.#head = head;
  }

  toWire(): string {
    if (!Number.isSafeInteger(this.sequence_number)) return JSON.stringify(this);
    return `${this.#head.json}${JSON.stringify(this.delta)},"sequence_number":${this.sequence_number}}`;
  }
}

/** Events the run numbers in place instead of copying (they are built fresh for one emission). */
export function numberedInPlace(e: object): e is TextDelta | ArgsDelta {
  return e instanceof TextDelta || e instanceof ArgsDelta;
}

/** An event's text as pieces to write in order: one string, or [before, the tools echo's UTF-8 bytes, after]. */
export type EventPieces = [string] | [string, Buffer, string];

/** Echoes shorter than this are stringified with the event (memoising them would cost more than it saves). */
const MEMO_MIN_CHARS = 64 * 1024;
const SENTINEL = `llr-tools-${randomBytes(12).toString('hex')}`;
const QUOTED = JSON.stringify(SENTINEL);
/** A Response's tools array → its JSON as UTF-8 bytes, or null when it is small. */
const echoes = new WeakMap<object, Buffer | null>();

/**
 * The pieces of `JSON.stringify(e)` (joined and UTF-8-encoded, they are its
 * bytes). `e` is a server event, or the flat SSE error body
 * (transport/http.ts), which carries no Response.
 */
export function eventPieces(e: object): EventPieces {
  if (e instanceof TextDelta || e instanceof ArgsDelta) return [e.toWire()];
  if (!('response' in e)) return [JSON.stringify(e)];
  const r = e.response;
  if (typeof r !== 'object' || r === null || !('tools' in r)) return [JSON.stringify(e)];
  const tools = r.tools;
  if (!Array.isArray(tools) || tools.length === 0) return [JSON.stringify(e)];
  let bytes = echoes.get(tools);
  if (bytes === undefined) {
    const t = JSON.stringify(tools);
    bytes = t.length >= MEMO_MIN_CHARS ? Buffer.from(t, 'utf8') : null;
    echoes.set(tools, bytes);
  }
  if (bytes === null) return [JSON.stringify(e)];
  // Spreading keeps every key where it was: the sentinel stands exactly where the tools go.
  const out = JSON.stringify({ ...e, response: { ...r, tools: SENTINEL } });
  const at = out.indexOf(QUOTED);
  return [out.slice(0, at), bytes, out.slice(at + QUOTED.length)];
}

/** The pieces' size (characters of strings, bytes of buffers): for send-buffer accounting. */
export function piecesLength(pieces: EventPieces): number {
  let n = 0;
  for (const p of pieces) n += p.length;
  return n;
}

/** The JSON text of `e` as one string: exactly `JSON.stringify(e)`. */
export function eventJson(e: object): string {
  const p = eventPieces(e);
  return p.length === 1 ? p[0] : `${p[0]}${p[1].toString('utf8')}${p[2]}`;
}
