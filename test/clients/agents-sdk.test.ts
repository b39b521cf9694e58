/**
 * The OpenAI Agents SDK (`@openai/agents` 0.14.3, pinned: the last line that
 * takes openai 6.x, which runs on Node 20) against the server as its docs
 * show it: an `Agent` with a `tool()`, run by a `Runner` over an
 * `OpenAIProvider` pointed at the server, for a text turn, a streamed turn
 * (`toTextStream`), an auto tool loop, and forced tools (`modelSettings.
 * toolChoice`). Over HTTP + SSE (`useResponses: true`) and over its Responses
 * WebSocket transport (`useResponsesWebSocket: true`); the server's run
 * records prove the transport.
 *
 * Node 20 has no global `WebSocket` and the SDK's transport needs one that
 * takes upgrade headers: the `ws` package's class does, so the test assigns
 * it to `globalThis.WebSocket` (an application on Node 20 does the same).
 */
import { Agent, MaxTurnsExceededError, OpenAIProvider, Runner, tool } from '@openai/agents';
import OpenAI from 'openai';
import WebSocket from 'ws';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RunRecord } from '../../src/engine/records.js';
import { testServer } from '../helpers/server.js';

const API_KEY = 'sk-test';

beforeAll(() => {
  (globalThis as { WebSocket?: unknown }).WebSocket ??= WebSocket;
});

const providers: OpenAIProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

function weather(seen: string[]) {
  return tool({
    name: 'get_weather',
    description: 'Get the current weather for a location.',
    parameters: z.object({ location: z.string() }),
    execute: async ({ location }) => {
      seen.push(location);
      return `sunny in ${location}`;
    },
  });
}

async function records(url: string): Promise<RunRecord[]> {
  // The records are the caller's own (the key is required when keys are configured), newest last.
  const res = await fetch(`${url}/llr/runs?order=asc&limit=1000`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  return ((await res.json()) as { data: RunRecord[] }).data;
}

type Transport = 'http' | 'ws';

async function setup(transport: Transport) {
  const ctx = await testServer({ apiKeys: [API_KEY] });
  const client = new OpenAI({ baseURL: `${ctx.url}/v1`, apiKey: API_KEY, maxRetries: 0 });
  const provider = new OpenAIProvider({ openAIClient: client, useResponses: true, useResponsesWebSocket: transport === 'ws' });
  providers.push(provider);
  const runner = new Runner({ modelProvider: provider, tracingDisabled: true });
  return { ...ctx, runner };
}

describe.each(['http', 'ws'] as const)('Agents SDK over %s', (transport) => {
  it('a text turn', async () => {
    const { runner, url } = await setup(transport);
    const agent = new Agent({ name: 'helper', instructions: 'Be brief.', model: 'gpt-4.1-mini' });
    const result = await runner.run(agent, 'Tell me about long-lived responses.');
    expect(result.finalOutput).toContain('You said');
    expect((await records(url)).map((r) => r.protocol)).toEqual([transport]);
  });

  it('a streamed turn', async () => {
    const { runner, url } = await setup(transport);
    const agent = new Agent({ name: 'helper', instructions: 'Be brief.', model: 'gpt-4.1-mini' });
    const result = await runner.run(agent, 'Stream me something.', { stream: true });
    let text = '';
    let chunks = 0;
    for await (const delta of result.toTextStream()) {
      text += delta;
      chunks++;
    }
    await result.completed;
    expect(chunks).toBeGreaterThan(3);
    expect(text).toBe(result.finalOutput);
    expect((await records(url)).map((r) => r.protocol)).toEqual([transport]);
  });

  it('an auto tool loop: get_weather with the location, then the answer', async () => {
    const { runner, url } = await setup(transport);
    const seen: string[] = [];
    const agent = new Agent({ name: 'weather', instructions: 'Answer weather questions.', model: 'gpt-4.1-mini', tools: [weather(seen)] });
    const result = await runner.run(agent, "What's the weather in San Francisco?");
    expect(seen).toEqual(['San Francisco']);
    expect(result.finalOutput).toContain('sunny in San Francisco');
    const recs = await records(url);
    expect(recs).toHaveLength(2);
    expect(new Set(recs.map((r) => r.protocol))).toEqual(new Set([transport]));
  });

  it('forced tools: "required" and a named tool call the tool; without the reset, on every turn', async () => {
    const { runner } = await setup(transport);
    for (const toolChoice of ['required', 'get_weather']) {
      // The SDK's default resets tool_choice to auto after a call, so the run ends in text.
      const seen: string[] = [];
      const agent = new Agent({ name: 'forced', model: 'gpt-4.1-mini', tools: [weather(seen)], modelSettings: { toolChoice } });
      const result = await runner.run(agent, 'Plan a trip to Oslo.');
      expect(seen, toolChoice).toEqual(['Oslo']);
      expect(result.finalOutput).toContain('sunny in Oslo');
      // With resetToolChoice off the model is forced on every turn, until maxTurns.
      const always: string[] = [];
      const stuck = new Agent({ name: 'stuck', model: 'gpt-4.1-mini', tools: [weather(always)], modelSettings: { toolChoice }, resetToolChoice: false });
      await expect(runner.run(stuck, 'Plan a trip to Oslo.', { maxTurns: 3 })).rejects.toBeInstanceOf(MaxTurnsExceededError);
      expect(always).toEqual(['Oslo', 'Oslo', 'Oslo']);
    }
  });
});
