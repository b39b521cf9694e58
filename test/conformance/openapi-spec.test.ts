/**
 * Every object the server sends, checked against OpenAI's own OpenAPI spec
 * for the Responses API (github.com/openai/openai-openapi, MIT): the
 * Response (JSON, retrieved, and inside every lifecycle event), every
 * streamed event type (SSE, WebSocket mode, and the standard events of the
 * long-lived design), the error event in both shapes, HTTP error bodies, the
 * input item list, input token counts and the compaction answer.
 *
 * The schemas are `test/fixtures/openai-responses-schemas.json`: the spec's
 * `components.schemas` reachable from the schemas checked here, at the commit
 * it names, with its licence. To regenerate from a newer spec, take
 * `openapi.json` of openai/openai-openapi, collect the schemas reachable by
 * `$ref` from the file's `roots`, drop the keywords its `extracted` field
 * lists, rewrite each `$ref` to `#/$defs/NAME`, and record the commit.
 *
 * Where the spec and the API it describes disagree, the API wins and the
 * test says so (`SPEC_FIXES`): the spec's own examples of a Response carry
 * `user: null` and, before the end, `usage: null`, which its schema does not
 * allow; two of its item resources require a property they do not have, and
 * its prompt-cache TTL enum is older than openai-node 7.59's. Events this server adds on purpose (the long-lived pause
 * `response.done`, `response.cancelled`, the opt-in `llr:timing`) are not in
 * the spec; `response.done` carries a Response, which is checked.
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import type { Model } from '../../src/model/types.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { parseSse } from '../helpers/sse-stream.js';

type Json = Record<string, any>;

const fixture = JSON.parse(readFileSync(new URL('../fixtures/openai-responses-schemas.json', import.meta.url), 'utf8')) as {
  commit: string;
  event_types: Record<string, string>;
  $defs: Record<string, Json>;
};

/** The spec's schemas, with `nullable` added where the API (and the spec's own examples) send null. */
function specSchemas(): Record<string, Json> {
  const defs = structuredClone(fixture.$defs);
  const nullable = (s: Json): Json => ({ anyOf: [s, { type: 'null' }] });
  const SPEC_FIXES = () => {
    const modelProps = defs['ModelResponseProperties']!['properties'];
    modelProps.user = nullable(modelProps.user);
    const own = (defs['Response']!['allOf'] as Json[]).find((p) => p['properties']?.usage)!['properties'];
    own.usage = nullable(own.usage);
    // Required names that are no property of theirs (openai-node 7.59 has neither: `McpApprovalResponse` has
    // `approval_request_id`, `LocalShellCallOutput` names its call by `id`): no item can carry them.
    const drop = (name: string, key: string) => (defs[name]!['required'] = (defs[name]!['required'] as string[]).filter((k) => k !== key));
    drop('MCPApprovalResponseResource', 'request_id');
    drop('LocalShellToolCallOutput', 'call_id');
    // openai-node 7.59's `Response.prompt_cache_options.ttl` is `'30m' | '12h'`, as its create takes; the spec has `30m` only.
    defs['PromptCacheTTLEnum']!['enum'] = [...(defs['PromptCacheTTLEnum']!['enum'] as string[]), '12h'];
  };
  SPEC_FIXES();
  return defs;
}

// OpenAPI 3.1 schemas are JSON Schema 2020-12; the spec's keywords outside it (x-*, a 2019-09
// `$recursiveAnchor` in the file-search filters, never sent here) are ignored, not refused.
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false, validateSchema: false });
ajv.addSchema({ $id: 'openai', $defs: specSchemas() });
const compiled = new Map<string, ValidateFunction>();

/** The schema's errors for `value` (empty when it conforms), each as `path message`. */
function violations(schema: string, value: unknown): string[] {
  let v = compiled.get(schema);
  if (!v) compiled.set(schema, (v = ajv.compile({ $ref: `openai#/$defs/${schema}` })));
  if (v(value)) return [];
  return (v.errors ?? []).map((e) => `${schema}${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
}

/** This server's own events, not in the spec (docs/protocol.md). */
const EXTENSIONS = new Set(['response.done', 'response.cancelled', 'llr:timing']);

/**
 * Every event checked: a standard one against its schema, the WebSocket `error` against the nested shape the spec gives
 * it and also against the flat `ResponseErrorEvent`, which openai-node's `ResponsesServerEvent` types on a WebSocket
 * (its `code`, `message`, `param` were missing there: outside conformance tester atk118 F2).
 */
function eventViolations(events: readonly Json[], transport: 'sse' | 'ws'): string[] {
  const out: string[] = [];
  for (const e of events) {
    const where = (v: string) => `${transport} #${e['sequence_number']} ${e['type']}: ${v}`;
    if (e['type'] === 'response.done') out.push(...violations('Response', e['response']).map(where));
    if (transport === 'ws' && e['type'] === 'error') out.push(...violations('ResponseErrorEvent', e).map(where));
    if (EXTENSIONS.has(e['type'])) continue;
    const schema = transport === 'ws' && e['type'] === 'error' ? 'ResponseWsError' : fixture.event_types[e['type']];
    if (!schema) out.push(where('not an event type of the spec'));
    else out.push(...violations(schema, e).map(where));
  }
  return out;
}

async function call(url: string, path: string, body?: unknown, method = body === undefined ? 'GET' : 'POST'): Promise<{ status: number; text: string; json: () => Json }> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) as Json };
}

const weather = { type: 'function', name: 'get_weather', description: 'Weather for a city.', parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } };
const shell = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } };
const WEATHER_Q = "What's the weather in San Francisco?";

/** Each input item type of openai-node 7.59's `ResponseInputItem`, as it types them (a call with its output). */
const strictFn = { type: 'function', name: 'get_weather', description: 'w', parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'], additionalProperties: false }, strict: true };
const hi = { role: 'user', content: 'hi' };
const SWEEP_ITEMS: Record<string, Json[]> = {
  easy_roles: [{ role: 'system', content: 's' }, { role: 'developer', content: 'd' }, { role: 'assistant', content: 'a' }, hi],
  parts: [{ type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 't' }, { type: 'input_image', image_url: 'https://e/a.png', detail: 'low' }, { type: 'input_file', file_id: 'file-1' }, { type: 'input_file', filename: 'a.txt', file_data: 'data:text/plain;base64,YQ==' }, { type: 'input_file', file_url: 'https://e/a.pdf' }] }],
  output_message: [hi, { type: 'message', id: 'msg_o1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'x', annotations: [] }, { type: 'refusal', refusal: 'no' }] }, hi],
  file_search: [hi, { type: 'file_search_call', id: 'fs_1', queries: ['q'], status: 'completed', results: null }, hi],
  web_search: [hi, { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'q' } }, hi],
  function: [hi, { type: 'function_call', id: 'fc_1', call_id: 'c1', name: 'get_weather', arguments: '{}', status: 'completed' }, { type: 'function_call_output', id: 'fco_1', call_id: 'c1', output: 'ok', status: 'completed' }],
  reasoning: [hi, { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 's' }], encrypted_content: 'enc' }, hi],
  image_generation: [hi, { type: 'image_generation_call', id: 'ig_1', result: null, status: 'completed' }, hi],
  code_interpreter: [hi, { type: 'code_interpreter_call', id: 'ci_1', code: 'print(1)', container_id: 'cntr', outputs: null, status: 'completed' }, hi],
  local_shell: [hi, { type: 'local_shell_call', id: 'lsc_1', call_id: 'c7', action: { type: 'exec', command: ['ls'], env: {} }, status: 'completed' }, { type: 'local_shell_call_output', id: 'lsc_1', output: 'x' }, hi],
  apply_patch: [hi, { type: 'apply_patch_call', call_id: 'c8', operation: { type: 'create_file', path: 'a', diff: '+x' }, status: 'completed' }, { type: 'apply_patch_call_output', call_id: 'c8', status: 'completed', output: 'ok' }, hi],
  mcp: [hi, { type: 'mcp_list_tools', id: 'ml_1', server_label: 's', tools: [{ name: 't', input_schema: {} }] }, { type: 'mcp_approval_request', id: 'mr_1', arguments: '{}', name: 't', server_label: 's' }, { type: 'mcp_approval_response', approval_request_id: 'mr_1', approve: true }, { type: 'mcp_call', id: 'mc_1', arguments: '{}', name: 't', server_label: 's' }, hi],
  custom: [hi, { type: 'custom_tool_call', call_id: 'c9', name: 'c', input: 'x' }, { type: 'custom_tool_call_output', call_id: 'c9', output: 'ok' }, hi],
};
const SWEEP_TOOLS: Json[] = [
  strictFn,
  { type: 'file_search', vector_store_ids: ['vs'] },
  { type: 'computer_use_preview', display_height: 1, display_width: 1, environment: 'linux' },
  { type: 'web_search' },
  { type: 'web_search_preview' },
  { type: 'mcp', server_label: 's', server_url: 'https://e' },
  { type: 'code_interpreter', container: { type: 'auto' } },
  { type: 'image_generation' },
  { type: 'local_shell' },
  { type: 'shell' },
  { type: 'custom', name: 'c' },
  { type: 'apply_patch' },
];
/** Metadata at the API's limits: 16 pairs, keys of 64 characters, values of 512. */
const md: Record<string, string> = {};
for (let i = 0; i < 16; i++) md[`k${i}`.padEnd(64, 'x')] = 'v'.repeat(512);
const SWEEP_PARAMS: Record<string, Json> = {
  include: { include: ['file_search_call.results', 'web_search_call.results', 'web_search_call.action.sources', 'message.input_image.image_url', 'computer_call_output.output.image_url', 'code_interpreter_call.outputs', 'reasoning.encrypted_content', 'message.output_text.logprobs'] },
  json_schema: { text: { format: { type: 'json_schema', name: 'r', schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false }, strict: true }, verbosity: 'low' } },
  // JSON mode needs the word in the conversation, as the API requires (test/conformance/json-object-format.test.ts).
  json_object: { input: "What's the weather in Paris? Answer in JSON.", text: { format: { type: 'json_object' } } },
  reasoning: { reasoning: { effort: 'high', summary: 'detailed' } },
  reasoning_min: { reasoning: { effort: 'minimal', generate_summary: 'concise' } },
  truncation: { truncation: 'auto' },
  max_out: { max_output_tokens: 16 },
  parallel: { parallel_tool_calls: false, tools: [strictFn], tool_choice: { type: 'function', name: 'get_weather' } },
  metadata: { metadata: md },
  cache: { prompt_cache_key: 'pck', prompt_cache_retention: '24h', prompt_cache_options: { mode: 'explicit', ttl: '12h' } },
  tier_auto: { service_tier: 'auto' },
  tier_default: { service_tier: 'default' },
  tier_flex: { service_tier: 'flex' },
  tier_priority: { service_tier: 'priority' },
  tier_scale: { service_tier: 'scale' },
  all_tools: { tools: SWEEP_TOOLS, tool_choice: 'auto' },
  tool_choice_allowed: { tools: [strictFn], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'get_weather' }] } },
  // A hosted tool forced outright is refused (the model never calls one: test/conformance/tool-choice.test.ts); listed as allowed, it is echoed.
  tool_choice_hosted: { tools: SWEEP_TOOLS, tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'web_search_preview' }, { type: 'function', name: 'get_weather' }] } },
  sampling: { temperature: 0.5, top_p: 0.9, top_logprobs: 3, max_tool_calls: 2, user: 'u', safety_identifier: 'sid' },
  store_false: { store: false },
};

describe(`OpenAI OpenAPI spec (openai/openai-openapi ${fixture.commit.slice(0, 7)})`, () => {
  it('HTTP: a Response as JSON and retrieved, text and function calls; the input item list; input token counts; compaction', async () => {
    const { url } = await testServer();
    const found: string[] = [];
    const text = await call(url, '/v1/responses', { model: 'm', input: 'hello there' });
    expect(text.status).toBe(200);
    found.push(...violations('Response', text.json()));
    const fc = await call(url, '/v1/responses', { model: 'm', input: WEATHER_Q, tools: [weather] });
    const callItem = (fc.json()['output'] as Json[]).find((i) => i['type'] === 'function_call')!;
    expect(callItem).toBeDefined();
    found.push(...violations('Response', fc.json()));
    const input = [
      { role: 'system', content: 'be brief' },
      { role: 'assistant', content: 'earlier answer' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'as a list' }] },
      { type: 'function_call_output', call_id: callItem['call_id'], output: 'sunny' },
      { role: 'user', content: [{ type: 'input_text', text: 'thanks' }] },
    ];
    const next = await call(url, '/v1/responses', { model: 'm', previous_response_id: fc.json()['id'], input, tools: [weather], max_output_tokens: 16 });
    expect(next.json()['status']).toBe('incomplete');
    found.push(...violations('Response', next.json()));
    for (const id of [text.json()['id'], next.json()['id']]) {
      found.push(...violations('Response', (await call(url, `/v1/responses/${id}`)).json()));
      const items = await call(url, `/v1/responses/${id}/input_items?order=asc`);
      expect(items.status).toBe(200);
      found.push(...violations('ResponseItemList', items.json()));
    }
    found.push(...violations('TokenCountsResource', (await call(url, '/v1/responses/input_tokens', { model: 'm', input: 'hello' })).json()));
    const compacted = await call(url, '/v1/responses/compact', { model: 'm', input: [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: 'c' }] });
    expect(compacted.status).toBe(200);
    found.push(...violations('CompactResource', compacted.json()));
    expect(found).toEqual([]);
  });

  it('HTTP: the input item list of image parts and of the other tool items, each sent as openai-node types it (optional fields left out)', async () => {
    const { url } = await testServer();
    const hi = { role: 'user', content: 'hi' };
    const inputs: Record<string, Json[]> = {
      // ResponseInputImage: `detail` is optional to send; the listed InputImageContent requires it (the API's default, auto).
      image: [{ role: 'user', content: [{ type: 'input_text', text: 'look' }, { type: 'input_image', image_url: 'https://example.com/a.png' }] }],
      function_output_image: [
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'o' }, { type: 'input_image', image_url: 'https://example.com/a.png' }] },
        hi,
      ],
      // ResponseCustomToolCall and ResponseCustomToolCallOutput have no `status`; their resources require one.
      custom: [
        { type: 'custom_tool_call', call_id: 'c2', name: 'apply', input: 'x' },
        { type: 'custom_tool_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'ok' }, { type: 'input_image', file_id: 'file-1' }] },
        hi,
      ],
      computer: [
        { type: 'computer_call', id: 'cu_1', call_id: 'c4', action: { type: 'click', button: 'left', x: 1, y: 2 }, pending_safety_checks: [], status: 'completed' },
        { type: 'computer_call_output', call_id: 'c4', output: { type: 'computer_screenshot', image_url: 'https://example.com/s.png' } },
        hi,
      ],
      shell: [
        { type: 'shell_call', call_id: 'c5', action: { commands: ['ls'] } },
        { type: 'shell_call_output', call_id: 'c5', output: [{ stdout: 'a', stderr: '', outcome: { type: 'exit', exit_code: 0 } }] },
        hi,
      ],
      // The params need only `arguments` / `tools`; the resources require `execution` and `call_id` (nullable) too
      // (listed without them, openai-python's strict validation failed; outside attack atk111 F2).
      tool_search: [{ type: 'tool_search_call', arguments: { q: 'x' } }, { type: 'tool_search_output', tools: [] }, hi],
      tool_search_client: [
        { type: 'tool_search_call', call_id: 'c6', execution: 'client', arguments: {} },
        { type: 'tool_search_output', call_id: 'c6', execution: 'client', tools: [] },
        hi,
      ],
    };
    const found: string[] = [];
    for (const [name, input] of Object.entries(inputs)) {
      const created = await call(url, '/v1/responses', { model: 'm', input });
      expect(created.status, `${name}: ${created.text}`).toBe(200);
      const items = await call(url, `/v1/responses/${created.json()['id']}/input_items?order=asc`);
      found.push(...violations('ResponseItemList', items.json()).map((v) => `${name}: ${v}`));
    }
    expect(found).toEqual([]);
  });

  it('HTTP and WebSocket mode: every input item type, tool type and create parameter openai-node 7.59 types (include, text.format, reasoning, truncation, max_output_tokens, parallel_tool_calls, metadata at its limits, prompt cache, each service_tier): the Response, as JSON, streamed, retrieved and over WebSocket mode, and the input item list', async () => {
    const { url } = await testServer();
    const cases: Record<string, Json> = {};
    for (const [k, input] of Object.entries(SWEEP_ITEMS)) cases[`items:${k}`] = { model: 'm', input };
    for (const [k, p] of Object.entries(SWEEP_PARAMS)) cases[`params:${k}`] = { model: 'm', input: "What's the weather in Paris?", ...p };
    const found: string[] = [];
    for (const [name, body] of Object.entries(cases)) {
      const r = await call(url, '/v1/responses', body);
      expect(r.status, `${name}: ${r.text}`).toBe(200);
      found.push(...violations('Response', r.json()).map((v) => `${name}: ${v}`));
      const streamed = await call(url, '/v1/responses', { ...body, stream: true });
      found.push(...eventViolations(parseSse(streamed.text), 'sse').map((v) => `${name}: ${v}`));
      if (body['store'] === false) continue;
      found.push(...violations('Response', (await call(url, `/v1/responses/${r.json()['id']}`)).json()).map((v) => `${name} retrieved: ${v}`));
      found.push(...violations('ResponseItemList', (await call(url, `/v1/responses/${r.json()['id']}/input_items?order=asc&limit=100`)).json()).map((v) => `${name} items: ${v}`));
    }
    // The same creates over WebSocket mode, whose events are serialised apart (protocol/event-json.ts).
    const s = await RawSocket.connect(url);
    try {
      for (const body of Object.values(cases)) {
        s.send({ type: 'response.create', ...body });
        await s.next(body['max_output_tokens'] !== undefined ? 'response.incomplete' : 'response.completed');
      }
      expect(s.all('response.created')).toHaveLength(Object.keys(cases).length);
      found.push(...eventViolations(s.events as unknown as Json[], 'ws'));
    } finally {
      s.dispose();
    }
    expect(found).toEqual([]);
  });

  it('HTTP: error bodies are the ErrorResponse shape', async () => {
    const { url } = await testServer();
    const bodies = [
      await call(url, '/v1/responses', '{"model":'),
      await call(url, '/v1/responses', { input: 'x' }),
      await call(url, '/v1/responses', { model: 'm', input: 5 }),
      await call(url, '/v1/responses', { model: 'm', input: 'x', previous_response_id: 'resp_unknown', stream: true }),
      await call(url, '/v1/responses/resp_unknown'),
      await call(url, '/v1/responses/resp_unknown', undefined, 'DELETE'),
      await call(url, '/v1/responses/resp_unknown/input_items'),
    ];
    expect(bodies.map((b) => b.status)).toEqual([400, 400, 400, 400, 404, 404, 404]);
    expect(bodies.flatMap((b) => violations('ErrorResponse', b.json()))).toEqual([]);
  });

  it('SSE: every event of a text answer, parallel function calls, a max_output_tokens cut', async () => {
    const { url } = await testServer();
    const streams = [
      { model: 'm', input: 'hello there', stream: true },
      { model: 'm', input: 'run these:\n$ ls\n$ pwd', tools: [shell], parallel_tool_calls: true, stream: true },
      { model: 'm', input: 'hello there, a long answer please', max_output_tokens: 16, stream: true },
    ];
    const found: string[] = [];
    const types = new Set<string>();
    for (const body of streams) {
      const res = await call(url, '/v1/responses', body);
      expect(res.text.endsWith('data: [DONE]\n\n')).toBe(true);
      const events = parseSse(res.text);
      for (const e of events) types.add(e['type']);
      found.push(...eventViolations(events, 'sse'));
    }
    expect(found).toEqual([]);
    // The run covered what it claims to.
    for (const t of ['response.created', 'response.in_progress', 'response.output_text.delta', 'response.function_call_arguments.delta', 'response.completed', 'response.incomplete']) {
      expect(types, t).toContain(t);
    }
  });

  it('HTTP background mode: the create answer, the Response retrieved in flight and at the end, a streamed create resumed, the refusals', async () => {
    // A model held at its first delta until the test opens the gate: the run is in flight when it is read.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const model: Model = {
      async *sample() {
        yield { type: 'message.start' } as const;
        yield { type: 'text.delta', delta: 'hello' } as const;
        await gate;
        yield { type: 'message.end' } as const;
      },
    };
    const { url } = await testServer({ model });
    const found: string[] = [];
    const created = await call(url, '/v1/responses', { model: 'm', input: 'hello', background: true });
    expect(created.json()).toMatchObject({ status: 'in_progress', background: true });
    found.push(...violations('Response', created.json()));
    const id = created.json()['id'] as string;
    const mid = await call(url, `/v1/responses/${id}`);
    expect(mid.json()['status']).toBe('in_progress');
    found.push(...violations('Response', mid.json()));
    const streamed = call(url, '/v1/responses', { model: 'm', input: 'hello', background: true, stream: true });
    release();
    const events = parseSse((await streamed).text);
    found.push(...eventViolations(events, 'sse'));
    const sid = events[0]!['response']['id'] as string;
    const resumed = await call(url, `/v1/responses/${sid}?stream=true&starting_after=1`);
    expect(resumed.text.endsWith('data: [DONE]\n\n')).toBe(true);
    const again = parseSse(resumed.text);
    expect(again.map((e) => e['sequence_number'])).toEqual(events.slice(2).map((e) => e['sequence_number']));
    found.push(...eventViolations(again, 'sse'));
    for (const i of [id, sid]) {
      let r = await call(url, `/v1/responses/${i}`);
      while (r.json()['status'] === 'in_progress') r = await call(url, `/v1/responses/${i}`);
      expect(r.json()).toMatchObject({ status: 'completed', background: true });
      found.push(...violations('Response', r.json()));
    }
    const refusals = [
      await call(url, '/v1/responses', { model: 'm', input: 'x', background: true, store: false }),
      await call(url, `/v1/responses/${id}?stream=true&starting_after=-1`),
    ];
    expect(refusals.map((b) => b.status)).toEqual([400, 400]);
    found.push(...refusals.flatMap((b) => violations('ErrorResponse', b.json())));
    expect(found).toEqual([]);
  });

  it('SSE: a failed response (an injected fault): the flat error event, then response.failed', async () => {
    const { url } = await testServer({ chaos: ['error@first-token'] });
    const events = parseSse((await call(url, '/v1/responses', { model: 'm', input: 'hello', stream: true })).text);
    expect(events.map((e) => e['type'])).toContain('response.failed');
    expect(eventViolations(events, 'sse')).toEqual([]);
  });

  it('WebSocket mode: a tool loop with previous_response_id, a max_output_tokens cut, and error events', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'm', input: WEATHER_Q, tools: [weather], store: false });
    const first = (await s.next('response.completed')).response;
    const callItem = first.output.find((i) => i.type === 'function_call');
    expect(callItem?.type).toBe('function_call');
    const output = { type: 'function_call_output', call_id: callItem?.type === 'function_call' ? callItem.call_id : '', output: 'sunny' };
    s.send({ type: 'response.create', model: 'm', previous_response_id: first.id, input: [output], tools: [weather], store: false });
    await s.next('response.completed');
    s.send({ type: 'response.create', model: 'm', input: 'hello there, a long answer please', max_output_tokens: 16 });
    await s.next('response.incomplete');
    for (const bad of ['{not json', { type: 'response.create', model: 'm', input: 'x', previous_response_id: 'resp_unknown' }, { type: 'response.cancel' }]) {
      s.send(bad);
      await s.next('error');
    }
    expect(s.all('error').map((e) => e.error.code)).toEqual(['invalid_json', 'previous_response_not_found', 'no_response_in_flight']);
    expect(eventViolations(s.events as unknown as Json[], 'ws')).toEqual([]);
  });

  it('WebSocket mode: a failed response (an injected fault): the nested error event, then response.failed', async () => {
    const { url } = await testServer({ chaos: ['error@first-token'] });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'm', input: 'hello' });
    await s.next('response.failed', { skipErrors: true });
    expect(s.all('error')).toHaveLength(1);
    expect(eventViolations(s.events as unknown as Json[], 'ws')).toEqual([]);
  });

  it("long-lived: a run the server ends incomplete for its own reasons (pause timeout, lifetime limit, shutdown) keeps incomplete_details in the spec's enum", async () => {
    const found: string[] = [];
    const ended: Json[] = [];
    const start = async (s: RawSocket) => {
      s.send({ type: 'response.create', model: 'm', input: 'run this:\n$ ls', tools: [shell] });
      await s.next('response.done');
    };
    const timedOut = await RawSocket.longLived((await testServer({ limits: { pauseTimeoutMs: 50 } })).url);
    await start(timedOut);
    ended.push((await timedOut.next('response.incomplete')).response);
    const aged = await RawSocket.longLived((await testServer({ limits: { connectionLifetimeMs: 1500 } })).url);
    await start(aged);
    ended.push((await aged.next('response.incomplete', { skipErrors: true })).response);
    const { server, url } = await testServer();
    const shut = await RawSocket.longLived(url);
    await start(shut);
    const closing = server.close();
    ended.push((await shut.next('response.incomplete')).response);
    await closing;
    for (const s of [timedOut, aged, shut]) found.push(...eventViolations(s.events as unknown as Json[], 'ws'));
    expect(found).toEqual([]);
    // The reason is kept, in this server's own field.
    expect(ended.map((r) => [r['incomplete_details'], r['llr_incomplete_reason']])).toEqual([
      [null, 'pause_timeout'],
      [null, 'connection_limit_reached'],
      [null, 'server_shutdown'],
    ]);
  });

  it('long-lived: the standard events of a paused and resumed run, and the Response of each pause', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'm', input: 'run these:\n$ ls\n$ pwd', tools: [shell], parallel_tool_calls: true });
    const paused = await s.next('response.done');
    const pending = paused.response.pending_tool_calls ?? [];
    expect(pending.length).toBe(2);
    s.send({ type: 'response.append', input: pending.map((id) => ({ type: 'function_call_output', call_id: id, output: 'ok' })) });
    await s.next('response.completed');
    s.send({ type: 'response.append', input: [] });
    await s.next('error', { skipErrors: true });
    expect(eventViolations(s.events as unknown as Json[], 'ws')).toEqual([]);
  });
});
