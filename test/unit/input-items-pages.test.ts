/**
 * `GET /v1/responses/{id}/input_items` costs a page, not the list. A `?limit=1`
 * page of a stored response with 49,000 input items derived every item's id
 * and copied (memory store) or parsed (SQLite store) the whole record, ~100 ms
 * of event loop a page; twenty at once held `/health` 2 s, and the SDK's
 * auto-pagination was quadratic (outside attack). Checked by counting work,
 * not time, over both stores through `SessionHost.storedInputItems` (what the
 * HTTP route calls): after the first page, a page reads no whole record (no
 * `store.get`, no JSON parse of the list) and derives no ids (the map and set
 * insertions the derivation makes). The pages stay what the listing answered
 * before: checked against the former whole-list algorithm, kept here as the
 * oracle, over duplicate ids, ids that collide with derived ones and appends.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SessionHost } from '../../src/modes/host.js';
import type { InputItem } from '../../src/protocol/objects.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';
import { InputItemsCache, PARSED_CONTAINER_BYTES, parsedBytes, type InputItemList, type InputItemsQuery } from '../../src/store/input-items.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { ownInputItems, type StoredResponse } from '../../src/store/types.js';

const dir = mkdtempSync(join(tmpdir(), 'llr-input-pages-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const servers: LlrServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.services.store.close();
});

const STORES = ['memory', ':memory:', 'file'] as const;

function host(store: (typeof STORES)[number]) {
  const spec = store === 'file' ? join(dir, `${Math.random().toString(36).slice(2)}.db`) : store;
  const server = new LlrServer({ store: spec, logger: pino({ level: 'silent' }), modelSettings: INSTANT_MODEL });
  servers.push(server);
  return { store: server.services.store, host: new SessionHost(server.services) };
}

function record(id: string, input: InputItem[], appended?: StoredResponse['appended']): StoredResponse {
  const rec: StoredResponse = {
    response: { id, object: 'response', output: [], previous_response_id: null } as unknown as StoredResponse['response'],
    input,
    owner: null,
    created_at: Math.floor(Date.now() / 1000),
  };
  if (appended) rec.appended = appended;
  return rec;
}

/** A store's listing as the session layer makes it: the index, its items loaded and ids derived (at once here), or undefined when not found. */
function listed(store: { inputItems: SqliteStore['inputItems'] }, id: string, owner: string | null = null) {
  const index = store.inputItems(id, owner);
  if (!index) return undefined;
  for (const _ of index.derive());
  return index.gone ? undefined : index;
}

const msg = (content: string, id?: string) => ({ type: 'message', role: 'user', content, ...(id !== undefined && { id }) }) as InputItem;

/** The listing as it was before pages were cheap: every id derived, every cursor a scan. The oracle for the wire. */
function reference(rec: StoredResponse, q: InputItemsQuery): { ids: string[]; first: number; count: number; has_more: boolean } | 'bad' {
  const items = ownInputItems(rec);
  const seen = new Set<string>();
  // The response id's own hex (so an item_reference finds the response), or a hash of an id of another shape.
  const base = /^resp_[0-9a-f]{32}$/.test(rec.response.id) ? rec.response.id.slice(5) : createHash('sha256').update(rec.response.id).digest('hex').slice(0, 24);
  const prefix: Record<string, string> = { message: 'msg', function_call: 'fc', function_call_output: 'fco', reasoning: 'rs', compaction: 'cmp' };
  const ids = items.map((item, i) => {
    const own = (item as { id?: unknown }).id;
    if (typeof own === 'string' && own !== '' && !seen.has(own)) {
      seen.add(own);
      return own;
    }
    const type = typeof item.type === 'string' ? item.type : 'message';
    const derived = `${prefix[type] ?? 'item'}_${base}${i.toString(16).padStart(8, '0')}`;
    let id = derived;
    for (let n = 1; seen.has(id); n++) id = `${derived}_${n}`;
    seen.add(id);
    return id;
  });
  const position = (k: number) => (q.order === 'asc' ? k : items.length - 1 - k);
  const at = (c: string) => (ids.indexOf(c) < 0 ? NaN : position(ids.indexOf(c)));
  const start = q.after === null ? 0 : at(q.after) + 1;
  const end = Math.max(start, q.before === null ? items.length : at(q.before));
  if (Number.isNaN(start) || Number.isNaN(end)) return 'bad';
  const from = q.before !== null && q.after === null ? Math.max(start, end - q.limit) : start;
  const to = Math.min(end, from + q.limit);
  const page = [];
  for (let k = from; k < to; k++) page.push(ids[position(k)]!);
  return { ids: page, first: from, count: to - from, has_more: end - start > to - from };
}

describe('input_items pages', () => {
  it.each(STORES)('list what the whole-list algorithm listed (%s store)', async (kind) => {
    const { store, host: h } = host(kind);
    const rid = 'resp_pages1';
    const base = createHash('sha256').update(rid).digest('hex').slice(0, 24);
    // Own ids, one given twice, one that is the id derived for a later position, an appended item carrying one too.
    const input = [msg('a', 'msg_own'), msg('b'), msg('c', 'msg_own'), msg('d', `msg_${base}00000005`), { type: 'function_call_output', call_id: 'c1', output: 'x' } as InputItem, msg('f'), msg('g', '')];
    const rec = record(rid, input, [{ at: 0, items: [msg('h', `msg_${base}00000009`), msg('i'), msg('j')] }]);
    store.put(rec);
    const ids = (reference(rec, { limit: 100, order: 'asc', after: null, before: null }) as { ids: string[] }).ids;
    expect(new Set(ids).size).toBe(10);
    const cursors = [null, ...ids, 'msg_nope'];
    for (const order of ['asc', 'desc'] as const) {
      for (const limit of [1, 3, 100]) {
        for (const after of cursors) {
          for (const before of cursors) {
            const q = { limit, order, after, before };
            const want = reference(rec, q);
            const got = await h.storedInputItems(rid, null, q).then(
              (p) => p!,
              (err: { code?: string }) => err.code,
            );
            if (want === 'bad') {
              expect(got, JSON.stringify(q)).toBe('invalid_value');
              continue;
            }
            const page = got as InputItemList;
            expect(page.data.map((i) => i.id), JSON.stringify(q)).toEqual(want.ids);
            expect(page.has_more, JSON.stringify(q)).toBe(want.has_more);
            expect([page.first_id, page.last_id]).toEqual([want.ids[0] ?? null, want.ids.at(-1) ?? null]);
          }
        }
      }
    }
  });

  it.each(STORES)('cost their own items after the first, not the whole list (%s store)', async (kind) => {
    const { store, host: h } = host(kind);
    const N = 20_000;
    const rec = record('resp_many', Array.from({ length: N }, (_, i) => msg(`m${i}`)));
    store.put(rec);
    const first = await h.storedInputItems('resp_many', null, { limit: 100, order: 'asc', after: null, before: null });
    expect(first!.data).toHaveLength(100);

    // Count the work of 50 more pages: whole-record reads, JSON parsed, id insertions.
    let gets = 0;
    let parsed = 0;
    let inserted = 0;
    const get = store.get.bind(store);
    store.get = (...args) => (gets++, get(...args));
    const { parse } = JSON;
    const { add } = Set.prototype;
    const { set } = Map.prototype;
    JSON.parse = ((text: string, ...rest: []) => ((parsed += text.length), parse(text, ...rest))) as typeof JSON.parse;
    Set.prototype.add = function (this: Set<unknown>, v: unknown) {
      inserted++;
      return add.call(this, v);
    };
    Map.prototype.set = function (this: Map<unknown, unknown>, k: unknown, v: unknown) {
      inserted++;
      return set.call(this, k, v);
    };
    let page = first!;
    const seen: unknown[] = [];
    try {
      for (let i = 0; i < 50; i++) {
        page = (await h.storedInputItems('resp_many', null, { limit: 100, order: 'asc', after: page.last_id, before: null }))!;
        seen.push(...page.data.map((d) => (d.content as Array<{ text: string }>)[0]!.text));
      }
    } finally {
      JSON.parse = parse;
      Set.prototype.add = add;
      Map.prototype.set = set;
      store.get = get;
    }
    expect(seen).toEqual(Array.from({ length: 5000 }, (_, i) => `m${i + 100}`));
    expect(page.has_more).toBe(true);
    expect(gets).toBe(0);
    // The pages' own items (~10 bytes of JSON each) are the most a page may parse; the whole list is ~50× that.
    expect(parsed).toBeLessThan(50 * 100 * 50);
    // Deriving the list's ids makes N insertions a page; a page's own bookkeeping a few.
    expect(inserted).toBeLessThan(50 * 50);
  });

  it.each(STORES)('are listed from the record put last, not a cached earlier version (%s store)', async (kind) => {
    const { store, host: h } = host(kind);
    const all = { limit: 100, order: 'asc' as const, after: null, before: null };
    store.put(record('resp_v', [msg('one'), msg('two')]));
    expect((await h.storedInputItems('resp_v', null, all))!.data).toHaveLength(2);
    // A long-lived run's appends are stored by putting the record again.
    store.put(record('resp_v', [msg('one'), msg('two')], [{ at: 0, items: [msg('three', 'fco_x')] }]));
    const page = (await h.storedInputItems('resp_v', null, all))!;
    expect(page.data.map((d) => d.id).at(-1)).toBe('fco_x');
    expect(store.delete('resp_v', null)).toBe(true);
    expect(await h.storedInputItems('resp_v', null, all)).toBeUndefined();
  });
});

describe('input_items on a file another process writes', () => {
  it("never lists another response's row that took the rowid between the store's two reads", () => {
    // A reader beside the writer (docs: one writing process, readers beside it): between the reader's version read
    // and its input read, the writer deletes alice's response and puts bob's, which reuses the largest rowid. The
    // listing of alice's response answered bob's items; it is now not found, as it is.
    const file = join(dir, 'two-processes.db');
    const rec = (id: string, owner: string, text: string): StoredResponse => ({ ...record(id, [msg(text)]), owner });
    const writer = new SqliteStore(file);
    writer.put(rec('resp_alice', 'alice', 'alice secret'));
    let between: (() => void) | null = null;
    const { prepare } = Database.prototype;
    Database.prototype.prepare = function (this: Database.Database, sql: string) {
      const stmt = prepare.call(this, sql);
      if (sql.startsWith('SELECT input, appended FROM responses')) {
        const get = stmt.get.bind(stmt) as (...args: unknown[]) => unknown;
        (stmt as { get: unknown }).get = (...args: unknown[]) => (between?.(), get(...args));
      }
      return stmt;
    } as typeof prepare;
    let reader: SqliteStore;
    try {
      reader = new SqliteStore(file);
    } finally {
      Database.prototype.prepare = prepare;
    }
    try {
      between = () => {
        between = null;
        expect(writer.delete('resp_alice', 'alice')).toBe(true);
        writer.put(rec('resp_bob', 'bob', 'bob secret'));
      };
      expect(listed(reader, 'resp_alice', 'alice')).toBeUndefined();
      expect(between).toBeNull();
      // Bob's own listing is his.
      const index = listed(reader, 'resp_bob', 'bob')!;
      expect(index.items.map((i) => (i as { content: string }).content)).toEqual(['bob secret']);
    } finally {
      reader.close();
      writer.close();
    }
  });
});

describe('the SQLite store\'s kept lists', () => {
  it('count the heap their parse takes, not only their JSON', () => {
    // Each row is one item carrying 100,000 empty arrays: 300 KB of JSON, ~4 MB of heap parsed (V8: ~39 bytes an
    // empty array). Counted by its JSON, twenty such lists (80 MB of heap) all stayed under the 64 MiB bound
    // (outside attack: 110 rows held 888 MB); counted by their heap, the first listed has gone by the last.
    const store = new SqliteStore(':memory:');
    try {
      const extra = Array.from({ length: 100_000 }, () => []);
      const ids = Array.from({ length: 20 }, (_, i) => `resp_dense${i}`);
      for (const id of ids) store.put(record(id, [{ ...msg('x'), extra } as InputItem]));
      const first = listed(store, ids[0]!)!;
      for (const id of ids.slice(1)) listed(store, id);
      expect(listed(store, ids[0]!)).not.toBe(first);
      // One list alone is kept, and listed again from the cache.
      const last = listed(store, ids.at(-1)!);
      expect(listed(store, ids.at(-1)!)).toBe(last);
    } finally {
      store.close();
    }
  });

  it('parsedBytes adds each object and array to the JSON bytes', () => {
    expect(parsedBytes(10, [])).toBe(10 + PARSED_CONTAINER_BYTES);
    const items = [{ type: 'message', content: [{ type: 'input_text', text: '{[' }], extra: [[], {}, 'x', null] }];
    // The list, the item, its content and part, extra and its two: 7 containers; strings and null are not.
    expect(parsedBytes(100, items)).toBe(100 + 7 * PARSED_CONTAINER_BYTES);
  });
});

describe('InputItemsCache', () => {
  it('keeps the most recently listed within its item and byte bounds, and no list past them alone', () => {
    const cache = new InputItemsCache(10, 1000);
    const items = (n: number) => Array.from({ length: n }, () => msg('x'));
    const a = cache.get('a', 1, () => ({ items: items(4), bytes: 0 }));
    cache.get('b', 1, () => ({ items: items(4), bytes: 0 }));
    // `a` used again: `b` is the least recent, and goes when `c` passes the bound.
    expect(cache.get('a', 1, () => ({ items: items(4), bytes: 0 }))).toBe(a);
    cache.get('c', 1, () => ({ items: items(4), bytes: 0 }));
    expect(cache.held).toEqual({ lists: 2, items: 8, bytes: 0 });
    expect(cache.get('a', 1, () => ({ items: items(4), bytes: 0 }))).toBe(a);
    // Another version of `a` replaces it.
    expect(cache.get('a', 2, () => ({ items: items(4), bytes: 0 }))).not.toBe(a);
    cache.get('big', 1, () => ({ items: items(11), bytes: 0 }));
    cache.get('heavy', 1, () => ({ items: items(1), bytes: 1001 }));
    expect(cache.held).toEqual({ lists: 2, items: 8, bytes: 0 });
    cache.get('d', 1, () => ({ items: items(1), bytes: 900 }));
    cache.get('e', 1, () => ({ items: items(1), bytes: 200 }));
    expect(cache.held.bytes).toBe(200);
  });
});
