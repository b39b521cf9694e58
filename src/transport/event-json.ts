/**
 * An event's JSON, with the large echo of the request serialised and
 * encoded once per Response instead of once per event. `response.created`,
 * `…in_progress` and the terminal event each carry the Response, which
 * echoes the request's `instructions` and `tools` (either can fill the
 * 16 MiB body): stringifying them for every event, then UTF-8-encoding the
 * 16 MiB frame on write, held the event loop 0.3–0.8 s. The tools array is
 * shared by every snapshot of one Response (engine/response.ts), so the
 * fields' UTF-8 bytes are kept in a WeakMap keyed by it, and an event is sent
 * as pieces: text, shared bytes, text … (the fields found by sentinel
 * strings carrying a per-process random nonce, which no client string can
 * collide with).
 *
 * Used by both transports' sinks (SSE frames, WebSocket frames). Joined,
 * the pieces are exactly `JSON.stringify(event)` in UTF-8. Small echoes take
 * the plain path: one string.
 */
import { randomBytes } from 'node:crypto';

/** Echoes shorter than this are stringified with the event (memoising them would cost more than it saves). */
const MEMO_MIN_CHARS = 64 * 1024;
const NONCE = randomBytes(12).toString('hex');
/** The echoed fields that can be large, each replaced by its own sentinel. */
const FIELDS = ['instructions', 'tools'] as const;
const SENTINELS = FIELDS.map((f) => `llr-echo-${f}-${NONCE}`);
const QUOTED = SENTINELS.map((t) => JSON.stringify(t));

/** Per Response (keyed by its tools array, which every snapshot shares): each field's UTF-8 JSON, or null when small. */
const memo = new WeakMap<object, Array<Buffer | null>>();

/**
 * `JSON.stringify(e)` as one string, or as pieces (strings, and the shared
 * bytes of the large echoed fields) when the Response echoes a large
 * `instructions` or `tools`.
 */
export function eventPieces(e: object): Array<string | Buffer> {
  const r = (e as { response?: unknown }).response;
  if (typeof r !== 'object' || r === null) return [JSON.stringify(e)];
  const rec = r as Record<string, unknown>;
  const key = rec['tools'];
  if (!Array.isArray(key)) return [JSON.stringify(e)];
  let bytes = memo.get(key);
  if (bytes === undefined) {
    bytes = FIELDS.map((f) => {
      const v = rec[f];
      // A long string needs no JSON.stringify to know its size; a tools array does.
      if (typeof v === 'string' && v.length < MEMO_MIN_CHARS) return null;
      if (Array.isArray(v) && v.length === 0) return null;
      if (v === undefined || v === null) return null;
      const t = JSON.stringify(v);
      return t.length >= MEMO_MIN_CHARS ? Buffer.from(t, 'utf8') : null;
    });
    memo.set(key, bytes);
  }
  if (bytes.every((b) => b === null)) return [JSON.stringify(e)];
  const swapped: Record<string, unknown> = { ...rec };
  FIELDS.forEach((f, i) => {
    if (bytes[i] !== null) swapped[f] = SENTINELS[i];
  });
  let text = JSON.stringify({ ...e, response: swapped });
  const pieces: Array<string | Buffer> = [];
  // Splice in the order the fields occur in the text.
  const at = FIELDS.map((_, i) => (bytes[i] !== null ? text.indexOf(QUOTED[i]!) : -1));
  const order = FIELDS.map((_, i) => i)
    .filter((i) => at[i]! >= 0)
    .sort((a, b) => at[a]! - at[b]!);
  let from = 0;
  for (const i of order) {
    pieces.push(text.slice(from, at[i]!), bytes[i]!);
    from = at[i]! + QUOTED[i]!.length;
  }
  pieces.push(text.slice(from));
  text = '';
  return pieces;
}

/** The pieces' size (characters of strings, bytes of buffers): for send-buffer accounting. */
export function piecesLength(pieces: readonly (string | Buffer)[]): number {
  let n = 0;
  for (const p of pieces) n += p.length;
  return n;
}

/** The event as one string (tests, small frames). */
export function eventJson(e: object): string {
  return eventPieces(e)
    .map((p) => (typeof p === 'string' ? p : p.toString('utf8')))
    .join('');
}
