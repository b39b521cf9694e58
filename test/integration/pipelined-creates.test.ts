/**
 * Creates pipelined on one HTTP connection start one at a time: a create
 * whose answer waits behind another answer on its connection (Node queues
 * it until that one is done) starts once that answer is done, as a queued
 * WebSocket create starts once the response before it was sent. Before, every
 * pipelined create ran at once, each buffering its stream for a socket it did
 * not have yet: one connection that read nothing, with 50 streaming creates
 * pipelined in one write, held 50 runs and ~68 MB unsent, and four such
 * connections took the server to 1.1 GB of RSS (outside attack). Real
 * sockets, port 0; the waits are on the model's calls and the server's log.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Model, ModelEvent } from '../../src/model/types.js';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

/** A model each of whose calls streams `hello`, then waits for one gate (or its run's abort); `started(n)` resolves at the n-th call. */
function countedGate() {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let calls = 0;
  const waiters = new Map<number, () => void>();
  const started = (n: number) => new Promise<void>((resolve) => (calls >= n ? resolve() : waiters.set(n, resolve)));
  const model: Model = {
    async *sample(_req, signal): AsyncIterable<ModelEvent> {
      calls++;
      waiters.get(calls)?.();
      yield { type: 'message.start' };
      yield { type: 'text.delta', delta: 'hello' };
      await Promise.race([gate, new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
      yield { type: 'message.end' };
    },
  };
  return { model, release, started, calls: () => calls };
}

const create = (body: object, extra = '') => {
  const text = JSON.stringify(body);
  return `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n${extra}\r\n${text}`;
};

describe('creates pipelined on one connection', () => {
  it('start one at a time: the second waits for the first answer, then runs; both answered in order', async () => {
    const cap = captureLogger();
    const gated = countedGate();
    const { url, port, server } = await testServer({ logger: cap.logger, model: gated.model });
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const both = new Promise<void>((resolve, reject) => {
      socket.on('data', (d: Buffer) => {
        text += d.toString('utf8');
        if ((text.match(/data: \[DONE\]/g) ?? []).length === 2) resolve();
      });
      socket.on('error', reject);
    });
    socket.write(create({ model: 'm', input: 'first', stream: true }) + create({ model: 'm', input: 'second', stream: true }, 'Connection: close\r\n'));
    await gated.started(1);
    // Which comes first: the second create's model call (it ran at once), or the server saying it waits.
    const first = await Promise.race([
      gated.started(2).then(() => 'second create started'),
      cap.waitFor((l) => /waits for the answer before it/.test(l.msg)).then(() => 'second create waits'),
    ]);
    expect(first).toBe('second create waits');
    expect(gated.calls()).toBe(1);
    const health = (await (await fetch(`${url}/health`)).json()) as { http_in_flight: number };
    expect(health.http_in_flight).toBe(1);
    gated.release();
    await both;
    socket.destroy();
    expect(gated.calls()).toBe(2);
    const ids = [...text.matchAll(/"type":"response\.completed","response":\{"id":"(resp_[0-9a-f]+)"/g)].map((m) => m[1]);
    expect(ids).toHaveLength(2);
    expect(ids[0]).not.toBe(ids[1]);
    // In order: the first answer's stream ends before the second's begins.
    expect(text.indexOf('HTTP/1.1 200', 1)).toBeGreaterThan(text.indexOf('data: [DONE]'));
    await server.services.postWork.flush();
    expect(ids.map((id) => server.services.records.get(id!)?.status)).toEqual(['completed', 'completed']);
  });

  it('a create waiting behind an answer whose client goes away never starts, and leaves nothing in flight', async () => {
    const cap = captureLogger();
    const gated = countedGate();
    const { url, port, server } = await testServer({ logger: cap.logger, model: gated.model });
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.write(create({ model: 'm', input: 'first', stream: true }) + create({ model: 'm', input: 'second', stream: true }));
    await gated.started(1);
    const first = await Promise.race([
      gated.started(2).then(() => 'second create started'),
      cap.waitFor((l) => /waits for the answer before it/.test(l.msg)).then(() => 'second create waits'),
    ]);
    expect(first).toBe('second create waits');
    const cancelled = cap.waitFor((l) => l['status'] === 'cancelled');
    socket.destroy();
    await cancelled;
    await server.httpTransport.idle();
    const health = (await (await fetch(`${url}/health`)).json()) as { http_in_flight: number; bytes_held: number };
    expect(health.http_in_flight).toBe(0);
    expect(health.bytes_held).toBe(0);
    expect(gated.calls()).toBe(1);
  });
});

describe('creates waiting on one connection are bounded', () => {
  it('past --max-queued-creates a pipelined create is answered 429 queue_full in turn, never run', async () => {
    // Unbounded, a peer pipelining small creates behind one slow answer had every one wait, writing nothing, so Node
    // never paused the connection: 200,000 creates of 60 bytes on one connection, 930 MB of RSS (outside attack).
    const cap = captureLogger();
    const gated = countedGate();
    const { port, server } = await testServer({ logger: cap.logger, model: gated.model, limits: { maxQueuedCreates: 2 } });
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const closed = new Promise<void>((resolve, reject) => {
      socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const four = [1, 2, 3, 4].map((n) => create({ model: 'm', input: `queued ${n}` })).join('');
    socket.write(create({ model: 'm', input: 'first', stream: true }) + four + create({ model: 'm', input: 'last' }, 'Connection: close\r\n'));
    await gated.started(1);
    // All five behind the first were handled: two wait, three were refused (their answers queued behind the stream).
    let refused = 0;
    await cap.waitFor((l) => l['code'] === 'queue_full' && ++refused === 3);
    expect(gated.calls()).toBe(1);
    gated.release();
    await closed;
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
    expect((text.match(/"code":"queue_full"/g) ?? []).length).toBe(3);
    expect(gated.calls()).toBe(3);
    await server.close();
  });
});

describe('shutdown while a pipelined create waits', () => {
  it('ends the stream in flight incomplete, then answers the waiting create 503 server_shutting_down', async () => {
    const cap = captureLogger();
    const gated = countedGate();
    const { port, server } = await testServer({ logger: cap.logger, model: gated.model });
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const closed = new Promise<void>((resolve) => {
      socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
      socket.on('close', () => resolve());
      socket.on('error', () => {});
    });
    socket.write(create({ model: 'm', input: 'first', stream: true }) + create({ model: 'm', input: 'second', stream: true }));
    await gated.started(1);
    await cap.waitFor((l) => /waits for the answer before it/.test(l.msg));
    await server.close();
    await closed;
    expect(text).toContain('"type":"response.incomplete"');
    expect(text).toContain('data: [DONE]');
    expect(text.slice(text.indexOf('data: [DONE]'))).toMatch(/HTTP\/1\.1 503 [^]*"code":"server_shutting_down"/);
    expect(gated.calls()).toBe(1);
  });
});
