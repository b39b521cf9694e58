/**
 * `response.inject`, as the official `openai` SDK (6.49, pinned) speaks it:
 * its beta `ResponsesWS` (`openai/resources/beta/responses/ws`, typed from
 * the OpenAPI spec's `responses_multi_agent=v1` beta) sends
 * `{type: "response.inject", response_id, input}` to give a response that
 * waits the client's tool outputs, and reads `response.inject.created` /
 * `response.inject.failed`. On the long-lived protocol that is a
 * `response.append` that names its response and is acknowledged: the SDK,
 * used as its users would (only the beta header added), drives a whole tool
 * loop as one Response. Every wait is on an SDK event.
 */
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/beta/responses/ws';
import type { BetaResponsesServerEvent } from 'openai/resources/beta/responses/responses';
import { describe, expect, it } from 'vitest';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';
import { testServer } from '../helpers/server.js';

const API_KEY = 'test-key';

const shellTool = {
  type: 'function' as const,
  name: 'exec_command',
  description: 'Run a shell command and return its output.',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
  strict: false,
};

type AnyEvent = { type: string; sequence_number?: number } & Record<string, unknown>;

/** Every event the SDK hands over, and a wait for the next one of a type (never a sleep). */
class Events {
  readonly all: AnyEvent[] = [];
  private read = 0;
  private wake: (() => void) | null = null;
  readonly closed: Promise<number>;

  constructor(ws: ResponsesWS) {
    ws.on('event', (e: BetaResponsesServerEvent) => {
      this.all.push(e as unknown as AnyEvent);
      this.wake?.();
    });
    // Error events also reach `event` above; the SDK requires an error listener besides.
    ws.on('error', () => this.wake?.());
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
  }

  /** The next event of `type` (or of one of the types) after the last one returned. */
  async next(type: string | string[]): Promise<AnyEvent> {
    for (;;) {
      while (this.read < this.all.length) {
        const e = this.all[this.read++]!;
        if (Array.isArray(type) ? type.includes(e.type) : e.type === type) return e;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
  }
}

async function connect(protocolBeta: string | null) {
  const { url, server } = await testServer({ apiKeys: [API_KEY] });
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: API_KEY, maxRetries: 0 });
  const ws = new ResponsesWS(client, protocolBeta ? { headers: { 'OpenAI-Beta': protocolBeta } } : {});
  return { ws, events: new Events(ws), server };
}

const outputFor = (call: { call_id: string; arguments: string }) => {
  const { cmd } = JSON.parse(call.arguments) as { cmd: string };
  return { type: 'function_call_output' as const, call_id: call.call_id, output: `${cmd.replace(/^echo /, '')}\n` };
};

describe('openai SDK beta ResponsesWS: response.inject on the long-lived protocol', () => {
  it('drives a tool loop as one Response: each inject is acknowledged before the sampling it resumes, and the run completes once', async () => {
    const { ws, events, server } = await connect(LONG_LIVED_BETA);
    ws.send({
      type: 'response.create',
      model: 'sim-model',
      input: 'Please run these:\n$ echo alpha\n$ echo beta',
      tools: [shellTool],
      parallel_tool_calls: false,
      store: false,
    });
    const created = await events.next('response.created');
    const id = (created['response'] as { id: string }).id;
    const ran: string[] = [];
    for (;;) {
      const paused = await events.next('response.done');
      const response = paused['response'] as { id: string; output: Array<{ type: string; call_id: string; arguments: string }>; pending_tool_calls: string[] };
      expect(response.id).toBe(id);
      const pending = response.output.filter((i) => i.type === 'function_call' && response.pending_tool_calls.includes(i.call_id));
      expect(pending.length).toBeGreaterThan(0);
      for (const call of pending) ran.push((JSON.parse(call.arguments) as { cmd: string }).cmd);
      ws.send({ type: 'response.inject', response_id: id, input: pending.map(outputFor) });
      const ack = await events.next('response.inject.created');
      expect(ack).toMatchObject({ type: 'response.inject.created', response_id: id });
      // The acknowledgement is the next event of the response's stream: nothing of the resumed sampling came first.
      const at = events.all.indexOf(ack);
      expect(events.all[at - 1]).toBe(paused);
      expect(ack.sequence_number).toBe(paused.sequence_number! + 1);
      if (ran.length === 2) break;
    }
    const completed = await events.next('response.completed');
    const final = completed['response'] as { id: string; status: string; output: Array<{ type: string; content?: Array<{ text: string }> }> };
    expect(final.id).toBe(id);
    expect(final.status).toBe('completed');
    expect(ran).toEqual(['echo alpha', 'echo beta']);
    const text = final.output.flatMap((i) => (i.type === 'message' ? i.content! : [])).map((p) => p.text).join('');
    expect(text).toContain('alpha');
    expect(text).toContain('beta');
    // One Response for the whole run, numbered without a gap, no error.
    expect(events.all.filter((e) => e.type === 'response.created')).toHaveLength(1);
    expect(events.all.filter((e) => e.type === 'error')).toEqual([]);
    expect(events.all.map((e) => e.sequence_number)).toEqual(events.all.map((_, i) => i));

    ws.close();
    await events.closed;
    await server.ws.idle();
    const rec = server.services.records.get(id)!;
    expect(rec.protocol).toBe('long-lived');
    expect(rec.counters['appends']).toBe(2);
    expect(rec.counters['pauses']).toBe(2);
  });

  it('an inject the run refuses on its merits (an output for a call that is not pending) is an error event; nothing is applied, the run stays paused and a good inject resumes it', async () => {
    const { ws, events } = await connect(LONG_LIVED_BETA);
    ws.send({ type: 'response.create', model: 'sim-model', input: 'Please run:\n$ echo one', tools: [shellTool], store: false });
    const paused = await events.next('response.done');
    const response = paused['response'] as { id: string; output: Array<{ type: string; call_id: string; arguments: string }> };
    const call = response.output.find((i) => i.type === 'function_call')!;
    ws.send({ type: 'response.inject', response_id: response.id, input: [outputFor(call), { type: 'function_call_output', call_id: 'call_nope', output: 'x' }] });
    const err = await events.next('error');
    expect(err).toMatchObject({ error: { code: 'unknown_call_id' } });
    expect(events.all.some((e) => e.type === 'response.inject.created')).toBe(false);
    ws.send({ type: 'response.inject', response_id: response.id, input: [outputFor(call)] });
    await events.next('response.inject.created');
    expect((await events.next('response.completed'))['response']).toMatchObject({ id: response.id, status: 'completed' });
    ws.close();
    await events.closed;
  });

  it('an inject whose run ends (cancelled) while its items are still being checked gets response.inject.failed (response_already_completed) with its items back, not an error that names no response', async () => {
    const { ws, events } = await connect(LONG_LIVED_BETA);
    ws.send({ type: 'response.create', model: 'sim-model', input: 'Please run:\n$ echo one', tools: [shellTool], store: false });
    const paused = await events.next('response.done');
    const response = paused['response'] as { id: string; output: Array<{ type: string; call_id: string; arguments: string }> };
    const call = response.output.find((i) => i.type === 'function_call')!;
    // Large enough that its checks yield to the event loop: the cancel right behind it ends the run meanwhile.
    const items = [{ ...outputFor(call), output: 'x'.repeat(2_000_000) }];
    ws.send({ type: 'response.inject', response_id: response.id, input: items });
    ws.send({ type: 'response.cancel', response_id: response.id } as never);
    await events.next('response.cancelled');
    // The inject's answer, whichever it is.
    const failed = await events.next(['response.inject.failed', 'error']);
    expect(failed).toMatchObject({ response_id: response.id, error: { code: 'response_already_completed' } });
    expect(failed['input']).toEqual(items);
    expect(typeof failed.sequence_number).toBe('number');
    expect(events.all.filter((e) => e.type === 'error' || e.type === 'response.inject.created')).toEqual([]);
    ws.close();
    await events.closed;
  });

  it('an inject naming no response in flight gets response.inject.failed with its items back: response_not_found, then response_already_completed once the run ended', async () => {
    const { ws, events } = await connect(LONG_LIVED_BETA);
    const items = [{ type: 'function_call_output' as const, call_id: 'call_1', output: 'late' }];
    ws.send({ type: 'response.inject', response_id: 'resp_unknown', input: items });
    const unknown = await events.next('response.inject.failed');
    expect(unknown).toMatchObject({ response_id: 'resp_unknown', input: items, error: { code: 'response_not_found' } });
    expect(typeof unknown.sequence_number).toBe('number');

    ws.send({ type: 'response.create', model: 'sim-model', input: 'hello', store: false });
    const done = await events.next('response.completed');
    const id = (done['response'] as { id: string }).id;
    ws.send({ type: 'response.inject', response_id: id, input: items });
    expect(await events.next('response.inject.failed')).toMatchObject({ response_id: id, input: items, error: { code: 'response_already_completed' } });
    // The socket stays open and usable.
    ws.send({ type: 'response.create', model: 'sim-model', input: 'again', store: false });
    expect((await events.next('response.completed'))['response']).toMatchObject({ status: 'completed' });
    ws.close();
    await events.closed;
  });

  it('an inject without response_id is refused as a missing parameter', async () => {
    const { ws, events } = await connect(LONG_LIVED_BETA);
    ws.sendRaw(JSON.stringify({ type: 'response.inject', input: [] }));
    expect(await events.next('error')).toMatchObject({ error: { code: 'missing_required_parameter', param: 'response_id' } });
    ws.close();
    await events.closed;
  });
});

describe('openai SDK beta ResponsesWS: response.inject on WebSocket mode', () => {
  it('a response there completes with its tool calls, so an inject naming it is told it has ended, with its items back', async () => {
    const { ws, events } = await connect(null);
    ws.send({ type: 'response.create', model: 'sim-model', input: 'Please run:\n$ echo one', tools: [shellTool], store: false });
    const done = await events.next('response.completed');
    const response = done['response'] as { id: string; output: Array<{ type: string; call_id: string; arguments: string }> };
    const call = response.output.find((i) => i.type === 'function_call')!;
    ws.send({ type: 'response.inject', response_id: response.id, input: [outputFor(call)] });
    expect(await events.next('response.inject.failed')).toMatchObject({
      response_id: response.id,
      input: [outputFor(call)],
      error: { code: 'response_already_completed' },
    });
    ws.close();
    await events.closed;
  });
});
