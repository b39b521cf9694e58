/**
 * Reading a stored response back as a client that only knows the public API
 * does, with the `openai` SDK (6.49): `responses.inputItems.list` (the API's
 * list shape, cursor pagination with `limit`, `after`, `before`, `order`, and
 * the SDK's auto-pagination), and `responses.retrieve(id, {stream: true})`,
 * which the API serves only for background responses: refused with a 400
 * the SDK raises, never a JSON body the SDK reads as an empty event stream;
 * and `responses.cancel` of a stored response, refused (400) as the API
 * refuses a response not created in the background, not reported missing.
 */
import OpenAI from 'openai';
import type { ResponseInputItem, ResponseItem } from 'openai/resources/responses/responses';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import type { ModelPolicy } from '../../src/model/policies.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

async function sdk() {
  return sdkWith();
}

async function sdkWith(policy?: ModelPolicy) {
  const ctx = await testServer(policy ? { policy } : {});
  return { ...ctx, client: new OpenAI({ baseURL: `${ctx.url}/v1`, apiKey: 'k', maxRetries: 0 }) };
}

const INPUT: ResponseInputItem[] = [
  { role: 'user', content: 'first' },
  { type: 'message', role: 'assistant', content: 'second' },
  { role: 'developer', content: [{ type: 'input_text', text: 'third' }] },
  { type: 'function_call', call_id: 'call_1', name: 'lookup', arguments: '{}' },
  { type: 'function_call_output', call_id: 'call_1', output: 'fifth' },
  // An item with its own id (as a listing returns it) keeps that id.
  { type: 'message', role: 'user', content: 'sixth', id: 'msg_client_given' } as ResponseInputItem,
];

describe('stored responses read back', () => {
  it('inputItems.list: the API list shape, items in resource form, newest first by default', async () => {
    const { client, url } = await sdk();
    const r = await client.responses.create({ model: 'm', input: INPUT });
    const body = (await (await fetch(`${url}/v1/responses/${r.id}/input_items`)).json()) as {
      object: string;
      data: ResponseItem[];
      first_id: string;
      last_id: string;
      has_more: boolean;
    };
    expect((await client.responses.inputItems.list(r.id)).data).toEqual(body.data);
    expect(body.object).toBe('list');
    expect(body.has_more).toBe(false);
    expect(body.data).toHaveLength(6);
    expect(body.first_id).toBe('msg_client_given');
    expect(body.last_id).toBe(body.data[5]!.id);
    const asc = [...body.data].reverse();
    expect(asc.map((i) => i.type)).toEqual(['message', 'message', 'message', 'function_call', 'function_call_output', 'message']);
    for (const item of asc) {
      expect(typeof item.id).toBe('string');
      expect((item as { status?: string }).status).toBe('completed');
    }
    expect(new Set(asc.map((i) => i.id)).size).toBe(6);
    expect(asc[0]).toMatchObject({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'first' }] });
    // An assistant's text in the API's output_text form, with the annotations and logprobs its schema requires.
    expect(asc[1]).toMatchObject({ type: 'message', role: 'assistant' });
    expect((asc[1] as { content: unknown }).content).toEqual([{ type: 'output_text', text: 'second', annotations: [], logprobs: [] }]);
    expect(asc[3]).toMatchObject({ type: 'function_call', call_id: 'call_1', name: 'lookup', arguments: '{}' });
    expect(asc[4]).toMatchObject({ type: 'function_call_output', call_id: 'call_1', output: 'fifth' });
    // The ids are stable across listings, so a cursor stays valid.
    const again = await client.responses.inputItems.list(r.id, { order: 'asc' });
    expect(again.data.map((i) => i.id)).toEqual(asc.map((i) => i.id));
  });

  it('inputItems.list: an assistant output_text sent without annotations or logprobs is listed with both; ones sent are kept', async () => {
    const { url } = await testServer();
    const logprobs = [{ token: 'a', logprob: -0.1, bytes: [97], top_logprobs: [] }];
    const input = [
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'bare' }, { type: 'output_text', text: 'full', annotations: [], logprobs }] },
      { role: 'user', content: 'next' },
    ];
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input }) });
    const { id } = (await res.json()) as { id: string };
    const list = (await (await fetch(`${url}/v1/responses/${id}/input_items?order=asc`)).json()) as { data: Array<{ content: unknown }> };
    expect(list.data[0]!.content).toEqual([
      { type: 'output_text', text: 'bare', annotations: [], logprobs: [] },
      { type: 'output_text', text: 'full', annotations: [], logprobs },
    ]);
  });

  it('inputItems.list paginates: limit, after, before, order, and the SDK auto-paginates', async () => {
    const { client, url } = await sdk();
    const r = await client.responses.create({ model: 'm', input: INPUT });
    const ids = (await client.responses.inputItems.list(r.id, { order: 'asc' })).data.map((i) => i.id);
    const first = await client.responses.inputItems.list(r.id, { order: 'asc', limit: 4 });
    expect(first.data.map((i) => i.id)).toEqual(ids.slice(0, 4));
    expect(first.has_more).toBe(true);
    const second = await client.responses.inputItems.list(r.id, { order: 'asc', limit: 4, after: ids[3]! });
    expect(second.data.map((i) => i.id)).toEqual(ids.slice(4));
    expect(second.has_more).toBe(false);
    const seen: string[] = [];
    for await (const item of client.responses.inputItems.list(r.id, { limit: 2 })) seen.push(item.id);
    expect(seen).toEqual([...ids].reverse());
    // `before` (the API's, not in the SDK's params): the page right before the cursor, in the asked order.
    const before = (await (await fetch(`${url}/v1/responses/${r.id}/input_items?order=asc&limit=2&before=${ids[4]}`)).json()) as {
      data: Array<{ id: string }>;
      first_id: string;
      last_id: string;
      has_more: boolean;
    };
    expect(before.data.map((i) => i.id)).toEqual(ids.slice(2, 4));
    expect([before.first_id, before.last_id, before.has_more]).toEqual([ids[2], ids[3], true]);
  });

  it('inputItems.list: ids are unique, so auto-pagination ends even when a list holds one id twice', async () => {
    // A create may not carry one id twice (400 duplicate_item, as the API refuses it: duplicate-items.test.ts), but a
    // long-lived run's append may re-send an item of its input, and the list holds both.
    const { url, client } = await sdkWith(scriptPolicy([{ calls: [{ name: 'lookup', arguments: {}, call_id: 'call_t' }] }, { text: 'done' }]));
    const twice = { type: 'message', role: 'user', content: 'again', id: 'msg_twice' } as ResponseInputItem;
    await expect(client.responses.create({ model: 'm', input: [twice, twice] })).rejects.toMatchObject({ status: 400, code: 'duplicate_item', param: 'input' });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: [twice], tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } }] });
    const paused = await s.next('response.done');
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_t', output: 'x' }, twice] });
    await s.next('response.completed');
    const seen: string[] = [];
    for await (const item of client.responses.inputItems.list(paused.response.id, { limit: 1, order: 'asc' })) {
      seen.push(item.id);
      if (seen.length > 3) break;
    }
    expect(seen).toHaveLength(3);
    expect(seen[0]).toBe('msg_twice');
    expect(new Set(seen).size).toBe(3);
  });

  it('inputItems.list refuses bad parameters and unknown responses with errors the SDK raises', async () => {
    const { client, url } = await sdk();
    const r = await client.responses.create({ model: 'm', input: 'hello' });
    await expect(client.responses.inputItems.list('resp_missing')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    for (const [query, code, param] of [
      ['limit=0', 'integer_below_min_value', 'limit'],
      ['limit=101', 'integer_above_max_value', 'limit'],
      ['limit=two', 'invalid_type', 'limit'],
      ['order=up', 'invalid_value', 'order'],
      ['after=msg_missing', 'invalid_value', 'after'],
      // Only a decimal integer is an integer (Number() also reads these as one), and a parameter is given once.
      ['limit=1e2', 'invalid_type', 'limit'],
      ['limit=0x10', 'invalid_type', 'limit'],
      ['limit=%205', 'invalid_type', 'limit'],
      ['limit=5.0', 'invalid_type', 'limit'],
      ['limit=1&limit=50', 'invalid_value', 'limit'],
      ['order=asc&order=desc', 'invalid_value', 'order'],
      ['after=a&after=b', 'invalid_value', 'after'],
      ['before=a&before=b', 'invalid_value', 'before'],
      // include names the API's ResponseIncludable values, in either form.
      ['include=bogus', 'invalid_value', 'include[0]'],
      ['include[]=reasoning.encrypted_content&include[]=bogus', 'invalid_value', 'include[1]'],
    ] as const) {
      const res = await fetch(`${url}/v1/responses/${r.id}/input_items?${query}`);
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const post = await fetch(`${url}/v1/responses/${r.id}/input_items`, { method: 'POST' });
    expect(post.status).toBe(405);
    await expect(client.responses.inputItems.list(r.id, { limit: 0 })).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    // A valid include (the SDK sends include[]=…) changes nothing: what is stored is listed.
    const included = await client.responses.inputItems.list(r.id, { include: ['reasoning.encrypted_content', 'message.input_image.image_url'] });
    expect(included.data).toHaveLength(1);
    for (const ok of ['include=reasoning.encrypted_content', 'limit=007', 'limit=100']) expect((await fetch(`${url}/v1/responses/${r.id}/input_items?${ok}`)).status, ok).toBe(200);
  });

  it('retrieve with stream: true is refused (400, param stream), as the API refuses a response not made in the background', async () => {
    const { client } = await sdk();
    const r = await client.responses.create({ model: 'm', input: 'hello' });
    await expect(client.responses.retrieve(r.id, { stream: true })).rejects.toMatchObject({ status: 400, param: 'stream' });
    await expect(client.responses.stream({ response_id: r.id, starting_after: 2 }).finalResponse()).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    await expect(client.responses.retrieve('resp_missing', { stream: true })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // Without `stream` (or with `stream=false`) the JSON answer is unchanged.
    expect((await client.responses.retrieve(r.id)).id).toBe(r.id);
    expect((await client.responses.retrieve(r.id, { stream: false })).id).toBe(r.id);
  });

  it('cancel of a stored response that is not a live long-lived run: 400 (the API: not a background response), not 404', async () => {
    const { client } = await sdk();
    const r = await client.responses.create({ model: 'm', input: 'hello' });
    await expect(client.responses.cancel(r.id)).rejects.toMatchObject({ status: 400, param: 'response_id', code: 'invalid_value' });
    await expect(client.responses.cancel(r.id)).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    expect((await client.responses.retrieve(r.id)).status).toBe('completed');
    // Not stored, or unknown: still not found.
    const unstored = await client.responses.create({ model: 'm', input: 'hello', store: false });
    await expect(client.responses.cancel(unstored.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.cancel('resp_missing')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('item_reference to an input item by the id input_items lists', () => {
  // The API keeps a stored response's input items as items of its own, with ids, and an item_reference names any
  // stored item by its id. Here an item sent without an id is listed with one derived from its response and
  // position; such an id was refused item_not_found.
  for (const store of ['memory', 'file'] as const) {
    it(`a listed id (derived, or the client's own) can be referenced in a later create (${store} store); one of no listed item, or another key's, is item_not_found`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'llr-ref-'));
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      const { url } = await testServer({ store: store === 'memory' ? 'memory' : join(dir, 'r.db'), apiKeys: ['k', 'other'] });
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
      const r = await client.responses.create({ model: 'm', input: INPUT });
      const listed = (await client.responses.inputItems.list(r.id, { order: 'asc' })).data;
      expect(listed.map((i) => i.id)).toContain('msg_client_given');
      for (const [i, item] of listed.entries()) {
        // A call needs its output in the context, an output its call.
        const before = item.type === 'function_call_output' ? [INPUT[3]!] : [];
        const after = item.type === 'function_call' ? [INPUT[4]!] : [];
        const again = await client.responses.create({ model: 'm', input: [...before, { type: 'item_reference', id: item.id }, ...after] });
        const got = (await client.responses.inputItems.list(again.id, { order: 'asc' })).data[before.length]!;
        // The item resolved is the one listed at that position (listed under the new response's own id for it).
        expect({ ...got, id: item.id }, `#${i}`).toEqual(item);
      }
      const derived = listed[0]!.id;
      const elsewhere = derived.slice(0, -1) + (derived.endsWith('f') ? 'e' : 'f');
      const post = (key: string, id: string) =>
        fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'm', input: [{ type: 'item_reference', id }] }) });
      for (const [key, id] of [['k', elsewhere], ['other', derived]] as const) {
        const res = await post(key, id);
        expect(res.status, `${key} ${id}`).toBe(400);
        expect(((await res.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: 'item_not_found', param: 'input[0].id' });
      }
    });
  }
});
