/**
 * The HTTP + SSE baseline on a real socket: SSE framing, JSON responses, the
 * store (retrieve, delete, previous_response_id chains, item_reference, owner
 * isolation, restart survival), and every bad input as an HTTP error body.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { tokenPieces } from '../../src/model/tokenizer.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';
import { sseEvents } from '../../src/client/http.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import type { Response } from '../../src/protocol/objects.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };

function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${url}/v1/responses`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function errorOf(res: globalThis.Response) {
  const body = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string } };
  return { status: res.status, ...body.error };
}

describe('http baseline', () => {
  it('streams SSE: one event per frame, created first, [DONE] after the terminal event', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'hello there' }]) });
    const res = await post(url, { model: 'sim-model', input: 'hi', stream: true }, { 'X-LLR-Timing': '1' });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const raw = await res.text();
    const frames = raw.split('\n\n').filter(Boolean);
    expect(frames.at(-1)).toBe('data: [DONE]');
    const events = frames.slice(0, -1).map((f) => {
      const [ev, data] = f.split('\n');
      const parsed = JSON.parse(data!.slice(6)) as ServerEvent;
      expect(ev).toBe(`event: ${parsed.type}`);
      return parsed;
    });
    expect(events[0]?.type).toBe('response.created');
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const terminal = events.findIndex((e) => e.type === 'response.completed');
    expect(events.slice(terminal + 1).map((e) => e.type)).toEqual(['llr:timing']);
  });

  it('returns the Response as JSON without stream, retrievable and deletable when stored', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'stored answer' }]) });
    const res = await post(url, { model: 'sim-model', input: 'hi' });
    const response = (await res.json()) as Response;
    expect(response).toMatchObject({ object: 'response', status: 'completed', store: true });
    expect(Number.isInteger(response.usage?.input_tokens)).toBe(true);
    const got = (await (await fetch(`${url}/v1/responses/${response.id}`)).json()) as Response;
    expect(got.id).toBe(response.id);
    const del = await fetch(`${url}/v1/responses/${response.id}`, { method: 'DELETE' });
    expect(await del.json()).toEqual({ id: response.id, object: 'response', deleted: true });
    expect((await errorOf(await fetch(`${url}/v1/responses/${response.id}`))).status).toBe(404);
  });

  it('previous_response_id reloads the chain and re-renders the whole context every time', async () => {
    const steps = Array.from({ length: 3 }, (_, i) => ({ calls: [{ name: 'lookup', arguments: { q: `${i}` }, call_id: `call_${i}` }] }));
    const { url, server } = await testServer({ policy: scriptPolicy([...steps, { text: 'done' }]) });
    let prev: Response = (await (await post(url, { model: 'sim-model', input: 'go', tools: [tool] })).json()) as Response;
    for (let i = 0; i < 3; i++) {
      const body = { model: 'sim-model', tools: [tool], previous_response_id: prev.id, input: [{ type: 'function_call_output', call_id: `call_${i}`, output: `r${i}` }] };
      prev = (await (await post(url, body)).json()) as Response;
      const c = server.services.records.get(prev.id)!.counters;
      // The whole history: the first input, and per earlier step a call and its output.
      expect(c).toMatchObject({ store_hydrations: 1, render_full: 1, route_full: 1, items_tokenized: 1 + 2 * (i + 1) });
    }
    expect(prev.output[0]?.type).toBe('message');
  });

  it('a continuation whose stored chain passes the context budget is refused 400 context_length_exceeded before any tokenizing, as WebSocket mode refuses it', async () => {
    // The chain grew 20 KB a step with no bound: every continuation loaded and rendered all of it.
    const steps = Array.from({ length: 4 }, (_, i) => ({ calls: [{ name: 'lookup', arguments: { q: `${i}` }, call_id: `call_${i}` }] }));
    const { url, server } = await testServer({ policy: scriptPolicy([...steps, { text: 'done' }]), limits: { maxContextBytes: 50_000 } });
    let prev = (await (await post(url, { model: 'sim-model', input: 'go', tools: [tool] })).json()) as Response;
    const output = 'x'.repeat(20_000);
    const statuses: number[] = [];
    let refused: Awaited<ReturnType<typeof errorOf>> | null = null;
    for (let i = 0; i < 4 && !refused; i++) {
      const res = await post(url, { model: 'sim-model', tools: [tool], previous_response_id: prev.id, input: [{ type: 'function_call_output', call_id: `call_${i}`, output }] });
      statuses.push(res.status);
      if (res.status === 200) prev = (await res.json()) as Response;
      else refused = await errorOf(res);
    }
    expect(statuses).toEqual([200, 200, 400]);
    expect(refused).toMatchObject({ code: 'context_length_exceeded', param: 'input' });
    expect(refused!.message).toMatch(/--max-context-bytes/);
    // Refused before the render: the refused request tokenized nothing (its record, if any, says so).
    const last = server.services.records.list().at(-1)!;
    expect(last.response_id).toBe(prev.id);
  });

  it('resolves item_reference input items from the store', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'first' }, { text: 'second' }]) });
    const first = (await (await post(url, { model: 'sim-model', input: 'hi' })).json()) as Response;
    const ref = { type: 'item_reference', id: first.output[0]!.id };
    const second = (await (await post(url, { model: 'sim-model', input: [{ role: 'user', content: 'hi' }, ref, { role: 'user', content: 'more' }] })).json()) as Response;
    expect(second.status).toBe('completed');
    expect(server.services.records.get(second.id)!.counters['items_tokenized']).toBe(3);
    const bad = await post(url, { model: 'sim-model', input: [{ type: 'item_reference', id: 'msg_nope' }] });
    expect(await errorOf(bad)).toMatchObject({ status: 400, code: 'item_not_found', param: 'input[0].id' });
  });

  it('max_output_tokens ends the response incomplete with exactly that many output tokens', async () => {
    // 16 is the API's smallest max_output_tokens.
    const text = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
    const { url } = await testServer({ policy: scriptPolicy([{ text }]) });
    const r = (await (await post(url, { model: 'sim-model', input: 'count', max_output_tokens: 16 })).json()) as Response;
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.usage?.output_tokens).toBe(16);
    expect(r.output[0]).toMatchObject({ type: 'message', status: 'incomplete' });
    expect(r.output[0]?.type === 'message' && r.output[0].content[0]?.text).toBe(tokenPieces(text).slice(0, 16).join(''));
  });

  it('an answer of exactly max_output_tokens tokens completes', async () => {
    const text = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen';
    const { url } = await testServer({ policy: scriptPolicy([{ text }]) });
    const r = (await (await post(url, { model: 'sim-model', input: 'count', max_output_tokens: tokenPieces(text).length })).json()) as Response;
    expect(r.status).toBe('completed');
    expect(r.usage?.output_tokens).toBe(tokenPieces(text).length);
  });

  it('usage counts the model\'s hidden reasoning in output_tokens_details.reasoning_tokens', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'hello there', hiddenTokens: 37 }]) });
    const r = (await (await post(url, { model: 'sim-model', input: 'hi' })).json()) as Response;
    const visible = tokenPieces('hello there').length;
    expect(r.usage).toMatchObject({ output_tokens: 37 + visible, output_tokens_details: { reasoning_tokens: 37 } });
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + 37 + visible);
  });

  it('an in-memory store keeps at most --max-memory-store-responses: the oldest is 404, and previous_response_not_found when chained on', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'c' }]), limits: { maxMemoryStoreResponses: 2 } });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(((await (await post(url, { model: 'sim-model', input: `q${i}` })).json()) as Response).id);
    expect((await fetch(`${url}/v1/responses/${ids[0]}`)).status).toBe(404);
    for (const id of ids.slice(1)) expect((await fetch(`${url}/v1/responses/${id}`)).status).toBe(200);
    const chained = await errorOf(await post(url, { model: 'sim-model', input: 'more', previous_response_id: ids[0] }));
    expect(chained).toMatchObject({ status: 400, code: 'previous_response_not_found', param: 'previous_response_id' });
  });

  it('malformed JSON body → 400 invalid_json', async () => {
    const { url } = await testServer();
    expect(await errorOf(await post(url, '{"model":'))).toMatchObject({ status: 400, code: 'invalid_json', type: 'invalid_request_error' });
  });

  it('a body that is not UTF-8 → 400 invalid_json (the bytes are not replaced); a character split across chunks is kept', async () => {
    const { url } = await testServer();
    const bad = Buffer.concat([Buffer.from('{"model":"sim-model","input":"caf'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: bad });
    const e = await errorOf(res);
    expect(e).toMatchObject({ status: 400, code: 'invalid_json', type: 'invalid_request_error' });
    expect(e.message).toMatch(/UTF-8/);
    // A truncated sequence at the very end is refused too.
    const cut = Buffer.concat([Buffer.from('{"model":"sim-model","input":"x"}'), Buffer.from([0xe2, 0x82])]);
    expect(await errorOf(await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: cut }))).toMatchObject({ status: 400, code: 'invalid_json' });
    // Valid multi-byte text sent in chunks that split its characters arrives whole.
    const text = 'é€😀'.repeat(2000);
    const whole = Buffer.from(JSON.stringify({ model: 'sim-model', input: 'hi', instructions: text }));
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < whole.length; i += 7) c.enqueue(whole.subarray(i, i + 7));
        c.close();
      },
    });
    const ok = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: chunks, duplex: 'half' } as RequestInit);
    expect(ok.status).toBe(200);
    // The Response echoes the instructions it was given.
    expect(((await ok.json()) as Response).instructions).toBe(text);
  });

  it('invalid body → 400 naming the param', async () => {
    const { url } = await testServer();
    expect(await errorOf(await post(url, { input: 'x' }))).toMatchObject({ status: 400, code: 'missing_required_parameter', param: 'model' });
  });

  it('unknown previous_response_id → previous_response_not_found (store true and false)', async () => {
    const { url } = await testServer();
    for (const store of [true, false]) {
      const e = await errorOf(await post(url, { model: 'sim-model', input: 'x', store, previous_response_id: 'resp_nope' }));
      expect(e).toMatchObject({ status: 400, code: 'previous_response_not_found', param: 'previous_response_id' });
    }
  });

  it('a continuation whose outputs name unknown calls → 400 unknown_call_id', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ calls: [{ name: 'lookup', arguments: {}, call_id: 'call_1' }] }]) });
    const first = (await (await post(url, { model: 'sim-model', input: 'go', tools: [tool] })).json()) as Response;
    const e = await errorOf(await post(url, { model: 'sim-model', previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: 'call_9', output: 'x' }] }));
    expect(e).toMatchObject({ status: 400, code: 'unknown_call_id', param: 'input[0].call_id' });
  });

  it('a stored response requested with another API key is not found', async () => {
    const { url } = await testServer({ apiKeys: ['alice', 'bob'], policy: scriptPolicy([{ text: 'secret' }]) });
    const mine = (await (await post(url, { model: 'sim-model', input: 'x' }, { Authorization: 'Bearer alice' })).json()) as Response;
    const theirs = await fetch(`${url}/v1/responses/${mine.id}`, { headers: { Authorization: 'Bearer bob' } });
    expect(await errorOf(theirs)).toMatchObject({ status: 404, code: 'response_not_found' });
    const chained = await post(url, { model: 'sim-model', input: 'x', previous_response_id: mine.id }, { Authorization: 'Bearer bob' });
    expect((await errorOf(chained)).code).toBe('previous_response_not_found');
    expect((await errorOf(await post(url, { model: 'sim-model', input: 'x' }))).status).toBe(401);
  });

  it('oversized body → 413', async () => {
    const { url } = await testServer({ limits: { maxFrameBytes: 1000 } });
    expect(await errorOf(await post(url, { model: 'sim-model', input: 'x'.repeat(5000) }))).toMatchObject({ status: 413, code: 'payload_too_large' });
  });

  it('an SSE client that disconnects mid-stream ends the response; usage recorded once', async () => {
    const { url, server } = await testServer({
      policy: scriptPolicy([{ text: 'word '.repeat(500) }]),
      modelSettings: { tokensPerSecond: 2000, ttftBaseMs: 0, prefillTokensPerSecond: Infinity },
    });
    const ac = new AbortController();
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: 'talk', stream: true }),
      signal: ac.signal,
    });
    let id = '';
    try {
      for await (const e of sseEvents(res.body!)) {
        if (e.type === 'response.created') id = e.response.id;
        if (e.type === 'response.output_text.delta') ac.abort();
      }
    } catch {
      // the abort ends the body stream
    }
    await server.httpTransport.idle();
    const rec = server.services.records.get(id)!;
    expect(rec.status).toBe('cancelled');
    expect(rec.usage!.output_tokens).toBeGreaterThan(0);
    expect(rec.usage!.output_tokens).toBeLessThan(500);
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  it('stored responses survive a restart (SQLite file)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llr-store-'));
    const opts = { port: 0, store: join(dir, 'llr.sqlite'), logger: pino({ level: 'silent' }), modelSettings: INSTANT_MODEL };
    try {
      const a = new LlrServer({ ...opts, policy: scriptPolicy([{ text: 'persisted' }]) });
      const { url } = await a.listen();
      const r = (await (await post(url, { model: 'sim-model', input: 'x' })).json()) as Response;
      await a.close();
      const b = new LlrServer(opts);
      const { url: url2 } = await b.listen();
      const got = (await (await fetch(`${url2}/v1/responses/${r.id}`)).json()) as Response;
      await b.close();
      expect(got.output).toEqual(r.output);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('GET /health answers', async () => {
    const { url } = await testServer();
    expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: 'ok' });
  });
});
