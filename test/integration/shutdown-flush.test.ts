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
import WebSocket from 'ws';
import { scriptPolicy } from '../../src/model/policies.js';
import type { Model, ModelEvent } from '../../src/model/types.js';
import type { LlrServer } from '../../src/server.js';
import { wsCloseTimeout } from '../../src/transport/ws.js';
import { captureLogger, dechunk } from '../helpers/raw-http.js';
import { SseStream } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

/** A raw peer on a long-lived WebSocket: the upgrade sent and its answer read; then it only reads (no frame back). */
async function upgradedPeer(port: number): Promise<{ closed: Promise<unknown>; got: () => Buffer }> {
  const peer = connect(port, '127.0.0.1');
  peer.on('error', () => {});
  let got = Buffer.alloc(0);
  peer.on('data', (c: Buffer) => (got = Buffer.concat([got, c])));
  const closed = once(peer, 'close');
  peer.write(
    'GET /v1/responses?protocol=long-lived HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  while (!got.includes('\r\n\r\n')) await once(peer, 'data');
  return { closed, got: () => got };
}

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
    const chunks: Buffer[] = [];
    const closed = once(client, 'close');
    client.write(`POST /v1/responses/${done.response.id}/cancel HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n`);
    // The run has ended: its cancel's answer is being written, slice by slice, to a client that has not read yet.
    await stream.next('response.cancelled');
    const sessions = (server.httpTransport as unknown as { sessions: { shutdown: () => Promise<void> } }).sessions;
    const shutdown = sessions.shutdown.bind(sessions);
    sessions.shutdown = async () => {
      await shutdown();
      client.on('data', (c: Buffer) => chunks.push(c));
      client.resume();
    };
    await server.close();
    await closed;
    // A JSON answer written as it is made (chunked): all of it arrived, its last chunk too, and it is the cancelled
    // Response with all its instructions.
    const all = Buffer.concat(chunks);
    const headEnd = all.indexOf('\r\n\r\n') + 4;
    const head = all.subarray(0, headEnd).toString('latin1');
    expect(head.slice(0, 12)).toBe('HTTP/1.1 200');
    expect(head).toMatch(/transfer-encoding: chunked/i);
    expect(all.subarray(-5).toString('latin1')).toBe('0\r\n\r\n');
    const response = JSON.parse(dechunk(all.subarray(headEnd))) as { status: string; instructions: string };
    expect(response.status).toBe('cancelled');
    expect(response.instructions.length).toBe(8_000_000);
  });
});

/**
 * A model whose call streams `hello` and then waits for its run's end (`gate`), or asks for a tool call, so its run
 * pauses (`call`); `started` resolves once it is called: the run is in flight.
 */
function heldModel(kind: 'gate' | 'call'): { model: Model; started: Promise<void> } {
  let start!: () => void;
  const started = new Promise<void>((resolve) => (start = resolve));
  const model: Model = {
    async *sample(_req, signal): AsyncIterable<ModelEvent> {
      start();
      if (kind === 'call') {
        yield { type: 'call.start', name: 'lookup', call_id: 'call_a' };
        yield { type: 'args.delta', delta: '{"q":"a"}' };
        yield { type: 'call.end' };
        return;
      }
      yield { type: 'message.start' };
      yield { type: 'text.delta', delta: 'hello' };
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    },
  };
  return { model, started };
}

interface Seen {
  type: string;
  reason?: string;
  lane?: string;
}

/** A WebSocket client that reads nothing (its socket paused) until `read()`; keeps each event's type, end reason and lane. */
async function pausedSocket(url: string, query: string): Promise<{ ws: WebSocket; events: Seen[]; read(): void; closed: Promise<number> }> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/v1/responses' + query);
  await once(ws, 'open');
  ws.pause();
  const events: Seen[] = [];
  ws.on('message', (data: Buffer) => {
    const e = JSON.parse(data.toString()) as { type: string; stream_id?: string; response?: { llr_incomplete_reason?: string } };
    events.push({ type: e.type, ...(e.response?.llr_incomplete_reason && { reason: e.response.llr_incomplete_reason }), ...(e.stream_id && { lane: e.stream_id }) });
  });
  ws.on('error', () => {});
  const closed = new Promise<number>((resolve) => ws.on('close', (code: number) => resolve(code)));
  return { ws, events, read: () => ws.resume(), closed };
}

/** Runs `after` once every WebSocket session has ended its run (terminal events written), before the sockets close. */
function afterRunsEnd(server: LlrServer, after: () => void): void {
  const sessions = server.ws.sessions;
  const shutdown = sessions.shutdown.bind(sessions);
  sessions.shutdown = async () => {
    await shutdown();
    after();
  };
}

describe('shutdown: a connection accepted before it, its request not yet read', () => {
  const late = () => {
    const body = JSON.stringify({ model: 'sim-model', input: 'late' });
    return `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  };
  async function acceptedPeer(server: LlrServer, port: number) {
    const accepted = once(server.http, 'connection');
    const peer = connect(port, '127.0.0.1');
    peer.on('error', () => {});
    let got = '';
    peer.on('data', (c: Buffer) => (got += c.toString('latin1')));
    const closed = once(peer, 'close');
    await accepted;
    return { peer, closed, got: () => got };
  }
  const answer = (got: string) => {
    expect(got).toMatch(/^HTTP\/1\.1 503 /);
    expect(got).toMatch(/connection: close/i);
    expect(JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)).error).toMatchObject({ code: 'server_shutting_down' });
  };

  it('whose request reached the server as shutdown began is answered 503 server_shutting_down, not reset (outside attack atk71 F3)', async () => {
    const { server, port } = await testServer();
    const { peer, closed, got } = await acceptedPeer(server, port);
    // Sent, then shutdown at once: the bytes are in the server's socket, not yet read.
    peer.write(late());
    await new Promise<void>((resolve) => peer.once('drain', resolve).write('', () => resolve()));
    await server.close();
    await closed;
    answer(got());
  });

  it('whose request comes while shutdown waits for other work is answered 503 too', async () => {
    const { server, port } = await testServer();
    const { peer, closed, got } = await acceptedPeer(server, port);
    const sessions = (server.httpTransport as unknown as { sessions: { shutdown: () => Promise<void> } }).sessions;
    const shutdown = sessions.shutdown.bind(sessions);
    sessions.shutdown = async () => {
      await shutdown();
      peer.write(late());
      while (!/\r\n\r\n[\s\S]*\}\s*$/.test(got())) await once(peer, 'data');
    };
    await server.close();
    await closed;
    answer(got());
  });
});

describe('shutdown: a WebSocket reader behind gets its terminal event and the close frame before the server is done', () => {
  // Each WebSocket design, with and without a lane: a run in flight (a ws-mode response streaming, a long-lived run
  // paused at its tool call) echoing 3 MB of instructions, to a reader that has read nothing of it.
  const cases = [
    { design: 'long-lived', query: '?protocol=long-lived', kind: 'call' as const },
    { design: 'long-lived, in a lane', query: '?protocol=long-lived', kind: 'call' as const, lane: 'a' },
    { design: 'ws', query: '?protocol=ws', kind: 'gate' as const },
    { design: 'ws, in a lane', query: '?protocol=ws', kind: 'gate' as const, lane: 'b' },
  ];
  it.each(cases)('$design: the run in flight ends server_shutdown, then close 1001', async ({ query, kind, lane }) => {
    const { model, started } = heldModel(kind);
    const { server, url } = await testServer({ model });
    const client = await pausedSocket(url, query);
    client.ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], instructions: 'i'.repeat(3_000_000), ...(lane && { stream_id: lane }) }));
    await started;
    afterRunsEnd(server, () => client.read());
    await server.close();
    // `llr serve` exits once close() has resolved: what the reader has not got by then it never gets (it got 1006
    // and no terminal event). Its close frame answered the server's, so it has read everything before it.
    const terminal = client.events.find((e) => e.type === 'response.incomplete');
    expect(terminal).toEqual({ type: 'response.incomplete', reason: 'server_shutdown', ...(lane && { lane }) });
    expect(client.events.at(-1)).toBe(terminal);
    expect(await client.closed).toBe(1001);
  });

  it('a reader that reads nothing holds shutdown only for --send-stall-timeout-ms, then is dropped (send_stalled)', async () => {
    const { model, started } = heldModel('call');
    const { logger, lines } = captureLogger();
    const { server, url } = await testServer({ model, logger, limits: { sendStallTimeoutMs: 200 } });
    const client = await pausedSocket(url, '?protocol=long-lived');
    client.ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], instructions: 'i'.repeat(3_000_000) }));
    await started;
    await server.close();
    expect(lines.filter((l) => l['code'] === 'send_stalled').length).toBe(1);
    // Dropped: reading now finds the stream cut short, and no close frame.
    client.read();
    expect(await client.closed).toBe(1006);
    expect(client.events.some((e) => e.type === 'response.incomplete')).toBe(false);
  });

  it('a peer that reads everything but never answers the close frame is dropped after --send-stall-timeout-ms (close_timeout)', async () => {
    const { logger, lines } = captureLogger();
    const { server, port } = await testServer({ logger, limits: { sendStallTimeoutMs: 200 } });
    // A raw peer: the upgrade, then it reads and never writes again (no close frame back).
    const peer = await upgradedPeer(port);
    expect(peer.got().toString('latin1')).toMatch(/^HTTP\/1\.1 101/);
    await server.close();
    await peer.closed;
    expect(lines.filter((l) => l['code'] === 'close_timeout').length).toBe(1);
    // The last bytes: the server's close frame, 1001 and its reason.
    const reason = Buffer.from('server shutting down');
    expect(peer.got().subarray(-4 - reason.length)).toEqual(Buffer.concat([Buffer.from([0x88, 2 + reason.length, 0x03, 0xe9]), reason]));
  });

  it('an idle peer that never answers the close frame holds shutdown only LINGER_MS once its bytes have left, not --send-stall-timeout-ms', async () => {
    // A client frozen (Ctrl-Z, a laptop asleep, a peer gone without a FIN) while idle: nothing of it is behind, and
    // waiting for its close answer up to the flag (30 s by default, 10 min here) only delayed the exit past a
    // supervisor's grace period (docker stop: 10 s), where SIGKILL ends it instead (outside attack).
    const { logger, lines } = captureLogger();
    const { server, port } = await testServer({ logger, limits: { sendStallTimeoutMs: 600_000 } });
    const peers = await Promise.all([0, 1, 2].map(() => upgradedPeer(port)));
    await server.close();
    await Promise.all(peers.map((p) => p.closed));
    expect(lines.filter((l) => l['code'] === 'close_timeout').length).toBe(3);
    const reason = Buffer.from('server shutting down');
    for (const p of peers) expect(p.got().subarray(-4 - reason.length)).toEqual(Buffer.concat([Buffer.from([0x88, 2 + reason.length, 0x03, 0xe9]), reason]));
  }, 15_000);

  it("the ws library's own wait for a close's answer (30 s) does not cut a longer --send-stall-timeout-ms short", async () => {
    expect([wsCloseTimeout(0), wsCloseTimeout(200), wsCloseTimeout(45_000), wsCloseTimeout(Infinity)]).toEqual([30_000, 30_000, 45_000, 2 ** 31 - 1]);
    const { server } = await testServer({ limits: { sendStallTimeoutMs: 45_000 } });
    expect((server.ws.wss.options as { closeTimeout?: number }).closeTimeout).toBe(45_000);
    // --ws-close-timeout-ms sets its own part: a peer that never answers a close held its slot 30 s, no flag (atk70 F3).
    expect([wsCloseTimeout(0, 500), wsCloseTimeout(2000, 500), wsCloseTimeout(0, 0)]).toEqual([500, 2000, 0]);
    const { server: short } = await testServer({ limits: { sendStallTimeoutMs: 0, wsCloseTimeoutMs: 250 } });
    expect((short.ws.wss.options as { closeTimeout?: number }).closeTimeout).toBe(250);
  });

  it('--send-stall-timeout-ms 0: shutdown does not wait for a reader behind', async () => {
    const { model, started } = heldModel('call');
    const { server, url } = await testServer({ model, limits: { sendStallTimeoutMs: 0 } });
    const client = await pausedSocket(url, '?protocol=long-lived');
    client.ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], instructions: 'i'.repeat(3_000_000) }));
    await started;
    await server.close();
    client.ws.terminate();
  });
});
