/**
 * The request's host, as RFC 9112 §3.2 defines it, for the loopback Host guard (DNS rebinding): a request with more
 * than one `Host` line is refused 400 (the RFC's MUST; Node keeps the first, so `Host: localhost` then
 * `Host: evil.example` passed the guard while a proxy reading the last saw another host), and a request in
 * absolute form (`GET http://host/path`) is judged by the host in its target, which the RFC says replaces `Host`
 * (it was served by its `Host` header, whatever the target named). HTTP routes and WebSocket upgrades alike. Real
 * sockets, port 0; each exchange reads until the server closes the connection.
 */
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';
import { untilServerCloses, upgradeHeaders } from '../helpers/raw-http.js';

const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
const lines = (h: Record<string, string>) =>
  Object.entries(h)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');

describe('the Host of a request', () => {
  it('more than one Host line is refused 400, over HTTP and at the upgrade', async () => {
    const { port } = await testServer();
    const http = await untilServerCloses(port, 'GET /health HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n');
    expect(statuses(http)).toEqual([400]);
    expect(http).toContain('"code":"invalid_http_request"');
    const ws = await untilServerCloses(port, `GET /v1/responses HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n${lines(upgradeHeaders())}\r\n`);
    expect(statuses(ws)).toEqual([400]);
    expect(ws).toContain('"code":"invalid_http_request"');
  });

  it('an absolute-form target is judged by its own host, not the Host header', async () => {
    const { port } = await testServer();
    const evil = await untilServerCloses(port, 'GET http://evil.example/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    expect(statuses(evil)).toEqual([403]);
    expect(evil).toContain('"code":"host_not_allowed"');
    const ours = await untilServerCloses(port, `GET http://localhost:${port}/health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
    expect(statuses(ours)).toEqual([200]);
    const ws = await untilServerCloses(port, `GET http://evil.example/v1/responses HTTP/1.1\r\nHost: localhost\r\n${lines(upgradeHeaders())}\r\n`);
    expect(statuses(ws)).toEqual([403]);
  });

  it("a fully qualified name's trailing dot names the same host: localhost. is loopback, an allowed host's dotted form is allowed", async () => {
    const { port } = await testServer();
    const dotted = await untilServerCloses(port, `GET /health HTTP/1.1\r\nHost: localhost.:${port}\r\nConnection: close\r\n\r\n`);
    expect(statuses(dotted)).toEqual([200]);
    // One dot only: 'localhost..' is no name of this host.
    const twice = await untilServerCloses(port, `GET /health HTTP/1.1\r\nHost: localhost..:${port}\r\nConnection: close\r\n\r\n`);
    expect(statuses(twice)).toEqual([403]);
    const allowed = await testServer({ allowHosts: ['llr.test'] });
    const a = await untilServerCloses(allowed.port, `GET /health HTTP/1.1\r\nHost: llr.test.\r\nConnection: close\r\n\r\n`);
    expect(statuses(a)).toEqual([200]);
  });

  // Outside conformance tester (atk54 F4): resolved against a base URL, `//x/v1/…` read `x` as a host and routed
  // `/v1/…`: a DELETE deleted the response and an upgrade opened, past a proxy's rule on the `/v1/` prefix.
  it("a path beginning with // is routed as it is: no route, no upgrade, the response left alone; the absolute form still routes by its path", async () => {
    const { port, url } = await testServer();
    const made = (await (await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"model":"m","input":"hi"}' })).json()) as { id: string };
    const del = await untilServerCloses(port, `DELETE //proxy.example/v1/responses/${made.id} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(statuses(del)).toEqual([404]);
    expect(del).toContain(`No route for DELETE //proxy.example/v1/responses/${made.id}.`);
    const post = await untilServerCloses(port, 'POST //v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    expect(statuses(post)).toEqual([404]);
    expect(post).toContain('No route for POST //v1/responses.');
    const ws = await untilServerCloses(port, `GET //x/v1/responses HTTP/1.1\r\nHost: localhost\r\n${lines(upgradeHeaders())}\r\n`);
    expect(statuses(ws)).toEqual([404]);
    expect((await fetch(`${url}/v1/responses/${made.id}`)).status).toBe(200);
    const absolute = await untilServerCloses(port, `GET http://localhost:${port}/v1/responses/${made.id} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(statuses(absolute)).toEqual([200]);
  });

  it('a 404 names the path as sent, and as read when its dot segments were resolved (it named only the latter: atk109 I1)', async () => {
    const { port } = await testServer();
    const dots = await untilServerCloses(port, 'POST /v1/%2e%2e/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    expect(statuses(dots)).toEqual([404]);
    expect(dots).toContain('No route for POST /v1/%2e%2e/responses (read as /responses).');
    // A WebSocket upgrade's alike (atk112 F5).
    const ws = await untilServerCloses(port, `GET /v2/%2e%2e/nope HTTP/1.1\r\nHost: localhost\r\n${lines(upgradeHeaders())}\r\n`);
    expect(statuses(ws)).toEqual([404]);
    expect(ws).toContain('No WebSocket endpoint at /v2/%2e%2e/nope (read as /nope).');
    // A long path keeps its "read as" (the message's own bound cut it off: atk112 F6), each part clipped.
    const long = await untilServerCloses(port, `GET /${'%2e%2e/'.repeat(1100)}nope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(statuses(long)).toEqual([404]);
    expect(long).toMatch(/No route for GET \/(%2e%2e\/)+%2e…? \(read as \/nope\)\./);
    // An absolute-form target is named by its path: its userinfo is not echoed (atk112 I3).
    const absolute = await untilServerCloses(port, `GET http://user:secret@localhost:${port}/nope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(statuses(absolute)).toEqual([404]);
    expect(absolute).toContain('No route for GET /nope.');
    expect(absolute).not.toContain('secret');
  });
});
