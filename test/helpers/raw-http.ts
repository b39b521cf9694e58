/**
 * Raw HTTP for edge tests: requests written byte for byte over `net` (so a
 * test controls every header, can stop reading, or reset the connection),
 * and a pino logger that keeps its lines so a test can wait for one.
 */
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { afterEach } from 'vitest';

const sockets = new Set<Socket>();
afterEach(() => {
  for (const s of sockets) s.destroy();
  sockets.clear();
});

/** A connected raw socket (destroyed after the test). */
export function rawConnect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    sockets.add(s);
    s.once('error', reject);
  });
}

/** An HTTP/1.1 request head (plus body) as bytes. */
export function requestText(method: string, path: string, headers: Record<string, string>, body = ''): string {
  const all = { Host: 'localhost', ...headers, ...(body ? { 'Content-Length': String(Buffer.byteLength(body)) } : {}) };
  return `${method} ${path} HTTP/1.1\r\n${Object.entries(all)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n${body}`;
}

/** The headers a WebSocket upgrade needs (a valid key unless overridden). */
export function upgradeHeaders(extra: Record<string, string> = {}): Record<string, string> {
  return { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', ...extra };
}

/** Send a request on a fresh connection and read the whole answer (the server closes it, or Content-Length ends it). */
export async function rawRequest(port: number, text: string): Promise<{ status: number; headers: string; body: string }> {
  const s = await rawConnect(port);
  return new Promise((resolve, reject) => {
    let data = '';
    const done = () => {
      const [head = '', ...rest] = data.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1] ?? 0), headers: head, body: rest.join('\r\n\r\n') });
    };
    s.setEncoding('utf8');
    s.on('data', (chunk: string) => {
      data += chunk;
      const m = /content-length: (\d+)/i.exec(data);
      const at = data.indexOf('\r\n\r\n');
      if (m && at >= 0 && Buffer.byteLength(data.slice(at + 4)) >= Number(m[1])) {
        s.destroy();
        done();
      }
    });
    s.on('end', done);
    s.on('error', reject);
    s.write(text);
  });
}

/**
 * Writes `request` (any bytes: several pipelined requests, a body in any coding) on a fresh connection and
 * resolves with everything received once the server ends the connection, as `encoding` text.
 */
export async function untilServerCloses(port: number, request: string | Buffer, encoding: BufferEncoding = 'utf8'): Promise<string> {
  const s = await rawConnect(port);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('end', () => {
      s.destroy();
      resolve(Buffer.concat(chunks).toString(encoding));
    });
    s.on('error', reject);
    s.write(request);
  });
}

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

/** A logger at `info` whose lines are kept; `waitFor` resolves on the first line (past or future) matching. */
export function captureLogger(): { logger: Logger; lines: LogLine[]; waitFor: (pred: (l: LogLine) => boolean) => Promise<LogLine> } {
  const lines: LogLine[] = [];
  const waiters: Array<{ pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const line = JSON.parse(chunk.toString()) as LogLine;
      lines.push(line);
      for (const w of waiters.splice(0)) {
        if (w.pred(line)) w.resolve(line);
        else waiters.push(w);
      }
      cb();
    },
  });
  const waitFor = (pred: (l: LogLine) => boolean) =>
    new Promise<LogLine>((resolve) => {
      const seen = lines.find(pred);
      if (seen) resolve(seen);
      else waiters.push({ pred, resolve });
    });
  return { logger: pino({ level: 'info' }, stream), lines, waitFor };
}

/**
 * Sends `request` on fresh connections, one after another, each read only up to the first bytes of its answer (as a
 * client that stops reading), until one is answered with a status other than 200 or `max` are open. Resolves with the
 * paused sockets of the 200s (destroyed after the test) and that other status (0 when none came).
 */
export async function stallUntilRefused(port: number, request: string, max: number): Promise<{ stalled: Socket[]; refused: number }> {
  const stalled: Socket[] = [];
  while (stalled.length < max) {
    const s = await rawConnect(port);
    s.on('error', () => {});
    const first = new Promise<Buffer>((resolve) => s.once('data', resolve));
    s.write(request);
    const status = Number(/^HTTP\/1\.1 (\d+)/.exec((await first).toString('latin1'))?.[1] ?? 0);
    s.pause();
    if (status !== 200) return { stalled, refused: status };
    stalled.push(s);
  }
  return { stalled, refused: 0 };
}

/** The body of a chunked HTTP/1.1 message (`raw` from its first chunk), read up to its last chunk, as UTF-8 text. */
export function dechunk(raw: Buffer | string): string {
  const buf = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw;
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out).toString('utf8');
}

/** Calls `after(socket)` after every write the server makes on `socket` (to watch what it holds unsent: `writableLength`). */
export function afterWrites(socket: Socket, after: (socket: Socket) => void): void {
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  socket.write = ((...args: unknown[]) => {
    const ok = write(...args);
    after(socket);
    return ok;
  }) as typeof socket.write;
}

/** A background create streamed and read to its end: its text, its response id and its events' SSE blocks. */
export async function backgroundStream(url: string): Promise<{ own: string; id: string; ownEvents: string[] }> {
  const created = await fetch(`${url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', input: 'go', background: true, stream: true }),
  });
  const own = await created.text();
  const id = /"id":"(resp_[0-9a-f]+)"/.exec(own)![1]!;
  return { own, id, ownEvents: own.split('\n\n').filter((b) => b.startsWith('event:')) };
}
