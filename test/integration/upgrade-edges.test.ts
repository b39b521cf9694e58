/**
 * WebSocket handshakes at the edges of HTTP (outside fuzzer atk61): an upgrade without `Host` is refused as every
 * HTTP/1.1 request without it is (it was upgraded, past the Host guard); one that announces a body is refused (its body
 * was read as WebSocket frames); `Expect: 100-continue` gets its 100 before the 101; another method than GET with
 * `Upgrade: websocket` is served as HTTP (it was 405 in the `ws` library's words, no `Allow`).
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';
import { rawConnect, rawRequest, upgradeHeaders } from '../helpers/raw-http.js';

/** The bytes received until `pattern` is seen, on socket `s` after writing `text`. */
function until(s: Socket, text: string, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    s.setEncoding('utf8');
    s.on('data', (chunk: string) => {
      data += chunk;
      if (pattern.test(data)) resolve(data);
    });
    s.on('error', reject);
    s.write(text);
  });
}

describe('WebSocket handshake edges', () => {
  it('an accepted upgrade (101) carries the meta headers every HTTP answer has', async () => {
    const { url } = await testServer();
    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses`);
    const upgraded = new Promise<IncomingMessage>((resolve, reject) => {
      ws.once('upgrade', resolve);
      ws.once('error', reject);
    });
    await new Promise((resolve) => ws.once('open', resolve));
    const res = await upgraded;
    ws.close();
    // Only a refused upgrade had them (outside conformance tester atk115 F1).
    expect(res.statusCode).toBe(101);
    expect(res.headers['x-request-id']).toMatch(/^req_[0-9a-f]{16}$/);
    expect(res.headers['openai-version']).toBe('2020-10-01');
    expect(res.headers['openai-processing-ms']).toMatch(/^\d+$/);
  });

  it('an upgrade without Host is 400, as any HTTP/1.1 request without it', async () => {
    const { port } = await testServer();
    const head = Object.entries(upgradeHeaders())
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const res = await rawRequest(port, `GET /v1/responses HTTP/1.1\r\n${head}\r\n`);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).error).toMatchObject({ code: 'invalid_http_request', message: 'The HTTP/1.1 request has no Host header.' });
    // The meta headers every HTTP answer has (a refused upgrade had none: atk65 F5).
    expect(res.headers).toMatch(/\r\nx-request-id: req_[0-9a-f]{16}\r\n/);
    expect(res.headers).toMatch(/\r\nX-Content-Type-Options: nosniff\r\n/);
    expect(res.headers).toMatch(/\r\nopenai-version: 2020-10-01\r\n/);
    expect(res.headers).toMatch(/\r\nopenai-processing-ms: \d+\r\n/);
  });

  it('an upgrade announcing a body is 400, not a WebSocket reading that body as frames', async () => {
    const { port } = await testServer();
    for (const framing of [{ 'Content-Length': '7' }, { 'Transfer-Encoding': 'chunked' }]) {
      const body = 'Content-Length' in framing ? '{"x":1}' : '7\r\n{"x":1}\r\n0\r\n\r\n';
      const head = Object.entries({ Host: 'localhost', ...upgradeHeaders(), ...framing })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      const res = await rawRequest(port, `GET /v1/responses HTTP/1.1\r\n${head}\r\n${body}`);
      expect(res.status, JSON.stringify(framing)).toBe(400);
      expect(JSON.parse(res.body).error.code).toBe('invalid_websocket_handshake');
    }
  });

  it('Expect: 100-continue on an upgrade gets its 100 before the 101', async () => {
    const { port } = await testServer();
    const s = await rawConnect(port);
    const head = Object.entries({ Host: 'localhost', ...upgradeHeaders(), Expect: '100-continue' })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const got = await until(s, `GET /v1/responses HTTP/1.1\r\n${head}\r\n`, /HTTP\/1\.1 101[^]*\r\n\r\n/);
    expect(got).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 101 /);
    s.destroy();
  });

  it('a POST or HEAD with Upgrade: websocket is served as HTTP: its route answers', async () => {
    const { port } = await testServer();
    const body = JSON.stringify({ model: 'sim-model', input: 'hi' });
    const post = Object.entries({ Host: 'localhost', ...upgradeHeaders(), 'Content-Type': 'application/json', 'Content-Length': String(body.length) })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const created = await rawRequest(port, `POST /v1/responses HTTP/1.1\r\n${post}\r\n${body}`);
    expect(created.status).toBe(200);
    expect(JSON.parse(created.body)).toMatchObject({ object: 'response', status: 'completed' });
    const head = Object.entries({ Host: 'localhost', ...upgradeHeaders() })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    // A HEAD answer has no body: read up to the end of its head.
    const s = await rawConnect(port);
    const refused = await until(s, `HEAD /v1/responses HTTP/1.1\r\n${head}\r\n`, /\r\n\r\n/);
    s.destroy();
    expect(refused).toMatch(/^HTTP\/1\.1 405 /);
    expect(refused).toMatch(/\r\nAllow: POST\r\n/i);
  });
});
