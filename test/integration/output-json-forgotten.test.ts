/**
 * A Response of 32 or more finished items keeps their UTF-8 JSON for its events (protocol/event-json.ts
 * `finishedBytes`), keyed by its first output item. In ws mode that item outlives the run: the connection's cache
 * keeps the context, which holds the output items themselves, and each continuation extends it in place; so the
 * kept JSON, a second copy of the output, stayed for the connection's life, counted nowhere (the cache's charge has
 * the items only). It is dropped once the run's events are all made. Real sockets.
 */
import { describe, expect, it } from 'vitest';
import type { Model, ModelEvent, ModelRequest } from '../../src/model/types.js';
import { keptOutputBytes } from '../../src/protocol/event-json.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

describe('a finished response’s kept output JSON', () => {
  it('ws mode: is not kept with the cached context once the response has ended', async () => {
    const seen: ModelRequest[] = [];
    const model: Model = {
      async *sample(req): AsyncIterable<ModelEvent> {
        seen.push(req);
        const n = seen.length === 1 ? 40 : 1;
        for (let i = 0; i < n; i++) {
          yield { type: 'message.start' };
          yield { type: 'text.delta', delta: `part ${i} `.repeat(200) };
          yield { type: 'message.end' };
        }
      },
    };
    const { url } = await testServer({ model });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', store: false });
    const first = await s.next('response.completed');
    expect(first.response.output).toHaveLength(40);
    s.send({ type: 'response.create', model: 'sim-model', input: 'more', store: false, previous_response_id: first.response.id });
    await s.next('response.completed');
    // The continuation's model call got the cached context itself: the first response's output items are its
    // items 1 to 40 (after 'go').
    const items = seen[1]!.items;
    expect(items.slice(1, 41).map((i) => i.type)).toEqual(new Array(40).fill('message'));
    expect(keptOutputBytes(items.slice(1, 41))).toBe(0);
    s.dispose();
  });
});
