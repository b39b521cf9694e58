/**
 * `GET /llr/stats` says what the server holds for its clients (`held`): sessions, runs paused for tool outputs,
 * queued creates, ws-mode cached responses, long-lived runs over HTTP, background runs and the store. None of it was
 * reported, so nobody could see from outside that a client's going left nothing behind (outside attack atk62 F5).
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

interface Held {
  sessions: number;
  runs_paused: number;
  creates_queued: number;
  ws_cached_responses: number;
  live_http_runs: number;
  background_in_flight: number;
  store: { responses: number; bytes: number; evicted: number; expired: number };
}

const held = async (url: string) => ((await (await fetch(`${url}/llr/stats`)).json()) as { held: Held }).held;

describe('GET /llr/stats held', () => {
  it('counts a paused long-lived run, a ws-mode cached response and the store, and nothing once the clients are gone', async () => {
    const { url, server } = await testServer({
      policy: scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'stored' }]),
    });
    expect(await held(url)).toEqual({ sessions: 0, runs_paused: 0, creates_queued: 0, ws_cached_responses: 0, live_http_runs: 0, background_in_flight: 0, store: { responses: 0, bytes: 0, evicted: 0, expired: 0 } });
    const ll = await RawSocket.longLived(url);
    const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } }];
    ll.send({ type: 'response.create', model: 'sim-model', input: 'look it up', tools, store: false });
    await ll.next('response.done');
    const ws = await RawSocket.connect(url);
    ws.send({ type: 'response.create', model: 'sim-model', input: 'keep this', store: true });
    await ws.next('response.completed');
    await server.services.postWork.flush();
    const during = await held(url);
    expect(during).toMatchObject({ sessions: 2, runs_paused: 1, creates_queued: 0, ws_cached_responses: 1, store: { responses: 1 } });
    expect(during.store.bytes).toBeGreaterThan(0);
    ll.dispose();
    ws.dispose();
    // Each close reaches the server as an event of its own: asked until both sessions have wound down.
    let after = await held(url);
    for (let i = 0; i < 1_000 && after.sessions > 0; i++) after = await held(url);
    expect(after).toMatchObject({ sessions: 0, runs_paused: 0, ws_cached_responses: 0, store: { responses: 1 } });
  });
});
