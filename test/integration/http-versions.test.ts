/**
 * The HTTP version in the request line. This server speaks HTTP/1.x only (RFC 9112): Node's parser also takes
 * `HTTP/0.9`, a version-less request line, and `HTTP/2.0` (a text request line is not HTTP/2, whose frames are
 * binary), and every one of them was served as HTTP/1.1. They are answered 505 with the JSON error body, as Go's
 * net/http and nginx answer them; the HTTP/2 connection preface too (it was a 400 "Pause on PRI/Upgrade").
 * HTTP/1.0 is served, kept alive only when it asks (`Connection: keep-alive`), and its `Upgrade` header is ignored
 * (RFC 9110 §7.8: a server MUST ignore `Upgrade` in an HTTP/1.0 request; RFC 6455 §4.1 asks for HTTP/1.1 or
 * higher): the `ws` library had switched such a request to a WebSocket. Real sockets, port 0; each exchange reads
 * until the server closes the connection.
 */
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';
import { rawConnect, untilServerCloses, upgradeHeaders } from '../helpers/raw-http.js';

const BODY = JSON.stringify({ model: 'm', input: 'hi' });
const create = (version: string, extra = '') =>
  `POST /v1/responses HTTP/${version}\r\nHost: localhost\r\n${extra}Content-Type: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`;
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
const head = (extra: Record<string, string>) =>
  Object.entries(extra)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');

describe('request-line HTTP versions', () => {
  it.each(['2.0', '0.9', '3.0', '2.1', '1.2'])('HTTP/%s is refused 505 with a JSON body, and the connection closed', async (v) => {
    const { port, server } = await testServer();
    const text = await untilServerCloses(port, create(v));
    expect(statuses(text)).toEqual([505]);
    expect(text).toMatch(/\r\nConnection: close\r\n/i);
    expect(text).toContain('"code":"http_version_not_supported"');
    // Nothing was created: the body was not taken for a request.
    expect(server.services.records.list()).toEqual([]);
  });

  it('a request line without a version (HTTP/0.9) is refused 505', async () => {
    const { port } = await testServer();
    const text = await untilServerCloses(port, 'GET /health\r\n\r\n');
    expect(statuses(text)).toEqual([505]);
    expect(text).toContain('"code":"http_version_not_supported"');
  });

  it.each([
    ['a bare LF after the version', 'GET /health HTTP/1.1\nHost: localhost\n\n'],
    ['junk after the version', 'GET /health HTTP/1.1x\r\nHost: localhost\r\n\r\n'],
  ])('%s is a malformed request (400), not a version refused', async (_what, request) => {
    const { port } = await testServer();
    const text = await untilServerCloses(port, request);
    expect(statuses(text)).toEqual([400]);
    expect(text).toContain('"code":"invalid_http_request"');
  });

  it('a HEAD refused by the parser (a malformed chunked body) or by the request timeout is answered without content (outside fuzzer atk88 F3)', async () => {
    // The JSON error body was written after the head: a HEAD answer carries none (RFC 9110 §9.3.2), and Node's client
    // reported a parse error beside the answer.
    const { port } = await testServer({ limits: { requestTimeoutMs: 300 } });
    for (const [request, status] of [
      ['HEAD /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 400],
      ['HEAD /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n', 408],
    ] as const) {
      const text = await untilServerCloses(port, request);
      expect(statuses(text)).toEqual([status]);
      expect(text).toMatch(/\r\nContent-Length: [1-9]\d*\r\n/i);
      expect(text.endsWith('\r\n\r\n')).toBe(true);
    }
    // A GET refused so keeps its body.
    expect(await untilServerCloses(port, 'GET /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')).toContain('"code":"invalid_http_request"');
  });

  it('the HTTP/2 connection preface is refused 505', async () => {
    const { port } = await testServer();
    const text = await untilServerCloses(port, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    expect(statuses(text)).toEqual([505]);
    expect(text).toContain('"code":"http_version_not_supported"');
  });

  it('HTTP/1.0 is served: closed after one answer, or kept alive when it asks', async () => {
    const { port } = await testServer();
    const once = await untilServerCloses(port, `${create('1.0')}GET /health HTTP/1.0\r\n\r\n`);
    expect(statuses(once)).toEqual([200]);
    const kept = await untilServerCloses(port, `${create('1.0', 'Connection: keep-alive\r\n')}GET /health HTTP/1.0\r\n\r\n`);
    expect(statuses(kept)).toEqual([200, 200]);
    expect(kept).toContain('"object":"response"');
    expect(kept).toContain('"status":"ok"');
  });

  it('an HTTP/1.0 request with Transfer-Encoding is answered, then its connection closed (RFC 9112 §6.1)', async () => {
    const { port } = await testServer();
    const body = JSON.stringify({ input: 'hi' });
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const text = await untilServerCloses(
      port,
      `POST /v1/responses/input_tokens HTTP/1.0\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}GET /health HTTP/1.0\r\n\r\n`,
    );
    expect(statuses(text)).toEqual([200]);
    expect(text).toContain('"input_tokens":');
    expect(text).toMatch(/\r\nConnection: close\r\n/i);
  });

  it('an HTTP/1.0 WebSocket upgrade is served as the plain request it is (no 101)', async () => {
    const { port, server } = await testServer();
    const up = head(upgradeHeaders());
    const ws = await untilServerCloses(port, `GET /v1/responses HTTP/1.0\r\nHost: localhost\r\n${up}\r\n`);
    expect(statuses(ws)).toEqual([405]);
    expect(ws).toContain('"code":"method_not_allowed"');
    const health = await untilServerCloses(port, `GET /health HTTP/1.0\r\n${up}\r\n`);
    expect(statuses(health)).toEqual([200]);
    expect(server.ws.wss.clients.size).toBe(0);
  });

  it('an HTTP/2.0 WebSocket upgrade is refused 505', async () => {
    const { port } = await testServer();
    const text = await untilServerCloses(port, `GET /v1/responses HTTP/2.0\r\nHost: localhost\r\n${head(upgradeHeaders())}\r\n`);
    expect(statuses(text)).toEqual([505]);
  });

  it('an HTTP/1.1 WebSocket upgrade still switches', async () => {
    const { port } = await testServer();
    const s = await rawConnect(port);
    s.write(`GET /v1/responses HTTP/1.1\r\nHost: localhost\r\n${head(upgradeHeaders())}\r\n`);
    const [first] = (await once(s, 'data')) as [Buffer];
    expect(first.toString('latin1')).toMatch(/^HTTP\/1\.1 101 /);
  });
});
