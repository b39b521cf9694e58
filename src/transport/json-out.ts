/**
 * JSON out at the edge, in slices: a Response object echoes what the request
 * carried (16 MiB of instructions, 128 tools with their schemas), and
 * `JSON.stringify` of it plus writing it to the socket held the event loop
 * 0.3–0.9 s in one turn on a loaded machine. `stringifyWork` walks the value
 * and stringifies its leaves natively, yielding between members;
 * `sendJsonCooperative` computes the length, sends the head, then writes the
 * text in 256 KiB pieces, giving the loop a turn between them
 * (`runCooperative`). Small bodies (the common case) are still written in
 * one go. `stringifyWork` lives in protocol/json-chunked.ts.
 */
import type { ServerResponse } from 'node:http';
import { runCooperative, type Work } from '../model/cooperative.js';
import { stringifyWork } from '../protocol/json-chunked.js';
import type { Hold } from '../modes/server-bytes.js';

export { stringifyWork };

/** Bytes handed to the socket per write. */
const WRITE_PIECE_CHARS = 256 * 1024;

/** Bodies with fewer parts than this and under one write piece go out in one write. */
const SMALL_BODY_MEMBERS = 2_000;

/**
 * `sendJson`, cooperative for large bodies. Resolves when the body is handed
 * to the socket (or the client is gone).
 */
export async function sendJsonCooperative(res: ServerResponse, status: number, body: unknown, hold?: Pick<Hold, 'add'>): Promise<void> {
  const parts = await runCooperative(stringifyWork(body));
  if (parts.length < SMALL_BODY_MEMBERS && parts.reduce((n, p) => n + p.length, 0) < WRITE_PIECE_CHARS) {
    const text = parts.join('');
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  const pieces = await runCooperative(piecesWork(parts));
  const length = pieces.reduce((n, p) => n + p.bytes, 0);
  if (res.destroyed) return;
  // A large answer is charged to the server-wide byte budget until it has left (the caller releases the hold): a
  // retrieve of a 16 MiB stored response by clients that read nothing pinned ~17 MB each with nothing charged (sixty
  // such GETs held 1 GB of heap; a few hundred would pass V8's heap limit). Past the budget: 503 `server_busy`.
  hold?.add(length);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': length });
  // Honours back-pressure: the pieces wait here, not in the socket's buffer, and the caller (which keeps the request's
  // share of the server-wide byte budget until this resolves) stays charged until the answer has left. Writing every
  // piece at once let a client that reads nothing pin a compaction's answer (~3x its 16 MiB body) per connection with
  // `bytes_held` back at 0: six such clients held ~1.5 GB (outside attack). The stall timeout drops such a reader.
  for (let i = 0; i < pieces.length - 1; i++) {
    if (res.destroyed) return;
    if (res.write(pieces[i]!.text)) await new Promise<void>((resolve) => setImmediate(resolve));
    else await drainedOrClosed(res);
  }
  // The last piece (at most ~256 KiB) ends the answer at once: no turn of the event loop waits after it.
  if (!res.destroyed) res.end(pieces.at(-1)?.text);
}

/** Resolves on the response's `drain`, or once it is closed (a reader dropped by the stall timeout, or gone). */
export function drainedOrClosed(res: ServerResponse): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** Join the parts into ~256 KiB pieces with their UTF-8 length. */
function* piecesWork(parts: string[]): Work<Array<{ text: string; bytes: number }>> {
  const pieces: Array<{ text: string; bytes: number }> = [];
  let acc: string[] = [];
  let size = 0;
  const flush = () => {
    const text = acc.join('');
    pieces.push({ text, bytes: Buffer.byteLength(text) });
    acc = [];
    size = 0;
  };
  for (const p of parts) {
    acc.push(p);
    size += p.length;
    if (size >= WRITE_PIECE_CHARS) {
      flush();
      yield;
    }
  }
  if (size > 0 || pieces.length === 0) flush();
  return pieces;
}
