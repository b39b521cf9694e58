/**
 * A header value holding a control byte sent raw over TCP: NUL (0x00), a bare CR (0x0D not followed by LF) or DEL
 * (0x7F). RFC 9110 §5.5 excludes all three from a field value (CR/NUL MUST be rejected or replaced; DEL is not a
 * field-vchar). Node's parser (llhttp, strict: the server sets no `insecureHTTPParser`) refuses each before any
 * route runs; `answerClientError` (transport/raw-answers.ts) turns that into 400 `invalid_http_request` with the
 * JSON error body and `Connection: close`. Nothing in src does this check itself: this test pins the parser's
 * behaviour (a Node upgrade that relaxed it, or a flag that turned on the lenient parser, fails here), on a plain
 * route, a create and a WebSocket upgrade. Real sockets, port 0; each exchange reads until the server closes.
 */
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';
import { untilServerCloses, upgradeHeaders } from '../helpers/raw-http.js';

const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
const lines = (h: Record<string, string>) =>
  Object.entries(h)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
const body = JSON.stringify({ model: 'sim-model', input: 'hi' });

/** The answer must be exactly one 400 with the JSON error body, the connection then closed by the server. */
function expectRefused(text: string): void {
  expect(statuses(text)).toEqual([400]);
  const [head = '', rest = ''] = text.split('\r\n\r\n');
  expect(head.toLowerCase()).toContain('connection: close');
  const json = JSON.parse(rest);
  expect(json.error.code).toBe('invalid_http_request');
  expect(typeof json.error.message).toBe('string');
}

describe('a header value with a control byte', () => {
  it.each([
    ['NUL', 'a\x00b'],
    ['bare CR', 'a\rb'],
    ['DEL', 'a\x7fb'],
  ])('%s: 400 invalid_http_request with a JSON body, connection closed (GET, POST create, WebSocket upgrade)', async (_name, value) => {
    const { port } = await testServer();
    const bytes = (s: string) => Buffer.from(s, 'latin1');
    expectRefused(await untilServerCloses(port, bytes(`GET /health HTTP/1.1\r\nHost: localhost\r\nX-Probe: ${value}\r\n\r\n`)));
    expectRefused(
      await untilServerCloses(
        port,
        bytes(`POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Probe: ${value}\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
      ),
    );
    expectRefused(await untilServerCloses(port, bytes(`GET /v1/responses HTTP/1.1\r\nHost: localhost\r\n${lines(upgradeHeaders())}X-Probe: ${value}\r\n\r\n`)));
  });
});
