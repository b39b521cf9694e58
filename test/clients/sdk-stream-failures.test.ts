/**
 * A streamed response the server fails (`error`, then `response.failed`) through the real clients that read the SSE
 * stream with openai-node: its Stream throws only on an event with a nested `error` object, the shape the API
 * sends (the AI SDK models both shapes). With only the spec's flat fields the failure passed unseen: a LangChain
 * stream ended as if it had succeeded, and an Agents SDK streamed run took the failed response as an empty turn and
 * ran the agent again until `maxTurns` (ten creates, each failed). The server's run records count the runs.
 */
import { Agent, OpenAIProvider, Runner } from '@openai/agents';
import { ChatOpenAI } from '@langchain/openai';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { testServer } from '../helpers/server.js';

const FAULT = /An injected fault \(llr serve --chaos error@mid-stream\) failed this response/;

async function records(url: string): Promise<RunRecord[]> {
  const res = await fetch(`${url}/llr/runs?order=asc&limit=1000`);
  return ((await res.json()) as { data: RunRecord[] }).data;
}

const failing = () => testServer({ chaos: ['error@mid-stream'] });

describe('a streamed response the server fails, through the clients', () => {
  it('the SSE error event carries the flat fields and the nested error object', async () => {
    const { url } = await failing();
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', stream: true }) });
    const frame = (await res.text()).split('\n\n').find((f) => f.startsWith('event: error\n'))!;
    const data = JSON.parse(frame.slice(frame.indexOf('data: ') + 6)) as Record<string, unknown>;
    expect(data).toMatchObject({ type: 'error', code: 'injected_fault', message: expect.stringMatching(FAULT), param: null });
    expect(typeof data['sequence_number']).toBe('number');
    expect(data['error']).toEqual({ type: 'server_error', code: 'injected_fault', message: data['message'], param: null });
  });

  it('openai-node: iterating the stream throws the server error', async () => {
    const { url } = await failing();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await client.responses.create({ model: 'm', input: 'hi', stream: true });
    const read = async () => {
      for await (const _ of stream);
    };
    await expect(read()).rejects.toThrow(FAULT);
  });

  it('LangChain: the stream throws rather than ending as a success', async () => {
    const { url } = await failing();
    const llm = new ChatOpenAI({ model: 'gpt-4.1-mini', apiKey: 'x', configuration: { baseURL: `${url}/v1` }, useResponsesApi: true, maxRetries: 0 });
    const read = async () => {
      for await (const _ of await llm.stream('hi'));
    };
    await expect(read()).rejects.toThrow(FAULT);
  });

  it('Agents SDK: a streamed run fails once, not ten turns of failed responses', async () => {
    const { url } = await failing();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const provider = new OpenAIProvider({ openAIClient: client, useResponses: true });
    try {
      const runner = new Runner({ modelProvider: provider, tracingDisabled: true });
      const run = async () => {
        const r = await runner.run(new Agent({ name: 'a', model: 'gpt-4.1-mini' }), 'hi', { stream: true });
        for await (const _ of r.toStream());
        await r.completed;
        if (r.error) throw r.error;
      };
      await expect(run()).rejects.toThrow(FAULT);
      expect((await records(url)).map((r) => r.status)).toEqual(['failed']);
    } finally {
      await provider.close();
    }
  });
});
