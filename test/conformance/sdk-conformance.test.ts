/**
 * What an outside client of the Responses API reads, checked with the
 * project's pinned `openai` SDK and raw HTTP (an outside conformance pass with
 * openai-node 7.59): the error object of a failed create without `stream`,
 * `include` on a create, and a forced `tool_choice` naming a tool the request
 * does not declare.
 */
import OpenAI, { APIError } from 'openai';
import pDefer from 'p-defer';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { gatedModel } from '../helpers/gated-model.js';
import { testServer } from '../helpers/server.js';

const post = (url: string, body: unknown) =>
  fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

describe('a create without stream that the server fails', () => {
  it("answers 500 with an error object the SDK reads whole (type, code, param, message), the failed Response's fields kept", async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'hello there' }]), chaos: ['error@first-token'] });
    const res = await post(url, { model: 'sim-model', input: 'hi' });
    expect(res.status).toBe(500);
    const body = (await res.json()) as { status: string; error: Record<string, unknown> };
    // The OpenAPI spec's ErrorResponse: {error: {type, message, param, code}}, all four required.
    expect(body.error).toEqual({ type: 'server_error', code: 'server_error', param: null, message: expect.stringContaining('error@first-token') });
    expect(body.status).toBe('failed');

    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const err = await client.responses.create({ model: 'sim-model', input: 'hi' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ status: 500, type: 'server_error', code: 'server_error', param: null });
  });
});

describe("a create's include", () => {
  it('takes the API\'s ResponseIncludable values and refuses any other as input_items does (400 invalid_value, param include[i])', async () => {
    const { url } = await testServer();
    const ok = await post(url, { model: 'sim-model', input: 'hi', include: ['reasoning.encrypted_content', 'message.output_text.logprobs'] });
    expect(ok.status).toBe(200);
    expect((await post(url, { model: 'sim-model', input: 'hi', include: null })).status).toBe(200);

    const bad = await post(url, { model: 'sim-model', input: 'hi', include: ['reasoning.encrypted_content', 'bogus'] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'include[1]' });
    const notList = await post(url, { model: 'sim-model', input: 'hi', include: 'reasoning.encrypted_content' });
    expect(((await notList.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_type', param: 'include' });
    const notString = await post(url, { model: 'sim-model', input: 'hi', include: [5] });
    expect(((await notString.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_type', param: 'include[0]' });
    // The same value the listing refuses.
    const id = ((await ok.json()) as { id: string }).id;
    const listing = await fetch(`${url}/v1/responses/${id}/input_items?include[]=bogus`);
    expect(((await listing.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_value', param: 'include[0]' });
  });
});

describe('a forced tool_choice naming a tool the request does not declare', () => {
  const fn = { type: 'function', name: 'get_weather', description: 'Get weather', parameters: { type: 'object', properties: { location: { type: 'string' } } } };
  const custom = { type: 'custom', name: 'run_sql', description: 'Run SQL' };
  const mcp = { type: 'mcp', server_label: 'docs', server_url: 'https://example.invalid/mcp', require_approval: 'never' };
  it.each([
    [{ type: 'custom', name: 'nope' }, 'invalid_value', 'tool_choice'],
    [{ type: 'custom' }, 'missing_required_parameter', 'tool_choice.name'],
    [{ type: 'mcp', server_label: 'nope' }, 'invalid_value', 'tool_choice'],
  ])('%j is refused as a missing function is (400, param tool_choice)', async (choice, code, param) => {
    const { url } = await testServer();
    const res = await post(url, { model: 'sim-model', input: 'weather in Paris', tools: [fn, custom, mcp], tool_choice: choice });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code, param });
  });

  // The simulated model calls function tools only: a declared custom or MCP tool forced is refused unsupported_value,
  // not answered with a message where the API makes the call (test/conformance/tool-choice.test.ts).
  it.each([[{ type: 'custom', name: 'run_sql' }], [{ type: 'mcp', server_label: 'docs' }], [{ type: 'mcp' }]])('%j naming a declared tool is refused unsupported_value', async (choice) => {
    const { url } = await testServer();
    const res = await post(url, { model: 'sim-model', input: 'hi', tools: [fn, custom, mcp], tool_choice: choice });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_value', param: 'tool_choice' });
  });
});

describe('a strict text.format JSON schema', () => {
  const strictOk = {
    type: 'object',
    properties: { city: { type: 'string' }, tags: { type: 'array', items: { $ref: '#/$defs/tag' } }, nested: { anyOf: [{ type: 'object', properties: { x: { type: 'integer' } }, required: ['x'], additionalProperties: false }, { type: 'null' }] } },
    required: ['city', 'tags', 'nested'],
    additionalProperties: false,
    $defs: { tag: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false } },
  };
  const format = (schema: unknown, strict: boolean | null = true) => ({ type: 'json_schema', name: 'weather', schema, ...(strict !== null && { strict }) });

  it("follows the API's strict subset: every object schema has additionalProperties: false and requires every property", async () => {
    const { url } = await testServer();
    const ok = await post(url, { model: 'sim-model', input: 'weather in Paris', text: { format: format(strictOk) } });
    expect(ok.status).toBe(200);
    const cases: Array<[unknown, string]> = [
      [{ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, "In context=(), 'additionalProperties' is required to be supplied and to be false."],
      [{ type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } }, required: ['a'], additionalProperties: false }, "Missing 'b'."],
      [{ ...strictOk, $defs: { tag: { type: 'object', properties: { name: { type: 'string' } }, additionalProperties: false } } }, "In context=('$defs', 'tag'), 'required' is required"],
      [{ ...strictOk, properties: { ...strictOk.properties, nested: { anyOf: [{ type: 'object', properties: {}, required: [] }, { type: 'null' }] } } }, "In context=('properties', 'nested', 'anyOf', '0'), 'additionalProperties'"],
      [{ type: 'array', items: { type: 'string' } }, 'schema must be a JSON Schema of \'type: "object"\', got \'type: "array"\'.'],
    ];
    for (const [schema, message] of cases) {
      const res = await post(url, { model: 'sim-model', input: 'weather in Paris', text: { format: format(schema) } });
      expect(res.status, JSON.stringify(schema)).toBe(400);
      const { error } = (await res.json()) as { error: { message: string } };
      expect(error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json_schema', param: 'text.format.schema' });
      expect(error.message).toContain("Invalid schema for response_format 'weather'");
      expect(error.message).toContain(message);
    }
    // Without strict (the API's default is false) the same loose schema is taken.
    const loose = { type: 'object', properties: { a: { type: 'string' } } };
    expect((await post(url, { model: 'sim-model', input: 'x', text: { format: format(loose, null) } })).status).toBe(200);
    expect((await post(url, { model: 'sim-model', input: 'x', text: { format: format(loose, false) } })).status).toBe(200);
  });
});

describe("text.format json_schema's own fields", () => {
  const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false };
  it.each([
    [{ name: 'a b' }, 'invalid_value', 'text.format.name'],
    [{ name: 'n'.repeat(65) }, 'invalid_value', 'text.format.name'],
    [{ name: 'ok', strict: 'yes' }, 'invalid_type', 'text.format.strict'],
    [{ name: 'ok', description: 5 }, 'invalid_type', 'text.format.description'],
  ])('%j is refused (400), not echoed with a type typed clients cannot decode', async (fields, code, param) => {
    const { url } = await testServer();
    const res = await post(url, { model: 'sim-model', input: 'x', text: { format: { type: 'json_schema', schema, ...fields } } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code, param });
  });

  it('echoes name, schema, description and strict as sent, and nothing else', async () => {
    const { url } = await testServer();
    const format = { type: 'json_schema', name: 'out-1', schema, description: 'the answer', strict: null };
    const res = await post(url, { model: 'sim-model', input: 'x', text: { format: { ...format, extra: 1 } } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: unknown }).text).toEqual({ format });
  });
});

describe('echoed tool fields of the wrong type', () => {
  it.each([
    [{ tools: [{ type: 'function', name: 'f', parameters: { type: 'object' }, strict: 'yes' }] }, 'tools[0].strict'],
    [{ tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'f' }, 5] } }, 'tool_choice.tools[1]'],
    [{ tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 5, name: 'f' }] } }, 'tool_choice.tools[0].type'],
  ])('%j is refused (400 invalid_type), not echoed for typed clients to fail on', async (fields, param) => {
    const { url } = await testServer();
    const res = await post(url, { model: 'sim-model', input: 'x', ...fields });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_type', param });
  });

  it("an allowed_tools entry without its type is refused too, as missing it (as in tools; atk112 F3)", async () => {
    const { url } = await testServer();
    const res = await post(url, { model: 'sim-model', input: 'x', tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ name: 'f' }] } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 'missing_required_parameter', param: 'tool_choice.tools[0].type' });
  });

  it('strict: null and allowed_tools of tool definitions are taken', async () => {
    const { url } = await testServer();
    const tools = [{ type: 'function', name: 'f', parameters: { type: 'object' }, strict: null }];
    const res = await post(url, { model: 'sim-model', input: 'x', tools, tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'f' }] } });
    expect(res.status).toBe(200);
  });
});

describe('a background response in flight, as retrieve finds it', () => {
  const input = [{ role: 'developer', content: 'be brief' }, { role: 'user', content: 'write a story' }];

  it('lists its input items (the ids the stored list has once it ends)', async () => {
    const gated = gatedModel();
    const { url } = await testServer({ model: gated.model });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.responses.create({ model: 'sim-model', input: input as never, background: true });
    expect((await client.responses.retrieve(r.id)).status).toBe('in_progress');
    const page = await client.responses.inputItems.list(r.id, { order: 'asc' });
    expect(page.data.map((i) => (i as { role?: string }).role)).toEqual(['developer', 'user']);
    const desc = await client.responses.inputItems.list(r.id, { limit: 1 });
    expect(desc.data.map((i) => (i as { role?: string }).role)).toEqual(['user']);
    expect(desc.has_more).toBe(true);
    const inFlightIds = page.data.map((i) => i.id);
    gated.release();
    // Its stream ends after the terminal event, by which time the final Response is stored.
    const types: string[] = [];
    for await (const e of await client.responses.retrieve(r.id, { stream: true })) types.push(e.type);
    expect(types.at(-1)).toBe('response.completed');
    expect((await client.responses.inputItems.list(r.id, { order: 'asc' })).data.map((i) => i.id)).toEqual(inFlightIds);
  });

  it('is deleted by DELETE (its run cancelled): 200 deleted, then 404 everywhere', async () => {
    const gated = gatedModel();
    const { url } = await testServer({ model: gated.model });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.responses.create({ model: 'sim-model', input: input as never, background: true });
    const del = await fetch(`${url}/v1/responses/${r.id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ id: r.id, object: 'response', deleted: true });
    const calls = [() => client.responses.retrieve(r.id), () => client.responses.inputItems.list(r.id), () => client.responses.retrieve(r.id, { stream: true }), () => client.responses.delete(r.id)];
    for (const call of calls) await expect(call()).rejects.toMatchObject({ status: 404 });
  });

  it('two DELETEs in flight together: one deletes it (200), the other finds it deleted (404)', async () => {
    const gated = gatedModel();
    const { server, url } = await testServer({ model: gated.model });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.responses.create({ model: 'sim-model', input: input as never, background: true });
    // Both DELETEs reach the run before it ends: the first's cancel is held until the second's has been asked.
    type Cancel = (id: string, owner: string | null) => Promise<unknown> | undefined;
    const background = (server.httpTransport as unknown as { host: { background: { cancel: Cancel } } }).host.background;
    const cancel = background.cancel.bind(background);
    let secondAsked!: () => void;
    const asked = new Promise<void>((resolve) => (secondAsked = resolve));
    let calls = 0;
    background.cancel = (id, owner) => {
      if (++calls === 1) return asked.then(() => cancel(id, owner));
      const final = cancel(id, owner);
      secondAsked();
      return final;
    };
    const del = () => fetch(`${url}/v1/responses/${r.id}`, { method: 'DELETE' }).then((res) => res.status);
    const statuses = await Promise.all([del(), del()]);
    expect(calls).toBe(2);
    expect(statuses.sort()).toEqual([200, 404]);
  });
});

describe('a background response deleted in flight, under other post-inference work', () => {
  it('answers its DELETE once the work pending when it asked is done, not when no work is left', async () => {
    const gated = gatedModel();
    const { url, server } = await testServer({ model: gated.model });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.responses.create({ model: 'sim-model', input: 'write a story', background: true });
    // A follower of its stream sees it end cancelled, by which time the DELETE waits for the work pending.
    const events = (await client.responses.retrieve(r.id, { stream: true }))[Symbol.asyncIterator]();
    const work = server.services.postWork;
    // Other runs' post-inference work: one job pending when the DELETE starts, another deferred while it waits.
    const before = pDefer<void>();
    const after = pDefer<void>();
    work.defer(() => before.promise);
    const del = fetch(`${url}/v1/responses/${r.id}`, { method: 'DELETE' });
    for (let e = await events.next(); !e.done; e = await events.next()) if ((e.value as { type: string }).type === 'response.cancelled') break;
    work.defer(() => after.promise);
    before.resolve();
    const res = await del;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: r.id, object: 'response', deleted: true });
    after.resolve();
  });
});

describe('metadata bounds, in characters as the API counts them', () => {
  it('16 pairs, keys of 64 and values of 512 code points are taken (an emoji is one); one more is refused', async () => {
    const { url } = await testServer();
    const emoji = '\u{1F600}';
    const ok = { ['k'.repeat(63) + emoji]: emoji.repeat(512), ...Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, 'v'])) };
    const res = await post(url, { model: 'sim-model', input: 'x', metadata: ok });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { metadata: unknown }).metadata).toEqual(ok);
    for (const [metadata, param] of [
      [{ k: emoji.repeat(513) }, 'metadata.k'],
      [{ ['k'.repeat(64) + emoji]: 'v' }, 'metadata'],
      [{ ...ok, extra: 'v' }, 'metadata'],
    ] as const) {
      const bad = await post(url, { model: 'sim-model', input: 'x', metadata });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { param: string } }).error.param).toBe(param);
    }
  });
});
