/**
 * Parsing a client's request (the JSON of its frame or body, and the event's
 * shape) is API work the server times: the response a create starts gets a
 * `parse` span, and every append a `parse_append` span, on every transport
 * (WebSocket both protocols, HTTP, long-lived over HTTP), for frames parsed
 * at once and for large ones parsed in slices. Each parse ends before the
 * checks of what it carried begin.
 */
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { scriptPolicy } from '../../src/model/policies.js';
import type { TimingSpan } from '../../src/protocol/events.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { SseStream, postJson } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const out = (call_id: string, output = 'ok') => ({ type: 'function_call_output', call_id, output });
const twoSteps = () =>
  scriptPolicy([
    { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] },
    { calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
    { text: 'all done' },
  ]);

const named = (rec: RunRecord, stage: string): TimingSpan[] => rec.spans.filter((s) => s.stage === stage);
const end = (s: TimingSpan) => s.start_ms + s.duration_ms;
/** Spans are rounded to µs: one that ends "before" another may share its last digit. */
const EPS = 0.002;

async function record(server: Awaited<ReturnType<typeof testServer>>['server'], id: string): Promise<RunRecord> {
  await server.services.postWork.flush();
  return server.services.records.get(id)!;
}

/** A run's parse spans: one `parse` that ends before `validate`, and one `parse_append` per append, each before its `validate_append`. */
function expectParses(rec: RunRecord, appends: number): void {
  const [parse, ...more] = named(rec, 'parse');
  expect(more).toEqual([]);
  expect(parse!.duration_ms).toBeGreaterThanOrEqual(0);
  expect(end(parse!)).toBeLessThanOrEqual(named(rec, 'validate')[0]!.start_ms + EPS);
  const appended = named(rec, 'parse_append');
  const checked = named(rec, 'validate_append');
  expect(appended).toHaveLength(appends);
  expect(checked).toHaveLength(appends);
  appended.forEach((p, i) => {
    expect(p.duration_ms).toBeGreaterThanOrEqual(0);
    expect(end(p)).toBeLessThanOrEqual(checked[i]!.start_ms + EPS);
  });
  expect(rec.totals['parse']).toBe(parse!.duration_ms);
}

describe('parse spans', () => {
  it('long-lived over WebSocket: the create and each append, a large append parsed in slices included', async () => {
    const { url, server } = await testServer({ policy: twoSteps(), demo: false });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], store: false });
    await s.next('response.done');
    s.send({ type: 'response.append', input: [out('call_a')] });
    await s.next('response.done');
    // Over 1 MiB: parsed cooperatively (transport/json-in.ts), still charged to the run.
    s.send({ type: 'response.append', input: [out('call_b', 'lorem ipsum '.repeat(100_000))] });
    const done = await s.next('response.completed');
    const rec = await record(server, done.response.id);
    expectParses(rec, 2);
    // The large one took the longer parse.
    const [small, large] = named(rec, 'parse_append');
    expect(large!.duration_ms).toBeGreaterThan(small!.duration_ms);
  });

  it('ws mode: each create, a continuation on previous_response_id included', async () => {
    const { url, server } = await testServer({ policy: twoSteps(), demo: false });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], store: false });
    const first = await s.next('response.completed');
    s.send({ type: 'response.create', model: 'sim-model', previous_response_id: first.response.id, input: [out('call_a')], tools: [tool], store: false });
    const second = await s.next('response.completed');
    for (const id of [first.response.id, second.response.id]) expectParses(await record(server, id), 0);
  });

  it('HTTP: a create; long-lived over HTTP: the create and each append', async () => {
    const { url, server } = await testServer({ policy: twoSteps(), demo: false });
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: 'go', tools: [tool], store: false }),
    });
    const body = (await res.json()) as { id: string };
    expectParses(await record(server, body.id), 0);

    const { url: url2, server: server2 } = await testServer({ policy: twoSteps(), demo: false });
    const s = await SseStream.open(url2, { model: 'sim-model', input: 'go', tools: [tool] });
    const id = (await s.next('response.done')).response.id;
    expect(await postJson(`${url2}/v1/responses/${id}/append`, { input: [out('call_a')] })).toEqual({ status: 202, json: {} });
    await s.next('response.done');
    expect(await postJson(`${url2}/v1/responses/${id}/append`, { input: [out('call_b')] })).toEqual({ status: 202, json: {} });
    await s.next('response.completed');
    expectParses(await record(server2, id), 2);
  });
});
