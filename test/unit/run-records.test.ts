/**
 * engine/records.ts: the ring of run records is bounded by count and by
 * estimated bytes (a record's spans grow with its run); the oldest go first,
 * never the record just put, and an update replaces a record's size instead
 * of adding to it.
 */
import { describe, expect, it } from 'vitest';
import { RunRecords, recordBytes, type RunRecord } from '../../src/engine/records.js';

function rec(id: string, spans: number): RunRecord {
  return {
    response_id: id,
    protocol: 'long-lived',
    connection: null,
    owner: null,
    status: 'completed',
    model: 'm',
    previous_response_id: null,
    usage: null,
    counters: {},
    totals: {},
    spans: Array.from({ length: spans }, (_, i) => ({ stage: 'prefill', start_ms: i, duration_ms: 0.01 })),
    started_at: 0,
    ended_at: 0,
    post_deferred: false,
    post_done: true,
  };
}

const ids = (r: RunRecords) => r.list().map((x) => x.response_id);

describe('run records', () => {
  it('estimate a record by its spans', () => {
    expect(recordBytes(rec('a', 1000)) - recordBytes(rec('b', 0))).toBe(1000 * 96);
    // A live record's spans are the run's (a getter): counted once the final record replaces it.
    const live = Object.defineProperty(rec('c', 0), 'spans', { get: () => rec('x', 500).spans });
    expect(recordBytes(live)).toBe(recordBytes(rec('d', 0)));
  });

  it('drop the oldest past the byte bound, keep the count bound, and keep the newest whatever its size', () => {
    const one = recordBytes(rec('x', 100));
    const r = new RunRecords(1000, 3 * one);
    for (const id of ['a', 'b', 'c', 'd', 'e']) r.upsert(rec(id, 100));
    expect(ids(r)).toEqual(['c', 'd', 'e']);
    expect(r.bytes).toBe(3 * one);
    // One record larger than the whole bound: it is kept alone.
    r.upsert(rec('huge', 10_000));
    expect(ids(r)).toEqual(['huge']);
    expect(r.bytes).toBe(recordBytes(rec('huge', 10_000)));
    const byCount = new RunRecords(2, Infinity);
    for (const id of ['a', 'b', 'c']) byCount.upsert(rec(id, 1));
    expect(ids(byCount)).toEqual(['b', 'c']);
  });

  it('an update replaces the size it was put with; a long run finishing keeps its place and the newer ones make room', () => {
    const small = recordBytes(rec('x', 10));
    const r = new RunRecords(1000, 4 * small);
    r.upsert(rec('long', 0));
    for (const id of ['b', 'c', 'd']) r.upsert(rec(id, 10));
    expect(ids(r)).toEqual(['long', 'b', 'c', 'd']);
    // Updated in place (same size): nothing else moves and the total is not counted twice.
    r.upsert(rec('b', 10));
    expect(ids(r)).toEqual(['long', 'b', 'c', 'd']);
    expect(r.bytes).toBe(recordBytes(rec('long', 0)) + 3 * small);
    // The long run ends with a record of two small ones' size: the oldest others go, it stays first.
    r.upsert(rec('long', 20 + Math.ceil(4096 / 96)));
    expect(ids(r)[0]).toBe('long');
    expect(r.bytes).toBeLessThanOrEqual(4 * small);
    expect(r.bytes).toBe(r.list().reduce((n, x) => n + recordBytes(x), 0));
  });

  it('a cursor whose record was dropped meanwhile still resumes after it, in either order', () => {
    const r = new RunRecords(1000, 6 * recordBytes(rec('x', 0)));
    for (const id of ['a', 'b', 'c', 'd', 'e']) r.upsert(rec(id, 0));
    const first = r.page({ owner: null, limit: 2, order: 'asc' });
    expect(first.data.map((x) => x.response_id)).toEqual(['a', 'b']);
    // One long run's record pushes out 'a' to 'c', the cursor among them.
    r.upsert(rec('long', 100));
    expect(ids(r)).toEqual(['d', 'e', 'long']);
    const next = r.page({ owner: null, limit: 2, order: 'asc', after: first.last_id });
    expect(next.data.map((x) => x.response_id)).toEqual(['d', 'e']);
    expect(next.has_more).toBe(true);
    expect(r.page({ owner: null, limit: 5, order: 'desc', after: 'c' }).data).toEqual([]);
    expect(r.page({ owner: null, limit: 5, order: 'desc', after: 'e' }).data.map((x) => x.response_id)).toEqual(['d']);
    // Another owner's dropped record, or an id never seen, is refused (400, param after), not an empty last page.
    expect(() => r.page({ owner: 'someone', limit: 5, order: 'asc', after: 'b' })).toThrow(expect.objectContaining({ code: 'invalid_value', param: 'after', status: 400 }));
    expect(() => r.page({ owner: null, limit: 5, order: 'asc', after: 'never' })).toThrow(expect.objectContaining({ code: 'invalid_value', param: 'after' }));
  });

  it('resumes after the last 10,000 dropped records, not after older ones, and after the latest drop of a record put again', () => {
    const r = new RunRecords(3);
    for (let i = 0; i < 12_003; i++) r.upsert(rec(`r${i}`, 0));
    expect(ids(r)).toEqual(['r12000', 'r12001', 'r12002']);
    // r0 … r11999 were dropped: the newest 10,000 of them (r2000 on) still resume.
    expect(r.page({ owner: null, limit: 5, order: 'asc', after: 'r2000' }).data.map((x) => x.response_id)).toEqual(['r12000', 'r12001', 'r12002']);
    expect(r.page({ owner: null, limit: 5, order: 'desc', after: 'r11999' }).data).toEqual([]);
    expect(() => r.page({ owner: null, limit: 5, order: 'asc', after: 'r1999' })).toThrow(expect.objectContaining({ code: 'invalid_value', param: 'after' }));
    // A dropped record put again (a long run's final record) is listed where it now stands, and resumes from there.
    r.upsert(rec('r5000', 0));
    expect(ids(r)).toEqual(['r12001', 'r12002', 'r5000']);
    expect(r.page({ owner: null, limit: 5, order: 'asc', after: 'r5000' }).data).toEqual([]);
    expect(r.page({ owner: null, limit: 5, order: 'desc', after: 'r5000' }).data.map((x) => x.response_id)).toEqual(['r12002', 'r12001']);
    // Dropped again, it resumes after its latest place.
    for (let i = 0; i < 3; i++) r.upsert(rec(`s${i}`, 0));
    expect(r.page({ owner: null, limit: 5, order: 'asc', after: 'r5000' }).data.map((x) => x.response_id)).toEqual(['s0', 's1', 's2']);
  });
});

