/**
 * The log lines of clients' mistakes have a server-wide budget per second (`maxClientErrorLogsPerSecond`): a
 * WebSocket client flooding 7-byte frames the server refuses wrote one `info` line of ~165 bytes per frame (3 MB/s
 * of log from one connection at the default level; outside attack), and a count per connection would not bound a
 * client that reconnects. Past the budget the lines are counted and the count logged once the second is over.
 * Every frame is still refused with its `error` event. Real sockets, port 0; the waits are on the events received
 * and the server's log.
 */
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

/** One masked text frame of a few bytes. */
function frame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!))]);
}

describe('client-error log lines', () => {
  it('past the budget are counted, not written; the count is logged; every frame is still refused', async () => {
    const cap = captureLogger();
    const { port } = await testServer({ logger: cap.logger, limits: { maxClientErrorLogsPerSecond: 5 } });
    const FRAMES = 2000;
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    let text = '';
    let errors = 0;
    const all = new Promise<void>((resolve) => {
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        if (!text.includes('\r\n\r\n')) return;
        errors = text.split('"type":"error"').length - 1;
        if (errors >= FRAMES) resolve();
      });
    });
    socket.write(
      'GET /v1/responses HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    socket.write(Buffer.concat(Array.from({ length: FRAMES }, () => frame('x'))));
    await all;
    expect(errors).toBe(FRAMES);
    // Every refusal not logged is counted in a line once its second is over.
    const counted = () => cap.lines.filter((l) => l['code'] === 'client_errors_unlogged').reduce((n, l) => n + (l['unlogged'] as number), 0);
    const logged = () => cap.lines.filter((l) => l.msg === 'client error').length;
    await cap.waitFor(() => logged() + counted() >= FRAMES);
    expect(logged() + counted()).toBe(FRAMES);
    expect(logged()).toBeLessThan(FRAMES / 10);
    socket.destroy();
  });

  it('share the budget with refused HTTP requests', async () => {
    const cap = captureLogger();
    const { url } = await testServer({ logger: cap.logger, limits: { maxClientErrorLogsPerSecond: 3 } });
    const N = 30;
    for (let i = 0; i < N; i++) expect((await fetch(`${url}/nowhere`)).status).toBe(404);
    const counted = () => cap.lines.filter((l) => l['code'] === 'client_errors_unlogged').reduce((n, l) => n + (l['unlogged'] as number), 0);
    const logged = () => cap.lines.filter((l) => l.msg === 'request refused').length;
    await cap.waitFor(() => logged() + counted() >= N);
    expect(logged() + counted()).toBe(N);
    expect(logged()).toBeLessThan(N);
  });
});
