/**
 * With `overlap_persist` a `store: true` response's store write follows its terminal event. Between the two, the
 * client has read `response.completed` but the store does not have the response yet: retrieve, `input_items`, cancel,
 * delete and a continuation from it answered 404 (`response_not_found`, `previous_response_not_found`) for that
 * moment. The in-flight registry keeps the ended run until its write is done, so each answers as it will once stored.
 *
 * The window is held open deterministically: the server's deferred post-inference work waits on a gate this test
 * opens, and the gate opens only when the server looks the response up in the registry (armed), or at the end.
 */
import { describe, expect, it } from 'vitest';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';
import type { LlrServer } from '../../src/server.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { SseStream, postJson } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

const input = [{ type: 'message', role: 'user', content: 'tell me' }];
type Design = 'ws' | 'long-lived' | 'long-lived-http';

/** Holds the server's deferred post-inference work until `open()`; `armFor(id)` opens it when the registry is asked for `id`. */
function holdPostWork(server: LlrServer) {
  const waiting: Array<() => void> = [];
  let opened = false;
  const open = (): void => {
    opened = true;
    for (const go of waiting.splice(0)) go();
  };
  const tracker = server.services.postWork;
  const defer = tracker.defer.bind(tracker);
  tracker.defer = (fn) => defer(() => (opened ? fn() : new Promise<void>((go) => waiting.push(go)).then(fn)));
  let armed: string | null = null;
  const registry = server.services.inFlight!;
  const find = registry.find.bind(registry);
  registry.find = (id, owner) => {
    const found = find(id, owner);
    if (armed === id) setImmediate(open);
    return found;
  };
  return { open, armFor: (id: string) => void (armed = id), held: () => waiting.length };
}

async function getJson(url: string): Promise<{ status: number; json: any }> {
  const res = await fetch(url);
  return { status: res.status, json: await res.json() };
}

/** A completed `store: true` response of `design`, its final Response as its terminal event carried it. */
async function completed(url: string, design: Design): Promise<any> {
  if (design === 'long-lived-http') {
    const s = await SseStream.open(url, { model: 'sim-model', input, stream: true }, {}, '?protocol=long-lived');
    return (await s.next('response.completed')).response;
  }
  const s = await RawSocket.connect(url, design === 'long-lived' ? { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } } : { query: '?protocol=ws' });
  s.send({ type: 'response.create', model: 'sim-model', input });
  const final = (await s.next('response.completed')).response;
  s.dispose();
  return final;
}

describe('overlap_persist: a response between its terminal event and its store write', () => {
  it.each(['ws', 'long-lived', 'long-lived-http'] as const)('%s: retrieve, input_items and cancel answer it as stored, and a continuation waits for it', async (design) => {
    const { server, url } = await testServer({ switches: { overlap_persist: true } });
    const gate = holdPostWork(server);
    try {
      const final = await completed(url, design);
      expect(gate.held()).toBeGreaterThan(0);
      expect(server.services.store.get(final.id, null)).toBeUndefined();

      const got = await getJson(`${url}/v1/responses/${final.id}`);
      expect(got.status).toBe(200);
      expect(got.json).toMatchObject({ id: final.id, status: 'completed', output: final.output, usage: final.usage });
      const items = await getJson(`${url}/v1/responses/${final.id}/input_items`);
      expect(items.status).toBe(200);
      expect(items.json.data.map((i: { content: Array<{ text: string }> }) => i.content[0]!.text)).toEqual(['tell me']);
      // As once stored: a long-lived run over HTTP's cancel is answered with its final Response, the others' 400.
      const cancel = await fetch(`${url}/v1/responses/${final.id}/cancel`, { method: 'POST' });
      const cancelBody = (await cancel.json()) as any;
      if (design === 'long-lived-http') expect({ status: cancel.status, id: cancelBody.id, st: cancelBody.status }).toEqual({ status: 200, id: final.id, st: 'completed' });
      else expect({ status: cancel.status, code: cancelBody.error?.code }).toEqual({ status: 400, code: 'invalid_value' });

      // A continuation over HTTP (read from the store) sent now: it was 400 previous_response_not_found.
      gate.armFor(final.id);
      const next = await postJson(`${url}/v1/responses`, { model: 'sim-model', previous_response_id: final.id, input: 'and then?' });
      expect(next.status).toBe(200);
      expect(next.json.previous_response_id).toBe(final.id);
      expect(server.services.store.get(final.id, null)?.response.status).toBe('completed');
      await server.services.postWork.settled();
      expect(server.services.inFlight!.size).toBe(0);
      expect((await getJson(`${url}/v1/responses/${final.id}`)).json.status).toBe('completed');
    } finally {
      gate.open();
    }
  });

  it('DELETE waits for the write, then deletes it: not 404, and not stored again after', async () => {
    const { server, url } = await testServer({ switches: { overlap_persist: true } });
    const gate = holdPostWork(server);
    try {
      const final = await completed(url, 'ws');
      gate.armFor(final.id);
      const del = await fetch(`${url}/v1/responses/${final.id}`, { method: 'DELETE' });
      expect({ status: del.status, body: await del.json() }).toEqual({ status: 200, body: { id: final.id, object: 'response', deleted: true } });
      await server.services.postWork.settled();
      expect(server.services.store.get(final.id, null)).toBeUndefined();
      expect((await getJson(`${url}/v1/responses/${final.id}`)).status).toBe(404);
      expect(server.services.inFlight!.size).toBe(0);
    } finally {
      gate.open();
    }
  });

  it('a store: false response is never in the registry, and the default order leaves nothing there after the end', async () => {
    const overlapped = await testServer({ switches: { overlap_persist: true } });
    const gate = holdPostWork(overlapped.server);
    try {
      const s = await RawSocket.connect(overlapped.url, { query: '?protocol=ws' });
      s.send({ type: 'response.create', model: 'sim-model', input, store: false });
      const id = (await s.next('response.completed')).response.id;
      expect(overlapped.server.services.inFlight!.size).toBe(0);
      expect((await getJson(`${overlapped.url}/v1/responses/${id}`)).status).toBe(404);
      s.dispose();
    } finally {
      gate.open();
    }
    const plain = await testServer();
    const final = await completed(plain.url, 'ws');
    await plain.server.ws.idle();
    expect(plain.server.services.inFlight!.size).toBe(0);
    expect((await getJson(`${plain.url}/v1/responses/${final.id}`)).json.status).toBe('completed');
  });
});
