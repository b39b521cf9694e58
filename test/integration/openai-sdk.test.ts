/**
 * The official `openai` npm SDK (6.49, pinned) as a real client of the HTTP
 * baseline and of WebSocket mode. Over HTTP: create (JSON and SSE), the
 * `responses.stream()` helper, retrieve, delete, not-found errors, and a
 * stored tool loop chained with `previous_response_id`. Over WebSocket
 * mode: `ResponsesWS` drives a tool loop on one socket with `store:false`,
 * so every continuation can only have been served from the connection
 * cache — and the server's records prove it.
 *
 * The SDK is used exactly as its users would: no custom fetch, no patched
 * parsers. The long-lived protocol through the SDK: its beta `ResponsesWS`
 * (test/clients/openai-beta-inject.test.ts) and long-lived over HTTP
 * (test/conformance/sdk-long-lived-http.test.ts).
 */
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import type { FunctionTool, Response, ResponseInputItem, ResponseStreamEvent, ResponsesServerEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { testServer } from '../helpers/server.js';

const API_KEY = 'test-key';

async function sdkServer() {
  const ctx = await testServer({ apiKeys: [API_KEY] });
  const client = new OpenAI({ baseURL: `${ctx.url}/v1`, apiKey: API_KEY, maxRetries: 0 });
  return { ...ctx, client };
}

function expectIntegerUsage(r: Response): void {
  const u = r.usage;
  expect(u).toBeTruthy();
  for (const n of [u!.input_tokens, u!.output_tokens, u!.total_tokens, u!.input_tokens_details.cached_tokens, u!.output_tokens_details.reasoning_tokens]) {
    expect(Number.isInteger(n)).toBe(true);
  }
  expect(u!.output_tokens).toBeGreaterThan(0);
  expect(u!.total_tokens).toBe(u!.input_tokens + u!.output_tokens);
}

const shellTool: FunctionTool = {
  type: 'function',
  name: 'exec_command',
  description: 'Run a shell command and return its output.',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
  strict: false,
};

const weatherTools: FunctionTool[] = [
  {
    type: 'function',
    name: 'get_weather',
    description: 'Current weather for a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    strict: false,
  },
  {
    type: 'function',
    name: 'get_time',
    description: 'Current time in a time zone.',
    parameters: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] },
    strict: false,
  },
];

function functionCalls(r: Response) {
  return r.output.filter((i) => i.type === 'function_call');
}

/** Terminal and error events of a `ResponsesWS`, one at a time, in order (never a sleep). */
class WsTurns {
  private readonly queue: Array<{ ok: true; e: ResponsesServerEvent } | { ok: false; err: Error }> = [];
  private wake: (() => void) | null = null;
  readonly events: ResponsesServerEvent[] = [];
  readonly closed: Promise<number>;

  constructor(readonly ws: ResponsesWS) {
    ws.on('event', (e) => {
      this.events.push(e);
      if (e.type === 'response.completed' || e.type === 'response.failed' || e.type === 'response.incomplete') this.push({ ok: true, e });
    });
    ws.on('error', (err) => this.push({ ok: false, err }));
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
  }

  private push(x: (typeof this.queue)[number]): void {
    this.queue.push(x);
    this.wake?.();
  }

  /** The next response's terminal event; an `error` event rejects. */
  async next(): Promise<Response> {
    while (this.queue.length === 0) await new Promise<void>((resolve) => (this.wake = resolve));
    this.wake = null;
    const x = this.queue.shift()!;
    if (!x.ok) throw x.err;
    return (x.e as Extract<ResponsesServerEvent, { type: 'response.completed' }>).response;
  }
}

describe('openai SDK over HTTP + SSE', () => {
  it('create (non-stream) returns a completed Response with output text and integer usage', async () => {
    const { client } = await sdkServer();
    const r = await client.responses.create({ model: 'sim-model', input: 'Tell me about long-lived responses.' });
    expect(r.object).toBe('response');
    expect(r.id).toMatch(/^resp_/);
    expect(r.status).toBe('completed');
    expect(r.model).toBe('sim-model');
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.output_text).toContain('You said');
    expectIntegerUsage(r);
  });

  it('create with stream:true yields response.created first and response.completed last, numbered from 0', async () => {
    const { client } = await sdkServer();
    const stream = await client.responses.create({ model: 'sim-model', input: 'Stream me something.', stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    expect(events[0]!.type).toBe('response.created');
    const last = events.at(-1)!;
    expect(last.type).toBe('response.completed');
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    const done = last as Extract<ResponseStreamEvent, { type: 'response.completed' }>;
    const message = done.response.output.find((i) => i.type === 'message');
    expect(message?.type === 'message' && message.content[0]?.type === 'output_text' ? message.content[0].text : null).toBe(deltas.join(''));
    expectIntegerUsage(done.response);
  });

  it('llr:timing goes only to SSE clients that opt in (the SDK gets the standard stream)', async () => {
    const { url } = await sdkServer();
    const frames = async (headers: Record<string, string>) => {
      const res = await fetch(`${url}/v1/responses`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}`, ...headers },
        body: JSON.stringify({ model: 'sim-model', input: 'hi', stream: true }),
      });
      const text = await res.text();
      return text
        .split('\n\n')
        .filter((f) => f !== '')
        .map((f) => {
          const data = f.split('\n').find((l) => l.startsWith('data: '))!.slice(6);
          return data === '[DONE]' ? data : (JSON.parse(data) as { type: string }).type;
        });
    };
    expect((await frames({ 'X-LLR-Timing': '1' })).slice(-3)).toEqual(['response.completed', 'llr:timing', '[DONE]']);
    const plain = await frames({});
    expect(plain.slice(-2)).toEqual(['response.completed', '[DONE]']);
    expect(plain).not.toContain('llr:timing');
  });

  it('the responses.stream() helper gives text deltas and a final response', async () => {
    const { client } = await sdkServer();
    const stream = client.responses.stream({ model: 'sim-model', input: 'Use the helper.' });
    const deltas: string[] = [];
    let snapshot = '';
    stream.on('response.output_text.delta', (e) => {
      deltas.push(e.delta);
      snapshot = e.snapshot;
    });
    const final = await stream.finalResponse();
    expect(final.status).toBe('completed');
    expect(deltas.length).toBeGreaterThan(1);
    expect(final.output_text).toBe(deltas.join(''));
    expect(snapshot).toBe(final.output_text);
    expectIntegerUsage(final);
  });

  it('retrieve returns a stored response; delete removes it; unknown ids are not found', async () => {
    const { client } = await sdkServer();
    const created = await client.responses.create({ model: 'sim-model', input: 'Remember this.' });
    const got = await client.responses.retrieve(created.id);
    expect(got.id).toBe(created.id);
    expect(got.status).toBe('completed');
    expect(got.output_text).toBe(created.output_text);

    await expect(client.responses.retrieve('resp_doesnotexist')).rejects.toMatchObject({ status: 404 });
    await expect(client.responses.retrieve('resp_doesnotexist')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(
      client.responses.create({ model: 'sim-model', input: 'more', previous_response_id: 'resp_doesnotexist' }),
    ).rejects.toMatchObject({ status: 400, code: 'previous_response_not_found', param: 'previous_response_id' });

    await client.responses.delete(created.id);
    await expect(client.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
  });

  it('store:false responses cannot be retrieved', async () => {
    const { client } = await sdkServer();
    const r = await client.responses.create({ model: 'sim-model', input: 'Forget this.', store: false });
    expect((r as unknown as { store: boolean }).store).toBe(false);
    await expect(client.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
  });

  it('a multi-step tool loop chained with previous_response_id (store:true)', async () => {
    const { client, server } = await sdkServer();
    const answered: string[] = [];
    let r = await client.responses.create({
      model: 'sim-model',
      input: 'Use get_weather and get_time for Paris.',
      tools: weatherTools,
      parallel_tool_calls: false,
    });
    const chain = [r];
    while (functionCalls(r).length > 0) {
      const outputs: ResponseInputItem[] = functionCalls(r).map((c) => {
        answered.push(c.name);
        expect(() => JSON.parse(c.arguments) as unknown).not.toThrow();
        return { type: 'function_call_output', call_id: c.call_id, output: `${c.name}: fine` };
      });
      r = await client.responses.create({ model: 'sim-model', previous_response_id: r.id, input: outputs, tools: weatherTools, parallel_tool_calls: false });
      expect(r.previous_response_id).toBe(chain.at(-1)!.id);
      chain.push(r);
      expect(chain.length).toBeLessThan(6);
    }
    expect(answered).toEqual(['get_weather', 'get_time']);
    expect(chain).toHaveLength(3);
    expect(r.status).toBe('completed');
    expect(r.output_text).toContain('Called 2 tools');
    expect(r.output_text).toContain('get_weather: fine');
    expectIntegerUsage(r);

    const records = chain.map((c) => server.services.records.get(c.id)!);
    expect(records.map((rec) => rec.protocol)).toEqual(['http', 'http', 'http']);
    // The baseline: every continuation reloads its chain from the store and re-renders it all.
    for (const rec of records.slice(1)) expect(rec.counters).toMatchObject({ store_hydrations: 1, render_full: 1 });
  });
});

describe('openai SDK ResponsesWS over WebSocket mode', () => {
  it('drives a tool loop on one socket; continuations are served from the connection cache', async () => {
    const { client, server } = await sdkServer();
    const ws = new ResponsesWS(client);
    const turns = new WsTurns(ws);
    const base = { model: 'sim-model', tools: [shellTool], parallel_tool_calls: false, store: false };
    ws.send({ type: 'response.create', ...base, input: 'Please run these:\n$ echo alpha\n$ echo beta' });

    const chain: Response[] = [];
    const ran: string[] = [];
    for (let r = await turns.next(); ; r = await turns.next()) {
      expect(r.status).toBe('completed');
      if (chain.length > 0) expect(r.previous_response_id).toBe(chain.at(-1)!.id);
      chain.push(r);
      const calls = functionCalls(r);
      if (calls.length === 0) break;
      expect(chain.length).toBeLessThan(6);
      const input: ResponseInputItem[] = calls.map((c) => {
        const { cmd } = JSON.parse(c.arguments) as { cmd: string };
        ran.push(cmd);
        return { type: 'function_call_output', call_id: c.call_id, output: `${cmd.replace(/^echo /, '')}\n` };
      });
      ws.send({ type: 'response.create', ...base, previous_response_id: r.id, input });
    }
    expect(ran).toEqual(['echo alpha', 'echo beta']);
    expect(chain).toHaveLength(3);
    const final = chain.at(-1)!;
    const text = final.output.flatMap((i) => (i.type === 'message' ? i.content : [])).map((p) => (p.type === 'output_text' ? p.text : '')).join('');
    expect(text).toContain('Ran 2 commands');
    expect(text).toContain('alpha');
    expect(text).toContain('beta');
    expectIntegerUsage(final);
    // Every server event the SDK saw had a type it knows or ignores safely; no error events.
    expect(turns.events.filter((e) => e.type === 'error')).toEqual([]);

    ws.close();
    await turns.closed;
    await server.ws.idle();
    await server.services.postWork.flush();

    const records = server.services.records.list();
    expect(records.filter((rec) => rec.protocol !== 'ws')).toEqual([]);
    const byId = new Map<string, RunRecord>(records.map((rec) => [rec.response_id, rec]));
    const served = chain.map((c) => byId.get(c.id)!);
    expect(served.map((rec) => rec.protocol)).toEqual(['ws', 'ws', 'ws']);
    expect(new Set(served.map((rec) => rec.connection)).size).toBe(1);
    expect(served[0]!.counters['render_full']).toBe(1);
    for (const rec of served.slice(1)) {
      expect(rec.counters['rendered_cache_hits']).toBeGreaterThanOrEqual(1);
      expect(rec.counters['render_full'] ?? 0).toBe(0);
      expect(rec.counters['store_hydrations'] ?? 0).toBe(0);
    }
  });

  it('an unknown previous_response_id arrives as an SDK error event and the socket stays usable', async () => {
    const { client } = await sdkServer();
    const ws = new ResponsesWS(client);
    const turns = new WsTurns(ws);
    ws.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: 'resp_unknown', input: 'continue' });
    const err = await turns.next().then(
      () => null,
      (e: unknown) => e,
    );
    // The nested shape the spec gives a WebSocket error, and the flat fields the SDK's ResponsesServerEvent types (atk118 F2).
    const flat = { code: 'previous_response_not_found', message: expect.stringContaining('resp_unknown'), param: 'previous_response_id' };
    expect(err).toMatchObject({ error: { type: 'error', status: 400, ...flat, error: flat } });
    ws.send({ type: 'response.create', model: 'sim-model', input: 'hello again' });
    expect((await turns.next()).status).toBe('completed');
    ws.close();
    await turns.closed;
  });
});
