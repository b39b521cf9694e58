/**
 * An `Upgrade` to anything but a WebSocket is ignored, as RFC 9110 §7.8
 * lets a server do, and the request is served as HTTP/1.1. `curl --http2`
 * on an http:// URL sends `Connection: Upgrade, HTTP2-Settings` and
 * `Upgrade: h2c` with every request; Node hands every such request to the
 * server's `upgrade` listener, and the WebSocket transport answered each with
 * 404 "No WebSocket endpoint", `/health` included (outside attack). Real
 * sockets, port 0; each exchange waits for the bytes it expects.
 */
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

const H2C = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n';

/** Writes `parts` in turn on one connection, and resolves with what came back once `done` says it is all there (or the server closed). */
function exchange(port: number, parts: string[], done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const finish = () => {
      socket.destroy();
      resolve(text);
    };
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (done(text)) finish();
    });
    socket.on('close', finish);
    socket.on('error', reject);
    socket.on('connect', () => {
      // Each part in its own write, on its own turn: a body split from its head, a pipelined request after it.
      const next = (i: number) => {
        if (i < parts.length) socket.write(parts[i]!, () => setImmediate(() => next(i + 1)));
      };
      next(0);
    });
  });
}

const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

describe('an Upgrade the server does not take (h2c)', () => {
  it('is served as HTTP/1.1: /health, a retrieve, then a pipelined request on the same connection', async () => {
    const { url, port } = await testServer();
    const created = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi' }) });
    const { id } = (await created.json()) as { id: string };
    const text = await exchange(
      port,
      [`GET /health HTTP/1.1\r\nHost: localhost\r\n${H2C}\r\n`, `GET /v1/responses/${id} HTTP/1.1\r\nHost: localhost\r\n${H2C}Connection: close\r\n\r\n`],
      (t) => statuses(t).length === 2 && t.endsWith('}'),
    );
    expect(statuses(text)).toEqual([200, 200]);
    expect(text).toContain('"status":"ok"');
    expect(text).toContain(`"id":"${id}"`);
    expect(text).not.toContain('No WebSocket endpoint');
  });

  it('reads a body that follows the head in later writes (Content-Length and chunked), then the next request', async () => {
    const { port } = await testServer();
    const body = JSON.stringify({ input: 'hello '.repeat(50_000) });
    const text = await exchange(
      port,
      [
        `POST /v1/responses/input_tokens HTTP/1.1\r\nHost: localhost\r\n${H2C}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 100)}`,
        body.slice(100),
        `POST /v1/responses/input_tokens HTTP/1.1\r\nHost: localhost\r\n${H2C}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n`,
        '0\r\n\r\n',
        'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      ],
      (t) => statuses(t).length === 3 && t.endsWith('}'),
    );
    expect(statuses(text)).toEqual([200, 200, 200]);
    expect(text).toContain('"input_tokens":50005');
    expect(text).toContain('"input_tokens":0');
  });

  it('still upgrades a WebSocket', async () => {
    const { port } = await testServer();
    const text = await exchange(
      port,
      [`GET /v1/responses HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`],
      (t) => t.includes('\r\n\r\n'),
    );
    expect(statuses(text)).toEqual([101]);
  });
  it('waits behind every answer pipelined before it, not only the first (the connection hung)', async () => {
    // 200 tokens/s: the first create (16 tokens) is done well before the second (50 tokens).
    const { port } = await testServer({ modelSettings: { tokensPerSecond: 200, ttftBaseMs: 0, prefillTokensPerSecond: Infinity } });
    const create = (tokens: number) => {
      const body = JSON.stringify({ model: 'm', input: 'hi', max_output_tokens: tokens });
      return `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    };
    const text = await exchange(
      port,
      [create(16) + create(64) + `GET /health HTTP/1.1\r\nHost: localhost\r\n${H2C}\r\nGET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`],
      (t) => statuses(t).length === 4 && t.endsWith('}'),
    );
    expect(statuses(text)).toEqual([200, 200, 200, 200]);
  });

  it('survives a peer that resets while it waits behind an answer still under way (the process crashed)', async () => {
    const { server, url, port } = await testServer({ modelSettings: { tokensPerSecond: 200, ttftBaseMs: 0, prefillTokensPerSecond: Infinity } });
    const body = JSON.stringify({ model: 'm', input: 'hi', max_output_tokens: 64 });
    const client = connect(port, '127.0.0.1');
    client.on('error', () => {});
    const upgraded = once(server.http, 'upgrade') as Promise<[unknown, Socket]>;
    client.write(
      `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        `GET /health HTTP/1.1\r\nHost: localhost\r\n${H2C}\r\n`,
    );
    const [, socket] = await upgraded;
    const closed = new Promise((resolve) => socket.once('close', resolve));
    client.resetAndDestroy();
    await closed;
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
  });
  it('behind an answer still under way, is not cut by the keep-alive timeout that answer set once done', async () => {
    // Each create's first token comes after 1.5 s; the keep-alive timeout is 100 ms (Node keeps a socket ~1 s past it).
    const { port } = await testServer({ limits: { keepAliveTimeoutMs: 100 }, modelSettings: { ttftBaseMs: 1500, tokensPerSecond: Infinity, prefillTokensPerSecond: Infinity } });
    const body = JSON.stringify({ model: 'm', input: 'hi' });
    const create = (extra: string) =>
      `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\n${extra}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const text = await exchange(port, [create('') + create(H2C)], (t) => statuses(t).length === 2 && t.endsWith('}'));
    expect(statuses(text)).toEqual([200, 200]);
  });
  it('refuses a head with more header lines than Node keeps (431): its body is not read as another request', async () => {
    const { port } = await testServer();
    const smuggled = 'GET /llr/stats HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n';
    // 1,500 header lines before Content-Length: Node keeps about the first 1,000 of them.
    const text = await exchange(
      port,
      [`POST /v1/responses/input_tokens HTTP/1.1\r\nHost: localhost\r\n${H2C}Content-Type: application/json\r\n${'X: a\r\n'.repeat(1500)}Content-Length: ${smuggled.length}\r\n\r\n${smuggled}`],
      () => false,
    );
    expect(statuses(text)).toEqual([431]);
    expect(text).toContain('"code":"request_headers_too_large"');
    expect(text).not.toContain('cpu_us');
  });

  it('answers 431 and CONNECT 405 after the answers pipelined before them, not in their place (the create answer was lost)', async () => {
    // A create whose answer is still being planned when the refused request behind it arrives.
    const { port } = await testServer({ modelSettings: { ttftBaseMs: 300, tokensPerSecond: Infinity, prefillTokensPerSecond: Infinity } });
    const create = JSON.stringify({ model: 'm', input: 'hi' });
    const post = `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${create.length}\r\n\r\n${create}`;
    for (const [refused, status] of [
      [`GET /health HTTP/1.1\r\nHost: localhost\r\n${H2C}${'X: a\r\n'.repeat(1000)}\r\n`, 431],
      ['CONNECT example.com:80 HTTP/1.1\r\nHost: localhost\r\n\r\n', 405],
    ] as const) {
      const text = await exchange(port, [post + refused], () => false);
      expect(statuses(text)).toEqual([200, status]);
      expect(text).toContain('"object":"response"');
    }
  });

  it('takes a WebSocket upgrade pipelined behind a create only once the create is answered (its answer went into the WebSocket stream)', async () => {
    const { port } = await testServer({ modelSettings: { ttftBaseMs: 300, tokensPerSecond: Infinity, prefillTokensPerSecond: Infinity } });
    const create = JSON.stringify({ model: 'm', input: 'hi' });
    const text = await exchange(
      port,
      [
        `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${create.length}\r\n\r\n${create}` +
          'GET /v1/responses HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      ],
      (t) => statuses(t).length === 2,
    );
    expect(statuses(text)).toEqual([200, 101]);
    expect(text).toContain('"object":"response"');
  });

  it('answers a malformed request pipelined behind a create after the create (the 400 was read as its answer, which was lost)', async () => {
    const { port } = await testServer({ modelSettings: { ttftBaseMs: 300, tokensPerSecond: Infinity, prefillTokensPerSecond: Infinity } });
    const create = JSON.stringify({ model: 'm', input: 'hi' });
    const text = await exchange(
      port,
      [
        `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${create.length}\r\n\r\n${create}` +
          'GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
      ],
      () => false,
    );
    expect(statuses(text)).toEqual([200, 400]);
    expect(text).toContain('"object":"response"');
    expect(text).toContain('"code":"invalid_http_request"');
    // Refused in its body (a bad chunk size), its own answer queued behind the create's: the create is answered first.
    const chunked = await exchange(
      port,
      [
        `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${create.length}\r\n\r\n${create}` +
          'POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      ],
      () => false,
    );
    expect(statuses(chunked)).toEqual([200, 400]);
    expect(chunked).toContain('"object":"response"');
  });
});
