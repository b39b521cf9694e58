/**
 * Security defaults for a server on a developer's laptop (issue 7): the
 * server's own records need the key and are scoped to it and paginated; a
 * browser page from another origin cannot drive the server; DNS rebinding
 * (a foreign Host on a loopback server) is refused; POST bodies must be JSON.
 * Requests are written raw so the test controls Host and Origin exactly.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import type { RunRecord } from '../../src/engine/records.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { rawRequest, requestText, upgradeHeaders } from '../helpers/raw-http.js';

const BODY = JSON.stringify({ model: 'sim-model', input: 'hi' });

async function call(port: number, method: string, path: string, headers: Record<string, string> = {}, body = '') {
  const res = await rawRequest(port, requestText(method, path, { Host: `127.0.0.1:${port}`, ...headers }, body));
  return { status: res.status, json: res.body ? (JSON.parse(res.body) as Record<string, unknown> & { error?: Record<string, unknown> }) : {} };
}
const postJson = (port: number, headers: Record<string, string> = {}) => call(port, 'POST', '/v1/responses', { 'Content-Type': 'application/json', ...headers }, BODY);
const texts = (n: number) => scriptPolicy(Array.from({ length: n }, (_, i) => ({ text: `answer ${i}` })));

describe('/llr/* with API keys', () => {
  it('runs, one run and stats need the key; /health does not', async () => {
    const { port } = await testServer({ apiKeys: ['key-a'], policy: texts(1) });
    const made = await postJson(port, { Authorization: 'Bearer key-a' });
    const id = made.json['id'] as string;
    for (const path of ['/llr/runs', `/llr/runs/${id}`, '/llr/stats']) {
      const r = await call(port, 'GET', path);
      expect(r.status, path).toBe(401);
      expect(r.json.error).toMatchObject({ code: 'invalid_api_key', type: 'invalid_request_error' });
      expect((await call(port, 'GET', path, { Authorization: 'Bearer key-a' })).status, path).toBe(200);
    }
    expect((await call(port, 'GET', '/health')).status).toBe(200);
  });

  it("each key sees only its own records; another key's id is not found", async () => {
    const { port } = await testServer({ apiKeys: ['key-a', 'key-b'], policy: texts(3) });
    const a = (await postJson(port, { Authorization: 'Bearer key-a' })).json['id'] as string;
    const b1 = (await postJson(port, { Authorization: 'Bearer key-b' })).json['id'] as string;
    const b2 = (await postJson(port, { Authorization: 'Bearer key-b' })).json['id'] as string;
    const listA = (await call(port, 'GET', '/llr/runs', { Authorization: 'Bearer key-a' })).json as { data: RunRecord[] };
    const listB = (await call(port, 'GET', '/llr/runs', { Authorization: 'Bearer key-b' })).json as { data: RunRecord[] };
    expect(listA.data.map((r) => r.response_id)).toEqual([a]);
    expect(listB.data.map((r) => r.response_id)).toEqual([b2, b1]);
    const other = await call(port, 'GET', `/llr/runs/${a}`, { Authorization: 'Bearer key-b' });
    expect(other.status).toBe(404);
  });
});

describe('/llr/runs pagination and ring', () => {
  it('pages newest first with limit, after and has_more, like OpenAI list objects', async () => {
    const { port } = await testServer({ policy: texts(5) });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await postJson(port)).json['id'] as string);
    const seen: string[] = [];
    const more: boolean[] = [];
    let after = '';
    for (;;) {
      const page = (await call(port, 'GET', `/llr/runs?limit=2${after ? `&after=${after}` : ''}`)).json as { object: string; data: RunRecord[]; has_more: boolean; last_id: string };
      expect(page.object).toBe('list');
      seen.push(...page.data.map((r) => r.response_id));
      more.push(page.has_more);
      if (!page.has_more) break;
      after = page.last_id;
    }
    expect(seen).toEqual([...made].reverse());
    expect(more).toEqual([true, true, false]);
    const asc = (await call(port, 'GET', '/llr/runs?order=asc&limit=1000')).json as { data: RunRecord[] };
    expect(asc.data.map((r) => r.response_id)).toEqual(made);
    // Read as input_items reads its query (protocol/list-query.ts): the same codes, a parameter given once.
    for (const [query, code, param] of [
      ['limit=0', 'integer_below_min_value', 'limit'],
      ['limit=1001', 'integer_above_max_value', 'limit'],
      ['limit=abc', 'invalid_type', 'limit'],
      ['limit=2.5', 'invalid_type', 'limit'],
      ['limit=1e2', 'invalid_type', 'limit'],
      ['limit=1&limit=50', 'invalid_value', 'limit'],
      ['order=up', 'invalid_value', 'order'],
      ['order=asc&order=desc', 'invalid_value', 'order'],
      // A cursor naming no record of the caller's is refused, not answered with an empty last page.
      ['after=resp_never', 'invalid_value', 'after'],
      // An empty cursor names nothing either: refused, as input_items refuses one.
      ['after=', 'invalid_value', 'after'],
      [`after=${made[0]}&after=${made[1]}`, 'invalid_value', 'after'],
    ] as const) {
      const r = await call(port, 'GET', `/llr/runs?${query}`);
      expect(r.status, query).toBe(400);
      expect(r.json.error, query).toMatchObject({ type: 'invalid_request_error', code, param });
    }
  });

  it('keeps only the newest --max-run-records', async () => {
    const { port } = await testServer({ policy: texts(5), limits: { maxRunRecords: 3 } });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await postJson(port)).json['id'] as string);
    const page = (await call(port, 'GET', '/llr/runs')).json as { data: RunRecord[]; has_more: boolean };
    expect(page.data.map((r) => r.response_id)).toEqual(made.slice(2).reverse());
    expect(page.has_more).toBe(false);
  });
});

describe('Origin and Host', () => {
  it('a POST from another origin is refused 403; same origin and --allow-origin are served', async () => {
    const { port } = await testServer({ policy: texts(3) });
    const evil = await postJson(port, { Origin: 'http://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.json.error).toMatchObject({ code: 'origin_not_allowed', type: 'invalid_request_error' });
    expect((await postJson(port, { Origin: 'null' })).status).toBe(403);
    // Same host, another port: another origin.
    expect((await postJson(port, { Origin: `http://127.0.0.1:${port + 1}` })).status).toBe(403);
    // The page llr serves itself (e.g. /demo) is same-origin.
    expect((await postJson(port, { Origin: `http://127.0.0.1:${port}` })).status).toBe(200);
    const allowed = await testServer({ policy: texts(1), allowOrigins: ['http://evil.example'] });
    expect((await postJson(allowed.port, { Origin: 'http://evil.example' })).status).toBe(200);
    const any = await testServer({ policy: texts(1), allowOrigins: ['*'] });
    expect((await postJson(any.port, { Origin: 'https://anything.example' })).status).toBe(200);
  });

  it('a WebSocket upgrade from another origin is refused 403; same origin connects', async () => {
    const { url, port } = await testServer();
    const evil = await rawRequest(port, requestText('GET', '/v1/responses', { ...upgradeHeaders(), Host: `127.0.0.1:${port}`, Origin: 'http://evil.example' }));
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body)).toMatchObject({ error: { code: 'origin_not_allowed' } });
    const s = await RawSocket.connect(url, { headers: { Origin: `http://127.0.0.1:${port}` } });
    s.send({ type: 'response.create', model: 'sim-model', input: 'hi' });
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it('bound to loopback, a foreign Host (DNS rebinding) is refused unless --allow-host names it', async () => {
    const { port } = await testServer();
    const rebound = await call(port, 'GET', '/health', { Host: `attacker.example:${port}` });
    expect(rebound.status).toBe(403);
    expect(rebound.json.error).toMatchObject({ code: 'host_not_allowed' });
    const up = await rawRequest(port, requestText('GET', '/v1/responses', { ...upgradeHeaders(), Host: 'attacker.example' }));
    expect(up.status).toBe(403);
    for (const host of ['localhost', `localhost:${port}`, '127.0.0.1:1', `[::1]:${port}`]) {
      expect((await call(port, 'GET', '/health', { Host: host })).status, host).toBe(200);
    }
    const allowed = await testServer({ allowHosts: ['llr.test'] });
    expect((await call(allowed.port, 'GET', '/health', { Host: `llr.test:${allowed.port}` })).status).toBe(200);
  });
});

describe('Content-Type on POST', () => {
  it('JSON (with or without charset=utf-8) or no header is served; anything else is 415', async () => {
    const { port } = await testServer({ policy: texts(3) });
    const send = (ct: string | null) => call(port, 'POST', '/v1/responses', ct === null ? {} : { 'Content-Type': ct }, BODY);
    expect((await send('application/json')).status).toBe(200);
    expect((await send('application/json; charset=utf-8')).status).toBe(200);
    expect((await send(null)).status).toBe(200);
    for (const ct of ['application/x-www-form-urlencoded', 'text/plain;charset=UTF-8', 'multipart/form-data; boundary=x', 'application/json; charset=latin1']) {
      const r = await send(ct);
      expect(r.status, ct).toBe(415);
      expect(r.json.error).toMatchObject({ code: 'unsupported_media_type', type: 'invalid_request_error' });
    }
  });

  it('a compressed body (Content-Encoding other than identity) is 415, not read as its compressed bytes', async () => {
    const { port } = await testServer({ policy: texts(2) });
    const send = (enc: string) => call(port, 'POST', '/v1/responses', { 'Content-Type': 'application/json', 'Content-Encoding': enc }, BODY);
    for (const enc of ['gzip', 'br', 'deflate, gzip']) {
      const r = await send(enc);
      expect(r.status, enc).toBe(415);
      expect(r.json.error).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Encoding' });
    }
    expect((await send('identity')).status).toBe(200);
  });

  it('every POST that reads a JSON body checks it: compact and input_tokens as a create (compact read a text/plain or gzip body as JSON)', async () => {
    const { port } = await testServer({ policy: texts(2) });
    const body = JSON.stringify({ model: 'sim-model', input: 'hi' });
    for (const path of ['/v1/responses/compact', '/v1/responses/input_tokens']) {
      expect((await call(port, 'POST', path, { 'Content-Type': 'application/json' }, body)).status, path).toBe(200);
      const typed = await call(port, 'POST', path, { 'Content-Type': 'text/plain' }, body);
      expect(typed.status, path).toBe(415);
      expect(typed.json.error).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Type' });
      const gzip = await call(port, 'POST', path, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, body);
      expect(gzip.status, path).toBe(415);
      expect(gzip.json.error).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Encoding' });
    }
  });
});
