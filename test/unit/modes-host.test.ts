/**
 * Every design as a session over the in-memory transport pair
 * (src/transport/memory.ts), opened the way the real transports open theirs
 * (`SessionHost` → `SessionSet.openSession`): WebSocket-like sessions for
 * long-lived and ws, one-shot sessions (an HTTP request: refusals and the
 * final answer instead of error events) for http and long-lived-http. No
 * sockets, no timers: waits on what the client end receives, and on the
 * injected routing hop held on a gate where planning must be caught.
 */
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { scriptPolicy, type ScriptStep } from '../../src/model/policies.js';
import type { Protocol } from '../../src/protocol/designs.js';
import type { Limits } from '../../src/engine/services.js';
import { SessionHost } from '../../src/modes/host.js';
import type { SessionInfo } from '../../src/modes/transport.js';
import { INSTANT_MODEL, LlrServer, type ServerOptions } from '../../src/server.js';
import { MemoryClient, type Received } from '../../src/transport/memory.js';
import { gatedPlanning } from '../helpers/gated-planning.js';

const servers: LlrServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.services.store.close();
});

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const CALL: ScriptStep = { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_1' }] };
const log = pino({ level: 'silent' });
const conn: SessionInfo = { connection: 'conn_mem', owner: null, authSpan: null };
const request: SessionInfo = { connection: null, owner: null, authSpan: { start: 0, end: 0 } };

function host(steps: ScriptStep[], opts: Partial<ServerOptions> & { limits?: Partial<Limits> } = {}) {
  const server = new LlrServer({ store: 'memory', logger: log, modelSettings: INSTANT_MODEL, policy: scriptPolicy(steps), ...opts });
  servers.push(server);
  const h = new SessionHost(server.services);
  return { server, host: h, sessions: h.sessions() };
}

const create = (fields: Record<string, unknown> = {}) => ({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], ...fields });
const output = (call_id: string) => [{ type: 'function_call_output', call_id, output: 'found' }];
const kinds = (c: MemoryClient) => c.received.map((r) => (r.kind === 'event' ? r.event.type : r.kind)).filter((k) => !k.startsWith('llr.'));
const isAnswer = (r: Received) => r.kind === 'answer' || r.kind === 'refused';

describe('SessionHost', () => {
  it.each(['long-lived', 'ws', 'http', 'long-lived-http'] as const)('has a policy for %s that serves that design', (protocol: Protocol) => {
    const { host: h } = host([]);
    expect(h.policy(protocol, conn).protocol).toBe(protocol);
  });
});

describe('WebSocket-like sessions over the in-memory pair', () => {
  it('long-lived: a tool call pauses the response, an append resumes it, one response for the whole run', async () => {
    const { sessions } = host([CALL, { text: 'thanks' }]);
    const c = MemoryClient.connect(sessions, 'long-lived', conn, log);
    const paused = c.nextEvent('response.done');
    c.send(create());
    const id = (await paused).response.id;
    const completed = c.nextEvent('response.completed');
    c.send({ type: 'response.append', response_id: id, input: output('call_1') });
    expect((await completed).response.id).toBe(id);
    expect(kinds(c).filter((k) => k === 'response.created')).toHaveLength(1);
  });

  it.each([true, false])('long-lived: an append is checked by the same checks as a ws continuation (incremental_checks %s)', async (incremental) => {
    const { server, sessions } = host([CALL, { text: 'thanks' }], { switches: { incremental_checks: incremental } });
    const c = MemoryClient.connect(sessions, 'long-lived', conn, log);
    const paused = c.nextEvent('response.done');
    c.send(create());
    const id = (await paused).response.id;
    const completed = c.nextEvent('response.completed');
    c.send({ type: 'response.append', input: output('call_1') });
    await completed;
    const rec = server.services.records.get(id)!;
    // The create's checks are full either way; the append's are incremental unless the switch is off.
    expect(rec.counters['validate_full']).toBe(incremental ? 1 : 2);
    expect(rec.counters['safety_full']).toBe(incremental ? 1 : 2);
    expect(rec.counters['validate_incremental'] ?? 0).toBe(incremental ? 1 : 0);
    // The create: its tool and message (2). The append: its output (1); off, also the tool, the message and the call again (4).
    expect(rec.counters['items_validated']).toBe(incremental ? 3 : 6);
    expect(rec.spans.map((sp) => sp.stage)).toEqual(expect.arrayContaining(['validate', 'safety', 'validate_append', 'safety_append']));
  });

  /** A ws-mode response with a tool call, then its continuation with the call's output: the continuation's id. */
  async function wsContinued() {
    const { server, sessions } = host([CALL, { text: 'thanks' }]);
    const c = MemoryClient.connect(sessions, 'ws', conn, log);
    const first = c.nextEvent('response.completed');
    c.send(create());
    const id = (await first).response.id;
    const second = c.nextEvent('response.completed');
    c.send(create({ previous_response_id: id, input: output('call_1') }));
    return { server, c, next: (await second).response.id };
  }

  it('ws: the continuation from the connection’s last response is checked incrementally', async () => {
    const { server, next } = await wsContinued();
    const rec = server.services.records.get(next)!;
    expect(rec.counters).toMatchObject({ validate_incremental: 1, safety_incremental: 1, rendered_cache_hits: 1, route_reused: 1 });
    expect(rec.counters['validate_full'] ?? 0).toBe(0);
  });

  it('ws: a continuation carrying the cached response’s tools does not check them again; other tools are checked', async () => {
    const { server, c, next } = await wsContinued();
    // Its new input only (the function_call_output): the tool was checked with the response it continues.
    expect(server.services.records.get(next)!.counters['items_validated']).toBe(1);
    // Tools that are not the cached response's are checked: parameters whose type is not "object" are refused.
    const refused = c.nextEvent('error');
    c.send(create({ previous_response_id: next, tools: [{ ...tool, parameters: { type: 'string' } }] }));
    expect((await refused).error).toMatchObject({ code: 'invalid_function_parameters', param: 'tools[0].parameters' });
  });

  it('a frame that is not JSON is an error event and the session goes on', async () => {
    const { sessions } = host([{ text: 'hi' }]);
    const c = MemoryClient.connect(sessions, 'ws', conn, log);
    c.send('{not json');
    const done = c.nextEvent('response.completed');
    c.send(create());
    await done;
    expect(kinds(c)[0]).toBe('error');
  });

  it('the set tracks each session until it has wound down; after shutdown nothing opens', async () => {
    const { sessions } = host([CALL]);
    const c = MemoryClient.connect(sessions, 'long-lived', conn, log);
    const paused = c.nextEvent('response.done');
    c.send(create());
    await paused;
    expect(sessions.size).toBe(1);
    await sessions.shutdown();
    expect(kinds(c).at(-1)).toBe('response.incomplete');
    await sessions.idle();
    expect(sessions.size).toBe(0);
    expect(() => MemoryClient.connect(sessions, 'ws', conn, log)).toThrow(expect.objectContaining({ code: 'server_shutting_down' }));
  });
});

describe('one-shot sessions (an HTTP request) over the in-memory pair', () => {
  it('http: the stream starts, the run ends at the tool call, the final Response is the answer', async () => {
    const { server, sessions } = host([CALL]);
    const c = MemoryClient.connect(sessions, 'http', request, log, { oneShot: true });
    const answered = c.next(isAnswer);
    c.send(create({ stream: true }));
    const answer = await answered;
    expect(answer).toMatchObject({ kind: 'answer', response: { status: 'completed' } });
    expect(kinds(c)[0]).toBe('started');
    expect(kinds(c).at(-2)).toBe('response.completed');
    if (answer.kind !== 'answer') throw new Error('not answered');
    const rec = server.services.records.get(answer.response.id)!;
    expect(rec).toMatchObject({ protocol: 'http', connection: null });
    // The request's auth check is charged to its response, as a WebSocket's upgrade is.
    expect(rec.counters['auth_checks']).toBe(1);
    expect(rec.spans.some((s) => s.stage === 'auth')).toBe(true);
    await c.close();
    await sessions.idle();
  });

  it('http: a refused create is a refusal, never a started stream or an error event', async () => {
    const { sessions } = host([]);
    const c = MemoryClient.connect(sessions, 'http', request, log, { oneShot: true });
    const answered = c.next(isAnswer);
    c.send(create({ previous_response_id: 'resp_missing' }));
    expect(await answered).toMatchObject({ kind: 'refused', error: { code: 'previous_response_not_found', status: 400 } });
    expect(kinds(c)).toEqual(['refused']);
  });

  it('http: shutdown while the create is planned refuses it with server_shutting_down, and the run never starts', async () => {
    const gate = gatedPlanning();
    const { server, sessions } = host([{ text: 'never' }], gate.opts);
    const c = MemoryClient.connect(sessions, 'http', request, log, { oneShot: true });
    c.send(create());
    await gate.inPlan;
    const shutdown = sessions.shutdown();
    gate.release();
    await shutdown;
    expect(c.received).toEqual([{ kind: 'refused', error: expect.objectContaining({ code: 'server_shutting_down', status: 503 }) }]);
    expect(server.services.records.list()).toEqual([]);
    expect(sessions.size).toBe(0);
  });

  it('long-lived-http: pauses on the stream; an append by id resumes it; another key cannot see it', async () => {
    const { host: h, sessions } = host([CALL, { text: 'thanks' }]);
    const c = MemoryClient.connect(sessions, 'long-lived-http', { ...request, owner: 'alice' }, log, { oneShot: true });
    const paused = c.nextEvent('response.done');
    c.send(create({ stream: true }));
    const id = (await paused).response.id;
    expect(h.live.size).toBe(1);
    await expect(h.live.append(id, 'mallory', output('call_1'))).rejects.toMatchObject({ code: 'response_not_found' });
    await expect(h.live.append(id, 'alice', output('call_nope'))).rejects.toMatchObject({ code: 'unknown_call_id' });
    const answered = c.next(isAnswer);
    await h.live.append(id, 'alice', output('call_1'));
    expect(await answered).toMatchObject({ kind: 'answer', response: { id, status: 'completed' } });
    expect(h.live.size).toBe(0);
  });

  it('long-lived-http: cancel by id ends the run cancelled; the create must stream; the cap counts open runs', async () => {
    const { host: h, sessions } = host([CALL], { limits: { maxLiveHttpRuns: 1 } });
    const unstreamed = MemoryClient.connect(sessions, 'long-lived-http', request, log, { oneShot: true });
    const refused = unstreamed.next(isAnswer);
    unstreamed.send(create());
    expect(await refused).toMatchObject({ kind: 'refused', error: { code: 'invalid_value', param: 'stream' } });

    const c = MemoryClient.connect(sessions, 'long-lived-http', request, log, { oneShot: true });
    const paused = c.nextEvent('response.done');
    c.send(create({ stream: true }));
    const id = (await paused).response.id;
    const over = MemoryClient.connect(sessions, 'long-lived-http', request, log, { oneShot: true });
    const full = over.next(isAnswer);
    over.send(create({ stream: true }));
    expect(await full).toMatchObject({ kind: 'refused', error: { code: 'too_many_live_runs', status: 429 } });

    const answered = c.next(isAnswer);
    expect(await h.live.cancel(id, null)).toMatchObject({ id, status: 'cancelled' });
    expect(await answered).toMatchObject({ kind: 'answer', response: { status: 'cancelled' } });
  });

  it('a peer gone mid-run: the run ends cancelled as a disconnect, nothing more is sent', async () => {
    const { server, sessions } = host([CALL]);
    const c = MemoryClient.connect(sessions, 'long-lived-http', request, log, { oneShot: true });
    const paused = c.nextEvent('response.done');
    c.send(create({ stream: true }));
    const id = (await paused).response.id;
    const before = c.received.length;
    await c.close();
    expect(server.services.records.get(id)?.status).toBe('cancelled');
    // The run was detached: no more events; the transport is only told the final state (HTTP has nothing left to write to).
    expect(c.received.length).toBe(before + 1);
    expect(c.received.at(-1)?.kind).toBe('answer');
  });
});
