/**
 * `tool_choice` forcing a tool the model cannot call here. A hosted tool's
 * type forced without that tool in `tools` is refused as the API refuses it
 * ("Tool choice 'web_search_preview' not found in 'tools' parameter.", a
 * public client report of the API's answer); a forced tool the simulated
 * model never calls (a custom tool, a hosted one, `required` with no function
 * tool) is refused `unsupported_value`: the API would make that call, and
 * before, the response completed with a message instead (outside attack,
 * docs/protocol.md).
 */
import OpenAI, { APIError } from 'openai';
import type { ResponseCreateParamsNonStreaming } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { testServer } from '../helpers/server.js';

const FN = { type: 'function' as const, name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } }, strict: false };
const CUSTOM = { type: 'custom' as const, name: 'apply_patch' };

async function refusal(client: OpenAI, body: Partial<ResponseCreateParamsNonStreaming>): Promise<Record<string, unknown>> {
  try {
    const r = await client.responses.create({ model: 'm', input: 'hello', ...body } as ResponseCreateParamsNonStreaming);
    return { answered: r.output.map((o) => o.type) };
  } catch (e) {
    const err = e as APIError;
    return { status: err.status, type: err.type, code: err.code, param: err.param, message: err.message };
  }
}

describe('tool_choice forcing a tool', () => {
  it("a hosted tool's type forced without that tool in tools is 400 invalid_value, in the API's words", async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    for (const type of ['web_search_preview', 'file_search', 'computer_use_preview', 'image_generation', 'code_interpreter'] as const) {
      const got = await refusal(client, { tool_choice: { type } });
      expect(got, type).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'tool_choice' });
      expect(got['message'], type).toContain(`Tool choice '${type}' not found in 'tools' parameter.`);
    }
    for (const tool_choice of [{ type: 'shell' as const }, { type: 'apply_patch' as const }]) {
      expect(await refusal(client, { tool_choice, tools: [FN] }), tool_choice.type).toMatchObject({ status: 400, code: 'invalid_value', param: 'tool_choice' });
    }
  });

  it('a forced tool the model never calls (custom, hosted, required with no function tool) is 400 unsupported_value, not a message', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const refused = { status: 400, type: 'invalid_request_error', code: 'unsupported_value', param: 'tool_choice' };
    expect(await refusal(client, { tools: [CUSTOM, FN], tool_choice: { type: 'custom', name: 'apply_patch' } })).toMatchObject(refused);
    expect(await refusal(client, { tools: [{ type: 'web_search_preview' }], tool_choice: { type: 'web_search_preview' } })).toMatchObject(refused);
    expect(await refusal(client, { tools: [CUSTOM], tool_choice: 'required' })).toMatchObject(refused);
    expect(await refusal(client, { tools: [CUSTOM, FN], tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'custom', name: 'apply_patch' }] } })).toMatchObject(refused);
    // What the model can obey is taken as before.
    expect(await refusal(client, { tools: [CUSTOM, FN], tool_choice: 'required' })).toEqual({ answered: ['function_call'] });
    expect(await refusal(client, { tools: [CUSTOM, FN], tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'lookup' }] } })).toEqual({ answered: ['function_call'] });
    expect(await refusal(client, { tools: [CUSTOM], tool_choice: 'auto' })).toEqual({ answered: ['message'] });
    expect(await refusal(client, { tools: [CUSTOM], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'custom', name: 'apply_patch' }] } })).toEqual({ answered: ['message'] });
  });

  // allowed_tools lists tool definitions: a custom tool named like a function did not allow the function, yet in auto
  // mode the model called it (outside conformance tester; required mode already counted the listed functions only).
  it("allowed_tools in auto mode lets the model call only the listed function tools, by type and name", async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const weather = { type: 'function' as const, name: 'get_weather', description: 'Get the weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false };
    const tools = [weather, FN, { type: 'custom' as const, name: 'get_weather_text' }];
    const ask = (listed: Array<{ type: string; name: string }>) =>
      refusal(client, { input: 'What is the weather in Paris?', tools, tool_choice: { type: 'allowed_tools', mode: 'auto', tools: listed } });
    // The model calls get_weather for this question when it may.
    expect(await ask([{ type: 'function', name: 'get_weather' }])).toEqual({ answered: ['function_call'] });
    // Listed under another type (a custom tool of that name): not allowed, so it answers.
    expect(await ask([{ type: 'custom', name: 'get_weather_text' }])).toEqual({ answered: ['message'] });
    expect(await ask([{ type: 'function', name: 'lookup' }])).toEqual({ answered: ['message'] });
  });

  // Every entry must name a tool of `tools`, as a forced tool must: the API refuses one it does not declare, in either
  // mode ("Tool choice 'web_search' not found in 'tools' parameter.", vercel/ai#18997); it was taken, and in required mode
  // a function not declared was told "lists no function tool" (outside conformance tester atk118 F1).
  it('an allowed_tools entry that names no tool of tools is 400 invalid_value, in either mode', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const tools = [FN, CUSTOM, { type: 'mcp' as const, server_label: 'docs', server_url: 'https://example.com/mcp' }, { type: 'web_search_preview' as const }];
    const allowed = (mode: 'auto' | 'required', listed: Array<Record<string, unknown>>) =>
      refusal(client, { input: 'hello', tools, tool_choice: { type: 'allowed_tools', mode, tools: listed } as never });
    const notFound = (what: string) => ({ status: 400, code: 'invalid_value', param: 'tool_choice', message: `400 Tool choice '${what}' not found in 'tools' parameter.` });
    for (const mode of ['auto', 'required'] as const) {
      expect(await allowed(mode, [{ type: 'function', name: 'web_search' }]), mode).toMatchObject(notFound('web_search'));
      expect(await allowed(mode, [{ type: 'function', name: 'lookup' }, { type: 'function', name: 'nope' }]), mode).toMatchObject(notFound('nope'));
      // By type and name: a custom tool named like the function is not the function.
      expect(await allowed(mode, [{ type: 'custom', name: 'lookup' }]), mode).toMatchObject(notFound('lookup'));
      expect(await allowed(mode, [{ type: 'mcp', server_label: 'wiki' }]), mode).toMatchObject(notFound('wiki'));
      expect(await allowed(mode, [{ type: 'file_search' }]), mode).toMatchObject(notFound('file_search'));
      expect(await allowed(mode, [{ type: 'function' }]), mode).toMatchObject({ status: 400, code: 'missing_required_parameter', param: 'tool_choice.tools[0].name' });
      expect(await allowed(mode, [{ type: 'custom', name: 5 }]), mode).toMatchObject({ status: 400, code: 'invalid_type', param: 'tool_choice.tools[0].name' });
    }
    // Declared ones are taken: each kind, a hosted tool under its preview alias's other name, MCP by label or any.
    const declared = [{ type: 'function', name: 'lookup' }, { type: 'custom', name: 'apply_patch' }, { type: 'mcp', server_label: 'docs' }, { type: 'mcp' }, { type: 'web_search_preview_2025_03_11' }];
    expect(await allowed('auto', declared)).toEqual({ answered: ['message'] });
    expect(await allowed('required', declared)).toEqual({ answered: ['function_call'] });
  });

  it('over WebSocket the same refusal is an error event naming tool_choice', async () => {
    const { url } = await testServer();
    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses`);
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    const first = new Promise<Record<string, any>>((resolve) => ws.once('message', (d) => resolve(JSON.parse(String(d)))));
    ws.send(JSON.stringify({ type: 'response.create', model: 'm', input: 'hello', tools: [CUSTOM], tool_choice: { type: 'custom', name: 'apply_patch' } }));
    const ev = await first;
    ws.close();
    expect(ev).toMatchObject({ type: 'error', status: 400, error: { type: 'invalid_request_error', code: 'unsupported_value', param: 'tool_choice' } });
  });
});
