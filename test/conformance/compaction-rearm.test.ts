/**
 * Server-side compaction that cannot get the context under its threshold
 * (what a compaction keeps verbatim, here one long user message, is itself
 * over it): the next compaction waits until the context has grown by half
 * the threshold past what the last one left, so the number of compactions
 * over a run follows the context's growth, not its model calls. Before, it
 * compacted again before every model call, each time over a larger context.
 */
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { compactionDue } from '../../src/pipeline/compaction.js';
import type { RenderedContext } from '../../src/pipeline/render.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import type { FunctionCall, Response } from '../../src/protocol/objects.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const exec = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } };
const THRESHOLD = 1000;
// ~3,000 tokens of user message: every compaction keeps it, so none gets under 1,000.
const longTask = `run:\n$ ls\n${'Please keep the following background in mind while you work on this.\n'.repeat(250)}`;

async function record(url: string, id: string): Promise<RunRecord> {
  return (await (await fetch(`${url}/llr/runs/${id}`)).json()) as RunRecord;
}

async function post(url: string, body: object): Promise<Response> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as Response;
}

describe('compaction that cannot get under the threshold', () => {
  it('compactionDue: unchanged after a compaction that got under the threshold; else it waits for half the threshold of growth', () => {
    const ctx = (tokens: number, left?: number) => ({ tokens: { length: tokens }, ...(left !== undefined && { compacted: { items: 1, tokens: left } }) }) as unknown as RenderedContext;
    expect(compactionDue(ctx(1000), 1000)).toBe(false);
    expect(compactionDue(ctx(1001), 1000)).toBe(true);
    expect(compactionDue(ctx(1001, 1000), 1000)).toBe(true);
    expect(compactionDue(ctx(1001, 10), 1000)).toBe(true);
    expect(compactionDue(ctx(1500, 1001), 1000)).toBe(false);
    expect(compactionDue(ctx(1502, 1001), 1000)).toBe(true);
    expect(compactionDue(ctx(9000, 8600), 1000)).toBe(false);
    // Left far over the threshold: the wait is half of what it left, so the passes over the context stay in proportion to its growth.
    expect(compactionDue(ctx(9000, 8000), 1000)).toBe(false);
    expect(compactionDue(ctx(12001, 8000), 1000)).toBe(true);
  });

  it('a run whose every step adds more than half the threshold of what no compaction shrinks compacts as its context grows by half, not at every step', async () => {
    // Each step brings a user message of ~640 tokens beside its output: every compaction keeps it whole, so a
    // compaction gains nothing on it, and each step adds more than half the threshold. (This used a one-line output
    // of ~640 tokens, kept whole then; a compaction now cuts it as it cuts a multi-line one.) With a wait of half the
    // threshold this run compacted before each of its model calls, each compaction item sealing the whole turn so far
    // (its output grew with the square of its steps); with a wait of half what the last compaction left, the
    // compactions follow the context's relative growth.
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: longTask, tools: [exec], tool_choice: 'required', context_management: [{ type: 'compaction', compact_threshold: THRESHOLD }] });
    const APPENDS = 30;
    const line = (i: number) => Array.from({ length: 160 }, (_, k) => `field${k}=value${k * 7 + i}`).join(' ');
    let e: ServerEvent = await s.next('response.done');
    for (let i = 0; i < APPENDS; i++) {
      if (e.type !== 'response.done') throw new Error('expected a pause');
      const outputs = e.response.pending_tool_calls!.map((call_id) => ({ type: 'function_call_output', call_id, output: `ok ${i}` }));
      s.send({ type: 'response.append', input: [...outputs, { type: 'message', role: 'user', content: line(i) }] });
      e = await s.next('response.done');
    }
    s.send({ type: 'response.cancel' });
    const end = (await s.next('response.cancelled')).response;
    const rec = await record(url, end.id);
    expect(rec.counters['model_calls']).toBe(APPENDS + 1);
    const compactions = end.output.filter((i) => i.type === 'compaction').length;
    expect(rec.counters['compactions']).toBe(compactions);
    // ~3,300 tokens left by the first, then ~19,000 tokens of growth: a handful at ratios of 1.5.
    expect(compactions).toBeGreaterThan(1);
    expect(compactions).toBeLessThan(8);
  });

  it('a long-lived run of 60 small appends compacts a few times, not before each of its 61 model calls', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: longTask, tools: [exec], tool_choice: 'required', context_management: [{ type: 'compaction', compact_threshold: THRESHOLD }] });
    const APPENDS = 60;
    let e: ServerEvent = await s.next('response.done');
    for (let i = 0; i < APPENDS; i++) {
      if (e.type !== 'response.done') throw new Error('expected a pause');
      s.send({ type: 'response.append', input: e.response.pending_tool_calls!.map((call_id) => ({ type: 'function_call_output', call_id, output: `ok ${i}` })) });
      e = await s.next('response.done');
    }
    s.send({ type: 'response.cancel' });
    const end = (await s.next('response.cancelled')).response;
    const rec = await record(url, end.id);
    const compactions = end.output.filter((i) => i.type === 'compaction').length;
    expect(rec.counters['model_calls']).toBe(APPENDS + 1);
    expect(rec.counters['compactions']).toBe(compactions);
    // The first model call compacts (the prompt is over the threshold from the start); each later compaction
    // needs 500 tokens of new items (each step adds a call and a one-line output: tens of tokens).
    expect(compactions).toBeGreaterThan(1);
    expect(compactions).toBeLessThan(APPENDS / 5);
    // Every step's call is still in the context: the run went on where it was.
    expect(end.output.filter((i) => i.type === 'function_call')).toHaveLength(APPENDS + 1);
  });

  it('the same holds across a previous_response_id chain (HTTP): the compaction item tells what the last compaction left', async () => {
    const { url } = await testServer();
    const cm = [{ type: 'compaction', compact_threshold: THRESHOLD }];
    let prev = await post(url, { model: 'sim-model', input: longTask, tools: [exec], tool_choice: 'required', context_management: cm });
    expect(prev.output.map((i) => i.type)).toEqual(['compaction', 'function_call']);
    let later = 0;
    for (let i = 0; i < 5; i++) {
      const call = prev.output.find((o): o is FunctionCall => o.type === 'function_call')!;
      prev = await post(url, {
        model: 'sim-model',
        previous_response_id: prev.id,
        tools: [exec],
        tool_choice: 'required',
        context_management: cm,
        input: [{ type: 'function_call_output', call_id: call.call_id, output: `ok ${i}` }],
      });
      later += prev.output.filter((o) => o.type === 'compaction').length;
    }
    expect(later).toBe(0);
  });

  it('and in WebSocket mode, where the connection cache keeps the compacted window', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    const cm = [{ type: 'compaction', compact_threshold: THRESHOLD }];
    s.send({ type: 'response.create', model: 'sim-model', store: false, input: longTask, tools: [exec], tool_choice: 'required', context_management: cm });
    let prev = (await s.next('response.completed')).response;
    expect(prev.output.map((i) => i.type)).toEqual(['compaction', 'function_call']);
    let later = 0;
    for (let i = 0; i < 5; i++) {
      const call = prev.output.find((o): o is FunctionCall => o.type === 'function_call')!;
      s.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: prev.id, tools: [exec], tool_choice: 'required', context_management: cm, input: [{ type: 'function_call_output', call_id: call.call_id, output: `ok ${i}` }] });
      prev = (await s.next('response.completed')).response;
      later += prev.output.filter((o) => o.type === 'compaction').length;
    }
    expect(later).toBe(0);
  });
});
