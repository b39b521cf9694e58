/**
 * What the server keeps per request is bounded: the billing ledger keeps
 * per-owner totals and a ring of recent entries; the prefix cache is
 * partitioned per owner (API key) unless shared on purpose.
 */
import { describe, expect, it } from 'vitest';
import { Ledger } from '../../src/pipeline/post.js';
import { PrefixCache } from '../../src/model/prefix-cache.js';
import type { Response } from '../../src/protocol/objects.js';
import { makeUsage } from '../../src/protocol/objects.js';
import { runSync } from '../../src/cooperative.js';
import { TokenBuffer } from '../../src/pipeline/tokens.js';
import { copyJson } from '../../src/store/memory.js';

const response = (id: string, input = 100, cached = 0, output = 10): Response =>
  ({ id, model: 'sim-model', usage: makeUsage(input, cached, output) }) as unknown as Response;

describe('Ledger', () => {
  it('keeps a bounded ring of entries and exact per-owner totals', () => {
    const ledger = new Ledger(100);
    for (let i = 0; i < 1000; i++) ledger.record(response(`resp_${i}`), i % 2 === 0 ? 'alice' : 'bob');
    expect(ledger.entries).toHaveLength(100);
    expect(ledger.entries[0]!.response_id).toBe('resp_900');
    expect(ledger.entries.at(-1)!.response_id).toBe('resp_999');
    expect(ledger.recorded).toBe(1000);
    expect(ledger.totals('alice')).toMatchObject({ responses: 500, input_tokens: 50_000, output_tokens: 5000 });
    expect(ledger.totals('bob')?.responses).toBe(500);
    // Exactly-once bookkeeping follows the ring: recent ids counted, evicted ones forgotten.
    expect(ledger.countFor('resp_999')).toBe(1);
    expect(ledger.countFor('resp_5')).toBe(0);
    expect(ledger.duplicates).toBe(0);
  });

  it('counts a second entry for the same response as a duplicate', () => {
    const ledger = new Ledger(10);
    ledger.record(response('r'), null);
    ledger.record(response('r'), null);
    expect(ledger.countFor('r')).toBe(2);
    expect(ledger.duplicates).toBe(1);
  });
});

describe('PrefixCache partitions', () => {
  const prompt = Array.from({ length: 640 }, (_, i) => i * 7);

  it('a prompt cached under one owner is a miss under another', () => {
    const cache = new PrefixCache();
    cache.insert(prompt, 'alice');
    expect(cache.lookup(prompt, 'alice')).toBe(640);
    expect(cache.lookup(prompt, 'bob')).toBe(0);
    expect(cache.lookup(prompt, null)).toBe(0);
  });

  it('stays within its block capacity across partitions', () => {
    const cache = new PrefixCache(50);
    for (let owner = 0; owner < 20; owner++) cache.insert(prompt, `owner${owner}`);
    expect(cache.size).toBeLessThanOrEqual(50);
    expect(cache.lookup(prompt, 'owner19')).toBe(640);
  });
});

describe('cooperative forms of the prompt structures', () => {
  it('PrefixCache keysWork + lookupKeys/insertKeys give what lookup/insert give', () => {
    const a = new PrefixCache();
    const b = new PrefixCache();
    const prompt = Array.from({ length: 200_000 }, (_, i) => (i * 31) % 5000);
    const longer = [...prompt, ...Array.from({ length: 1000 }, (_, i) => i)];
    a.insert(prompt, 'k');
    b.insertKeys(runSync(b.keysWork(prompt, 'k')));
    expect(b.size).toBe(a.size);
    expect(b.lookupKeys(runSync(b.keysWork(longer, 'k')))).toBe(a.lookup(longer, 'k'));
    expect(b.lookupKeys(runSync(b.keysWork(longer, 'other')))).toBe(0);
  });

  it('TokenBuffer.reserveWork keeps the content and earlier views, and makes room', () => {
    const buf = new TokenBuffer([1, 2, 3], 4);
    const before = buf.view();
    runSync(buf.reserveWork(1_000_000));
    expect(Array.from(buf.view())).toEqual([1, 2, 3]);
    buf.pushAll(new Array(1_000_000).fill(7));
    expect(buf.length).toBe(1_000_003);
    expect(Array.from(before)).toEqual([1, 2, 3]);
    expect(buf.view()[1_000_002]).toBe(7);
  });
});

describe('the in-memory store\'s size estimate', () => {
  it('counts each object and array as a heap object (~40 bytes), not 8 bytes: dense JSON cannot hold several times the bound', () => {
    // 10,000 empty arrays: 30 KB of JSON, ~400 KB of heap once parsed (an outside attack's body held 5x the estimate).
    const dense = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x', extra: Array.from({ length: 10_000 }, () => []) }] };
    const sized = { bytes: 0 };
    expect(copyJson(dense, sized)).toEqual(dense);
    expect(sized.bytes).toBeGreaterThanOrEqual(10_000 * 40);
    // Ordinary text still counts by its UTF-8 bytes, a few dozen bytes of overhead besides.
    const plain = { bytes: 0 };
    copyJson({ type: 'input_text', text: 'y'.repeat(100_000) }, plain);
    expect(plain.bytes).toBeLessThan(100_000 + 200);
  });
});
