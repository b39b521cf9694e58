/**
 * A large JSON answer pipelined behind another on the same connection has no
 * socket until that one is done (Node queues it), and gets neither `drain`
 * nor `close` when the client goes away first: written in pieces as its
 * reader takes them (transport/json-out.ts), it waited for a `drain` that
 * never came, its request's share of the byte budget (`ANSWER_HELD_BYTES`)
 * charged for good. Outside attack: two pipelined retrieves of a 3 MB stored
 * response, the client (another process) gone after 128 KB, left `bytes_held` at 2 MiB with
 * `http_in_flight` 0, 2 MiB more each time, until every large answer was
 * refused `server_busy`. Real sockets, port 0; no sleeps.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ANSWER_HELD_BYTES } from '../../src/transport/json-out.js';
import { testServer } from '../helpers/server.js';

const held = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;

describe('a large answer pipelined behind another, its client gone mid-answer', () => {
  it('releases its charge: bytes_held returns to 0', async () => {
    const { url, port } = await testServer();
    const created = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'm', input: 'hi', instructions: 'y'.repeat(12_000_000), store: true }),
    });
    const { id } = (await created.json()) as { id: string };
    const get = `GET /v1/responses/${id} HTTP/1.1\r\nHost: localhost\r\n\r\n`;
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => {});
    sock.write(get + get);
    // The first answer under way (its first bytes read): the second is queued behind it.
    // The first answer under way, its reader paused (12 MB is more than the socket buffers take): the second is
    // queued behind it, its first piece made and waiting for a `drain`. Both are charged.
    await new Promise((resolve) => sock.once('data', resolve));
    sock.pause();
    let both = await held(url);
    for (let i = 0; i < 200 && both < 2 * ANSWER_HELD_BYTES; i++) both = await held(url);
    expect(both).toBe(2 * ANSWER_HELD_BYTES);
    const closed = new Promise((resolve) => sock.once('close', resolve));
    sock.destroy();
    await closed;
    // The server hears the close on its own turn: ask until it has (each ask is a round trip, no timer).
    let now = await held(url);
    for (let i = 0; i < 200 && now !== 0; i++) now = await held(url);
    // Before: 2097152 for good (the queued answer's charge).
    expect(now).toBe(0);
  });
});
