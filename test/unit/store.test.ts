/**
 * The response store: one list of behaviours run against MemoryStore,
 * SqliteStore(':memory:') and SqliteStore on a file (its bounds, its
 * expiry), then what only a SQLite file can show (survival across
 * close/reopen, bounds honoured at reopen, schema version and migration) and
 * openStore's dispatch.
 */
import { mkdtempSync, rmSync, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FunctionCall, InputItem, Response } from '../../src/protocol/objects.js';
import { ITEM_INDEX_BYTES } from '../../src/store/memory.js';
import {
  CHAIN_PAGE_BYTES,
  CHAIN_PAGE_LINKS,
  MAX_CHAIN_LINKS,
  MemoryStore,
  SCHEMA_VERSION,
  SqliteStore,
  openStore,
  type MemoryBounds,
  type ResponseStore,
  type StoreBounds,
  type StoredResponse,
} from '../../src/store/index.js';
import { EXPIRE_BATCH, ExpirySweep, SWEEP_MAX_DELAY_MS, SWEEP_MIN_DELAY_MS, UNBOUNDED } from '../../src/store/types.js';
import { runSync } from '../../src/cooperative.js';
import { captureLogger } from '../helpers/raw-http.js';
import { NATIVE_TEXT_CHARS } from '../../src/protocol/json-chunked.js';

const ALICE = 'owner-alice-hash';
const BOB = 'owner-bob-hash';

function makeResponse(id: string, previous: string | null, suffix = id): Response {
  const call: FunctionCall = {
    id: `fc_${suffix}`,
    type: 'function_call',
    call_id: `call_${suffix}`,
    name: 'shell',
    arguments: '{"cmd":"ls"}',
    status: 'completed',
  };
  return {
    id,
    object: 'response',
    created_at: 1_700_000_000,
    completed_at: 1_700_000_001,
    status: 'completed',
    error: null,
    incomplete_details: null,
    model: 'sim-1',
    previous_response_id: previous,
    instructions: 'Be brief.',
    output: [
      {
        id: `msg_${suffix}`,
        type: 'message',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: `answer ${suffix} — ünïcødé`, annotations: [], logprobs: [] }],
      },
      call,
    ],
    tools: [{ type: 'function', name: 'shell', description: 'run', parameters: { type: 'object' }, strict: false }],
    tool_choice: 'auto',
    truncation: 'disabled',
    parallel_tool_calls: true,
    text: { format: { type: 'text' } },
    top_p: 1,
    presence_penalty: 0,
    frequency_penalty: 0,
    top_logprobs: 0,
    temperature: 1,
    reasoning: { effort: null, summary: null },
    user: null,
    usage: {
      input_tokens: 12,
      input_tokens_details: { cached_tokens: 4, cache_write_tokens: 0 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 19,
    },
    max_output_tokens: null,
    max_tool_calls: null,
    store: true,
    background: false,
    service_tier: 'default',
    metadata: { run: 'store-test' },
    safety_identifier: null,
    prompt_cache_key: null,
    access_programs: null,
  };
}

const CREATED = 1_700_000_000;

function makeRecord(
  id: string,
  opts: { previous?: string | null; owner?: string | null; input?: InputItem[]; created_at?: number } = {},
): StoredResponse {
  const rec: StoredResponse = {
    response: makeResponse(id, opts.previous ?? null),
    input: opts.input ?? [{ type: 'message', role: 'user', content: `question for ${id}` }],
    owner: opts.owner === undefined ? ALICE : opts.owner,
    created_at: opts.created_at ?? CREATED,
  };
  rec.response.created_at = rec.created_at;
  return rec;
}

/** Files for the file-backed store, one per store opened, removed after the suite. */
const filesDir = mkdtempSync(join(tmpdir(), 'llr-store-each-'));
afterAll(() => rmSync(filesDir, { recursive: true, force: true }));
let files = 0;
const nextFile = (): string => join(filesDir, `s${++files}.sqlite`);

const stores: Array<{ name: string; open: () => ResponseStore; serialises: boolean; bounded: (b: MemoryBounds) => ResponseStore }> = [
  { name: 'MemoryStore', open: () => new MemoryStore(), serialises: false, bounded: (b) => new MemoryStore(b) },
  { name: 'SqliteStore(:memory:)', open: () => new SqliteStore(':memory:'), serialises: true, bounded: (b) => openStore(':memory:', b) },
  // A file's bounds are its own (openStore's third argument), not the in-memory stores'.
  { name: 'SqliteStore(file)', open: () => new SqliteStore(nextFile()), serialises: true, bounded: (b) => openStore(nextFile(), UNBOUNDED, b) },
];

/** What a store holds, for the stores that say so. */
function sizeOf(store: ResponseStore): number {
  return (store as MemoryStore | SqliteStore).size;
}

describe.each(stores)('$name, bounded', ({ bounded }) => {
  it('keeps at most maxResponses, evicting the oldest put; a replaced one counts as new; chains through an evicted one break', () => {
    const store = bounded({ maxResponses: 3, maxBytes: Infinity });
    try {
      for (const id of ['resp_1', 'resp_2', 'resp_3']) store.put(makeRecord(id, id === 'resp_1' ? {} : { previous: `resp_${Number(id.slice(5)) - 1}` }));
      store.put(makeRecord('resp_1')); // replaced: now the newest
      store.put(makeRecord('resp_4', { previous: 'resp_3' }));
      expect(store.get('resp_2', ALICE)).toBeUndefined();
      expect(store.getItem('msg_resp_2', ALICE)).toBeUndefined();
      for (const id of ['resp_1', 'resp_3', 'resp_4']) expect(store.get(id, ALICE)?.response.id).toBe(id);
      expect(store.counters.evicted).toBe(1);
      // resp_3's chain reaches resp_2, which is gone: the chain is broken, as for a deleted link.
      expect(store.chain('resp_4', ALICE)).toBeUndefined();
      // A delete frees its place: the next put evicts nothing.
      expect(store.delete('resp_1', ALICE)).toBe(true);
      store.put(makeRecord('resp_5'));
      expect(store.counters.evicted).toBe(1);
      expect(['resp_3', 'resp_4', 'resp_5'].map((id) => store.get(id, ALICE)?.response.id)).toEqual(['resp_3', 'resp_4', 'resp_5']);
    } finally {
      store.close();
    }
  });

  it('keeps at most maxBytes, but never evicts the response just put', () => {
    const one = JSON.stringify(makeRecord('resp_1')).length;
    const store = bounded({ maxResponses: Infinity, maxBytes: 3 * one });
    try {
      for (let i = 1; i <= 10; i++) store.put(makeRecord(`resp_${i}`));
      const kept = Array.from({ length: 10 }, (_, i) => store.get(`resp_${i + 1}`, ALICE) !== undefined);
      // The newest are kept, the oldest went: a run of false, then a run of true, with the last always kept.
      expect(kept.at(-1)).toBe(true);
      expect(kept.indexOf(true)).toBeGreaterThan(3);
      expect(kept.slice(kept.indexOf(true)).every(Boolean)).toBe(true);
      expect(store.counters.evicted).toBe(kept.filter((k) => !k).length);
      // One record over the whole bound is still stored (it is the newest), alone.
      const big = makeRecord('resp_big', { input: [{ type: 'message', role: 'user', content: 'x'.repeat(10 * one) }] });
      store.put(big);
      expect(store.get('resp_big', ALICE)?.response.id).toBe('resp_big');
      expect(store.get('resp_10', ALICE)).toBeUndefined();
    } finally {
      store.close();
    }
  });
});

describe.each(stores)('$name, expiry', ({ bounded }) => {
  const DAY = 24 * 60 * 60 * 1000;
  let now = CREATED * 1000;
  const ttl = (): StoreBounds => ({ maxResponses: Infinity, maxBytes: Infinity, ttlMs: 30 * DAY, now: () => now });

  it('treats a response older than ttlMs as gone for every read, an ancestor in a chain too, and deletes it on a later put', () => {
    now = CREATED * 1000;
    const store = bounded(ttl());
    try {
      store.put(makeRecord('resp_1'));
      store.put(makeRecord('resp_2', { previous: 'resp_1', created_at: CREATED + 60 }));
      now = CREATED * 1000 + 30 * DAY - 1; // resp_1 is 1 ms short of 30 days old
      expect(store.get('resp_1', ALICE)?.response.id).toBe('resp_1');
      expect(store.has('resp_1', ALICE)).toBe(true);
      expect(store.chain('resp_2', ALICE)?.map((r) => r.response.id)).toEqual(['resp_1', 'resp_2']);
      now = CREATED * 1000 + 30 * DAY; // resp_1 is 30 days old: gone; resp_2 is not
      expect(store.get('resp_1', ALICE)).toBeUndefined();
      expect(store.has('resp_1', ALICE)).toBe(false);
      expect(store.has('resp_2', ALICE)).toBe(true);
      expect(store.getItem('msg_resp_1', ALICE)).toBeUndefined();
      expect(store.get('resp_2', ALICE)?.response.id).toBe('resp_2');
      expect(store.getItem('msg_resp_2', ALICE)).toMatchObject({ id: 'msg_resp_2' });
      // resp_2's chain reaches resp_1, which has expired: broken, as for an evicted or deleted link.
      expect(store.chain('resp_2', ALICE)).toBeUndefined();
      expect(store.counters.expired).toBe(0);
      expect(sizeOf(store)).toBe(2); // still held: reads hide it until a put deletes it
      store.put(makeRecord('resp_3', { created_at: CREATED + 30 * 24 * 3600 }));
      expect(store.counters.expired).toBe(1);
      expect(sizeOf(store)).toBe(2);
      // Deleting an expired response finds nothing: it was already gone.
      now += 60_000;
      expect(store.delete('resp_2', ALICE)).toBe(false);
      expect(store.get('resp_3', ALICE)?.response.id).toBe('resp_3');
      expect(sizeOf(store)).toBe(1);
    } finally {
      store.close();
    }
  });

  it('counts the age from created_at_ms, not from the start of created_at\'s second', () => {
    // Created at x.999 s with a TTL of 1.5 s: alive until x.999 + 1.5 s, not gone after 0.5 s (from x.000 s).
    const born = CREATED * 1000 + 999;
    now = born;
    const store = bounded({ maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1500, now: () => now });
    try {
      // Without created_at_ms (an older writer, an older file's row): from the second's start, as before.
      store.put(makeRecord('resp_s'));
      // One that does not fall in its created_at's second is not believed: from the second's start too.
      store.put({ ...makeRecord('resp_x'), created_at_ms: born + 5000 });
      store.put({ ...makeRecord('resp_1'), created_at_ms: born });
      store.put({ ...makeRecord('resp_2', { previous: 'resp_1' }), created_at_ms: born });
      expect(store.get('resp_1', ALICE)?.created_at_ms).toBe(born);
      now = CREATED * 1000 + 1500; // 1.5 s after x.000, 0.501 s after x.999
      expect(['resp_1', 'resp_s', 'resp_x'].map((id) => store.has(id, ALICE))).toEqual([true, false, false]);
      expect(store.get('resp_1', ALICE)?.response.id).toBe('resp_1');
      expect(store.getItem('msg_resp_1', ALICE)).toMatchObject({ id: 'msg_resp_1' });
      expect(store.chain('resp_2', ALICE)?.map((r) => r.response.id)).toEqual(['resp_1', 'resp_2']);
      store.put(makeRecord('resp_3', { created_at: CREATED + 10 })); // deletes only what expired
      expect(store.counters.expired).toBe(2);
      expect(store.get('resp_1', ALICE)?.response.id).toBe('resp_1');
      now = born + 1499;
      expect(store.has('resp_1', ALICE)).toBe(true);
      now = born + 1500; // 1.5 s old
      expect(store.get('resp_1', ALICE)).toBeUndefined();
      expect(store.has('resp_1', ALICE)).toBe(false);
      expect(store.getItem('msg_resp_1', ALICE)).toBeUndefined();
      expect(store.chain('resp_2', ALICE)).toBeUndefined();
      expect(store.delete('resp_1', ALICE)).toBe(false); // already gone
      expect(store.counters.expired).toBe(3);
      store.put(makeRecord('resp_4', { created_at: CREATED + 10 }));
      expect(store.counters.expired).toBe(4); // resp_2
      expect(sizeOf(store)).toBe(2);
    } finally {
      store.close();
    }
  });

  it(`deletes at most ${EXPIRE_BATCH} expired responses per put, oldest first`, () => {
    now = CREATED * 1000;
    const store = bounded(ttl());
    try {
      const n = EXPIRE_BATCH + 10;
      for (let i = 0; i < n; i++) store.put(makeRecord(`resp_${i}`, { created_at: CREATED + i }));
      now = (CREATED + n) * 1000 + 30 * DAY; // every one expired
      expect(store.get(`resp_${n - 1}`, ALICE)).toBeUndefined();
      store.put(makeRecord('resp_new', { created_at: CREATED + n + 30 * 24 * 3600 }));
      expect(store.counters.expired).toBe(EXPIRE_BATCH);
      expect(sizeOf(store)).toBe(n - EXPIRE_BATCH + 1);
      store.put(makeRecord('resp_newer', { created_at: CREATED + n + 30 * 24 * 3600 }));
      expect(store.counters.expired).toBe(n);
      expect(sizeOf(store)).toBe(2);
      expect(store.counters.evicted).toBe(0);
    } finally {
      store.close();
    }
  });
});

describe.each(stores)('$name, idle expiry sweep', ({ bounded }) => {
  // Fake timers and a fake Date (the stores' default clock): no test waits.
  beforeEach(() => {
    vi.useFakeTimers({ now: CREATED * 1000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const TTL = 1500;
  const withTtl = (ttlMs: number): StoreBounds => ({ maxResponses: Infinity, maxBytes: Infinity, ttlMs });
  const sweeping = (store: ResponseStore): boolean => (store as MemoryStore | SqliteStore).sweeping;

  it(`deletes expired responses with no later put, ${EXPIRE_BATCH} at a time with a yield between, and counts them`, () => {
    const store = bounded(withTtl(TTL));
    try {
      const n = 2 * EXPIRE_BATCH + 5;
      for (let i = 0; i < n; i++) store.put({ ...makeRecord(`resp_${i}`), created_at_ms: CREATED * 1000 });
      // A listed one's input items are cached: the sweep drops them with the record, as a put's expiry does.
      expect(store.inputItems('resp_0', ALICE)).toBeDefined();
      vi.advanceTimersByTime(TTL - 1);
      expect([sizeOf(store), store.counters.expired]).toEqual([n, 0]);
      vi.advanceTimersByTime(1); // the oldest is TTL old: the timer fires, one batch, the next one after a yield
      expect([sizeOf(store), store.counters.expired]).toEqual([n - EXPIRE_BATCH, EXPIRE_BATCH]);
      vi.advanceTimersToNextTimer(); // the setImmediate: the second batch
      expect(store.counters.expired).toBe(2 * EXPIRE_BATCH);
      vi.advanceTimersToNextTimer();
      expect([sizeOf(store), store.counters.expired]).toEqual([0, n]);
      expect(store.counters.writes).toBe(n); // no put, no delete did it
      expect(store.inputItems('resp_0', ALICE)).toBeUndefined();
    } finally {
      store.close();
    }
  });

  it('wakes when the oldest response expires, not before the shortest wait, and keeps the live ones', () => {
    const store = bounded(withTtl(TTL));
    try {
      store.put({ ...makeRecord('resp_old'), created_at_ms: CREATED * 1000 });
      vi.advanceTimersByTime(1000);
      store.put({ ...makeRecord('resp_new', { created_at: CREATED + 1 }), created_at_ms: (CREATED + 1) * 1000 });
      vi.advanceTimersByTime(500); // resp_old is TTL old
      expect([sizeOf(store), store.counters.expired]).toEqual([1, 1]);
      expect(store.get('resp_new', ALICE)?.response.id).toBe('resp_new');
      // resp_new expires 1,000 ms later: the next wake is then (the shortest wait, SWEEP_MIN_DELAY_MS, is 1,000 ms too).
      expect(SWEEP_MIN_DELAY_MS).toBeLessThanOrEqual(1000);
      vi.advanceTimersByTime(999);
      expect(sizeOf(store)).toBe(1);
      vi.advanceTimersByTime(1);
      expect([sizeOf(store), store.counters.expired]).toEqual([0, 2]);
    } finally {
      store.close();
    }
  });

  it('with a TTL past what a timer can wait (30 days), wakes every SWEEP_MAX_DELAY_MS and deletes them once expired', () => {
    const DAY = 24 * 60 * 60 * 1000;
    const store = bounded(withTtl(30 * DAY));
    try {
      store.put({ ...makeRecord('resp_1'), created_at_ms: CREATED * 1000 });
      // A setTimeout past 2^31-1 ms fires at once (Node): none is set longer than the longest wait.
      expect(SWEEP_MAX_DELAY_MS).toBeLessThan(2 ** 31 - 1);
      vi.advanceTimersByTime(SWEEP_MAX_DELAY_MS);
      expect([sizeOf(store), store.counters.expired]).toEqual([1, 0]);
      vi.advanceTimersByTime(30 * DAY - SWEEP_MAX_DELAY_MS);
      expect([sizeOf(store), store.counters.expired]).toEqual([0, 1]);
    } finally {
      store.close();
    }
  });

  it('schedules nothing without a TTL', () => {
    for (const bounds of [UNBOUNDED, withTtl(Infinity)]) {
      const store = bounded(bounds);
      try {
        store.put(makeRecord('resp_1'));
        expect(sweeping(store)).toBe(false);
        expect(vi.getTimerCount()).toBe(0);
      } finally {
        store.close();
      }
    }
  });

  it('stops when closed, a batch still to come included', () => {
    const store = bounded(withTtl(TTL));
    store.put({ ...makeRecord('resp_1'), created_at_ms: CREATED * 1000 });
    expect(vi.getTimerCount()).toBe(1);
    store.close();
    expect([sweeping(store), vi.getTimerCount()]).toEqual([false, 0]);

    const busy = bounded(withTtl(TTL));
    for (let i = 0; i < EXPIRE_BATCH + 1; i++) busy.put({ ...makeRecord(`resp_${i}`), created_at_ms: CREATED * 1000 });
    vi.advanceTimersByTime(TTL); // one batch; the next waits for a setImmediate
    expect(busy.counters.expired).toBe(EXPIRE_BATCH);
    expect(vi.getTimerCount()).toBe(1);
    busy.close();
    expect([sweeping(busy), vi.getTimerCount()]).toEqual([false, 0]);
    vi.runAllTimers(); // nothing runs on the closed store (a SQLite one would throw)
    expect(busy.counters.expired).toBe(EXPIRE_BATCH);
  });
});

describe.each(stores)('$name, bounded, items shared by id', ({ bounded }) => {
  const shared = (tag: string): InputItem[] => [
    { type: 'message', role: 'user', id: 'msg_shared', content: `shared from ${tag}` },
    { type: 'message', role: 'user', id: `msg_own_${tag}`, content: tag },
  ];

  it('resolves an id held by several records to the newest one left after evictions, a replace and a delete', () => {
    const store = bounded({ maxResponses: 3, maxBytes: Infinity });
    try {
      for (const tag of ['a', 'b', 'c', 'd']) store.put(makeRecord(`resp_${tag}`, { input: shared(tag) })); // a evicted
      expect(store.getItem('msg_own_a', ALICE)).toBeUndefined();
      expect(store.getItem('msg_shared', ALICE)).toMatchObject({ content: 'shared from d' });
      store.put(makeRecord('resp_b', { input: shared('b2') })); // replaced: the newest holder now
      expect(store.getItem('msg_shared', ALICE)).toMatchObject({ content: 'shared from b2' });
      expect(store.delete('resp_b', ALICE)).toBe(true); // dropped from the end of the list
      expect(store.getItem('msg_shared', ALICE)).toMatchObject({ content: 'shared from d' });
      expect(store.delete('resp_d', ALICE)).toBe(true);
      store.put(makeRecord('resp_e', { input: [{ type: 'message', role: 'user', content: 'no ids' }] }));
      expect(store.getItem('msg_shared', ALICE)).toMatchObject({ content: 'shared from c' });
      store.put(makeRecord('resp_f'));
      store.put(makeRecord('resp_g')); // c evicted: no holder left
      expect(store.getItem('msg_shared', ALICE)).toBeUndefined();
      expect(store.getItem('msg_own_c', ALICE)).toBeUndefined();
    } finally {
      store.close();
    }
  });
});

describe('ExpirySweep failures', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: CREATED * 1000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a step or a wake that throws is retried every SWEEP_MIN_DELAY_MS, logged once per run of failures, never thrown', () => {
    const { logger, lines } = captureLogger();
    let failing: 'step' | 'next' | null = 'step';
    let steps = 0;
    const sweep = new ExpirySweep(
      { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1000 },
      () => {
        steps++;
        if (failing === 'step') throw new Error('SQLITE_CORRUPT: database disk image is malformed');
        return false;
      },
      () => {
        if (failing === 'next') throw new Error('SQLITE_IOERR: disk I/O error');
        return Date.now() + 1000;
      },
      logger,
    );
    const codes = () => lines.map((l) => l['code']);
    try {
      sweep.wake(Date.now());
      vi.advanceTimersByTime(SWEEP_MIN_DELAY_MS * 30);
      expect(steps).toBe(30);
      expect(codes()).toEqual(['store_sweep_failed']);
      expect(lines[0]).toMatchObject({ level: 40, err: { message: 'SQLITE_CORRUPT: database disk image is malformed' } });
      failing = null;
      vi.advanceTimersByTime(SWEEP_MIN_DELAY_MS * 5);
      expect(codes()).toEqual(['store_sweep_failed', 'store_sweep_recovered']);
      expect(lines[1]).toMatchObject({ level: 30, failures: 30 });
      // A step that succeeds but a wake that cannot be planned is still a failure: no recovered line between them.
      failing = 'next';
      vi.advanceTimersByTime(SWEEP_MIN_DELAY_MS * 10);
      expect(codes()).toEqual(['store_sweep_failed', 'store_sweep_recovered', 'store_sweep_failed']);
      expect(lines[2]).toMatchObject({ err: { message: 'SQLITE_IOERR: disk I/O error' } });
      expect(sweep.pending).toBe(true);
    } finally {
      sweep.close();
    }
  });
});

describe('MemoryStore byte estimate', () => {
  it('counts text in UTF-8 bytes, so CJK weighs three bytes a character as in its JSON', () => {
    const store = new MemoryStore({ maxResponses: Infinity, maxBytes: Infinity });
    try {
      const cjk = '字'.repeat(10_000);
      store.put(makeRecord('resp_1', { input: [{ type: 'message', role: 'user', content: cjk }] }));
      const json = Buffer.byteLength(JSON.stringify(store.get('resp_1', ALICE)));
      expect(store.bytes).toBeGreaterThanOrEqual(30_000);
      // Within the JSON's size, give or take the per-value allowance.
      expect(Math.abs(store.bytes - json)).toBeLessThan(json * 0.2);
    } finally {
      store.close();
    }
  });
});

describe('MemoryStore byte estimate of two-byte text', () => {
  it('counts ASCII text with one emoji two bytes a character, as V8 holds it (atk61 F9)', () => {
    const store = new MemoryStore({ maxResponses: Infinity, maxBytes: Infinity });
    try {
      store.put(makeRecord('resp_ascii', { input: [{ type: 'message', role: 'user', content: 'a'.repeat(100_000) }] }));
      const ascii = store.bytes;
      store.put(makeRecord('resp_emoji', { input: [{ type: 'message', role: 'user', content: `${'a'.repeat(100_000)}\u{1F600}` }] }));
      expect(store.bytes - ascii).toBeGreaterThanOrEqual(200_000);
      expect(ascii).toBeLessThan(150_000);
    } finally {
      store.close();
    }
  });
});

describe('MemoryStore byte estimate of indexed items', () => {
  it('counts each input item with an id its index entries too, so ids cannot hold twice the bound (atk62 F2)', () => {
    const store = new MemoryStore({ maxResponses: Infinity, maxBytes: Infinity });
    try {
      const items = (ids: boolean): InputItem[] =>
        Array.from({ length: 1_000 }, (_, i) => ({ type: 'message', role: 'user', content: 'a', ...(ids && { id: `msg_${i}` }) }) as InputItem);
      store.put(makeRecord('resp_plain', { input: items(false) }));
      const plain = store.bytes;
      store.put(makeRecord('resp_ids', { input: items(true) }));
      // The ids' own bytes (`"id":"msg_…"`, ~16 a item) and their index entries (ITEM_INDEX_BYTES each).
      expect(store.bytes - plain - plain).toBeGreaterThanOrEqual(1_000 * ITEM_INDEX_BYTES);
    } finally {
      store.close();
    }
  });
});

describe('MemoryStore eviction cost', () => {
  it('evicts in steady state about as fast as it fills, when every record repeats the same item ids', () => {
    // A stateless client resending its history with item ids: every record holds the same 400 ids. Eviction runs
    // on every put past the bound; copying each id's holder list made a put O(items × records): ~40 ms here
    // (about a hundred times a put while filling), now about the same as a put while filling.
    const items: InputItem[] = Array.from({ length: 400 }, (_, i) => ({ type: 'message', role: 'user', id: `msg_${i}`, content: `turn ${i}` }));
    const store = new MemoryStore({ maxResponses: 2_000, maxBytes: Infinity });
    try {
      const puts = (from: number, n: number) => {
        const start = performance.now();
        for (let i = from; i < from + n; i++) store.put(makeRecord(`resp_${i}`, { input: items }));
        return (performance.now() - start) / n;
      };
      puts(0, 1_800);
      const filling = puts(1_800, 200);
      const evicting = puts(2_000, 200);
      expect(store.counters.evicted).toBe(200);
      expect(store.getItem('msg_7', ALICE)).toMatchObject({ content: 'turn 7' });
      expect(evicting).toBeLessThan(20 * filling);
    } finally {
      store.close();
    }
  });
});

describe.each(stores)('$name', ({ open, serialises }) => {
  let store: ResponseStore;
  beforeEach(() => {
    store = open();
  });
  afterEach(() => {
    store.close();
  });

  it('returns what was put, field for field', () => {
    const rec = makeRecord('resp_1', { owner: ALICE });
    store.put(rec);
    expect(store.get('resp_1', ALICE)).toEqual(rec);
    expect(store.get('resp_missing', ALICE)).toBeUndefined();
  });

  it('has: whether get would find it (its owner only), without reading it', () => {
    store.put(makeRecord('resp_1', { owner: ALICE }));
    expect(store.has('resp_1', ALICE)).toBe(true);
    expect(store.has('resp_1', null)).toBe(false);
    expect(store.has('resp_missing', ALICE)).toBe(false);
    const read = store.counters.rows_read;
    store.has('resp_1', ALICE);
    expect(store.counters.rows_read).toBe(read);
    store.delete('resp_1', ALICE);
    expect(store.has('resp_1', ALICE)).toBe(false);
  });

  it('keeps a null owner apart from any key owner', () => {
    store.put(makeRecord('resp_open', { owner: null }));
    expect(store.get('resp_open', null)?.owner).toBeNull();
    expect(store.get('resp_open', ALICE)).toBeUndefined();
  });

  it('is not changed by callers mutating what they put or got', () => {
    const rec = makeRecord('resp_1');
    store.put(rec);
    rec.response.status = 'failed';
    const got = store.get('resp_1', ALICE)!;
    expect(got.response.status).toBe('completed');
    got.input.length = 0;
    expect(store.get('resp_1', ALICE)!.input).toHaveLength(1);
  });

  it('replaces by response id and re-indexes the items', () => {
    store.put(makeRecord('resp_1'));
    const replacement = makeRecord('resp_1');
    replacement.response.output = [
      { id: 'msg_new', type: 'message', role: 'assistant', status: 'completed', content: [] },
    ];
    store.put(replacement);
    expect(store.get('resp_1', ALICE)!.response.output).toHaveLength(1);
    expect(store.getItem('msg_new', ALICE)).toMatchObject({ id: 'msg_new' });
    expect(store.getItem('msg_resp_1', ALICE)).toBeUndefined();
  });

  it('hides another owner’s response from get, chain, getItem and delete', () => {
    store.put(makeRecord('resp_1', { owner: ALICE }));
    expect(store.get('resp_1', BOB)).toBeUndefined();
    expect(store.get('resp_1', null)).toBeUndefined();
    expect(store.chain('resp_1', BOB)).toBeUndefined();
    expect(store.getItem('msg_resp_1', BOB)).toBeUndefined();
    expect(store.delete('resp_1', BOB)).toBe(false);
    // Bob's failed delete left Alice's record in place.
    expect(store.get('resp_1', ALICE)?.response.id).toBe('resp_1');
  });

  it('keeps the same client-chosen input item id apart per owner', () => {
    const aliceItem: InputItem = { type: 'message', id: 'msg_client', role: 'user', content: 'alice' };
    const bobItem: InputItem = { type: 'message', id: 'msg_client', role: 'user', content: 'bob' };
    store.put(makeRecord('resp_a', { owner: ALICE, input: [aliceItem] }));
    store.put(makeRecord('resp_b', { owner: BOB, input: [bobItem] }));
    expect(store.getItem('msg_client', ALICE)).toEqual(aliceItem);
    expect(store.getItem('msg_client', BOB)).toEqual(bobItem);
    expect(store.delete('resp_b', BOB)).toBe(true);
    expect(store.getItem('msg_client', ALICE)).toEqual(aliceItem);
    expect(store.getItem('msg_client', BOB)).toBeUndefined();
  });

  it('deletes once, and the deleted response’s items go with it', () => {
    store.put(makeRecord('resp_1'));
    expect(store.delete('resp_1', ALICE)).toBe(true);
    expect(store.get('resp_1', ALICE)).toBeUndefined();
    expect(store.getItem('fc_resp_1', ALICE)).toBeUndefined();
    expect(store.delete('resp_1', ALICE)).toBe(false);
  });

  it('walks a chain oldest first, each record with only its own input', () => {
    store.put(makeRecord('resp_1'));
    store.put(makeRecord('resp_2', { previous: 'resp_1' }));
    store.put(makeRecord('resp_3', { previous: 'resp_2' }));
    const chain = store.chain('resp_3', ALICE)!;
    expect(chain.map((r) => r.response.id)).toEqual(['resp_1', 'resp_2', 'resp_3']);
    expect(chain.map((r) => r.input)).toEqual([
      [{ type: 'message', role: 'user', content: 'question for resp_1' }],
      [{ type: 'message', role: 'user', content: 'question for resp_2' }],
      [{ type: 'message', role: 'user', content: 'question for resp_3' }],
    ]);
    expect(store.chain('resp_1', ALICE)!.map((r) => r.response.id)).toEqual(['resp_1']);
  });

  it('gives no chain when a link is missing, foreign, or loops', () => {
    store.put(makeRecord('resp_2', { previous: 'resp_gone' }));
    expect(store.chain('resp_2', ALICE)).toBeUndefined();
    expect(store.chain('resp_nowhere', ALICE)).toBeUndefined();

    store.put(makeRecord('resp_bob', { owner: BOB }));
    store.put(makeRecord('resp_onto_bob', { previous: 'resp_bob' }));
    expect(store.chain('resp_onto_bob', ALICE)).toBeUndefined();

    store.put(makeRecord('resp_x', { previous: 'resp_y' }));
    store.put(makeRecord('resp_y', { previous: 'resp_x' }));
    expect(store.chain('resp_x', ALICE)).toBeUndefined();
    expect(MAX_CHAIN_LINKS).toBeGreaterThan(1);
  });

  it('breaks the chain of later responses when a middle one is deleted', () => {
    store.put(makeRecord('resp_1'));
    store.put(makeRecord('resp_2', { previous: 'resp_1' }));
    store.put(makeRecord('resp_3', { previous: 'resp_2' }));
    store.delete('resp_2', ALICE);
    expect(store.chain('resp_3', ALICE)).toBeUndefined();
    expect(store.chain('resp_1', ALICE)).toHaveLength(1);
  });

  it('reads a long chain in pages, yielding after each record, and gives no chain when a link goes while it reads', () => {
    // More links than one page holds, and records of more bytes than one page reads (each alone in its page then).
    const links = CHAIN_PAGE_LINKS * 2 + 37;
    const big = 'x'.repeat(Math.ceil(CHAIN_PAGE_BYTES * 0.6));
    const id = (n: number) => `resp_${n}`;
    for (let n = 1; n <= links; n++) {
      const input: InputItem[] | undefined = n % 200 === 0 ? [{ type: 'message', role: 'user', content: big }] : undefined;
      store.put(makeRecord(id(n), { previous: n === 1 ? null : id(n - 1), ...(input && { input }) }));
    }
    const read = (work: Generator<void, StoredResponse[] | undefined, void>, atYield?: (yields: number) => void) => {
      let yields = 0;
      for (let r = work.next(); ; r = work.next()) {
        if (r.done) return { chain: r.value, yields };
        yields++;
        atYield?.(yields);
      }
    };
    const whole = read(store.chainWork(id(links), ALICE));
    expect(whole.chain?.map((r) => r.response.id)).toEqual(Array.from({ length: links }, (_, i) => id(i + 1)));
    expect(whole.chain?.[199]?.input).toEqual([{ type: 'message', role: 'user', content: big }]);
    // A yield after each record at least: no one read or copy of the whole chain in one turn.
    expect(whole.yields).toBeGreaterThanOrEqual(links);
    expect(store.chain(id(links), ALICE)).toEqual(whole.chain);
    // A link not read yet goes (deleted) while the chain is read: not the chain walked, so none.
    const torn = read(store.chainWork(id(links), ALICE), (yields) => {
      if (yields === 5) store.delete(id(links - 3), ALICE);
    });
    expect(torn.chain).toBeUndefined();
    expect(store.chain(id(links - 4), ALICE)).toHaveLength(links - 4);
  });

  it('finds output items and id-carrying input items by id', () => {
    const echoed: InputItem = {
      type: 'function_call_output',
      id: 'fco_1',
      call_id: 'call_prev',
      output: 'ok',
    };
    const noId: InputItem = { type: 'message', role: 'user', content: 'no id here' };
    store.put(makeRecord('resp_1', { input: [noId, echoed] }));
    expect(store.getItem('msg_resp_1', ALICE)).toEqual(makeResponse('resp_1', null).output[0]);
    expect(store.getItem('fc_resp_1', ALICE)).toMatchObject({ type: 'function_call', call_id: 'call_resp_1' });
    expect(store.getItem('fco_1', ALICE)).toEqual(echoed);
    expect(store.getItem('call_resp_1', ALICE)).toBeUndefined();
  });

  it('does not index an item_reference under the id it points at', () => {
    store.put(makeRecord('resp_1', { input: [{ type: 'item_reference', id: 'msg_elsewhere' }] }));
    expect(store.getItem('msg_elsewhere', ALICE)).toBeUndefined();
  });

  it('counts the work it does', () => {
    const before = { ...store.counters };
    store.put(makeRecord('resp_1'));
    store.put(makeRecord('resp_2', { previous: 'resp_1' }));
    store.get('resp_1', ALICE);
    store.get('resp_1', BOB);
    store.chain('resp_2', ALICE);
    store.getItem('msg_resp_2', ALICE);
    store.delete('resp_2', ALICE);
    expect(store.counters).toEqual({
      reads: before.reads + 4,
      writes: before.writes + 3,
      // get 1 + (Bob's get 0) + chain 2 + item 1
      rows_read: before.rows_read + 4,
      bytes_written: serialises ? expect.any(Number) : 0,
      evicted: 0,
      expired: 0,
    });
    if (serialises) {
      const one = makeRecord('resp_1');
      // At least the Response and input JSON of both records were written.
      const floor = 2 * (JSON.stringify(one.response).length + JSON.stringify(one.input).length);
      expect(store.counters.bytes_written).toBeGreaterThan(floor);
    }
  });
});

describe('SqliteStore on a file', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'llr-store-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps a stored response, its chain and items across close and reopen', () => {
    const path = join(dir, 'nested', 'deeper', 'llr.sqlite');
    const first = new SqliteStore(path);
    first.put(makeRecord('resp_1'));
    first.put(makeRecord('resp_2', { previous: 'resp_1' }));
    first.close();
    expect(existsSync(path)).toBe(true);

    const second = new SqliteStore(path);
    try {
      expect(second.get('resp_2', ALICE)).toEqual(makeRecord('resp_2', { previous: 'resp_1' }));
      expect(second.chain('resp_2', ALICE)!.map((r) => r.response.id)).toEqual(['resp_1', 'resp_2']);
      expect(second.getItem('fc_resp_1', ALICE)).toMatchObject({ call_id: 'call_resp_1' });
      expect(second.get('resp_2', BOB)).toBeUndefined();
    } finally {
      second.close();
    }
  });

  it('counts what a reopened file holds, so its bounds hold from the first put', () => {
    const path = join(dir, 'llr.sqlite');
    const first = new SqliteStore(path);
    for (let i = 1; i <= 3; i++) first.put(makeRecord(`resp_${i}`));
    const bytes = first.bytes;
    first.close();

    const second = new SqliteStore(path, { maxResponses: 5, maxBytes: Infinity });
    try {
      expect([second.size, second.bytes]).toEqual([3, bytes]);
      for (let i = 4; i <= 6; i++) second.put(makeRecord(`resp_${i}`));
      // 6 put, 5 kept: the oldest (from before the reopen) went.
      expect(second.counters.evicted).toBe(1);
      expect(second.get('resp_1', ALICE)).toBeUndefined();
      expect(second.getItem('fc_resp_1', ALICE)).toBeUndefined();
      expect(second.get('resp_2', ALICE)?.response.id).toBe('resp_2');
      expect(second.size).toBe(5);
    } finally {
      second.close();
    }
  });

  it('trims a file reopened under lower bounds at open, oldest first, items with them', () => {
    const path = join(dir, 'llr.sqlite');
    const first = new SqliteStore(path);
    // Ids of one length, so every record weighs the same.
    for (let i = 10; i <= 19; i++) first.put(makeRecord(`resp_${i}`));
    const one = first.bytes / 10;
    first.close();

    const byCount = new SqliteStore(path, { maxResponses: 6, maxBytes: Infinity });
    expect([byCount.size, byCount.counters.evicted]).toEqual([6, 4]);
    expect(byCount.get('resp_13', ALICE)).toBeUndefined();
    expect(byCount.get('resp_14', ALICE)?.response.id).toBe('resp_14');
    byCount.close();

    const byBytes = new SqliteStore(path, { maxResponses: Infinity, maxBytes: 3 * one });
    expect([byBytes.size, byBytes.counters.evicted]).toEqual([3, 3]);
    expect(byBytes.get('resp_16', ALICE)).toBeUndefined();
    expect(byBytes.get('resp_17', ALICE)?.response.id).toBe('resp_17');
    byBytes.close();

    // Every response far older than the TTL: all deleted at open, not a batch per put.
    const byAge = new SqliteStore(path, { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1000, now: () => (CREATED + 10) * 1000 });
    expect([byAge.size, byAge.bytes, byAge.counters.expired]).toEqual([0, 0, 3]);
    byAge.close();

    const raw = new Database(path);
    expect(raw.prepare('SELECT count(*) AS n FROM items').get()).toEqual({ n: 0 });
    raw.close();
  });

  it('keeps the write-ahead log bounded by its real pages: deletes of responses with thousands of indexed items', () => {
    // The log's growth is its pages, not its rows' JSON: each of these items is a row of its own and an index entry at
    // a scattered place. A store that counted JSON bytes toward its own checkpoints let 200 such deletes grow the log
    // to 1.5 GB (outside attack); SQLite's automatic checkpoint, which counts pages, keeps it near its 4 MiB.
    const path = join(dir, 'wal-items.sqlite');
    const store = new SqliteStore(path);
    try {
      let max = 0;
      const wal = () => (max = Math.max(max, statSync(`${path}-wal`).size));
      const scatter = (n: number) => ((n * 2654435761) >>> 0).toString(36);
      for (let r = 0; r < 40; r++) {
        const input: InputItem[] = Array.from({ length: 2000 }, (_, i) => ({ type: 'message', id: `msg_${scatter(r * 2000 + i)}`, role: 'user', content: 'a' }));
        store.put(makeRecord(`resp_${r}`, { input }));
        wal();
      }
      for (let r = 0; r < 40; r++) {
        expect(store.delete(`resp_${r}`, ALICE)).toBe(true);
        wal();
      }
      expect(max).toBeLessThan(24 * 1024 * 1024);
    } finally {
      store.close();
    }
  });

  it('reads a link\'s previous response without its record, as get would find it', () => {
    const store = new SqliteStore(join(dir, 'previous.sqlite'));
    try {
      store.put(makeRecord('resp_1'));
      store.put(makeRecord('resp_2', { previous: 'resp_1' }));
      expect([store.previousOf('resp_2', ALICE), store.previousOf('resp_1', ALICE), store.previousOf('resp_2', BOB), store.previousOf('resp_x', ALICE)]).toEqual(['resp_1', null, undefined, undefined]);
      const memory = new MemoryStore();
      memory.put(makeRecord('resp_1'));
      memory.put(makeRecord('resp_2', { previous: 'resp_1' }));
      expect([memory.previousOf('resp_2', ALICE), memory.previousOf('resp_1', ALICE), memory.previousOf('resp_2', BOB), memory.previousOf('resp_x', ALICE)]).toEqual(['resp_1', null, undefined, undefined]);
    } finally {
      store.close();
    }
  });

  it('trims a large file at open in batches: the WAL stays small, every surplus row still goes', () => {
    // 30,000 rows of ~1 KB trimmed to 10 in one transaction wrote most of the file's pages to the WAL (~25 MB
    // here, ~3 GB for a 4 GiB store), and the WAL keeps that size on disk while the server runs.
    const path = join(dir, 'big.sqlite');
    new SqliteStore(path).close();
    const raw = new Database(path);
    const insert = raw.prepare('INSERT INTO responses (id, owner, previous_response_id, created_at, response, input, bytes) VALUES (?, NULL, NULL, ?, ?, ?, ?)');
    const text = 'x'.repeat(1000);
    raw.transaction(() => {
      for (let i = 0; i < 30_000; i++) insert.run(`resp_${i}`, CREATED, JSON.stringify({ id: `resp_${i}`, text }), '[]', 1010);
    })();
    raw.pragma('wal_checkpoint(TRUNCATE)');
    raw.close();
    const store = new SqliteStore(path, { maxResponses: 10, maxBytes: Infinity });
    try {
      expect([store.size, store.bytes, store.counters.evicted]).toEqual([10, 10_100, 29_990]);
      expect(store.get('resp_29990', null)?.response.id).toBe('resp_29990');
      expect(store.get('resp_29989', null)).toBeUndefined();
      expect(statSync(`${path}-wal`).size).toBeLessThan(8 * 1024 * 1024);
    } finally {
      store.close();
    }
  });

  it('migrates a version 2 file: its rows are kept and counted, their bytes as a put counts them', () => {
    const path = join(dir, 'v2.sqlite');
    const recs = [makeRecord('resp_1'), makeRecord('resp_2', { previous: 'resp_1' })];
    const fresh = new SqliteStore(join(dir, 'fresh.sqlite'));
    for (const rec of recs) fresh.put(rec);
    // A version 2 file: the same tables without `bytes` and its index (nor version 4's `created_at_ms`, 5's `runner`).
    const v2 = new SqliteStore(path);
    for (const rec of recs) v2.put(rec);
    v2.close();
    const raw = new Database(path);
    raw.exec('DROP INDEX responses_by_created; ALTER TABLE responses DROP COLUMN bytes; ALTER TABLE responses DROP COLUMN created_at_ms; ALTER TABLE responses DROP COLUMN runner; ALTER TABLE responses DROP COLUMN protocol');
    raw.pragma('user_version = 2');
    raw.close();

    const migrated = new SqliteStore(path, { maxResponses: 2, maxBytes: Infinity });
    try {
      expect([migrated.size, migrated.bytes]).toEqual([fresh.size, fresh.bytes]);
      expect(migrated.chain('resp_2', ALICE)?.map((r) => r.response.id)).toEqual(['resp_1', 'resp_2']);
      migrated.put(makeRecord('resp_3'));
      expect(migrated.get('resp_1', ALICE)).toBeUndefined();
      expect(migrated.size).toBe(2);
    } finally {
      migrated.close();
      fresh.close();
    }
    const after = new Database(path);
    expect(after.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    after.close();
  });

  it('migrates a version 3 file: its rows keep counting their age from created_at; new ones from created_at_ms, across a reopen', () => {
    const path = join(dir, 'v3.sqlite');
    const v3 = new SqliteStore(path);
    v3.put(makeRecord('resp_old'));
    v3.close();
    const raw = new Database(path);
    raw.exec('ALTER TABLE responses DROP COLUMN created_at_ms; ALTER TABLE responses DROP COLUMN runner; ALTER TABLE responses DROP COLUMN protocol');
    raw.pragma('user_version = 3');
    raw.close();

    let now = CREATED * 1000;
    const bounds = { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1500, now: () => now };
    const migrated = new SqliteStore(path, bounds);
    migrated.put({ ...makeRecord('resp_new'), created_at_ms: CREATED * 1000 + 999 });
    migrated.close();
    now = CREATED * 1000 + 1500;
    const reopened = new SqliteStore(path, bounds);
    try {
      expect(reopened.get('resp_old', ALICE)).toBeUndefined();
      expect(reopened.get('resp_new', ALICE)).toEqual({ ...makeRecord('resp_new'), created_at_ms: CREATED * 1000 + 999 });
      expect(reopened.counters.expired).toBe(1); // resp_old, at open
    } finally {
      reopened.close();
    }
    const after = new Database(path);
    expect(after.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    after.close();
  });

  it('migrates a version 4 file: its rows have no runner; a record stored before its end keeps its own', () => {
    const path = join(dir, 'v4.sqlite');
    const v4 = new SqliteStore(path);
    v4.put(makeRecord('resp_old'));
    v4.close();
    const raw = new Database(path);
    raw.exec('ALTER TABLE responses DROP COLUMN runner; ALTER TABLE responses DROP COLUMN protocol');
    raw.pragma('user_version = 4');
    raw.close();
    const migrated = new SqliteStore(path);
    try {
      expect(migrated.get('resp_old', ALICE)).toEqual(makeRecord('resp_old'));
      migrated.put({ ...makeRecord('resp_running'), runner: '123:456' });
      expect(migrated.get('resp_running', ALICE)?.runner).toBe('123:456');
      expect(migrated.chain('resp_running', ALICE)?.[0]?.runner).toBe('123:456');
    } finally {
      migrated.close();
    }
    const after = new Database(path);
    expect(after.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    after.close();
  });

  it('migrates a version 5 file: its rows have no protocol; a record that names its design keeps it, in a chain too', () => {
    const path = join(dir, 'v5.sqlite');
    const v5 = new SqliteStore(path);
    v5.put(makeRecord('resp_old'));
    v5.close();
    const raw = new Database(path);
    raw.exec('ALTER TABLE responses DROP COLUMN protocol');
    raw.pragma('user_version = 5');
    raw.close();
    const migrated = new SqliteStore(path);
    try {
      expect(migrated.get('resp_old', ALICE)).toEqual(makeRecord('resp_old'));
      migrated.put({ ...makeRecord('resp_llhttp'), protocol: 'long-lived-http' });
      expect(migrated.get('resp_llhttp', ALICE)?.protocol).toBe('long-lived-http');
      expect(migrated.chain('resp_llhttp', ALICE)?.[0]?.protocol).toBe('long-lived-http');
    } finally {
      migrated.close();
    }
    // A name this build does not know (a later build's design) is read as none.
    const other = new Database(path);
    other.prepare(`UPDATE responses SET protocol = 'carrier-pigeon' WHERE id = 'resp_llhttp'`).run();
    expect(other.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    other.close();
    const reopened = new SqliteStore(path);
    try {
      expect(reopened.get('resp_llhttp', ALICE)?.protocol).toBeUndefined();
    } finally {
      reopened.close();
    }
  });

  it('sweeps a file another process wrote: it looks again every SWEEP_MAX_DELAY_MS, its count stays at zero', () => {
    vi.useFakeTimers({ now: CREATED * 1000 });
    const path = join(dir, 'shared.sqlite');
    const bounds: StoreBounds = { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1500 };
    const reader = new SqliteStore(path, bounds); // opened empty: it counted nothing
    const writer = new SqliteStore(path, bounds);
    try {
      expect(reader.sweeping).toBe(true);
      for (let i = 0; i < 3; i++) writer.put({ ...makeRecord(`resp_${i}`), created_at_ms: CREATED * 1000 });
      writer.close(); // the writer is gone before its responses expire
      vi.advanceTimersByTime(SWEEP_MAX_DELAY_MS);
      expect([reader.size, reader.bytes, reader.counters.expired]).toEqual([0, 0, 3]);
      const raw = new Database(path);
      expect(raw.prepare('SELECT (SELECT count(*) FROM responses) + (SELECT count(*) FROM items) AS n').get()).toEqual({ n: 0 });
      raw.close();
    } finally {
      reader.close();
      vi.useRealTimers();
    }
  });

  it("recounts before evicting when another process deleted rows (its sweep): the writer's live responses stay", () => {
    vi.useFakeTimers({ now: CREATED * 1000 });
    const path = join(dir, 'shared.sqlite');
    // The writer keeps 3 and has no TTL; a second server on the file sweeps it with one.
    const writer = new SqliteStore(path, { maxResponses: 3, maxBytes: Infinity });
    const sweeper = new SqliteStore(path, { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1500 });
    try {
      for (let i = 0; i < 3; i++) writer.put({ ...makeRecord(`resp_old_${i}`), created_at_ms: CREATED * 1000 });
      vi.advanceTimersByTime(SWEEP_MAX_DELAY_MS); // the sweeper deletes all three
      expect(sweeper.counters.expired).toBe(3);
      const now = Math.floor(Date.now() / 1000);
      for (const id of ['resp_a', 'resp_b', 'resp_c']) writer.put({ ...makeRecord(id, { created_at: now }), created_at_ms: now * 1000 });
      // Three put, three kept: the file holds nothing else. Counting the swept rows as still there, the writer
      // evicted resp_a and resp_b (its count went 4, 5 then 6) and kept one response of its three.
      expect(['resp_a', 'resp_b', 'resp_c'].map((id) => writer.get(id, ALICE)?.response.id)).toEqual(['resp_a', 'resp_b', 'resp_c']);
      expect([writer.size, writer.counters.evicted]).toEqual([3, 0]);
      writer.put({ ...makeRecord('resp_d', { created_at: now }), created_at_ms: now * 1000 });
      expect([writer.size, writer.counters.evicted, writer.get('resp_a', ALICE)]).toEqual([3, 1, undefined]);
      expect(writer.get('resp_b', ALICE)?.response.id).toBe('resp_b');
    } finally {
      writer.close();
      sweeper.close();
      vi.useRealTimers();
    }
  });

  it("never waits for another process's write lock in its sweep: it tries again after the shortest wait", () => {
    vi.useFakeTimers({ now: CREATED * 1000, toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] });
    const path = join(dir, 'locked.sqlite');
    const store = new SqliteStore(path, { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1500 });
    const other = new Database(path); // another process's writer, in a transaction
    try {
      store.put({ ...makeRecord('resp_1'), created_at_ms: CREATED * 1000 });
      other.exec('BEGIN IMMEDIATE');
      const started = performance.now();
      vi.advanceTimersByTime(1500); // the wake: the file is locked
      // Waiting on the lock (busy_timeout, 5 s) held the event loop that long, on every wake while the other held it.
      expect(performance.now() - started).toBeLessThan(4000);
      expect([store.size, store.counters.expired, store.sweeping]).toEqual([1, 0, true]);
      other.exec('COMMIT');
      vi.advanceTimersByTime(SWEEP_MIN_DELAY_MS);
      expect([store.size, store.counters.expired]).toEqual([0, 1]);
      // A put still waits for the lock as it did (busy_timeout): the sweep's own wait only was dropped.
      expect(store.put({ ...makeRecord('resp_2'), created_at_ms: Date.now() })).toBeUndefined();
    } finally {
      other.close();
      store.close();
      vi.useRealTimers();
    }
  });

  it("logs a sweep that fails (a file another process keeps locked) once, with the error, and again only after one succeeded", () => {
    vi.useFakeTimers({ now: CREATED * 1000, toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] });
    const { logger, lines } = captureLogger();
    const path = join(dir, 'locked-logged.sqlite');
    const store = new SqliteStore(path, { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1500 }, logger);
    const other = new Database(path);
    const sweepLines = () => lines.filter((l) => typeof l['code'] === 'string' && (l['code'] as string).startsWith('store_sweep_')).map((l) => [l.level, l['code']]);
    try {
      store.put({ ...makeRecord('resp_1'), created_at_ms: CREATED * 1000 });
      other.exec('BEGIN IMMEDIATE');
      vi.advanceTimersByTime(1500); // the wake: SQLITE_BUSY
      expect(sweepLines()).toEqual([[40, 'store_sweep_failed']]);
      expect(lines.find((l) => l['code'] === 'store_sweep_failed')!['err']).toMatchObject({ code: 'SQLITE_BUSY' });
      vi.advanceTimersByTime(10 * SWEEP_MIN_DELAY_MS); // ten more tries, ten more failures: no more lines
      expect([store.size, store.counters.expired]).toEqual([1, 0]);
      expect(sweepLines()).toHaveLength(1);
      other.exec('COMMIT');
      vi.advanceTimersByTime(SWEEP_MIN_DELAY_MS); // it succeeds: said once
      expect([store.size, store.counters.expired]).toEqual([0, 1]);
      expect(sweepLines()).toEqual([[40, 'store_sweep_failed'], [30, 'store_sweep_recovered']]);
      expect(lines.at(-1)).toMatchObject({ failures: 11 });
      // Failing again after a success is logged again.
      store.put({ ...makeRecord('resp_2'), created_at_ms: Date.now() });
      other.exec('BEGIN IMMEDIATE');
      vi.advanceTimersByTime(1500 + 3 * SWEEP_MIN_DELAY_MS);
      expect(sweepLines()).toEqual([[40, 'store_sweep_failed'], [30, 'store_sweep_recovered'], [40, 'store_sweep_failed']]);
      other.exec('COMMIT');
    } finally {
      other.close();
      store.close();
      vi.useRealTimers();
    }
  });

  it(`deletes at most EXPIRE_BATCH_BYTES of expired rows a step (a put's or the sweep's), at least one, the rest after a yield`, () => {
    vi.useFakeTimers({ now: CREATED * 1000 });
    const path = join(dir, 'large.sqlite');
    const store = new SqliteStore(path, { maxResponses: Infinity, maxBytes: Infinity, ttlMs: 1500 });
    try {
      // 64 rows of 16 MiB (a body's limit) freed in one step held the event loop ~1 s (8 MiB rows: 0.57 s measured).
      const large = 'x'.repeat(5 * 1024 * 1024);
      const put = (id: string, ms: number): void => {
        const rec = makeRecord(id, { created_at: Math.floor(ms / 1000) });
        rec.response.instructions = large;
        store.put({ ...rec, created_at_ms: ms });
      };
      for (let i = 0; i < 4; i++) put(`resp_${i}`, CREATED * 1000);
      vi.advanceTimersByTime(1500); // the wake: one 5 MiB row, a second would pass the 8 MiB a step
      expect([store.size, store.counters.expired]).toEqual([3, 1]);
      vi.advanceTimersToNextTimer(); // the setImmediate: the next step
      expect([store.size, store.counters.expired]).toEqual([2, 2]);
      put('resp_new', Date.now()); // a put's own expiry: one more, not both
      expect([store.size, store.counters.expired]).toEqual([2, 3]);
      vi.runOnlyPendingTimers();
      vi.runOnlyPendingTimers();
      expect([store.size, store.counters.expired, store.get('resp_new', ALICE)?.response.id]).toEqual([1, 4, 'resp_new']);
    } finally {
      store.close();
      vi.useRealTimers();
    }
  });

  it('writes its schema version and refuses a file from a newer schema', () => {
    const path = join(dir, 'llr.sqlite');
    new SqliteStore(path).close();
    const raw = new Database(path);
    expect(raw.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    expect(() => new SqliteStore(path)).toThrow(`schema version ${SCHEMA_VERSION + 1}`);
  });
});

describe('SqliteStore.prepare: a long record serialised in slices ahead of its put', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'llr-store-prepare-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** A record past NATIVE_TEXT_CHARS: lone surrogates, pairs and escapes everywhere, a pair across every 256 K cut. */
  function longRecord(id: string): StoredResponse {
    const rec = makeRecord(id, { input: [{ type: 'message', role: 'user', id: `in_${id}`, content: `${'a'.repeat(NATIVE_TEXT_CHARS - 1)}\ud83d\ude00${'\ud800"\n'.repeat(100_000)}` }] });
    rec.response.instructions = `${'b'.repeat(NATIVE_TEXT_CHARS - 1)}\ud83d\ude00\udc00`.repeat(3);
    rec.appended = [{ at: 1, items: [{ type: 'function_call_output', call_id: `call_${id}`, output: '\u0001é'.repeat(200_000) }] }];
    return rec;
  }

  it("writes the row a put makes natively, byte for byte: JSON.stringify's text, the same bytes counted", () => {
    const path = join(dir, 'prepared.sqlite');
    const prepared = new SqliteStore(path);
    const native = new SqliteStore(':memory:');
    try {
      const rec = longRecord('resp_long');
      const work = prepared.prepare(rec)!;
      let steps = 0;
      let r = work.next();
      for (; !r.done; r = work.next()) steps++;
      expect(steps).toBeGreaterThan(10); // in slices
      expect(prepared.counters.writes).toBe(0); // nothing written by the work
      prepared.put(rec, r.value);
      native.put(rec);
      expect(prepared.counters.bytes_written).toBe(native.counters.bytes_written);
      expect(prepared.bytes).toBe(native.bytes);
      expect(prepared.get('resp_long', ALICE)).toEqual(rec);
      expect(prepared.getItem('in_resp_long', ALICE)).toEqual(rec.input[0]);
      expect(prepared.getItem('call_resp_long', ALICE)).toBeUndefined();
      const db = new Database(path, { readonly: true });
      try {
        const row = db.prepare('SELECT response, input, appended, bytes FROM responses').get() as { response: string; input: string; appended: string; bytes: number };
        expect(row.response === JSON.stringify(rec.response)).toBe(true);
        expect(row.input === JSON.stringify(rec.input)).toBe(true);
        expect(row.appended === JSON.stringify(rec.appended)).toBe(true);
        expect(row.bytes).toBe(native.bytes);
      } finally {
        db.close();
      }
    } finally {
      prepared.close();
      native.close();
    }
  });

  it('makes nothing for a short record; a put given what was made of another record serialises its own', () => {
    const store = new SqliteStore(':memory:');
    try {
      expect(store.prepare(makeRecord('resp_short'))).toBeUndefined();
      const made = runSync(store.prepare(longRecord('resp_long'))!);
      const other = makeRecord('resp_other');
      store.put(other, made);
      expect(store.get('resp_other', ALICE)).toEqual(other);
      expect(store.get('resp_long', ALICE)).toBeUndefined();
    } finally {
      store.close();
    }
  });
});

describe('openStore', () => {
  it('chooses the store from the spec', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llr-open-'));
    try {
      const memory = openStore('memory');
      const sqliteMemory = openStore(':memory:');
      const file = openStore(join(dir, 'data', 'llr.sqlite'));
      expect(memory).toBeInstanceOf(MemoryStore);
      expect(sqliteMemory).toBeInstanceOf(SqliteStore);
      expect(file).toBeInstanceOf(SqliteStore);
      expect(existsSync(join(dir, 'data', 'llr.sqlite'))).toBe(true);
      for (const s of [memory, sqliteMemory, file]) s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
