/**
 * A background response's readers (its create's stream, `GET ?stream=true` resumes) were given every event at
 * once: a resume got all the kept events (up to --max-background-event-bytes, 4 MiB) written to its socket in
 * one turn, and live events as they came, whatever it had read. The server-wide bound on unsent bytes does not
 * pace background streams, so each reader that read nothing held megabytes: 400 resumes of one response took the
 * server from 563 MB to 2 GB of RSS (outside attack). Now a reader is given events while it holds less than
 * FOLLOW_WINDOW unsent, and reads the rest from the kept events (shared by all readers) as its socket drains.
 *
 * Measured on the server's side of the socket: the most it held unsent after any write, over a whole stream the
 * client reads to its end (every event, in order, then `[DONE]`).
 */
import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { afterWrites, backgroundStream, dechunk } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

/** `FOLLOW_WINDOW` (src/modes/background.ts), written out so the old code is judged by the same figure. */
const FOLLOW_WINDOW = 64 * 1024;
// ~20,000 tokens: several megabytes of delta events.
const TEXT = Array.from({ length: 10_000 }, (_, i) => `w${i}`).join(' ');

/** Reads one HTTP/1.1 response whose body ends with `data: [DONE]` from a raw socket. */
function readStream(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    s.on('error', reject);
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      if (Buffer.concat(chunks.slice(-2)).includes('0\r\n\r\n')) {
        s.destroy();
        resolve(Buffer.concat(chunks).toString('utf8'));
      }
    });
    s.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  });
}

describe("a background response's readers", () => {
  it('hold at most FOLLOW_WINDOW (and one event) unsent, and still get every event in order', async () => {
    const { server, url, port } = await testServer({ policy: scriptPolicy([{ text: TEXT }]), limits: { maxBackgroundEventBytes: 64 * 1024 * 1024 } });
    // The most any server-side socket held unsent after a write.
    let most = 0;
    server.http.on('connection', (socket: Socket) => afterWrites(socket, (s) => (most = Math.max(most, s.writableLength))));
    const { own, id, ownEvents } = await backgroundStream(url);
    expect(own.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(ownEvents.length).toBeGreaterThan(20_000);

    most = 0;
    const resumed = await readStream(port, `/v1/responses/${id}?stream=true`);
    const body = dechunk(resumed.slice(resumed.indexOf('\r\n\r\n') + 4));
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    // The same events in the same order: their sequence numbers, gapless.
    const seqs = [...body.matchAll(/"sequence_number":(\d+)/g)].map((m) => Number(m[1]));
    expect(seqs.length).toBe(ownEvents.length);
    expect(seqs.every((n, i) => n === i)).toBe(true);
    const largest = Math.max(...ownEvents.map((e) => Buffer.byteLength(e)));
    // Before: the whole kept stream (megabytes) at once.
    expect(most).toBeLessThan(FOLLOW_WINDOW + 2 * largest + 4096);
  });
});
