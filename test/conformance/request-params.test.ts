/**
 * Request values outside the API's enums and bounds (the OpenAPI spec's
 * `CreateResponse`, openai-node's types) are refused with `400` naming the
 * field, as the API refuses them, rather than taken: a request that works
 * here and fails against the API (docs/protocol.md, "Every event and error
 * per design").
 */
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

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

  it('safety_identifier is at most 64 characters (the spec\'s maxLength), counted as Unicode code points', async () => {
    const { url } = await testServer();
    const long = await create(url, { model: 'm', input: 'hi', safety_identifier: 'a'.repeat(65) });
    expect(long.status).toBe(400);
    expect(long.json['error']).toMatchObject({ type: 'invalid_request_error', code: 'string_above_max_length', param: 'safety_identifier' });
    const tokens = await fetch(`${url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', safety_identifier: 'a'.repeat(65) }) });
    expect(tokens.status).toBe(400);
    for (const id of ['a'.repeat(64), '\u{1F600}'.repeat(64)]) {
      const ok = await create(url, { model: 'm', input: 'hi', safety_identifier: id });
      expect(ok.status).toBe(200);
      expect(ok.json['safety_identifier']).toBe(id);
    }
  });
});
