/**
 * Content parts as openai-node types them (outside conformance tester): a message holds
 * `ResponseInputContent` parts (`input_text`, `input_image`, `input_file`; an assistant's `output_text`, `refusal`),
 * a tool's output list `ResponseFunctionCallOutputItem`s (`input_text`, `input_image`, `input_file`). Anything else was
 * taken and listed back by input_items to typed readers that decode those unions. And a field sent with the wrong type
 * is `invalid_type`, not `missing_required_parameter`.
 */
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

async function create(url: string, body: unknown): Promise<{ status: number; json: Record<string, any> }> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

const call = { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' };
const custom = { type: 'custom_tool_call', call_id: 'c1', name: 'g', input: 'x' };

describe('content parts', () => {
  it("an input_audio part (in no Responses input union) is refused, in a message and in a tool output, and was listed back as '{type: input_audio}'", async () => {
    const { url } = await testServer();
    for (const part of [{ type: 'input_audio' }, { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }]) {
      const inMessage = await create(url, { model: 'm', input: [{ role: 'user', content: [part] }] });
      expect(inMessage.status).toBe(400);
      expect(inMessage.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'input[0].content[0].type' });
      const inOutput = await create(url, { model: 'm', input: [call, { type: 'function_call_output', call_id: 'c1', output: [part] }] });
      expect(inOutput.json['error']).toMatchObject({ code: 'invalid_value', param: 'input[1].output[0].type' });
    }
  });

  it("a function's or custom tool's output lists input parts only: output_text and refusal are refused; input_text, input_image, input_file taken and listed back", async () => {
    const { url } = await testServer();
    for (const [item, output] of [
      [call, 'function_call_output'],
      [custom, 'custom_tool_call_output'],
    ] as const) {
      for (const part of [{ type: 'output_text', text: 'x', annotations: [] }, { type: 'refusal', refusal: 'no' }]) {
        const res = await create(url, { model: 'm', input: [item, { type: output, call_id: 'c1', output: [part] }] });
        expect(res.status, `${output} ${part.type}`).toBe(400);
        expect(res.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'input[1].output[0].type' });
        expect(res.json['error'].message).toContain(`'${part.type}'`);
      }
      const parts = [
        { type: 'input_text', text: 'ok' },
        { type: 'input_image', image_url: 'https://example.com/a.png', detail: 'low' },
        { type: 'input_file', file_id: 'file-1' },
      ];
      const ok = await create(url, { model: 'm', input: [item, { type: output, call_id: 'c1', output: parts }] });
      expect(ok.status, output).toBe(200);
      const listed = (await (await fetch(`${url}/v1/responses/${ok.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, any>> };
      expect(listed.data[1]).toMatchObject({ type: output, output: parts });
    }
  });

  it("a tool's, an item's or a message part's type sent as another JSON type is invalid_type showing it; absent or null, missing (it was 'missing' for tools and parts; outside attack atk109 F1)", async () => {
    const { url } = await testServer();
    const tool = (type: unknown) => ({ model: 'm', input: 'hi', tools: [{ type, name: 'f', parameters: { type: 'object' } }] });
    const part = (type: unknown) => ({ model: 'm', input: [{ role: 'user', content: [{ type, text: 'x' }] }] });
    const item = (type: unknown) => ({ model: 'm', input: [{ type, call_id: 'c', output: 'x' }] });
    for (const [make, param] of [[tool, 'tools[0].type'], [part, 'input[0].content[0].type'], [item, 'input[0].type']] as const) {
      for (const [type, shown] of [[true, 'true'], [7, '7'], [[], '[]'], [{}, '{}']] as const) {
        const res = await create(url, make(type));
        expect(res.status, `${param} ${shown}`).toBe(400);
        expect(res.json['error'], `${param} ${shown}`).toEqual({
          type: 'invalid_request_error',
          code: 'invalid_type',
          param,
          message: `Invalid type for '${param}': expected a string, but got ${shown} instead.`,
        });
      }
      const missing = await create(url, make(null));
      expect(missing.json['error'], `${param} null`).toMatchObject({ code: 'missing_required_parameter', param, message: `Missing required parameter: '${param}'.` });
    }
  });

  it("the same rule everywhere a type is required: absent or null is missing, another JSON type invalid_type, an unknown string invalid_value (outside attack atk112 F3)", async () => {
    const { url } = await testServer();
    const fc = { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' };
    const fn = { type: 'function', name: 'f', parameters: { type: 'object' } };
    const cases: Record<string, [(type: unknown) => unknown, string]> = {
      'tool output part': [(type) => ({ model: 'm', input: [fc, { type: 'function_call_output', call_id: 'c1', output: [{ type, text: 'x' }] }] }), 'input[1].output[0].type'],
      'reasoning summary part': [(type) => ({ model: 'm', input: [{ type: 'reasoning', summary: [{ type, text: 'x' }] }, { role: 'user', content: 'b' }] }), 'input[0].summary[0].type'],
      'reasoning content part': [(type) => ({ model: 'm', input: [{ type: 'reasoning', summary: [], content: [{ type, text: 'x' }] }, { role: 'user', content: 'b' }] }), 'input[0].content[0].type'],
      'apply_patch operation': [(type) => ({ model: 'm', input: [{ type: 'apply_patch_call', call_id: 'c2', status: 'completed', operation: { type, path: 'a', diff: '+x' } }, { role: 'user', content: 'b' }] }), 'input[0].operation.type'],
      'computer screenshot': [(type) => ({ model: 'm', input: [{ type: 'computer_call_output', call_id: 'c3', output: { type, image_url: 'https://e/a.png' } }, { role: 'user', content: 'b' }] }), 'input[0].output.type'],
      'custom tool format': [(type) => ({ model: 'm', input: 'hi', tools: [{ type: 'custom', name: 'g', format: { type } }] }), 'tools[0].format.type'],
      'context_management entry': [(type) => ({ model: 'm', input: 'hi', context_management: [{ type }] }), 'context_management[0].type'],
      'allowed_tools entry': [(type) => ({ model: 'm', input: 'hi', tools: [fn], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type, name: 'f' }] } }), 'tool_choice.tools[0].type'],
    };
    for (const [name, [make, param]] of Object.entries(cases)) {
      const absent = make(undefined);
      // An allowed_tools entry is any tool definition (openai-node: `Array<{[key: string]: unknown}>`): its type's value is not checked.
      const bogus = name === 'allowed_tools entry' ? [] : ([[make('bogus_type'), 'invalid_value']] as const);
      for (const [body, code] of [[absent, 'missing_required_parameter'], [make(null), 'missing_required_parameter'], [make(7), 'invalid_type'], [make(true), 'invalid_type'], ...bogus] as const) {
        const res = await create(url, body);
        expect(res.status, `${name}: ${JSON.stringify(body)}`).toBe(400);
        expect(res.json['error'], `${name}: ${JSON.stringify(body)}`).toMatchObject({ code, param });
        expect(res.json['error'].message, name).not.toContain('undefined');
      }
    }
    // The reverse: a required field left out is missing, not the wrong type.
    const schema = await create(url, { model: 'm', input: 'hi', text: { format: { type: 'json_schema', name: 'n' } } });
    expect(schema.json['error']).toMatchObject({ code: 'missing_required_parameter', param: 'text.format.schema' });
    const noType = await create(url, { model: 'm', input: 'hi', tools: [fn], tool_choice: { name: 'f' } });
    expect(noType.json['error']).toMatchObject({ code: 'missing_required_parameter', param: 'tool_choice.type' });
  });

  it("tool search items are checked as the spec types them: arguments or tools required, execution 'server' or 'client' (they were listed back as sent; atk112 F4)", async () => {
    const { url } = await testServer();
    const hi = { role: 'user', content: 'hi' };
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ type: 'tool_search_call', arguments: {}, execution: 'bogus' }, 'invalid_value', 'input[0].execution'],
      [{ type: 'tool_search_output', tools: [], execution: 7 }, 'invalid_type', 'input[0].execution'],
      [{ type: 'tool_search_output', tools: 5 }, 'invalid_type', 'input[0].tools'],
      [{ type: 'tool_search_output', tools: [{ name: 'f' }] }, 'missing_required_parameter', 'input[0].tools[0].type'],
      [{ type: 'tool_search_output' }, 'missing_required_parameter', 'input[0].tools'],
      [{ type: 'tool_search_call', arguments: 7 }, 'invalid_type', 'input[0].arguments'],
      [{ type: 'tool_search_call' }, 'missing_required_parameter', 'input[0].arguments'],
      [{ type: 'tool_search_call', arguments: {}, status: 'done' }, 'invalid_value', 'input[0].status'],
    ];
    for (const [item, code, param] of cases) {
      const res = await create(url, { model: 'm', input: [item, hi] });
      expect(res.status, JSON.stringify(item)).toBe(400);
      expect(res.json['error'], JSON.stringify(item)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    for (const item of [{ type: 'tool_search_call', arguments: { q: 'x' }, execution: 'client', call_id: null, status: 'completed' }, { type: 'tool_search_output', tools: [{ type: 'function', name: 'f' }], execution: null }]) {
      expect((await create(url, { model: 'm', input: [item, hi] })).status, JSON.stringify(item)).toBe(200);
    }
  });

  it("a reasoning item's content is a list of reasoning_text (or Codex's text) parts, when sent; else 400 naming it, where it was taken and listed back", async () => {
    const { url } = await testServer();
    const reasoning = (content: unknown) => ({ model: 'm', input: [{ role: 'user', content: 'a' }, { type: 'reasoning', summary: [], content }, { role: 'user', content: 'b' }] });
    const cases: Array<[unknown, string, string]> = [
      [5, 'invalid_type', 'input[1].content'],
      [{ type: 'reasoning_text', text: 'x' }, 'invalid_type', 'input[1].content'],
      [[5], 'invalid_type', 'input[1].content[0]'],
      [[{ type: 'output_text', text: 'x' }], 'invalid_value', 'input[1].content[0].type'],
      [[{ text: 'x' }], 'missing_required_parameter', 'input[1].content[0].type'],
      [[{ type: 'reasoning_text', text: 5 }], 'invalid_type', 'input[1].content[0].text'],
      [[{ type: 'reasoning_text' }], 'missing_required_parameter', 'input[1].content[0].text'],
    ];
    for (const [content, code, param] of cases) {
      const res = await create(url, reasoning(content));
      expect(res.status, JSON.stringify(content)).toBe(400);
      expect(res.json['error'], JSON.stringify(content)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const parts = [{ type: 'reasoning_text', text: 'thought' }, { type: 'text', text: 'more' }];
    for (const content of [parts, [], null]) {
      const ok = await create(url, reasoning(content));
      expect(ok.status, JSON.stringify(content)).toBe(200);
    }
    const ok = await create(url, reasoning(parts));
    const listed = (await (await fetch(`${url}/v1/responses/${ok.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, any>> };
    expect(listed.data[1]).toMatchObject({ type: 'reasoning', content: parts });
  });

  it("a client's output items (computer, shell, apply_patch, custom, MCP approval) have the fields openai-node's ResponseInputItem requires; they were taken and listed back", async () => {
    const { url } = await testServer();
    const user = { role: 'user', content: 'go' };
    const computer = { type: 'computer_call', call_id: 'c1', action: { type: 'screenshot' }, pending_safety_checks: [], status: 'completed' };
    const shell = { type: 'shell_call', call_id: 'c1', action: { commands: ['ls'] } };
    const patch = { type: 'apply_patch_call', call_id: 'c1', status: 'completed', operation: { type: 'create_file', path: 'a', diff: 'x' } };
    const cases: Array<[unknown[], string, string]> = [
      [[computer, { type: 'computer_call_output', call_id: 'c1', output: 5 }], 'invalid_type', 'input[2].output'],
      [[computer, { type: 'computer_call_output', call_id: 'c1' }], 'missing_required_parameter', 'input[2].output'],
      [[computer, { type: 'computer_call_output', call_id: 'c1', output: { type: 'screenshot', image_url: 'https://example.com/s.png' } }], 'invalid_value', 'input[2].output.type'],
      [[computer, { type: 'computer_call_output', call_id: 'c1', output: { type: 'computer_screenshot', image_url: 7 } }], 'invalid_type', 'input[2].output.image_url'],
      [[computer, { type: 'computer_call_output', output: { type: 'computer_screenshot', file_id: 'file-1' } }], 'missing_required_parameter', 'input[2].call_id'],
      [[shell, { type: 'shell_call_output', call_id: 'c1', output: 'x' }], 'invalid_type', 'input[2].output'],
      [[shell, { type: 'shell_call_output', call_id: 'c1', output: [{ stdout: 'x', outcome: { type: 'exit', exit_code: 0 } }] }], 'missing_required_parameter', 'input[2].output[0].stderr'],
      [[shell, { type: 'shell_call_output', call_id: 'c1', output: [{ stdout: 'x', stderr: '', outcome: 'exit' }] }], 'invalid_type', 'input[2].output[0].outcome'],
      [[patch, { type: 'apply_patch_call_output', call_id: 'c1', status: 'weird' }], 'invalid_value', 'input[2].status'],
      [[patch, { type: 'apply_patch_call_output', call_id: 5, status: 'failed' }], 'invalid_type', 'input[2].call_id'],
      [[{ type: 'custom_tool_call', call_id: 'c1', name: 'g', input: 'x' }, { type: 'custom_tool_call_output', call_id: ['c1'], output: 'ok' }], 'invalid_type', 'input[2].call_id'],
      [[{ type: 'mcp_approval_response', approval_request_id: 'mcpr_1', approve: 'yes' }], 'invalid_type', 'input[1].approve'],
      [[{ type: 'mcp_approval_response', approve: true }], 'missing_required_parameter', 'input[1].approval_request_id'],
    ];
    for (const [items, code, param] of cases) {
      const res = await create(url, { model: 'm', input: [user, ...items] });
      expect(res.status, JSON.stringify(items)).toBe(400);
      expect(res.json['error'], JSON.stringify(items)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    // As openai-node types them (optional fields left out), taken and listed back as sent.
    const good = [
      computer,
      { type: 'computer_call_output', call_id: 'c1', output: { type: 'computer_screenshot', image_url: 'https://example.com/s.png' } },
      { ...shell, call_id: 'c2' },
      { type: 'shell_call_output', call_id: 'c2', output: [{ stdout: 'a', stderr: '', outcome: { type: 'exit', exit_code: 0 } }] },
      { ...patch, call_id: 'c3' },
      { type: 'apply_patch_call_output', call_id: 'c3', status: 'failed', output: 'conflict' },
      { type: 'mcp_approval_response', approval_request_id: 'mcpr_1', approve: false, reason: null },
    ];
    const ok = await create(url, { model: 'm', input: [user, ...good] });
    expect(ok.status, JSON.stringify(ok.json['error'])).toBe(200);
    const listed = (await (await fetch(`${url}/v1/responses/${ok.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, any>> };
    expect(listed.data.slice(1).map((i) => i['type'])).toEqual(good.map((i) => i.type));
    expect(listed.data[6]).toMatchObject({ type: 'apply_patch_call_output', status: 'failed', output: 'conflict' });
  });

  // Outside conformance tester (atk54 F1, F2): these were taken with a required field left out, and input_items listed
  // them back without it to typed readers (openai-node's ResponseItem union) that decode it.
  it("a client's tool calls (computer, shell, apply_patch, local_shell) and a custom or local shell output need the fields that say what they are; a status left out is listed as the API lists it", async () => {
    const { url } = await testServer();
    const user = { role: 'user', content: 'go' };
    const local = { type: 'local_shell_call', call_id: 'c1', status: 'completed', action: { type: 'exec', command: ['ls'], env: {} } };
    const cases: Array<[unknown[], string, string]> = [
      [[custom, { type: 'custom_tool_call_output', call_id: 'c1' }], 'missing_required_parameter', 'input[2].output'],
      [[{ type: 'computer_call', action: { type: 'screenshot' } }], 'missing_required_parameter', 'input[1].call_id'],
      [[{ type: 'computer_call', call_id: 'c1', action: 'click' }], 'invalid_type', 'input[1].action'],
      [[{ type: 'computer_call', call_id: 'c1', pending_safety_checks: {} }], 'invalid_type', 'input[1].pending_safety_checks'],
      [[{ type: 'shell_call', call_id: 'c1' }], 'missing_required_parameter', 'input[1].action'],
      [[{ type: 'shell_call', call_id: 'c1', action: null }], 'missing_required_parameter', 'input[1].action'],
      [[{ type: 'shell_call', call_id: 'c1', action: { commands: 'ls' } }], 'invalid_type', 'input[1].action.commands'],
      [[{ type: 'shell_call', action: { commands: ['ls'] } }], 'missing_required_parameter', 'input[1].call_id'],
      [[{ type: 'apply_patch_call', call_id: 'c1', status: 'completed' }], 'missing_required_parameter', 'input[1].operation'],
      [[{ type: 'apply_patch_call', call_id: 'c1', operation: { type: 'rename_file', path: 'a' } }], 'invalid_value', 'input[1].operation.type'],
      [[{ type: 'apply_patch_call', call_id: 'c1', operation: { type: 'create_file', path: 'a' } }], 'missing_required_parameter', 'input[1].operation.diff'],
      [[{ type: 'apply_patch_call', call_id: 'c1', status: 'failed', operation: { type: 'delete_file', path: 'a' } }], 'invalid_value', 'input[1].status'],
      [[{ ...local, call_id: undefined }], 'missing_required_parameter', 'input[1].call_id'],
      [[{ ...local, action: undefined }], 'missing_required_parameter', 'input[1].action'],
      [[{ ...local, action: { type: 'exec', command: 'ls' } }], 'invalid_type', 'input[1].action.command'],
      [[{ ...local, status: 'done' }], 'invalid_value', 'input[1].status'],
      [[local, { type: 'local_shell_call_output', id: 'c1' }], 'missing_required_parameter', 'input[2].output'],
      [[local, { type: 'local_shell_call_output', id: 'c1', output: ['x'] }], 'invalid_type', 'input[2].output'],
    ];
    for (const [items, code, param] of cases) {
      const res = await create(url, { model: 'm', input: [user, ...items] });
      expect(res.status, JSON.stringify(items)).toBe(400);
      expect(res.json['error'], JSON.stringify(items)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    // With only what says what they are (no id, no status): taken, and listed with the status the SDK's types require
    // (`completed`, as the API lists them; a computer call's pending safety checks: none).
    const good = [
      { type: 'computer_call', call_id: 'c1', action: { type: 'screenshot' } },
      { type: 'computer_call_output', call_id: 'c1', output: { type: 'computer_screenshot', image_url: 'https://example.com/s.png' } },
      { type: 'apply_patch_call', call_id: 'c2', operation: { type: 'delete_file', path: 'a' } },
      { type: 'apply_patch_call_output', call_id: 'c2' },
      { type: 'local_shell_call', call_id: 'c3', action: { type: 'exec', command: ['ls'], env: {} } },
      { type: 'function_call_output', call_id: 'c3', output: 'a b' },
    ];
    const ok = await create(url, { model: 'm', input: [user, ...good] });
    expect(ok.status, JSON.stringify(ok.json['error'])).toBe(200);
    const listed = (await (await fetch(`${url}/v1/responses/${ok.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, any>> };
    expect(listed.data.slice(1).map((i) => [i['type'], i['status']])).toEqual(good.map((i) => [i.type, 'completed']));
    expect(listed.data[1]).toMatchObject({ pending_safety_checks: [] });
  });

  it("a hosted tool's item sent back needs the fields that say what it was (not its id or status); a web search call is taken as Codex sends it; the listing fills status and the nullable fields", async () => {
    const { url } = await testServer();
    const user = { role: 'user', content: 'go' };
    const mcp = { type: 'mcp_call', id: 'mcp_1', server_label: 's', name: 'n', arguments: '{}' };
    const cases: Array<[unknown, string, string]> = [
      [{ type: 'mcp_call' }, 'missing_required_parameter', 'input[1].server_label'],
      [{ ...mcp, name: null }, 'missing_required_parameter', 'input[1].name'],
      [{ ...mcp, arguments: {} }, 'invalid_type', 'input[1].arguments'],
      [{ type: 'mcp_approval_request', server_label: 's', name: 'n' }, 'missing_required_parameter', 'input[1].arguments'],
      [{ type: 'mcp_list_tools', server_label: 's', tools: {} }, 'invalid_type', 'input[1].tools'],
      [{ type: 'file_search_call', status: 'completed' }, 'missing_required_parameter', 'input[1].queries'],
      [{ type: 'file_search_call', queries: [1] }, 'invalid_type', 'input[1].queries'],
      [{ type: 'code_interpreter_call', code: 'x', outputs: [] }, 'missing_required_parameter', 'input[1].container_id'],
      // The fields a type leaves optional, of their types when sent, and its own status enum (atk55 F3).
      [{ ...mcp, status: 'weird' }, 'invalid_value', 'input[1].status'],
      [{ ...mcp, output: 5 }, 'invalid_type', 'input[1].output'],
      [{ type: 'mcp_list_tools', server_label: 's', tools: [1, 'x', null] }, 'invalid_type', 'input[1].tools'],
      [{ type: 'file_search_call', queries: ['q'], results: 'r' }, 'invalid_type', 'input[1].results'],
      [{ type: 'code_interpreter_call', container_id: 'c', outputs: {} }, 'invalid_type', 'input[1].outputs'],
      [{ type: 'image_generation_call', result: 7 }, 'invalid_type', 'input[1].result'],
      [{ type: 'image_generation_call', status: 'done' }, 'invalid_value', 'input[1].status'],
      [{ type: 'web_search_call', action: 'search' }, 'invalid_type', 'input[1].action'],
      [{ type: 'shell_call', call_id: 'c1', action: { commands: ['ls'] }, environment: 5 }, 'invalid_type', 'input[1].environment'],
    ];
    for (const [item, code, param] of cases) {
      const res = await create(url, { model: 'm', input: [user, item] });
      expect(res.status, JSON.stringify(item)).toBe(400);
      expect(res.json['error'], JSON.stringify(item)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    const good = [
      { type: 'web_search_call', action: { type: 'search', query: 'weather' }, status: 'completed' },
      { type: 'file_search_call', queries: ['q'] },
      { type: 'image_generation_call', id: 'ig_1' },
      { type: 'code_interpreter_call', container_id: 'cntr_1' },
      mcp,
      { type: 'mcp_list_tools', server_label: 's', tools: [{ name: 'lookup', input_schema: {} }] },
    ];
    const ok = await create(url, { model: 'm', input: [user, ...good] });
    expect(ok.status, JSON.stringify(ok.json['error'])).toBe(200);
    const listed = (await (await fetch(`${url}/v1/responses/${ok.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, any>> };
    expect(listed.data.slice(1, 5).map((i) => i['status'])).toEqual(['completed', 'completed', 'completed', 'completed']);
    expect(listed.data[3]).toMatchObject({ result: null });
    expect(listed.data[4]).toMatchObject({ code: null, outputs: null, container_id: 'cntr_1' });
    expect(listed.data[5]).toMatchObject(mcp);
  });

  it("a compaction's output shows an image part sent without detail with the API's default, as input_items lists it (atk54 F5)", async () => {
    const { url } = await testServer();
    const image = { type: 'input_image', image_url: 'https://example.com/a.png' };
    const input = [{ role: 'user', content: [image] }, { role: 'assistant', content: 'seen' }, { role: 'user', content: 'and now?' }];
    const res = await fetch(`${url}/v1/responses/compact`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input }) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { output: Array<Record<string, any>> };
    expect(body.output[0]).toMatchObject({ type: 'message', role: 'user', content: [{ ...image, detail: 'auto' }] });
    const stored = await create(url, { model: 'm', input: [{ role: 'user', content: [image] }] });
    const listed = (await (await fetch(`${url}/v1/responses/${stored.json['id']}/input_items`)).json()) as { data: Array<Record<string, any>> };
    expect(listed.data[0]!['content']).toEqual(body.output[0]!['content']);
  });

  // Found by an outside review: 24b7fa9 refused this screenshot (invalid_value, input[2].output.type), yet it is what
  // OpenAI's own computer-use sample (openai/openai-cua-sample-app, agent/agent.py) and @langchain/openai
  // (converters/responses.js, a ToolMessage whose content is the screenshot URL) send, and the API takes it.
  it("a computer_call_output's screenshot may be {type: 'input_image', image_url}, as OpenAI's computer-use sample and LangChain send it; listed back and taken again", async () => {
    const { url } = await testServer();
    const input = [
      { role: 'user', content: 'click the button' },
      { type: 'computer_call', id: 'cu_1', call_id: 'c1', action: { type: 'click', x: 1, y: 2, button: 'left' }, pending_safety_checks: [], status: 'completed' },
      { type: 'computer_call_output', call_id: 'c1', acknowledged_safety_checks: [], output: { type: 'input_image', image_url: 'data:image/png;base64,AAAA' } },
    ];
    const ok = await create(url, { model: 'm', input });
    expect(ok.status, JSON.stringify(ok.json['error'])).toBe(200);
    const listed = (await (await fetch(`${url}/v1/responses/${ok.json['id']}/input_items?order=asc`)).json()) as { data: Array<Record<string, any>> };
    expect(listed.data[2]).toMatchObject({ type: 'computer_call_output', output: { type: 'input_image', image_url: 'data:image/png;base64,AAAA' } });
    const again = await create(url, { model: 'm', input: listed.data });
    expect(again.status, JSON.stringify(again.json['error'])).toBe(200);
    // Any other type is still refused, naming the two.
    const bad = await create(url, { model: 'm', input: [...input.slice(0, 2), { ...input[2], output: { type: 'input_text', text: 'x' } }] });
    expect(bad.json['error']).toMatchObject({ code: 'invalid_value', param: 'input[2].output.type' });
    expect(bad.json['error'].message).toContain("'computer_screenshot' and 'input_image'");
  });

  it('an image is an http(s) URL, a data URL of an image type or a file id; a file part names its file (outside attack atk44 F1, F2: both were taken as sent)', async () => {
    const { url } = await testServer();
    const image = (p: Record<string, unknown>) => ({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', ...p }] }] });
    const file = (p: Record<string, unknown>) => ({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_file', ...p }] }] });
    for (const body of [
      image({ image_url: 'https://example.com/a.png' }),
      image({ image_url: 'HTTP://example.com/a.png' }),
      image({ image_url: 'data:image/png;base64,iVBORw0KGgo=' }),
      image({ image_url: 'data:image/jpeg,raw' }),
      image({ file_id: 'file-1' }),
      file({ file_id: 'file-1' }),
      file({ file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' }),
      file({ file_url: 'https://example.com/a.pdf' }),
    ]) {
      const res = await create(url, body);
      expect(res.status, JSON.stringify(body)).toBe(200);
    }
    const refused: Array<[unknown, string, string, string]> = [
      [image({ image_url: 'hello' }), 'invalid_value', 'input[0].content[0].image_url', "without the 'data:' prefix"],
      [image({ image_url: '/tmp/a.png' }), 'invalid_value', 'input[0].content[0].image_url', "without the 'data:' prefix"],
      [image({ image_url: 'file:///tmp/a.png' }), 'invalid_value', 'input[0].content[0].image_url', "without the 'data:' prefix"],
      [image({ image_url: 'data:text/plain;base64,aGk=' }), 'invalid_value', 'input[0].content[0].image_url', 'without an image MIME type'],
      [file({}), 'missing_required_parameter', 'input[0].content[0].file_id', "'file_id', 'file_data' or 'file_url'"],
      [file({ filename: 'a.pdf' }), 'missing_required_parameter', 'input[0].content[0].file_id', "'file_id', 'file_data' or 'file_url'"],
      [file({ file_url: 'hello' }), 'invalid_value', 'input[0].content[0].file_url', 'http or https URL'],
      [{ model: 'm', input: [call, { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_file' }] }] }, 'missing_required_parameter', 'input[1].output[0].file_id', 'file_id'],
      [{ model: 'm', input: [call, { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_image', image_url: 'x' }] }] }, 'invalid_value', 'input[1].output[0].image_url', 'data URL'],
      [
        {
          model: 'm',
          input: [
            { type: 'computer_call', id: 'cu_1', call_id: 'c1', action: { type: 'click', x: 1, y: 2, button: 'left' }, pending_safety_checks: [], status: 'completed' },
            { type: 'computer_call_output', call_id: 'c1', output: { type: 'computer_screenshot', image_url: 'screenshot.png' } },
          ],
        },
        'invalid_value',
        'input[1].output.image_url',
        'data URL',
      ],
    ];
    for (const [body, code, param, says] of refused) {
      const res = await create(url, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json['error'], JSON.stringify(body)).toMatchObject({ type: 'invalid_request_error', code, param });
      expect(res.json['error'].message).toContain(says);
    }
  });

  it('a field sent with the wrong type is invalid_type naming it; one left out is missing_required_parameter', async () => {
    const { url } = await testServer();
    const cases: Array<[unknown, string, string]> = [
      [{ input: [{ role: 'user', content: [{ type: 'input_text', text: 5 }] }] }, 'invalid_type', 'input[0].content[0].text'],
      [{ input: [{ role: 'user', content: [{ type: 'input_text', text: null }] }] }, 'invalid_type', 'input[0].content[0].text'],
      [{ input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, 'missing_required_parameter', 'input[0].content[0].text'],
      [{ input: [call, { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 5 }] }] }, 'invalid_type', 'input[1].output[0].text'],
      [{ input: [{ type: 5, role: 'user', content: 'x' }] }, 'invalid_type', 'input[0].type'],
      [{ input: [{ type: 'message', content: 'x' }] }, 'missing_required_parameter', 'input[0].role'],
      [{ input: [{ type: 'message', role: 5, content: 'x' }] }, 'invalid_type', 'input[0].role'],
      [{ input: [{ type: 'message', role: 'wizard', content: 'x' }] }, 'invalid_value', 'input[0].role'],
      [{ input: 'x', tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'function', name: 5 } }, 'invalid_type', 'tool_choice.name'],
      [{ input: 'x', tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'function' } }, 'missing_required_parameter', 'tool_choice.name'],
      [{ input: 'x', tools: [{ type: 'custom', name: 'g' }], tool_choice: { type: 'custom', name: ['g'] } }, 'invalid_type', 'tool_choice.name'],
      [{ input: 'x', tools: [{ type: 'mcp', server_label: 's', server_url: 'https://example.com' }], tool_choice: { type: 'mcp', server_label: 7 } }, 'invalid_type', 'tool_choice.server_label'],
    ];
    for (const [body, code, param] of cases) {
      const res = await create(url, { model: 'm', ...(body as object) });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json['error'], JSON.stringify(body)).toMatchObject({ type: 'invalid_request_error', code, param });
    }
  });
});
