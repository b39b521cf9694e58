/**
 * The `openai` SDK (6.49) as a client of the long-lived design over HTTP,
 * knowing only the public API plus the design's documented extensions:
 * `responses.create({stream: true}, {query: {protocol: 'long-lived'}})`
 * iterated to the end, each pause answered with a POST to `/append` and a run
 * ended with `responses.cancel`. The SDK passes the extension events through
 * (`response.done`, `response.cancelled`); its `responses.stream()` helper
 * does not: it throws at the first one (docs/protocol.md says so).
 */
import OpenAI from 'openai';
import type { FunctionTool, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

type Paused = { type: 'response.done'; response: { id: string; status: string; pending_tool_calls: string[] }; sequence_number: number };
type Event = ResponseStreamEvent | Paused | { type: 'response.cancelled'; response: { id: string; status: string }; sequence_number: number };

const shell: FunctionTool = {
  type: 'function',
  name: 'exec_command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
  strict: false,
};
const LONG_LIVED = { query: { protocol: 'long-lived' } };

async function sdk() {
  const { url } = await testServer();
  return new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
}

/** One sequence from 0, one response id, each item's events at the output_index its `added` took. */
function expectOneResponse(events: Event[]): void {
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  const ids = new Set(events.flatMap((e) => ('response' in e ? [e.response.id] : [])));
  expect(ids.size).toBe(1);
  const items: string[] = [];
  for (const e of events) {
    if (e.type === 'response.output_item.added') {
      expect(e.output_index).toBe(items.length);
      items.push(e.item.id!);
    } else if ('item_id' in e && 'output_index' in e) expect(items[e.output_index]).toBe(e.item_id);
  }
}

describe('openai SDK over long-lived HTTP', () => {
  it('create({stream: true}) iterates a paused run to response.completed, appends posted at each response.done', async () => {
    const client = await sdk();
    const stream = await client.responses.create({ model: 'm', input: 'run\n$ ls\n$ pwd', tools: [shell], parallel_tool_calls: false, stream: true }, LONG_LIVED);
    const events: Event[] = [];
    for await (const e of stream as AsyncIterable<Event>) {
      events.push(e);
      if (e.type === 'response.done') {
        const input = e.response.pending_tool_calls.map((call_id) => ({ type: 'function_call_output', call_id, output: 'ok' }));
        await client.post(`/responses/${e.response.id}/append`, { body: { input } });
      }
    }
    expect(events.filter((e) => e.type === 'response.done')).toHaveLength(2);
    expect(events.at(-1)!.type).toBe('response.completed');
    expectOneResponse(events);
  });

  it('responses.cancel ends a paused run: the stream ends with response.cancelled', async () => {
    const client = await sdk();
    const stream = await client.responses.create({ model: 'm', input: 'run\n$ ls', tools: [shell], stream: true }, LONG_LIVED);
    const events: Event[] = [];
    for await (const e of stream as AsyncIterable<Event>) {
      events.push(e);
      if (e.type === 'response.done') expect((await client.responses.cancel(e.response.id)).status).toBe('cancelled');
    }
    expect(events.at(-1)!.type).toBe('response.cancelled');
    expectOneResponse(events);
  });

  it('the responses.stream() helper throws at response.done, an event type the API does not have', async () => {
    const client = await sdk();
    const helper = client.responses.stream({ model: 'm', input: 'run\n$ ls', tools: [shell] }, LONG_LIVED);
    await expect(helper.finalResponse()).rejects.toThrow(/Unhandled response stream event.*response\.done/);
  });
});
