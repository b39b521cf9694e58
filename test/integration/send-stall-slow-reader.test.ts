/**
 * A reader that reads slowly but steadily is not a stalled one: the send-stall
 * watch (`sendStallTimeoutMs`) counted as progress only bytes this process
 * handed the socket (`bytesWritten`, which includes bytes still queued in the
 * process), so once an SSE stream's backlog of megabytes was queued (the
 * lifecycle events echo the instructions; the run then waits for the stream to
 * drain), a reader taking it at ~1 MB/s saw its connection dropped at a 2 s
 * stall timeout (outside attack). Progress is now what the kernel takes.
 * Real sockets, port 0; the reader paces itself, the test waits for the
 * stream's end or the connection's close.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

describe('a slow but steady reader', () => {
  it('gets the whole SSE stream of a create echoing 8 MiB of instructions (not dropped by the stall watch)', async () => {
    const { port } = await testServer({ limits: { sendStallTimeoutMs: 1500 } });
    const body = JSON.stringify({ model: 'sim-model', input: 'hi', instructions: 'i'.repeat(8 << 20), store: false, stream: true });
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    let received = 0;
    let tail = '';
    // At most one 'data' chunk (64 KiB) every 10 ms: a few MB/s, far slower than loopback.
    socket.on('data', (d: Buffer) => {
      received += d.length;
      tail = (tail + d.toString('latin1')).slice(-64);
      socket.pause();
      setTimeout(() => socket.resume(), 10);
    });
    socket.write(`POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    await new Promise((resolve) => socket.once('close', resolve));
    expect(received).toBeGreaterThan(3 * (8 << 20));
    expect(JSON.stringify(tail)).toMatch(/data: \[DONE\]/);
  }, 30_000);
});
