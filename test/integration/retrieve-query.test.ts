/**
 * The query of `GET /v1/responses/{id}` is read as strictly as
 * `input_items`' (outside attack): `stream` and `include_obfuscation` are
 * `true` or `false`, once (`stream=yes` got the JSON, `stream=true&stream=false`
 * the stream); `include` takes the API's `ResponseIncludable` values (an
 * unknown one passed). Refusals are 400 `invalid_value` naming the parameter;
 * what openai-node sends (`include[]=…`, `stream=true`, `starting_after=N`,
 * `include_obfuscation`) still works. Real sockets, port 0.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

describe('GET /v1/responses/{id} query', () => {
  it('refuses a stream, include_obfuscation or include value the API does not take, and takes what openai-node sends', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const plain = await client.responses.create({ model: 'm', input: 'hi' });
    for (const [query, param] of [
      ['stream=yes', 'stream'],
      ['stream=1', 'stream'],
      ['stream=true&stream=false', 'stream'],
      ['include_obfuscation=maybe', 'include_obfuscation'],
      ['include[]=nope', 'include[0]'],
      ['include=message.output_text.logprobs&include[]=nope', 'include[1]'],
    ]) {
      const res = await fetch(`${url}/v1/responses/${plain.id}?${query}`);
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as { error: unknown }).error, query).toEqual({ message: expect.any(String), type: 'invalid_request_error', param, code: 'invalid_value' });
    }
    const got = await client.responses.retrieve(plain.id, { include: ['message.output_text.logprobs', 'reasoning.encrypted_content'], include_obfuscation: false });
    expect(got.id).toBe(plain.id);
    expect((await fetch(`${url}/v1/responses/${plain.id}?stream=false`)).status).toBe(200);
    const bg = await client.responses.create({ model: 'm', input: 'hi', background: true });
    const stream = await client.responses.retrieve(bg.id, { stream: true, starting_after: 1, include: ['reasoning.encrypted_content'], include_obfuscation: true });
    const types: string[] = [];
    for await (const e of stream) types.push(e.type);
    expect(types.at(-1)).toBe('response.completed');
  });
});
