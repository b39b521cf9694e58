/**
 * The size caps that keep one request from holding the event loop
 * (docs/reliability.md, "One request and the event loop"), on real sockets:
 * each gives a 400 with its specific code and param over HTTP, and an
 * `error` event over a WebSocket after which the connection goes on (frames
 * sent behind a large one are handled in order). An unsatisfiable
 * `text.format` schema is a 400 `invalid_json_schema`, not a failed 200. A
 * request at the caps (128 tools whose schemas fill 16 MiB) still completes,
 * its echo intact, over HTTP, SSE and WebSocket; and `/health` answers while
 * such a request is being processed (asserted by order of events: /health
 * answers arrive after the request was sent and before its answer).
 */
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

type ErrorBody = { error: { code: string; param: string | null; type: string } };

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

const tool = (i: number, props = 1, desc = '') => ({
  type: 'function',
  name: `tool_${i}`,
  parameters: { type: 'object', properties: Object.fromEntries(Array.from({ length: props }, (_, j) => [`p${j}`, { type: 'string', description: desc }])) },
});

describe('size caps: HTTP 400 with a specific code and param', () => {
  it.each([
    ['129 tools', { tools: Array.from({ length: 129 }, (_, i) => tool(i)) }, 'array_above_max_length', 'tools'],
    ['17 metadata pairs', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'object_above_max_properties', 'metadata'],
    ['a metadata value of 513 characters', { metadata: { k: 'v'.repeat(513) } }, 'string_above_max_length', 'metadata.k'],
    ['a metadata key of 65 characters', { metadata: { ['k'.repeat(65)]: 'v' } }, 'string_above_max_length', 'metadata'],
    ['an object with 10,001 keys', { x_unknown: Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`k${i}`, 0])) }, 'object_above_max_properties', 'x_unknown'],
  ] as const)('%s', async (_name, extra, code, param) => {
    const { url } = await testServer();
    const { status, json } = await post(url, { model: 'sim-model', input: 'hi', store: false, ...extra });
    expect(status).toBe(400);
    expect((json as ErrorBody).error).toMatchObject({ code, param, type: 'invalid_request_error' });
  });

  it('the limits set by flags: containers, input items and parts, schema nodes', async () => {
    const { url } = await testServer({ limits: { maxJsonContainers: 1_000, maxContextItems: 100, maxSchemaNodes: 50 } });
    const cases: Array<[unknown, string, string]> = [
      [{ x_unknown: Array.from({ length: 1_001 }, () => []) }, 'array_above_max_length', 'x_unknown'],
      [{ input: Array.from({ length: 101 }, () => ({ role: 'user', content: 'a' })) }, 'array_above_max_length', 'input'],
      [{ input: [{ role: 'user', content: Array.from({ length: 100 }, () => ({ type: 'input_text', text: 'a' })) }] }, 'array_above_max_length', 'input'],
      [{ tools: [tool(0, 30), tool(1, 30)] }, 'invalid_tool_schema', 'tools[1].parameters'],
      [{ text: { format: { type: 'json_schema', name: 'o', schema: tool(0, 60).parameters } } }, 'invalid_json_schema', 'text.format.schema'],
    ];
    for (const [extra, code, param] of cases) {
      const { status, json } = await post(url, { model: 'sim-model', input: 'hi', store: false, ...(extra as object) });
      expect(status, code).toBe(400);
      expect((json as ErrorBody).error, JSON.stringify(extra).slice(0, 80)).toMatchObject({ code, param });
    }
    // At the caps, accepted.
    const ok = await post(url, { model: 'sim-model', store: false, input: Array.from({ length: 100 }, () => ({ role: 'user', content: 'a' })), tools: [tool(0, 23), tool(1, 23)] });
    expect(ok.status).toBe(200);
  });

  it.each([
    ['unsatisfiable minItems', { type: 'object', properties: { a: { type: 'array', minItems: 1e9 } }, required: ['a'] }],
    ['an unresolvable $ref', { type: 'object', properties: { a: { $ref: '#/$defs/Missing' } }, required: ['a'] }],
    ['a required self-reference', { type: 'object', properties: { next: { $ref: '#' } }, required: ['next'] }],
  ])('text.format with %s: 400 invalid_json_schema on text.format.schema, not a failed 200', async (_name, schema) => {
    const { url } = await testServer();
    const { status, json } = await post(url, { model: 'sim-model', input: 'hi', store: false, text: { format: { type: 'json_schema', name: 'out', schema } } });
    expect(status).toBe(400);
    expect((json as ErrorBody).error).toMatchObject({ code: 'invalid_json_schema', param: 'text.format.schema', type: 'invalid_request_error' });
  });
});

describe('size caps over a WebSocket', () => {
  it.each(['ws', 'long-lived'] as const)('%s: a >1 MiB frame over a cap gets its error event; the frames behind it are answered in order', async (protocol) => {
    const { url } = await testServer();
    const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
    // Over 1 MiB: parsed in slices, so the small frames sent right behind it wait for it.
    const big = { type: 'response.create', model: 'sim-model', input: 'hi', store: false, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])), instructions: 'x'.repeat(1_500_000) };
    s.send(big);
    s.send({ type: 'response.create', model: 'sim-model', input: 'hello', store: false, text: { format: { type: 'json_schema', name: 'o', schema: { type: 'object', properties: { a: { $ref: '#/x' } }, required: ['a'] } } } });
    s.send({ type: 'response.create', model: 'sim-model', input: 'hello', store: false });
    const first = await s.next('error');
    expect(first.error).toMatchObject({ code: 'object_above_max_properties', param: 'metadata' });
    const second = await s.next('error');
    expect(second.error).toMatchObject({ code: 'invalid_json_schema', param: 'text.format.schema' });
    expect((await s.next('response.completed')).response.status).toBe('completed');
    s.dispose();
  });
});

describe('a request at the caps', () => {
  // 128 tools whose schemas hold 19,456 objects (the cap is 20,000) and ~14.5 MiB of descriptions.
  const desc = 'lorem ipsum dolor sit amet '.repeat(28);
  const tools = Array.from({ length: 128 }, (_, i) => tool(i, 150, desc));
  const body = { model: 'sim-model', input: 'please use tool_7', tools, store: false };

  it('completes over HTTP with its tools echoed, and /health answers while it is processed', async () => {
    const { url } = await testServer();
    const text = JSON.stringify(body);
    expect(text.length).toBeGreaterThan(14 * 1024 * 1024);
    const order: string[] = [];
    const big = post(url, text).then((r) => {
      order.push('big answered');
      return r;
    });
    // /health, one after another, until the big answer is in.
    let answered = 0;
    while (!order.includes('big answered')) {
      const h = await fetch(`${url}/health`);
      expect(h.status).toBe(200);
      await h.text();
      if (!order.includes('big answered')) {
        answered++;
        order.push('health');
      }
    }
    const { status, json } = await big;
    expect(status).toBe(200);
    const r = json as { status: string; tools: Array<{ name: string; parameters: { properties: Record<string, unknown> } }> };
    expect(r.status).toBe('completed');
    expect(r.tools).toHaveLength(128);
    expect(Object.keys(r.tools[127]!.parameters.properties)).toHaveLength(150);
    expect(JSON.stringify(r.tools.map((t) => t.parameters))).toBe(JSON.stringify(tools.map((t) => t.parameters)));
    expect(answered, order.join(' ')).toBeGreaterThanOrEqual(3);
    expect(order.at(-1)).toBe('big answered');
  }, 120_000);

  it('streams over SSE to a reader that reads: every lifecycle event carries the full echo', async () => {
    const { url } = await testServer();
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
    expect(res.status).toBe(200);
    const sse = await res.text();
    const frames = sse.split('\n\n').filter((f) => f.startsWith('event: response.created') || f.startsWith('event: response.completed'));
    expect(frames).toHaveLength(2);
    for (const f of frames) {
      const data = JSON.parse(f.slice(f.indexOf('data: ') + 6)) as { response: { tools: unknown[] } };
      expect(data.response.tools).toHaveLength(128);
    }
    expect(sse.endsWith('data: [DONE]\n\n')).toBe(true);
  }, 120_000);

  it.each(['ws', 'long-lived'] as const)('%s: completes, the events echo every tool', async (protocol) => {
    const { url } = await testServer();
    const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
    s.send({ type: 'response.create', ...body, input: 'hello there' });
    expect((await s.next('response.created')).response.tools).toHaveLength(128);
    const done = await s.next('response.completed');
    expect(done.response.tools).toHaveLength(128);
    expect(JSON.stringify(done.response.tools.map((t) => (t as { parameters: unknown }).parameters))).toBe(JSON.stringify(tools.map((t) => t.parameters)));
    s.dispose();
  }, 120_000);
});
