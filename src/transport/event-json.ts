/**
 * An event's JSON, with the large echo of the request serialised and
 * encoded once per Response instead of once per event. `response.created`,
 * `…in_progress` and the terminal event each carry the Response, which
 * echoes the request's `tools` (up to 128 tools whose schemas, with
 * descriptions, can fill the 16 MiB body): stringifying them for every
 * event, then UTF-8-encoding the 16 MiB frame on write, held the event loop
 * 0.3–0.8 s. The tools array is shared by every snapshot of one Response
 * (engine/response.ts), so its UTF-8 bytes are kept in a WeakMap keyed by
 * the array, and an event is sent as pieces: the text before the tools, the
 * shared bytes, the text after (found by a sentinel string carrying a
 * per-process random nonce, which no client string can collide with).
 *
 * Used by both transports' sinks (SSE frames, WebSocket frames). Joined,
 * the pieces are exactly `JSON.stringify(event)` in UTF-8. Small echoes take
 * the plain path: one string.
 */
import { randomBytes } from 'node:crypto';

/** Echoes shorter than this are stringified with the event (memoising them would cost more than it saves). */
const MEMO_MIN_CHARS = 64 * 1024;
const SENTINEL = `llr-tools-${randomBytes(12).toString('hex')}`;
const QUOTED = JSON.stringify(SENTINEL);

const memo = new WeakMap<object, Buffer | null>();

/** `JSON.stringify(e)` as one string, or as [before, tools bytes, after] when the tools echo is large. */
export function eventPieces(e: object): [string] | [string, Buffer, string] {
  const r = (e as { response?: unknown }).response;
  if (typeof r !== 'object' || r === null) return [JSON.stringify(e)];
  const tools = (r as { tools?: unknown }).tools;
  if (!Array.isArray(tools) || tools.length === 0) return [JSON.stringify(e)];
  let bytes = memo.get(tools);
  if (bytes === undefined) {
    const t = JSON.stringify(tools);
    bytes = t.length >= MEMO_MIN_CHARS ? Buffer.from(t, 'utf8') : null;
    memo.set(tools, bytes);
  }
  if (bytes === null) return [JSON.stringify(e)];
  const out = JSON.stringify({ ...e, response: { ...r, tools: SENTINEL } });
  const at = out.indexOf(QUOTED);
  return [out.slice(0, at), bytes, out.slice(at + QUOTED.length)];
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
