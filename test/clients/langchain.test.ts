/**
 * LangChain JS (`@langchain/openai` 1.5.8 + `@langchain/core` 1.2.18, pinned,
 * Node 20) with `useResponsesApi: true`, as its docs show it: `invoke` for a
 * text turn, `stream` for a streamed turn, and the manual tool loop
 * (`bindTools`, run each `tool_calls` entry, send the `ToolMessage`s back)
 * with `tool_choice` auto and a named tool. Over HTTP + SSE (the
 * only transport it has); the server's run records prove each request.
 */
import { HumanMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RunRecord } from '../../src/engine/records.js';
import { testServer } from '../helpers/server.js';

const API_KEY = 'sk-test';

async function setup() {
  const ctx = await testServer({ apiKeys: [API_KEY] });
  const llm = new ChatOpenAI({ model: 'gpt-4.1-mini', apiKey: API_KEY, configuration: { baseURL: `${ctx.url}/v1` }, useResponsesApi: true, maxRetries: 0 });
  return { ...ctx, llm };
}

function weather(seen: string[]) {
  return tool(
    async ({ location }: { location: string }) => {
      seen.push(location);
      return `sunny in ${location}`;
    },
    { name: 'get_weather', description: 'Get the current weather for a location.', schema: z.object({ location: z.string() }) },
  );
}

async function records(url: string): Promise<RunRecord[]> {
  // The records are the caller's own (the key is required when keys are configured), newest last.
  const res = await fetch(`${url}/llr/runs?order=asc&limit=1000`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  return ((await res.json()) as { data: RunRecord[] }).data;
}

describe('LangChain ChatOpenAI (useResponsesApi)', () => {
  it('a text turn with invoke', async () => {
    const { llm } = await setup();
    const msg = await llm.invoke('Tell me about long-lived responses.');
    expect(msg.text).toContain('You said');
    expect(msg.usage_metadata?.output_tokens).toBeGreaterThan(0);
    expect(msg.response_metadata['model_name'] ?? msg.response_metadata['model']).toBe('gpt-4.1-mini');
  });

  it('a streamed turn with stream', async () => {
    const { llm, url } = await setup();
    let text = '';
    let chunks = 0;
    for await (const chunk of await llm.stream('Stream me something.')) {
      text += chunk.text;
      chunks++;
    }
    expect(chunks).toBeGreaterThan(3);
    expect(text).toContain('You said');
    expect((await records(url)).map((r) => r.protocol)).toEqual(['http']);
  });

  it('an auto tool loop: a tool call with the location, then a text answer', async () => {
    const { llm, url } = await setup();
    const seen: string[] = [];
    const get = weather(seen);
    const withTools = llm.bindTools([get]);
    const messages: BaseMessage[] = [new HumanMessage("What's the weather in San Francisco?")];
    const first = await withTools.invoke(messages);
    expect(first.tool_calls?.map((c) => [c.name, c.args])).toEqual([['get_weather', { location: 'San Francisco' }]]);
    messages.push(first);
    for (const call of first.tool_calls ?? []) messages.push(await get.invoke(call));
    const second = await withTools.invoke(messages);
    expect(second.tool_calls ?? []).toEqual([]);
    expect(second.text).toContain('sunny in San Francisco');
    expect(seen).toEqual(['San Francisco']);
    expect(await records(url)).toHaveLength(2);
  });

  // LangChain 1.5.8 drops a string tool_choice ("required", "auto", "none")
  // on the Responses path (it only forwards object forms), so "required" never
  // reaches any server; a named tool is forwarded as {type:"function", name}.
  it('a forced tool (tool_choice naming it) is called on every step', async () => {
    const { llm } = await setup();
    for (const tool_choice of ['get_weather']) {
      const seen: string[] = [];
      const get = weather(seen);
      const withTools = llm.bindTools([get], { tool_choice });
      const messages: BaseMessage[] = [new HumanMessage('Plan a trip to Oslo.')];
      for (let step = 0; step < 3; step++) {
        const ai = await withTools.invoke(messages);
        expect(ai.tool_calls?.map((c) => c.name), `${tool_choice} step ${step}`).toEqual(['get_weather']);
        messages.push(ai);
        for (const call of ai.tool_calls ?? []) messages.push(await get.invoke(call));
      }
      expect(seen).toEqual(['Oslo', 'Oslo', 'Oslo']);
    }
  });
});
