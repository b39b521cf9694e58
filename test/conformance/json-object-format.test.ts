/**
 * `text.format: {type: "json_object"}` (JSON mode) needs the word "json" in
 * the conversation, as the API requires: "Response input messages must
 * contain the word 'json' in some form to use 'text.format' of type
 * 'json_object'." (public client reports quote the API's answer). It was
 * taken without it, so a request that worked here failed against the API
 * (outside conformance tester; docs/protocol.md, Echoed fields).
 */
import OpenAI, { APIError } from 'openai';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { testServer } from '../helpers/server.js';

const JSON_MODE = { format: { type: 'json_object' as const } };

describe('text.format json_object', () => {
  it("is refused 400 naming input when no message (nor the instructions) holds the word 'json'; taken when one does, in any case, in the chain too", async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const refused = await client.responses.create({ model: 'm', input: 'hello', text: JSON_MODE }).catch((e: APIError) => e);
    expect(refused).toBeInstanceOf(APIError);
    expect(refused).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'input' });
    expect((refused as APIError).message).toContain("Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.");
    // Plain text and json_schema need nothing.
    expect((await client.responses.create({ model: 'm', input: 'hello' })).status).toBe('completed');
    const answered = await client.responses.create({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Reply as Json, please' }] }], text: JSON_MODE });
    expect(JSON.parse(answered.output_text)).toHaveProperty('answer');
    expect((await client.responses.create({ model: 'm', input: 'hello', instructions: 'Answer in JSON.', text: JSON_MODE })).status).toBe('completed');
    // A continuation whose stored chain mentions it.
    const next = await client.responses.create({ model: 'm', previous_response_id: answered.id, input: 'and again', text: JSON_MODE });
    expect(next.status).toBe('completed');
  });

  it('over WebSocket mode: an error event naming input; a continuation from the connection cache whose context mentions it is taken', async () => {
    const { url } = await testServer();
    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses`);
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    const next = () => new Promise<Record<string, any>>((resolve) => {
      const on = (d: WebSocket.RawData) => {
        const e = JSON.parse(String(d)) as Record<string, any>;
        if (e['type'] === 'error' || e['type'] === 'response.completed') { ws.off('message', on); resolve(e); }
      };
      ws.on('message', on);
    });
    ws.send(JSON.stringify({ type: 'response.create', model: 'm', input: 'hello', store: false, text: JSON_MODE }));
    expect(await next()).toMatchObject({ type: 'error', status: 400, error: { code: 'invalid_value', param: 'input' } });
    ws.send(JSON.stringify({ type: 'response.create', model: 'm', input: 'give me json', store: false, text: JSON_MODE }));
    const first = await next();
    expect(first['type']).toBe('response.completed');
    ws.send(JSON.stringify({ type: 'response.create', model: 'm', previous_response_id: first['response']['id'], input: 'more', store: false, text: JSON_MODE }));
    expect((await next())['type']).toBe('response.completed');
    ws.close();
  });
});
