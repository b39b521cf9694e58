/**
 * The raw test peer itself: a wait fails fast with the server's error event
 * or on a closed socket, rather than running into the test timeout, so a
 * protocol test that goes wrong says why.
 */
import { describe, expect, it } from 'vitest';
import { RawSocket, UnexpectedErrorEvent } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

describe('RawSocket.next', () => {
  it('rejects with the error event when one arrives that the test did not wait for', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'no.such.event' });
    const err = await s.next('response.completed').then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UnexpectedErrorEvent);
    const { event, message } = err as UnexpectedErrorEvent;
    expect(event.type).toBe('error');
    expect(message).toContain(event.error.code);
    expect(message).toContain('response.completed');
  });

  it('passes over error events when asked, and still finds the awaited one', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'no.such.event' });
    s.send({ type: 'response.create', model: 'sim-model', input: 'hi' });
    const done = await s.next('response.completed', { skipErrors: true });
    expect(done.response.status).toBe('completed');
    expect(s.all('error')).toHaveLength(1);
  });

  it('rejects when the socket closes before the event comes', async () => {
    const { url, server } = await testServer();
    const s = await RawSocket.connect(url);
    // Taken before the close: shutdown waits for the peer to answer its close, so the wait fails before close() resolves.
    const waiting = expect(s.next('response.completed')).rejects.toThrow(/socket closed \(1001/);
    await server.close();
    await waiting;
    // A wait that starts after the close fails at once too.
    await expect(s.next('response.created')).rejects.toThrow(/socket closed/);
  });
});
