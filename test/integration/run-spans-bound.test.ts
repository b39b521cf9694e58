/**
 * A long-lived run's timeline is bounded (`--max-run-spans`). Found by an
 * outside attack: every append to a paused run records a `parse_append` span
 * whatever its outcome, and an accepted append that holds nothing new (outputs
 * already answered) records its check spans too, so a client that sent
 * refused or empty appends to a paused run grew its timeline without bound:
 * 300,000 appends of one unknown call id (21 s) made a 19.6 MB `llr:timing`
 * event and run record, serialised in one turn, from a run that kept nothing.
 * Past the bound a span is added to its stage's total and counted in
 * `spans_dropped`, not listed.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const out = (call_id: string) => ({ type: 'function_call_output', call_id, output: 'ok' });

describe('a long-lived run keeps at most --max-run-spans spans', () => {
  it('hundreds of refused and empty appends to a paused run do not grow its timeline past the bound; totals stay whole', async () => {
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
      { text: 'all done' },
    ]);
    const { url, server } = await testServer({ policy, limits: { maxRunSpans: 40 } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], llr: { timing: true } });
    const done = await s.next('response.done');
    // A partial append: call_a answered, the run stays paused for call_b.
    s.send({ type: 'response.append', input: [out('call_a')] });
    const refused = 150;
    const empty = 150;
    // In rounds of 50, below the queue of appends waiting behind the one being processed (64).
    for (let i = 0; i < refused + empty; i += 50) {
      for (let j = i; j < i + 50; j++) s.send({ type: 'response.append', input: [out(j < refused ? 'call_nope' : 'call_a')] });
      // An unknown event's error marks the end of the round: frames are handled in order, appends one at a time.
      s.send({ type: 'no.such.event' });
      const round = i / 50 + 1;
      while (s.all('error').filter((e) => e.error.code === 'unknown_event_type').length < round) await s.next('error', { skipErrors: true });
    }
    const codes = s.all('error').map((e) => e.error.code);
    expect(codes.filter((c) => c === 'unknown_call_id')).toHaveLength(refused);
    expect(codes.filter((c) => c !== 'unknown_call_id' && c !== 'unknown_event_type')).toEqual([]);
    s.send({ type: 'response.append', input: [out('call_b')] });
    const end = await s.next('response.completed', { skipErrors: true });
    expect(end.response.id).toBe(done.response.id);
    const timing = await s.next('llr:timing', { skipErrors: true });
    expect(timing.spans.length).toBeLessThanOrEqual(40);
    // Every append's parse was counted in its stage's total, listed or not.
    expect(timing.totals).toHaveProperty('parse_append');
    // The outputs for call_a sent again are duplicates (test/integration/append-retry.test.ts): parsed and timed, not appended.
    expect(timing.counters['appends']).toBe(2);
    expect(timing.counters['duplicate_appends']).toBe(empty);
    // Each refused append was checked (at least one span each, past the bound: dropped); a duplicate is not.
    expect(timing.counters['spans_dropped']).toBeGreaterThanOrEqual(refused);
    await server.services.postWork.flush();
    const rec = server.services.records.get(done.response.id);
    expect(rec?.spans.length).toBeLessThanOrEqual(40);
    expect(rec?.totals).toHaveProperty('log');
    s.dispose();
  });
});
