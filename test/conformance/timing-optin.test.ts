/**
 * The `llr:timing` extension event is opt-in on every transport (create body
 * option, header, upgrade query) and comes right after the terminal event;
 * a client that did not ask never sees it, and the server's record is the
 * same either way. This project's clients act on the terminal event, so
 * they finish against a server that never sends timing; late timing events
 * reach their run by response id.
 */
import { once } from 'node:events';
import { WebSocketServer } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { connectClient, CLIENT_PROTOCOLS, LongLivedClient, WsClient } from '../../src/client/index.js';
import type { RunRecord } from '../../src/engine/records.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const create = (extra: Record<string, unknown> = {}) => ({ type: 'response.create', model: 'sim-model', input: 'hello', ...extra });

async function sseTypes(url: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<string[]> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify({ model: 'sim-model', input: 'hi', stream: true, ...body }) });
  return (await res.text()).split('\n\n').filter(Boolean).map((f) => {
    const data = f.split('\n').find((l) => l.startsWith('data: '))!.slice(6);
    return data === '[DONE]' ? data : (JSON.parse(data) as ServerEvent).type;
  });
}

/** Everything a socket received up to and including the first event after the second terminal event. */
async function twoTurns(s: RawSocket, first: Record<string, unknown>, second: Record<string, unknown>): Promise<string[]> {
  s.send(create(first));
  await s.next('response.completed');
  s.send(create(second));
  await s.next('response.completed');
  // A third, plain response: anything the server sent after the second terminal event precedes its created.
  s.send(create());
  await s.next('response.completed');
  return s.events.map((e) => e.type);
}

describe('llr:timing is opt-in', () => {
  it('SSE: only with the header or the body option, before [DONE]', async () => {
    const { url } = await testServer();
    expect((await sseTypes(url, {})).slice(-2)).toEqual(['response.completed', '[DONE]']);
    expect((await sseTypes(url, {}, { 'X-LLR-Timing': '1' })).slice(-3)).toEqual(['response.completed', 'llr:timing', '[DONE]']);
    expect((await sseTypes(url, { llr: { timing: true } })).slice(-3)).toEqual(['response.completed', 'llr:timing', '[DONE]']);
    expect((await sseTypes(url, { llr: { timing: false } })).slice(-2)).toEqual(['response.completed', '[DONE]']);
  });

  it('WebSocket (both protocols): per request with the body option, never unasked', async () => {
    const { url } = await testServer();
    for (const s of [await RawSocket.connect(url), await RawSocket.longLived(url)]) {
      const types = await twoTurns(s, {}, { llr: { timing: true } });
      const terminals = types.flatMap((t, i) => (t === 'response.completed' ? [i] : []));
      expect(types[terminals[0]! + 1]).toBe('response.created');
      expect(types[terminals[1]! + 1]).toBe('llr:timing');
      expect(types.filter((t) => t === 'llr:timing')).toHaveLength(1);
    }
  });

  it('WebSocket: per connection with ?llr_timing=1 or the upgrade header', async () => {
    const { url } = await testServer();
    for (const s of [await RawSocket.connect(url, { query: '?llr_timing=1' }), await RawSocket.connect(url, { headers: { 'X-LLR-Timing': '1' } })]) {
      const types = await twoTurns(s, {}, {});
      expect(types.filter((t) => t === 'llr:timing')).toHaveLength(3);
      types.forEach((t, i) => {
        if (t === 'llr:timing') expect(types[i - 1]).toBe('response.completed');
      });
    }
  });

  it('refuses a bad llr option with a clear error', async () => {
    const { url } = await testServer();
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: 'x', llr: { timing: 'yes' } }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe('llr.timing');
  });

  it('the server record is the same with or without the event', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send(create());
    const plain = await s.next('response.completed');
    const rec = (await (await fetch(`${url}/llr/runs/${plain.response.id}`)).json()) as RunRecord;
    expect(rec.counters['model_calls']).toBe(1);
    expect(rec.spans.map((x) => x.stage)).toContain('decode');
  });
});

describe('the project clients and timing', () => {
  const servers: WebSocketServer[] = [];
  afterEach(() => {
    for (const w of servers.splice(0)) w.close();
  });

  it('every client collects one timing per response when it asks, none when it does not', async () => {
    const { url } = await testServer();
    const tool = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } };
    for (const protocol of CLIENT_PROTOCOLS) {
      for (const timing of [true, false]) {
        const c = await connectClient(protocol, url, { timing });
        const run = c.run({ model: 'sim-model', input: '$ echo a', tools: [tool] }, () => 'a');
        const r = await run;
        const timings = await run.telemetry();
        expect(r.status, protocol).toBe('completed');
        if (timing) {
          const expected = protocol === 'long-lived' || protocol === 'long-lived-http' ? 1 : 2;
          expect(timings.map((t) => t.response_id), protocol).toEqual(run.responses.map((x) => x.id));
          expect(timings).toHaveLength(expected);
        } else {
          expect(timings, protocol).toEqual([]);
          expect(run.responses.length).toBeGreaterThan(0);
        }
        await c.close();
      }
    }
  });

  it('WsClient and LongLivedClient finish against a server that never sends timing', async () => {
    // A minimal Responses WebSocket server with no extension events at all.
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    servers.push(wss);
    await once(wss, 'listening');
    let n = 0;
    wss.on('connection', (ws) => {
      ws.on('message', () => {
        const response = { id: `resp_${++n}`, object: 'response', status: 'completed', output: [], usage: null };
        ws.send(JSON.stringify({ type: 'response.created', sequence_number: 0, response: { ...response, status: 'in_progress' } }));
        ws.send(JSON.stringify({ type: 'response.completed', sequence_number: 1, response }));
      });
    });
    const { port } = wss.address() as { port: number };
    for (const c of [await WsClient.connect(`http://127.0.0.1:${port}`), await LongLivedClient.connect(`http://127.0.0.1:${port}`)]) {
      const run = c.run({ model: 'm', input: 'hi' }, () => '');
      expect((await run).status).toBe('completed');
      const second = c.run({ model: 'm', input: 'again' }, () => '');
      expect((await second).status).toBe('completed');
      const closed = c.close();
      expect(await run.telemetry()).toEqual([]);
      await closed;
    }
  });
});
