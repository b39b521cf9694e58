/**
 * Many requests pipelined on one connection add no `close` listener each to
 * its socket: every watch of a request's socket (a queued cold listing's,
 * an SSE stream's share of the send bound, a create's, the stall watch's)
 * shares one listener per socket (`whenSocketCloses` in transport/http.ts).
 * With one each, more than ten pipelined requests made Node print its
 * MaxListenersExceededWarning (a leak warning) on the server's stderr, and
 * a connection's listeners grew with what a client pipelined. Counted on the
 * server's side of the socket as listeners are added; no timing: the queue's
 * slice budget is 0, so the listings stay queued while the rest are read.
 */
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { SessionHost } from '../../src/modes/host.js';
import type { InputItem } from '../../src/protocol/objects.js';
import { rawConnect, requestText } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const PIPELINED = 24;

/** The most `close` listeners the server's side of each connection held at once. */
function watchCloseListeners(http: import('node:http').Server): { max: () => number } {
  let max = 0;
  http.on('connection', (socket: Socket) => {
    socket.on('newListener', (event) => {
      if (event === 'close') max = Math.max(max, socket.listenerCount('close') + 1);
    });
  });
  return { max: () => max };
}

describe('requests pipelined on one connection', () => {
  it('cold input_items listings: one close listener per socket, however many wait', async () => {
    const { server, port } = await testServer();
    const host = (server.httpTransport as unknown as { host: SessionHost }).host;
    host.listings.budgetMs = 0;
    const store = server.services.store;
    for (let n = 0; n < PIPELINED; n++) {
      store.put({
        response: { id: `resp_${n}`, object: 'response', output: [], previous_response_id: null } as never,
        input: Array.from({ length: 2_000 }, (_, i) => ({ type: 'message', role: 'user', content: `m${i}` }) as InputItem),
        owner: null,
        created_at: Math.floor(Date.now() / 1000),
      });
    }
    const listeners = watchCloseListeners(server.http);
    const socket = await rawConnect(port);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    const answered = new Promise<void>((resolve) => socket.on('data', () => (text.match(/HTTP\/1\.1 200/g) ?? []).length === PIPELINED && resolve()));
    socket.write(Array.from({ length: PIPELINED }, (_, n) => requestText('GET', `/v1/responses/resp_${n}/input_items?limit=1`, {})).join(''));
    for (let i = 0; i < 100_000 && host.listings.held.waiting < PIPELINED; i++) await turn();
    expect(host.listings.held.waiting).toBe(PIPELINED);
    await answered;
    expect(listeners.max()).toBeLessThanOrEqual(6);
    socket.destroy();
  });

  it('SSE creates: one close listener per socket for their watches', async () => {
    const { server, port } = await testServer();
    const listeners = watchCloseListeners(server.http);
    const socket = await rawConnect(port);
    let text = '';
    socket.setEncoding('utf8');
    const answered = new Promise<void>((resolve) =>
      socket.on('data', (chunk: string) => {
        text += chunk;
        if ((text.match(/data: \[DONE\]/g) ?? []).length === PIPELINED) resolve();
      }),
    );
    const body = JSON.stringify({ model: 'sim-model', input: 'hi', stream: true, store: false });
    const one = requestText('POST', '/v1/responses', { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) }, body);
    socket.write(one.repeat(PIPELINED));
    await answered;
    expect(listeners.max()).toBeLessThanOrEqual(6);
    socket.destroy();
  });
});
