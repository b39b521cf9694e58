/**
 * A retried append: a client that did not see its append answered (over HTTP a lost 202, a timeout) sends it again.
 * An append whose every item is an output the run already holds is a duplicate: nothing is done, whether the run
 * streams on or has paused again. Over HTTP it is answered `200 {"duplicate": true, "call_ids": [...]}`; over a
 * WebSocket nothing is sent (an append is never acknowledged there; the run resuming is its answer). Before, the
 * retry was `400 no_paused_response` while the run streamed and a silent `202` once it paused again, so the client
 * could not tell what had happened.
 */
import { describe, expect, it } from 'vitest';
import type { Model, ModelEvent } from '../../src/model/types.js';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { SseStream, postJson } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const create = { model: 'sim-model', input: 'go', tools: [tool] };
const out = (call_id: string, output = 'ok') => ({ type: 'function_call_output', call_id, output });

/**
 * A model whose first call asks for two tools (`call_a`, `call_b`), whose second streams `hello` then waits for the
 * gate (or its run's abort) before it asks for one more (`call_c`), and whose third answers `done`.
 */
function callsThenGated(): { model: Model; release: () => void } {
  let calls = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const call = (call_id: string): ModelEvent[] => [{ type: 'call.start', name: 'lookup', call_id }, { type: 'args.delta', delta: '{"q":"x"}' }, { type: 'call.end' }];
  const model: Model = {
    async *sample(_req, signal): AsyncIterable<ModelEvent> {
      calls++;
      if (calls === 1) {
        yield* [...call('call_a'), ...call('call_b')];
        return;
      }
      if (calls === 2) {
        yield { type: 'message.start' };
        yield { type: 'text.delta', delta: 'hello' };
        await Promise.race([gate, new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
        yield { type: 'message.end' };
        yield* call('call_c');
        return;
      }
      yield { type: 'message.start' };
      yield { type: 'text.delta', delta: 'done' };
      yield { type: 'message.end' };
    },
  };
  return { model, release };
}

describe('a retried append', () => {
  it('over HTTP: 200 duplicate while the run streams and once it paused again; a partial repeat is still refused', async () => {
    const { model, release } = callsThenGated();
    const { url, server } = await testServer({ model });
    const s = await SseStream.open(url, { ...create, stream: true });
    const id = (await s.next('response.done')).response.id;
    const append = (input: unknown[]) => postJson(`${url}/v1/responses/${id}/append`, { input });
    expect(await append([out('call_a'), out('call_b')])).toEqual({ status: 202, json: {} });
    await s.next('response.output_text.delta');
    // Streaming: the retry is a duplicate, not "not paused".
    expect(await append([out('call_a'), out('call_b')])).toEqual({ status: 200, json: { duplicate: true, call_ids: ['call_a', 'call_b'] } });
    expect(await append([out('call_b')])).toEqual({ status: 200, json: { duplicate: true, call_ids: ['call_b'] } });
    // Anything new in it, and it is what it was: refused while the run streams.
    const partial = await append([out('call_a'), out('call_c')]);
    expect(partial.status).toBe(400);
    expect(partial.json.error).toMatchObject({ code: 'no_paused_response' });
    release();
    const paused = await s.next('response.done');
    expect(paused.response.pending_tool_calls).toEqual(['call_c']);
    // Paused again at another call: the old outputs are still a duplicate, and the run stays paused.
    expect(await append([out('call_a'), out('call_b')])).toEqual({ status: 200, json: { duplicate: true, call_ids: ['call_a', 'call_b'] } });
    expect(await append([out('call_c')])).toEqual({ status: 202, json: {} });
    expect((await s.next('response.completed')).response.status).toBe('completed');
    await server.services.postWork.flush();
    const rec = server.services.records.get(id)!;
    expect(rec.counters).toMatchObject({ appends: 2, duplicate_appends: 3 });
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  it('over a WebSocket: no answer to a duplicate while the run streams, where a fresh append is refused', async () => {
    const { model, release } = callsThenGated();
    const { url } = await testServer({ model });
    const s = await RawSocket.connect(url, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } });
    s.send({ type: 'response.create', ...create });
    await s.next('response.done');
    s.send({ type: 'response.append', input: [out('call_a'), out('call_b')] });
    await s.next('response.output_text.delta');
    s.send({ type: 'response.append', input: [out('call_a'), out('call_b')] });
    s.send({ type: 'response.append', input: [out('call_z')] });
    // Frames are handled in order: the error for the second proves the first was handled, and said nothing.
    const err = await s.next('error');
    expect(err.error.code).toBe('no_paused_response');
    expect(s.all('error')).toHaveLength(1);
    release();
    const paused = await s.next('response.done');
    expect(paused.response.pending_tool_calls).toEqual(['call_c']);
    s.send({ type: 'response.append', input: [out('call_c')] });
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });
});
