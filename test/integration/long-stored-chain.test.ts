/**
 * A stored chain longer than the store walks (MAX_CHAIN_LINKS responses) is
 * refused saying so. A WebSocket-mode connection extends its chain from its
 * cache whatever its length, so such a chain is stored, and `GET
 * /v1/responses/{id}` finds its last response; a continuation from it
 * through the store (HTTP, another connection, the same client after a
 * reconnect) was refused "Previous response with id '…' not found." (outside
 * attack: a 10,010-step ws chain, then an HTTP continuation).
 */
import { describe, expect, it } from 'vitest';
import { MAX_CHAIN_LINKS, type StoredResponse } from '../../src/store/types.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

describe(`a stored chain of more than ${MAX_CHAIN_LINKS} responses`, () => {
  it('is refused naming the limit, over HTTP and on a ws-mode cache miss; one of exactly the limit is continued', async () => {
    const { url, server } = await testServer({ limits: { maxMemoryStoreResponses: MAX_CHAIN_LINKS + 10 } });
    const post = (body: object) => fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const first = (await (await post({ model: 'sim-model', input: 'first', store: true })).json()) as { id: string };
    const root = server.services.store.get(first.id, null)!;
    // The rest of the chain straight into the store, as a long ws-mode chain leaves it.
    let prev = root.response.id;
    const link = (): string => {
      const id = `resp_chain_${prev.length}_${Math.random().toString(36).slice(2)}`;
      const rec: StoredResponse = { ...root, response: { ...root.response, id, previous_response_id: prev, output: [] }, input: [{ type: 'message', role: 'user', content: 'next' }] };
      server.services.store.put(rec);
      prev = id;
      return id;
    };
    for (let i = 1; i < MAX_CHAIN_LINKS; i++) link();
    // Exactly MAX_CHAIN_LINKS responses: still continued.
    const atLimit = await post({ model: 'sim-model', input: 'go on', store: false, previous_response_id: prev });
    expect(atLimit.status).toBe(200);
    const last = link();
    expect((await fetch(`${url}/v1/responses/${last}`)).status).toBe(200);
    const res = await post({ model: 'sim-model', input: 'go on', store: false, previous_response_id: last });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    expect(error.message).toContain(`longer than ${MAX_CHAIN_LINKS} responses`);
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go on', store: true, previous_response_id: last });
    const err = await s.next('error');
    expect(err.error.code).toBe('previous_response_not_found');
    expect(err.error.message).toContain(`longer than ${MAX_CHAIN_LINKS} responses`);
  }, 60_000);
});
