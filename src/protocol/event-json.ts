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
 * - A large echo, once per Response: `response.created`, `…in_progress`
 *   and the terminal event each carry the Response, which echoes the
 *   request's `instructions` and `tools` (either can fill the 16 MiB body),
 *   and its `user`, `safety_identifier`, `prompt_cache_key`, `text` and
 *   `prompt_cache_options` (`FIELDS`).
 *   Stringifying them for every event, then UTF-8-encoding the frame on
 *   write, held the event loop 0.3–0.8 s (issue 7). Every snapshot of one
 *   Response shares its tools array (engine/response.ts), so the large
 *   fields' UTF-8 bytes are kept in a WeakMap keyed by it, and the event
 *   goes out as pieces (`eventPieces`): text, shared bytes, text … (each
 *   field found by a sentinel string carrying a per-process random nonce,
 *   which no client string can collide with).
 *
 * - A long output, once per pause of a long-lived run: its full snapshot
 *   carries every item so far. The finished items' UTF-8 JSON is kept per
 *   Response and extended as items finish (a finished item never changes,
 *   and every snapshot shares it); the event carries a view of those bytes.
 *
 * Consecutive deltas of one item can also travel as one `DeltaBatch` (each
 * still its own numbered event) so a transport frames them into one write.
 *
 * Used by the WebSocket and SSE transports (serialising), the in-memory
 * transport, and engine/segment.ts (building deltas). Every other event
 * keeps the general path: one `JSON.stringify`.
 */
import { randomBytes } from 'node:crypto';
import type { ArgsDeltaEvent, TextDeltaEvent } from './events.js';
import { jsonBytesWork, NATIVE_TEXT_CHARS, textOver } from './json-chunked.js';
import { runCooperative } from '../cooperative.js';

/** What the deltas of one item share; built once per item. */
export class DeltaHead {
  /** `{"type":…,"item_id":…,"output_index":…[,"content_index":…],"delta":` */
  readonly json: string;

  constructor(
    readonly type: 'response.output_text.delta' | 'response.function_call_arguments.delta' | 'response.custom_tool_call_input.delta',
    readonly itemId: string,
    readonly outputIndex: number,
    /** The text part's index; null for a call's arguments or input (their delta has no content_index). */
    readonly contentIndex: number | null,
  ) {
    const idx = contentIndex === null ? '' : `,"content_index":${JSON.stringify(contentIndex)}`;
    this.json = `{"type":${JSON.stringify(type)},"item_id":${JSON.stringify(itemId)},"output_index":${JSON.stringify(outputIndex)}${idx},"delta":`;
    this.tail = contentIndex === null ? ',"sequence_number":' : ',"logprobs":[],"sequence_number":';
    this.ascii = !/[^\x00-\x7f]/.test(this.json);
  }

  /** Whether `json` is ASCII (item ids are): then a delta's text is ASCII exactly when its delta is. */
  readonly ascii: boolean;

  /** What follows the escaped delta, up to the sequence number. */
  readonly tail: string;

  /** The JSON text of this item's delta `delta` numbered `seq` (a safe integer): exactly `JSON.stringify` of its event. */
  wire(delta: string, seq: number): string {
    return `${this.json}${JSON.stringify(delta)}${this.tail}${seq}}`;
  }

  /** The delta as an event object (unnumbered), for sinks that take one event at a time; `logprobs` a text delta's. */
  event(delta: string, logprobs?: EventLogprob[]): TextDelta | ArgsDelta {
    return this.contentIndex === null ? new ArgsDelta(this, delta) : new TextDelta(this, delta, logprobs);
  }
}

/**
 * Consecutive deltas of one item, numbered `first`, `first + 1` …: each is
 * still its own event (its own WebSocket message or SSE frame, its own
 * sequence number); only the hand-over from the run to the transport is
 * one call, so a transport can frame them all into one write. The
 * transport advances `sent` as it hands each event to the socket, so a
 * throw part-way tells the run exactly which were sent.
 */
export class DeltaBatch {
  /** Events handed over so far (the transport advances it). */
  sent = 0;

  constructor(
    readonly head: DeltaHead,
    readonly deltas: readonly string[],
    /** The first delta's sequence number. */
    readonly first: number,
  ) {}

  get type(): DeltaHead['type'] {
    return this.head.type;
  }

  /** The i-th delta's JSON text (exactly `JSON.stringify(this.event(i))`). */
  json(i: number): string {
    return this.head.wire(this.deltas[i]!, this.first + i);
  }

  /** The i-th delta as a numbered event object. */
  event(i: number): TextDelta | ArgsDelta {
    const e = this.head.event(this.deltas[i]!);
    e.sequence_number = this.first + i;
    return e;
  }
}

/** A piece's logprobs as a delta or `output_text.done` event lists them (model/logprobs.ts `eventLogprob`). */
export interface EventLogprob {
  token: string;
  logprob: number;
  top_logprobs: Array<{ token: string; logprob: number }>;
}

/** `response.output_text.delta`; the fields in wire order (the order JSON.stringify writes them). */
export class TextDelta implements TextDeltaEvent {
  readonly type = 'response.output_text.delta' as const;
  readonly item_id: string;
  readonly output_index: number;
  readonly content_index: number;
  readonly delta: string;
  readonly logprobs: EventLogprob[];
  /** Set by the run when it numbers the event (-1 until then). */
  sequence_number = -1;
  readonly #head: DeltaHead;

  constructor(head: DeltaHead, delta: string, logprobs: EventLogprob[] = []) {
    this.item_id = head.itemId;
    this.output_index = head.outputIndex;
    this.content_index = head.contentIndex ?? 0;
    this.delta = delta;
    this.logprobs = logprobs;
    this.#head = head;
  }

  toWire(): string {
    if (this.logprobs.length !== 0 || !Number.isSafeInteger(this.sequence_number)) return JSON.stringify(this);
    return this.#head.wire(this.delta, this.sequence_number);
  }
}

/** `response.function_call_arguments.delta`, or a custom tool call's `response.custom_tool_call_input.delta` (the same fields); in wire order. */
export class ArgsDelta implements Omit<ArgsDeltaEvent, 'type'> {
  readonly type: Exclude<DeltaHead['type'], 'response.output_text.delta'>;
  readonly item_id: string;
  readonly output_index: number;
  readonly delta: string;
  sequence_number = -1;
  readonly #head: DeltaHead;

  constructor(head: DeltaHead, delta: string) {
    this.type = head.type === 'response.output_text.delta' ? 'response.function_call_arguments.delta' : head.type;
    this.item_id = head.itemId;
    this.output_index = head.outputIndex;
    this.delta = delta;
    this.#head = head;
  }

  toWire(): string {
    if (!Number.isSafeInteger(this.sequence_number)) return JSON.stringify(this);
    return this.#head.wire(this.delta, this.sequence_number);
  }
}

/** Events the run numbers in place instead of copying (they are built fresh for one emission). */
export function numberedInPlace(e: object): e is TextDelta | ArgsDelta {
  return e instanceof TextDelta || e instanceof ArgsDelta;
}

/** An event's text as pieces to write in order: text, then the large echoes' shared UTF-8 bytes each followed by text. */
export type EventPieces = [string, ...Array<string | Buffer>];

/** Echoes shorter than this are stringified with the event (memoising them would cost more than it saves). */
const MEMO_MIN_CHARS = 64 * 1024;
const NONCE = randomBytes(12).toString('hex');
/**
 * The echoed fields that can be large (any can fill the 16 MiB body), each replaced by its own sentinel: the
 * request's own, the same for every event of a Response. `instructions` and `tools` first (issue 7); then those an
 * outside attack filled with 2.4 million lone surrogates (six-character escapes), one JSON.stringify of which per
 * event held the loop ~0.9 s over a stream: `user`, `safety_identifier`, `prompt_cache_key`, `text` (a json_schema
 * format), `prompt_cache_options` (its `comparison_response_id`); `tool_choice` (an `allowed_tools` choice's list of
 * tools, unbounded: held the loop ~0.7 s per event the same way).
 */
const FIELDS = ['instructions', 'tools', 'user', 'safety_identifier', 'prompt_cache_key', 'text', 'prompt_cache_options', 'tool_choice'] as const;
type EchoField = (typeof FIELDS)[number];
const SENTINELS = FIELDS.map((f) => `llr-echo-${f}-${NONCE}`);
const QUOTED = SENTINELS.map((t) => JSON.stringify(t));

/** One Response's large echoes: each field's UTF-8 JSON, or null when small; and the values they were made from. */
interface Echoes {
  values: unknown[];
  bytes: Array<Buffer | null>;
}
/** Per Response, keyed by its tools array (every snapshot of one Response shares it, engine/response.ts). */
const echoes = new WeakMap<object, Echoes>();
const NO_ECHOES: Array<Buffer | null> = FIELDS.map(() => null);

/**
 * A Response's output whose first this many items or more are finished
 * travels as bytes kept between its events: a long-lived run's pause sends
 * its full snapshot at every step, every call so far, so serialising them
 * all again (and encoding the text) made each step's event costlier than
 * the one before.
 */
const OUTPUT_MEMO_MIN_ITEMS = 32;
const OUTPUT_SENTINEL = `llr-echo-output-${NONCE}`;
const OUTPUT_QUOTED = JSON.stringify(OUTPUT_SENTINEL);

/**
 * One Response's finished output items as UTF-8 JSON (`[` then the items
 * joined by `,`, no closing bracket), extended as items finish. An item
 * never changes once finished (`isFinishedItem`) and every snapshot of
 * its Response shares the object (engine/response.ts `snapshot`), and a
 * Response's output only grows, so the bytes are checked by reference
 * against the first and the last item they hold. Bytes once written are
 * never written again: each event sends a view of them, and growing copies
 * them to a larger buffer, leaving earlier views intact.
 */
interface OutputBytes {
  buf: Buffer;
  len: number;
  count: number;
  last: object;
}
/** Keyed by the output's first item (it belongs to one Response). */
const outputBytes = new WeakMap<object, OutputBytes>();
const EMPTY = Buffer.alloc(0);

/**
 * An output item whose JSON never changes again, so a snapshot shares it (engine/response.ts) and its bytes are kept
 * here: a `completed` item (engine/segment.ts sets the status last, and nothing changes a completed item), or a
 * compaction item, which has no status and is whole when it joins the output (engine/run.ts `compactNow`). Anything
 * else may still change: an item streaming (`in_progress`), or one a run's end closes (`settle`).
 */
export function isFinishedItem(item: unknown): item is object {
  if (typeof item !== 'object' || item === null) return false;
  const status = (item as { status?: unknown }).status;
  return status === 'completed' || (status === undefined && (item as { type?: unknown }).type === 'compaction');
}

/** How many of `items`' first items are kept (`finishedBytes`): its memo's, when `items` still holds them; else 0. */
function keptCount(items: readonly unknown[]): number {
  const first = items[0];
  if (typeof first !== 'object' || first === null) return 0;
  const memo = outputBytes.get(first);
  return memo !== undefined && memo.count <= items.length && items[memo.count - 1] === memo.last ? memo.count : 0;
}

/**
 * The bytes kept for `items` (`finishedBytes`: its finished items' UTF-8 JSON, a second copy of them besides the
 * items themselves, kept for the Response's life once 32 or more are finished): what was written, 0 when nothing is
 * kept. The buffer's spare room as it doubles is left out (not written, so not resident), as `TokenBuffer.bytes`
 * leaves its own out. What keeps a Response across client time charges it to the server-wide byte budget
 * (engine/run.ts `chargeKept`): 64 KB-argument calls held about twice their charged output without it.
 */
export function keptOutputBytes(items: readonly unknown[]): number {
  if (keptCount(items) === 0) return 0;
  return outputBytes.get(items[0] as object)!.len;
}

/**
 * Stop keeping `items`' finished JSON (`finishedBytes`): for a Response whose events are all made (its run ended). The
 * memo is keyed by its first output item, which outlives the run where a context keeps it (a ws-mode connection's
 * cache, extended by each continuation in place): a second copy of the output held for the connection's life and
 * counted nowhere, one per response of 32 or more items in the chain.
 */
export function forgetOutputBytes(items: readonly unknown[]): void {
  const first = items[0];
  if (typeof first === 'object' && first !== null) outputBytes.delete(first);
}

/** The kept bytes of `items`' first `count` finished items (`[` + their JSON joined by `,`). */
function finishedBytes(items: readonly unknown[], count: number): Buffer {
  const first = items[0] as object;
  let memo = outputBytes.get(first);
  if (memo === undefined || memo.count > count || items[memo.count - 1] !== memo.last) {
    // No room yet: the first fill sizes the buffer to what it holds (a fixed 64 KiB start kept ~60 KB
    // unused for every paused run past 32 items, whose finished items are a few KB of JSON).
    memo = { buf: EMPTY, len: 1, count: 0, last: first };
    outputBytes.set(first, memo);
  }
  // Stringified first, so a fill (the first one: every item) grows the buffer once.
  const jsons: string[] = [];
  let need = memo.len;
  for (let i = memo.count; i < count; i++) {
    const json = JSON.stringify(items[i]);
    jsons.push(json);
    need += 1 + Buffer.byteLength(json);
  }
  if (need > memo.buf.length) {
    // Not from the shared pool (a small kept buffer would keep its 8 KiB slab alive); doubling past the first fill.
    const grown = Buffer.allocUnsafeSlow(memo.buf.length === 0 ? need : Math.max(need, 2 * memo.buf.length));
    if (memo.buf.length === 0) grown[0] = 0x5b; // [
    else memo.buf.copy(grown, 0, 0, memo.len);
    memo.buf = grown;
  }
  for (const json of jsons) {
    const item = items[memo.count] as object;
    memo.count++;
    if (memo.count > 1) memo.buf[memo.len++] = 0x2c; // ,
    memo.len += memo.buf.write(json, memo.len, 'utf8');
    memo.last = item;
  }
  return memo.buf.subarray(0, memo.len);
}

/**
 * Whether a Response's instructions and tools are long enough (`textOver`) that their echo is made in slices before
 * its first event (`warmEchoes`): one JSON.stringify of them, in `eventPieces`, held the loop ~300 ms for a schema of
 * 2.5 million lone surrogates. About a microsecond for the usual few tools.
 */
export function echoesLong(r: Partial<Record<EchoField, unknown>>): boolean {
  return Array.isArray(r.tools) && textOver(echoValues(r), NATIVE_TEXT_CHARS);
}

function echoValues(r: Partial<Record<EchoField, unknown>>): unknown[] {
  return FIELDS.map((f) => r[f]);
}

/**
 * Checked, not assumed: a tools array shared by two Responses (ws mode's cache) whose other fields differ gets fresh
 * bytes for those fields, the tools' own kept.
 */
function sameValues(memo: Echoes, values: unknown[]): boolean {
  for (let i = 0; i < values.length; i++) if (memo.values[i] !== values[i]) return false;
  return true;
}

/** The echoes `eventPieces` would make of a Response's instructions and tools, made in slices and kept for its events. */
export async function warmEchoes(r: Partial<Record<EchoField, unknown>>): Promise<void> {
  const tools = r.tools;
  if (!Array.isArray(tools)) return;
  const values = echoValues(r);
  const memo = echoes.get(tools);
  if (memo !== undefined && sameValues(memo, values)) return;
  const bytes: Array<Buffer | null> = [];
  for (let i = 0; i < values.length; i++) bytes.push(memo !== undefined && memo.values[i] === values[i] ? memo.bytes[i]! : await echoBytesAsync(values[i]));
  echoes.set(tools, { values, bytes });
}

/** `echoBytes`, a long one's bytes made in slices (`jsonBytesWork`), with no text of the whole built. */
async function echoBytesAsync(v: unknown): Promise<Buffer | null> {
  if (tooSmallToEcho(v)) return null;
  if (!textOver(v, NATIVE_TEXT_CHARS)) return echoOf(JSON.stringify(v));
  // Past `NATIVE_TEXT_CHARS` by `textOver`'s count (8 a value, which takes at least 2 characters with its comma), its
  // text is a quarter of that at least: `MEMO_MIN_CHARS`, kept.
  return runCooperative(jsonBytesWork(v));
}

function echoBytes(v: unknown): Buffer | null {
  return tooSmallToEcho(v) ? null : echoOf(JSON.stringify(v));
}

/**
 * Whether an echo is certainly too small to keep as bytes, known without a JSON.stringify: a string shorter than a
 * sixth of the threshold, or a tools array or `text` object that `textOver` counts under a sixth. Its JSON is at most
 * six times what is counted (an escape like `\u0001` for one character; a number's text within thrice its node's
 * count), so under 64 K characters, as the stringify would have found. Anything counted larger is stringified once and
 * kept when its JSON reaches 64 K. An outside attack's 60,000 control characters in a tool's description, counted
 * small at the full threshold, were stringified again for every event (~1.3 ms each); a string of them (360 KB of
 * JSON) always was. Stringifying a few tools only to learn they were short cost ~6 µs per Response (each Response has
 * a tools array of its own, so its first event made the memo); counting them, ~1 µs.
 */
function tooSmallToEcho(v: unknown): boolean {
  if (v === undefined || v === null || typeof v === 'boolean' || typeof v === 'number') return true;
  if (typeof v === 'string') return v.length < MEMO_MIN_CHARS / 6;
  return !textOver(v, MEMO_MIN_CHARS / 6);
}

function echoOf(text: string): Buffer | null {
  return text.length >= MEMO_MIN_CHARS ? Buffer.from(text, 'utf8') : null;
}

/**
 * The pieces of `JSON.stringify(e)` (joined and UTF-8-encoded, they are its
 * bytes). `e` is a server event, or the flat SSE error body
 * (transport/sse.ts), which carries no Response.
 */
export function eventPieces(e: object): EventPieces {
  if (e instanceof TextDelta || e instanceof ArgsDelta) return [e.toWire()];
  if (!('response' in e)) return [JSON.stringify(e)];
  const r = e.response;
  if (typeof r !== 'object' || r === null) return [JSON.stringify(e)];
  const output: unknown = Reflect.get(r, 'output');
  let finished = 0;
  if (Array.isArray(output) && output.length >= OUTPUT_MEMO_MIN_ITEMS) {
    // The items already kept are finished (they never change again): only the ones after them are looked at, so a
    // pause of a long run does not walk every call so far (it did, property by property, at every pause).
    finished = keptCount(output);
    while (finished < output.length && isFinishedItem(output[finished])) finished++;
  }
  const longOutput = finished >= OUTPUT_MEMO_MIN_ITEMS;
  let bytes = NO_ECHOES;
  const tools: unknown = Reflect.get(r, 'tools');
  if (Array.isArray(tools)) {
    const values = echoValues(r as Partial<Record<EchoField, unknown>>);
    let memo = echoes.get(tools);
    if (memo === undefined || !sameValues(memo, values)) {
      const kept = memo;
      memo = { values, bytes: values.map((v, i) => (kept !== undefined && kept.values[i] === v ? kept.bytes[i]! : echoBytes(v))) };
      echoes.set(tools, memo);
    }
    bytes = memo.bytes;
  }
  if (!longOutput && bytes.every((b) => b === null)) return [lifecycleJson(e, r)];
  // Spreading keeps every key where it was: each sentinel stands exactly where its field goes.
  const swapped: Record<string, unknown> = { ...r };
  const swaps: Array<{ quoted: string; bytes: Buffer }> = [];
  FIELDS.forEach((f, i) => {
    const b = bytes[i];
    if (b === null || b === undefined) return;
    swapped[f] = SENTINELS[i];
    swaps.push({ quoted: QUOTED[i]!, bytes: b });
  });
  if (longOutput) {
    swapped['output'] = OUTPUT_SENTINEL;
    swaps.push({ quoted: OUTPUT_QUOTED, bytes: finishedBytes(output as unknown[], finished) });
  }
  let text = JSON.stringify({ ...e, response: swapped });
  if (longOutput) {
    // The items after the finished ones (still streaming) as text, then the array's end, right after the kept bytes.
    const rest = (output as unknown[]).slice(finished).map((item) => `,${(JSON.stringify(item) as string | undefined) ?? 'null'}`).join('');
    const at = text.indexOf(OUTPUT_QUOTED) + OUTPUT_QUOTED.length;
    text = `${text.slice(0, at)}${rest}]${text.slice(at)}`;
  }
  // Spliced in the order the fields occur in the text.
  const placed = swaps.map((w) => ({ ...w, at: text.indexOf(w.quoted) })).sort((x, y) => x.at - y.at);
  const pieces: EventPieces = [text.slice(0, placed[0]!.at)];
  for (let i = 0; i < placed.length; i++) {
    const w = placed[i]!;
    pieces.push(w.bytes);
    pieces.push(text.slice(w.at + w.quoted.length, i + 1 < placed.length ? placed[i + 1]!.at : text.length));
  }
  return pieces;
}

/** A Response's JSON text, per object: `response.created` and `…in_progress` carry the same snapshot (engine/run.ts). */
const responseTexts = new WeakMap<object, string>();

/**
 * `JSON.stringify(e)` of an event carrying a Response with nothing kept as bytes: for the lifecycle events' own shape
 * (`type`, `response`, `sequence_number`, in that order), built around the Response's text, made once per snapshot.
 * A snapshot is not changed once made (engine/response.ts), so its text stays its JSON.
 */
function lifecycleJson(e: object, r: object): string {
  const keys = Object.keys(e);
  const { type, sequence_number: seq } = e as { type?: unknown; sequence_number?: unknown };
  if (keys.length !== 3 || keys[0] !== 'type' || keys[1] !== 'response' || keys[2] !== 'sequence_number' || typeof type !== 'string' || !Number.isSafeInteger(seq)) {
    return JSON.stringify(e);
  }
  let text = responseTexts.get(r);
  if (text === undefined) {
    text = JSON.stringify(r);
    responseTexts.set(r, text);
  }
  return `{"type":${JSON.stringify(type)},"response":${text},"sequence_number":${seq as number}}`;
}

/**
 * The pieces' size in UTF-8 bytes, what the socket will hold: for send-buffer
 * accounting (a count of characters under-counted multi-byte text up to 3×,
 * found by an outside attack).
 */
export function piecesLength(pieces: EventPieces): number {
  let n = 0;
  for (const p of pieces) n += typeof p === 'string' ? Buffer.byteLength(p, 'utf8') : p.length;
  return n;
}

/** The JSON text of `e` as one string: exactly `JSON.stringify(e)`. */
export function eventJson(e: object): string {
  const p = eventPieces(e);
  return p.length === 1 ? p[0] : p.map((x) => (typeof x === 'string' ? x : x.toString('utf8'))).join('');
}
