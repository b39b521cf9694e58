/**
 * Over HTTP, a cold `input_items` listing waiting in the server's queue
 * (modes/cold-listings.ts) leaves it when its client goes away: its list is
 * not read, and the queue's bound (`--max-queued-listings`) is not held by
 * it. Counted in the queue, no timing: the queue's slice budget is 0, so the
 * list ahead of it takes one step a turn and is still being derived when the
 * client's close arrives.
 */
import { describe, expect, it } from 'vitest';
import type { SessionHost } from '../../src/modes/host.js';
import type { InputItem } from '../../src/protocol/objects.js';
import type { InputItemIndex } from '../../src/store/input-items.js';
import type { ResponseStore } from '../../src/store/types.js';
import { captureLogger, rawConnect, requestText } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A stored response of `items` user messages, put straight into the server's store. */
function putList(store: ResponseStore, id: string, items: number): void {
  store.put({
    response: { id, object: 'response', output: [], previous_response_id: null } as never,
    input: Array.from({ length: items }, (_, i) => ({ type: 'message', role: 'user', content: `m${i}` }) as InputItem),
    owner: null,
    created_at: Math.floor(Date.now() / 1000),
  });
}

describe('cold input_items listings over HTTP', () => {
  it('one whose client closes its connection leaves the queue, its list unread', async () => {
    const { server, url, port } = await testServer();
    const host = (server.httpTransport as unknown as { host: SessionHost }).host;
    host.listings.budgetMs = 0;
    const store = server.services.store;
    for (const id of ['resp_ahead', 'resp_left']) putList(store, id, 20_000);
    const made = new Map<string, InputItemIndex>();
    const inputItems = store.inputItems.bind(store);
    store.inputItems = (id, owner) => {
      const index = inputItems(id, owner);
      if (index) made.set(id, index);
      return index;
    };
    // The server side of the leaving client's connection.
    let leftSocketClosed: Promise<void> | null = null;
    server.http.on('request', (req) => {
      if (req.url?.includes('resp_left')) leftSocketClosed = new Promise((resolve) => req.socket.once('close', () => resolve()));
    });

    const ahead = fetch(`${url}/v1/responses/resp_ahead/input_items?limit=1`);
    for (let i = 0; i < 10_000 && host.listings.held.running < 1; i++) await turn();
    const socket = await rawConnect(port);
    socket.write(requestText('GET', '/v1/responses/resp_left/input_items?limit=1', {}));
    for (let i = 0; i < 10_000 && host.listings.held.waiting < 2; i++) await turn();
    expect(host.listings.held).toEqual({ waiting: 2, queued: 1, running: 1 });

    socket.destroy();
    await leftSocketClosed;
    // Left at its socket's close, while the list ahead is still being derived.
    expect(host.listings.held).toEqual({ waiting: 1, queued: 0, running: 1 });
    const page = (await (await ahead).json()) as { data: unknown[] };
    expect(page.data).toHaveLength(1);
    expect(host.listings.held).toEqual({ waiting: 0, queued: 0, running: 0 });
    expect(made.get('resp_left')!.derived).toBe(0);
    // The /health on another connection meanwhile, and the listing of the list left: answered.
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect(((await (await fetch(`${url}/v1/responses/resp_left/input_items?limit=1`)).json()) as { data: unknown[] }).data).toHaveLength(1);
  });

  it('one queued at shutdown is refused (503), its row not read from the closed store', async () => {
    // The SQLite store closes once the connections are closed; a listing whose turn came in between (its slice runs
    // before its socket's close is seen) read the closed database: 'http handler failed', a TypeError, at every such stop.
    const { logger, lines } = captureLogger();
    const { server, port } = await testServer({ store: ':memory:', logger });
    const host = (server.httpTransport as unknown as { host: SessionHost }).host;
    const store = server.services.store;
    store.put({
      response: { id: 'resp_late', object: 'response', output: [], previous_response_id: null } as never,
      input: Array.from({ length: 100 }, (_, i) => ({ type: 'message', role: 'user', content: `m${i}` }) as InputItem),
      owner: null,
      created_at: Math.floor(Date.now() / 1000),
    });
    const inputItems = store.inputItems.bind(store);
    let closing: Promise<void> | null = null;
    // The server is told to stop as the listing is queued.
    store.inputItems = (id, owner) => {
      const index = inputItems(id, owner);
      process.nextTick(() => (closing = server.close()));
      return index;
    };
    const socket = await rawConnect(port);
    const answer = new Promise<string>((resolve) => {
      let data = '';
      socket.on('data', (d: Buffer) => (data += d.toString()));
      socket.on('close', () => resolve(data));
      socket.on('error', () => {});
    });
    socket.write(requestText('GET', '/v1/responses/resp_late/input_items?limit=1', {}));
    const got = await answer;
    await closing;
    for (let i = 0; i < 5; i++) await turn();
    expect(lines.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([]);
    expect(got === '' || got.startsWith('HTTP/1.1 503')).toBe(true);
    expect(host.listings.held).toEqual({ waiting: 0, queued: 0, running: 0 });
  });
  it('GET /health reports the listings waiting (listings_waiting), back to 0 once they are answered', async () => {
    const { server, url } = await testServer();
    const store = server.services.store;
    putList(store, 'resp_held', 100);
    // The list's derivation is held until released: the listing stays in the queue, whatever the host's speed.
    let release = false;
    const inputItems = store.inputItems.bind(store);
    store.inputItems = (id, owner) => {
      const index = inputItems(id, owner);
      if (index) {
        const derive = index.derive.bind(index);
        (index as { derive: () => Generator<void, void, void> }).derive = function* () {
          while (!release) yield;
          yield* derive();
        };
      }
      return index;
    };
    const health = async () => ((await (await fetch(`${url}/health`)).json()) as { listings_waiting: number }).listings_waiting;
    expect(await health()).toBe(0);
    const listing = fetch(`${url}/v1/responses/resp_held/input_items?limit=1`);
    const host = (server.httpTransport as unknown as { host: SessionHost }).host;
    for (let i = 0; i < 10_000 && host.listings.held.running < 1; i++) await turn();
    expect(await health()).toBe(1);
    release = true;
    expect((await listing).status).toBe(200);
    expect(await health()).toBe(0);
  });
});
