/**
 * The side routes' methods (outside attack): `HEAD /health` is answered as
 * `GET` (headers only), and a known path with a method it does not take is
 * 405 `method_not_allowed` with the JSON error body, as on every other route
 * (`/health` and `/llr/stats` said 404 "No route"). Real sockets.
 */
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

function send(port: number, method: string, path: string): Promise<{ status: number; body: string; allow?: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ port, host: '127.0.0.1', method, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, ...(res.headers.allow === undefined ? {} : { allow: res.headers.allow }) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('HEAD of a large answer', () => {
  // Written as it is made (transport/json-out.ts), a large answer has no length before its end: a HEAD is answered
  // with its head alone, nothing made or charged (node:http drops a HEAD's body; it was all stringified for nothing).
  it('is 200 with no body, nothing made or left held', async () => {
    const { url, port } = await testServer();
    const created = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', instructions: 'é'.repeat(1_000_000) }) });
    const { id } = (await created.json()) as { id: string };
    const { status, body } = await send(port, 'HEAD', `/v1/responses/${id}`);
    expect({ status, body }).toEqual({ status: 200, body: '' });
    expect(JSON.parse((await send(port, 'GET', '/health')).body).bytes_held).toBe(0);
    const whole = (await (await fetch(`${url}/v1/responses/${id}`)).json()) as { instructions: string };
    expect(whole.instructions).toBe('é'.repeat(1_000_000));
  });
});

describe('side routes and methods', () => {
  it('HEAD /health is 200 with no body; other methods on /health and /llr/stats are 405 with a JSON error', async () => {
    const { port } = await testServer();
    expect(await send(port, 'HEAD', '/health')).toMatchObject({ status: 200, body: '' });
    for (const [method, path] of [['POST', '/health'], ['DELETE', '/health'], ['POST', '/llr/stats'], ['PUT', '/llr/stats']] as const) {
      const { status, body } = await send(port, method, path);
      expect(status, `${method} ${path}`).toBe(405);
      expect(JSON.parse(body)).toMatchObject({ error: { code: 'method_not_allowed', type: 'invalid_request_error', param: null } });
    }
  });
});

describe('405 names the methods the route takes', () => {
  it('in an Allow header (RFC 9110 §15.5.6: a 405 MUST carry one), on every route, the demo routes too', async () => {
    const { port } = await testServer();
    const cases = [
      ['POST', '/health', 'GET, HEAD'],
      ['PUT', '/llr/stats', 'GET, HEAD'],
      ['POST', '/llr/runs', 'GET, HEAD'],
      ['DELETE', '/llr/runs/x', 'GET, HEAD'],
      ['PUT', '/v1/responses', 'POST'],
      ['GET', '/v1/responses/compact', 'POST'],
      ['GET', '/v1/responses/input_tokens', 'POST'],
      ['OPTIONS', '/v1/responses/resp_x/append', 'POST'],
      ['GET', '/v1/responses/resp_x/cancel', 'POST'],
      ['POST', '/v1/responses/resp_x/input_items', 'GET, HEAD'],
      ['PATCH', '/v1/responses/resp_x', 'GET, HEAD, DELETE'],
      ['POST', '/demo', 'GET, HEAD'],
      ['PUT', '/demo/demo.js', 'GET, HEAD'],
      ['POST', '/demo/api/config', 'GET, HEAD'],
      ['GET', '/demo/api/races', 'POST'],
      ['GET', '/demo/api/races/rabc/step', 'POST'],
    ] as const;
    for (const [method, path, allow] of cases) {
      const { status, body, allow: header } = await send(port, method, path);
      expect(status, `${method} ${path}`).toBe(405);
      expect(header, `${method} ${path}`).toBe(allow);
      expect(JSON.parse(body)).toMatchObject({ error: { code: 'method_not_allowed', type: 'invalid_request_error', param: null } });
    }
  });
});

describe('HEAD on every GET route', () => {
  it('is answered as GET with no body (RFC 9110 §9.3.2): the status GET gets, errors included', async () => {
    const { port } = await testServer();
    for (const path of ['/llr/stats', '/llr/runs', '/llr/runs/nope', '/v1/responses/resp_nope', '/v1/responses/resp_nope/input_items', '/demo/api/config']) {
      const get = await send(port, 'GET', path);
      const head = await send(port, 'HEAD', path);
      expect(head.status, `HEAD ${path}`).toBe(get.status);
      expect(head.body, `HEAD ${path}`).toBe('');
    }
  });
});

describe('an unknown response id in the path', () => {
  it('is echoed cut to 100 characters in the 404, on GET, DELETE and input_items as on cancel', async () => {
    const { port } = await testServer();
    const id = 'z'.repeat(6000);
    for (const [method, path] of [['GET', `/v1/responses/${id}`], ['DELETE', `/v1/responses/${id}`], ['GET', `/v1/responses/${id}/input_items`], ['POST', `/v1/responses/${id}/cancel`]] as const) {
      const { status, body } = await send(port, method, path);
      expect(status, method + ' ' + path.slice(-12)).toBe(404);
      const { error } = JSON.parse(body) as { error: { code: string; message: string } };
      expect(error.code).toBe('response_not_found');
      expect(error.message.length).toBeLessThan(200);
    }
  });
});

describe('GET /llr/runs answers', () => {
  // A page of up to 1,000 run records (~2 KB each) was written in one piece and not counted against
  // --max-server-bytes, where a retrieve or an input_items page is (outside attack).
  it('are charged to the server-wide byte budget as a retrieve is: a large page past it is 503 server_busy, a small one is answered', async () => {
    const { port, url } = await testServer({ limits: { maxServerBytes: 64 * 1024 } });
    // ~2 KB a record: a page of 150 is past the 256 K characters under which an answer is written in one go, uncharged.
    for (let i = 0; i < 150; i++) {
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', max_output_tokens: 16 }) });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const big = await send(port, 'GET', '/llr/runs?limit=1000');
    expect(big.status).toBe(503);
    expect(JSON.parse(big.body)).toMatchObject({ error: { code: 'server_busy' } });
    const small = await send(port, 'GET', '/llr/runs?limit=5');
    expect(small.status).toBe(200);
    const page = JSON.parse(small.body) as { data: Array<{ response_id: string }>; has_more: boolean };
    expect(page.data).toHaveLength(5);
    expect(page.has_more).toBe(true);
    const one = await send(port, 'GET', `/llr/runs/${page.data[0]!.response_id}`);
    expect(one.status).toBe(200);
    expect(JSON.parse(one.body)).toEqual(page.data[0]);
    // Released: nothing is left held once the answers have left.
    expect(JSON.parse((await send(port, 'GET', '/health')).body).bytes_held).toBe(0);
  });

  it('are the same JSON as before, large pages too', async () => {
    const { server, port, url } = await testServer();
    for (let i = 0; i < 60; i++) await (await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', max_output_tokens: 16 }) })).arrayBuffer();
    const big = await send(port, 'GET', '/llr/runs?limit=1000');
    expect(big.status).toBe(200);
    expect(big.body).toBe(JSON.stringify(server.services.records.page({ owner: null, limit: 1000, order: 'desc', after: null })));
  });
});
