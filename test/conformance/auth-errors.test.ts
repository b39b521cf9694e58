/**
 * A request without the API key, or with a wrong one, is refused 401 with the
 * API's error body: `type: invalid_request_error`, `code: invalid_api_key`
 * ("Incorrect API key provided…", as the API answers a wrong key; seen in
 * public client reports such as continuedev/continue#10294), over HTTP and
 * at the WebSocket upgrade. The body was `authentication_error` /
 * `unauthorized`, codes the API does not send.
 */
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

async function post(url: string, headers: Record<string, string>): Promise<{ status: number; json: Record<string, any> }> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify({ model: 'm', input: 'hi' }) });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

/** A WebSocket upgrade's refusal: its status and JSON body. */
function upgrade(port: number, headers: Record<string, string>): Promise<{ status: number; json: Record<string, any> }> {
  return new Promise((resolve, reject) => {
    const req = request({
      port,
      host: '127.0.0.1',
      path: '/v1/responses',
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
    });
    req.on('upgrade', () => reject(new Error('upgraded')));
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(body) as Record<string, any> }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('API key refusals', () => {
  it('HTTP and the WebSocket upgrade: 401, invalid_request_error, invalid_api_key, without the key or with a wrong one', async () => {
    const { url, port } = await testServer({ apiKeys: ['key-a'] });
    for (const headers of [{}, { Authorization: 'Bearer wrong' }] as Array<Record<string, string>>) {
      for (const r of [await post(url, headers), await upgrade(port, headers)]) {
        expect(r.status).toBe(401);
        expect(r.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key', param: null });
        expect(typeof r.json['error']['message']).toBe('string');
      }
    }
    expect((await post(url, { Authorization: 'Bearer key-a' })).status).toBe(200);
  });
});
