/**
 * WebSocket mode (the shipped design) on real sockets: warm-up, chained
 * continuations from the connection cache, the store slow path, eviction on
 * a failed continuation, the connection lifetime limit, the 426 switch, and
 * post-inference work that runs after the terminal event but is never lost.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { LONG_LIVED_BETA, WS_MODE_BETA } from '../../src/protocol/designs.js';
import { rawRequest, requestText, upgradeHeaders } from '../helpers/raw-http.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const create = (extra: Record<string, unknown> = {}) => ({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], store: false, ...extra });
const oneCall = () => scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);

describe('ws mode', () => {
  it('is the default with no beta header, and with the 2026-02-06 header or ?protocol=ws', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'c' }]) });
    for (const s of [
      await RawSocket.connect(url),
      await RawSocket.connect(url, { headers: { 'OpenAI-Beta': WS_MODE_BETA } }),
      await RawSocket.connect(url, { query: '?protocol=ws' }),
    ]) {
      s.send(create());
      const done = await s.next('response.completed');
      expect(server.services.records.get(done.response.id)?.protocol).toBe('ws');
    }
  });

  it('warm-up with generate:false completes empty and chains; continuations use the connection cache', async () => {
    const { url, server } = await testServer({ policy: oneCall() });
    const s = await RawSocket.connect(url);
    s.send(create({ generate: false, input: [{ type: 'message', role: 'developer', content: 'You are terse.' }] }));
    const warm = await s.next('response.completed');
    expect(warm.response.output).toEqual([]);
    expect(server.services.records.get(warm.response.id)!.counters['model_calls']).toBe(0);

    s.send(create({ previous_response_id: warm.response.id, input: 'look it up' }));
    const first = await s.next('response.completed');
    expect(first.response.output[0]).toMatchObject({ type: 'function_call', call_id: 'call_a' });
    s.send(create({ previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'found' }] }));
    const second = await s.next('response.completed');
    expect(second.response.output[0]?.type).toBe('message');

    for (const r of [first, second]) {
      const c = server.services.records.get(r.response.id)!.counters;
      expect(c).toMatchObject({ rendered_cache_hits: 1, render_full: 0, validate_incremental: 1, route_reused: 1, route_full: 0, store_hydrations: 0 });
    }
    // The continuation tokenized only its one new item.
    expect(server.services.records.get(second.response.id)!.counters['items_tokenized']).toBe(1);
  });

  it.each([
    ['rendered_token_cache', { render_full: 1, rendered_cache_hits: 0, validate_incremental: 1 }],
    ['incremental_checks', { render_full: 0, rendered_cache_hits: 1, validate_full: 1, safety_full: 1 }],
    ['routing_reuse', { route_full: 1, route_reused: 0, render_full: 0 }],
  ] as const)('switching off %s changes exactly that work on a continuation', async (name, expected) => {
    const { url, server } = await testServer({ policy: oneCall(), switches: { [name]: false } });
    const s = await RawSocket.connect(url, { query: '?llr_timing=1' });
    s.send(create());
    const first = await s.next('response.completed');
    s.send(create({ previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'x' }] }));
    const second = await s.next('response.completed');
    const timing = await s.next('llr:timing');
    expect(timing.switches[name]).toBe(false);
    expect(server.services.records.get(second.response.id)!.counters).toMatchObject(expected);
  });

  it('overlap_post_inference off: billing and persistence finish before the terminal event', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'hi' }]), switches: { overlap_post_inference: false } });
    const s = await RawSocket.connect(url, { query: '?llr_timing=1' });
    s.send(create({ store: true }));
    const done = await s.next('response.completed');
    // No flush: the work is already done when the client sees the terminal event.
    expect(server.services.ledger.countFor(done.response.id)).toBe(1);
    expect(server.services.store.get(done.response.id, null)?.response.status).toBe('completed');
    expect((await s.next('llr:timing')).totals['billing']).toBeGreaterThanOrEqual(0);
  });

  it('a failing store is never reported completed: the response fails with a server_error, billed once', async () => {
    for (const overlap of [false, true]) {
      const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'hi' }]), switches: { overlap_post_inference: overlap } });
      server.services.store.put = () => {
        throw new Error('disk full');
      };
      const s = await RawSocket.connect(url);
      s.send(create({ store: true }));
      const err = await s.next('error');
      expect(err.error).toMatchObject({ code: 'server_error', type: 'server_error' });
      expect(err.error.message).toMatch(/could not be stored/);
      const failed = await s.next('response.failed');
      expect(failed.response).toMatchObject({ status: 'failed', completed_at: null, error: { code: 'server_error' } });
      expect(failed.response.output).toHaveLength(1);
      await server.services.postWork.flush();
      const id = failed.response.id;
      expect(server.services.ledger.countFor(id)).toBe(1);
      const rec = server.services.records.get(id)!;
      expect(rec).toMatchObject({ status: 'failed', post_done: false });
      expect(rec.counters['persist_failed']).toBe(1);
    }
  });

  it('overlap_persist: the write happens after the terminal event, and its failure is never recorded post_done', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'hi' }]), switches: { overlap_persist: true } });
    server.services.store.put = () => {
      throw new Error('disk full');
    };
    const s = await RawSocket.connect(url);
    s.send(create({ store: true }));
    // The documented cost of the switch: the client was told `completed` before the write failed.
    const done = await s.next('response.completed');
    await server.services.postWork.flush();
    const rec = server.services.records.get(done.response.id)!;
    expect(rec).toMatchObject({ post_deferred: true, post_done: false });
    expect(rec.counters['persist_failed']).toBe(1);
    expect(server.services.ledger.countFor(done.response.id)).toBe(1);
  });

  it('skip_intermediate_hop: a cached continuation pays one hop less', async () => {
    for (const skip of [true, false]) {
      const { url, server } = await testServer({ policy: oneCall(), hopLatencyMs: 1, hops: 2, switches: { skip_intermediate_hop: skip } });
      const s = await RawSocket.connect(url);
      s.send(create());
      const first = await s.next('response.completed');
      s.send(create({ previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'x' }] }));
      const second = await s.next('response.completed');
      expect(server.services.records.get(first.response.id)!.counters['remote_hops']).toBe(2);
      expect(server.services.records.get(second.response.id)!.counters['remote_hops']).toBe(skip ? 1 : 2);
    }
  });

  it('unknown previous_response_id with store:false → previous_response_not_found, socket stays open', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'ok' }]) });
    const s = await RawSocket.connect(url);
    s.send(create({ previous_response_id: 'resp_missing' }));
    const err = await s.next('error');
    expect(err).toMatchObject({
      type: 'error',
      status: 400,
      error: { type: 'invalid_request_error', code: 'previous_response_not_found', message: "Previous response with id 'resp_missing' not found.", param: 'previous_response_id' },
    });
    s.send(create());
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it('a long unknown previous_response_id is quoted cut to 100 characters, over ws and HTTP (a 1 MB id was echoed whole)', async () => {
    const { url } = await testServer();
    const id = `resp_${'x'.repeat(200_000)}`;
    const s = await RawSocket.connect(url);
    s.send(create({ store: true, previous_response_id: id }));
    const err = await s.next('error');
    expect(err.error).toMatchObject({ code: 'previous_response_not_found', message: `Previous response with id '${id.slice(0, 100)}…' not found.` });
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: 'x', previous_response_id: id }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe(`Previous response with id '${id.slice(0, 100)}…' not found.`);
  });

  it('unknown previous_response_id with store:true → not found too (nothing stored under it)', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send(create({ store: true, previous_response_id: 'resp_missing' }));
    expect((await s.next('error')).error.code).toBe('previous_response_not_found');
  });

  it('a stored response missing from the connection cache is hydrated from the store (full rebuild)', async () => {
    const { url, server } = await testServer({ policy: oneCall() });
    const a = await RawSocket.connect(url);
    a.send(create({ store: true }));
    const first = await a.next('response.completed');
    await server.services.postWork.flush();
    // A new connection has an empty cache.
    const b = await RawSocket.connect(url);
    b.send(create({ store: true, previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'x' }] }));
    const second = await b.next('response.completed');
    const c = server.services.records.get(second.response.id)!.counters;
    expect(c).toMatchObject({ store_hydrations: 1, render_full: 1, rendered_cache_hits: 0, route_full: 1 });
  });

  it('a continuation naming an unknown call evicts the id', async () => {
    const { url } = await testServer({ policy: oneCall() });
    const s = await RawSocket.connect(url);
    s.send(create());
    const first = await s.next('response.completed');
    s.send(create({ previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_zzz', output: 'x' }] }));
    const err = await s.next('error');
    expect(err.error).toMatchObject({ code: 'unknown_call_id', param: 'input[0].call_id' });
    s.send(create({ previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'x' }] }));
    expect((await s.next('error')).error.code).toBe('previous_response_not_found');
  });

  it('response.append is not part of ws mode, said before its fields are read (without input it was refused for the missing input; atk58 F5)', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    for (const frame of [{ type: 'response.append', input: [] }, { type: 'response.append' }, { type: 'response.append', input: 5 }]) {
      s.send(frame);
      expect((await s.next('error')).error, JSON.stringify(frame)).toMatchObject({ code: 'unknown_event_type', param: 'type', message: "'response.append' is not part of the ws protocol." });
    }
  });

  it('background: true is refused on both WebSocket designs with an error event (the API: not supported over WebSocket), in its lane; the connection goes on', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }]) });
    for (const s of [await RawSocket.connect(url), await RawSocket.connect(url, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } })]) {
      s.send(create({ background: true, store: true, stream_id: 'lane-1' }));
      const err = await s.next('error');
      expect(err).toMatchObject({ status: 400, stream_id: 'lane-1', error: { type: 'invalid_request_error', code: 'invalid_value', param: 'background' } });
      expect(err.error.message).toMatch(/not supported over WebSocket/);
      // `background: false` is the default, accepted; the connection still serves creates.
      s.send(create({ background: false }));
      expect((await s.next('response.completed')).response.background).toBe(false);
    }
  });

  it('creates queue in order behind the one in flight', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'one' }, { text: 'two' }, { text: 'three' }]) });
    const s = await RawSocket.connect(url);
    s.send(create());
    s.send(create());
    s.send(create());
    const texts = [];
    for (let i = 0; i < 3; i++) {
      const r = (await s.next('response.completed')).response;
      texts.push(r.output[0]?.type === 'message' ? r.output[0].content[0]?.text : null);
    }
    expect(texts).toEqual(['one', 'two', 'three']);
  });

  it('the connection lifetime limit sends the documented error and closes', async () => {
    const { url } = await testServer({ limits: { connectionLifetimeMs: 30 } });
    const s = await RawSocket.connect(url);
    const err = await s.next('error');
    expect(err.error.code).toBe('websocket_connection_limit_reached');
    expect(err.error.type).toBe('invalid_request_error');
    await s.closed;
  });

  it('the 426 switch refuses upgrades so clients fall back to HTTP', async () => {
    const { url, port, server } = await testServer({ refuseWebSockets: true });
    await expect(RawSocket.connect(url)).rejects.toMatchObject({ status: 426 });
    const refused = await rawRequest(port, requestText('GET', '/v1/responses', upgradeHeaders()));
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'upgrade_required', type: 'invalid_request_error' } });
    server.refuseWebSockets = false;
    await expect(RawSocket.connect(url)).resolves.toBeInstanceOf(RawSocket);
  });

  it('post-inference work runs after the terminal event and is flushed on shutdown, counted once', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'hello' }]) });
    const s = await RawSocket.connect(url, { query: '?llr_timing=1' });
    s.send(create({ store: true }));
    const done = await s.next('response.completed');
    const timing = await s.next('llr:timing');
    expect(timing.switches['post_inference_deferred']).toBe(true);
    await server.close();
    const rec = server.services.records.get(done.response.id)!;
    expect(rec.post_done).toBe(true);
    expect(rec.counters['post_inference']).toBe(1);
    expect(server.services.ledger.countFor(done.response.id)).toBe(1);
    expect(rec.counters['persisted']).toBe(1);
  });
});

describe('a stored response whose parent was not stored', () => {
  // Found by a state-machine fuzzer: a store:true continuation from the connection's cache of a store:false
  // response is stored (GET finds it) but its chain is not whole, and every continuation from it through the
  // store was refused "Previous response with id '<it>' not found", an id GET /v1/responses finds.
  it('a continuation from it through the store names the response missing from its chain', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'c' }]) });
    const s = await RawSocket.connect(url);
    s.send(create({ input: 'first' }));
    const a = await s.next('response.completed');
    s.send(create({ input: 'second', store: true, previous_response_id: a.response.id }));
    const b = await s.next('response.completed');
    expect((await fetch(`${url}/v1/responses/${b.response.id}`)).status).toBe(200);
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: 'third', previous_response_id: b.response.id }),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    expect(error.message).toContain(`response '${a.response.id}' earlier in its chain is not stored`);
  });
});

describe('a DELETE of the response the connection caches', () => {
  // Outside attack: the connection went on continuing a response its owner had deleted (the store said
  // previous_response_not_found for it, HTTP refused it, the cache served it), and a store:true continuation
  // was then stored with a chain no later request could load.
  it('evicts it: a continuation from it is previous_response_not_found, store:true or not', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]) });
    const s = await RawSocket.connect(url);
    s.send(create({ store: true }));
    const first = await s.next('response.completed');
    await server.services.postWork.flush();
    expect(server.host.wsCachedResponses).toBe(1);
    const del = await fetch(`${url}/v1/responses/${first.response.id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(server.host.wsCachedResponses).toBe(0);
    const outputs = [{ type: 'function_call_output', call_id: 'call_a', output: 'x' }];
    for (const store of [true, false]) {
      s.send(create({ store, previous_response_id: first.response.id, input: outputs }));
      const err = await s.next('error');
      expect(err.error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    }
    // The connection goes on.
    s.send(create({ input: 'again' }));
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it("another response's DELETE, or one refused (another key's), leaves the cache alone", async () => {
    const { url, server } = await testServer({
      apiKeys: ['k1', 'k2'],
      policy: scriptPolicy([{ text: 'a' }, { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]),
    });
    const auth = (k: string) => ({ Authorization: `Bearer ${k}` });
    const s = await RawSocket.connect(url, { headers: auth('k1') });
    s.send(create({ store: true, input: 'other' }));
    const other = await s.next('response.completed');
    s.send(create({ store: true }));
    const first = await s.next('response.completed');
    await server.services.postWork.flush();
    expect((await fetch(`${url}/v1/responses/${first.response.id}`, { method: 'DELETE', headers: auth('k2') })).status).toBe(404);
    expect((await fetch(`${url}/v1/responses/${other.response.id}`, { method: 'DELETE', headers: auth('k1') })).status).toBe(200);
    s.send(create({ store: false, previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'x' }] }));
    const done = await s.next('response.completed');
    expect(server.services.records.get(done.response.id)!.counters).toMatchObject({ rendered_cache_hits: 1, store_hydrations: 0 });
  });

  it('what the caches hold is let go when their connections end', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'c' }]) });
    const sockets = [await RawSocket.connect(url), await RawSocket.connect(url)];
    for (const s of sockets) {
      s.send(create({ store: true }));
      await s.next('response.completed');
    }
    expect(server.host.wsCachedResponses).toBe(2);
    // A store:false response replaces the stored one in its connection's cache.
    sockets[0]!.send(create({ store: false }));
    await sockets[0]!.next('response.completed');
    expect(server.host.wsCachedResponses).toBe(1);
    for (const s of sockets) s.ws.close();
    await server.ws.idle();
    expect(server.host.wsCachedResponses).toBe(0);
  });
});
