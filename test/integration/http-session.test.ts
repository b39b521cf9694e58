/**
 * An HTTP create is a one-shot session of the http (or long-lived-http)
 * policy, like a WebSocket connection's: its authentication check is its
 * run's `auth` span, and a create still being planned when the server shuts
 * down is answered `503 server_shutting_down` instead of being missed. Real
 * sockets on port 0; planning is held on a gate (the injected routing hop).
 */
import { describe, expect, it } from 'vitest';
import { realClock, type Clock } from '../../src/model/clock.js';
import { scriptPolicy } from '../../src/model/policies.js';
import type { RunRecord } from '../../src/engine/records.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { gatedPlanning } from '../helpers/gated-planning.js';
import { testServer } from '../helpers/server.js';

const KEY = 'sk-test-session';

/** A clock that moves 1 ms at every reading: any span that covers work has a length. */
function steppingClock(): Clock {
  let t = 0;
  return { ...realClock, now: () => (t += 1) };
}

async function record(url: string, id: string): Promise<RunRecord> {
  const res = await fetch(`${url}/llr/runs/${id}`, { headers: { Authorization: `Bearer ${KEY}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as RunRecord;
}

describe('HTTP creates are sessions', () => {
  it.each([false, true])('the key check is the run’s auth span, as on a WebSocket (stream %s)', async (stream) => {
    const { url } = await testServer({ apiKeys: [KEY], clock: steppingClock(), policy: scriptPolicy([{ text: 'hi' }, { text: 'again' }]) });
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'sim-model', input: 'hi', stream }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const id = /"id":"(resp_[^"]+)"/.exec(text)![1]!;
    const http = await record(url, id);
    expect(http.counters['auth_checks']).toBe(1);
    // Two readings of the stepping clock around the check: 1 ms, not the empty span it was.
    expect(http.spans.filter((s) => s.stage === 'auth').map((s) => s.duration_ms)).toEqual([1]);

    const s = await RawSocket.connect(url, { headers: { Authorization: `Bearer ${KEY}` } });
    s.send({ type: 'response.create', model: 'sim-model', input: 'hi' });
    const done = await s.next('response.completed');
    const ws = await record(url, done.response.id);
    expect(ws.counters['auth_checks']).toBe(1);
    expect(ws.spans.filter((sp) => sp.stage === 'auth').map((sp) => sp.duration_ms)).toEqual([1]);
    s.dispose();
  });

  it.each([
    ['JSON', '', false],
    ['SSE', '', true],
    ['long-lived SSE', '?protocol=long-lived', true],
  ] as const)('shutdown while a %s create is being planned: 503 server_shutting_down, and nothing starts', async (_kind, query, stream) => {
    const { opts, inPlan, release } = gatedPlanning();
    const { url, server } = await testServer({ ...opts, policy: scriptPolicy([{ text: 'never' }]) });
    const res = fetch(`${url}/v1/responses${query}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: 'hi', stream }),
    });
    await inPlan;
    expect(server.httpTransport.inFlight).toBe(1);
    const closed = server.close();
    release();
    const answer = await res;
    expect(answer.status).toBe(503);
    expect(await answer.json()).toMatchObject({ error: { code: 'server_shutting_down', type: 'server_error' } });
    await closed;
    expect(server.services.records.list()).toEqual([]);
    expect(server.httpTransport.inFlight).toBe(0);
  });
});
