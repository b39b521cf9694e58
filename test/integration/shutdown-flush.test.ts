/**
 * Shutdown and answers still leaving: a stream whose terminal event (`response.incomplete`, `server_shutdown`) and
 * `data: [DONE]` were written but not yet taken by the kernel reaches a client that reads, instead of being cut off
 * when the server closes its connections (outside attack: a reader behind by a few megabytes of a long-lived run over
 * HTTP echoing 10 MB of instructions lost its terminal event and [DONE] at SIGTERM). A reader that reads nothing holds
 * the shutdown for at most `--send-stall-timeout-ms`.
 */
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const oneCall = () => scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);

/** A raw client that sends a long-lived create over HTTP echoing `instructions` bytes and reads nothing until `read()`. */
function stalledStream(port: number, instructions: number): { socket: Socket; read(): void; text(): string; closed: Promise<unknown> } {
  const socket = connect(port, '127.0.0.1');
  const body = JSON.stringify({ model: 'sim-model', input: 'go', tools: [tool], stream: true, instructions: 'i'.repeat(instructions) });
  socket.write(
    `POST /v1/responses?protocol=long-lived HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  socket.pause();
  // Only the stream's tail is kept (its head is megabytes of the echo).
  let tail = '';
  const closed = once(socket, 'close');
  socket.on('error', () => {});
  return {
    socket,
    read() {
      socket.on('data', (c: Buffer) => (tail = (tail + c.toString('latin1')).slice(-4096)));
      socket.resume();
    },
    text: () => tail,
    closed,
  };
}

describe('shutdown: answers already written leave before the connections close', () => {
  it('a stream behind by megabytes gets its terminal event and [DONE] once its reader reads', async () => {
    const { server, port } = await testServer({ policy: oneCall() });
    const live = (server.httpTransport as unknown as { host: { live: { size: number } } }).host.live;
    // 3 MB echoed by response.created and response.in_progress: far more than the socket buffers take from a
    // reader that has read nothing (the run waits for it, `--send-buffer-bytes`).
    const client = stalledStream(port, 3_000_000);
    while (live.size === 0) await new Promise((resolve) => setImmediate(resolve));
    // The reader starts once every run has ended and written its terminal event, the moment shutdown would close.
    const sessions = (server.httpTransport as unknown as { sessions: { shutdown: () => Promise<void> } }).sessions;
    const shutdown = sessions.shutdown.bind(sessions);
    sessions.shutdown = async () => {
      await shutdown();
      client.read();
    };
    await server.close();
    await client.closed;
    // The tail: the terminal event's end, then [DONE] and the chunked body's end.
    const tail = client.text().slice(-400);
    expect(tail).toContain('"llr_incomplete_reason":"server_shutdown"');
    expect(tail).toMatch(/data: \[DONE\]\n\n\r\n0\r\n\r\n$/);
  });

  it('a reader that reads nothing holds shutdown only until the stall watch drops it (--send-stall-timeout-ms)', async () => {
    const { server, port } = await testServer({ policy: oneCall(), limits: { sendStallTimeoutMs: 200 } });
    const live = (server.httpTransport as unknown as { host: { live: { size: number } } }).host.live;
    const client = stalledStream(port, 3_000_000);
    while (live.size === 0) await new Promise((resolve) => setImmediate(resolve));
    await server.close();
    // Its connection was dropped: reading now finds the stream cut short, then the end.
    client.read();
    await client.closed;
    expect(client.text()).not.toContain('data: [DONE]');
    expect(live.size).toBe(0);
  });
});
