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
import { SseStream } from '../helpers/sse-stream.js';
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

  it('a cancel whose answer (the final Response, echoing megabytes) is still being written gets all of it', async () => {
    const { server, port, url } = await testServer({ policy: oneCall() });
    const stream = await SseStream.open(url, { model: 'sim-model', input: 'go', tools: [tool], instructions: 'i'.repeat(8_000_000) });
    const done = await stream.next('response.done');
    const client = connect(port, '127.0.0.1');
    client.on('error', () => {});
    client.pause();
    let head = '';
    let bytes = 0;
    let tail = '';
    const closed = once(client, 'close');
    client.write(`POST /v1/responses/${done.response.id}/cancel HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n`);
    // The run has ended: its cancel's answer is being written, slice by slice, to a client that has not read yet.
    await stream.next('response.cancelled');
    const sessions = (server.httpTransport as unknown as { sessions: { shutdown: () => Promise<void> } }).sessions;
    const shutdown = sessions.shutdown.bind(sessions);
    sessions.shutdown = async () => {
      await shutdown();
      client.on('data', (c: Buffer) => {
        if (head.length < 4096) head += c.toString('latin1');
        bytes += c.length;
        tail = (tail + c.toString('latin1')).slice(-400);
      });
      client.resume();
    };
    await server.close();
    await closed;
    // A JSON answer with a Content-Length: all of it arrived, and it is the cancelled Response.
    const headEnd = head.indexOf('\r\n\r\n') + 4;
    const length = Number(/content-length: (\d+)/i.exec(head.slice(0, headEnd))?.[1]);
    expect(head.slice(0, 12)).toBe('HTTP/1.1 200');
    expect(bytes - headEnd).toBe(length);
    expect(head.slice(headEnd)).toContain('"status":"cancelled"');
    expect(tail.endsWith('}')).toBe(true);
  });
});
