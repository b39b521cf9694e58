/**
 * Reading an HTTP request body with a size limit: the one reader of the
 * server's POST routes (the Responses API and the demo's). Over the limit is
 * `payload_too_large`; a client that closes mid-body is `request_aborted`
 * (a client's doing, logged at info); a body that is not UTF-8 is
 * `invalid_json` (JSON text is UTF-8, RFC 8259 §8.1: replacing the bad bytes
 * with U+FFFD would silently change what the client sent). Leaves parsing to
 * the caller. Also
 * what an early refusal does with a body it never read (`drainBody`,
 * `closeAfterAnswer`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { WireError } from '../protocol/errors.js';
import { pastWholeBudget, type Hold } from '../modes/server-bytes.js';

/**
 * Requests sent with `Expect: 100-continue` whose `100 Continue` is not sent
 * yet (`awaitContinue`): it is sent by the first `readBody`, once every check
 * before the body passed (route and method, auth, content type and coding,
 * a `Content-Length` over the limit), so a refused request's client is not
 * asked for a body the server would drain or drop (Node wrote `100 Continue`
 * before the request was even routed). An answer given without it closes the
 * connection (Node's own rule: the client may still be holding the body).
 */
const continuePending = new WeakMap<IncomingMessage, ServerResponse>();

/** `req` expects `100 Continue` (Node's `checkContinue`): `readBody` sends it, a refusal does not. */
export function awaitContinue(req: IncomingMessage, res: ServerResponse): void {
  continuePending.set(req, res);
}

/** Whether `req`'s client waits for a `100 Continue` not sent yet (so it holds its body back). */
export function awaitingContinue(req: IncomingMessage): boolean {
  return continuePending.has(req);
}

/** The `100 Continue` `req`'s client waits for, if it waits for one: the body is wanted now. */
function sendContinue(req: IncomingMessage): void {
  const res = continuePending.get(req);
  if (!res) return;
  continuePending.delete(req);
  if (!res.headersSent && !res.destroyed) res.writeContinue();
}

/**
 * The body as text. With `hold`, each chunk is charged to the server-wide
 * byte budget as it arrives (`server_busy` past it); the caller releases
 * the hold when its request is done.
 */
export function readBody(req: IncomingMessage, limit: number, hold?: Hold): Promise<string> {
  return new Promise((resolve, reject) => {
    // Each chunk is decoded as it arrives (a streaming decoder keeps a character split across chunks):
    // decoding 16 MiB at the end, after a Buffer.concat, held the event loop ~0.2–0.3 s in one turn.
    // `fatal`: invalid UTF-8 is refused, not replaced; `ignoreBOM`: a BOM stays in the text (and fails the parse) as before.
    const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    let parts: string[] = [];
    let size = 0;
    // Settled once; every listener goes with it. A listener left on `req`
    // would keep this promise, and so the whole body text (or its chunks),
    // alive for as long as the request lives: for an SSE stream, the run's
    // whole life (found by the chaos suite's slow readers: 15 MB per stream).
    const settle = (err: unknown, text?: string) => {
      req.off('error', onError);
      req.off('close', onClose);
      req.off('data', onData);
      req.off('end', onEnd);
      parts = [];
      if (err) reject(err);
      else resolve(text ?? '');
    };
    // A client that closes mid-body is not a server fault: nobody is left to
    // answer, and the log says `request_aborted` at info.
    const aborted = (cause?: unknown) => settle(new WireError('request_aborted', undefined, null, { cause }));
    const onError = (err: unknown) => aborted(err);
    const onClose = () => {
      if (!req.complete) aborted();
    };
    const tooLarge = () => new WireError('payload_too_large', `The request body is larger than ${limit} bytes.`);
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.resume();
        return settle(tooLarge());
      }
      try {
        hold?.add(c.length);
      } catch (err) {
        return settle(hold ? pastWholeBudget(err, hold.max, Math.max(size, Number(req.headers['content-length']) || 0), 'body', hold.bytes) : err);
      }
      const text = decode(c, true);
      if (text !== null) parts.push(text);
    };
    const notUtf8 = () => new WireError('invalid_json', 'The request body is not valid JSON: it is not valid UTF-8.');
    const decode = (c: Buffer | undefined, stream: boolean): string | null => {
      try {
        return c === undefined ? decoder.decode() : decoder.decode(c, { stream });
      } catch {
        req.resume();
        settle(notUtf8());
        return null;
      }
    };
    const onEnd = () => {
      const rest = decode(undefined, false);
      if (rest === null) return;
      parts.push(rest);
      settle(null, parts.join(''));
    };
    req.on('error', onError);
    req.on('close', onClose);
    if (Number(req.headers['content-length'] ?? NaN) > limit) {
      req.resume();
      return settle(tooLarge());
    }
    sendContinue(req);
    req.on('data', onData);
    req.on('end', onEnd);
  });
}

/**
 * Early refusals (404, 405, 415, 401, 403, 503, 413 …) are decided before
 * the body is read. Answering while the client still uploads, then closing,
 * makes the kernel reset the connection over the unread bytes, and a client
 * that writes before it reads (node's http client, the openai SDK on it)
 * gets EPIPE or ECONNRESET instead of the answer. So the rest of the body
 * is read and discarded first, up to `limit` bytes (the body size the
 * route would have accepted; its time is bounded by the request timeout):
 * resolves true once it ended, false when it was over the limit (the
 * caller then answers with `closeAfterAnswer`) or the client went away.
 * A body held back for a `100 Continue` (`awaitContinue`) is not asked for:
 * false at once, so the answer closes the connection (and discards whatever
 * a client that stopped waiting sends meanwhile).
 */
export function drainBody(req: IncomingMessage, limit: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (req.complete) return resolve(true);
    if (awaitingContinue(req)) return resolve(false);
    if (Number(req.headers['content-length'] ?? NaN) > limit) return resolve(false);
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.off('data', onData);
        resolve(false);
      }
    };
    req.on('data', onData);
    req.on('end', () => resolve(true));
    req.on('close', () => resolve(req.complete));
    req.on('error', () => resolve(false));
    req.resume();
  });
}

/** How long a refused upload is still read after the answer (`closeAfterAnswer`). */
export const LINGER_MS = 2000;

/**
 * The fewest bytes of a refused upload still read after the answer (`closeAfterAnswer`), whatever the frame limit:
 * the default `--max-frame-bytes`. Read up to the frame limit only, a server with `--max-frame-bytes 65536` closed on a
 * 8 MB body after 64 KiB more, and node's http client and undici `fetch` got ECONNRESET, not the 413 (outside fuzzer
 * atk75 F1). Read and dropped, never held: it costs time, which `LINGER_MS` bounds.
 */
export const LINGER_MIN_BYTES = 16 * 1024 * 1024;

/**
 * An answer sent while the client may still be uploading more than the
 * server will read: `Connection: close`, then (instead of Node's close as
 * soon as the answer is flushed) only our side is shut, and what the client
 * still sends is discarded for at most `LINGER_MS` and `limit` bytes (at least `LINGER_MIN_BYTES`) before
 * the socket is destroyed, so the answer reaches the client before any
 * reset. Call before the answer is written.
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse, limit: number, lingerMs = LINGER_MS): void {
  res.setHeader('Connection', 'close');
  const socket = req.socket;
  // Node ends a `Connection: close` response with socket.destroySoon(): end our side only.
  socket.destroySoon = () => {
    socket.end();
  };
  const budget = Math.max(limit, LINGER_MIN_BYTES);
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size > budget) socket.destroy();
  });
  req.on('error', () => {});
  req.resume();
  const timer = setTimeout(() => socket.destroy(), lingerMs);
  socket.once('close', () => clearTimeout(timer));
}

/** The request says it has a body: a non-zero Content-Length, or a Transfer-Encoding. */
export function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}
