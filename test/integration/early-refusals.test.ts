/**
 * Early refusals with a body still uploading (issue 7): the server decides
 * 404, 405, 415, 401, 403, 503 and 413 before it reads the body. A client
 * that is still sending must receive the JSON error, not EPIPE/ECONNRESET,
 * with the clients people use: undici's fetch (the openai SDK's transport)
 * and node's http client with `Connection: close` (what the chaos suite
 * and older SDKs send). The body is paced in 64 KiB pieces so the answer is
 * decided while the upload is in flight.
 */
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

const KiB = 1024;
const PIECE = 64 * KiB;

/** A body of `n` bytes, one 64 KiB piece per event-loop turn (still uploading when the server answers). */
function pacedStream(n: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    async pull(c) {
      await new Promise((r) => setImmediate(r));
      const k = Math.min(PIECE, n - sent);
      sent += k;
      if (k <= 0) c.close();
      else c.enqueue(new Uint8Array(k).fill(97));
    },
  });
}

type Outcome = { status: number; code: string } | { failed: string };

async function viaFetch(url: string, method: string, path: string, headers: Record<string, string>, n: number): Promise<Outcome> {
  try {
    const res = await fetch(url + path, { method, headers: { ...headers, 'content-length': String(n) }, body: pacedStream(n), duplex: 'half' } as RequestInit);
    const body = (await res.json()) as { error: { code: string } };
    return { status: res.status, code: body.error.code };
  } catch (err) {
    return { failed: String((err as { cause?: { code?: string } }).cause?.code ?? err) };
  }
}

function viaNodeHttp(url: string, method: string, path: string, headers: Record<string, string>, n: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (o: Outcome) => {
      if (!settled) resolve(o);
      settled = true;
    };
    const req = request(url + path, { method, headers: { ...headers, 'Content-Length': n }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => finish({ status: res.statusCode ?? 0, code: (JSON.parse(Buffer.concat(chunks).toString()) as { error: { code: string } }).error.code }));
      res.on('error', (err) => finish({ failed: `response: ${err.message}` }));
    });
    // An error after the whole answer arrived (the server stops reading a body it refused) is not the client's loss.
    req.on('error', (err: Error & { code?: string }) => finish({ failed: err.code ?? err.message }));
    let sent = 0;
    const step = () => {
      if (req.destroyed) return;
      if (sent >= n) return void req.end();
      const k = Math.min(PIECE, n - sent);
      sent += k;
      // The next piece once this one is handed to the socket: an upload paced by the connection, not a timer.
      req.write(Buffer.alloc(k, 97), () => setImmediate(step));
    };
    step();
  });
}

const json = { 'Content-Type': 'application/json' };
const limit = 1024 * KiB;
const under = 768 * KiB;
const cases: Array<{ name: string; method: string; path: string; headers: Record<string, string>; n: number; status: number; code: string; opts?: object }> = [
  { name: '404 unknown route', method: 'POST', path: '/nope', headers: json, n: under, status: 404, code: 'not_found' },
  { name: '404 DELETE with a body', method: 'DELETE', path: '/v1/responses/a/b', headers: json, n: under, status: 404, code: 'not_found' },
  { name: '405 wrong method', method: 'PUT', path: '/v1/responses', headers: json, n: under, status: 405, code: 'method_not_allowed' },
  { name: '415 wrong content type', method: 'POST', path: '/v1/responses', headers: { 'Content-Type': 'text/plain' }, n: under, status: 415, code: 'unsupported_media_type' },
  { name: '401 no key', method: 'POST', path: '/v1/responses', headers: json, n: under, status: 401, code: 'invalid_api_key', opts: { apiKeys: ['k'] } },
  { name: '403 guard', method: 'POST', path: '/v1/responses', headers: { ...json, Origin: 'http://evil.example' }, n: under, status: 403, code: 'origin_not_allowed' },
  { name: '413 declared too large', method: 'POST', path: '/v1/responses', headers: json, n: 4 * limit, status: 413, code: 'payload_too_large' },
];

describe('an early refusal reaches a client that is still uploading', () => {
  for (const c of cases) {
    it(`${c.name}: undici fetch and node http (Connection: close) both get the JSON error`, async () => {
      const { url } = await testServer({ limits: { maxFrameBytes: limit }, ...c.opts });
      expect(await viaFetch(url, c.method, c.path, c.headers, c.n)).toEqual({ status: c.status, code: c.code });
      expect(await viaNodeHttp(url, c.method, c.path, c.headers, c.n)).toEqual({ status: c.status, code: c.code });
    });
  }

  it('503 past the connection cap, while idle sockets hold the slots', async () => {
    const { url, port } = await testServer({ limits: { maxFrameBytes: limit, maxConnections: 1 } });
    const { rawConnect } = await import('../helpers/raw-http.js');
    await rawConnect(port);
    expect(await viaNodeHttp(url, 'POST', '/v1/responses', json, under)).toEqual({ status: 503, code: 'too_many_connections' });
  });

  it('a GET route reads the body it was sent before answering, so the answer is not lost to a reset', async () => {
    // Found by the chaos fuzzer (seed 7, #586): GET /health with a 4 MB body was answered on its headers and the
    // connection closed over the unread body; the client, still writing, got `write EPIPE` and never the answer.
    const { port } = await testServer({ limits: { maxFrameBytes: limit } });
    const { rawConnect, requestText } = await import('../helpers/raw-http.js');
    for (const path of ['/health', '/llr/stats', '/llr/runs']) {
      const s = await rawConnect(port);
      const n = under;
      let written = 0;
      let answer = '';
      let writtenAtAnswer = -1;
      s.on('data', (c: Buffer) => {
        if (writtenAtAnswer < 0) writtenAtAnswer = written;
        answer += c.toString();
      });
      const ended = new Promise<void>((resolve, reject) => {
        s.once('end', () => resolve());
        s.once('error', reject);
      });
      s.write(requestText('GET', path, { 'Content-Type': 'application/json', 'Content-Length': String(n), Connection: 'close' }));
      // The body in 64 KiB pieces, one per event-loop turn: the server could answer long before the last one.
      const step = () => {
        if (written >= n || s.destroyed) return;
        const k = Math.min(PIECE, n - written);
        written += k;
        s.write(Buffer.alloc(k, 97), () => setImmediate(step));
      };
      step();
      await ended;
      expect(writtenAtAnswer).toBe(n); // no answer before the whole body was sent
      expect(answer).toMatch(/^HTTP\/1\.1 200 /);
      s.destroy();
    }
  });

  it('413 for a body many times a small frame limit (64 KiB, 8 MB sent): the answer, not a reset (atk75 F1)', async () => {
    const small = 64 * KiB;
    const { url } = await testServer({ limits: { maxFrameBytes: small } });
    const n = 8 * 1000 * 1000;
    const expected = { status: 413, code: 'payload_too_large' };
    expect(await viaNodeHttp(url, 'POST', '/v1/responses', json, n)).toEqual(expected);
    expect(await viaFetch(url, 'POST', '/v1/responses', json, n)).toEqual(expected);
  });

  it('a refused chunked upload larger than the limit gets its answer, then the connection closes', async () => {
    const { url } = await testServer({ limits: { maxFrameBytes: limit } });
    // No content-length: undici sends it chunked; the drain stops at the limit and the answer goes out with Connection: close.
    const res = await fetch(`${url}/nope`, { method: 'POST', headers: json, body: pacedStream(3 * limit), duplex: 'half' } as RequestInit);
    expect(res.status).toBe(404);
    expect(res.headers.get('connection')).toBe('close');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });
});

/** Bytes the server sent on `s` until it closed, or, with `until`, until what arrived satisfies it. */
function received(s: import('node:net').Socket, until?: (data: string) => boolean): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    s.on('data', (c: Buffer) => {
      data += c.toString('latin1');
      if (until?.(data)) resolve(data);
    });
    s.on('error', () => {});
    s.on('close', () => resolve(data));
  });
}

describe('Expect: 100-continue: the early checks answer before any 100 Continue (outside attack: 100 Continue, then the refusal)', () => {
  const body = JSON.stringify({ model: 'sim-model', input: 'hi' });
  // Headers only: a client that expects 100-continue holds its body until it gets 100 Continue (or a final answer).
  const refusals: Array<{ name: string; method: string; path: string; headers: Record<string, string>; status: number; code: string; opts?: object }> = [
    { name: '415 wrong content type', method: 'POST', path: '/v1/responses', headers: { 'Content-Type': 'text/plain' }, status: 415, code: 'unsupported_media_type' },
    { name: '415 a content coding', method: 'POST', path: '/v1/responses', headers: { ...json, 'Content-Encoding': 'gzip' }, status: 415, code: 'unsupported_media_type' },
    { name: '413 declared too large', method: 'POST', path: '/v1/responses', headers: { ...json, 'Content-Length': String(4 * limit) }, status: 413, code: 'payload_too_large' },
    { name: '401 no key', method: 'POST', path: '/v1/responses', headers: json, status: 401, code: 'invalid_api_key', opts: { apiKeys: ['k'] } },
    { name: '404 unknown route', method: 'POST', path: '/nope', headers: json, status: 404, code: 'not_found' },
    { name: '405 wrong method', method: 'PUT', path: '/v1/responses', headers: json, status: 405, code: 'method_not_allowed' },
    { name: '401 an append without a key', method: 'POST', path: '/v1/responses/resp_x/append', headers: json, status: 401, code: 'invalid_api_key', opts: { apiKeys: ['k'] } },
  ];
  for (const c of refusals) {
    it(`${c.name}: the final answer first, no 100 Continue, then the connection closes`, async () => {
      const { port } = await testServer({ limits: { maxFrameBytes: limit }, ...c.opts });
      const { rawConnect, requestText } = await import('../helpers/raw-http.js');
      const s = await rawConnect(port);
      const answer = received(s);
      s.write(requestText(c.method, c.path, { 'Content-Length': String(body.length), ...c.headers, Expect: '100-continue' }));
      const text = await answer;
      expect(text).toMatch(new RegExp(`^HTTP/1\\.1 ${c.status} `));
      expect(text).not.toMatch(/100 Continue/);
      expect(text).toMatch(/\r\nConnection: close\r\n/i);
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).error.code).toBe(c.code);
    });
  }

  it('a request that passes them gets 100 Continue, then its body is read and answered on a connection kept alive', async () => {
    const { port } = await testServer({ limits: { maxFrameBytes: limit }, apiKeys: ['k'] });
    const { rawConnect, requestText } = await import('../helpers/raw-http.js');
    const s = await rawConnect(port);
    const headers = { ...json, Authorization: 'Bearer k', 'Content-Length': String(body.length), Expect: '100-continue' };
    const cont = received(s, (t) => t.includes('\r\n\r\n'));
    s.write(requestText('POST', '/v1/responses', headers));
    expect(await cont).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    s.removeAllListeners('data');
    // Until the whole answer (its Content-Length) is in.
    const whole = (t: string) => t.includes('\r\n\r\n') && Buffer.byteLength(t.slice(t.indexOf('\r\n\r\n') + 4), 'latin1') >= Number(/content-length: (\d+)/i.exec(t)?.[1] ?? Infinity);
    const answer = received(s, whole);
    s.write(body);
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).not.toMatch(/\r\nConnection: close\r\n/i);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).status).toBe('completed');
    // The connection is kept: a second request on it is answered.
    s.removeAllListeners('data');
    const health = received(s, (t) => t.includes('"status":"ok"'));
    s.write(requestText('GET', '/health', {}));
    expect(await health).toMatch(/^HTTP\/1\.1 200 /);
    s.destroy();
  });
});
