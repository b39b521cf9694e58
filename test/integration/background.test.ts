/**
 * Background mode (`background: true`) as the API's clients use it, with the
 * official `openai` SDK on real sockets: a create answered at once
 * (`in_progress`, `background: true`) whose run goes on, polled with
 * `responses.retrieve` until done; a streamed one whose client leaves
 * mid-stream and resumes with `retrieve(id, {stream: true, starting_after})`
 * (the run is not cancelled by the disconnect); `responses.cancel` of one in
 * flight (and again, idempotent). Raw HTTP for the refusals and the bounds:
 * `store: false`, the long-lived protocol, the cap on runs in flight, a bad
 * `starting_after`, events dropped past the per-response bound or the TTL.
 * Runs are held in flight by a model that waits on a gate the test opens:
 * no sleeps. Every run ends once and is billed once.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import type { ServerOptions } from '../../src/server.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { gatedModel } from '../helpers/gated-model.js';
import { parseSse, SseStream } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

async function setup(opts: ServerOptions = {}) {
  const gated = gatedModel();
  const ctx = await testServer({ model: gated.model, ...opts });
  const client = new OpenAI({ baseURL: `${ctx.url}/v1`, apiKey: 'k', maxRetries: 0 });
  const health = async () =>
    (await (await fetch(`${ctx.url}/health`)).json()) as { background_in_flight: number; background_kept_bytes: number; bytes_held: number; http_in_flight: number };
  return { ...ctx, ...gated, client, health };
}

/** Retrieve until the response leaves `queued` / `in_progress` (each poll a real request; no timers). */
async function poll(client: OpenAI, id: string): Promise<OpenAI.Responses.Response> {
  for (let i = 0; i < 500; i++) {
    const r = await client.responses.retrieve(id);
    if (r.status !== 'queued' && r.status !== 'in_progress') return r;
  }
  throw new Error(`response ${id} did not end`);
}

const post = (url: string, body: unknown, query = '') =>
  fetch(`${url}/v1/responses${query}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

describe('background mode', () => {
  it('create answers at once (in_progress, background: true); retrieve polls the run in flight until it completes; billed once', async () => {
    const { client, release, server, health } = await setup();
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    expect(r).toMatchObject({ object: 'response', status: 'in_progress', background: true, store: true });
    // The run is still held by the model: the answer did not wait for it.
    const mid = await client.responses.retrieve(r.id);
    expect(mid).toMatchObject({ id: r.id, status: 'in_progress', background: true });
    expect((await health()).background_in_flight).toBe(1);
    release();
    const done = await poll(client, r.id);
    expect(done).toMatchObject({ id: r.id, status: 'completed', background: true });
    expect(done.output_text).toBe('hello world');
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(r.id)).toBe(1);
    expect(server.services.records.get(r.id)).toMatchObject({ status: 'completed', protocol: 'http' });
    const h = await health();
    expect(h).toMatchObject({ background_in_flight: 0, http_in_flight: 0, bytes_held: 0 });
    // Its events are kept for a resume (the TTL), counted against the server-wide bound.
    expect(h.background_kept_bytes).toBeGreaterThan(1000);
  });

  it('a streamed background response survives its client leaving mid-stream; retrieve(stream, starting_after) resumes it gapless to the end', async () => {
    const { client, release, server } = await setup();
    const stream = await client.responses.create({ model: 'm', input: 'hi', background: true, stream: true });
    let id = '';
    let last = -1;
    for await (const e of stream) {
      expect(e.sequence_number).toBe(last + 1);
      last = e.sequence_number;
      if (e.type === 'response.created') {
        id = e.response.id;
        expect(e.response.background).toBe(true);
      }
      // Leave after the first delta: the SDK aborts the request.
      if (e.type === 'response.output_text.delta') break;
    }
    expect(id).toMatch(/^resp_/);
    // A foreground stream's disconnect cancels its run; a background one goes on.
    expect((await client.responses.retrieve(id)).status).toBe('in_progress');
    release();
    const resumed = await client.responses.retrieve(id, { stream: true, starting_after: last });
    const seqs: number[] = [];
    const types: string[] = [];
    for await (const e of resumed) {
      seqs.push(e.sequence_number);
      types.push(e.type);
    }
    expect(seqs[0]).toBe(last + 1);
    expect(seqs).toEqual(seqs.map((_, i) => last + 1 + i));
    expect(types).toContain('response.output_text.delta');
    expect(types.at(-1)).toBe('response.completed');
    // After the end the whole stream can still be read (events kept for the TTL), and the SDK's stream helper resumes too.
    const all = await client.responses.stream({ response_id: id }).finalResponse();
    expect(all).toMatchObject({ id, status: 'completed', background: true });
    expect(all.output_text).toBe('hello world');
    const tail = await client.responses.stream({ response_id: id, starting_after: last }).finalResponse();
    expect(tail.status).toBe('completed');
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  it('cancel of a background response in flight ends it cancelled (its stream too); cancelling again returns the same final Response', async () => {
    const { client, url, server, health } = await setup();
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    const follower = await fetch(`${url}/v1/responses/${r.id}?stream=true`);
    expect(follower.headers.get('content-type')).toBe('text/event-stream');
    const cancelled = await client.responses.cancel(r.id);
    expect(cancelled).toMatchObject({ id: r.id, status: 'cancelled', background: true });
    const text = await follower.text();
    expect(text).toMatch(/event: response\.cancelled\n/);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect((await client.responses.retrieve(r.id)).status).toBe('cancelled');
    // Idempotent, as the API says: the final Response again, not an error.
    expect(await client.responses.cancel(r.id)).toMatchObject({ id: r.id, status: 'cancelled' });
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(r.id)).toBe(1);
    expect((await health()).background_in_flight).toBe(0);
  });

  it('a streamed background response cancelled mid-message: its stream closes the item (incomplete), ends response.cancelled then [DONE]; a streamed retrieve from any starting_after replays the same frames', async () => {
    const { client, url, server } = await setup();
    const res = await post(url, { model: 'm', input: 'hi', background: true, stream: true });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Read until the first delta is in: the model then waits, the message open.
    while (!text.includes('response.output_text.delta')) text += decoder.decode((await reader.read()).value!, { stream: true });
    const id = (parseSse(text)[0] as { response: { id: string } }).response.id;
    expect((await client.responses.cancel(id)).status).toBe('cancelled');
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = parseSse(text);
    expect(events.map((e) => e['type'])).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.cancelled',
    ]);
    expect(events.map((e) => e['sequence_number'])).toEqual(events.map((_, i) => i));
    expect(events.at(-2)!['item']).toMatchObject({ status: 'incomplete' });
    const final = events.at(-1)!['response'] as { status: string; output: unknown[] };
    expect(final.status).toBe('cancelled');
    expect(final.output).toEqual([events.at(-2)!['item']]);
    // The kept frames are the create's, byte for byte: from the start, past the last delta, and past the end.
    const frames = text.split('\n\n').filter((b) => b !== '');
    for (const after of [undefined, 4, events.length - 2, events.length - 1]) {
      const replay = await (await fetch(`${url}/v1/responses/${id}?stream=true${after === undefined ? '' : `&starting_after=${after}`}`)).text();
      const from = after === undefined ? 0 : after + 1;
      expect(replay, String(after)).toBe(`${frames.slice(from).join('\n\n')}\n\n`);
    }
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  it('refusals: store false → 400 param store; the long-lived protocol → 400 param background; nothing runs', async () => {
    const { url, server, health } = await setup();
    const noStore = await post(url, { model: 'm', input: 'hi', background: true, store: false });
    expect(noStore.status).toBe(400);
    const body = (await noStore.json()) as { error: { type: string; code: string; param: string; message: string } };
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'store' });
    expect(body.error.message).toMatch(/requires 'store': true/);
    const longLived = await post(url, { model: 'm', input: 'hi', background: true, stream: true }, '?protocol=long-lived');
    expect(longLived.status).toBe(400);
    expect(((await longLived.json()) as { error: object }).error).toMatchObject({ code: 'invalid_value', param: 'background' });
    // Refused while planned (after admission): each is a 400 and leaves nothing open; before, each left its
    // session open for the server's life (http_in_flight grew by one per refusal).
    const planned: Array<[unknown, string]> = [
      [{ model: 'm', input: [{ type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' }], background: true }, 'missing_tool_output'],
      [{ model: 'm', input: 'hi', background: true, tools: [{ type: 'function', name: 'f', parameters: { type: 'string' } }] }, 'invalid_function_parameters'],
      [{ model: 'm', input: 'hi', background: true, previous_response_id: 'resp_nope' }, 'previous_response_not_found'],
    ];
    for (const [req, code] of planned) {
      const res = await post(url, req);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: object }).error).toMatchObject({ code });
    }
    expect(server.services.records.page({ owner: null, limit: 10, after: null, order: 'desc' }).data).toHaveLength(0);
    // A refused session winds down after its answer: polled (each a real request), not slept on.
    let h = await health();
    for (let i = 0; i < 200 && h.http_in_flight !== 0; i++) h = await health();
    expect(h).toMatchObject({ background_in_flight: 0, bytes_held: 0, http_in_flight: 0 });
  });

  it('at most --max-background-runs in flight: past it 429 too_many_background_runs; a slot frees when one ends', async () => {
    const { client, url, release } = await setup({ limits: { maxBackgroundRuns: 1 } });
    const first = await client.responses.create({ model: 'm', input: 'hi', background: true });
    const over = await post(url, { model: 'm', input: 'hi', background: true });
    expect(over.status).toBe(429);
    expect(((await over.json()) as { error: object }).error).toMatchObject({ code: 'too_many_background_runs', type: 'rate_limit_error' });
    // A foreground create is not counted.
    release();
    expect((await poll(client, first.id)).status).toBe('completed');
    const next = await client.responses.create({ model: 'm', input: 'hi', background: true });
    expect((await poll(client, next.id)).status).toBe('completed');
  });

  it('starting_after: a bad value → 400; events past the per-response bound are dropped oldest first and a resume from before them → 400', async () => {
    const { client, url, release } = await setup({ limits: { maxBackgroundEventBytes: 3000 } });
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    for (const bad of ['-1', 'x', '1.5', '1&starting_after=2']) {
      const res = await fetch(`${url}/v1/responses/${r.id}?stream=true&starting_after=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { error: object }).error).toMatchObject({ code: 'invalid_value', param: 'starting_after' });
    }
    release();
    await poll(client, r.id);
    // The lifecycle events echo the Response (~1 KB each): the first ones are gone by the end.
    const whole = await fetch(`${url}/v1/responses/${r.id}?stream=true`);
    expect(whole.status).toBe(400);
    const err = ((await whole.json()) as { error: { param: string; message: string } }).error;
    expect(err.param).toBe('starting_after');
    const from = Number(/at least (\d+)/.exec(err.message)![1]);
    const tail = await fetch(`${url}/v1/responses/${r.id}?stream=true&starting_after=${from}`);
    expect(tail.status).toBe(200);
    const text = await tail.text();
    expect(text).toMatch(/event: response\.completed\n/);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('starting_after past the last event sent: the stream starts after it, its live events up to it skipped too', async () => {
    const { client, url, release } = await setup();
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    // In flight, held by the model after `hello`: sequence numbers 6 and below have not all been sent yet.
    const res = await fetch(`${url}/v1/responses/${r.id}?stream=true&starting_after=6`);
    expect(res.status).toBe(200);
    release();
    const text = await res.text();
    const seqs = [...text.matchAll(/"sequence_number":(\d+)/g)].map((m) => Number(m[1]));
    // Before, every live event went to the follower, 5 and 6 included.
    expect(seqs[0]).toBe(7);
    expect(seqs).toEqual(seqs.map((_, i) => 7 + i));
    expect(text).toMatch(/event: response\.completed\n/);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it("the create's own stream gets every event even when the first ones pass the per-response bound (a large instructions echo)", async () => {
    const { url, release } = await setup({ limits: { maxBackgroundEventBytes: 2000 } });
    const res = await post(url, { model: 'm', input: 'hi', instructions: 'x'.repeat(5000), background: true, stream: true });
    expect(res.status).toBe(200);
    release();
    const text = await res.text();
    const seqs = [...text.matchAll(/"sequence_number":(\d+)/g)].map((m) => Number(m[1]));
    expect(seqs[0]).toBe(0);
    expect(seqs).toEqual(seqs.map((_, i) => i));
    expect(text).toMatch(/^event: response\.created\n/);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('an ended response keeps its events for --background-events-ttl-ms: after it, a streamed retrieve → 400 param stream, the JSON one still answers', async () => {
    const { client, url, release, health } = await setup({ limits: { backgroundEventsTtlMs: 0 } });
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    release();
    await poll(client, r.id);
    const res = await fetch(`${url}/v1/responses/${r.id}?stream=true`);
    expect(res.status).toBe(400);
    const err = ((await res.json()) as { error: { param: string; message: string } }).error;
    expect(err.param).toBe('stream');
    expect((await health()).background_kept_bytes).toBe(0);
    expect(err.message).toMatch(/no longer kept/);
    expect((await client.responses.retrieve(r.id)).status).toBe('completed');
  });

  it('a fault ends a background run once: an injected error fails it (stream: response.failed, [DONE]); an injected disconnect cancels it; each billed once', async () => {
    for (const [knob, status] of [['error@mid-stream', 'failed'], ['disconnect@mid-stream', 'cancelled']] as const) {
      const { url, server, health } = await setup({ model: undefined, chaos: [knob] });
      const res = await post(url, { model: 'm', input: 'hello there', background: true, stream: true });
      expect(res.status).toBe(200);
      const text = await res.text();
      const id = /"id":"(resp_[^"]+)"/.exec(text)![1]!;
      if (status === 'failed') {
        expect(text).toMatch(/event: response\.failed\n/);
        expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
      } else expect(text).not.toMatch(/data: \[DONE\]/);
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
      expect((await poll(client, id)).status, knob).toBe(status);
      await server.services.postWork.flush();
      expect(server.services.ledger.countFor(id), knob).toBe(1);
      expect(await health()).toMatchObject({ background_in_flight: 0, bytes_held: 0 });
    }
  });

  it('after an injected disconnect, a stream read later ends as the dropped ones did: no terminal event, no [DONE]', async () => {
    const { url } = await setup({ model: undefined, chaos: ['disconnect@mid-stream'] });
    const res = await post(url, { model: 'm', input: 'hello there', background: true, stream: true });
    const text = await res.text();
    const id = /"id":"(resp_[^"]+)"/.exec(text)![1]!;
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    expect((await poll(client, id)).status).toBe('cancelled');
    const again = await fetch(`${url}/v1/responses/${id}?stream=true`);
    expect(again.status).toBe(200);
    const resumed = await again.text().catch(() => '');
    expect(resumed).toMatch(/^event: response\.created\n/);
    // Before: the kept events, then `data: [DONE]` with no terminal event (a whole stream that never ended).
    expect(resumed).not.toMatch(/data: \[DONE\]/);
    expect(resumed).not.toMatch(/event: response\.(completed|cancelled|failed|incomplete)\n/);
  });

  it('a background response the store could not keep ends failed, and retrieve still answers with it (not 404) while its events are kept', async () => {
    const { client, release, server } = await setup();
    server.services.store.put = () => {
      throw new Error('disk full');
    };
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    release();
    const done = await poll(client, r.id);
    expect(done).toMatchObject({ id: r.id, status: 'failed', background: true, error: { code: 'server_error' } });
    expect(done.error!.message).toMatch(/could not be stored/);
    // Cancelling it is idempotent too: the same final Response.
    expect(await client.responses.cancel(r.id)).toMatchObject({ id: r.id, status: 'failed' });
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(r.id)).toBe(1);
  });

  it("another API key's background response is reported missing (retrieve, resume, cancel), in flight and after", async () => {
    const { url, release } = await setup({ apiKeys: ['k1', 'k2'] });
    const mine = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k1', maxRetries: 0 });
    const theirs = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k2', maxRetries: 0 });
    const r = await mine.responses.create({ model: 'm', input: 'hi', background: true });
    const check = async () => {
      await expect(theirs.responses.retrieve(r.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(theirs.responses.retrieve(r.id, { stream: true })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(theirs.responses.cancel(r.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    };
    await check();
    expect((await mine.responses.retrieve(r.id)).status).toBe('in_progress');
    release();
    expect((await poll(mine, r.id)).status).toBe('completed');
    await check();
  });

  it('DELETE of an ended background response drops its kept events: a streamed retrieve no longer reads what was deleted', async () => {
    const { client, url, release, health } = await setup();
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    // (A DELETE in flight cancels the run and deletes it: test/conformance/sdk-conformance.test.ts.)
    release();
    await poll(client, r.id);
    expect((await health()).background_kept_bytes).toBeGreaterThan(0);
    const del = await fetch(`${url}/v1/responses/${r.id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(await del.json()).toMatchObject({ id: r.id, deleted: true });
    expect((await fetch(`${url}/v1/responses/${r.id}`)).status).toBe(404);
    // Before, the deleted response's whole stream (its output text) was still served for the TTL.
    const stream = await fetch(`${url}/v1/responses/${r.id}?stream=true`);
    expect(stream.status).toBe(404);
    expect(((await stream.json()) as { error: object }).error).toMatchObject({ code: 'response_not_found' });
    expect((await health()).background_kept_bytes).toBe(0);
    expect((await fetch(`${url}/v1/responses/${r.id}`, { method: 'DELETE' })).status).toBe(404);
    // Cancelling it now: not found, said as retrieve says it (before: "No long-lived response … is open over HTTP").
    const cancel = await fetch(`${url}/v1/responses/${r.id}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(404);
    const err = ((await cancel.json()) as { error: { code: string; message: string } }).error;
    expect(err).toMatchObject({ code: 'response_not_found', message: `Response with id '${r.id}' not found.` });
  });

  it("llr:timing goes only to readers that asked for it: a create that opted in does not push it on a resume that did not (the SDK's stream helper)", async () => {
    const { client, url, release } = await setup();
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-LLR-Timing': '1' },
      body: JSON.stringify({ model: 'm', input: 'hi', background: true, stream: true }),
    });
    release();
    const own = await res.text();
    // The create asked: its own stream has it, after the terminal event.
    expect(own).toMatch(/event: response\.completed\n[^]*event: llr:timing\n/);
    const id = /"id":"(resp_[^"]+)"/.exec(own)![1]!;
    const plain = await (await fetch(`${url}/v1/responses/${id}?stream=true`)).text();
    // Before, every reader got it: openai-node's stream helper throws on an event type it does not know.
    expect(plain).not.toMatch(/llr:timing/);
    expect(plain.endsWith('data: [DONE]\n\n')).toBe(true);
    const asked = await (await fetch(`${url}/v1/responses/${id}?stream=true`, { headers: { 'X-LLR-Timing': '1' } })).text();
    expect(asked).toMatch(/event: llr:timing\n/);
    expect((await client.responses.stream({ response_id: id }).finalResponse()).status).toBe('completed');
  });

  it('an ended background response evicted from the store: its kept events go with it (stream 404, as retrieve)', async () => {
    const { client, url, release, server } = await setup({ limits: { maxMemoryStoreResponses: 1 } });
    release();
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    await poll(client, r.id);
    // Checked without reading the record (a large one is a copy, or a parse, that holds the loop).
    const read = server.services.store.counters.rows_read;
    expect((await fetch(`${url}/v1/responses/${r.id}?stream=true`)).status).toBe(200);
    expect(server.services.store.counters.rows_read).toBe(read);
    // Another stored response evicts it (the store keeps one).
    await client.responses.create({ model: 'm', input: 'again' });
    expect((await fetch(`${url}/v1/responses/${r.id}`)).status).toBe(404);
    // Before, its whole stream was still served for --background-events-ttl-ms.
    const stream = await fetch(`${url}/v1/responses/${r.id}?stream=true`);
    expect(stream.status).toBe(404);
    expect(((await stream.json()) as { error: object }).error).toMatchObject({ code: 'response_not_found' });
  });

  it('DELETE of a background response the store could not keep: retrieve answered its failed Response, delete finds it too', async () => {
    const { client, url, release, server } = await setup();
    server.services.store.put = () => {
      throw new Error('disk full');
    };
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    release();
    expect((await poll(client, r.id)).status).toBe('failed');
    const del = await fetch(`${url}/v1/responses/${r.id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect((await fetch(`${url}/v1/responses/${r.id}`)).status).toBe(404);
    expect((await fetch(`${url}/v1/responses/${r.id}?stream=true`)).status).toBe(404);
  });

  it('previous_response_id of a background response still in flight → 400 invalid_value saying so (not previous_response_not_found); after its end it chains', async () => {
    const { client, url, release, server } = await setup();
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    for (const background of [false, true]) {
      const res = await post(url, { model: 'm', input: 'more', previous_response_id: r.id, background });
      expect(res.status).toBe(400);
      const err = ((await res.json()) as { error: { code: string; param: string; message: string } }).error;
      // Before: previous_response_not_found, while GET /v1/responses/{id} found it in_progress.
      expect(err).toMatchObject({ code: 'invalid_value', param: 'previous_response_id' });
      expect(err.message).toMatch(/still in progress/);
    }
    // A compaction and a token count of its window say the same (they said previous_response_not_found: outside attack).
    for (const [path, body] of [
      ['/v1/responses/compact', { model: 'm', previous_response_id: r.id }],
      ['/v1/responses/input_tokens', { input: 'more', previous_response_id: r.id }],
    ] as const) {
      const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status, path).toBe(400);
      const err = ((await res.json()) as { error: { code: string; param: string; message: string } }).error;
      expect(err, path).toMatchObject({ code: 'invalid_value', param: 'previous_response_id', message: expect.stringMatching(/still in progress/) });
    }
    // Over WebSocket mode too (store: true: it reads the store); with store: false it continues only from its
    // connection's cache, so that is still not found.
    const ws = await RawSocket.connect(url, { query: '?protocol=ws' });
    ws.send({ type: 'response.create', model: 'm', input: 'more', previous_response_id: r.id, store: true });
    expect(await ws.next('error')).toMatchObject({ error: { code: 'invalid_value', param: 'previous_response_id' } });
    ws.send({ type: 'response.create', model: 'm', input: 'more', previous_response_id: r.id, store: false });
    expect(await ws.next('error')).toMatchObject({ error: { code: 'previous_response_not_found' } });
    ws.dispose();
    // An unknown id is still not found.
    const unknown = await post(url, { model: 'm', input: 'more', previous_response_id: 'resp_nope' });
    expect(((await unknown.json()) as { error: object }).error).toMatchObject({ code: 'previous_response_not_found' });
    release();
    await poll(client, r.id);
    const next = await client.responses.create({ model: 'm', input: 'more', previous_response_id: r.id });
    expect(next).toMatchObject({ status: 'completed', previous_response_id: r.id });
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(r.id)).toBe(1);
  });

  it('previous_response_id of a stored foreground response still streaming → 400 invalid_value saying so, as for a background one; after its end it chains', async () => {
    const { client, url, release } = await setup();
    const stream = await SseStream.open(url, { model: 'm', input: 'hi' }, {}, '');
    const id = (await stream.next('response.created')).response.id;
    await stream.next('response.output_text.delta');
    // Retrieve finds it in progress; continuing from it was previous_response_not_found (outside conformance tester).
    expect(((await (await fetch(`${url}/v1/responses/${id}`)).json()) as { status: string }).status).toBe('in_progress');
    const early = await post(url, { model: 'm', input: 'more', previous_response_id: id });
    expect(early.status).toBe(400);
    expect(((await early.json()) as { error: object }).error).toMatchObject({ code: 'invalid_value', param: 'previous_response_id', message: expect.stringMatching(/is still in progress/) });
    release();
    await stream.next('response.completed');
    await stream.ended;
    const next = await client.responses.create({ model: 'm', input: 'more', previous_response_id: id });
    expect(next).toMatchObject({ status: 'completed', previous_response_id: id });
  });

  it('past --max-background-kept-bytes server-wide, the longest ended response loses its events first (never the one that just ended)', async () => {
    const { client, url, release } = await setup({ limits: { maxBackgroundKeptBytes: 100 } });
    release();
    const first = await client.responses.create({ model: 'm', input: 'hi', background: true });
    await poll(client, first.id);
    // Alone past the bound, it is still kept: it is what a client resumes.
    expect((await fetch(`${url}/v1/responses/${first.id}?stream=true`)).status).toBe(200);
    const second = await client.responses.create({ model: 'm', input: 'hi', background: true });
    await poll(client, second.id);
    const gone = await fetch(`${url}/v1/responses/${first.id}?stream=true`);
    expect(gone.status).toBe(400);
    expect(((await gone.json()) as { error: object }).error).toMatchObject({ param: 'stream' });
    expect((await fetch(`${url}/v1/responses/${second.id}?stream=true`)).status).toBe(200);
  });

  it('shutdown ends a background run in flight incomplete, stored, its stream ended with the terminal event and [DONE]', async () => {
    const { client, url, server } = await setup();
    const r = await client.responses.create({ model: 'm', input: 'hi', background: true });
    const follower = await fetch(`${url}/v1/responses/${r.id}?stream=true`);
    const text = follower.text();
    await server.close();
    const got = await text;
    expect(got).toMatch(/event: response\.incomplete\n/);
    expect(got.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(server.services.ledger.countFor(r.id)).toBe(1);
  });
});
