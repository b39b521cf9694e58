/**
 * The side routes' methods (outside attack): `HEAD /health` is answered as
 * `GET` (headers only), and a known path with a method it does not take is
 * 405 `method_not_allowed` with the JSON error body, as on every other route
 * (`/health` and `/llr/stats` said 404 "No route"). Real sockets.
 */
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

function send(port: number, method: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ port, host: '127.0.0.1', method, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('side routes and methods', () => {
  it('HEAD /health is 200 with no body; other methods on /health and /llr/stats are 405 with a JSON error', async () => {
    const { port } = await testServer();
    expect(await send(port, 'HEAD', '/health')).toEqual({ status: 200, body: '' });
    for (const [method, path] of [['POST', '/health'], ['DELETE', '/health'], ['POST', '/llr/stats'], ['PUT', '/llr/stats']] as const) {
      const { status, body } = await send(port, method, path);
      expect(status, `${method} ${path}`).toBe(405);
      expect(JSON.parse(body)).toMatchObject({ error: { code: 'method_not_allowed', type: 'invalid_request_error', param: null } });
    }
  });
});
