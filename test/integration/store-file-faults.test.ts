/**
 * A store on a file, attacked as an operator would: another process holding the file's write lock, a background
 * response in flight when its server is SIGKILLed, the file deleted or replaced under the running server, its
 * write-ahead log after a large write, the file unwritable. Each create / retrieve / delete gets a clear answer at
 * once (never a server frozen for seconds per request, never a 404 for a response the server gave out), and the server
 * writes again once the condition clears. Real sockets (in-process servers on port 0, and `llr serve` child processes
 * where a process must die); "another process" is a second SQLite connection where only its lock matters.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { STORE_BUSY_WAIT_MS, WAL_SIZE_LIMIT } from '../../src/store/sqlite.js';
import { ORPHANED_MESSAGE } from '../../src/store/runner.js';
import { call, storeChildren } from '../helpers/serve-child.js';
import { testServer } from '../helpers/server.js';
import { captureLogger } from '../helpers/raw-http.js';

const { dir, serve: serveChild } = storeChildren('llr-store-faults-');

const create = (url: string, input = 'hello') => call(url, 'POST', '/v1/responses', { model: 'm', input, store: true });

describe('a store file another process holds the write lock of', () => {
  it('fails the writes waiting at it once, not once per write, and writes again once the lock is released', async () => {
    const path = join(dir, 'locked.sqlite');
    const { url } = await testServer({ store: path });
    const first = await create(url);
    expect(first.body.status).toBe('completed');
    const other = new Database(path);
    try {
      other.exec('BEGIN IMMEDIATE');
      const started = performance.now();
      const answers = await Promise.all([create(url, 'a'), create(url, 'b'), create(url, 'c'), create(url, 'd')]);
      // Each write waited for the lock in turn (busy_timeout, 5 s, the event loop held throughout): 20 s for four.
      expect(performance.now() - started).toBeLessThan(2 * STORE_BUSY_WAIT_MS + 1000);
      for (const a of answers) {
        expect(a.status).toBe(500);
        expect(a.body.status).toBe('failed');
        expect(a.body.error!.message).toMatch(/could not be stored/);
      }
      // Reads go on beside the other writer (WAL).
      expect((await call(url, 'GET', `/v1/responses/${first.body.id}`)).status).toBe(200);
      // A delete is refused, saying why (it was a bare 500 "The server had an error while processing the request.").
      const refused = await call(url, 'DELETE', `/v1/responses/${first.body.id}`);
      expect([refused.status, refused.body.error?.code]).toEqual([503, 'store_unavailable']);
      expect(refused.body.error?.message).toMatch(/SQLITE_BUSY: database is locked/);
      other.exec('COMMIT');
      const after = await create(url, 'after');
      expect(after.body.status).toBe('completed');
      expect((await call(url, 'GET', `/v1/responses/${after.body.id}`)).status).toBe(200);
      // And a later lock is waited for again (a short one another writer holds is not a failure).
      other.exec('BEGIN IMMEDIATE');
      const again = performance.now();
      expect((await create(url, 'again')).status).toBe(500);
      expect(performance.now() - again).toBeGreaterThanOrEqual(STORE_BUSY_WAIT_MS * 0.9);
      other.exec('COMMIT');
    } finally {
      other.close();
    }
  }, 40_000);
});

describe('a background response in flight when its server is killed', () => {
  it('is answered failed, not 404, by a server on the same file once its own is gone, and is not continued', async () => {
    const path = join(dir, 'background.sqlite');
    // A slow model: the run is still generating when the server is killed.
    const child = await serveChild(path, ['--tokens-per-second', '2', '--ttft-ms', '0']);
    const started = await call(child.url, 'POST', '/v1/responses', { model: 'm', input: 'a long task', background: true, max_output_tokens: 4000 });
    expect(started.body.status).toBe('in_progress');
    const id = started.body.id!;
    // Another server on the file (readers beside the writer are fine): the run is alive elsewhere, so it is in progress.
    const beside = await testServer({ store: path });
    const seen = await call(beside.url, 'GET', `/v1/responses/${id}`);
    expect([seen.status, seen.body.status]).toEqual([200, 'in_progress']);
    // Refused as the server running it refuses it (`invalid_value`), not "not found": retrieve here finds it, and a
    // client that drops the id on "not found" would send the rest without its context (atk74 F1).
    const early = await call(beside.url, 'POST', '/v1/responses', { model: 'm', input: 'next', previous_response_id: id });
    expect([early.status, early.body.error?.code, early.body.error?.param]).toEqual([400, 'invalid_value', 'previous_response_id']);
    expect(early.body.error?.message).toMatch(/still in progress in another server/);
    const own = await call(child.url, 'POST', '/v1/responses', { model: 'm', input: 'next', previous_response_id: id });
    expect([own.status, own.body.error?.code, own.body.error?.param]).toEqual([400, 'invalid_value', 'previous_response_id']);

    // Nor cancelled or deleted through this server: its run is the other's, which would store it again at its end (a
    // DELETE answered deleted: true, and the response came back), and a cancel answered the stored in_progress record.
    for (const [method, path] of [['DELETE', `/v1/responses/${id}`], ['POST', `/v1/responses/${id}/cancel`]] as const) {
      const refused = await call(beside.url, method, path);
      expect([refused.status, refused.body.error?.code]).toEqual([409, 'response_running_elsewhere']);
      // The SDKs retry a 409 as a lock timeout; this one lasts as long as the other process's run.
      expect(refused.shouldRetry).toBe('false');
    }
    expect((await call(child.url, 'GET', `/v1/responses/${id}`)).body.status).toBe('in_progress');

    child.proc.kill('SIGKILL');
    await child.exited;
    // Its server gone, every server on the file (this one, and one opened now: a restart) answers it failed; before
    // it was stored only at its end, so a poller was told 404, as for an id that never existed.
    for (const url of [beside.url, (await testServer({ store: path })).url]) {
      const after = await call(url, 'GET', `/v1/responses/${id}`);
      expect(after.status).toBe(200);
      expect(after.body).toMatchObject({ id, status: 'failed', error: { code: 'server_error', message: ORPHANED_MESSAGE } });
      const next = await call(url, 'POST', '/v1/responses', { model: 'm', input: 'next', previous_response_id: id });
      expect([next.status, next.body.error?.code, next.body.error?.param]).toEqual([400, 'invalid_value', 'previous_response_id']);
      expect(next.body.error?.message).toMatch(/has not ended, and the server that ran it stopped/);
    }
    // Its server gone, it is this one's to cancel (it has ended: its failed Response) and to delete.
    const cancelled = await call(beside.url, 'POST', `/v1/responses/${id}/cancel`);
    expect([cancelled.status, cancelled.body.status]).toEqual([200, 'failed']);
    expect((await call(beside.url, 'DELETE', `/v1/responses/${id}`)).status).toBe(200);
    expect((await call(beside.url, 'GET', `/v1/responses/${id}`)).status).toBe(404);
  }, 60_000);
});

describe('a store file deleted or replaced under the running server', () => {
  it('is opened again at its path: what is stored after is on the file there, not in the deleted one', async () => {
    const path = join(dir, 'gone', 'store.sqlite');
    const { logger, lines } = captureLogger();
    const { url } = await testServer({ store: path, logger });
    const before = await create(url, 'before');
    expect(before.body.status).toBe('completed');
    // The operator wipes the store (its directory too) while the server runs.
    rmSync(join(dir, 'gone'), { recursive: true });
    const after = await create(url, 'after');
    expect([after.status, after.body.status]).toEqual([200, 'completed']);
    expect((await call(url, 'GET', `/v1/responses/${after.body.id}`)).status).toBe(200);
    expect((await call(url, 'GET', `/v1/responses/${before.body.id}`)).status).toBe(404);
    expect(lines.filter((l) => l['code'] === 'store_file_replaced')).toHaveLength(1);
    // A server started on the file now (a restart) has what was answered completed. It was written to the deleted
    // file, which nothing named any more: gone at the next start.
    const restarted = await testServer({ store: path });
    expect((await call(restarted.url, 'GET', `/v1/responses/${after.body.id}`)).status).toBe(200);
  });

  it('refuses clearly while the file there is not a database, and works again once one is back', async () => {
    const path = join(dir, 'replaced.sqlite');
    const { url } = await testServer({ store: path });
    const before = await create(url, 'before');
    rmSync(path);
    rmSync(`${path}-wal`, { force: true });
    rmSync(`${path}-shm`, { force: true });
    writeFileSync(path, 'notes, not a database\n'.repeat(100));
    const refused = await create(url, 'refused');
    expect([refused.status, refused.body.status]).toEqual([500, 'failed']);
    expect(refused.body.error!.message).toMatch(/could not be stored/);
    const read = await call(url, 'GET', `/v1/responses/${before.body.id}`);
    expect([read.status, read.body.error?.code]).toEqual([503, 'store_unavailable']);
    expect(read.body.error?.message).toMatch(/SQLITE_NOTADB: file is not a database/);
    expect(read.body.error?.message).not.toContain(path);
    rmSync(path);
    const back = await create(url, 'back');
    expect([back.status, back.body.status]).toEqual([200, 'completed']);
    expect((await call(url, 'GET', `/v1/responses/${back.body.id}`)).status).toBe(200);
  });
});

describe("a store file's write-ahead log", () => {
  it('shrinks after a large write by itself, instead of staying that large while the server runs or until a later write', async () => {
    const path = join(dir, 'wal.sqlite');
    const { url, server } = await testServer({ store: path });
    const big = await create(url, 'x'.repeat(6_000_000));
    expect(big.body.status).toBe('completed');
    // The large transaction's pages are checkpointed in a turn of their own after it commits (two setImmediates after
    // its put, against the next request's socket reads), and the log cut to nothing. Without a bound the file kept the
    // largest transaction's size (14 MB after two 7 MB inputs, measured) until the server stopped; with only the bound
    // it kept it until some later write (a server gone idle: for good, outside attack atk62 F4).
    await server.services.postWork.flush();
    for (let turn = 0; turn < 3; turn++) await new Promise<void>((resolve) => setImmediate(resolve));
    expect(statSync(`${path}-wal`).size).toBeLessThanOrEqual(WAL_SIZE_LIMIT);
    expect((await create(url, 'small')).body.status).toBe('completed');
    expect(statSync(`${path}-wal`).size).toBeLessThanOrEqual(WAL_SIZE_LIMIT);
  });
});

/**
 * Makes `path` unwritable (`on`) or writable again: chmod for a user, `chattr +i` for root (whom permissions do not
 * stop). Undefined when neither can be done here (root on a file system without the immutable attribute).
 */
function unwritable(path: string, on: boolean): boolean {
  if (process.getuid?.() !== 0) {
    chmodSync(path, on ? 0o444 : 0o644);
    return true;
  }
  try {
    execFileSync('chattr', [on ? '+i' : '-i', path], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('a store file that cannot be written', () => {
  it('fails writes clearly while it is so, and writes again once it can be written', async (ctx) => {
    const path = join(dir, 'readonly.sqlite');
    const first = await testServer({ store: path });
    const before = await create(first.url, 'before');
    await first.server.close();
    if (!unwritable(path, true)) return ctx.skip();
    try {
      // Opened read-only (SQLite falls back to it): reads work, writes are refused.
      const { url } = await testServer({ store: path });
      expect((await call(url, 'GET', `/v1/responses/${before.body.id}`)).status).toBe(200);
      const refused = await create(url, 'refused');
      expect([refused.status, refused.body.status]).toEqual([500, 'failed']);
      const del = await call(url, 'DELETE', `/v1/responses/${before.body.id}`);
      expect([del.status, del.body.error?.code]).toEqual([503, 'store_unavailable']);
      expect(del.body.error?.message).toMatch(/SQLITE_READONLY/);
      unwritable(path, false);
      // The connection stayed read-only: every write failed until a restart.
      const after = await create(url, 'after');
      expect([after.status, after.body.status]).toEqual([200, 'completed']);
      expect((await call(url, 'DELETE', `/v1/responses/${before.body.id}`)).status).toBe(200);
    } finally {
      unwritable(path, false);
    }
  });
});
