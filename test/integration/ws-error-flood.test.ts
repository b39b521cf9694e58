/**
 * A WebSocket client that floods small frames the server refuses (each
 * answered with an `error` event) and reads nothing is dropped once its
 * unsent bytes pass the send limit's hard cap, even within one event-loop
 * turn. The turn's own writes are not judged until the next turn (a reader
 * that reads must be able to receive three echoes of a large request in one
 * turn, transport/batch.ts), and one turn reads up to 32 socket chunks: 2 MB
 * of 7-byte bad frames made ~290,000 error events, 44 MB unsent before the
 * drop a turn later, ten such clients 300+ MB of RSS (outside attack). And
 * such a flood is handled one message a turn (the `ws` library's
 * `allowSynchronousEvents: false`), so other connections are served between
 * its messages. Real sockets, port 0; the waits are on the server's log and
 * its messages.
 */
import { connect, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const LIMIT = 64 * 1024;

/** One masked text frame of a few bytes. */
function frame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!));
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]);
}

/**
 * A raw client upgraded to a WebSocket on `port`: after the 101's head it reads nothing more (`reads` false: what the
 * server sends stays unsent) or reads and drops everything (true). With the head as read.
 */
async function rawUpgrade(port: number, reads: boolean): Promise<{ socket: Socket; head: string }> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  let head = '';
  const upgraded = new Promise<void>((resolve) => {
    const onHead = (d: Buffer): void => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onHead);
      if (reads) socket.resume();
      else socket.pause();
      resolve();
    };
    socket.on('data', onHead);
  });
  socket.write(
    'GET /v1/responses HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  await upgraded;
  return { socket, head };
}

describe('a WebSocket client flooding refused frames while reading nothing', () => {
  it('is dropped at the send limit with at most about twice the limit unsent, not what one turn wrote', async () => {
    const cap = captureLogger();
    const { port } = await testServer({ logger: cap.logger, limits: { maxSendBufferBytes: LIMIT } });
    const { socket, head } = await rawUpgrade(port, false);
    expect(head).toMatch(/^HTTP\/1\.1 101 /);
    const dropped = cap.waitFor((l) => l['code'] === 'send_buffer_full');
    // 40,000 frames of `x` (not JSON) in one write: 280 KB in, an error event of ~150 bytes out for each.
    socket.write(Buffer.concat(Array.from({ length: 40_000 }, () => frame('x'))));
    const line = await dropped;
    socket.destroy();
    // The cap: twice the limit plus three of the largest events (each error is under 1 KB).
    expect(line['buffered'] as number).toBeLessThan(2 * LIMIT + 3 * 1024);
  });
});

describe('a WebSocket client flooding refused frames', () => {
  it('has one message handled per event-loop turn: the rest of its chunk waits, and other connections are served between', async () => {
    // A send limit no flood reaches: the reading itself is what is bounded here.
    const { server, port } = await testServer({ limits: { maxSendBufferBytes: 1024 * 1024 * 1024 } });
    const FRAMES = 20_000;
    // The server's messages from this client, counted per event-loop turn (a setImmediate chain ticks once a turn).
    let turn = 0;
    let counted = -1;
    let inTurn = 0;
    let most = 0;
    let handled = 0;
    let ticking = true;
    const tick = (): void => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const { socket } = await rawUpgrade(port, true);
    const [ws] = [...server.ws.wss.clients];
    const allHandled = new Promise<void>((resolve) =>
      // Before the session's listener: the message is counted in the turn the library emits it.
      ws!.prependListener('message', () => {
        if (turn !== counted) {
          counted = turn;
          inTurn = 0;
        }
        most = Math.max(most, ++inTurn);
        if (++handled === FRAMES) resolve();
      }),
    );
    socket.write(Buffer.concat(Array.from({ length: FRAMES }, () => frame('x'))));
    // Another client's request while the flood is being handled: answered between the flood's messages.
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(200);
    const handledBeforeHealth = handled;
    await allHandled;
    ticking = false;
    socket.destroy();
    // Every chunk of 7-byte frames was handled in one turn (thousands of messages) before.
    expect(most).toBeLessThanOrEqual(2);
    expect(handledBeforeHealth).toBeLessThan(FRAMES);
  });
});

describe('a WebSocket connection the server closes while its reading yields', () => {
  it('still reads the peer close frame: the close completes, not after the close timeout (30 s)', async () => {
    // Reading paused mid-flood (the messages not yet handled hold the socket back) must go on once the server begins
    // a close (shutdown's 1001 on SIGTERM, a run's end): the 8 ms read budget this replaced resumed reading only
    // while the socket was OPEN, so the peer's answering close frame was never read and the ws library waited its
    // 30 s close timeout.
    const { server, port } = await testServer({ limits: { maxSendBufferBytes: 1024 * 1024 * 1024 } });
    const upgradedSocket = new Promise<import('node:net').Socket>((resolve) => server.http.once('upgrade', (_req, s) => resolve(s as import('node:net').Socket)));
    const { socket } = await rawUpgrade(port, true);
    const serverSide = await upgradedSocket;
    const wss = server.ws.wss;
    const closed = new Promise<void>((resolve) => serverSide.once('close', () => resolve()));
    const yielded = new Promise<void>((resolve) =>
      // After the server's own listeners: the socket is paused here once its unhandled messages hold it back.
      serverSide.on('data', () => {
        if (serverSide.isPaused()) resolve();
      }),
    );
    socket.write(Buffer.concat(Array.from({ length: 60_000 }, () => frame('x'))));
    await new Promise<void>((resolve) =>
      serverSide.on('data', function closeOnYield() {
        if (!serverSide.isPaused()) return;
        serverSide.off('data', closeOnYield);
        for (const ws of wss.clients) ws.close(1000, 'bye');
        resolve();
      }),
    );
    await yielded;
    // The peer answers the close with its own (masked, empty): the server must read it to finish the handshake.
    socket.write(Buffer.from([0x88, 0x80, 0, 0, 0, 0]));
    await closed;
    socket.destroy();
    await server.close();
  }, 15_000);
});
