/**
 * WebSocket `error` events always carry an integer `sequence_number` (the AI
 * SDK's event schema requires it): numbered in the stream of the response in
 * flight, or by the connection's own counter when no response is.
 */
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

describe('WebSocket error events', () => {
  it('are numbered by the connection when no response is in flight', async () => {
    const { url } = await testServer();
    for (const s of [await RawSocket.connect(url), await RawSocket.longLived(url)]) {
      s.send('not json');
      const first = await s.next('error');
      s.send({ type: 'response.cancel' });
      const second = await s.next('error');
      s.send({ type: 'response.bogus' });
      const third = await s.next('error');
      expect([first, second, third].map((e) => e.error.code)).toEqual(['invalid_json', 'no_response_in_flight', 'unknown_event_type']);
      for (const e of [first, second, third]) expect(Number.isInteger(e.sequence_number)).toBe(true);
      expect(second.sequence_number).toBeGreaterThan(first.sequence_number);
      expect(third.sequence_number).toBeGreaterThan(second.sequence_number);
      // The socket stays usable, and a response's own stream still starts at 0.
      s.send({ type: 'response.create', model: 'sim-model', input: 'hello' });
      expect((await s.next('response.created')).sequence_number).toBe(0);
      await s.next('response.completed');
    }
  });
});
