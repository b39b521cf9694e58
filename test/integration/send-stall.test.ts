/**
 * A client that reads nothing keeps its answer in the server's memory: a
 * JSON body, or an SSE stream whose events all came in one burst, before
 * the send-buffer check could trip. `sendStallTimeoutMs` (`llr serve
 * --send-stall-timeout-ms`) drops such a connection once nothing has left
 * for that long (issue 7, found by an outside attack). Real sockets; waits
 * on the server's own connection count reaching zero.
 */
import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { LlrServer } from '../../src/server.js';
import { testServer } from '../helpers/server.js';

const connections = (server: LlrServer) => new Promise<number>((resolve, reject) => server.http.getConnections((err, n) => (err ? reject(err) : resolve(n))));

async function nonReader(port: number, body: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.pause();
  socket.write(`POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  return socket;
}

describe('an answer nobody reads', () => {
  for (const stream of [false, true]) {
    it(`is dropped once nothing leaves for sendStallTimeoutMs (${stream ? 'SSE' : 'JSON'})`, async () => {
      const { server, port } = await testServer({ limits: { sendStallTimeoutMs: 200 } });
      // 8 MiB of instructions: the answer echoes them (three times over SSE), far more than the kernel's socket buffers.
      const body = JSON.stringify({ model: 'sim-model', input: 'hi', instructions: 'i'.repeat(8 << 20), store: false, stream });
      const socket = await nonReader(port, body);
      while ((await connections(server)) === 0) await new Promise((r) => setImmediate(r));
      while ((await connections(server)) > 0) await new Promise((r) => setImmediate(r));
      expect(await connections(server)).toBe(0);
      socket.destroy();
    });
  }
});
