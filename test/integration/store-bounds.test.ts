/**
 * The bounds of a store on a file, over HTTP on a real server (port 0, a
 * SQLite file per test): past `--max-file-store-responses` the oldest
 * response is gone, and one older than `--store-ttl-ms` too (measured on
 * the server's injected wall clock, so no test waits); either way a GET
 * naming it is 404 and a `previous_response_id` naming it, or a response
 * whose chain reaches it, 400 `previous_response_not_found`, as for a
 * response never stored. The store's own behaviour (bytes, batches, reopen,
 * migration) is test/unit/store.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/model/clock.js';
import type { SqliteStore } from '../../src/store/index.js';
import type { Response } from '../../src/protocol/objects.js';
import { pino } from 'pino';
import { LlrServer } from '../../src/server.js';
import { testServer } from '../helpers/server.js';
import { captureLogger } from '../helpers/raw-http.js';
import Database from 'better-sqlite3';

const dir = mkdtempSync(join(tmpdir(), 'llr-store-bounds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const file = (): string => join(dir, `s${++files}.sqlite`);

const DAY = 24 * 60 * 60 * 1000;

function post(url: string, body: unknown): Promise<globalThis.Response> {
  return fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
}

async function create(url: string, input: string, previous?: string): Promise<Response> {
  const res = await post(url, { model: 'sim-model', input, ...(previous && { previous_response_id: previous }) });
  expect(res.status).toBe(200);
  return (await res.json()) as Response;
}

async function errorOf(res: globalThis.Response): Promise<{ status: number; code: string; param: string | null; message: string }> {
  const body = (await res.json()) as { error: { code: string; param: string | null; message: string } };
  return { status: res.status, ...body.error };
}

const NOT_FOUND = { status: 400, code: 'previous_response_not_found', param: 'previous_response_id' };

describe('a store on a file, bounded', () => {
  it('keeps at most maxFileStoreResponses: the oldest is 404, and a chain reaching it is previous_response_not_found', async () => {
    const { url } = await testServer({ store: file(), limits: { maxFileStoreResponses: 2 } });
    const r1 = await create(url, 'one');
    const r2 = await create(url, 'two', r1.id);
    const r3 = await create(url, 'three', r2.id); // r1 evicted
    expect((await fetch(`${url}/v1/responses/${r1.id}`)).status).toBe(404);
    expect((await fetch(`${url}/v1/responses/${r3.id}`)).status).toBe(200);
    // Named directly, and as the evicted root of r3's chain: the same error as for a response never stored.
    expect(await errorOf(await post(url, { model: 'sim-model', input: 'more', previous_response_id: r1.id }))).toMatchObject(NOT_FOUND);
    expect(await errorOf(await post(url, { model: 'sim-model', input: 'more', previous_response_id: r3.id }))).toMatchObject(NOT_FOUND);
    expect(await errorOf(await post(url, { model: 'sim-model', input: 'more', previous_response_id: 'resp_never' }))).toMatchObject(NOT_FOUND);
  });

  it('forgets a response storeTtlMs after its created_at: GET 404, previous_response_not_found, for it and a chain through it', async () => {
    let wall = Date.UTC(2026, 0, 1);
    const { url } = await testServer({ store: file(), limits: { storeTtlMs: 30 * DAY }, clock: { ...realClock, wallNow: () => wall } });
    const r1 = await create(url, 'one');
    wall += DAY;
    const r2 = await create(url, 'two', r1.id);
    expect(r2.created_at - r1.created_at).toBe(DAY / 1000);
    wall = r1.created_at * 1000 + 30 * DAY - 1;
    expect((await fetch(`${url}/v1/responses/${r1.id}`)).status).toBe(200);
    wall += 1; // r1 is 30 days old
    expect((await fetch(`${url}/v1/responses/${r1.id}`)).status).toBe(404);
    expect((await fetch(`${url}/v1/responses/${r2.id}`)).status).toBe(200);
    expect(await errorOf(await post(url, { model: 'sim-model', input: 'more', previous_response_id: r1.id }))).toMatchObject(NOT_FOUND);
    // r2 is stored but its chain's root expired: refused, the message naming the missing one.
    const broken = await errorOf(await post(url, { model: 'sim-model', input: 'more', previous_response_id: r2.id }));
    expect(broken).toMatchObject(NOT_FOUND);
    expect(broken.message).toContain(r1.id);
    expect(broken.message).toContain('expired');
  });

  it('counts the age from the creation\'s millisecond: created at x.999 s with a TTL of 1.5 s, kept until x.999 + 1.5 s', async () => {
    let wall = Date.UTC(2026, 0, 1) + 999;
    const { url } = await testServer({ store: file(), limits: { storeTtlMs: 1500 }, clock: { ...realClock, wallNow: () => wall } });
    const r1 = await create(url, 'one');
    expect(r1.created_at).toBe(Math.floor(wall / 1000)); // whole seconds on the wire
    wall = Date.UTC(2026, 0, 1) + 1500; // 0.501 s old: counted from created_at it was 1.5 s
    expect((await fetch(`${url}/v1/responses/${r1.id}`)).status).toBe(200);
    wall = Date.UTC(2026, 0, 1) + 999 + 1499;
    expect((await fetch(`${url}/v1/responses/${r1.id}`)).status).toBe(200);
    wall += 1;
    expect((await fetch(`${url}/v1/responses/${r1.id}`)).status).toBe(404);
  });

  it('stops the idle expiry sweep when the server shuts down (its timer is the store\'s; none without a TTL)', async () => {
    const { server, url } = await testServer({ store: file(), limits: { storeTtlMs: 1500 } });
    await create(url, 'one');
    const store = server.services.store as SqliteStore;
    expect(store.sweeping).toBe(true);
    await server.close();
    expect(store.sweeping).toBe(false);
    const { server: forever, url: url2 } = await testServer({ store: file(), limits: { storeTtlMs: Infinity } });
    await create(url2, 'one');
    expect((forever.services.store as SqliteStore).sweeping).toBe(false);
  });

  it("logs through the server's logger, once, an idle sweep that fails (its file locked by another process), and that it succeeded again", async () => {
    const f = file();
    const { logger, lines, waitFor } = captureLogger();
    const { url } = await testServer({ store: f, limits: { storeTtlMs: 1000 }, logger });
    await create(url, 'one');
    const other = new Database(f); // another process's writer, in a transaction past the sweep's wake
    try {
      other.exec('BEGIN IMMEDIATE');
      const failed = await waitFor((l) => l['code'] === 'store_sweep_failed');
      expect(failed).toMatchObject({ level: 40, err: { code: 'SQLITE_BUSY' } });
      other.exec('COMMIT');
      await waitFor((l) => l['code'] === 'store_sweep_recovered');
      expect(lines.filter((l) => l['code'] === 'store_sweep_failed')).toHaveLength(1);
      expect((await fetch(`${url}/health`)).status).toBe(200);
    } finally {
      other.close();
    }
  }, 20_000);

  it('closes its store when it cannot listen (the port taken): the sweep stops and the caller gets the error', async () => {
    const f = file();
    const { port } = await testServer({ store: f, limits: { storeTtlMs: 1500 } });
    // The same file, so the second store holds a response to sweep; the same port, so it cannot listen.
    const second = new LlrServer({ host: '127.0.0.1', port, store: f, limits: { storeTtlMs: 1500 }, logger: pino({ level: 'silent' }) });
    const store = second.services.store as SqliteStore;
    expect(store.sweeping).toBe(true);
    await expect(second.listen()).rejects.toMatchObject({ code: 'EADDRINUSE' });
    expect(store.sweeping).toBe(false);
  });
});
