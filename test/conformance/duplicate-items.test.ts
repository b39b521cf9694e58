/**
 * A create whose input holds an item with an `id` its context already holds
 * (an earlier item of the input; an item of the `previous_response_id` chain,
 * re-sent inline or named by an `item_reference`) is refused as the Responses
 * API refuses it: 400 `invalid_request_error`, `param: input`, "Duplicate item
 * found with id X. Remove duplicate items from your input and try again."
 * (the API's words and param as public client reports quote them:
 * continuedev/continue#10723, vercel/ai#15492, earendil-works/pi#5151; its
 * code is null, here `duplicate_item`). The server took them, so a client
 * whose requests worked here failed against the API. Over HTTP (openai SDK),
 * WebSocket mode (from the connection cache and from the store) and the
 * long-lived design's create; a long-lived append's re-sent items are still
 * dropped (docs/protocol.md).
 */
import OpenAI from 'openai';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const refusal = (id: string) => ({
  status: 400,
  error: { type: 'invalid_request_error', code: 'duplicate_item', param: 'input', message: `Duplicate item found with id ${id}. Remove duplicate items from your input and try again.` },
});
const twice = { type: 'message', id: 'msg_twice', role: 'user', content: 'again' } as ResponseInputItem;

describe('HTTP (openai SDK): an item id given twice in a context', () => {
  it('in one input is refused; the same items without the repeat are answered', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    await expect(client.responses.create({ model: 'm', input: [twice, { role: 'user', content: 'between' }, twice] })).rejects.toMatchObject(refusal('msg_twice'));
    // Items without an id are never duplicates, however alike.
    const ok = await client.responses.create({ model: 'm', input: [twice, { role: 'user', content: 'x' }, { role: 'user', content: 'x' }] });
    expect(ok.status).toBe('completed');
  });

  it("naming an item of the previous_response_id chain (inline or by item_reference) is refused; a new item is answered", async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    const first = await client.responses.create({ model: 'm', input: [twice] });
    const out = first.output[0]!;
    await expect(
      client.responses.create({ model: 'm', previous_response_id: first.id, input: [{ type: 'item_reference', id: out.id! }, { role: 'user', content: 'go on' }] }),
    ).rejects.toMatchObject(refusal(out.id!));
    await expect(client.responses.create({ model: 'm', previous_response_id: first.id, input: [twice] })).rejects.toMatchObject(refusal('msg_twice'));
    // The chain itself is continued as stored, and an item_reference without a chain is taken as before.
    const next = await client.responses.create({ model: 'm', previous_response_id: first.id, input: [{ role: 'user', content: 'go on' }] });
    expect(next.status).toBe('completed');
    const fresh = await client.responses.create({ model: 'm', input: [{ type: 'item_reference', id: out.id! }, { role: 'user', content: 'and?' }] });
    expect(fresh.status).toBe('completed');
  });
});

describe('WebSocket mode: an item id given twice in a context', () => {
  const create = (extra: Record<string, unknown>) => ({ type: 'response.create', model: 'sim-model', input: [twice], ...extra });

  it.each([true, false])('a continuation from the cached response (incremental_checks %s) re-sending a chain item is an error event; the socket goes on', async (incremental) => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'one' }, { text: 'two' }]), switches: { incremental_checks: incremental } });
    const s = await RawSocket.connect(url);
    s.send(create({ store: false }));
    const first = await s.next('response.completed');
    const out = first.response.output[0] as { id: string };
    s.send(create({ store: false, previous_response_id: first.response.id, input: [{ role: 'user', content: 'go on' }, { type: 'message', role: 'assistant', id: out.id, content: [{ type: 'output_text', text: 'one' }] }] }));
    expect(await s.next('error')).toMatchObject({ type: 'error', ...refusal(out.id) });
    s.send(create({ store: false, input: [twice, twice] }));
    expect(await s.next('error')).toMatchObject({ type: 'error', ...refusal('msg_twice') });
    s.send(create({ store: false }));
    expect((await s.next('response.completed')).response.output[0]).toMatchObject({ type: 'message' });
  });

  it('a continuation loaded from the store (a cache miss) is refused the same way', async () => {
    const { url } = await testServer();
    const first = await RawSocket.connect(url);
    first.send(create({ store: true }));
    const done = await first.next('response.completed');
    const s = await RawSocket.connect(url);
    s.send(create({ store: true, previous_response_id: done.response.id, input: [{ type: 'item_reference', id: 'msg_twice' }] }));
    expect(await s.next('error')).toMatchObject({ type: 'error', ...refusal('msg_twice') });
  });
});

describe('the long-lived design: an item id given twice', () => {
  it('in a create is refused; the connection goes on', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: [twice, twice] });
    expect(await s.next('error')).toMatchObject({ type: 'error', ...refusal('msg_twice') });
    s.send({ type: 'response.create', model: 'sim-model', input: [twice] });
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });
});
