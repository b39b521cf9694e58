/**
 * A live run's timeline (its spans) is counted in the server-wide byte budget
 * (`--max-server-bytes`) and given back when the run ends, exactly once,
 * however it ends. Before, it was bounded per run (`--max-run-spans`, 100,000
 * spans, ~3 MB of heap) but counted nowhere: every append to a paused run
 * records a span whatever its outcome (refused ones are refunded their frame),
 * so paused runs each grown to the bound held ~3 MB apiece with `bytes_held`
 * unchanged, gigabytes over `--max-connections`. Past the budget a span is not
 * listed (its stage's total and `spans_dropped` keep it), as past
 * `--max-run-spans`. Real sockets.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { SPAN_CHUNK, SPAN_HELD_BYTES } from '../../src/pipeline/metrics.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const KiB = 1024;
const held = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;
const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const out = (call_id: string) => ({ type: 'response.append', input: [{ type: 'function_call_output', call_id, output: 'ok' }] });
const pauseTwice = () =>
  scriptPolicy([
    { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] },
    { calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
    { text: 'done' },
  ]);

/** `n` appends naming an unknown call id (each refused, each a `parse_append` span), in rounds below the append queue (64). */
async function refusedAppends(s: RawSocket, n: number): Promise<void> {
  const marks = () => s.all('error').filter((e) => e.error.code === 'unknown_event_type').length;
  const start = marks();
  for (let i = 0; i < n; i += 50) {
    for (let j = i; j < Math.min(n, i + 50); j++) s.send(out('call_nope'));
    // Frames are handled in order and appends one at a time: this error marks the round's end.
    s.send({ type: 'no.such.event' });
    while (marks() < start + i / 50 + 1) await s.next('error', { skipErrors: true });
  }
}

describe("a live run's spans are charged to --max-server-bytes", () => {
  it('a paused run grown by refused appends holds its spans in bytes_held, released once when it completes', async () => {
    const { server, url } = await testServer({ policy: pauseTwice(), limits: { maxServerBytes: 4096 * KiB } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], llr: { timing: true } });
    await s.next('response.done');
    const before = server.bytes.held;
    await refusedAppends(s, 2000);
    // 2,000 more spans, each charged (in chunks): the paused run holds them.
    expect(server.bytes.held - before).toBeGreaterThanOrEqual((2000 - SPAN_CHUNK) * SPAN_HELD_BYTES);
    expect(server.bytes.held - before).toBeLessThanOrEqual((2000 + SPAN_CHUNK) * SPAN_HELD_BYTES);
    s.send(out('call_a'));
    await s.next('response.done', { skipErrors: true });
    s.send(out('call_b'));
    await s.next('response.completed', { skipErrors: true });
    const timing = await s.next('llr:timing', { skipErrors: true });
    expect(timing.counters['spans_dropped']).toBe(0);
    // Released at the run's end, the connection still open (its post-inference spans are not charged again).
    await server.services.postWork.flush();
    expect(await held(url)).toBe(0);
    s.dispose();
  });

  it('past the budget spans are no longer listed (totals stay whole) and the budget is not passed', async () => {
    const budget = 48 * KiB;
    const { server, url } = await testServer({ policy: pauseTwice(), limits: { maxServerBytes: budget } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], llr: { timing: true } });
    await s.next('response.done');
    await refusedAppends(s, 3000);
    expect(server.bytes.peak).toBeLessThanOrEqual(budget);
    s.send(out('call_a'));
    await s.next('response.done', { skipErrors: true });
    s.send(out('call_b'));
    await s.next('response.completed', { skipErrors: true });
    const timing = await s.next('llr:timing', { skipErrors: true });
    expect(timing.counters['spans_dropped']).toBeGreaterThan(0);
    expect(timing.spans.length).toBeLessThan(3000);
    expect(timing.totals).toHaveProperty('parse_append');
    expect(await held(url)).toBe(0);
    s.dispose();
  });

  it('released when the paused run ends by a cancel, by its client going away, or by a pause timeout', async () => {
    const { server, url } = await testServer({ policy: pauseTwice(), limits: { maxServerBytes: 4096 * KiB } });
    // Cancelled.
    const a = await RawSocket.longLived(url);
    a.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool] });
    await a.next('response.done');
    await refusedAppends(a, 500);
    expect(server.bytes.held).toBeGreaterThanOrEqual((500 - SPAN_CHUNK) * SPAN_HELD_BYTES);
    a.send({ type: 'response.cancel' });
    await a.next('response.cancelled', { skipErrors: true });
    expect(await held(url)).toBe(0);
    a.dispose();
    // Gone: the socket dropped while the run is paused.
    const b = await RawSocket.longLived(url);
    b.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool] });
    await b.next('response.done');
    await refusedAppends(b, 500);
    expect(server.bytes.held).toBeGreaterThanOrEqual((500 - SPAN_CHUNK) * SPAN_HELD_BYTES);
    b.dispose();
    await server.ws.idle();
    expect(server.bytes.held).toBe(0);
  });

  it('a create refused while it is planned (its spans charged, then a throw) gives them back', async () => {
    const { url } = await testServer({ policy: pauseTwice(), limits: { maxServerBytes: 4096 * KiB } });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], previous_response_id: 'resp_nope' });
    expect(await s.next('error', { skipErrors: true })).toMatchObject({ error: { code: 'previous_response_not_found' } });
    expect(await held(url)).toBe(0);
    s.dispose();
  });

  it('a pause timeout releases them too', async () => {
    const { url } = await testServer({ policy: pauseTwice(), limits: { maxServerBytes: 4096 * KiB, pauseTimeoutMs: 0 } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool] });
    await s.next('response.incomplete', { skipErrors: true });
    expect(await held(url)).toBe(0);
    s.dispose();
  });
});
