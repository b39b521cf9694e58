/**
 * Hidden reasoning tokens and max_output_tokens (outside attack): reasoning
 * counts toward the output budget, so a response's usage never reports more
 * output (or reasoning) tokens than max_output_tokens allowed.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import type { Response } from '../../src/protocol/objects.js';
import { SseStream, postJson } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

function post(url: string, body: unknown) {
  return fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

describe('hidden reasoning and max_output_tokens', () => {
  it('a reasoning burst over the budget is cut at max_output_tokens and the response is incomplete', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'hello there', hiddenTokens: 500 }]) });
    const r = (await (await post(url, { model: 'sim-model', input: 'hi', max_output_tokens: 16 })).json()) as Response;
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.usage!.output_tokens).toBeLessThanOrEqual(16);
    expect(r.usage!.output_tokens_details.reasoning_tokens).toBeLessThanOrEqual(r.usage!.output_tokens);
  });

  it('reasoning that fits leaves the rest of the budget to the text', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'one two three four five six seven eight nine ten', hiddenTokens: 10 }]) });
    const r = (await (await post(url, { model: 'sim-model', input: 'hi', max_output_tokens: 16 })).json()) as Response;
    expect(r.usage).toMatchObject({ output_tokens: 16, output_tokens_details: { reasoning_tokens: 10 } });
    expect(r.status).toBe('incomplete');
  });

  it('a long-lived run counts every segment\'s reasoning against one budget and is cut in the second segment', async () => {
    const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
    const { url } = await testServer({
      policy: scriptPolicy([
        { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }], hiddenTokens: 10 },
        { text: 'all done', hiddenTokens: 500 },
      ]),
    });
    const s = await SseStream.open(url, { model: 'sim-model', input: 'go', tools: [tool], max_output_tokens: 40 });
    const done = await s.next('response.done');
    const first = done.response.usage;
    if (first) expect(first.output_tokens_details.reasoning_tokens).toBeLessThanOrEqual(first.output_tokens);
    await postJson(`${url}/v1/responses/${done.response.id}/append`, { input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    const end = await s.next('response.incomplete');
    expect(end.response.usage!.output_tokens).toBe(40);
    expect(end.response.usage!.output_tokens_details.reasoning_tokens).toBeLessThanOrEqual(40);
    expect(end.response.usage!.output_tokens_details.reasoning_tokens).toBeGreaterThan(10);
  });
});
