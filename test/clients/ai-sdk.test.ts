/**
 * The Vercel AI SDK (`ai` 6.0.325 + `@ai-sdk/openai` 3.0.141, the Responses
 * provider; pinned, Node 20) against the server as its docs show it: a text
 * turn, a streamed turn, and multi-step tool loops with `toolChoice` auto,
 * required and a named tool. Over HTTP + SSE, and over WebSocket mode through
 * `@vercel/ai-sdk-openai-websocket-fetch` 1.0.0 (the server's run records
 * prove the transport; that fetch sends only streaming requests over the
 * socket, so `generateText` still goes over HTTP there, as in production). No patched parsers: the SDK validates every event
 * with its own schemas.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { createWebSocketFetch } from '@vercel/ai-sdk-openai-websocket-fetch';
import { generateText, Output, stepCountIs, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RunRecord } from '../../src/engine/records.js';
import { testServer } from '../helpers/server.js';

const API_KEY = 'sk-test';

function weatherTool(seen: string[]) {
  return tool({
    description: 'Get the current weather for a location.',
    inputSchema: z.object({ location: z.string() }),
    execute: async ({ location }) => {
      seen.push(location);
      return { location, forecast: 'sunny, 21°C' };
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
  const wsFetch = transport === 'ws' ? createWebSocketFetch({ url: `${ctx.url.replace(/^http/, 'ws')}/v1/responses` }) : undefined;
  const openai = createOpenAI({ baseURL: `${ctx.url}/v1`, apiKey: API_KEY, ...(wsFetch && { fetch: wsFetch }) });
  return { ...ctx, model: openai.responses('gpt-5-mini'), close: () => wsFetch?.close() };
}

describe.each(['http', 'ws'] as const)('AI SDK over %s', (transport) => {
  it('a text turn (generateText) reads the text, the echoed model and the usage', async () => {
    const { model, close } = await setup(transport);
    try {
      const r = await generateText({ model, prompt: 'Tell me about long-lived responses.' });
      expect(r.text).toContain('You said');
      expect(r.finishReason).toBe('stop');
      expect(r.usage.inputTokens).toBeGreaterThan(0);
      expect(r.usage.outputTokens).toBeGreaterThan(0);
      expect(r.response.modelId).toBe('gpt-5-mini');
    } finally {
      close();
    }
  });

  it('a streamed turn (streamText) yields text deltas that add up to the text', async () => {
    const { model, url, close } = await setup(transport);
    try {
      const result = streamText({ model, prompt: 'Stream me something.' });
      let joined = '';
      let deltas = 0;
      for await (const part of result.textStream) {
        joined += part;
        deltas++;
      }
      expect(deltas).toBeGreaterThan(3);
      expect(joined).toBe(await result.text);
      const recs = await records(url);
      expect(recs.map((r) => r.protocol)).toEqual([transport]);
    } finally {
      close();
    }
  });

  it('an auto tool loop: the model calls get_weather with the location, then answers', async () => {
    const { model, url, close } = await setup(transport);
    try {
      const seen: string[] = [];
      const result = streamText({
        model,
        prompt: "What's the weather in San Francisco?",
        tools: { get_weather: weatherTool(seen) },
        stopWhen: stepCountIs(5),
      });
      const text = await result.text;
      const steps = await result.steps;
      expect(seen).toEqual(['San Francisco']);
      expect(steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
      expect(text).toContain('get_weather');
      expect(text).toContain('sunny');
      const recs = await records(url);
      expect(recs).toHaveLength(2);
      expect(new Set(recs.map((r) => r.protocol))).toEqual(new Set([transport]));
    } finally {
      close();
    }
  });

  it('structured output (Output.object): the answer follows the schema, slots filled from the prompt', async () => {
    const { model, close } = await setup(transport);
    try {
      const result = streamText({
        model,
        prompt: 'Describe the weather in Lisbon.',
        output: Output.object({ schema: z.object({ location: z.string(), summary: z.string(), days: z.number().int().min(1).max(7) }) }),
      });
      const value = await result.output;
      expect(value.location).toBe('Lisbon');
      expect(value.summary).toContain('You said');
      expect(Number.isInteger(value.days)).toBe(true);
    } finally {
      close();
    }
  });

  it('forced tools: a named tool and "required" are called on every step', async () => {
    const { model, url, close } = await setup(transport);
    try {
      for (const toolChoice of [{ type: 'tool', toolName: 'get_weather' } as const, 'required' as const]) {
        const seen: string[] = [];
        const result = streamText({
          model,
          prompt: 'Plan a trip to Oslo.',
          tools: { get_weather: weatherTool(seen) },
          toolChoice,
          stopWhen: stepCountIs(3),
        });
        const steps = await result.steps;
        expect(steps).toHaveLength(3);
        for (const step of steps) expect(step.toolCalls.map((c) => c.toolName)).toEqual(['get_weather']);
        expect(seen).toEqual(['Oslo', 'Oslo', 'Oslo']);
      }
      expect(new Set((await records(url)).map((r) => r.protocol))).toEqual(new Set([transport]));
    } finally {
      close();
    }
  });
});
