/**
 * The SDKs' retries against this server's refusals (openai-node 6.49: it retries 408, 409, 429 and 5xx, twice by
 * default, reading `x-should-retry`, then `retry-after-ms` / `retry-after`). A create whose run the server failed
 * (500 with the failed Response) has run: it must not be retried, or one call runs three times. A refusal of load
 * says when to come back. The server's run records count the runs.
 */
import OpenAI, { APIError } from 'openai';
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

async function records(url: string): Promise<RunRecord[]> {
  const res = await fetch(`${url}/llr/runs?order=asc&limit=1000`);
  return ((await res.json()) as { data: RunRecord[] }).data;
}

async function refusal(p: Promise<unknown>): Promise<APIError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(APIError);
  return err as APIError;
}

describe('openai-node retries', () => {
  it('a create the server failed (500) is not retried: one call, one run', async () => {
    const { url } = await testServer({ chaos: ['error@first-token:1'] });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 2 });
    const err = await refusal(client.responses.create({ model: 'm', input: 'hi' }));
    expect(err.status).toBe(500);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    // Three before: the SDK retried the 500 twice and the server ran (stored, billed) the create each time.
    expect((await records(url)).map((r) => r.status)).toEqual(['failed']);
  });

  it('a refusal of load (503 server_busy) says when to retry, and nothing ran; one that can never fit says not to', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: {}, call_id: 'call_a' }] }]);
    const { url } = await testServer({ policy, limits: { maxServerBytes: 64 * 1024 } });
    // A long-lived run paused on its call holds most of the budget: a create that fits alone does not fit beside it.
    const paused = await RawSocket.longLived(url);
    paused.send({ type: 'response.create', model: 'm', input: 'x'.repeat(40_000), tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } }] });
    await paused.next('response.done');
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const err = await refusal(client.responses.create({ model: 'm', input: 'x'.repeat(30_000) }));
    expect([err.status, err.code]).toEqual([503, 'server_busy']);
    expect(err.headers?.get('retry-after')).toBe('1');
    expect(err.headers?.get('retry-after-ms')).toBe('1000');
    // A body larger than the whole budget can never fit: 413, not to be retried (atk89 F7, atk90 F2).
    const never = await refusal(client.responses.create({ model: 'm', input: 'x'.repeat(70_000) }));
    expect([never.status, never.code]).toEqual([413, 'payload_too_large']);
    expect(never.headers?.get('x-should-retry')).toBe('false');
    expect(never.headers?.get('retry-after')).toBeNull();
    // Nothing ran over HTTP: the only run is the paused one.
    expect((await records(url)).map((r) => r.protocol)).toEqual(['long-lived']);
    paused.dispose();
  });

  it('a 400 is not retried and carries no retry advice', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 2 });
    const err = await refusal(client.responses.create({ model: 'm', input: 'hi', temperature: 9 }));
    expect(err.status).toBe(400);
    expect(err.headers?.get('retry-after')).toBeNull();
    expect(err.headers?.get('x-should-retry')).toBeNull();
  });
});
