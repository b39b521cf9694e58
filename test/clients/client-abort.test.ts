/**
 * Aborting a stream mid-response with each real client, as its users do: openai-node (`stream.controller.abort()`,
 * a `signal`, `responses.stream().abort()`, over HTTP and long-lived over HTTP, and closing a `ResponsesWS`), the AI
 * SDK's `abortSignal`, LangChain's `signal`, the Agents SDK's `signal` (HTTP and WebSocket). Each time the server
 * ends the run once, `cancelled`, and releases what it held (`bytes_held` 0 on `/health`). The AI SDK's WebSocket
 * fetch sends nothing on abort: its response runs to its end (a client-side limitation, docs/protocol.md).
 */
import { createOpenAI } from '@ai-sdk/openai';
import { createWebSocketFetch } from '@vercel/ai-sdk-openai-websocket-fetch';
import { ChatOpenAI } from '@langchain/openai';
import { Agent, OpenAIProvider, Runner } from '@openai/agents';
import { streamText } from 'ai';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import WebSocket from 'ws';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

beforeAll(() => {
  (globalThis as { WebSocket?: unknown }).WebSocket ??= WebSocket;
});

/** A prompt whose echo takes many deltas at 200 tokens/s: the abort comes while the model still writes. */
const PROMPT = 'word '.repeat(3000);

async function setup() {
  const cap = captureLogger();
  const ctx = await testServer({ logger: cap.logger, modelSettings: { tokensPerSecond: 200, ttftBaseMs: 0, prefillTokensPerSecond: Infinity } });
  const client = new OpenAI({ baseURL: `${ctx.url}/v1`, apiKey: 'x', maxRetries: 0 });
  return { ...ctx, cap, client };
}

/** Once the run has finished: its one record and the server's bytes. */
async function ended(ctx: Awaited<ReturnType<typeof setup>>, protocol: string, status = 'cancelled') {
  await ctx.cap.waitFor((l) => l.msg === 'response finished');
  await ctx.server.httpTransport.idle();
  await ctx.server.ws.idle();
  const recs = ((await (await fetch(`${ctx.url}/llr/runs?limit=100`)).json()) as { data: RunRecord[] }).data;
  expect(recs.map((r) => `${r.protocol}:${r.status}`)).toEqual([`${protocol}:${status}`]);
  const health = (await (await fetch(`${ctx.url}/health`)).json()) as { bytes_held: number; http_in_flight: number };
  return health;
}

/** Read `events` until the first text delta, then `abort()`; whatever the iterator then does (end or throw) is fine. */
async function abortAtFirstDelta(events: AsyncIterable<unknown>, abort: () => void, isDelta: (e: unknown) => boolean = (e) => (e as { type?: string }).type === 'response.output_text.delta'): Promise<void> {
  try {
    for await (const e of events) if (isDelta(e)) abort();
  } catch {
    // an aborted iteration may throw (AbortError): the server side is what is checked
  }
}

describe('abort mid-stream, each client', () => {
  it('openai-node over HTTP: stream.controller.abort()', async () => {
    const ctx = await setup();
    const stream = await ctx.client.responses.create({ model: 'm', input: PROMPT, stream: true });
    await abortAtFirstDelta(stream, () => stream.controller.abort());
    expect(await ended(ctx, 'http')).toMatchObject({ bytes_held: 0, http_in_flight: 0 });
  });

  it('openai-node, long-lived over HTTP: a signal', async () => {
    const ctx = await setup();
    const ac = new AbortController();
    const stream = await ctx.client.responses.create({ model: 'm', input: PROMPT, stream: true }, { query: { protocol: 'long-lived' }, signal: ac.signal });
    await abortAtFirstDelta(stream, () => ac.abort());
    expect(await ended(ctx, 'long-lived-http')).toMatchObject({ bytes_held: 0, http_in_flight: 0 });
  });

  it('openai-node: responses.stream().abort()', async () => {
    const ctx = await setup();
    const stream = ctx.client.responses.stream({ model: 'm', input: PROMPT });
    await abortAtFirstDelta(stream, () => stream.abort());
    expect(await ended(ctx, 'http')).toMatchObject({ bytes_held: 0, http_in_flight: 0 });
  });

  it('openai-node ResponsesWS (WebSocket mode): close() mid-response', async () => {
    const ctx = await setup();
    const ws = new ResponsesWS(ctx.client);
    await new Promise<void>((resolve) => {
      ws.on('event', (e) => {
        if (e.type === 'response.output_text.delta') {
          ws.close();
          resolve();
        }
      });
      ws.send({ type: 'response.create', model: 'm', input: PROMPT });
    });
    expect(await ended(ctx, 'ws')).toMatchObject({ bytes_held: 0 });
  });

  it('AI SDK over HTTP: streamText abortSignal', async () => {
    const ctx = await setup();
    const openai = createOpenAI({ baseURL: `${ctx.url}/v1`, apiKey: 'x' });
    const ac = new AbortController();
    const r = streamText({ model: openai.responses('gpt-5-mini'), prompt: PROMPT, abortSignal: ac.signal, onError: () => {} });
    await abortAtFirstDelta(r.textStream, () => ac.abort(), () => true);
    expect(await ended(ctx, 'http')).toMatchObject({ bytes_held: 0, http_in_flight: 0 });
  });

  it('AI SDK over its WebSocket fetch: the abort is not sent; the response completes, and closing the fetch releases its cache', async () => {
    const ctx = await setup();
    const wsFetch = createWebSocketFetch({ url: `${ctx.url.replace(/^http/, 'ws')}/v1/responses` });
    const openai = createOpenAI({ baseURL: `${ctx.url}/v1`, apiKey: 'x', fetch: wsFetch });
    const ac = new AbortController();
    const r = streamText({ model: openai.responses('gpt-5-mini'), prompt: PROMPT, abortSignal: ac.signal, onError: () => {} });
    await abortAtFirstDelta(r.textStream, () => ac.abort(), () => true);
    await ctx.cap.waitFor((l) => l.msg === 'response finished');
    wsFetch.close();
    expect(await ended(ctx, 'ws', 'completed')).toMatchObject({ bytes_held: 0 });
  });

  it('LangChain: stream() with a signal', async () => {
    const ctx = await setup();
    const llm = new ChatOpenAI({ model: 'gpt-4.1-mini', apiKey: 'x', configuration: { baseURL: `${ctx.url}/v1` }, useResponsesApi: true, maxRetries: 0 });
    const ac = new AbortController();
    await abortAtFirstDelta(await llm.stream(PROMPT, { signal: ac.signal }), () => ac.abort(), () => true);
    expect(await ended(ctx, 'http')).toMatchObject({ bytes_held: 0, http_in_flight: 0 });
  });

  it.each(['http', 'ws'] as const)('Agents SDK over %s: a streamed run cancelled by its signal', async (transport) => {
    const ctx = await setup();
    const provider = new OpenAIProvider({ openAIClient: ctx.client, useResponses: true, useResponsesWebSocket: transport === 'ws' });
    try {
      const runner = new Runner({ modelProvider: provider, tracingDisabled: true });
      const ac = new AbortController();
      const run = await runner.run(new Agent({ name: 'a', model: 'gpt-4.1-mini' }), PROMPT, { stream: true, signal: ac.signal });
      await abortAtFirstDelta(run.toTextStream(), () => ac.abort(), () => true);
      await run.completed.catch(() => {});
      expect(await ended(ctx, transport)).toMatchObject({ bytes_held: 0 });
    } finally {
      await provider.close();
    }
  });
});
