/**
 * A ws-mode connection's cache holds its last response's whole context: the items of every response of its chain.
 * A `DELETE` of the cached response itself evicted it (ws-mode.test.ts), but one of an earlier response of the
 * chain did not, nor one of the response a continuation in flight had just extended: the cache went on serving the
 * deleted response's items to the next continuation, which was stored with a chain `GET`/HTTP could not load
 * (HTTP answered `previous_response_not_found` for the same `previous_response_id`; outside attack). Now such a
 * continuation is a cache miss: from the store it is refused, naming the deleted response, as over HTTP.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const create = (extra: Record<string, unknown> = {}) => ({ type: 'response.create', model: 'sim-model', input: 'go', ...extra });
const LONG = Array.from({ length: 150 }, (_, i) => `w${i}`).join(' ');

async function httpContinue(url: string, prev: string) {
  const res = await fetch(`${url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-model', input: 'more', previous_response_id: prev }),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

/** Two stored responses on `s`, the second continuing the first: both completed. */
async function storedChain(s: RawSocket, first: string, second: string) {
  s.send(create({ store: true, input: first }));
  const r1 = await s.next('response.completed');
  s.send(create({ store: true, previous_response_id: r1.response.id, input: second }));
  return [r1, await s.next('response.completed')] as const;
}

describe('a DELETE of an earlier response of a ws-mode connection cached chain', () => {
  it('is not continued from the cache: store:true and store:false continuations are previous_response_not_found', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'c' }]) });
    const s = await RawSocket.connect(url);
    const [r1, r2] = await storedChain(s, 'secret', 'second');
    await server.services.postWork.flush();
    expect((await fetch(`${url}/v1/responses/${r1.response.id}`, { method: 'DELETE' })).status).toBe(200);
    // HTTP refuses to continue r2: its chain holds a deleted response.
    const http = await httpContinue(url, r2.response.id);
    expect(http.status).toBe(400);
    expect(http.body.error!.code).toBe('previous_response_not_found');
    for (const store of [true, false]) {
      s.send(create({ store, previous_response_id: r2.response.id, input: 'what did I say first?' }));
      const err = await s.next('error');
      expect(err.error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    }
    const last = s.events.filter((e) => e.type === 'error').at(-2) as { error: { message: string } };
    expect(last.error.message).toContain(`response '${r1.response.id}' earlier in its chain is not stored`);
    // The connection goes on; a later chain is cached again.
    s.send(create({ store: true, input: 'fresh' }));
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it('nor when it is deleted while the continuation that extends it runs', async () => {
    const { url, server } = await testServer({
      policy: scriptPolicy([{ text: 'a' }, { text: LONG }]),
      modelSettings: { tokensPerSecond: 200, ttftBaseMs: 0, prefillTokensPerSecond: Infinity },
    });
    const s = await RawSocket.connect(url);
    s.send(create({ store: true, input: 'secret' }));
    const r1 = await s.next('response.completed');
    s.send(create({ store: true, previous_response_id: r1.response.id, input: 'second' }));
    const created = await s.next('response.created');
    await s.next('response.output_text.delta');
    expect((await fetch(`${url}/v1/responses/${r1.response.id}`, { method: 'DELETE' })).status).toBe(200);
    // r2 was still running when r1 went (its ~300 tokens take ~1.5 s).
    expect(s.events.some((e) => e.type === 'response.completed' && e.response.id === created.response.id)).toBe(false);
    const r2 = await s.next('response.completed');
    expect(r2.response.id).toBe(created.response.id);
    await server.services.postWork.flush();
    s.send(create({ store: true, previous_response_id: r2.response.id, input: 'what did I say first?' }));
    const err = await s.next('error');
    expect(err.error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    expect(err.error.message).toContain(`response '${r1.response.id}' earlier in its chain is not stored`);
  });

  it("another chain's DELETE leaves the cache serving", async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'c' }, { text: 'd' }]) });
    const s = await RawSocket.connect(url);
    s.send(create({ store: true, input: 'other' }));
    const other = await s.next('response.completed');
    const [, r2] = await storedChain(s, 'one', 'two');
    await server.services.postWork.flush();
    expect((await fetch(`${url}/v1/responses/${other.response.id}`, { method: 'DELETE' })).status).toBe(200);
    s.send(create({ store: false, previous_response_id: r2.response.id, input: 'three' }));
    const done = await s.next('response.completed');
    expect(server.services.records.get(done.response.id)!.counters).toMatchObject({ rendered_cache_hits: 1, store_hydrations: 0 });
  });
});

describe("other clients' deletes", () => {
  it("another client's deletes of its own responses do not break a session whose early responses the store evicted (atk62 F3, atk65 F3)", async () => {
    // No API keys: every client is one owner, as by default. The store keeps 12 responses: the session's are evicted
    // by the other client's, which its cache does not mind.
    const { url, server } = await testServer({ limits: { maxMemoryStoreResponses: 12 } });
    const s = await RawSocket.connect(url);
    let prev: string | undefined;
    let first: string | undefined;
    for (let i = 0; i < 6; i++) {
      s.send(create({ store: true, input: `turn ${i}`, ...(prev && { previous_response_id: prev }) }));
      prev = (await s.next('response.completed')).response.id as string;
      first ??= prev;
    }
    await server.services.postWork.flush();
    const json = { 'content-type': 'application/json' };
    // Kept ones first, which push the session's responses out of the store.
    for (let i = 0; i < 12; i++) await fetch(`${url}/v1/responses`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'sim-model', input: 'kept' }) });
    await server.services.postWork.flush();
    expect((await fetch(`${url}/v1/responses/${first}`)).status).toBe(404);
    // Then more deletes than a list of recent deletes held (2,048 server-wide): past it, the session's check asked the
    // store for each id of its lineage and took the evicted ones for deleted.
    const one = async () => {
      const made = (await (await fetch(`${url}/v1/responses`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'sim-model', input: 'x' }) })).json()) as { id: string };
      await server.services.postWork.flush();
      expect((await fetch(`${url}/v1/responses/${made.id}`, { method: 'DELETE' })).status).toBe(200);
    };
    for (let i = 0; i < 2100; i += 5) await Promise.all(Array.from({ length: 5 }, one));
    s.send(create({ store: true, input: 'and on', previous_response_id: prev }));
    expect((await s.next('response.completed')).response.status).toBe('completed');
    // A delete of one of the session's own earlier responses still stored is still noticed.
    const last = (s.all('response.completed').at(-1)!.response.id) as string;
    s.send(create({ store: true, input: 'one more', previous_response_id: last }));
    const next = (await s.next('response.completed')).response.id as string;
    await server.services.postWork.flush();
    expect((await fetch(`${url}/v1/responses/${last}`, { method: 'DELETE' })).status).toBe(200);
    s.send(create({ store: true, input: 'after', previous_response_id: next }));
    expect((await s.next('error')).error).toMatchObject({ code: 'previous_response_not_found' });
  }, 60_000);
});
