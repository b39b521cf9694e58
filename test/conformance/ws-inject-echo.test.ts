/**
 * A `response.inject` refused at once (naming no response in flight on the connection) comes back as
 * `response.inject.failed` carrying its input, as a refused steer's does: that echo is charged to the
 * server-wide byte budget (`--max-server-bytes`) until it has left. Found by an outside attack: the inject's
 * frame was charged only while the session had work, released at once on an idle connection, so a peer that
 * sent large injects and read nothing held their echoes unsent and uncounted (4 connections, 120 MB unsent,
 * `bytes_held` at most 30 MB; the same with steers, already charged: 161 MB). Real sockets on port 0.
 */
import { describe, expect, it } from 'vitest';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const health = async (url: string) => (await (await fetch(`${url}/health`)).json()) as { bytes_held: number; send_bytes_unsent: number };
// Asks /health again until `f` holds (each try one round trip: no timer), at most 2,000 times.
const until = async (f: () => Promise<boolean>) => {
  for (let i = 0; i < 2000 && !(await f()); i++);
};

describe('a refused inject echo is charged to the server-wide byte budget until it has left', () => {
  it('a peer that sends large injects naming no response and reads nothing holds their echoes as bytes_held', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } });
    (s.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const input = [{ role: 'user', content: 'x'.repeat(8 * MiB) }];
    s.send({ type: 'response.inject', response_id: 'resp_x', input });
    s.send({ type: 'response.inject', response_id: 'resp_x', input });
    // Both echoes handed to the socket (more unsent than the kernel's buffers take). `send_bytes_unsent` counts every
    // reader now, so it passes 4 MiB with the first echo, while the second frame may still be arriving.
    await until(async () => {
      const h = await health(url);
      return h.send_bytes_unsent > 4 * MiB && h.bytes_held >= 16 * MiB;
    });
    const h = await health(url);
    expect(h.send_bytes_unsent).toBeGreaterThan(4 * MiB);
    expect(h.bytes_held).toBeGreaterThanOrEqual(16 * MiB);
    // Read: both echoes arrive whole, and the charge is released.
    (s.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await s.next('response.inject.failed');
    const second = await s.next('response.inject.failed');
    expect(second.error.code).toBe('response_not_found');
    expect(((second.input as Array<{ content: string }>)[0]!.content).length).toBe(8 * MiB);
    await until(async () => (await health(url)).bytes_held === 0);
    expect((await health(url)).bytes_held).toBe(0);
    s.dispose();
  });
});
