/**
 * JSON out at the edge, in slices: a Response object echoes what the request
 * carried (16 MiB of instructions, 128 tools with their schemas), and
 * `JSON.stringify` of it plus writing it to the socket held the event loop
 * 0.3–0.9 s in one turn on a loaded machine. `stringifyInto` walks the value
 * and stringifies its leaves natively, yielding between members;
 * `sendJsonCooperative` writes its text as it is made, in ~256 KiB pieces
 * with `Transfer-Encoding: chunked` (no length is known before the end),
 * waiting for the reader between them, so no answer holds more than about a
 * piece of its text at once. Small bodies (the common case) are still
 * stringified natively and written in one go with a `Content-Length`.
 * `stringifyInto` lives in protocol/json-chunked.ts.
 */
import type { ServerResponse } from 'node:http';
import { YIELD_BUDGET_MS } from '../cooperative.js';
import { stringifyInto, stringifyWork, textChars } from '../protocol/json-chunked.js';
import type { Hold } from '../modes/server-bytes.js';
import { whenSocketCloses } from './socket-watch.js';

export { stringifyWork };

/** Characters of text handed to the socket per write. */
const WRITE_PIECE_CHARS = 256 * 1024;

/**
 * What a large answer is charged to the server-wide byte budget while it is written (its own size by `textChars`'
 * count when smaller): what it holds at most at once, whatever its size. The piece being made (up to
 * `WRITE_PIECE_CHARS`, plus one leaf of up to 256 K characters, which escapes can make six times longer), and the
 * piece the socket has not yet taken (written only once the last one has drained). Measured: 128 `input_items`
 * listings of a 10 MB item at once, none read, grew the RSS by ~0.7 MB each (`npm run bench:answers`).
 */
export const ANSWER_HELD_BYTES = 2 * 1024 * 1024;

/**
 * `sendJson`, cooperative for large bodies. Resolves when the body is handed to the socket (or the client is gone).
 * A large one is charged `ANSWER_HELD_BYTES` (its size when smaller) to `hold` before its head (503 `server_busy` past
 * the budget, unless the caller's `add` charges unchecked; the caller releases the hold once this resolves). Each
 * answer used to be built whole before a byte left, and charged its size only then: answers being built at once were outside the budget, 300 concurrent listings of a 10 MB input item took
 * the RSS from 214 to 1,792 MB (outside attack), and one a client read slowly kept all its text until the last byte.
 */
export async function sendJsonCooperative(res: ServerResponse, status: number, body: unknown, hold?: Pick<Hold, 'add'>): Promise<void> {
  // Counted up to the charge: an answer smaller than it is charged its own size (a compaction's 840 KB answer was
  // refused under a 1,000 KiB budget it fits, charged 2 MiB).
  const chars = textChars(body, ANSWER_HELD_BYTES);
  if (chars <= WRITE_PIECE_CHARS) {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  // A HEAD's answer has no body (node:http drops what is written): nothing to make. Its length is not known unmade.
  if (res.req?.method === 'HEAD') {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end();
    return;
  }
  hold?.add(Math.min(ANSWER_HELD_BYTES, chars));
  const out: string[] = [];
  const work = stringifyInto(body, out);
  let made = 0;
  let counted = 0;
  let sliceStart = performance.now();
  try {
    for (let r = work.next(); !r.done; r = work.next()) {
      if (gone(res)) return;
      for (; counted < out.length; counted++) made += out[counted]!.length;
      if (made >= WRITE_PIECE_CHARS) {
        // The head goes with the first piece: an error before it (none is expected of JSON-shaped values) is still
        // answered as an error, with its status.
        if (!res.headersSent) res.writeHead(status, { 'Content-Type': 'application/json' });
        const piece = out.join('');
        out.length = 0;
        made = counted = 0;
        // Honours back-pressure: the text waits unmade, not in the socket's buffer, and the caller (which keeps the
        // request's share of the server-wide byte budget until this resolves) stays charged until the answer has
        // left. A client that reads nothing is dropped by the stall timeout.
        if (!res.write(piece)) await drainedOrClosed(res);
        else await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      } else if (performance.now() - sliceStart >= YIELD_BUDGET_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
    }
  } catch (err) {
    // Part of the answer has left: a chunked end now would pass a truncated text for a whole one. The reader sees the
    // connection fail instead.
    if (res.headersSent) res.destroy();
    throw err;
  }
  if (gone(res)) return;
  const last = out.join('');
  // Shorter than a piece after all (`textOver` counts a few characters per value besides the strings): one write.
  if (!res.headersSent) res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(last) });
  // The last piece (at most ~256 KiB) ends the answer at once: no turn of the event loop waits after it.
  res.end(last);
}

/**
 * An answer already made (`bytes`, its JSON's UTF-8), written a piece at a time as the reader takes them: resolves
 * once the last piece is handed over, or once the reader is gone. The caller holds the bytes' charge until then.
 */
export async function sendJsonBytes(res: ServerResponse, status: number, bytes: Buffer): Promise<void> {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': bytes.length });
  let at = 0;
  while (bytes.length - at > WRITE_PIECE_CHARS) {
    if (gone(res)) return;
    const room = res.write(bytes.subarray(at, at + WRITE_PIECE_CHARS));
    at += WRITE_PIECE_CHARS;
    if (!room) await drainedOrClosed(res);
  }
  if (!gone(res)) res.end(at === 0 ? bytes : bytes.subarray(at));
}

/**
 * Resolves on the response's `drain`, or once it is closed (a reader dropped by the stall timeout, or gone), or once
 * its request's socket is: an answer pipelined behind another has no socket of its own until that one is done, and
 * gets neither `drain` nor `close` when the client goes first. It waited for good, its charge to the byte budget held
 * (two pipelined retrieves of a 3 MB response, the client gone after 128 KB: `bytes_held` 2 MiB more each time, and
 * shutdown waited the whole `--send-stall-timeout-ms` for it; test/integration/pipelined-answer-charge.test.ts).
 */
export function drainedOrClosed(res: ServerResponse): Promise<void> {
  if (gone(res)) return Promise.resolve();
  return new Promise((resolve) => {
    let forget = () => {};
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      forget();
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
    forget = whenSocketCloses(res.req?.socket, done);
  });
}

/** The answer can no longer leave: it is closed, or its request's socket is (one pipelined and still queued). */
function gone(res: ServerResponse): boolean {
  return res.destroyed || res.req?.socket?.destroyed === true;
}
