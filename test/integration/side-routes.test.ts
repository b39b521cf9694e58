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
