/**
 * A WebSocket peer that sends TCP FIN without a close frame (a half-close: `shutdown(SHUT_WR)`), at every point:
 * idle, mid-response while it reads, while its long-lived run is paused, and mid-response while it reads nothing.
 * No close frame can follow a FIN, so the connection ends as `1006` and its run ends `cancelled` as a disconnect,
 * once. The `ws` library answers the FIN by ending its own side once what it wrote is flushed: a peer that reads
 * nothing never lets that flush finish, and its run stayed `in_progress`, paced and waiting for the reader, with its
 * socket and unsent bytes, until the heartbeat dropped it (`--ws-idle-timeout-ms`, 60 s; for ever with it off: the
 * stall watch stands down once the connection is closing). The server now lingers at most `LINGER_MS` after the
 * FIN for what it wrote to leave, then drops the socket. Real sockets, port 0; each wait is on the server's log,
 * its records or the socket's events.
 */
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';
import { scriptPolicy } from '../../src/model/policies.js';
import type { LlrServer } from '../../src/server.js';

const TOOL = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };

/** One masked text frame. */
function frame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!));
  const head = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255]);
  return Buffer.concat([head, mask, masked]);
}

/**
 * A raw long-lived WebSocket peer that keeps its side open after it ends its writes (`allowHalfOpen`). `reads`
 * false: after the 101's head it reads nothing more, not even into the process (`onread` returning false stops
 * the kernel reads), so what the server sends stays in the socket buffers.
 */
async function peer(port: number, reads: boolean): Promise<{ socket: Socket; until: (what: string) => Promise<void> }> {
  let text = '';
  let upgraded: () => void;
  const head = new Promise<void>((r) => (upgraded = r));
  const waiters: Array<{ what: string; resolve: () => void }> = [];
  const socket = connect({
    port,
    host: '127.0.0.1',
    allowHalfOpen: true,
    onread: {
      buffer: Buffer.alloc(64 * 1024),
      callback(n: number, buf: Buffer): boolean {
        text += buf.toString('latin1', 0, n);
        for (const w of waiters.splice(0)) (text.includes(w.what) ? w.resolve : () => waiters.push(w))();
        if (!text.includes('\r\n\r\n')) return true;
        upgraded();
        return reads;
      },
    },
  });
  socket.on('error', () => {});
  socket.write(
    'GET /v1/responses?protocol=long-lived HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  await head;
  expect(text).toMatch(/^HTTP\/1\.1 101 /);
  const until = (what: string) => new Promise<void>((resolve) => (text.includes(what) ? resolve() : waiters.push({ what, resolve })));
  return { socket, until };
}

/** Resolves with the run's record once it has ended. */
async function ended(server: LlrServer, waitFor: ReturnType<typeof captureLogger>['waitFor']): Promise<string> {
  await waitFor((l) => l.msg === 'websocket closed');
  await server.ws.idle();
  const records = server.services.records.list();
  expect(records).toHaveLength(1);
  return records[0]!.status;
}

/** A raw HTTP client that sends `request`, then reads nothing at all (the kernel's reads stopped), its side kept open after a FIN. */
function silentHttpPeer(port: number, request: string): Socket {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true, onread: { buffer: Buffer.alloc(1024), callback: () => false } });
  socket.on('error', () => {});
  socket.write(request);
  return socket;
}

describe('an HTTP client that half-closes mid-stream and reads nothing', () => {
  it('has its stream dropped within the linger, not the stall timeout; the run ends cancelled', async () => {
    const cap = captureLogger();
    const policy = scriptPolicy([{ text: 'word '.repeat(60_000) }]);
    // A stall timeout past the test's own: only the linger can end it in time.
    const { server, port } = await testServer({ logger: cap.logger, policy, limits: { maxSendBufferBytes: 64 * 1024, sendStallTimeoutMs: 120_000 } });
    const body = JSON.stringify({ model: 'm', input: 'write', stream: true });
    const socket = silentHttpPeer(port, `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await cap.waitFor((l) => l['code'] === 'send_paced');
    socket.end();
    await cap.waitFor((l) => l['code'] === 'peer_half_closed');
    await server.httpTransport.idle();
    expect(server.services.records.list().map((r) => r.status)).toEqual(['cancelled']);
  });
});

describe('a WebSocket peer that half-closes (FIN, no close frame)', () => {
  it('idle: the connection is closed (1006)', async () => {
    const cap = captureLogger();
    const { server, port } = await testServer({ logger: cap.logger });
    const { socket } = await peer(port, true);
    const closed = once(socket, 'close');
    socket.end();
    expect((await cap.waitFor((l) => l.msg === 'websocket closed'))['code']).toBe(1006);
    await closed;
    await server.ws.idle();
    expect(server.ws.wss.clients.size).toBe(0);
  });

  it('while its long-lived run is paused: the run ends cancelled, once, and the connection closes', async () => {
    const cap = captureLogger();
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);
    const { server, port } = await testServer({ logger: cap.logger, policy });
    const { socket, until } = await peer(port, true);
    socket.write(frame(JSON.stringify({ type: 'response.create', model: 'm', input: 'look it up', tools: [TOOL] })));
    await until('"response.done"');
    socket.end();
    expect(await ended(server, cap.waitFor)).toBe('cancelled');
    expect(cap.lines.filter((l) => l.msg === 'websocket closed')).toHaveLength(1);
  });

  it('mid-response while it reads: the run ends cancelled and the connection closes', async () => {
    const cap = captureLogger();
    const policy = scriptPolicy([{ text: 'word '.repeat(20_000) }]);
    const { server, port } = await testServer({ logger: cap.logger, policy, modelSettings: { tokensPerSecond: 2000, ttftBaseMs: 0, prefillTokensPerSecond: Infinity } });
    const { socket, until } = await peer(port, true);
    socket.write(frame(JSON.stringify({ type: 'response.create', model: 'm', input: 'write' })));
    await until('output_text.delta');
    socket.end();
    expect(await ended(server, cap.waitFor)).toBe('cancelled');
  });

  it.each([
    ['the heartbeat on', {}],
    ['the heartbeat off', { wsIdleTimeoutMs: 0 }],
  ])('mid-response while it reads nothing (%s): the server lingers a bounded time, then drops it; the run ends cancelled', async (_what, extra) => {
    const cap = captureLogger();
    const policy = scriptPolicy([{ text: 'word '.repeat(60_000) }]);
    // A send limit the answer passes many times over: the run is paced, waiting for a reader that never reads.
    const { server, port } = await testServer({ logger: cap.logger, policy, limits: { maxSendBufferBytes: 64 * 1024, ...extra } });
    const { socket } = await peer(port, false);
    socket.write(frame(JSON.stringify({ type: 'response.create', model: 'm', input: 'write' })));
    await cap.waitFor((l) => l['code'] === 'send_paced');
    socket.end();
    expect(await ended(server, cap.waitFor)).toBe('cancelled');
    expect(cap.lines.find((l) => l['code'] === 'peer_half_closed')).toBeDefined();
  });
});
