/**
 * Every HTTP answer says `X-Content-Type-Options: nosniff`, not only the demo page's files (outside attack): the
 * JSON answers quote what the client sent (a 404 echoes the path, `/demo/<img src=x onerror=…>` included), the demo
 * API's JSON and its race stream, and /v1's answers and streams went without it, so nothing told a browser not to
 * second-guess their type.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

describe('X-Content-Type-Options: nosniff', () => {
  it('is on errors that echo the path, the demo API, a race stream and /v1', async () => {
    const { url } = await testServer();
    const answers = [
      await fetch(`${url}/demo/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E`),
      await fetch(`${url}/nope/%3Cscript%3E`),
      await fetch(`${url}/demo/api/config`),
      await fetch(`${url}/health`),
      await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"model":"m","input":"hi"}' }),
      await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"model":"m","input":"hi","stream":true}' }),
      await fetch(`${url}/demo/api/races`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"workload":"synthetic","tool_calls":1,"speed":"instant"}' }),
    ];
    const statuses = answers.map((r) => r.status);
    expect(statuses).toEqual([404, 404, 200, 200, 200, 200, 200]);
    for (const r of answers) {
      expect(r.headers.get('x-content-type-options'), r.url).toBe('nosniff');
      await r.arrayBuffer();
    }
  });

  it('is on the answer to a request Node cannot parse (written raw on the socket)', async () => {
    const { port } = await testServer();
    const text = await new Promise<string>((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => s.write('GET /%3Cscript%3E HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n'));
      let got = '';
      s.setEncoding('latin1').on('data', (d: string) => (got += d));
      s.on('error', reject);
      s.on('close', () => resolve(got));
    });
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
    expect(text).toMatch(/\r\nX-Content-Type-Options: nosniff\r\n/i);
  });
});
