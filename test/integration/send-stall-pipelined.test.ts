/**
 * The send-stall watch every HTTP answer gets ends with its request's socket:
 * an answer pipelined behind another has no socket until that one is done,
 * and gets neither `finish` nor `close` when the client goes away first, so
 * its interval timer ran for good, holding its request and answer, even after
 * the server closed (outside attack). Real sockets, port 0; the intervals are
 * counted, not faked.
 */
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { testServer } from '../helpers/server.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('an answer pipelined behind a slow one, its client gone', () => {
  it('leaves no stall-watch timer behind', async () => {
    const live = new Set<unknown>();
    const setInterval = globalThis.setInterval;
    const clearInterval = globalThis.clearInterval;
    vi.spyOn(globalThis, 'setInterval').mockImplementation(((...args: Parameters<typeof setInterval>) => {
      const t = setInterval(...args);
      live.add(t);
      return t;
    }) as typeof setInterval);
    vi.spyOn(globalThis, 'clearInterval').mockImplementation(((t: Parameters<typeof clearInterval>[0]) => {
      live.delete(t);
      clearInterval(t);
    }) as typeof clearInterval);
    // A first token after 60 s: the create holds the connection; the GETs pipelined behind it wait for it.
    const { server, port } = await testServer({ modelSettings: { ttftBaseMs: 60_000, tokensPerSecond: Infinity, prefillTokensPerSecond: Infinity } });
    const pipelined = 20;
    let requests = 0;
    const parsed = new Promise<void>((resolve) => server.http.on('request', () => ++requests === pipelined + 1 && resolve()));
    const accepted = new Promise<Socket>((resolve) => server.http.once('connection', resolve));
    const body = JSON.stringify({ model: 'm', input: 'hi' });
    const client = connect(port, '127.0.0.1');
    client.on('error', () => {});
    client.write(
      `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        'GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(pipelined),
    );
    const socket = await accepted;
    await parsed;
    const closed = new Promise((resolve) => socket.once('close', resolve));
    client.destroy();
    await closed;
    await server.close();
    expect(live.size).toBe(0);
  });
});
