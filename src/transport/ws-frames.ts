/**
 * WebSocket text frames built here instead of by the `ws` library, for a
 * batch of deltas (protocol/event-json.ts `DeltaBatch`): each event is still
 * its own message (a final, unmasked, uncompressed text frame, exactly the
 * bytes `ws.send(text)` writes on a server socket), but the whole batch is
 * one buffer and one socket write instead of a header buffer, a payload and
 * two writes per message.
 *
 * Used by transport/ws.ts, only when `directSocket` proves the library's
 * sender idle: no permessage-deflate (a compressed message sets RSV1 and
 * goes through zlib), nothing queued behind a compression or a blob, no
 * fragmented message open. Otherwise the transport falls back to `ws.send`
 * per event. Leaves out client (masked) frames and binary messages.
 */
import type { Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import type { DeltaBatch } from '../protocol/event-json.js';

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
  const w = ws as unknown as { _sender?: SenderState | null; _socket?: unknown; _isServer?: unknown };
  const s = w._sender;
  if (!s || w._isServer !== true || ws.extensions !== '') return null;
  // ws's Sender: state DEFAULT (0) is neither deflating nor reading a blob; an empty queue; no message left unfinished.
  if (s._state !== 0 || !Array.isArray(s._queue) || s._queue.length !== 0 || s._firstFragment !== true || s._bufferedBytes !== 0) return null;
  const socket = s._socket;
  if (socket === undefined || socket === null || socket !== w._socket) return null;
  return socket as Writable;
}

const NON_ASCII = /[^\x00-\x7f]/;

/** A batch's frames: a Latin-1 string (one char per byte) or bytes; and its largest message (chars of JSON). */
export interface BatchFrames {
  frames: string | Buffer;
  latin1: boolean;
  largest: number;
}

/**
 * The frames of a batch of deltas, one message per delta, exactly the bytes
 * `ws.send(JSON.stringify(event))` writes for each. When every delta is
 * ASCII (the usual case; the head and the tail always are) the frames are
 * built as one Latin-1 string, whose chars are the bytes: no per-message
 * measuring, encoding or copying; otherwise UTF-8 frames in one buffer.
 */
export function batchFrames(b: DeltaBatch): BatchFrames {
  const { head, deltas, first } = b;
  const n = deltas.length;
  if (head.ascii && !NON_ASCII.test(deltas.join(''))) {
    const { json, tail } = head;
    const fixed = json.length + tail.length + 1;
    let s = '';
    let largest = 0;
    for (let i = 0; i < n; i++) {
      const q = JSON.stringify(deltas[i]);
      const seq = String(first + i);
      const len = fixed + q.length + seq.length;
      if (len >= 65536) return utf8Frames(b);
      s += `${len < 126 ? SHORT_HEADERS[len] : `\x81\x7e${String.fromCharCode(len >> 8, len & 0xff)}`}${json}${q}${tail}${seq}}`;
      if (len > largest) largest = len;
    }
    return { frames: s, latin1: true, largest };
  }
  return utf8Frames(b);
}

function utf8Frames(b: DeltaBatch): BatchFrames {
  const texts = new Array<string>(b.deltas.length);
  let largest = 0;
  for (let i = 0; i < texts.length; i++) {
    const t = b.json(i);
    texts[i] = t;
    if (t.length > largest) largest = t.length;
  }
  return { frames: textFrames(texts), latin1: false, largest };
}

/** The header of a final text frame with a payload of n < 126 bytes, as Latin-1 chars. */
const SHORT_HEADERS = Array.from({ length: 126 }, (_, n) => String.fromCharCode(0x81, n));

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
    buf[o++] = 0x81; // FIN, text
    if (n < 126) buf[o++] = n;
    else if (n < 65536) {
      buf[o++] = 126;
      buf.writeUInt16BE(n, o);
      o += 2;
    } else {
      buf[o++] = 127;
      buf.writeUInt32BE(Math.floor(n / 2 ** 32), o);
      buf.writeUInt32BE(n >>> 0, o + 4);
      o += 8;
    }
    o += buf.write(texts[i]!, o, n, 'utf8');
  }
  return buf;
}
