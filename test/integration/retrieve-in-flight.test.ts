/**
 * A `store: true` response retrieved while it is being made, on any design: `GET /v1/responses/{id}` answers it
 * `in_progress` with its output so far, and its `input_items` list its input, as for a background response. Before,
 * both were 404 until it ended, though its id was already on the wire (`response.created`). A `DELETE` of one ends
 * its run `cancelled`, then deletes it (it was 404, and the response was stored when it ended after all).
 */
import { describe, expect, it } from 'vitest';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';
import type { Model, ModelEvent } from '../../src/model/types.js';
import { gatedModel } from '../helpers/gated-model.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { SseStream } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

const input = [{ type: 'message', role: 'user', content: 'tell me' }];

async function getJson(url: string, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { headers });
  return { status: res.status, json: await res.json() };
}

/** A response of `design` held in flight after its first delta; its id. */
async function inFlight(url: string, design: 'http' | 'long-lived-http' | 'ws' | 'long-lived', body: Record<string, unknown>, headers: Record<string, string> = {}) {
  if (design === 'http' || design === 'long-lived-http') {
    const s = await SseStream.open(url, { model: 'sim-model', input, stream: true, ...body }, headers, design === 'http' ? '' : '?protocol=long-lived');
    const id = (await s.next('response.created')).response.id;
    await s.next('response.output_text.delta');
    return { id, end: () => s.next('response.completed'), cancelled: () => s.next('response.cancelled') };
  }
  const s = await RawSocket.connect(url, design === 'long-lived' ? { headers: { 'OpenAI-Beta': LONG_LIVED_BETA, ...headers } } : { query: '?protocol=ws', headers });
  s.send({ type: 'response.create', model: 'sim-model', input, ...body });
  const id = (await s.next('response.created')).response.id;
  await s.next('response.output_text.delta');
  return { id, end: () => s.next('response.completed'), cancelled: () => s.next('response.cancelled') };
}

describe('a stored response retrieved while it is being made', () => {
  it.each(['http', 'long-lived-http', 'ws', 'long-lived'] as const)('%s: in_progress with its output so far, its input items listed; stored once it ends', async (design) => {
    const { model, release } = gatedModel();
    const { url } = await testServer({ model });
    const { id, end } = await inFlight(url, design, {});
    const got = await getJson(`${url}/v1/responses/${id}`);
    expect(got.status).toBe(200);
    expect(got.json).toMatchObject({ id, object: 'response', status: 'in_progress', background: false });
    expect(got.json.output).toHaveLength(1);
    expect(got.json.output[0]).toMatchObject({ type: 'message', status: 'in_progress' });
    expect(got.json.output[0].content[0].text).toBe('hello');
    const items = await getJson(`${url}/v1/responses/${id}/input_items`);
    expect(items.status).toBe(200);
    expect(items.json.data.map((i: { content: Array<{ text: string }> }) => i.content[0]!.text)).toEqual(['tell me']);
    release();
    const final = (await end()).response;
    const after = await getJson(`${url}/v1/responses/${id}`);
    expect(after.json).toMatchObject({ id, status: 'completed', output: final.output });
  });

  it('with store: false it stays 404, and so is another key\'s', async () => {
    const { model, release } = gatedModel();
    const { url } = await testServer({ model, apiKeys: ['k1', 'k2'] });
    const k1 = { Authorization: 'Bearer k1' };
    const k2 = { Authorization: 'Bearer k2' };
    const unstored = await inFlight(url, 'http', { store: false }, k1);
    expect((await getJson(`${url}/v1/responses/${unstored.id}`, k1)).status).toBe(404);
    expect((await getJson(`${url}/v1/responses/${unstored.id}/input_items`, k1)).status).toBe(404);
    release();
    await unstored.end();
    const { model: model2, release: release2 } = gatedModel();
    const other = await testServer({ model: model2, apiKeys: ['k1', 'k2'] });
    const stored = await inFlight(other.url, 'ws', {}, k1);
    expect((await getJson(`${other.url}/v1/responses/${stored.id}`, k2)).status).toBe(404);
    expect((await getJson(`${other.url}/v1/responses/${stored.id}`, k1)).json.status).toBe('in_progress');
    release2();
    await stored.end();
  });

  // Retrieve answers such a response, so cancel must not say it is not found: it was 404 "Response with id '…' not
  // found." for an id retrieve had just answered in_progress. Like the same response once stored, it is 400
  // invalid_value (the API cancels only a background response); the run goes on.
  it.each(['http', 'ws', 'long-lived'] as const)('%s: POST /cancel of one is 400 invalid_value, not 404, and its run goes on', async (design) => {
    const { model, release } = gatedModel();
    const { url } = await testServer({ model });
    const { id, end } = await inFlight(url, design, {});
    const res = await fetch(`${url}/v1/responses/${id}/cancel`, { method: 'POST' });
    const body = (await res.json()) as { error: { code: string; param: string } };
    expect({ status: res.status, code: body.error.code, param: body.error.param }).toEqual({ status: 400, code: 'invalid_value', param: 'response_id' });
    release();
    expect((await end()).response.status).toBe('completed');
    const after = await fetch(`${url}/v1/responses/${id}/cancel`, { method: 'POST' });
    expect(after.status).toBe(400);
  });

  // Nor may a streamed retrieve: it was 404 response_not_found while the run was being made (outside attack), then 400
  // once it had ended. The API streams a retrieve only of a background response: 400 invalid_value, param stream, both
  // while it is made and after.
  it.each(['http', 'long-lived-http', 'ws', 'long-lived'] as const)('%s: a streamed retrieve of one is 400 invalid_value (param stream), not 404, and its run goes on', async (design) => {
    const { model, release } = gatedModel();
    const { url } = await testServer({ model });
    const { id, end } = await inFlight(url, design, {});
    const during = await getJson(`${url}/v1/responses/${id}?stream=true`);
    expect({ status: during.status, code: during.json.error.code, param: during.json.error.param }).toEqual({ status: 400, code: 'invalid_value', param: 'stream' });
    expect(during.json.error.message).toMatch(/only for a response created with 'background': true/);
    release();
    expect((await end()).response.status).toBe('completed');
    const after = await getJson(`${url}/v1/responses/${id}?stream=true`);
    expect({ status: after.status, code: after.json.error.code }).toEqual({ status: 400, code: 'invalid_value' });
    expect((await getJson(`${url}/v1/responses/resp_nowhere?stream=true`)).status).toBe(404);
  });

  it('DELETE of one ends its run cancelled, then it is gone; a second DELETE is 404', async () => {
    const { model } = gatedModel();
    const { url, server } = await testServer({ model });
    const { id, cancelled } = await inFlight(url, 'http', {});
    const [first, second] = await Promise.all([fetch(`${url}/v1/responses/${id}`, { method: 'DELETE' }), fetch(`${url}/v1/responses/${id}`, { method: 'DELETE' })]);
    expect([first.status, second.status].sort()).toEqual([200, 404]);
    expect((await cancelled()).response.status).toBe('cancelled');
    expect((await getJson(`${url}/v1/responses/${id}`)).status).toBe(404);
    expect(server.services.inFlight!.size).toBe(0);
  });
  // The registry's entry is removed once however the run ends, so nothing in flight is held afterwards and the store
  // answers: a client gone mid-stream (SSE aborted, WebSocket dropped), or a model that throws. Each case waits for
  // its transport's sessions to close (`idle`), then the registry must be empty.
  it.each(['http', 'long-lived-http', 'ws', 'long-lived'] as const)('%s: its entry is removed once the run ends, on a disconnect and on a model that throws', async (design) => {
    const overHttp = design === 'http' || design === 'long-lived-http';
    /** A response of `design` on `url`, held after its first delta: its id, its stream's events, and a way to drop it. */
    const open = async (url: string) => {
      if (overHttp) {
        const s = await SseStream.open(url, { model: 'sim-model', input, stream: true }, {}, design === 'http' ? '' : '?protocol=long-lived');
        const id = (await s.next('response.created')).response.id;
        await s.next('response.output_text.delta');
        return { id, events: s.events, ended: () => s.ended.then(() => undefined), drop: () => s.abort() };
      }
      const s = await RawSocket.connect(url, design === 'long-lived' ? { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } } : { query: '?protocol=ws' });
      s.send({ type: 'response.create', model: 'sim-model', input });
      const id = (await s.next('response.created')).response.id;
      await s.next('response.output_text.delta');
      return { id, events: s.events, ended: () => s.next('response.failed', { skipErrors: true }).then(() => undefined), drop: () => s.dispose() };
    };

    const { model } = gatedModel();
    const { url, server } = await testServer({ model });
    const idle = (srv: typeof server) => (overHttp ? srv.httpTransport.idle() : srv.ws.idle());
    const dropped = await open(url);
    expect(server.services.inFlight!.size).toBe(1);
    dropped.drop();
    await idle(server);
    await server.services.postWork.settled();
    expect(server.services.inFlight!.size).toBe(0);
    const gone = await getJson(`${url}/v1/responses/${dropped.id}`);
    expect(gone.status).toBe(200);
    expect(gone.json.status).not.toBe('in_progress');

    let fail!: () => void;
    const gate = new Promise<void>((r) => (fail = r));
    const throwing: Model = {
      async *sample(): AsyncIterable<ModelEvent> {
        yield { type: 'message.start' };
        yield { type: 'text.delta', delta: 'hello' };
        await gate;
        throw new Error('model broke');
      },
    };
    const t = await testServer({ model: throwing });
    const broken = await open(t.url);
    expect(t.server.services.inFlight!.size).toBe(1);
    fail();
    await broken.ended();
    expect(broken.events.map((e) => e.type)).toContain('response.failed');
    broken.drop();
    await idle(t.server);
    await t.server.services.postWork.settled();
    expect(t.server.services.inFlight!.size).toBe(0);
    const after = await getJson(`${t.url}/v1/responses/${broken.id}`);
    expect(after.json.status).toBe('failed');
  });
});
