/**
 * Hidden reasoning tokens and max_output_tokens (outside attack): reasoning
 * counts toward the output budget, so a response's usage never reports more
 * output (or reasoning) tokens than max_output_tokens allowed.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import type { Response } from '../../src/protocol/objects.js';
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
});
