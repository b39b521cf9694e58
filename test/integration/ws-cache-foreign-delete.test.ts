/**
 * Two servers on one store file (two processes in deployment; here two in-process servers, each with its own SQLite
 * connection). A `DELETE` through one reached the other's ws-mode connection caches never: a connection on the other
 * server went on continuing the deleted response from its cache, answered `completed`, and stored a child whose chain
 * no later request could load (outside attack atk71 F1). The store logs each delete (`deletes`, schema 7); a ws-mode
 * plan reads the other connections' entries before it looks in its cache.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite.js';
import type { StoredResponse } from '../../src/store/types.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'llr-foreign-delete-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const create = (extra: Record<string, unknown> = {}) => ({ type: 'response.create', model: 'sim-model', store: true, input: 'go', ...extra });

describe('a DELETE through another server on the same store file', () => {
  it("of the cached response, or of an earlier one of its chain, is heard by this server's ws-mode cache: previous_response_not_found", async () => {
    const path = join(dir, 'shared.sqlite');
    const a = await testServer({ store: path });
    const b = await testServer({ store: path });
    const s = await RawSocket.connect(a.url);
    // A chain r1 ← r2 cached on a connection to A; a lone r3 cached on another lane.
    s.send(create({ input: 'first' }));
    const r1 = (await s.next('response.completed')).response.id;
    s.send(create({ input: 'second', previous_response_id: r1 }));
    const r2 = (await s.next('response.completed')).response.id;
    s.send(create({ input: 'third', stream_id: 'other' }));
    const r3 = (await s.next('response.completed')).response.id;
    await a.server.services.postWork.flush();
    // Deleted through B: r1 (an ancestor of A's cached r2) and r3 (cached itself).
    for (const id of [r1, r3]) expect((await fetch(`${b.url}/v1/responses/${id}`, { method: 'DELETE' })).status).toBe(200);
    s.send(create({ input: 'more', previous_response_id: r2 }));
    expect((await s.next('error')).error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    s.send(create({ input: 'more', previous_response_id: r3, stream_id: 'other' }));
    expect((await s.next('error', { skipErrors: true })).error).toMatchObject({ code: 'previous_response_not_found' });
    // Nothing of either was continued: A stored no child of them (the file holds r2 alone).
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare('SELECT id FROM responses').pluck().all()).toEqual([r2]);
    raw.close();
    // The connection goes on, and a chain of its own continues from the cache as before.
    s.send(create({ input: 'fresh' }));
    const r4 = (await s.next('response.completed')).response.id;
    s.send(create({ input: 'on', previous_response_id: r4 }));
    expect((await s.next('response.completed')).response.previous_response_id).toBe(r4);
    s.dispose();
  });
});

describe("a burst of another process's deletes past SYNC_TELLS_MAX", () => {
  it("empties only the deleting owner's caches: another key's cached chain goes on (atk72 F3, atk73 L1)", async () => {
    const { server, url } = await testServer({ apiKeys: ['key-one', 'key-two'] });
    const owner = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 24);
    const one = await RawSocket.connect(url, { headers: { Authorization: 'Bearer key-one' } });
    const two = await RawSocket.connect(url, { headers: { Authorization: 'Bearer key-two' } });
    // store: false, so a continuation works only from the connection's cache.
    one.send(create({ store: false, input: 'mine' }));
    const r1 = (await one.next('response.completed')).response.id;
    two.send(create({ store: false, input: 'theirs' }));
    const r2 = (await two.next('response.completed')).response.id;
    // A burst of key-one's deletes made elsewhere, none of them these responses, past a lowered bound.
    server.host.syncTellsMax = 2;
    let burst: Array<{ id: string; owner: string | null }> | null = ['resp_a', 'resp_b', 'resp_c'].map((id) => ({ id, owner: owner('key-one') }));
    (server.services.store as { othersDeletes?: () => unknown }).othersDeletes = () => {
      const b = burst ?? [];
      burst = null;
      return b;
    };
    two.send(create({ store: false, input: 'more', previous_response_id: r2 }));
    expect((await two.next('response.completed')).response.previous_response_id).toBe(r2);
    one.send(create({ store: false, input: 'more', previous_response_id: r1 }));
    expect((await one.next('error')).error).toMatchObject({ code: 'previous_response_not_found' });
    one.dispose();
    two.dispose();
  });
});

describe('the store file deletes log (SqliteStore.othersDeletes)', () => {
  const rec = (id: string): StoredResponse => ({ response: { id, output: [], previous_response_id: null } as unknown as StoredResponse['response'], input: [], owner: 'k', created_at: 1 });

  it("names other connections' deletes once, oldest first, not its own; 'all' once more were made than it keeps", () => {
    const path = join(dir, 'log.sqlite');
    const mine = new SqliteStore(path);
    const other = new SqliteStore(path);
    try {
      for (const id of ['r1', 'r2', 'r3', 'r4']) mine.put(rec(id));
      expect(mine.othersDeletes()).toEqual([]);
      expect(other.delete('r2', 'k')).toBe(true);
      expect(mine.delete('r1', 'k')).toBe(true);
      expect(other.delete('r3', 'k')).toBe(true);
      // Not found: not logged.
      expect(other.delete('nope', 'k')).toBe(false);
      expect(mine.othersDeletes()).toEqual([{ id: 'r2', owner: 'k' }, { id: 'r3', owner: 'k' }]);
      expect(mine.othersDeletes()).toEqual([]);
      expect(other.othersDeletes()).toEqual([{ id: 'r1', owner: 'k' }]);
      // Rows it had not read trimmed from the log (as past DELETES_KEPT): which were deleted is not known.
      expect(other.delete('r4', 'k')).toBe(true);
      const raw = new Database(path);
      try {
        raw.exec('DELETE FROM deletes WHERE seq <= (SELECT max(seq) FROM deletes)');
        raw.prepare('INSERT INTO deletes (id, owner, writer) VALUES (?, ?, ?)').run('r9', 'k', 'elsewhere');
      } finally {
        raw.close();
      }
      expect(mine.othersDeletes()).toBe('all');
      expect(mine.othersDeletes()).toEqual([]);
    } finally {
      mine.close();
      other.close();
    }
  });

  it('a file of schema 6 gains the log, empty, at its open', () => {
    const path = join(dir, 'v6.sqlite');
    new SqliteStore(path).close();
    const raw = new Database(path);
    raw.exec('DROP TABLE deletes');
    raw.pragma('user_version = 6');
    raw.close();
    const store = new SqliteStore(path);
    try {
      store.put(rec('x'));
      expect(store.delete('x', 'k')).toBe(true);
      expect(store.othersDeletes()).toEqual([]);
    } finally {
      store.close();
    }
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(7);
    expect(check.prepare('SELECT count(*) AS n FROM deletes').get()).toEqual({ n: 1 });
    check.close();
  });
});
