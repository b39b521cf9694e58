/**
 * Echoed fields: a Response reports what the client asked for, as the API
 * does — the requested model name (aliases still route, and the server's own
 * record names the deployment that served it), each function tool with every
 * field and the API's defaults, and every field the Open Responses
 * `ResponseResource` schema requires. Over HTTP and WebSocket mode.
 */
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import type { Response } from '../../src/protocol/objects.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

/** The `required` list of the Open Responses ResponseResource schema. */
const REQUIRED = [
  'id', 'object', 'created_at', 'completed_at', 'status', 'incomplete_details', 'model', 'previous_response_id',
  'instructions', 'output', 'error', 'tools', 'tool_choice', 'truncation', 'parallel_tool_calls', 'text', 'top_p',
  'presence_penalty', 'frequency_penalty', 'top_logprobs', 'temperature', 'reasoning', 'user', 'usage',
  'max_output_tokens', 'max_tool_calls', 'store', 'background', 'service_tier', 'metadata', 'safety_identifier',
  'prompt_cache_key',
];

const bareTool = { type: 'function', name: 'lookup' };
const fullTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather for a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: false,
};

async function post(url: string, body: unknown): Promise<Response> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as Response;
}

describe('echoed fields', () => {
  it('HTTP: the requested model is echoed (alias or unknown name); the record names the deployment', async () => {
    const { url } = await testServer();
    for (const model of ['sim', 'gpt-5.1-codex', 'sim-model']) {
      const r = await post(url, { model, input: 'hello' });
      expect(r.model).toBe(model);
      const rec = (await (await fetch(`${url}/llr/runs/${r.id}`)).json()) as RunRecord;
      expect(rec.model).toBe('sim-model');
    }
  });

  it('HTTP: function tools are echoed with every field and the API defaults; other tools as sent', async () => {
    const { url } = await testServer();
    const other = { type: 'web_search', search_context_size: 'low' };
    const r = await post(url, { model: 'gpt-4.1', input: 'hello', tools: [bareTool, fullTool, other], tool_choice: 'none' });
    expect(r.tools).toEqual([
      { type: 'function', name: 'lookup', description: null, parameters: null, strict: true },
      fullTool,
      other,
    ]);
    const stored = (await (await fetch(`${url}/v1/responses/${r.id}`)).json()) as Response;
    expect(stored.tools).toEqual(r.tools);
    expect(stored.model).toBe('gpt-4.1');
  });

  it('HTTP: every field the ResponseResource schema requires is present, with API defaults', async () => {
    const { url } = await testServer();
    const r = await post(url, { model: 'sim-model', input: 'hello' });
    for (const k of REQUIRED) expect(r, k).toHaveProperty(k);
    expect(r).toMatchObject({
      object: 'response', status: 'completed', truncation: 'disabled', parallel_tool_calls: true,
      text: { format: { type: 'text' } }, top_p: 1, temperature: 1, presence_penalty: 0, frequency_penalty: 0,
      top_logprobs: 0, store: true, background: false, service_tier: 'default', metadata: {}, tool_choice: 'auto',
      tools: [], error: null, incomplete_details: null, max_tool_calls: null, conversation: null,
    });
    expect(Number.isInteger(r.completed_at)).toBe(true);
  });

  it('HTTP: usage has every field the OpenAPI spec requires: input_tokens_details.cache_write_tokens counts the prefix blocks stored anew', async () => {
    const { url } = await testServer();
    const input = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');
    const first = await post(url, { model: 'm', input, store: false });
    const again = await post(url, { model: 'm', input, store: false });
    const [a, b] = [first.usage!, again.usage!];
    // The first call finds nothing cached and stores every full 64-token block; the repeat reads them and stores none.
    expect(a.input_tokens_details).toEqual({ cached_tokens: 0, cache_write_tokens: Math.floor(a.input_tokens / 64) * 64 });
    expect(a.input_tokens_details.cache_write_tokens).toBeGreaterThan(0);
    expect(b.input_tokens_details).toEqual({ cached_tokens: a.input_tokens_details.cache_write_tokens, cache_write_tokens: 0 });
  });

  it('HTTP: sampling settings are echoed; bad values refused', async () => {
    const { url } = await testServer();
    const r = await post(url, { model: 'm', input: 'hi', truncation: 'auto', presence_penalty: 0.5, frequency_penalty: -1, temperature: 0.2, top_p: 0.9 });
    expect(r).toMatchObject({ truncation: 'auto', presence_penalty: 0.5, frequency_penalty: -1, temperature: 0.2, top_p: 0.9 });
    const bad = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', truncation: 'sometimes' }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('truncation');
  });

  it('HTTP: prompt_cache_retention is echoed as sent (null when omitted); a value outside the API\'s enum is refused naming it', async () => {
    const { url } = await testServer();
    expect((await post(url, { model: 'm', input: 'hi', prompt_cache_retention: '24h' })).prompt_cache_retention).toBe('24h');
    expect((await post(url, { model: 'm', input: 'hi', prompt_cache_retention: 'in_memory', stream: false })).prompt_cache_retention).toBe('in_memory');
    expect((await post(url, { model: 'm', input: 'hi' })).prompt_cache_retention).toBeNull();
    const bad = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', prompt_cache_retention: 'forever' }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; param: string } }).error).toMatchObject({
      code: 'invalid_value',
      param: 'prompt_cache_retention',
      // Two values joined by "and" alone (it said "'in_memory', and '24h'").
      message: "Invalid value for 'prompt_cache_retention': 'forever'. Supported values are: 'in_memory' and '24h'.",
    });
  });

  it('POST /v1/responses/compact refuses a prompt_cache_retention outside the enum as a create does (it took any value silently)', async () => {
    const { url } = await testServer();
    const compact = (body: object) => fetch(`${url}/v1/responses/compact`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const bad = await compact({ model: 'm', input: 'hi', prompt_cache_retention: 'forever' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: 'invalid_value', param: 'prompt_cache_retention' });
    expect((await compact({ model: 'm', input: 'hi', prompt_cache_retention: '24h' })).status).toBe(200);
    expect((await compact({ model: 'm', input: 'hi', prompt_cache_retention: null })).status).toBe(200);
  });

  it("HTTP: service_tier takes openai-node 7's values; 'fast' is echoed as the API echoes it, 'priority'", async () => {
    const { url } = await testServer();
    expect((await post(url, { model: 'm', input: 'hi', service_tier: 'ultrafast' })).service_tier).toBe('ultrafast');
    expect((await post(url, { model: 'm', input: 'hi', service_tier: 'fast' })).service_tier).toBe('priority');
    expect((await post(url, { model: 'm', input: 'hi', service_tier: 'flex' })).service_tier).toBe('flex');
    // 'auto' is the project's tier, 'default' unless configured otherwise; the Response shows the tier utilized
    // (openai-node's Response.service_tier: "the response body will include the service_tier utilized"). It showed 'auto'.
    expect((await post(url, { model: 'm', input: 'hi', service_tier: 'auto' })).service_tier).toBe('default');
  });

  it('POST /v1/responses/compact checks service_tier as a create does, against its own enum (it took any value silently)', async () => {
    const { url } = await testServer();
    const compact = (body: object) => fetch(`${url}/v1/responses/compact`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const bad = await compact({ model: 'm', input: 'hi', service_tier: 'bogus' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: unknown }).error).toMatchObject({
      code: 'invalid_value',
      param: 'service_tier',
      message: "Invalid value for 'service_tier': 'bogus'. Supported values are: 'auto', 'default', 'fast', 'flex', and 'priority'.",
    });
    const wrongType = await compact({ model: 'm', input: 'hi', service_tier: 5 });
    expect(wrongType.status).toBe(400);
    expect(((await wrongType.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_type', param: 'service_tier' });
    // The compaction's enum (the spec's ServiceTierEnum, openai-node's ResponseCompactParams): no 'scale'.
    expect((await compact({ model: 'm', input: 'hi', service_tier: 'scale' })).status).toBe(400);
    for (const service_tier of ['auto', 'default', 'fast', 'flex', 'priority', null]) {
      expect((await compact({ model: 'm', input: 'hi', service_tier })).status, String(service_tier)).toBe(200);
    }
  });

  it("access_programs: null on every Response (openai-node 7 declares it always present): JSON, retrieved, every SSE and WebSocket lifecycle event, a row an earlier build stored", async () => {
    const { url, server } = await testServer();
    const r = await post(url, { model: 'm', input: 'hi' });
    expect(r).toHaveProperty('access_programs', null);
    // A request's own (openai-node 7's `ResponseCreateParams.access_programs`, Codex's) is taken and ignored: none are served.
    expect(await post(url, { model: 'm', input: 'hi', access_programs: { cyber: 'standard' } })).toHaveProperty('access_programs', null);
    const got = (await (await fetch(`${url}/v1/responses/${r.id}`)).json()) as Response;
    expect(got).toHaveProperty('access_programs', null);
    const sse = await (await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', stream: true }) })).text();
    const withResponse = sse
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { response?: Response })
      .filter((e) => e.response);
    expect(withResponse.length).toBeGreaterThanOrEqual(3);
    for (const e of withResponse) expect(e.response).toHaveProperty('access_programs', null);
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'm', input: 'hello' });
    expect((await s.next('response.created')).response).toHaveProperty('access_programs', null);
    expect((await s.next('response.completed')).response).toHaveProperty('access_programs', null);
    // A row written before the field was sent (a SQLite file outlives the server) is read back with it.
    const rec = server.services.store.get(r.id, null)!;
    const { access_programs: _gone, ...old } = rec.response;
    server.services.store.put({ ...rec, response: { ...old, id: 'resp_old' } as Response });
    expect((await (await fetch(`${url}/v1/responses/resp_old`)).json()) as Response).toHaveProperty('access_programs', null);
  });

  it('max_tool_calls and top_logprobs are echoed as sent (they were null and 0 whatever was sent), on every Response; out of the API\'s bounds refused', async () => {
    const { url } = await testServer();
    const r = await post(url, { model: 'm', input: 'hi', max_tool_calls: 3, top_logprobs: 20 });
    expect(r).toMatchObject({ max_tool_calls: 3, top_logprobs: 20 });
    expect((await (await fetch(`${url}/v1/responses/${r.id}`)).json()) as Response).toMatchObject({ max_tool_calls: 3, top_logprobs: 20 });
    expect(await post(url, { model: 'm', input: 'hi', max_tool_calls: null, top_logprobs: null })).toMatchObject({ max_tool_calls: null, top_logprobs: 0 });
    expect(await post(url, { model: 'm', input: 'hi', top_logprobs: 0 })).toMatchObject({ max_tool_calls: null, top_logprobs: 0 });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'm', input: 'hello', max_tool_calls: 1, top_logprobs: 2 });
    expect((await s.next('response.created')).response).toMatchObject({ max_tool_calls: 1, top_logprobs: 2 });
    expect((await s.next('response.completed')).response).toMatchObject({ max_tool_calls: 1, top_logprobs: 2 });
    for (const [body, code, param] of [
      [{ max_tool_calls: 0 }, 'integer_below_min_value', 'max_tool_calls'],
      [{ max_tool_calls: 2.5 }, 'invalid_type', 'max_tool_calls'],
      [{ top_logprobs: 21 }, 'integer_above_max_value', 'top_logprobs'],
      [{ top_logprobs: -1 }, 'integer_below_min_value', 'top_logprobs'],
      [{ top_logprobs: '5' }, 'invalid_type', 'top_logprobs'],
    ] as const) {
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', ...body }) });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code, param });
    }
  });

  it("prompt_cache_options (openai-node 7) is echoed as applied, defaults filled in, and checked (it was taken unchecked, not echoed); none on a Response that did not send it", async () => {
    const { url } = await testServer();
    const full = { mode: 'explicit', ttl: '12h', prewarm: true, comparison_response_id: 'resp_abc' };
    const r = await post(url, { model: 'm', input: 'hi', prompt_cache_options: full });
    expect(r.prompt_cache_options).toEqual({ mode: 'explicit', ttl: '12h', comparison_response_id: 'resp_abc' });
    expect(((await (await fetch(`${url}/v1/responses/${r.id}`)).json()) as Response).prompt_cache_options).toEqual(r.prompt_cache_options);
    expect((await post(url, { model: 'm', input: 'hi', prompt_cache_options: {} })).prompt_cache_options).toEqual({ mode: 'implicit', ttl: '30m' });
    expect(await post(url, { model: 'm', input: 'hi' })).not.toHaveProperty('prompt_cache_options');
    expect(await post(url, { model: 'm', input: 'hi', prompt_cache_options: null })).not.toHaveProperty('prompt_cache_options');
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'm', input: 'hello', prompt_cache_options: { ttl: '12h' } });
    expect((await s.next('response.completed')).response.prompt_cache_options).toEqual({ mode: 'implicit', ttl: '12h' });
    const send = (path: string, body: object) => fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', ...body }) });
    for (const [options, code, param] of [
      ['x', 'invalid_type', 'prompt_cache_options'],
      [{ mode: 'auto' }, 'invalid_value', 'prompt_cache_options.mode'],
      [{ ttl: '24h' }, 'invalid_value', 'prompt_cache_options.ttl'],
      [{ prewarm: 'yes' }, 'invalid_type', 'prompt_cache_options.prewarm'],
      [{ comparison_response_id: 5 }, 'invalid_type', 'prompt_cache_options.comparison_response_id'],
    ] as const) {
      const res = await send('/v1/responses', { prompt_cache_options: options });
      expect(res.status, JSON.stringify(options)).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code, param });
    }
    // A compaction's (openai-node 7's ResponseCompactParams.prompt_cache_options): its ttl is '30m' only.
    expect((await send('/v1/responses/compact', { prompt_cache_options: { mode: 'explicit', ttl: '30m' } })).status).toBe(200);
    const bad = await send('/v1/responses/compact', { prompt_cache_options: { ttl: '12h' } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_value', param: 'prompt_cache_options.ttl' });
  });

  it("prompt_cache_options.prewarm: true prefills the prompt into the prefix cache and generates nothing (it was ignored: a whole turn, tool calls and all; atk111 F1)", async () => {
    const { url } = await testServer();
    const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } }];
    const text = (topic: string) => `call lookup for ${topic}. ${'The quick brown fox jumps over the lazy dog. '.repeat(100)}`;
    const body = (topic: string, prewarm?: boolean) => ({ model: 'm', input: text(topic), tools, tool_choice: 'required', prompt_cache_options: prewarm === undefined ? {} : { prewarm } });
    const warmed = await post(url, body('cats', true));
    expect(warmed.status).toBe('completed');
    expect(warmed.output).toEqual([]);
    expect(warmed.usage!.output_tokens).toBe(0);
    expect(warmed.usage!.input_tokens).toBeGreaterThan(500);
    expect(warmed.usage!.input_tokens_details.cached_tokens).toBe(0);
    // What it prefilled is cached: the same prompt sampled next reads most of it from the cache.
    const sampled = await post(url, body('cats', false));
    expect(sampled.output.map((i) => i.type)).toEqual(['function_call']);
    expect(sampled.usage!.input_tokens).toBe(warmed.usage!.input_tokens);
    expect(sampled.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(warmed.usage!.input_tokens / 2);
    // Over a WebSocket alike, whatever `generate` says (prewarm overrides it).
    const s = await RawSocket.connect(url);
    try {
      s.send({ type: 'response.create', ...body('dogs', true), generate: true });
      const done = (await s.next('response.completed')).response;
      expect(done.output).toEqual([]);
      expect(done.usage!.output_tokens).toBe(0);
      expect(done.usage!.input_tokens).toBeGreaterThan(500);
    } finally {
      s.dispose();
    }
    // Past context_management's threshold too: a compaction is output, and a prewarm makes none (atk112 F2).
    const over = await post(url, { ...body('owls', true), context_management: [{ type: 'compaction', compact_threshold: 1000 }] });
    expect(over.output).toEqual([]);
    expect(over.usage!.output_tokens).toBe(0);
    expect(over.usage!.input_tokens).toBeGreaterThan(1000);
  });

  it("background_options (openai-node 7) is checked, then ignored: the 2h and 8h windows need background, no stream, Standard processing (it was taken unchecked)", async () => {
    const { url } = await testServer();
    const send = (body: object) => fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', ...body }) });
    expect((await send({ background_options: { completion_window: 'soonest', continuation_id: 'c1' } })).status).toBe(200);
    expect((await send({ background_options: {}, stream: true })).status).toBe(200);
    const bg = await send({ background: true, service_tier: 'default', background_options: { completion_window: '2h' } });
    expect(bg.status).toBe(200);
    expect(await bg.json()).toMatchObject({ background: true, status: 'in_progress' });
    expect((await send({ background: true, background_options: { completion_window: '8h' } })).status).toBe(200);
    for (const [body, code, param] of [
      [{ background_options: 5 }, 'invalid_type', 'background_options'],
      [{ background_options: { completion_window: '1h' } }, 'invalid_value', 'background_options.completion_window'],
      [{ background_options: { continuation_id: 7 } }, 'invalid_type', 'background_options.continuation_id'],
      [{ background_options: { completion_window: '2h' } }, 'invalid_value', 'background_options.completion_window'],
      [{ background: true, stream: true, background_options: { completion_window: '8h' } }, 'invalid_value', 'background_options.completion_window'],
      [{ background: true, service_tier: 'flex', background_options: { completion_window: '2h' } }, 'invalid_value', 'background_options.completion_window'],
    ] as const) {
      const res = await send(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code, param });
    }
  });

  it('conversation and prompt (not served here) are refused, 400 unsupported_parameter naming them, on a create and input_tokens; null is absent (they were taken and ignored: no history, no template)', async () => {
    const { url } = await testServer();
    const send = (path: string, body: object) => fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', ...body }) });
    for (const path of ['/v1/responses', '/v1/responses/input_tokens']) {
      // input_tokens has no `prompt` (openai-node's InputTokenCountParams): it is an unknown parameter there (input-tokens.test.ts).
      const both = path === '/v1/responses';
      expect((await send(path, both ? { conversation: null, prompt: null } : { conversation: null })).status, path).toBe(200);
      for (const [param, value] of [['conversation', 'conv_1'], ['conversation', { id: 'conv_1' }], ['prompt', { id: 'pmpt_1', variables: {} }]] as const) {
        if (param === 'prompt' && !both) continue;
        const res = await send(path, { [param]: value });
        expect(res.status, `${path} ${param}`).toBe(400);
        const error = ((await res.json()) as { error: { message: string } }).error;
        expect(error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param });
        expect(error.message).toMatch(new RegExp(`^Unsupported parameter: '${param}': no .* are served here`));
      }
      // Not the shape openai-node types them with: a bad value (it read as a feature asked for).
      for (const [param, value] of [['conversation', false], ['conversation', 0], ['prompt', 'pmpt_1'], ['prompt', []]] as const) {
        if (param === 'prompt' && !both) continue;
        const res = await send(path, { [param]: value });
        expect(res.status, `${path} ${param}`).toBe(400);
        expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_type', param });
      }
    }
    const prompted = await send('/v1/responses/input_tokens', { prompt: { id: 'pmpt_1' } });
    expect(((await prompted.json()) as { error: unknown }).error).toMatchObject({ code: 'unknown_parameter', param: 'prompt' });
  });

  it("reasoning: openai-node 7's context and mode are echoed when sent (they were dropped), generate_summary is summary's old name; bad values refused", async () => {
    const { url } = await testServer();
    const r = await post(url, { model: 'm', input: 'hi', reasoning: { effort: 'low', summary: 'concise', context: 'all_turns', mode: 'pro' } });
    expect(r.reasoning).toEqual({ effort: 'low', summary: 'concise', context: 'all_turns', mode: 'pro' });
    expect((await post(url, { model: 'm', input: 'hi', reasoning: { generate_summary: 'detailed' } })).reasoning).toEqual({ effort: null, summary: 'detailed' });
    expect((await post(url, { model: 'm', input: 'hi', reasoning: { generate_summary: 'detailed', summary: 'auto' } })).reasoning).toEqual({ effort: null, summary: 'auto' });
    expect((await post(url, { model: 'm', input: 'hi', reasoning: { effort: 'high' } })).reasoning).toEqual({ effort: 'high', summary: null });
    for (const [reasoning, code, param] of [
      [{ context: 'everything' }, 'invalid_value', 'reasoning.context'],
      [{ mode: 5 }, 'invalid_type', 'reasoning.mode'],
      [{ mode: '' }, 'invalid_value', 'reasoning.mode'],
      [{ generate_summary: 'long' }, 'invalid_value', 'reasoning.generate_summary'],
    ] as const) {
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', reasoning }) });
      expect(res.status, JSON.stringify(reasoning)).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code, param });
    }
  });

  it('text.format is echoed, and the text answer follows it (json_schema, json_object)', async () => {
    const { url } = await testServer();
    const schema = { type: 'object', properties: { city: { type: 'string' }, answer: { type: 'string' }, ok: { type: 'boolean' } }, required: ['city', 'answer', 'ok'], additionalProperties: false };
    const text = { format: { type: 'json_schema', name: 'weather', schema, strict: true }, verbosity: 'low' };
    const r = await post(url, { model: 'm', input: 'Weather in Rome?', text });
    expect(r.text).toEqual(text);
    const answer = JSON.parse((r.output[0] as { content: Array<{ text: string }> }).content[0]!.text) as Record<string, unknown>;
    expect(Object.keys(answer).sort()).toEqual(['answer', 'city', 'ok']);
    expect(answer).toMatchObject({ city: 'Rome', ok: true });
    const o = await post(url, { model: 'm', input: 'hi, in json', text: { format: { type: 'json_object' } } });
    expect(JSON.parse((o.output[0] as { content: Array<{ text: string }> }).content[0]!.text)).toHaveProperty('answer');
    const bad = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'x' } } }) });
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('text.format.schema');
  });

  it('a forced tool must be among the tools, and "required" needs tools', async () => {
    const { url } = await testServer();
    for (const body of [{ tool_choice: { type: 'function', name: 'nope' }, tools: [bareTool] }, { tool_choice: 'required' }]) {
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', ...body }) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: 'invalid_value', param: 'tool_choice' });
    }
  });

  it('WebSocket mode: created and completed echo the model and the tools', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'my-model', input: 'hello', tools: [bareTool], tool_choice: 'none' });
    const created = await s.next('response.created');
    const done = await s.next('response.completed');
    for (const r of [created.response, done.response]) {
      expect(r.model).toBe('my-model');
      expect(r.tools).toEqual([{ type: 'function', name: 'lookup', description: null, parameters: null, strict: true }]);
      for (const k of REQUIRED) expect(r, k).toHaveProperty(k);
    }
  });
});
