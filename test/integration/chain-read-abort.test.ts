/**
 * A stored chain's read stops when nobody waits for it any more (modes/hydrate.ts, `loadChain`): chain reads are
 * queued one at a time per server, and before, a continuation whose client had gone still read its chain in turn
 * (0.1–0.5 s each for a long chain), its session held open until then. Real sockets, the in-memory store with its
 * `chainWork` wrapped to count the reads and to hold the first one until the test lets it go.
 */
import pDefer from 'p-defer';
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { abortableWork, runSync, type Work } from '../../src/cooperative.js';
import type { LlrServer } from '../../src/server.js';

const json = { 'Content-Type': 'application/json' };

/** A stored chain of three responses; its last id. */
async function storedChain(url: string): Promise<string> {
  let id: string | null = null;
  for (const input of ['one', 'two', 'three']) {
    const r = await fetch(`${url}/v1/responses`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'sim-model', input, store: true, previous_response_id: id }) });
    expect(r.status).toBe(200);
    id = ((await r.json()) as { id: string }).id;
  }
  return id!;
}

/**
 * The store's chain reads, counted as they start and as they end; the first one holds (yielding, so the loop turns)
 * until `release`. `planned(id)`: settles once a create continuing `id` is being planned (the host looks its parent up
 * among the runs in flight first, in the same chain of promises that then queues its read).
 */
function watchReads(server: LlrServer) {
  const store = server.services.store;
  const chainWork = store.chainWork.bind(store);
  const reads = { started: 0, ended: 0, closedEarly: 0 };
  let released = false;
  const release = () => (released = true);
  const holding = pDefer<void>();
  store.chainWork = function* (id, owner) {
    const first = reads.started++ === 0;
    let ended = false;
    try {
      if (first) {
        holding.resolve();
        while (!released) yield;
      }
      const c = yield* chainWork(id, owner);
      ended = true;
      reads.ended++;
      return c;
    } finally {
      if (!ended) reads.closedEarly++;
    }
  };
  const inFlight = server.services.inFlight!;
  const find = inFlight.find.bind(inFlight);
  const waiting = new Map<string, Array<() => void>>();
  inFlight.find = (id, owner) => {
    for (const f of waiting.get(id) ?? []) f();
    waiting.delete(id);
    return find(id, owner);
  };
  const planned = (id: string) => new Promise<void>((resolve) => waiting.set(id, [...(waiting.get(id) ?? []), resolve]));
  return { reads, release, holding: holding.promise, planned };
}

describe('a chain read nobody waits for', () => {
  it('an HTTP continuation whose client left while its read was queued never reads its chain', async () => {
    const { server, url } = await testServer({ store: 'memory' });
    const last = await storedChain(url);
    const w = watchReads(server);
    const post = (signal?: AbortSignal) =>
      fetch(`${url}/v1/responses`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'sim-model', input: 'next', previous_response_id: last }), ...(signal && { signal }) });
    const first = post();
    await w.holding;
    // The second create queues its read behind the first, held one; then its client goes.
    const closed = pDefer<void>();
    server.http.on('request', (_req, res) => res.on('close', () => closed.resolve()));
    const ac = new AbortController();
    const planned = w.planned(last);
    const second = post(ac.signal).then(
      () => 'answered',
      () => 'aborted',
    );
    await planned;
    ac.abort();
    expect(await second).toBe('aborted');
    await closed.promise;
    w.release();
    expect((await first).status).toBe(200);
    await server.httpTransport.idle();
    expect(w.reads).toEqual({ started: 1, ended: 1, closedEarly: 0 });
    // The queue goes on: a later continuation reads its chain.
    expect((await post()).status).toBe(200);
    expect(w.reads).toEqual({ started: 2, ended: 2, closedEarly: 0 });
    expect(server.bytes.held).toBe(0);
  });

  it('a read under way stops at its next slice when its client leaves, and the next read in the queue runs', async () => {
    const { server, url } = await testServer({ store: 'memory' });
    const last = await storedChain(url);
    const w = watchReads(server);
    const closed = pDefer<void>();
    server.http.once('request', (_req, res) => res.on('close', () => closed.resolve()));
    const ac = new AbortController();
    const first = fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ model: 'sim-model', input: 'next', previous_response_id: last }),
      signal: ac.signal,
    }).then(
      () => 'answered',
      () => 'aborted',
    );
    await w.holding;
    ac.abort();
    expect(await first).toBe('aborted');
    await closed.promise;
    // Still held: the read is closed at its next slice, not run on once it is let go.
    const next = await fetch(`${url}/v1/responses`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'sim-model', input: 'again', previous_response_id: last }) });
    expect(next.status).toBe(200);
    expect(w.reads).toEqual({ started: 2, ended: 1, closedEarly: 1 });
    await server.httpTransport.idle();
    expect(server.bytes.held).toBe(0);
  });

  it('a ws-mode continuation queued behind another read, its connection closed, never reads; the connection ends at once', async () => {
    const { server, url } = await testServer({ store: 'memory' });
    const last = await storedChain(url);
    const w = watchReads(server);
    const a = await RawSocket.connect(url);
    a.send({ type: 'response.create', model: 'sim-model', input: 'next', previous_response_id: last, store: true });
    await w.holding;
    const b = await RawSocket.connect(url);
    const planned = w.planned(last);
    b.send({ type: 'response.create', model: 'sim-model', input: 'next', previous_response_id: last, store: true });
    await planned;
    b.dispose();
    // The server's side of b ends while a's read is still held: b's queued read no longer keeps its session.
    while (server.ws.sessions.size > 1) await new Promise((resolve) => setImmediate(resolve));
    expect(w.reads.started).toBe(1);
    w.release();
    await a.next('response.completed');
    a.dispose();
    await server.ws.idle();
    expect(w.reads).toEqual({ started: 1, ended: 1, closedEarly: 0 });
  });

  it('a token count and a compaction whose clients left while their reads were queued never read', async () => {
    const { server, url } = await testServer({ store: 'memory' });
    const last = await storedChain(url);
    const w = watchReads(server);
    const first = fetch(`${url}/v1/responses`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'sim-model', input: 'next', previous_response_id: last }) });
    await w.holding;
    const closes: Promise<void>[] = [];
    server.http.on('request', (_req, res) => closes.push(new Promise((resolve) => res.on('close', () => resolve()))));
    for (const path of ['/v1/responses/input_tokens', '/v1/responses/compact']) {
      const ac = new AbortController();
      const planned = pDefer<void>();
      // Both look up a run in flight for their parent before reading its chain (`written`), as a create does.
      const find = server.services.inFlight!.find;
      server.services.inFlight!.find = (id, owner) => {
        planned.resolve();
        return find(id, owner);
      };
      const r = fetch(`${url}${path}`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'sim-model', input: 'x', previous_response_id: last }), signal: ac.signal }).then(
        () => 'answered',
        () => 'aborted',
      );
      await planned.promise;
      server.services.inFlight!.find = find;
      ac.abort();
      expect(await r).toBe('aborted');
    }
    await Promise.all(closes);
    w.release();
    expect((await first).status).toBe(200);
    expect(w.reads).toEqual({ started: 1, ended: 1, closedEarly: 0 });
  });
});

describe('abortableWork', () => {
  it('closes the work at its first yield after the abort and throws the reason; runs to its end without one', () => {
    let closed = 0;
    function* work(): Work<number> {
      try {
        for (let i = 0; i < 5; i++) yield;
        return 42;
      } finally {
        closed++;
      }
    }
    expect(runSync(abortableWork(work(), undefined))).toBe(42);
    const ac = new AbortController();
    const steps = abortableWork(work(), ac.signal);
    steps.next();
    steps.next();
    const reason = new Error('gone');
    ac.abort(reason);
    expect(() => steps.next()).toThrow(reason);
    expect(closed).toBe(2);
    const aborted = new AbortController();
    aborted.abort(reason);
    expect(() => abortableWork(work(), aborted.signal).next()).toThrow(reason);
  });
});
