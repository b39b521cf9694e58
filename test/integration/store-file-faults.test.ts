/**
 * A store on a file, attacked as an operator would: another process holding the file's write lock, the file deleted
 * or replaced under the running server. Each create / retrieve / delete gets a clear answer at once, never a server
 * frozen for seconds per request, and the server writes again once the condition clears. Real sockets (an in-process
 * server on port 0); the other process is a second SQLite connection.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { STORE_BUSY_WAIT_MS } from '../../src/store/sqlite.js';
import { testServer } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'llr-store-faults-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Answer {
  status: number;
  body: { id?: string; status?: string; error?: { code: string; message: string } | null };
}

async function call(url: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

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
