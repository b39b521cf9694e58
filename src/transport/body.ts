/**
 * Reading an HTTP request body with a size limit: the one reader of the
 * server's POST routes (the Responses API and the demo's). Over the limit is
 * `payload_too_large`; a client that closes mid-body is `request_aborted`
 * (a client's doing, logged at info). Leaves parsing to the caller.
 */
import type { IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { WireError } from '../protocol/errors.js';

export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    // A client that closes mid-body is not a server fault: nobody is left to
    // answer, and the log says `request_aborted` at info.
    const aborted = (cause?: unknown) => reject(new WireError('request_aborted', undefined, null, { cause }));
    req.on('error', aborted);
    req.on('close', () => {
      if (!req.complete) aborted();
    });
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (declared > limit) {
      req.resume();
      reject(new WireError('payload_too_large', `The request body is larger than ${limit} bytes.`));
      return;
    }
    // Each chunk is decoded as it arrives (a StringDecoder keeps a character split across chunks):
    // decoding 16 MiB at the end, after a Buffer.concat, held the event loop ~0.2–0.3 s in one turn.
    const decoder = new StringDecoder('utf8');
    const parts: string[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new WireError('payload_too_large', `The request body is larger than ${limit} bytes.`));
        return;
      }
      parts.push(decoder.write(c));
    });
    req.on('end', () => {
      parts.push(decoder.end());
      resolve(parts.join(''));
    });
  });
}
