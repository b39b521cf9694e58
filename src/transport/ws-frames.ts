/**
 * WebSocket text frames built here instead of by the `ws` library, for a
 * batch of deltas (protocol/event-json.ts `DeltaBatch`): each event is still
 * its own message (a final, unmasked, uncompressed text frame, exactly the
 * bytes `ws.send(text)` writes on a server socket), but the whole batch is
 * one buffer and one socket write instead of a header buffer, a payload and
 * two writes per message.
 *
 * Used by transport/ws-connection.ts, only when `directSocket` proves the library's
 * sender idle: no permessage-deflate (a compressed message sets RSV1 and
 * goes through zlib), nothing queued behind a compression or a blob, no
 * fragmented message open. Otherwise the transport falls back to `ws.send`
 * per event. Leaves out client (masked) frames and binary messages.
 */
import type { Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import type { DeltaBatch, DeltaHead } from '../protocol/event-json.js';

/** The `ws` library's private sender state read by `directSocket` (checked field by field, never assumed). */
interface SenderState {
  _state?: unknown;
  _queue?: unknown;
  _firstFragment?: unknown;
  _bufferedBytes?: unknown;
  _socket?: unknown;
}

/**
 * The socket under `ws` when writing frames to it directly keeps every
 * byte and its order exactly as `ws.send` would (see the header), else
 * null. Reads the library's private state defensively: any field missing
 * or of another shape (another version of `ws`) means null.
 */
export function directSocket(ws: WebSocket): Writable | null {
  const sender: unknown = Reflect.get(ws, '_sender');
  const extensions: unknown = Reflect.get(ws, '_extensions');
  // No extension negotiated (`ws.extensions === ''`, read without building its string each time).
  if (typeof sender !== 'object' || sender === null || Reflect.get(ws, '_isServer') !== true || typeof extensions !== 'object' || extensions === null || hasKeys(extensions)) return null;
  const s = sender as SenderState;
  // ws's Sender: state DEFAULT (0) is neither deflating nor reading a blob; an empty queue; no message left unfinished.
  if (s._state !== 0 || !Array.isArray(s._queue) || s._queue.length !== 0 || s._firstFragment !== true || s._bufferedBytes !== 0) return null;
  const socket = s._socket;
  if (socket === undefined || socket === null || socket !== Reflect.get(ws, '_socket')) return null;
  return socket as Writable;
}

function hasKeys(o: object): boolean {
  for (const _ in o) return true;
  return false;
}

/** A batch's frames, one message per delta, and its largest message (UTF-8 bytes of JSON, as `piecesLength` counts). */
export interface BatchFrames {
  frames: Buffer;
  largest: number;
}

/** Each delta head's JSON as bytes (it is ASCII: item ids are), kept while the head lives. */
const headBytes = new WeakMap<DeltaHead, Buffer>();
/** The two tails (text and argument deltas) as bytes. */
const tailBytes = new Map<string, Buffer>();

/**
 * The frames of a batch of deltas, one message per delta, exactly the bytes
 * `ws.send(JSON.stringify(event))` writes for each, built in place in one
 * buffer: the head and tail shared by the item's deltas are copied as bytes,
 * only the escaped delta and the sequence number are new per message.
 */
export function batchFrames(b: DeltaBatch): BatchFrames {
  const { head, deltas, first } = b;
  if (!head.ascii) return utf8Frames(b);
  let hb = headBytes.get(head);
  if (hb === undefined) {
    hb = Buffer.from(head.json, 'latin1');
    headBytes.set(head, hb);
  }
  let tb = tailBytes.get(head.tail);
  if (tb === undefined) {
    tb = Buffer.from(head.tail, 'latin1');
    tailBytes.set(head.tail, tb);
  }
  const n = deltas.length;
  // Per message at most: a 10-byte header, the head, 6 bytes per UTF-16 unit of the delta (an escape like
  // \u001f, or 3 bytes of UTF-8), the quotes, the tail, 16 digits (a safe integer) and the brace.
  let max = 0;
  for (let i = 0; i < n; i++) max += 10 + hb.length + 6 * deltas[i]!.length + 2 + tb.length + 16 + 1;
  // A buffer of its own (not a slice of a shared slab: a reader that stops reading would pin the whole slab).
  const buf = Buffer.allocUnsafe(max);
  let o = 0;
  let largest = 0;
  for (let i = 0; i < n; i++) {
    const d = deltas[i]!;
    const seq = first + i;
    const digits = digitCount(seq);
    const fixed = hb.length + tb.length + digits + 1;
    if (plain(d)) {
      // Printable ASCII without a quote or a backslash: its JSON is the text in quotes (no string built).
      const len = fixed + d.length + 2;
      if (len > largest) largest = len;
      o = putHeader(buf, o, len);
      buf.set(hb, o);
      o += hb.length;
      buf[o++] = 0x22;
      o = putAscii(buf, o, d);
      buf[o++] = 0x22;
    } else {
      const q = JSON.stringify(d);
      const ascii = isAscii(q);
      const len = fixed + (ascii ? q.length : Buffer.byteLength(q, 'utf8'));
      if (len > largest) largest = len;
      o = putHeader(buf, o, len);
      buf.set(hb, o);
      o = ascii ? putAscii(buf, o + hb.length, q) : putUtf8(buf, o + hb.length, q);
    }
    buf.set(tb, o);
    o = putDigits(buf, o + tb.length, seq, digits);
    buf[o++] = 0x7d; // }
  }
  return { frames: buf.subarray(0, o), largest };
}

/** Whether JSON.stringify(s) is just `s` in quotes: printable ASCII, no `"` and no `\\`. */
function plain(s: string): boolean {
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

/** Decimal digits of a sequence number (a non-negative safe integer), as `String(n).length`. */
function digitCount(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** Write `n`'s `digits` decimal digits at `o`; returns the offset after them. */
function putDigits(buf: Buffer, o: number, n: number, digits: number): number {
  const end = o + digits;
  for (let k = end - 1; k >= o; k--) {
    buf[k] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  }
  return end;
}

function isAscii(s: string): boolean {
  for (let k = 0; k < s.length; k++) if (s.charCodeAt(k) > 0x7f) return false;
  return true;
}

/** Write ASCII `s` at `o`; returns the offset after it. */
function putAscii(buf: Buffer, o: number, s: string): number {
  for (let k = 0; k < s.length; k++) buf[o++] = s.charCodeAt(k);
  return o;
}

function putUtf8(buf: Buffer, o: number, s: string): number {
  return o + buf.write(s, o, 'utf8');
}

/** A final, unmasked text frame's header for a payload of `len` bytes (RFC 6455 §5.2); returns the offset after it. */
function putHeader(buf: Buffer, o: number, len: number): number {
  buf[o++] = 0x81; // FIN, text
  if (len < 126) buf[o++] = len;
  else if (len < 65536) {
    buf[o++] = 126;
    buf[o++] = len >> 8;
    buf[o++] = len & 0xff;
  } else {
    buf[o++] = 127;
    buf.writeUInt32BE(Math.floor(len / 2 ** 32), o);
    buf.writeUInt32BE(len >>> 0, o + 4);
    o += 8;
  }
  return o;
}


function utf8Frames(b: DeltaBatch): BatchFrames {
  const texts = new Array<string>(b.deltas.length);
  let largest = 0;
  for (let i = 0; i < texts.length; i++) {
    const t = b.json(i);
    texts[i] = t;
    const len = Buffer.byteLength(t, 'utf8');
    if (len > largest) largest = len;
  }
  return { frames: textFrames(texts), largest };
}


/** Bytes of a server frame header for a payload of `n` bytes. */
function headerSize(n: number): number {
  return n < 126 ? 2 : n < 65536 ? 4 : 10;
}

/** The final, unmasked text frames of `texts`, back to back in one buffer (RFC 6455 §5.2). */
export function textFrames(texts: readonly string[]): Buffer {
  const sizes = new Array<number>(texts.length);
  let total = 0;
  for (let i = 0; i < texts.length; i++) {
    const n = Buffer.byteLength(texts[i]!, 'utf8');
    sizes[i] = n;
    total += headerSize(n) + n;
  }
  const buf = Buffer.allocUnsafe(total);
  let o = 0;
  for (let i = 0; i < texts.length; i++) {
    const n = sizes[i]!;
    o = putHeader(buf, o, n);
    o += buf.write(texts[i]!, o, n, 'utf8');
  }
  return buf;
}
