/**
 * Appends are async (large ones yield to the event loop) and serialised: an
 * append arriving while another is processed waits for it and is then
 * handled as if it had arrived after it. Each stays atomic.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import type { SimulatedModel } from '../../src/model/simulated.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const out = (call_id: string, output = 'ok') => ({ type: 'function_call_output', call_id, output });
const big = 'lorem ipsum dolor sit amet '.repeat(80_000); // ~2 MB: its append yields to the loop several times

async function paused() {
  const policy = scriptPolicy([
    { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
    { text: 'all done' },
  ]);
  const { url, server } = await testServer({ policy, recordRequests: 2, demo: false });
  const s = await RawSocket.longLived(url);
  s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], store: false });
  const done = await s.next('response.done');
  expect(done.response.pending_tool_calls).toEqual(['call_a', 'call_b']);
  return { s, server };
}

describe('queued appends', () => {
  // Found by an outside attack: a pause may wait for 128 calls (--max-pending-calls), but only 64 appends could
  // wait behind the one being processed, so a client answering each of 128 parallel calls in its own append, all
  // sent as its tools finished at once (one read of the socket), got queue_full for 63 of them and the run
  // stayed paused, waiting for outputs it had refused.
  it('every pending call answered in its own append, all sent at once: each applies, the run resumes once', async () => {
    const n = 128;
    const calls = Array.from({ length: n }, (_, i) => ({ name: 'lookup', arguments: { q: String(i) }, call_id: `call_${i}` }));
    const { url, server } = await testServer({ policy: scriptPolicy([{ calls }, { text: 'all done' }]), demo: false });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], store: false });
    const done = await s.next('response.done');
    expect(done.response.pending_tool_calls).toHaveLength(n);
    // Sent in one go: the frames arrive together and are handled in one turn, each append queued behind the first.
    for (const c of calls) s.send({ type: 'response.append', input: [out(c.call_id)] });
    const end = await s.next('response.completed');
    expect(s.events.filter((e) => e.type === 'error').map((e) => e.error.code)).toEqual([]);
    const counters = server.services.records.get(end.response.id)!.counters;
    expect(counters['appends']).toBe(n);
    expect(counters['pauses']).toBe(1);
  });

  it('two appends sent back to back, each answering one call: both apply in order and the run resumes once', async () => {
    const { s, server } = await paused();
    s.send({ type: 'response.append', input: [out('call_a', big)] });
    s.send({ type: 'response.append', input: [out('call_b')] });
    const end = await s.next('response.completed');
    expect(s.events.filter((e) => e.type === 'error')).toEqual([]);
    const counters = server.services.records.get(end.response.id)!.counters;
    expect(counters['appends']).toBe(2);
    expect(counters['pauses']).toBe(1);
    expect(counters['model_calls']).toBe(2);
    expect(end.response.usage!.input_tokens).toBeGreaterThan(400_000);
    // In arrival order, although the second (small) append finished its checks long before the first.
    const resumed = (server.services.model as SimulatedModel).calls.at(-1)!;
    const outputs = resumed.items.filter((i) => i.type === 'function_call_output').map((i) => (i as { call_id: string }).call_id);
    expect(outputs).toEqual(['call_a', 'call_b']);
  });

  it('an append queued behind the one that resumed the run is refused as no_paused_response; nothing of it applies', async () => {
    const { s, server } = await paused();
    s.send({ type: 'response.append', input: [out('call_a', big), out('call_b')] });
    s.send({ type: 'response.append', input: [{ type: 'message', role: 'user', content: 'late' }] });
    const err = await s.next('error');
    expect(err.error.code).toBe('no_paused_response');
    const end = await s.next('response.completed');
    const rec = server.services.records.get(end.response.id)!;
    expect(rec.counters['appends']).toBe(1);
  });
});
