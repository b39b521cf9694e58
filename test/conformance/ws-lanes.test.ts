/**
 * WebSocket lanes (OpenAI's spec, 2026-08: `stream_id` on a
 * `response.create`): every event of the response, its errors included,
 * echoes the create's `stream_id`; a create without one gets events without
 * it. Creates on one connection are served in order (FIFO within a lane, as
 * the spec asks, and across lanes too: one response at a time). A bad
 * `stream_id` is refused naming it. Real sockets on port 0; every wait is on
 * an event.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import type { ServerEvent } from '../../src/protocol/events.js';
import type { Clock } from '../../src/model/clock.js';
import { realClock } from '../../src/model/clock.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { DEFAULT_LIMITS } from '../../src/engine/services.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const shellTool = {
  type: 'function',
  name: 'exec_command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
};

const laneOf = (e: ServerEvent) => (e as { stream_id?: unknown }).stream_id;

/** Whether `events` are numbered 0, 1, 2 … with no gap or repeat. */
const gapless = (events: ServerEvent[]) => events.every((e, i) => e.sequence_number === i);

/**
 * The second create's planning held at its routing hop (777 ms, on a clock that waits for `release` instead):
 * `inPlan` resolves once it is there. The first create plans at once.
 */
function holdSecondPlan() {
  let entered!: () => void;
  const inPlan = new Promise<void>((r) => (entered = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let hops = 0;
  const clock: Clock = { ...realClock, sleep: (ms, signal) => (ms === 777 && ++hops === 2 ? (entered(), gate) : realClock.sleep(ms === 777 ? 0 : ms, signal)) };
  return { opts: { clock, hopLatencyMs: 777, hops: 1 }, inPlan, release };
}

/** The events of the response `id` (those that carry it, and the item events between its created and its end). */
function eventsOf(events: ServerEvent[], id: string): ServerEvent[] {
  const start = events.findIndex((e) => e.type === 'response.created' && e.response.id === id);
  const end = events.findIndex((e, i) => i > start && 'response' in e && e.response.id === id && /completed|failed|incomplete|cancelled/.test(e.type));
  return events.slice(start, end + 1);
}

describe('WebSocket lanes: stream_id is echoed on every event of its response', () => {
  it('WebSocket mode: a lane response streams text deltas with its stream_id on each; a create without one after it has none', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'Tell me a long story about lanes.', store: false, stream_id: 'lane.A-1' });
    const first = await s.next('response.completed');
    s.send({ type: 'response.create', model: 'sim-model', input: 'And another.', store: false });
    const second = await s.next('response.completed');
    const a = eventsOf(s.events, first.response.id);
    expect(a.filter((e) => e.type === 'response.output_text.delta').length).toBeGreaterThan(3);
    expect(a.map(laneOf)).toEqual(a.map(() => 'lane.A-1'));
    const b = eventsOf(s.events, second.response.id);
    expect(b.length).toBeGreaterThan(5);
    expect(b.filter((e) => 'stream_id' in e)).toEqual([]);
    s.dispose();
  });

  it('long-lived: a paused run keeps its lane through the pause, the inject acknowledgement and the end; a create queued behind it runs in its own lane, and one refused at the queue carries its own', async () => {
    const { url } = await testServer({ limits: { maxQueuedCreates: 1 } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'Please run:\n$ echo one', tools: [shellTool], store: false, stream_id: 'a' });
    const paused = await s.next('response.done');
    expect(laneOf(paused)).toBe('a');
    s.send({ type: 'response.create', model: 'sim-model', input: 'hello', store: false, stream_id: 'b' });
    s.send({ type: 'response.create', model: 'sim-model', input: 'hello again', store: false, stream_id: 'c' });
    const refused = await s.next('error');
    expect(refused).toMatchObject({ error: { code: 'queue_full' }, stream_id: 'c' });
    const call = paused.response.output.find((i) => i.type === 'function_call') as { call_id: string };
    s.send({ type: 'response.inject', response_id: paused.response.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'one' }] });
    const ack = await s.next('response.inject.created');
    expect(laneOf(ack)).toBe('a');
    const endA = await s.next('response.completed');
    expect(endA.response.id).toBe(paused.response.id);
    const endB = await s.next('response.completed');
    // Apart from the refusal sent while run a was paused, every event of a is in lane a, every event of b in lane b.
    const a = eventsOf(s.events, endA.response.id).filter((e) => e !== refused);
    expect(a.map(laneOf)).toEqual(a.map(() => 'a'));
    const b = eventsOf(s.events, endB.response.id);
    expect(b.length).toBeGreaterThan(5);
    expect(b.map(laneOf)).toEqual(b.map(() => 'b'));
    expect(s.events.indexOf(endA)).toBeLessThan(s.events.indexOf(b[0]!));
    // The refusal is lane c's, numbered by the connection: lane a's numbers have no gap where it went out.
    expect(gapless(a)).toBe(true);
    s.dispose();
  });

  it("a create refused as it is parsed (a bad field) gets its error in its own lane, numbered by the connection, even while another lane's run is paused", async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 5, store: false, stream_id: 'bad.1' });
    expect(await s.next('error', { skipErrors: true })).toMatchObject({ error: { code: 'invalid_type', param: 'input' }, stream_id: 'bad.1' });
    s.send({ type: 'response.create', model: 'sim-model', input: 'Please run:\n$ echo one', tools: [shellTool], store: false, stream_id: 'a' });
    const paused = await s.next('response.done');
    s.send({ type: 'response.create', model: 'sim-model', input: 'x', temperature: 'hot', store: false, stream_id: 'b' });
    const refused = await s.next('error', { skipErrors: true });
    expect(refused).toMatchObject({ error: { code: 'invalid_type', param: 'temperature' }, stream_id: 'b' });
    const call = paused.response.output.find((i) => i.type === 'function_call') as { call_id: string };
    s.send({ type: 'response.inject', response_id: paused.response.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'one' }] });
    const end = await s.next('response.completed');
    const a = eventsOf(s.events, end.response.id).filter((e) => e !== refused);
    expect(a.map(laneOf)).toEqual(a.map(() => 'a'));
    expect(gapless(a)).toBe(true);
    s.dispose();
  });

  it("a create refused for its stream_id goes with no lane, as a create without one: not in the stream of another lane's run in flight", async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'Please run:\n$ echo one', tools: [shellTool], store: false, stream_id: 'a' });
    const paused = await s.next('response.done');
    s.send({ type: 'response.create', model: 'sim-model', input: 'x', store: false, stream_id: 'bad id!' });
    const badValue = await s.next('error', { skipErrors: true });
    s.send({ type: 'response.create', model: 'sim-model', input: 'x', store: false, stream_id: 42 });
    const badType = await s.next('error', { skipErrors: true });
    s.send({ type: 'response.create', model: 'sim-model', input: 'x', temperature: 'hot', store: false });
    const noLane = await s.next('error', { skipErrors: true });
    expect(badValue).toMatchObject({ error: { code: 'invalid_value', param: 'stream_id' } });
    expect(badType).toMatchObject({ error: { code: 'invalid_type', param: 'stream_id' } });
    expect(noLane).toMatchObject({ error: { code: 'invalid_type', param: 'temperature' } });
    // All three in the connection's own numbering, none in lane a (whose client would take them as its run's errors).
    for (const e of [badValue, badType, noLane]) expect('stream_id' in e).toBe(false);
    expect([badValue, badType, noLane].map((e) => e.sequence_number)).toEqual([0, 1, 2]);
    const call = paused.response.output.find((i) => i.type === 'function_call') as { call_id: string };
    s.send({ type: 'response.inject', response_id: paused.response.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'one' }] });
    const end = await s.next('response.completed');
    const refusals: ServerEvent[] = [badValue, badType, noLane];
    const a = eventsOf(s.events, end.response.id).filter((e) => !refusals.includes(e));
    expect(a.map(laneOf)).toEqual(a.map(() => 'a'));
    expect(gapless(a)).toBe(true);
    s.dispose();
  });

  it("a create refused server_busy (--max-server-bytes) goes in its own lane, not in the stream of another lane's run in flight", async () => {
    const { url } = await testServer({ limits: { maxServerBytes: 20_000 } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'Please run:\n$ echo one', tools: [shellTool], store: false, stream_id: 'a' });
    const paused = await s.next('response.done');
    s.send({ type: 'response.create', model: 'sim-model', input: 'x'.repeat(30_000), store: false, stream_id: 'b' });
    const busyB = await s.next('error', { skipErrors: true });
    s.send({ type: 'response.create', model: 'sim-model', input: 'x'.repeat(30_000), store: false });
    const busyNone = await s.next('error', { skipErrors: true });
    expect(busyB).toMatchObject({ error: { code: 'server_busy' }, stream_id: 'b' });
    expect(busyNone).toMatchObject({ error: { code: 'server_busy' } });
    expect('stream_id' in busyNone).toBe(false);
    const call = paused.response.output.find((i) => i.type === 'function_call') as { call_id: string };
    s.send({ type: 'response.inject', response_id: paused.response.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'one' }] });
    const end = await s.next('response.completed');
    const refusals: ServerEvent[] = [busyB, busyNone];
    const a = eventsOf(s.events, end.response.id).filter((e) => !refusals.includes(e));
    expect(a.map(laneOf)).toEqual(a.map(() => 'a'));
    expect(gapless(a)).toBe(true);
    s.dispose();
  });

  it("while a lane's create is being planned, answers to other client events are not sent in its lane; an inject naming the lane's last ended response is answered in that response's lane", async () => {
    const held = holdSecondPlan();
    const { url } = await testServer(held.opts);
    const s = await RawSocket.longLived(url);
    // However the test ends, planning is let go (the server's close waits for it).
    onTestFinished(held.release);
    s.send({ type: 'response.create', model: 'sim-model', input: 'hello', store: false, stream_id: 'a' });
    const endA = await s.next('response.completed');
    s.send({ type: 'response.create', model: 'sim-model', input: 'hello', store: false, stream_id: 'b' });
    await held.inPlan;
    // A create without a model (refused as it is parsed, no lane), and an inject naming the ended response of lane a.
    s.send({ type: 'response.create', input: 'x', store: false });
    const refused = await s.next('error', { skipErrors: true });
    expect(refused).toMatchObject({ error: { code: 'missing_required_parameter', param: 'model' } });
    expect('stream_id' in refused).toBe(false);
    const note = [{ type: 'message', role: 'user', content: 'note' }];
    s.send({ type: 'response.inject', response_id: endA.response.id, input: note });
    expect(await s.next('response.inject.failed')).toMatchObject({ response_id: endA.response.id, error: { code: 'response_already_completed' }, stream_id: 'a' });
    s.send({ type: 'response.inject', response_id: 'resp_unknown', input: note });
    const unknown = await s.next('response.inject.failed');
    expect('stream_id' in unknown).toBe(false);
    held.release();
    const endB = await s.next('response.completed');
    const b = eventsOf(s.events, endB.response.id);
    expect(b.map(laneOf)).toEqual(b.map(() => 'b'));
    expect(gapless(b)).toBe(true);
    s.dispose();
  });

  it('a create refused before it runs (an unknown previous_response_id) gets its error in its lane', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'x', store: false, previous_response_id: 'resp_nope', stream_id: 'lane_9' });
    expect(await s.next('error')).toMatchObject({ error: { code: 'previous_response_not_found' }, stream_id: 'lane_9' });
    s.dispose();
  });

  it.each([
    ['empty', '', 'invalid_value'],
    ['a space', 'a b', 'invalid_value'],
    ['a quote', 'a"b', 'invalid_value'],
    ['257 characters', 'x'.repeat(257), 'invalid_value'],
    ['a number', 5, 'invalid_type'],
  ])('a stream_id that is %s is refused, naming it, and the socket stays usable', async (_what, value, code) => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'x', store: false, stream_id: value });
    const err = await s.next('error');
    expect(err).toMatchObject({ error: { code, param: 'stream_id' } });
    expect('stream_id' in err).toBe(false);
    s.send({ type: 'response.create', model: 'sim-model', input: 'x', store: false, stream_id: 'x'.repeat(256) });
    expect(laneOf(await s.next('response.completed'))).toBe('x'.repeat(256));
    s.dispose();
  });
});

describe('WebSocket lanes: a cache per lane', () => {
  // Outside attack: the API runs parallel conversations on one connection's lanes, with `store: false`; with one
  // cache entry per connection, two conversations interleaved on lanes `a` and `b` could not continue (each
  // response evicted the other lane's: previous_response_not_found).
  it('two store:false conversations interleaved on two lanes both continue from the cache; a fork onto a new lane leaves the source lane as it was', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'a1' }, { text: 'b1' }, { text: 'a2' }, { text: 'b2' }, { text: 'f1' }, { text: 'a3' }]) });
    const s = await RawSocket.connect(url);
    const turn = async (stream_id: string, input: string, previous_response_id?: string) => {
      s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id, input, ...(previous_response_id ? { previous_response_id } : {}) });
      return (await s.next('response.completed')).response;
    };
    const a1 = await turn('a', 'hello a');
    const b1 = await turn('b', 'hello b');
    const a2 = await turn('a', 'more a', a1.id);
    const b2 = await turn('b', 'more b', b1.id);
    for (const r of [a2, b2]) expect(server.services.records.get(r.id)!.counters).toMatchObject({ rendered_cache_hits: 1, store_hydrations: 0 });
    // A fork of lane a's conversation onto lane c: its own context, lane a's cache untouched.
    const f1 = await turn('c', 'more a again', a2.id);
    expect(server.services.records.get(f1.id)!.counters).toMatchObject({ rendered_cache_hits: 0, store_hydrations: 0 });
    const a3 = await turn('a', 'more a again', a2.id);
    expect(server.services.records.get(a3.id)!.counters).toMatchObject({ rendered_cache_hits: 1 });
    // Lane a's context was not extended by the fork: a3's prompt is the fork's (the same history, the same message).
    expect(a3.usage!.input_tokens).toBe(f1.usage!.input_tokens);
    expect(server.services.records.get(a3.id)!.counters['items_tokenized']).toBe(1);
  });

  it("the lanes' entries together are held to one context's budget: a new entry evicts the oldest other lane's", async () => {
    const { url } = await testServer({ limits: { maxContextBytes: 20_000 }, policy: scriptPolicy([{ text: 'a1' }, { text: 'b1' }, { text: 'b2' }, { text: 'c1' }]) });
    const s = await RawSocket.connect(url);
    const send = (stream_id: string, input: string, previous_response_id?: string) =>
      s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id, input, ...(previous_response_id ? { previous_response_id } : {}) });
    send('a', 'x'.repeat(8_000));
    const a1 = (await s.next('response.completed')).response;
    send('b', 'y'.repeat(8_000));
    const b1 = (await s.next('response.completed')).response;
    // Both fit (16 KB): b continues; its context grows past what lets a's stay.
    send('b', 'z'.repeat(6_000), b1.id);
    await s.next('response.completed');
    send('a', 'more', a1.id);
    expect((await s.next('error')).error.code).toBe('previous_response_not_found');
  });

  it.each([DEFAULT_LIMITS.maxCachedLanes, 3])('at most %i lanes are cached (--max-cached-lanes): a new lane past them evicts the oldest other lane\'s entry', async (lanes) => {
    const n = lanes + 1;
    const { url } = await testServer({ limits: { maxCachedLanes: lanes }, policy: scriptPolicy(Array.from({ length: n + 2 }, (_, i) => ({ text: `r${i}` }))) });
    const s = await RawSocket.connect(url);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: `lane-${i}`, input: 'hi' });
      ids.push((await s.next('response.completed')).response.id);
    }
    s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'lane-1', input: 'more', previous_response_id: ids[1] });
    expect((await s.next('response.completed')).response.status).toBe('completed');
    s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'lane-0', input: 'more', previous_response_id: ids[0] });
    expect((await s.next('error')).error.code).toBe('previous_response_not_found');
  });

  it("the budget counts each lane's header too: lanes created with large instructions evict each other", async () => {
    const { url } = await testServer({ limits: { maxContextBytes: 100_000 }, policy: scriptPolicy([{ text: 'a1' }, { text: 'b1' }, { text: 'a2' }]) });
    const s = await RawSocket.connect(url);
    const instructions = 'i'.repeat(30_000);
    s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'a', instructions, input: 'hi' });
    const a1 = (await s.next('response.completed')).response;
    s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'b', instructions, input: 'hi' });
    await s.next('response.completed');
    // Each entry keeps its 30 KB instructions twice (the header and its key): two do not fit in 100 KB.
    s.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'a', instructions, input: 'more', previous_response_id: a1.id });
    expect((await s.next('error')).error.code).toBe('previous_response_not_found');
  });
});
