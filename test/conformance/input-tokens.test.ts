/**
 * `POST /v1/responses/input_tokens` with the `openai` SDK (6.49,
 * `responses.inputTokens.count`): the count a create with the same body
 * reports as `usage.input_tokens` (instructions, tools, a text format, a
 * stored `previous_response_id` chain), `model` optional as in the API, and
 * a bad body refused as a create's is.
 */
import OpenAI from 'openai';
import type { InputTokenCountParams } from 'openai/resources/responses/input-tokens';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

describe('responses.inputTokens.count', () => {
  it('counts what a create with the same body reports as usage.input_tokens', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    const body = {
      model: 'm',
      instructions: 'Be brief.',
      input: [{ role: 'user' as const, content: 'What is the weather in Paris today?' }],
      tools: [{ type: 'function', name: 'get_weather', description: 'Weather for a city.', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }] as Array<{ type: 'function'; name: string; description: string; parameters: Record<string, unknown>; strict: boolean }>,
      text: { format: { type: 'json_schema' as const, name: 'a', schema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false } } },
    } satisfies InputTokenCountParams;
    const created = await client.responses.create(body);
    const count = await client.responses.inputTokens.count(body);
    expect(count).toEqual({ object: 'response.input_tokens', input_tokens: created.usage!.input_tokens });
    const { model: _model, ...withoutModel } = body;
    expect((await client.responses.inputTokens.count(withoutModel)).input_tokens).toBe(created.usage!.input_tokens);
    // openai-node 7's `InputTokenCountParams.model` is `string | null`: a null counts as an absent one (it was refused as missing).
    expect((await client.responses.inputTokens.count({ ...withoutModel, model: null })).input_tokens).toBe(created.usage!.input_tokens);
    // The first response called get_weather: a continuation answers it, or the API refuses it (missing_tool_output).
    const follow = [
      ...created.output.flatMap((o) => (o.type === 'function_call' ? [{ type: 'function_call_output' as const, call_id: o.call_id, output: 'Sunny, 21 °C.' }] : [])),
      { role: 'user' as const, content: 'And tomorrow?' },
    ];
    const next = await client.responses.inputTokens.count({ previous_response_id: created.id, input: follow });
    const chained = await client.responses.create({ model: 'm', previous_response_id: created.id, input: follow });
    expect(next.input_tokens).toBe(chained.usage!.input_tokens);
  });

  it('refuses a bad body as a create does; GET is 405', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    await expect(client.responses.inputTokens.count({ input: [{ role: 'nobody' as 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 400,
      param: 'input[0].role',
    });
    await expect(client.responses.inputTokens.count({ input: 'x', previous_response_id: 'resp_missing' })).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    expect((await fetch(`${url}/v1/responses/input_tokens`)).status).toBe(405);
  });

  // Its fields are InputTokenCountParams' (openai-node 6.49 and 7.5), not a create's: a create-only field (`stream`,
  // `metadata`, `temperature`) or a typo was taken, so a count that worked here failed against the API, which refuses
  // unknown parameters (outside conformance tester).
  it("refuses a field InputTokenCountParams does not have, 400 unknown_parameter naming it; --allow-unknown-parameters ignores it", async () => {
    const { url } = await testServer();
    const count = (body: unknown) => fetch(`${url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    for (const field of ['stream', 'metadata', 'temperature', 'instructons']) {
      const res = await count({ model: 'm', input: 'hi', [field]: field === 'metadata' ? {} : field === 'stream' ? false : 1 });
      expect(res.status, field).toBe(400);
      expect(((await res.json()) as { error: unknown }).error, field).toMatchObject({ type: 'invalid_request_error', code: 'unknown_parameter', param: field });
    }
    const every = { conversation: null, input: 'hi', instructions: 'x', model: 'm', parallel_tool_calls: true, personality: 'friendly', previous_response_id: null, reasoning: { effort: 'low' }, text: { format: { type: 'text' } }, tool_choice: 'auto', tools: [], truncation: 'auto' };
    expect((await count(every)).status).toBe(200);
    const lenient = await testServer({ allowUnknownParameters: true });
    expect((await fetch(`${lenient.url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ input: 'hi', stream: false }) })).status).toBe(200);
  });

  it("takes a personality of at most 64 characters (openai-node 7.60), refusing another type or a longer one naming it (they were taken)", async () => {
    for (const { url } of [await testServer(), await testServer({ allowUnknownParameters: true })]) {
      const count = async (personality: unknown) => {
        const res = await fetch(`${url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', personality }) });
        return { status: res.status, error: ((await res.json()) as { error?: Record<string, unknown> }).error };
      };
      expect((await count('p'.repeat(64))).status).toBe(200);
      expect((await count('\u{1F600}'.repeat(64))).status).toBe(200);
      expect(await count('p'.repeat(65))).toMatchObject({ status: 400, error: { code: 'string_above_max_length', param: 'personality' } });
      expect(await count(5)).toMatchObject({ status: 400, error: { code: 'invalid_type', param: 'personality' } });
    }
  });
});
