/**
 * A response ended from outside while the model is writing an item (a
 * cancel of a background response, a WebSocket `response.cancel`) closes
 * that item in its stream before the terminal event, as a
 * `max_output_tokens` cut does: `output_text.done`, `content_part.done`,
 * `output_item.done` with status `incomplete` (for a function call,
 * `function_call_arguments.done` and `output_item.done`). Every
 * `output_item.added` has its `output_item.done`, whose item is the one the
 * final Response lists. Before, the stream stopped after the last delta and
 * went to `response.cancelled`: a reader that builds items from the events
 * (openai-node's stream accumulator, the AI SDK's text-start/text-end) was
 * left with an item open that the Response said was `incomplete`.
 */
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Model, ModelEvent } from '../../src/model/types.js';
import { testServer } from '../helpers/server.js';
import { parseSse } from '../helpers/sse-stream.js';

type Json = Record<string, any>;

/** Streams the start of a message (or a function call), then waits for its run's abort: ended only from outside. */
function heldModel(kind: 'message' | 'call'): Model {
  return {
    async *sample(_req, signal): AsyncIterable<ModelEvent> {
      if (kind === 'message') {
        yield { type: 'message.start' };
        yield { type: 'text.delta', delta: 'hello' };
      } else {
        yield { type: 'call.start', name: 'get_weather', call_id: 'call_held' };
        yield { type: 'args.delta', delta: '{"loc' };
      }
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    },
  };
}

/** Every item added is done before the terminal event, done as the final Response lists it (status incomplete). */
function expectItemsClosed(events: Json[]): void {
  const terminal = events[events.length - 1]!;
  expect(terminal['type']).toBe('response.cancelled');
  const output = terminal['response']['output'] as Json[];
  const added = events.filter((e) => e['type'] === 'response.output_item.added');
  const done = events.filter((e) => e['type'] === 'response.output_item.done');
  expect(added.length).toBe(1);
  expect(done.map((e) => e['item'])).toEqual(output);
  expect(output[0]!['status']).toBe('incomplete');
  const types = events.map((e) => e['type'] as string);
  if (output[0]!['type'] === 'message') {
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.cancelled']);
    expect(events.find((e) => e['type'] === 'response.output_text.done')!['text']).toBe('hello');
  } else {
    expect(types.slice(-3)).toEqual(['response.function_call_arguments.done', 'response.output_item.done', 'response.cancelled']);
  }
  events.forEach((e, i) => expect(e['sequence_number']).toBe(i));
}

describe('an item open when the response is cancelled is closed in its stream', () => {
  for (const kind of ['message', 'call'] as const) {
    it(`HTTP background cancel, a ${kind} being written`, async () => {
      const { url } = await testServer({ model: heldModel(kind) });
      const created = await fetch(`${url}/v1/responses`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'm', input: 'hi', background: true, stream: true }),
      });
      const reader = created.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      while (!/response\.(output_text|function_call_arguments)\.delta/.test(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended early: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
      const id = /"id":"(resp_[^"]+)"/.exec(text)![1]!;
      const cancel = await fetch(`${url}/v1/responses/${id}/cancel`, { method: 'POST' });
      expect(cancel.status).toBe(200);
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      expectItemsClosed(parseSse(text));
    });
  }

  it('WebSocket mode response.cancel, a message being written', async () => {
    const { url } = await testServer({ model: heldModel('message') });
    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses`);
    const events: Json[] = [];
    const ended = new Promise<void>((resolve, reject) => {
      ws.on('message', (d) => {
        const e = JSON.parse(d.toString()) as Json;
        events.push(e);
        if (e['type'] === 'response.output_text.delta') ws.send(JSON.stringify({ type: 'response.cancel' }));
        if (e['type'] === 'response.cancelled') resolve();
      });
      ws.on('error', reject);
    });
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'response.create', model: 'm', input: 'hi' }));
    await ended;
    ws.close();
    expectItemsClosed(events);
  });
});
