/**
 * The server-wide byte budget's charges for loaded chains and cached contexts are released exactly once, and
 * follow what is actually held (outside attack on `--max-server-bytes`). Real sockets.
 */
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { firstCallFreeModel } from '../helpers/gated-model.js';
import { YIELD_BUDGET_MS } from '../../src/cooperative.js';

const KiB = 1024;
const held = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;

describe('loaded chains and cached contexts under the byte budget', () => {
  it('an HTTP continuation whose client went away while it was planned does not charge its chain after the request was released', async () => {
    // Before: the request's hold was released at the disconnect, then the plan (still resolving item references)
    // loaded the chain and charged it to that released hold: bytes_held stayed up by the chain's size for good.
    const { server, url } = await testServer({ store: 'memory', limits: { maxServerBytes: 1024 * KiB } });
    const post = (body: object) =>
      fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', ...body }) });
    const a = (await (await post({ input: 'x'.repeat(100 * KiB), store: true })).json()) as { id: string; output: { id: string }[] };
    expect(await held(url)).toBe(0);

    // The next request's socket, and when its response has closed (the server's own `close` handler runs in the same emit).
    let socket: Socket | null = null;
    let closed = false;
    server.http.on('request', (req, res) => {
      if (req.method !== 'POST' || socket) return;
      socket = req.socket;
      res.on('close', () => (closed = true));
    });
    // While references are resolved: the first drops the client; each takes the pipeline's slice until the
    // close was seen (so the plan yields, and the disconnect is handled while it is still planned).
    const store = server.services.store;
    const getItem = store.getItem.bind(store);
    store.getItem = (id, owner) => {
      if (socket && !socket.destroyed) socket.destroy();
      if (!closed) for (const start = Date.now(); Date.now() - start < 10; );
      return getItem(id, owner);
    };
    const chainWork = store.chainWork.bind(store);
    let read = false;
    store.chainWork = function* (id, owner) {
      read = true;
      return yield* chainWork(id, owner);
    };
    const refs = Array.from({ length: 200 }, () => ({ type: 'item_reference', id: a.output[0]!.id }));
    await post({ input: refs, previous_response_id: a.id, stream: true }).then(
      () => undefined,
      () => undefined,
    );
    await server.httpTransport.idle();
    // The request is done at the disconnect; its session, once its plan has stopped.
    while (server.httpTransport.inFlight > 0) await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(true);
    // Since the plan stops when its session ends (modes/hydrate.ts), the chain is not even read.
    expect(read).toBe(false);
    expect(server.bytes.held).toBe(0);
    expect(await held(url)).toBe(0);
  });

  it('a DELETE of a ws-mode cached response releases its charge while the connection is idle', async () => {
    // Before: the cache entry went, but the connection's charge stayed at its size until its next response ended or
    // it closed (an idle connection kept budget for memory nobody held, for up to its lifetime).
    const { server, url } = await testServer({ store: 'memory', limits: { maxServerBytes: 1024 * KiB } });
    const ws = await RawSocket.connect(url);
    ws.send({ type: 'response.create', model: 'sim-model', input: 'x'.repeat(200 * KiB), store: true, stream_id: 'a' });
    const a = await ws.next('response.completed');
    ws.send({ type: 'response.create', model: 'sim-model', input: 'y'.repeat(100 * KiB), store: true, stream_id: 'b' });
    const b = await ws.next('response.completed');
    const both = await held(url);
    expect(both).toBeGreaterThan(300 * KiB);
    expect((await fetch(`${url}/v1/responses/${a.response.id}`, { method: 'DELETE' })).status).toBe(200);
    const one = await held(url);
    expect(one).toBeLessThan(both - 200 * KiB);
    expect(one).toBeGreaterThan(100 * KiB);
    expect((await fetch(`${url}/v1/responses/${b.response.id}`, { method: 'DELETE' })).status).toBe(200);
    expect(await held(url)).toBe(0);
    // The connection goes on, and caches again.
    ws.send({ type: 'response.create', model: 'sim-model', input: 'z', store: true });
    await ws.next('response.completed');
    ws.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('concurrent continuations read their chains one at a time', async () => {
    // Read in slices but all at once, 40 continuations of one long chain each held its parsed records uncharged until
    // its read ended, and the server died out of memory (outside attack). The reads are queued per server, and each
    // one's items are charged before the next read begins (`loadChain`).
    const { server, url } = await testServer({ store: 'memory' });
    const post = (body: object) =>
      fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', ...body }) });
    let last = (await (await post({ input: 'start', store: true })).json()) as { id: string };
    for (let i = 0; i < 4; i++) last = (await (await post({ input: `step ${i}`, store: true, previous_response_id: last.id })).json()) as { id: string };
    const store = server.services.store;
    const chainWork = store.chainWork.bind(store);
    const seen: string[] = [];
    store.chainWork = function* (id, owner) {
      seen.push('start');
      // Long enough for the cooperative runner to give the loop turns (its slices are YIELD_BUDGET_MS): an interleaved
      // read would start in one of them while this one is still reading.
      for (let k = 0; k < 4 * YIELD_BUDGET_MS; k++) {
        for (const t = performance.now(); performance.now() - t < 1; );
        yield;
      }
      const c = yield* chainWork(id, owner);
      seen.push('end');
      return c;
    };
    const answers = await Promise.all(Array.from({ length: 3 }, () => post({ input: 'and then?', store: false, previous_response_id: last.id })));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(seen).toEqual(['start', 'end', 'start', 'end', 'start', 'end']);
    expect(await held(url)).toBe(0);
  });

  it('a token count or a compaction that loads a stored chain is charged while it works: past the budget, 503 server_busy', async () => {
    // Before: both loaded the chain (and rendered it) uncharged, so any number of them at once held a chain each
    // beyond the budget, while a create continuing the same chain was refused server_busy.
    const { model, release } = firstCallFreeModel();
    const { url } = await testServer({ model, store: 'memory', limits: { maxServerBytes: 1_000 * KiB } });
    const post = (path: string, body: object) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const a = (await (await post('/v1/responses', { model: 'sim-model', input: 'x'.repeat(600 * KiB), store: true })).json()) as { id: string };
    // A continuation holds the chain while its model waits.
    const b = await post('/v1/responses', { model: 'sim-model', input: 'next', previous_response_id: a.id, stream: true });
    const reader = b.body!.getReader();
    await reader.read();
    expect(await held(url)).toBeGreaterThan(600 * KiB);
    for (const path of ['/v1/responses/input_tokens', '/v1/responses/compact']) {
      const r = await post(path, { model: 'sim-model', input: 'again', previous_response_id: a.id });
      expect(r.status).toBe(503);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('server_busy');
    }
    release();
    while (!(await reader.read()).done);
    expect(await held(url)).toBe(0);
    // With room, both are answered, and release what they held.
    const count = await post('/v1/responses/input_tokens', { model: 'sim-model', input: 'again', previous_response_id: a.id });
    expect(count.status).toBe(200);
    await count.json();
    // A compaction's answer (~2.3× its window here) is charged as it is written; the chain it loaded is not held with
    // it: a 350 KiB chain and its ~840 KB answer together would pass the budget.
    const c = (await (await post('/v1/responses', { model: 'sim-model', input: 'y'.repeat(350 * KiB), store: true })).json()) as { id: string };
    const compacted = await post('/v1/responses/compact', { model: 'sim-model', input: 'again', previous_response_id: c.id });
    expect(compacted.status).toBe(200);
    expect((await compacted.text()).length).toBeGreaterThan(700 * KiB);
    expect(await held(url)).toBe(0);
  });
});
