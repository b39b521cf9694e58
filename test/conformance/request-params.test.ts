/**
 * Request values outside the API's enums and bounds (the OpenAPI spec's
 * `CreateResponse`, openai-node's types) are refused with `400` naming the
 * field, as the API refuses them, rather than taken: a request that works
 * here and fails against the API (docs/protocol.md, "Every event and error
 * per design").
 */
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { parseInput } from '../../src/protocol/parse-input.js';
import { DEFAULT_PARSE_CAPS } from '../../src/protocol/parse.js';
import { validateItems } from '../../src/pipeline/validate.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';

async function create(url: string, body: unknown): Promise<{ status: number; json: Record<string, any> }> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

describe('request parameters', () => {
  it("an input_image's detail is one of the API's ImageDetail values (low, high, auto, original), in a message and in a tool output", async () => {
    const { url } = await testServer();
    const image = (detail: unknown) => ({ type: 'input_image', image_url: 'https://example.com/a.png', detail });
    const bad = await create(url, { model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text: 'look' }, image('ultra')] }] });
    expect(bad.status).toBe(400);
    expect(bad.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'input[0].content[1].detail' });
    const inOutput = await create(url, {
      model: 'm',
      input: [
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: [image(5)] },
      ],
    });
    expect(inOutput.status).toBe(400);
    expect(inOutput.json['error']).toMatchObject({ code: 'invalid_type', param: 'input[1].output[0].detail' });
    for (const detail of ['low', 'high', 'auto', 'original', null]) {
      const ok = await create(url, { model: 'm', input: [{ role: 'user', content: [image(detail)] }] });
      expect(ok.status, String(detail)).toBe(200);
    }
  });

  it("a custom tool's output listing parts is checked as a function tool's: an input_image detail outside the enum is refused, not listed back by input_items", async () => {
    const { url } = await testServer();
    const image = (detail: unknown) => ({ type: 'input_image', image_url: 'https://example.com/a.png', detail });
    const input = (part: unknown) => [
      { type: 'custom_tool_call', call_id: 'c1', name: 'apply_patch', input: 'x' },
      { type: 'custom_tool_call_output', call_id: 'c1', output: [part] },
    ];
    const bad = await create(url, { model: 'm', input: input(image('ultra')) });
    expect(bad.status).toBe(400);
    expect(bad.json['error']).toMatchObject({ code: 'invalid_value', param: 'input[1].output[0].detail' });
    const badPart = await create(url, { model: 'm', input: input({ type: 'zz_part' }) });
    expect(badPart.status).toBe(400);
    expect(badPart.json['error']).toMatchObject({ param: 'input[1].output[0].type' });
    const ok = await create(url, { model: 'm', input: input(image('high')) });
    expect(ok.status).toBe(200);
  });

  it("a custom tool's output that is neither a string nor a list of parts is refused, as a function tool's is, not listed back by input_items", async () => {
    const { url } = await testServer();
    const input = (output: unknown) => [
      { type: 'custom_tool_call', call_id: 'c1', name: 'apply_patch', input: 'x' },
      { type: 'custom_tool_call_output', call_id: 'c1', output },
    ];
    for (const output of [7, { a: 1 }, null, true]) {
      const bad = await create(url, { model: 'm', input: input(output) });
      expect(bad.status).toBe(400);
      expect(bad.json['error']).toMatchObject({ code: 'invalid_type', param: 'input[1].output' });
    }
    expect((await create(url, { model: 'm', input: input('done') })).status).toBe(200);
  });

  it("safety_identifier is at most 128 characters (openai-node 7.60's documented maximum), counted as Unicode code points", async () => {
    const { url } = await testServer();
    const long = await create(url, { model: 'm', input: 'hi', safety_identifier: 'a'.repeat(129) });
    expect(long.status).toBe(400);
    expect(long.json['error']).toEqual({
      type: 'invalid_request_error',
      code: 'string_above_max_length',
      param: 'safety_identifier',
      message: "Invalid 'safety_identifier': string too long. Expected a string with maximum length 128, but got a string with length 129 instead.",
    });
    // input_tokens has no safety_identifier (openai-node's InputTokenCountParams): an unknown parameter there.
    const tokens = await fetch(`${url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', safety_identifier: 'a'.repeat(65) }) });
    expect(tokens.status).toBe(400);
    expect(((await tokens.json()) as { error: unknown }).error).toMatchObject({ code: 'unknown_parameter', param: 'safety_identifier' });
    for (const id of ['a'.repeat(65), 'a'.repeat(128), '\u{1F600}'.repeat(128)]) {
      const ok = await create(url, { model: 'm', input: 'hi', safety_identifier: id });
      expect(ok.status).toBe(200);
      expect(ok.json['safety_identifier']).toBe(id);
    }
  });

  it('prompt_cache_key is at most 64 characters, as the API refuses a longer one (string_above_max_length), on create and compact', async () => {
    const { url } = await testServer();
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${url}/v1/responses${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, any> };
    };
    for (const path of ['', '/compact']) {
      const long = await post(path, { model: 'm', input: 'hi', prompt_cache_key: 'k'.repeat(72) });
      expect(long.status, path).toBe(400);
      expect(long.json['error'], path).toEqual({
        type: 'invalid_request_error',
        code: 'string_above_max_length',
        param: 'prompt_cache_key',
        message: "Invalid 'prompt_cache_key': string too long. Expected a string with maximum length 64, but got a string with length 72 instead.",
      });
      // 64 characters, emoji counted as one each, pass.
      for (const key of ['k'.repeat(64), '\u{1F600}'.repeat(64)]) expect((await post(path, { model: 'm', input: 'hi', prompt_cache_key: key })).status, path).toBe(200);
    }
    const ok = await create(url, { model: 'm', input: 'hi', prompt_cache_key: 'k'.repeat(64) });
    expect(ok.json['prompt_cache_key']).toBe('k'.repeat(64));
  });

  it("an input item's call_id is 1 to 64 characters (the spec's maxLength and minLength), refused otherwise naming input[i].call_id", async () => {
    const { url } = await testServer();
    const pair = (callId: string) => [
      { role: 'user', content: 'go' },
      { type: 'function_call', call_id: callId, name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: callId, output: 'done' },
    ];
    const long = await create(url, { model: 'm', input: pair('c'.repeat(116)) });
    expect(long.status).toBe(400);
    expect(long.json['error']).toEqual({
      type: 'invalid_request_error',
      code: 'string_above_max_length',
      param: 'input[1].call_id',
      message: "Invalid 'input[1].call_id': string too long. Expected a string with maximum length 64, but got a string with length 116 instead.",
    });
    const empty = await create(url, { model: 'm', input: [{ type: 'function_call_output', call_id: '', output: 'done' }] });
    expect(empty.status).toBe(400);
    expect(empty.json['error']).toMatchObject({ code: 'empty_string', param: 'input[0].call_id' });
    // Every item that names a call by call_id: calls and outputs alike.
    for (const item of [
      { type: 'custom_tool_call_output', call_id: 'x'.repeat(65), output: 'ok' },
      { type: 'computer_call_output', call_id: 'x'.repeat(65), output: { type: 'computer_screenshot', image_url: 'https://example.com/s.png' } },
      { type: 'shell_call_output', call_id: 'x'.repeat(65), output: [] },
      { type: 'apply_patch_call_output', call_id: 'x'.repeat(65), status: 'completed' },
    ]) {
      const bad = await create(url, { model: 'm', input: [{ role: 'user', content: 'go' }, item] });
      expect(bad.status, item.type).toBe(400);
      expect(bad.json['error'], item.type).toMatchObject({ code: 'string_above_max_length', param: 'input[1].call_id' });
    }
    for (const id of ['c'.repeat(64), '\u{1F600}'.repeat(64)]) expect((await create(url, { model: 'm', input: pair(id) })).status).toBe(200);
    // A tool search's and a program's items name their call too, optionally: bounded when sent (atk59: taken).
    for (const item of [
      { type: 'tool_search_call', arguments: {}, call_id: 'x'.repeat(65) },
      { type: 'tool_search_output', tools: [], call_id: '' },
    ]) {
      const bad = await create(url, { model: 'm', input: [{ role: 'user', content: 'go' }, item] });
      expect(bad.status, item.type).toBe(400);
      expect(bad.json['error'], item.type).toMatchObject({ code: item.call_id === '' ? 'empty_string' : 'string_above_max_length', param: 'input[1].call_id' });
    }
  });

  it("an input text is at most 10485760 characters and a function call's arguments at most 1048576, JSON or not, as the API bounds them", async () => {
    const { url } = await testServer();
    // A string input is named as sent (it was `input[0].content`, a place the client never wrote: atk65 F6).
    const plain = await create(url, { model: 'm', input: 'x'.repeat(10_485_761) });
    expect(plain.json['error']).toMatchObject({ code: 'string_above_max_length', param: 'input' });
    const over = await create(url, { model: 'm', input: [{ role: 'user', content: 'x'.repeat(10_485_761) }] });
    expect(over.status).toBe(400);
    expect(over.json['error']).toEqual({
      type: 'invalid_request_error',
      code: 'string_above_max_length',
      param: 'input[0].content',
      message: "Invalid 'input[0].content': string too long. Expected a string with maximum length 10485760, but got a string with length 10485761 instead.",
    });
    const call = (args: string) => [
      { role: 'user', content: 'go' },
      { type: 'function_call', call_id: 'c1', name: 'exec_command', arguments: args },
      { type: 'function_call_output', call_id: 'c1', output: 'aborted' },
    ];
    const long = await create(url, { model: 'm', input: call('a'.repeat(1_048_577)) });
    expect(long.status).toBe(400);
    expect(long.json['error']).toMatchObject({ code: 'string_above_max_length', param: 'input[1].arguments', message: expect.stringContaining('maximum length 1048576, but got a string with length 1048577') });
    // A call cut mid-arguments (a cancel, a failure), sent back without its `incomplete` status as Codex 0.107 sends it,
    // with an output: taken (it was 400 invalid_value "not valid JSON", and the Codex session was refused for good).
    for (const args of ['{"cmd":"echo aft', '{"', 'not json', 'a'.repeat(1_048_576)]) {
      const ok = await create(url, { model: 'm', input: call(args) });
      expect(ok.status, args.slice(0, 20)).toBe(200);
    }
    // Every text an input item carries: a part's text, a tool output as text or as parts (the unit below, without uploads).
    const text = 'y'.repeat(10_485_761);
    const cases: Array<[unknown[], string]> = [
      [[{ role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_text', text }] }], 'input[0].content[1].text'],
      [[{ role: 'assistant', content: [{ type: 'output_text', text }] }], 'input[0].content[0].text'],
      [[...call('{}').slice(0, 2), { type: 'function_call_output', call_id: 'c1', output: text }], 'input[2].output'],
      [[...call('{}').slice(0, 2), { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text }] }], 'input[2].output[0].text'],
      [[{ type: 'custom_tool_call', call_id: 'c2', name: 'apply_patch', input: 'x' }, { type: 'custom_tool_call_output', call_id: 'c2', output: text }], 'input[1].output'],
    ];
    for (const [items, param] of cases) {
      const err = (() => {
        try {
          validateItems(parseInput(items, 'input', true, DEFAULT_PARSE_CAPS), { callIds: new Set() }, new RunMetrics());
        } catch (e) {
          return e as { code?: string; param?: string };
        }
        return null;
      })();
      expect(err, param).toMatchObject({ code: 'string_above_max_length', param });
    }
    // A stored chain's items are not held to them again (checks.ts: the server's own output is not what the API bounds).
    expect(() => validateItems(parseInput(cases[0]![0] as unknown[], 'input', true, DEFAULT_PARSE_CAPS), { callIds: new Set() }, new RunMetrics(), 'previous_response_id')).not.toThrow();
  });

  it("item_not_found quotes the reference's id cut to 100 characters, its sentence whole (it filled the message's cap; atk61 F5)", async () => {
    const { url } = await testServer();
    const res = await create(url, { model: 'm', input: [{ type: 'item_reference', id: 'k'.repeat(100_000) }] });
    expect(res.status).toBe(400);
    expect(res.json['error']).toMatchObject({ code: 'item_not_found', param: 'input[0].id' });
    expect(res.json['error'].message).toMatch(/^Item with id 'k{99}…' not found\.$/);
  });

  it('a value of the wrong JSON type is invalid_type, one of the right type outside the enum invalid_value (tool_choice, text.format.type, text.verbosity)', async () => {
    const { url } = await testServer();
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ tool_choice: 5 }, 'invalid_type', 'tool_choice'],
      [{ tool_choice: true }, 'invalid_type', 'tool_choice'],
      [{ tool_choice: { type: 5 } }, 'invalid_type', 'tool_choice.type'],
      [{ tool_choice: 'sometimes' }, 'invalid_value', 'tool_choice'],
      [{ text: { format: { type: 5 } } }, 'invalid_type', 'text.format.type'],
      [{ text: { format: {} } }, 'missing_required_parameter', 'text.format.type'],
      [{ text: { format: { type: 'yaml' } } }, 'invalid_value', 'text.format.type'],
      [{ text: { verbosity: 5 } }, 'invalid_type', 'text.verbosity'],
      [{ text: { verbosity: 'loud' } }, 'invalid_value', 'text.verbosity'],
    ];
    for (const [fields, code, param] of cases) {
      const r = await create(url, { model: 'm', input: 'hi', ...fields });
      expect(r.status, JSON.stringify(fields)).toBe(400);
      expect(r.json['error'], JSON.stringify(fields)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
  });

  it("a function tool's parameters: not an object schema, or outside the strict subset when sent with strict: true, are the API's invalid_function_parameters", async () => {
    const { url } = await testServer();
    const fn = (parameters: unknown, strict?: boolean) => ({ type: 'function', name: 'lookup', parameters, ...(strict !== undefined && { strict }) });
    const notObject = await create(url, { model: 'm', input: 'hi', tools: [fn({ type: 'string' })] });
    expect(notObject.status).toBe(400);
    expect(notObject.json['error']).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_function_parameters',
      param: 'tools[0].parameters',
      message: `Invalid schema for function 'lookup': schema must be a JSON Schema of 'type: "object"', got 'type: "string"'.`,
    });
    const loose = { type: 'object', properties: { q: { type: 'string' }, n: { type: 'integer' } }, required: ['q'], additionalProperties: false };
    const strictLoose = await create(url, { model: 'm', input: 'hi', tools: [fn({ type: 'object', properties: {} , additionalProperties: false, required: [] }), { ...fn(loose, true), name: 'search' }] });
    expect(strictLoose.status).toBe(400);
    expect(strictLoose.json['error']).toMatchObject({
      code: 'invalid_function_parameters',
      param: 'tools[1].parameters',
      message: "Invalid schema for function 'search': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'n'.",
    });
    // The same schema without strict, or with strict: false, is taken (the echo's default true is not checked); a strict one too.
    for (const tool of [fn(loose), fn(loose, false), fn({ ...loose, required: ['q', 'n'] }, true)]) {
      const ok = await create(url, { model: 'm', input: 'hi', tools: [tool] });
      expect(ok.status, JSON.stringify(ok.json['error'])).toBe(200);
    }
  });
});

describe('input item fields listed back by input_items', () => {
  // Each was taken as sent and listed back so by GET /v1/responses/{id}/input_items, where openai-node types it
  // (ResponseInputFile, ResponseOutputMessage.phase, ResponseReasoningItem): a typed reader decoding the list failed on
  // the server's answer (outside conformance tester). Refused 400 naming the field, as the input_image detail is.
  it("an input_file's detail (auto, low, high) and its string fields, an assistant message's phase, a reasoning item's summary and encrypted_content", async () => {
    const { url } = await testServer();
    const file = (extra: Record<string, unknown>) => ({ type: 'input_file', filename: 'a.txt', file_data: 'data:text/plain;base64,aGk=', ...extra });
    const inMessage = (part: unknown) => [{ role: 'user', content: [{ type: 'input_text', text: 'read' }, part] }];
    const assistant = (phase: unknown) => [{ type: 'message', role: 'assistant', phase, content: [{ type: 'output_text', text: 'x', annotations: [] }] }, { role: 'user', content: 'y' }];
    const reasoning = (extra: Record<string, unknown>) => [{ type: 'reasoning', id: 'rs_1', summary: [], ...extra }, { role: 'user', content: 'y' }];
    const refused: Array<[unknown, string, string]> = [
      [inMessage(file({ detail: 'huge' })), 'invalid_value', 'input[0].content[1].detail'],
      [inMessage(file({ detail: 5 })), 'invalid_type', 'input[0].content[1].detail'],
      [inMessage(file({ file_data: 5 })), 'invalid_type', 'input[0].content[1].file_data'],
      [inMessage(file({ filename: 5 })), 'invalid_type', 'input[0].content[1].filename'],
      [inMessage({ type: 'input_file', file_url: 5 }), 'invalid_type', 'input[0].content[1].file_url'],
      [inMessage({ type: 'input_file', file_id: 5 }), 'invalid_type', 'input[0].content[1].file_id'],
      [inMessage({ type: 'input_image', image_url: 'https://example.com/a.png', file_id: 5 }), 'invalid_type', 'input[0].content[1].file_id'],
      // Sent, of the wrong type: not "missing" (it was missing_required_parameter, naming a field the client did send).
      [inMessage({ type: 'input_image', image_url: 5 }), 'invalid_type', 'input[0].content[1].image_url'],
      [inMessage({ type: 'input_image', image_url: { url: 'https://example.com/a.png' } }), 'invalid_type', 'input[0].content[1].image_url'],
      [inMessage({ type: 'input_image', file_id: 7 }), 'invalid_type', 'input[0].content[1].file_id'],
      [inMessage({ type: 'input_image', image_url: null }), 'missing_required_parameter', 'input[0].content[1].image_url'],
      [[{ type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' }, { type: 'function_call_output', call_id: 'c1', output: [file({ detail: 'huge' })] }], 'invalid_value', 'input[1].output[0].detail'],
      [assistant('bogus'), 'invalid_value', 'input[0].phase'],
      [reasoning({ summary: 5 }), 'invalid_type', 'input[0].summary'],
      [reasoning({ summary: [{ type: 'bogus', text: 'x' }] }), 'invalid_value', 'input[0].summary[0].type'],
      [reasoning({ summary: [{ type: 'summary_text', text: 5 }] }), 'invalid_type', 'input[0].summary[0].text'],
      [reasoning({ encrypted_content: 5 }), 'invalid_type', 'input[0].encrypted_content'],
      // Required: `{type: "reasoning"}` alone was taken and listed back without it.
      [reasoning({ summary: undefined }), 'missing_required_parameter', 'input[0].summary'],
      [reasoning({ summary: null }), 'missing_required_parameter', 'input[0].summary'],
    ];
    for (const [input, code, param] of refused) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, param).toBe(400);
      expect(r.json['error'], param).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const taken: unknown[] = [
      inMessage(file({ detail: 'low' })),
      inMessage(file({ detail: null })),
      inMessage({ type: 'input_file', file_id: 'file-1' }),
      inMessage({ type: 'input_file', file_url: 'https://example.com/a.pdf' }),
      assistant('commentary'),
      assistant('final_answer'),
      assistant(null),
      reasoning({ summary: [{ type: 'summary_text', text: 'thought' }], encrypted_content: 'gAAAA' }),
      reasoning({ encrypted_content: null }),
    ];
    for (const input of taken) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, JSON.stringify(input)).toBe(200);
    }
  });
});

describe('message parts by role, item ids by type, a custom tool call\'s fields', () => {
  // Each was taken and listed back by input_items to typed readers (outside conformance tester); the API refuses each.
  it("an assistant message holds output_text and refusal parts only, others only the input parts, as the API answers", async () => {
    const { url } = await testServer();
    const said = (part: unknown) => [{ type: 'message', role: 'assistant', content: [part] }, { role: 'user', content: 'y' }];
    const asked = (role: string, part: unknown) => [{ type: 'message', role, content: [part] }];
    // The API's own refusal, as a public report quotes it (epam/ai-dial-adapter-openai#511).
    const assistantText = await create(url, { model: 'm', input: said({ type: 'input_text', text: 'Hello! How can I help?' }) });
    expect(assistantText.status).toBe(400);
    expect(assistantText.json['error']).toEqual({
      type: 'invalid_request_error',
      code: 'invalid_value',
      param: 'input[0].content[0]',
      message: "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
    });
    const refused: Array<[unknown, string, string]> = [
      [said({ type: 'input_image', image_url: 'https://example.com/a.png' }), 'invalid_value', 'input[0].content[0]'],
      [said({ type: 'input_file', file_id: 'file-1' }), 'invalid_value', 'input[0].content[0]'],
      [said({ type: 'refusal' }), 'missing_required_parameter', 'input[0].content[0].refusal'],
      [said({ type: 'refusal', refusal: 5 }), 'invalid_type', 'input[0].content[0].refusal'],
      [asked('user', { type: 'refusal', refusal: 'no' }), 'invalid_value', 'input[0].content[0].type'],
      [asked('developer', { type: 'refusal', refusal: 'no' }), 'invalid_value', 'input[0].content[0].type'],
      [asked('user', { type: 'output_text', text: 'x' }), 'invalid_value', 'input[0].content[0].type'],
    ];
    for (const [input, code, param] of refused) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, JSON.stringify(input)).toBe(400);
      expect(r.json['error'], JSON.stringify(input)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    for (const input of [
      said({ type: 'output_text', text: 'x', annotations: [] }),
      said({ type: 'refusal', refusal: 'I cannot help with that.' }),
      [{ role: 'assistant', content: 'a string is any role\'s' }, { role: 'user', content: 'y' }],
      asked('user', { type: 'input_text', text: 'x' }),
    ]) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, JSON.stringify(input)).toBe(200);
    }
  });

  it("an input item's id begins with its type's prefix (msg, fc, rs, ctc), as the API refuses it; listed ids go back in as they came out", async () => {
    const { url } = await testServer();
    const call = (id: unknown) => [{ type: 'function_call', id, call_id: 'c1', name: 'f', arguments: '{}' }, { type: 'function_call_output', call_id: 'c1', output: 'ok' }];
    const custom = (id: unknown) => [{ type: 'custom_tool_call', id, call_id: 'c2', name: 'patch', input: 'x' }, { type: 'custom_tool_call_output', call_id: 'c2', output: 'ok' }];
    const refused: Array<[unknown, string, string, string]> = [
      [[{ type: 'message', id: '019f629b-43ee-7a82-acb1-3071dbffbdad', role: 'user', content: 'hi' }], 'invalid_id_prefix', 'input[0].id', 'msg'],
      [[{ id: 'item_3bc5', role: 'user', content: 'hi' }], 'invalid_id_prefix', 'input[0].id', 'msg'],
      [call('item_c270d5511c7129adc7475632'), 'invalid_id_prefix', 'input[0].id', 'fc'],
      [[{ type: 'reasoning', id: 'item_df7e40c3f04fc8ade5c3800e', summary: [] }, { role: 'user', content: 'y' }], 'invalid_id_prefix', 'input[0].id', 'rs'],
      [custom('fc_1'), 'invalid_id_prefix', 'input[0].id', 'ctc'],
      [call(5), 'invalid_type', 'input[0].id', ''],
    ];
    for (const [input, code, param, prefix] of refused) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, JSON.stringify(input)).toBe(400);
      expect(r.json['error'], JSON.stringify(input)).toMatchObject({ type: 'invalid_request_error', code, param });
      if (prefix) expect(r.json['error']['message']).toMatch(new RegExp(`^Invalid 'input\\[0\\]\\.id': '.+'\\. Expected an ID that begins with '${prefix}'\\.$`));
    }
    const taken: unknown[] = [call('fc_1'), call(null), custom('ctc_1'), [{ type: 'message', id: 'msg_1', role: 'user', content: 'hi' }]];
    for (const input of taken) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, JSON.stringify(input)).toBe(200);
    }
    // Items sent without ids are listed with ids the server derives: sent back as input, they are taken.
    const first = await create(url, { model: 'm', input: [{ role: 'user', content: 'hi' }, ...custom(undefined), ...call(undefined).map((i) => ({ ...i, call_id: 'c3' }))] });
    expect(first.status, JSON.stringify(first.json['error'])).toBe(200);
    const listed = (await (await fetch(`${url}/v1/responses/${first.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, unknown>> };
    expect(listed.data.map((i) => String(i['id']).split('_')[0])).toEqual(['msg', 'ctc', 'item', 'fc', 'fco']);
    const again = await create(url, { model: 'm', input: listed.data });
    expect(again.status, JSON.stringify(again.json['error'])).toBe(200);
  });

  it("a custom tool call carries its call_id, name and input as strings (openai-node's ResponseCustomToolCall)", async () => {
    const { url } = await testServer();
    const custom = (fields: Record<string, unknown>) => [{ type: 'custom_tool_call', call_id: 'c2', name: 'patch', input: 'x', ...fields }];
    for (const [fields, code, param] of [
      [{ call_id: undefined }, 'missing_required_parameter', 'input[0].call_id'],
      [{ name: 5 }, 'invalid_type', 'input[0].name'],
      [{ input: {} }, 'invalid_type', 'input[0].input'],
      [{ status: 'bogus' }, 'invalid_value', 'input[0].status'],
    ] as const) {
      const r = await create(url, { model: 'm', input: custom(fields) });
      expect(r.status, param).toBe(400);
      expect(r.json['error'], param).toMatchObject({ type: 'invalid_request_error', code, param });
    }
  });
});

describe("the new checks' edges (outside attack on them)", () => {
  const raw = async (url: string, body: string) => {
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    return { status: res.status, json: (await res.json()) as Record<string, any> };
  };

  it("a tool or item typed with one of Object's own member names is an unknown type, not a 500 or a prefix of Object's source", async () => {
    const lenient = await testServer({ allowUnknownParameters: true });
    for (const type of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
      const r = await create(lenient.url, { model: 'm', input: 'hi', tools: [{ type }] });
      expect(r.status, type).toBe(200);
      expect(r.json['tools'], type).toEqual([{ type }]);
    }
    // Elsewhere, on a default server: a tool_choice so typed is refused as any unknown tool (it was a 500), a strict
    // schema's `format` so named is an unknown format (a 500, or arguments leaving out what the schema requires), and a
    // model so named is priced as any other (NaN per token).
    const { url, server } = await testServer();
    const f = { type: 'function', name: 'f', parameters: {} };
    for (const type of ['constructor', '__proto__', 'isPrototypeOf', '__defineGetter__', 'toLocaleString']) {
      const r = await create(url, { model: 'm', input: 'hi', tools: [f], tool_choice: { type } });
      expect(r.status, type).toBe(400);
      expect(r.json['error'], type).toMatchObject({ code: 'invalid_value', param: 'tool_choice' });
    }
    for (const format of ['__proto__', 'hasOwnProperty', 'constructor', 'toString']) {
      const strict = { type: 'object', properties: { a: { type: 'string', format } }, required: ['a'], additionalProperties: false };
      const r = await create(url, { model: 'm', input: 'call f', tool_choice: 'required', tools: [{ type: 'function', name: 'f', strict: true, parameters: strict }] });
      expect(r.status, format).toBe(200);
      const call = (r.json['output'] as Array<{ type: string; arguments?: string }>).find((i) => i.type === 'function_call')!;
      const args = JSON.parse(call.arguments!) as { a?: unknown };
      expect(typeof args.a, format).toBe('string');
      expect(args.a, format).not.toBe('[object Undefined]');
    }
    const priced = await create(url, { model: 'constructor', input: 'hi' });
    expect(priced.status).toBe(200);
    await server.services.postWork.flush();
    const entry = server.services.ledger.entries.find((e) => e.response_id === priced.json['id']);
    expect(Number.isFinite(entry?.cost_usd)).toBe(true);
    // Items of unknown types are taken with --allow-unknown-parameters only.
    const items = parseInput([{ type: 'constructor', id: 'x_1' }, { type: '__proto__', id: 'y_1' }], 'input', true, { ...DEFAULT_PARSE_CAPS, allowUnknownParameters: true });
    expect(items.map((i) => (i as { id?: string }).id)).toEqual(['x_1', 'y_1']);
  });

  it('a number that overflows to Infinity is not a number: a logprob of -1e999, a display size of 1e999', async () => {
    const { url } = await testServer();
    const said = '[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[],"logprobs":[{"token":"hi","logprob":-1e999}]}]},{"role":"user","content":"y"}]';
    const lp = await raw(url, `{"model":"m","input":${said}}`);
    expect(lp.status).toBe(400);
    expect(lp.json['error']).toMatchObject({ code: 'invalid_type', param: 'input[0].content[0].logprobs[0].logprob' });
    const tool = await raw(url, '{"model":"m","input":"hi","tools":[{"type":"computer_use_preview","display_height":1e999,"display_width":1024,"environment":"browser"}]}');
    expect(tool.status).toBe(400);
    expect(tool.json['error']).toMatchObject({ code: 'invalid_type', param: 'tools[0].display_height' });
  });

  it("an error quoting a client's value cut at a surrogate pair carries no lone surrogate (strict JSON readers refuse one)", async () => {
    const { url } = await testServer();
    for (const cut of [99, 100, 101]) {
      const id = `${'a'.repeat(cut)}😀${'b'.repeat(50)}`;
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: [{ type: 'message', id, role: 'user', content: 'hi' }] }) });
      const text = await res.text();
      expect(res.status).toBe(400);
      // No escaped lone surrogate in the body's text, and none in the message decoded.
      expect(text, String(cut)).not.toMatch(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
      const message = (JSON.parse(text) as { error: { message: string } }).error.message;
      expect(message, String(cut)).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
    }
    // A lone surrogate the client sent is quoted as U+FFFD.
    const lone = await create(url, { model: 'm', input: 'hi', tools: [{ type: 'web_search', search_context_size: 'x\ud83d' }] });
    expect(lone.status).toBe(400);
    expect(lone.json['error']['message']).toContain("'x\ufffd'");
  });
});

describe('logprobs of an output_text part sent back as input', () => {
  // openai-node's ResponseOutputText.Logprob (and the OpenAPI spec's LogProb): `[1, 2]` or `{"token": 5}` was taken and
  // listed back by input_items as sent, to typed readers that decode {token, logprob, bytes, top_logprobs}.
  it('are refused 400 naming the field when not of the listed shape; a Response\'s own, a delta\'s (no bytes), [] and null are taken', async () => {
    const { url } = await testServer();
    const said = (logprobs: unknown) => [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hi', annotations: [], logprobs }] }, { role: 'user', content: 'y' }];
    const lp = (extra: Record<string, unknown> = {}) => ({ token: 'hi', logprob: -0.1, bytes: [104, 105], top_logprobs: [{ token: 'hi', logprob: -0.1, bytes: [104, 105] }], ...extra });
    const refused: Array<[unknown, string, string]> = [
      [said({ token: 'hi' }), 'invalid_type', 'input[0].content[0].logprobs'],
      [said([1, 2]), 'invalid_type', 'input[0].content[0].logprobs[0]'],
      [said([lp(), null]), 'invalid_type', 'input[0].content[0].logprobs[1]'],
      [said([lp({ token: 5 })]), 'invalid_type', 'input[0].content[0].logprobs[0].token'],
      [said([lp({ token: undefined })]), 'missing_required_parameter', 'input[0].content[0].logprobs[0].token'],
      [said([lp({ logprob: '-1' })]), 'invalid_type', 'input[0].content[0].logprobs[0].logprob'],
      [said([lp({ logprob: null })]), 'missing_required_parameter', 'input[0].content[0].logprobs[0].logprob'],
      [said([lp({ logprob: 0.5 })]), 'invalid_value', 'input[0].content[0].logprobs[0].logprob'],
      [said([lp({ bytes: 'hi' })]), 'invalid_type', 'input[0].content[0].logprobs[0].bytes'],
      [said([lp({ bytes: [104, 256] })]), 'invalid_type', 'input[0].content[0].logprobs[0].bytes'],
      [said([lp({ bytes: [1.5] })]), 'invalid_type', 'input[0].content[0].logprobs[0].bytes'],
      [said([lp({ top_logprobs: {} })]), 'invalid_type', 'input[0].content[0].logprobs[0].top_logprobs'],
      [said([lp({ top_logprobs: [{ token: 'a' }] })]), 'missing_required_parameter', 'input[0].content[0].logprobs[0].top_logprobs[0].logprob'],
      [said([lp({ top_logprobs: [{ token: 'a', logprob: -1, bytes: [-1] }] })]), 'invalid_type', 'input[0].content[0].logprobs[0].top_logprobs[0].bytes'],
    ];
    for (const [input, code, param] of refused) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, param).toBe(400);
      expect(r.json['error'], param).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const taken: unknown[] = [
      said([lp()]),
      said([{ token: 'hi', logprob: 0, top_logprobs: [{ token: 'hi', logprob: 0 }] }]),
      said([lp({ bytes: null, top_logprobs: null })]),
      said([]),
      said(null),
      // A Response's own output, passed back as input as clients do: what the server listed is what it takes.
    ];
    for (const input of taken) {
      const r = await create(url, { model: 'm', input });
      expect(r.status, JSON.stringify(input)).toBe(200);
    }
    const own = await create(url, { model: 'm', input: 'say something', include: ['message.output_text.logprobs'], top_logprobs: 3 });
    expect(own.status).toBe(200);
    const output = own.json['output'] as Array<{ type: string; content?: Array<{ logprobs?: unknown[] }> }>;
    expect(output.find((i) => i.type === 'message')?.content?.[0]?.logprobs?.length).toBeGreaterThan(0);
    const back = await create(url, { model: 'm', input: [...output, { role: 'user', content: 'again' }] });
    expect(back.status, JSON.stringify(back.json['error'])).toBe(200);
  });
});

describe('tools echoed on the Response', () => {
  // A custom tool without its name, an MCP tool without its server_label, were taken and echoed so in the Response's
  // `tools`, where openai-node's CustomTool and Tool.Mcp require them (outside conformance tester); the API refuses them.
  it('a tool of a type the API does not have is 400 invalid_value naming tools[i].type; --allow-unknown-parameters takes it as before', async () => {
    const { url } = await testServer();
    const r = await create(url, { model: 'm', input: 'hi', tools: [{ type: 'function', name: 'f' }, { type: 'bogus_tool' }] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'tools[1].type' });
    const every = ['file_search', 'computer', 'computer_use_preview', 'web_search', 'web_search_2025_08_26', 'code_interpreter', 'programmatic_tool_calling', 'image_generation', 'local_shell', 'shell', 'namespace', 'tool_search', 'web_search_preview', 'web_search_preview_2025_03_11', 'apply_patch'];
    // Each with what openai-node requires of it (below).
    const required: Record<string, object> = {
      file_search: { vector_store_ids: ['vs_1'] },
      computer_use_preview: { display_height: 768, display_width: 1024, environment: 'browser' },
      code_interpreter: { container: { type: 'auto' } },
      namespace: { name: 'ns', description: 'tools', tools: [] },
    };
    const ok = await create(url, { model: 'm', input: 'hi', tools: every.map((type) => ({ type, ...required[type] })) });
    expect(ok.status, JSON.stringify(ok.json['error'])).toBe(200);
    const lenient = await testServer({ allowUnknownParameters: true });
    expect((await create(lenient.url, { model: 'm', input: 'hi', tools: [{ type: 'bogus_tool' }] })).status).toBe(200);
  });

  // Each was taken and echoed so in the Response's tools, where openai-node types it (outside conformance tester).
  it("hosted and custom tools' required fields and closed sets of values (openai-node 6.49), refused naming the field", async () => {
    const { url } = await testServer();
    const refused: Array<[object, string, string]> = [
      [{ type: 'file_search' }, 'missing_required_parameter', 'tools[0].vector_store_ids'],
      [{ type: 'file_search', vector_store_ids: [5] }, 'invalid_type', 'tools[0].vector_store_ids'],
      [{ type: 'computer_use_preview', display_width: 1024, environment: 'browser' }, 'missing_required_parameter', 'tools[0].display_height'],
      [{ type: 'computer_use_preview', display_height: 768, display_width: 1024, environment: 'amiga' }, 'invalid_value', 'tools[0].environment'],
      [{ type: 'code_interpreter' }, 'missing_required_parameter', 'tools[0].container'],
      [{ type: 'code_interpreter', container: 5 }, 'invalid_type', 'tools[0].container'],
      [{ type: 'namespace', name: 'ns', tools: [] }, 'missing_required_parameter', 'tools[0].description'],
      [{ type: 'web_search', search_context_size: 'huge' }, 'invalid_value', 'tools[0].search_context_size'],
      [{ type: 'web_search_preview', search_context_size: 5 }, 'invalid_value', 'tools[0].search_context_size'],
      [{ type: 'mcp', server_label: 's', require_approval: 'sometimes' }, 'invalid_value', 'tools[0].require_approval'],
      [{ type: 'image_generation', quality: 'ultra' }, 'invalid_value', 'tools[0].quality'],
      [{ type: 'image_generation', output_format: 'gif' }, 'invalid_value', 'tools[0].output_format'],
      [{ type: 'function', name: 'f', defer_loading: 'x' }, 'invalid_type', 'tools[0].defer_loading'],
      [{ type: 'custom', name: 'c', format: 5 }, 'invalid_type', 'tools[0].format'],
      [{ type: 'custom', name: 'c', format: { type: 'bogus' } }, 'invalid_value', 'tools[0].format.type'],
      [{ type: 'custom', name: 'c', format: { type: 'grammar', definition: 'start: "a"', syntax: 'bogus' } }, 'invalid_value', 'tools[0].format.syntax'],
      [{ type: 'custom', name: 'c', format: { type: 'grammar', syntax: 'lark' } }, 'missing_required_parameter', 'tools[0].format.definition'],
    ];
    for (const [tool, code, param] of refused) {
      const r = await create(url, { model: 'm', input: 'hi', tools: [tool] });
      expect(r.status, JSON.stringify(tool)).toBe(400);
      expect(r.json['error'], JSON.stringify(tool)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const wrong = await create(url, { model: 'm', input: 'hi', tools: [{ type: 'web_search', search_context_size: 'huge' }] });
    expect(wrong.json['error']['message']).toBe("Invalid value for 'tools[0].search_context_size': 'huge'. Supported values are: 'low', 'medium', and 'high'.");
    const taken: object[] = [
      { type: 'web_search', search_context_size: 'low' },
      { type: 'web_search', search_context_size: null },
      { type: 'mcp', server_label: 's', require_approval: { never: { tool_names: ['x'] } } },
      { type: 'mcp', server_label: 's', require_approval: 'never' },
      { type: 'image_generation', quality: 'high', output_format: 'webp', background: 'auto', moderation: 'low' },
      { type: 'code_interpreter', container: 'cntr_1' },
      { type: 'custom', name: 'c', format: { type: 'grammar', definition: 'start: "a"', syntax: 'lark' } },
      { type: 'custom', name: 'c', format: { type: 'text' } },
      { type: 'function', name: 'f', defer_loading: true },
    ];
    for (const tool of taken) {
      const r = await create(url, { model: 'm', input: 'hi', tools: [tool] });
      expect(r.status, JSON.stringify(tool)).toBe(200);
      expect((r.json['tools'] as object[])[0], JSON.stringify(tool)).toMatchObject(tool);
    }
  });

  it("a custom tool's name and an MCP tool's server_label are required strings", async () => {
    const { url } = await testServer();
    const refused: Array<[unknown, string, string]> = [
      [{ type: 'custom' }, 'missing_required_parameter', 'tools[0].name'],
      [{ type: 'custom', name: 5 }, 'invalid_type', 'tools[0].name'],
      [{ type: 'custom', name: 'c', description: 5 }, 'invalid_type', 'tools[0].description'],
      [{ type: 'mcp', server_url: 'https://example.com' }, 'missing_required_parameter', 'tools[0].server_label'],
      [{ type: 'mcp', server_label: ['s'] }, 'invalid_type', 'tools[0].server_label'],
    ];
    for (const [tool, code, param] of refused) {
      const r = await create(url, { model: 'm', input: 'hi', tools: [tool] });
      expect(r.status, JSON.stringify(tool)).toBe(400);
      expect(r.json['error'], JSON.stringify(tool)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const ok = await create(url, { model: 'm', input: 'hi', tools: [{ type: 'custom', name: 'apply_patch', description: 'patch' }, { type: 'mcp', server_label: 's', server_url: 'https://example.com' }] });
    expect(ok.status).toBe(200);
    expect(ok.json['tools']).toMatchObject([{ type: 'custom', name: 'apply_patch' }, { type: 'mcp', server_label: 's' }]);
  });
});

describe('input item types', () => {
  // openai-node's ResponseInputItem union (6.49, 7.5) and the spec's InputItem: an item of another type was taken,
  // carried to the model as text and listed back by input_items (outside conformance tester); the API refuses it.
  it("an item of a type the API does not have is 400 invalid_value naming input[i].type, over HTTP and WebSocket; --allow-unknown-parameters carries it as before", async () => {
    const { url } = await testServer();
    const r = await create(url, { model: 'm', input: [{ role: 'user', content: 'hi' }, { type: 'bogus_item', x: 1 }] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'input[1].type' });
    // The API's types are taken (a hosted call carried as before).
    const hosted = await create(url, { model: 'm', input: [{ role: 'user', content: 'hi' }, { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'x' } }, { role: 'user', content: 'again' }] });
    expect(hosted.status, JSON.stringify(hosted.json['error'])).toBe(200);
    const ws = await RawSocket.connect(url);
    try {
      ws.send({ type: 'response.create', model: 'm', input: [{ type: 'bogus_item' }] });
      expect(await ws.next('error')).toMatchObject({ type: 'error', error: { code: 'invalid_value', param: 'input[0].type' } });
    } finally {
      ws.dispose();
    }
    const lenient = await testServer({ allowUnknownParameters: true });
    expect((await create(lenient.url, { model: 'm', input: [{ role: 'user', content: 'hi' }, { type: 'bogus_item' }] })).status).toBe(200);
  });

  it('a configuration_update item (openai-node 7.59) is taken, checked as its type has it, and listed back by input_items', async () => {
    const { url } = await testServer();
    const update = { type: 'configuration_update', reasoning: { effort: 'low' }, text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } } };
    const r = await create(url, { model: 'm', input: [{ role: 'user', content: 'hi' }, update, { type: 'configuration_update', text: { format: { type: 'text' } } }] });
    expect(r.status, JSON.stringify(r.json['error'])).toBe(200);
    const listed = (await (await fetch(`${url}/v1/responses/${r.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, unknown>> };
    expect(listed.data[1]).toEqual({ id: expect.stringMatching(/^item_/), ...update });
    const refused: Array<[unknown, string, string]> = [
      [{ reasoning: { effort: 'extreme' } }, 'invalid_value', 'input[1].reasoning.effort'],
      [{ reasoning: 'low' }, 'invalid_type', 'input[1].reasoning'],
      [{ text: {} }, 'missing_required_parameter', 'input[1].text.format'],
      [{ text: { format: { type: 'json_object' } } }, 'invalid_value', 'input[1].text.format.type'],
      [{ text: { format: { type: 'json_schema', name: 'a b', schema: {} } } }, 'invalid_value', 'input[1].text.format.name'],
      [{ text: { format: { type: 'json_schema', name: 'ok' } } }, 'invalid_type', 'input[1].text.format.schema'],
    ];
    for (const [fields, code, param] of refused) {
      const bad = await create(url, { model: 'm', input: [{ role: 'user', content: 'hi' }, { type: 'configuration_update', ...(fields as object) }] });
      expect(bad.status, JSON.stringify(fields)).toBe(400);
      expect(bad.json['error'], JSON.stringify(fields)).toMatchObject({ code, param });
    }
  });

  it('an item_reference may leave out its type (openai-node: type?: "item_reference" | null), as the spec has it', async () => {
    const { url } = await testServer();
    const first = await create(url, { model: 'm', input: 'hello' });
    const id = (first.json['output'] as Array<{ id: string }>)[0]!.id;
    for (const ref of [{ id }, { id, type: null }, { id, type: 'item_reference' }]) {
      const r = await create(url, { model: 'm', input: [{ role: 'user', content: 'hi' }, ref, { role: 'user', content: 'again' }] });
      expect(r.status, `${JSON.stringify(ref)}: ${JSON.stringify(r.json['error'])}`).toBe(200);
    }
    const unknown = await create(url, { model: 'm', input: [{ id: 'msg_nope' }] });
    expect(unknown.json['error']).toMatchObject({ code: 'item_not_found', param: 'input[0].id' });
  });
});

describe('unknown create parameters', () => {
  // What real clients send, taken from their requests to this server (2026-12): Codex 0.107, 0.169 and 0.171 send
  // `client_metadata` on every create (HTTP and WebSocket) and `generate: false` to warm a WebSocket up; openai-node
  // 7.59's types, the OpenAPI spec's CreateResponse and the WebSocket create add the rest.
  const CODEX_HTTP = {
    model: 'm',
    instructions: 'be brief',
    input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
    tools: [],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    reasoning: { summary: 'auto' },
    store: false,
    stream: true,
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'k',
    client_metadata: { 'x-codex-turn-metadata': '{}' },
  };

  it("an unknown top-level field of a create is refused 400 unknown_parameter naming it, as the API refuses it (it was ignored, so a typo such as 'temprature' passed here and failed there)", async () => {
    const { url } = await testServer();
    const typo = await create(url, { model: 'm', input: 'hi', temprature: 0.2 });
    expect(typo.status).toBe(400);
    expect(typo.json['error']).toEqual({ type: 'invalid_request_error', code: 'unknown_parameter', param: 'temprature', message: "Unknown parameter: 'temprature'." });
    // A field of another endpoint (Chat Completions') is unknown here too.
    const chat = await create(url, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.json['error']).toMatchObject({ code: 'unknown_parameter', param: 'messages' });
  });

  it('what Codex, openai-node and the spec send is taken: client_metadata, generate, and every field of openai-node 7.59 ResponseCreateParams', async () => {
    const { url } = await testServer();
    const codex = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(CODEX_HTTP) });
    expect(codex.status).toBe(200);
    await codex.text();
    const every = await create(url, {
      model: 'm',
      input: 'hi',
      instructions: null,
      background: null,
      background_options: null,
      context_management: null,
      conversation: null,
      generate: true,
      image: null,
      include: null,
      max_output_tokens: null,
      max_tool_calls: null,
      metadata: null,
      moderation: null,
      parallel_tool_calls: null,
      previous_response_id: null,
      prompt: null,
      prompt_cache_key: null,
      prompt_cache_options: null,
      prompt_cache_retention: null,
      reasoning: null,
      safety_identifier: null,
      service_tier: null,
      store: null,
      stream: null,
      stream_options: null,
      temperature: null,
      text: null,
      tool_choice: null,
      tools: [],
      top_logprobs: null,
      top_p: null,
      truncation: null,
      user: 'u',
      access_programs: null,
      presence_penalty: 0,
      frequency_penalty: 0,
      client_metadata: null,
      llr: null,
    });
    expect(every.status, JSON.stringify(every.json)).toBe(200);
  });

  it('over WebSocket a response.create with an unknown field gets an error event unknown_parameter in its lane; the frame fields (type, stream_id, generate) and Codex\'s are taken', async () => {
    const { url } = await testServer();
    const ws = await RawSocket.connect(url);
    try {
      ws.send({ type: 'response.create', model: 'm', input: 'hi', stream_id: 'a', temprature: 1 });
      const err = await ws.next('error');
      expect(err).toMatchObject({ stream_id: 'a', error: { type: 'invalid_request_error', code: 'unknown_parameter', param: 'temprature' } });
      ws.send({ type: 'response.create', ...CODEX_HTTP, generate: false, stream_id: 'b' });
      const done = await ws.next('response.completed');
      expect(done.response.status).toBe('completed');
    } finally {
      ws.dispose();
    }
  });

  it('llr serve --allow-unknown-parameters (ServerOptions.allowUnknownParameters) ignores them instead, over HTTP and WebSocket: for a client newer than the list', async () => {
    const { url } = await testServer({ allowUnknownParameters: true });
    const typo = await create(url, { model: 'm', input: 'hi', temprature: 0.2, newer_field: { a: 1 } });
    expect(typo.status, JSON.stringify(typo.json)).toBe(200);
    const ws = await RawSocket.connect(url);
    try {
      ws.send({ type: 'response.create', model: 'm', input: 'hi', newer_field: true });
      expect((await ws.next('response.completed')).response.status).toBe('completed');
    } finally {
      ws.dispose();
    }
  });
});

describe('an empty previous_response_id', () => {
  // It was taken as no chain and echoed as "" (outside conformance tester): a client reads a continuation from a
  // non-null id. Refused as the API refuses empty strings, over HTTP, WebSocket and the token count.
  it('is 400 empty_string naming it', async () => {
    const { url } = await testServer();
    const r = await create(url, { model: 'm', input: 'hi', previous_response_id: '' });
    expect(r.status).toBe(400);
    expect(r.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'empty_string', param: 'previous_response_id' });
    const count = await fetch(`${url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', previous_response_id: '' }) });
    expect(((await count.json()) as { error: unknown }).error).toMatchObject({ code: 'empty_string', param: 'previous_response_id' });
    const ws = await RawSocket.connect(url);
    try {
      ws.send({ type: 'response.create', model: 'm', input: 'hi', previous_response_id: '' });
      expect(await ws.next('error')).toMatchObject({ type: 'error', error: { code: 'empty_string', param: 'previous_response_id' } });
    } finally {
      ws.dispose();
    }
    expect((await create(url, { model: 'm', input: 'hi', previous_response_id: null })).status).toBe(200);
  });
});
