/**
 * Cold `input_items` listings (modes/cold-listings.ts): twenty first pages of
 * different 49,000-item lists at once held `/health` 1.5–3.8 s (outside
 * attack): each listing derived its ids in its own cooperative slices, so every
 * turn of the event loop ran a slice of every listing, and the SQLite store
 * parsed each whole row in the request's own turn. Checked by counting work
 * per turn of the loop, not time: the queue's slice budget is set to 0 (one
 * step a turn), and a `setImmediate` chain observes, turn by turn, how many
 * lists progressed and how many ids were derived; the SQLite store's rows are
 * never parsed whole. Also: the queue's bound, a client that goes away, and
 * the sliced parse giving `JSON.parse`'s value.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { SessionHost } from '../../src/modes/host.js';
import type { InputItem } from '../../src/protocol/objects.js';
import { PARSE_CHUNK_CHARS } from '../../src/protocol/json-chunked.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';
import { parseListWork, type InputItemIndex } from '../../src/store/input-items.js';
import { UNBOUNDED, type StoredResponse } from '../../src/store/types.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import type { Limits } from '../../src/engine/services.js';

const servers: LlrServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.services.store.close();
});

const STORES = ['memory', ':memory:'] as const;
const all = { limit: 1, order: 'asc' as const, after: null, before: null };

function setup(store: string, limits: Partial<Limits> = {}) {
  const server = new LlrServer({ store, logger: pino({ level: 'silent' }), modelSettings: INSTANT_MODEL, limits });
  servers.push(server);
  const h = new SessionHost(server.services);
  // One step of a derivation a turn: what a turn holds is then counted, not timed.
  if (h.listings) h.listings.budgetMs = 0;
  const store_ = server.services.store;
  const made: InputItemIndex[] = [];
  const inputItems = store_.inputItems.bind(store_);
  store_.inputItems = (id, owner) => {
    const index = inputItems(id, owner);
    if (index) made.push(index);
    return index;
  };
  return { store: store_, h, made };
}

function record(id: string, n: number): StoredResponse {
  return {
    response: { id, object: 'response', output: [], previous_response_id: null } as unknown as StoredResponse['response'],
    input: Array.from({ length: n }, (_, i) => ({ type: 'message', role: 'user', content: `item ${id} ${i} of a long list` }) as InputItem),
    owner: null,
    created_at: Math.floor(Date.now() / 1000),
  };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('cold input_items listings', () => {
  it.each(STORES)('twenty at once: each turn of the loop runs one step of one list (%s store)', async (kind) => {
    const { store, h, made } = setup(kind);
    const N = 5000;
    const ids = Array.from({ length: 20 }, (_, k) => `resp_cold${k}`);
    for (const id of ids) store.put(record(id, N));

    // Count, per turn, the ids derived (the derivation's map insertions) and the longest text JSON.parse was given.
    const { set } = Map.prototype;
    const { parse } = JSON;
    let inserted = 0;
    let longestParse = 0;
    Map.prototype.set = function (this: Map<unknown, unknown>, k: unknown, v: unknown) {
      inserted++;
      return set.call(this, k, v);
    };
    JSON.parse = ((text: string, ...rest: []) => ((longestParse = Math.max(longestParse, text.length)), parse(text, ...rest))) as typeof JSON.parse;
    const perTurn: Array<{ inserted: number; progressed: number }> = [];
    let pages: Array<unknown>;
    try {
      let settled = false;
      let before: number[] = [];
      let seen = 0;
      // Counted from the turn the twenty requests arrive in (what they do before their first wait), then every later one.
      const listing = Promise.all(ids.map((id) => h.storedInputItems(id, null, all))).finally(() => (settled = true));
      for (let t = 0; !settled && t < 100_000; t++) {
        const now = made.map((ix) => ix.derived);
        perTurn.push({ inserted: inserted - seen, progressed: now.filter((d, i) => d !== (before[i] ?? 0)).length });
        before = now;
        seen = inserted;
        await turn();
      }
      pages = await listing;
    } finally {
      Map.prototype.set = set;
      JSON.parse = parse;
    }
    expect(pages.every((p) => (p as { data: unknown[] }).data.length === 1)).toBe(true);
    expect(made.every((ix) => ix.derived === N)).toBe(true);
    // Without the queue: in the requests' own turn all twenty derived their 5,000 ids (100,000 insertions).
    expect(Math.max(...perTurn.map((p) => p.progressed))).toBe(1);
    expect(Math.max(...perTurn.map((p) => p.inserted))).toBeLessThanOrEqual(256 + 8);
    // The SQLite store's rows (~250 KB each) were parsed in slices, never whole in one turn.
    if (kind !== 'memory') expect(longestParse).toBeLessThanOrEqual(2 * PARSE_CHUNK_CHARS + 2);
    // Nothing left waiting; the lists are kept, so a second page waits for nothing.
    expect(h.listings.held).toEqual({ waiting: 0, queued: 0, running: 0 });
    expect((await h.storedInputItems(ids[0]!, null, { ...all, limit: 2 }))!.data).toHaveLength(2);
  });

  it.each(STORES)('at most --max-queued-listings wait (429 too_many_listings), a cached list never does (%s store)', async (kind) => {
    const { store, h } = setup(kind, { maxQueuedListings: 2 });
    for (const id of ['resp_a', 'resp_b', 'resp_c']) store.put(record(id, 2000));
    const a = h.storedInputItems('resp_a', null, all);
    const b = h.storedInputItems('resp_b', null, all);
    await expect(h.storedInputItems('resp_c', null, all)).rejects.toMatchObject({ code: 'too_many_listings', status: 429 });
    await Promise.all([a, b]);
    // resp_a is cached now: listed while two cold ones wait.
    const c = h.storedInputItems('resp_c', null, all);
    const c2 = h.storedInputItems('resp_c', null, all);
    expect(h.listings.held.waiting).toBe(2);
    expect((await h.storedInputItems('resp_a', null, all))!.data).toHaveLength(1);
    await Promise.all([c, c2]);
    expect(h.listings.held).toEqual({ waiting: 0, queued: 0, running: 0 });
  });

  it.each(STORES)('a listing queued while its response is stored again lists it, not 404 (%s store)', async (kind) => {
    const { store, h } = setup(kind);
    for (const id of ['resp_a', 'resp_b']) store.put(record(id, 2000));
    const a = h.storedInputItems('resp_a', null, all);
    const b = h.storedInputItems('resp_b', null, { ...all, order: 'desc' });
    expect(h.listings.held.queued).toBe(1);
    // A long-lived run's appends are stored by putting its record again.
    store.put(record('resp_b', 2001));
    await a;
    const page = await b;
    expect(page).toBeDefined();
    // The memory store lists the record it held when asked; the SQLite store the row when its turn came.
    const last = (page!.data[0]!.content as Array<{ text: string }>)[0]!.text;
    expect(last).toBe(kind === 'memory' ? 'item resp_b 1999 of a long list' : 'item resp_b 2000 of a long list');
  });

  it.each(STORES)('a listing whose client went away leaves the queue; its list is not read (%s store)', async (kind) => {
    const { store, h, made } = setup(kind);
    for (const id of ['resp_a', 'resp_b']) store.put(record(id, 3000));
    const a = h.storedInputItems('resp_a', null, all);
    const gone = new AbortController();
    const b = h.storedInputItems('resp_b', null, all, gone.signal);
    const bFailed = b.catch((err: unknown) => err);
    expect(h.listings.held).toEqual({ waiting: 2, queued: 1, running: 1 });
    gone.abort(new Error('client gone'));
    expect(h.listings.held).toEqual({ waiting: 1, queued: 0, running: 1 });
    expect(((await bFailed) as Error).message).toBe('client gone');
    await a;
    const ixB = made.find((ix) => ix.responseId === 'resp_b')!;
    expect(ixB.derived).toBe(0);
    // The SQLite store's row was never read: the index still holds only the estimate, no items.
    expect(ixB.held.items).toBe(kind === 'memory' ? 3000 : 0);
    expect(h.listings.held).toEqual({ waiting: 0, queued: 0, running: 0 });

    // A running derivation nobody waits for stops at its next slice; a later listing resumes it.
    const left = new AbortController();
    const c = h.storedInputItems('resp_b', null, all, left.signal).catch(() => 'gone');
    await turn();
    await turn();
    left.abort();
    expect(await c).toBe('gone');
    await turn();
    await turn();
    const stopped = ixB.derived;
    expect(stopped).toBeLessThan(3000);
    await turn();
    expect(ixB.derived).toBe(stopped);
    expect(h.listings.held).toEqual({ waiting: 0, queued: 0, running: 0 });
    expect((await h.storedInputItems('resp_b', null, all))!.data).toHaveLength(1);
    expect(ixB.derived).toBe(3000);
  });
});

describe('parseListWork', () => {
  const run = (text: string) => {
    const w = parseListWork(text);
    let r = w.next();
    let slices = 1;
    for (; !r.done; slices++) r = w.next();
    return { value: r.value, slices };
  };

  it("gives JSON.parse's value, in slices, whatever '},{' the strings and members hold", () => {
    const lists: unknown[][] = [
      // Plain messages: every slice cut at a member's end.
      Array.from({ length: 20_000 }, (_, i) => ({ type: 'message', role: 'user', content: `m${i}` })),
      // '},{' inside strings, escaped quotes and backslashes before them.
      Array.from({ length: 8_000 }, (_, i) => ({ type: 'message', content: `x\\"},{"y":${i}},{\\` })),
      // '},{' between parts of one member (content lists), and a __proto__ key JSON.parse keeps as its own.
      Array.from({ length: 3_000 }, (_, i) => JSON.parse(`{"type":"message","__proto__":{"a":${i}},"content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b${i}"}]}`)),
      // One member larger than a slice, between small ones.
      [{ type: 'message', content: 'a' }, { type: 'message', content: 'z'.repeat(3 * PARSE_CHUNK_CHARS), parts: Array.from({ length: 5_000 }, () => ({})) }, ...Array.from({ length: 5_000 }, (_, i) => ({ n: i }))],
      // Appended batches: members with lists of items inside.
      Array.from({ length: 40 }, (_, b) => ({ at: b, items: Array.from({ length: 500 }, (_, i) => ({ type: 'function_call_output', call_id: `c${b}_${i}`, output: '{"ok":true},{"x":1}' })) })),
      [],
      [{ a: 1 }],
    ];
    for (const list of lists) {
      const text = JSON.stringify(list);
      const { value, slices } = run(text);
      expect(JSON.stringify(value)).toBe(text);
      expect(value).toEqual(JSON.parse(text));
      if (text.length > 4 * PARSE_CHUNK_CHARS) expect(slices).toBeGreaterThan(2);
    }
  });

  it('gives JSON.parse\'s value for a member nested deeper than the sliced walk can recurse', () => {
    // Stored under a raised --max-json-depth: the walk into a member larger than a slice recurses a level at a time
    // (generators), and thousands of levels each larger than a slice overflowed the stack (RangeError: every page of
    // the list answered 500, from ~3,000 levels on the main thread; JSON.parse, which the listing used before, is not
    // recursive). Past WALK_DEPTH levels a member is parsed whole.
    const depth = 200_000;
    const deep = `${'['.repeat(depth)}"${'x'.repeat(PARSE_CHUNK_CHARS + 10)}"${']'.repeat(depth)}`;
    const text = `[{"type":"message","content":"first"},{"type":"message","content":"x","deep":${deep}},{"type":"message","content":"last"}]`;
    const { value } = run(text);
    // Compared by walking down (deep equality and JSON.stringify recurse too).
    const list = value as Array<Record<string, unknown>>;
    expect(list.map((m) => m.content)).toEqual(['first', 'x', 'last']);
    let v: unknown = list[1]!.deep;
    let levels = 0;
    let lengths = 0;
    for (; Array.isArray(v); levels++) {
      lengths += v.length;
      v = v[0];
    }
    expect([levels, lengths]).toEqual([depth, depth]);
    expect(v).toBe('x'.repeat(PARSE_CHUNK_CHARS + 10));
  });
});

describe("a cold listing's row, read when its turn comes (SQLite store)", () => {
  // The SQLite store reads a listed row only when the listing's turn in the queue comes, seconds later with 64 cold
  // listings ahead: the row read then must still be the lister's live response, as the version read at the listing was.
  const owned = (id: string, owner: string, tag: string, createdMs: number): StoredResponse => ({
    ...record(id, 300),
    input: Array.from({ length: 300 }, (_, i) => ({ type: 'message', role: 'user', content: `${tag} ${i}` }) as InputItem),
    owner,
    created_at: Math.floor(createdMs / 1000),
    created_at_ms: createdMs,
  });
  const derived = (index: InputItemIndex) => {
    for (const _ of index.derive());
    return index;
  };

  it("is not another owner's response stored under the same id meanwhile (the rowid reused, the same lengths)", () => {
    const store = new SqliteStore(':memory:');
    try {
      store.put(owned('resp_same', 'alice', 'alice', Date.now()));
      const index = store.inputItems('resp_same', 'alice')!;
      expect(index.ready).toBe(false);
      // Queued: meanwhile bob's response takes the id (and the rowid, the row being the last), its JSON as long.
      store.put(owned('resp_same', 'bob', 'bobby', Date.now()));
      expect(store.inputItems('resp_same', 'alice')).toBeUndefined();
      derived(index);
      expect(index.items.map((i) => (i as { content: string }).content).filter((c) => c.startsWith('bobby'))).toEqual([]);
      expect(index.gone).toBe(true);
    } finally {
      store.close();
    }
  });

  it('is not a response that expired meanwhile (not found, as a read then says)', () => {
    let now = Date.now();
    const store = new SqliteStore(':memory:', { ...UNBOUNDED, ttlMs: 60_000, now: () => now });
    try {
      store.put(owned('resp_old', 'alice', 'alice', now - 30_000));
      const index = store.inputItems('resp_old', 'alice')!;
      now += 60_000;
      expect(store.inputItems('resp_old', 'alice')).toBeUndefined();
      expect(derived(index).gone).toBe(true);
    } finally {
      store.close();
    }
  });
});
