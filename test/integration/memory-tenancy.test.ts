/**
 * Over real HTTP: the prefix cache does not leak one API key's prompts to
 * another through `cached_tokens` (unless `prefixCacheScope: 'shared'`), and
 * the server keeps no model request unless asked to.
 */
import { describe, expect, it } from 'vitest';
import type { Response } from '../../src/protocol/objects.js';
import type { SimulatedModel } from '../../src/model/simulated.js';
import { testServer } from '../helpers/server.js';

const input = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');

async function cachedTokens(url: string, key: string): Promise<number> {
  const res = await fetch(`${url}/v1/responses`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'sim-model', input, store: false }),
  });
  expect(res.status).toBe(200);
  const r = (await res.json()) as Response;
  return r.usage!.input_tokens_details.cached_tokens;
}

describe('prefix cache tenancy', () => {
  it('partitioned per API key by default: bob never sees alice’s cached prefix', async () => {
    const { url } = await testServer({ apiKeys: ['alice', 'bob'] });
    expect(await cachedTokens(url, 'alice')).toBe(0);
    expect(await cachedTokens(url, 'alice')).toBeGreaterThan(0);
    expect(await cachedTokens(url, 'bob')).toBe(0);
  });

  it("prefixCacheScope 'shared' is one namespace (the documented switch)", async () => {
    const { url } = await testServer({ apiKeys: ['alice', 'bob'], prefixCacheScope: 'shared' });
    expect(await cachedTokens(url, 'alice')).toBe(0);
    expect(await cachedTokens(url, 'bob')).toBeGreaterThan(0);
  });
});

describe('request recording', () => {
  it('keeps no model request by default, and the last N with recordRequests', async () => {
    // The demo wraps the model (its lanes get their own); without it the model is the simulated one.
    const plain = await testServer({ demo: false });
    await cachedTokens(plain.url, 'x');
    const model = plain.server.services.model as SimulatedModel;
    expect(model.callCount).toBe(1);
    expect(model.calls).toEqual([]);

    const recording = await testServer({ recordRequests: 2, demo: false });
    for (let i = 0; i < 3; i++) await cachedTokens(recording.url, 'x');
    expect((recording.server.services.model as SimulatedModel).calls).toHaveLength(2);
  });
});
