/**
 * `SqliteStore`: the response store on SQLite through better-sqlite3, so
 * stored responses survive a server restart; the default for HTTP mode.
 *
 * One `responses` row per response (the Response and its own input as JSON)
 * and one `items` row per findable item, so getItem is an index lookup and
 * chain() is one recursive query for its links, then its records a page at a time. All calls are synchronous on the caller's
 * thread: that is real request-path work, and the HTTP baseline measures it.
 * A record whose strings are long (past `NATIVE_TEXT_CHARS`) can have its
 * JSON made ahead in slices (`prepare`, which the engine runs before the
 * run ends) so that its put only runs the transaction.
 *
 * Bounded (`StoreBounds`): past `maxResponses` responses or `maxBytes` of
 * their JSON the oldest puts (rowid order) are deleted with their items,
 * never the one just put; a response older than `ttlMs` is treated as gone
 * by every read and deleted by later puts and by the idle sweep
 * (`ExpirySweep`: a timer set for when the oldest row expires), `EXPIRE_BATCH`
 * at a time (oldest `created_at` first, through an index). The count and bytes are kept in
 * memory, counted once at open (a covering index, not the JSON), so a put
 * never scans the table; a file opened under lower bounds is trimmed at
 * open (`OPEN_TRIM_BATCH` rows a transaction, so the WAL stays small). Deleted pages are reused, not returned: the file stays near its
 * high-water mark. The counts are this process's: one writing process per
 * file (readers beside it are fine); a second writer's puts are not seen
 * until a reopen, so the bounds would be passed by what it wrote. With a TTL,
 * every process on a file sweeps it (each counts what it deleted; a store on a
 * file looks again every `SWEEP_MAX_DELAY_MS` even when it holds nothing, as
 * another process may have written to it), and a count that would drop below
 * zero (another process's rows deleted here) stays at zero; a count that
 * another process's deletes left too high is taken again (`PRAGMA
 * data_version` moved) before it evicts anything.
 *
 * A file deleted or replaced under the running server is opened again at
 * its path (`#checkFile`), so what is stored after is on the file a restart
 * reads. Migrates schema versions 1 to 4 to 5 (an unknown version is refused, not
 * guessed at; the tables and migrations are store/sqlite-schema.ts, the rows
 * and their serialisation store/sqlite-rows.ts); leaves out vacuuming.
 */
import { runSync, type Work } from '../cooperative.js';
import { makeDirs } from '../make-dirs.js';
import { randomUUID } from 'node:crypto';
import { existsSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { NATIVE_TEXT_CHARS, textOver } from '../protocol/json-chunked.js';
import type { InputItem, OutputItem } from '../protocol/objects.js';
import { CREATED_MS, MIGRATE_2_TO_3, MIGRATE_3_TO_4, MIGRATE_4_TO_5, MIGRATE_5_TO_6, MIGRATE_6_TO_7, SCHEMA, SCHEMA_VERSION } from './sqlite-schema.js';
import { EncodedPut, encodeNow, encodeWork, toRecord, toRecordWork, type ChainRow, type ItemParams, type LinkRow, type PutParams, type RecordRow } from './sqlite-rows.js';
import { InputItemsCache, parseListWork, parsedBytesWork, type InputItemIndex, type ItemsLoad } from './input-items.js';
import { CHAIN_PAGE_BYTES, CHAIN_PAGE_LINKS, EXPIRE_BATCH, EXPIRE_BATCH_BYTES, ExpirySweep, MAX_CHAIN_LINKS, UNBOUNDED, createdMs, expiryCutoff, newCounters, ownInputItems, type AppendedItems, type PreparedPut, type ResponseStore, type StoreBounds, type StoreLog, type StoredResponse } from './types.js';

/**
 * Rows (expired or evicted) one transaction deletes when a file is trimmed at open: the WAL then grows by about
 * one batch's pages before the automatic checkpoint reuses it, and a batch's ids are all that is held in memory.
 */
export const OPEN_TRIM_BATCH = 1_000;

/**
 * How long a write waits for another process's write lock on the file (SQLite's `busy_timeout`) before it fails with
 * SQLITE_BUSY. The wait holds the event loop (better-sqlite3 is synchronous), so it is short, and once a write has
 * waited it out the next writes do not wait at all (`#write`) until one gets the lock: at better-sqlite3's default,
 * 5 s, four creates made while another process held the lock froze the server (every socket, `/health`) for 20 s.
 */
export const STORE_BUSY_WAIT_MS = 1_000;

/**
 * Bytes the write-ahead log (`PATH-wal`) is truncated to once it has been checkpointed (SQLite's
 * `journal_size_limit`): its automatic checkpoint's size, 1,000 pages of 4 KiB. Without it the log kept the size of
 * the largest transaction since the server started (a put of a 16 MiB body is tens of MB), on disk until it stopped.
 */
export const WAL_SIZE_LIMIT = 4 * 1024 * 1024;

/**
 * A put of at least this many bytes of JSON commits with SQLite's automatic checkpoint off, and the log is
 * checkpointed in an event-loop turn of its own after it (`#deferCheckpoint`). The automatic checkpoint (1,000 pages
 * of 4 KiB) runs inside the commit that passes it, so a put of a 16 MiB body also copied the whole log, itself
 * included, in its turn: 260–340 ms in one `put`, against ~100 ms for the insert alone and ~200 ms for the
 * checkpoint alone (a 16 MiB request held `/health` over the 250 ms bound with the file store). Every other write
 * keeps the automatic checkpoint, which counts the log's real pages: a store counting its writes' JSON instead let
 * deletes of responses with thousands of indexed items grow the log to 1.5 GB unseen (outside attack).
 */
export const LARGE_PUT_BYTES = 1024 * 1024;
/** SQLite's default automatic checkpoint, in pages (set explicitly: a large put turns it off for its own commit). */
const AUTOCHECKPOINT_PAGES = 1000;

/**
 * The latest DELETEs the deletes log keeps for other processes on the file (`othersDeletes`): one that reads less often
 * than this many deletes are made takes every cached response as deleted (a miss, never a wrong hit). About 100 bytes
 * a row on disk.
 */
export const DELETES_KEPT = 10_000;

/** A read looks whether the store's file was deleted or replaced (`#checkFile`) at most this often (ms); a write always does. */
export const FILE_CHECK_MS = 250;

/** An error of SQLite's meaning the connection cannot write the file (SQLITE_READONLY and its extended codes). */
function isReadOnly(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_READONLY');
}

/** An error of SQLite's meaning the file is locked by another connection (SQLITE_BUSY and its extended codes). */
function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/** A listed row's version (`#selectVersion`): its rowid and the UTF-8 bytes of its input and appended JSON. */
interface VersionRow {
  row: number;
  input: number;
  appended: number | null;
}

interface IdOwner {
  id: string;
  owner: string | null;
}

/** A deleted row: which items to delete with it, and what it held. */
interface Gone {
  id: string;
  bytes: number;
}

/** What a put's transaction changed; applied to the store's fields only once it committed. */
interface Tally {
  count: number;
  bytes: number;
  evicted: number;
  expired: number;
}

export class SqliteStore implements ResponseStore {
  readonly counters = newCounters();
  #db!: Database.Database;
  #insertResponse!: Database.Statement<[PutParams]>;
  #insertItem!: Database.Statement<[ItemParams]>;
  #deleteResponse!: Database.Statement<[IdOwner], Gone & { created_ms: number }>;
  #deleteById!: Database.Statement<[string], Gone>;
  #deleteItems!: Database.Statement<[string]>;
  #deleteOldest!: Database.Statement<[{ keep: string | null; n: number }], Gone>;
  #selectExpired!: Database.Statement<[{ cutoff: number; second: number; n: number }], { row: number; bytes: number }>;
  #deleteRow!: Database.Statement<[number], Gone>;
  #selectResponse!: Database.Statement<[IdOwner & { cutoff: number }], RecordRow>;
  #hasResponse!: Database.Statement<[IdOwner & { cutoff: number }], unknown>;
  #selectRunner!: Database.Statement<[IdOwner & { cutoff: number }], { runner: string | null }>;
  #selectPrevious!: Database.Statement<[IdOwner & { cutoff: number; second: number }], { previous_response_id: string | null }>;
  #selectItem!: Database.Statement<[{ item_id: string; owner: string | null; cutoff: number }], { item: string }>;
  #selectLinks!: Database.Statement<[IdOwner & { limit: number; cutoff: number; second: number }], LinkRow>;
  #selectPage!: Database.Statement<[{ ids: string; owner: string | null; cutoff: number; second: number }], ChainRow & { at: number }>;
  #selectVersion!: Database.Statement<[IdOwner & { cutoff: number; second: number }], VersionRow>;
  #selectInput!: Database.Statement<[VersionRow & IdOwner & { cutoff: number; second: number }], { input: string; appended: string | null }>;
  #put!: (p: PutParams, items: ItemParams[]) => Tally;
  #delete!: (key: IdOwner) => Tally | undefined;
  #trim!: (limit: number) => Tally;
  #sweepStep!: Database.Transaction<() => Tally & { more: boolean }>;
  #selectOldest!: Database.Statement<[], { s: number | null }>;
  #selectTotals!: Database.Statement<[], { n: number; b: number }>;
  #dataVersion!: Database.Statement<[], number>;
  #logDelete!: Database.Statement<[{ id: string; owner: string | null; writer: string }]>;
  #trimDeletes!: Database.Statement<[number]>;
  #selectDeletes!: Database.Statement<[{ after: number; n: number }], { seq: number; id: string; owner: string | null; writer: string }>;
  #selectDeletesSpan!: Database.Statement<[], { lo: number | null; hi: number | null }>;
  /** This connection, in the deletes log: another's rows are others' deletes (two stores in one process included). */
  readonly #writer = randomUUID();
  /** The last row of the deletes log read (`othersDeletes`), and `PRAGMA data_version` then (-1: not read yet). */
  #deletesRead = 0;
  #deletesVersion = -1;
  /** `PRAGMA data_version` when the count was last taken: another connection's commit changes it (this one's never). */
  #countedAt = 0;
  /** Deletes expired rows with no put to do it (only with a TTL): set for when the oldest row expires. */
  #sweep!: ExpirySweep;
  /** Listed records' input items, parsed once (`inputItems`); dropped with every write to their row. */
  readonly #listed = new InputItemsCache();

  /** The connection's `busy_timeout` now (ms): `STORE_BUSY_WAIT_MS`, or 0 while writes do not wait (`#write`). */
  #busyWait = -1;
  /** A write waited the whole `STORE_BUSY_WAIT_MS` for another process's lock and failed: writes do not wait until one gets it. */
  #locked = false;
  /** A checkpoint queued after a large put (`#deferCheckpoint`). */
  #checkpointQueued = false;

  /** Responses and their bytes (the `bytes` column's sum), counted at open and kept by every write. */
  #count = 0;
  #bytes = 0;
  readonly #path: string;
  readonly #log: StoreLog | undefined;
  /**
   * The file open (`statSync`'s dev and inode), checked against what the path names at every call (`#checkFile`): a file
   * deleted or replaced under the server is opened again at its path. Undefined for `:memory:`; null while no file is
   * open (opening it again failed: every call tries again).
   */
  #file: { dev: number; ino: number } | null | undefined;
  /** A write failed with SQLITE_READONLY: the next write opens the file again (`#checkFile`). */
  #readOnly = false;
  /** When `#checkFile` last looked (`performance.now()`). */
  #checkedAt = -Infinity;

  /**
   * `path` is a file path (parent directories are created) or `':memory:'`;
   * `bounds` limits the responses kept (count, bytes: the oldest put goes)
   * and their age. A file already past them is trimmed here. `log`: where the
   * idle sweep reports that it fails (`ExpirySweep`).
   */
  constructor(
    path: string,
    readonly bounds: StoreBounds = UNBOUNDED,
    log?: StoreLog,
  ) {
    this.#path = path;
    this.#log = log;
    this.#file = path === ':memory:' ? undefined : null;
    this.#open();
  }

  /** Opens the connection at the store's path (the constructor, and `#checkFile` once the file there changed). */
  #open(): void {
    const path = this.#path;
    const bounds = this.bounds;
    const log = this.#log;
    if (path !== ':memory:') makeDirs(dirname(path));
    this.#db = new Database(path);
    this.#busyWait = -1;
    this.#locked = false;
    try {
      this.#prepare(path, bounds, log);
    } catch (err) {
      if (this.#db.open) this.#db.close();
      throw err;
    }
  }

  #prepare(path: string, bounds: StoreBounds, log: StoreLog | undefined): void {
    this.#waitForLock(STORE_BUSY_WAIT_MS);
    // WAL lets readers (a second server process, the sqlite3 shell) run beside
    // the writer; NORMAL sync under WAL survives a process crash, and losing
    // the last commits to a power cut is acceptable for a research server.
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('synchronous = NORMAL');
    this.#db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT}`);
    this.#db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    this.#migrate(path);
    if (this.#file !== undefined) {
      const { dev, ino } = statSync(path);
      this.#file = { dev, ino };
    }

    const db = this.#db;
    this.#insertResponse = db.prepare(
      `INSERT INTO responses (id, owner, previous_response_id, created_at, created_at_ms, response, input, appended, bytes, runner, protocol)
       VALUES (@id, @owner, @previous_response_id, @created_at, @created_at_ms, @response, @input, @appended, @bytes, @runner, @protocol)`,
    );
    this.#insertItem = db.prepare(
      `INSERT OR REPLACE INTO items (item_id, response_id, owner, item)
       VALUES (@item_id, @response_id, @owner, @item)`,
    );
    this.#deleteResponse = db.prepare(`DELETE FROM responses WHERE id = @id AND owner IS @owner RETURNING id, bytes, ${CREATED_MS} AS created_ms`);
    this.#deleteById = db.prepare(`DELETE FROM responses WHERE id = ? RETURNING id, bytes`);
    this.#deleteItems = db.prepare(`DELETE FROM items WHERE response_id = ?`);
    // The oldest puts: rowid grows with each insert (a replace deletes and re-inserts), so the table's own
    // order is put order and the first rows are found without a scan. `keep`: the response just put.
    this.#deleteOldest = db.prepare(
      `DELETE FROM responses WHERE rowid IN (SELECT rowid FROM responses WHERE id IS NOT @keep ORDER BY rowid LIMIT @n)
       RETURNING id, bytes`,
    );
    // Through the (created_at, bytes) index: a row of an earlier second than the cutoff's (`second`) is expired
    // whatever its milliseconds; only the cutoff's own second needs the row's `created_at_ms`.
    // Their sizes too (the index holds them): a step stops at EXPIRE_BATCH_BYTES, and deletes by rowid.
    this.#selectExpired = db.prepare(
      `SELECT rowid AS row, bytes FROM responses WHERE created_at <= @second AND (created_at < @second OR ${CREATED_MS} <= @cutoff)
        ORDER BY created_at LIMIT @n`,
    );
    this.#deleteRow = db.prepare(`DELETE FROM responses WHERE rowid = ? RETURNING id, bytes`);
    // Every read sees only rows above the expiry cutoff: an expired response is gone at once, deleted or not.
    this.#hasResponse = db.prepare(`SELECT 1 FROM responses WHERE id = @id AND owner IS @owner AND ${CREATED_MS} > @cutoff`);
    // `runner` comes after the JSON: reading it walks a large row's overflow pages (a DELETE, a cancel: not per page).
    this.#selectRunner = db.prepare(`SELECT runner FROM responses WHERE id = @id AND owner IS @owner AND ${CREATED_MS} > @cutoff`);
    // A row's first columns only (as `#selectVersion`): `created_at_ms` only for a row of the cutoff's own second.
    this.#selectPrevious = db.prepare(
      `SELECT previous_response_id FROM responses
        WHERE id = @id AND owner IS @owner AND (created_at > @second OR (created_at = @second AND ${CREATED_MS} > @cutoff))`,
    );
    this.#selectResponse = db.prepare(
      `SELECT owner, created_at, created_at_ms, response, input, appended, runner, protocol FROM responses
        WHERE id = @id AND owner IS @owner AND ${CREATED_MS} > @cutoff`,
    );
    // A listing's check (the owner's live row) and its version, reading only the row's first columns: `bytes` and
    // `created_at_ms` come after the JSON, and reading them walked a 3 MB row's overflow pages (from the OS's cache
    // past SQLite's) on every page. `created_at_ms` is read only for a row of the cutoff's own second, and the JSON's
    // sizes come from the row's header (octet_length loads nothing). A replace re-inserts (a new rowid, or the same
    // one reused, with other JSON: an append grows `appended`); this process's writes drop the cached list anyway,
    // the version covers most of another writer's.
    this.#selectVersion = db.prepare(
      `SELECT rowid AS row, octet_length(input) AS input, octet_length(appended) AS appended FROM responses
        WHERE id = @id AND owner IS @owner AND (created_at > @second OR (created_at = @second AND ${CREATED_MS} > @cutoff))`,
    );
    // The row `#selectVersion` found, still that response at that version and still the lister's live response: another
    // process may have deleted it and inserted another response's row under the same rowid (the largest is reused)
    // between the two reads, and a listing of one owner's response then answered another owner's items. The input is
    // read when the listing's turn in the queue of cold listings comes, seconds later: by then the id may have been put
    // again by another owner (the same rowid, JSON of the same lengths: the version alone matched and the listing
    // answered the other owner's items), or the response may have expired (listed, where a read then says 404).
    this.#selectInput = db.prepare(
      `SELECT input, appended FROM responses
        WHERE rowid = @row AND id = @id AND octet_length(input) = @input AND octet_length(appended) IS @appended
          AND owner IS @owner AND (created_at > @second OR (created_at = @second AND ${CREATED_MS} > @cutoff))`,
    );
    // Newest put wins when an owner holds the same item id in several
    // responses; rowid grows with each insert, and a replace re-inserts.
    this.#selectItem = db.prepare(
      `SELECT i.item FROM items i JOIN responses r ON r.id = i.response_id
        WHERE i.item_id = @item_id AND i.owner IS @owner AND coalesce(r.created_at_ms, r.created_at * 1000) > @cutoff
        ORDER BY i.rowid DESC LIMIT 1`,
    );
    // The walk follows only the owner's live rows, so a foreign, missing or expired link ends it with one all-null row
    // (LEFT JOIN) that marks the chain broken. It reads each row's first columns only (as `#selectVersion` does: the
    // JSON's sizes from the row's header, `created_at_ms` only for a row of the cutoff's own second). The records are
    // then read a page at a time (`#selectPage`, `chainWork`): one query reading a 9,001-link chain's 27 MB whole, then
    // parsed in the same turn, held the event loop 0.5–1 s (outside attack).
    this.#selectLinks = db.prepare(
      `WITH RECURSIVE walk(id, depth) AS (
         SELECT @id, 0
         UNION ALL
         SELECT r.previous_response_id, walk.depth + 1
           FROM walk JOIN responses r ON r.id = walk.id AND r.owner IS @owner
                AND (r.created_at > @second OR (r.created_at = @second AND ${CREATED_MS} > @cutoff))
          WHERE r.previous_response_id IS NOT NULL AND walk.depth < @limit - 1
       )
       SELECT walk.id AS id, r.rowid AS row, r.previous_response_id,
              octet_length(r.response) + octet_length(r.input) + coalesce(octet_length(r.appended), 0) AS bytes
         FROM walk LEFT JOIN responses r ON r.id = walk.id AND r.owner IS @owner
              AND (r.created_at > @second OR (r.created_at = @second AND ${CREATED_MS} > @cutoff))
        ORDER BY walk.depth DESC`,
    );
    // A page of a chain's records by id (a JSON array), each with its place in it; a link gone since the walk (deleted,
    // expired, put again by another owner) is missing. No `ORDER BY`: it sorted the rows, JSON and all, through a
    // temporary b-tree (a 16 MiB row took ~390 ms to read that way, ~60 ms without); the caller puts them in order.
    this.#selectPage = db.prepare(
      `SELECT j.key AS at, r.previous_response_id, r.owner, r.created_at, r.created_at_ms, r.response, r.input, r.appended, r.runner, r.protocol
         FROM json_each(@ids) j JOIN responses r ON r.id = j.value AND r.owner IS @owner
              AND (r.created_at > @second OR (r.created_at = @second AND ${CREATED_MS} > @cutoff))`,
    );

    this.#put = db.transaction((p: PutParams, items: ItemParams[]): Tally => {
      const tally: Tally = { count: this.#count, bytes: this.#bytes, evicted: 0, expired: 0 };
      const old = this.#deleteById.get(p.id);
      if (old) this.#gone(old, tally);
      else this.#deleteItems.run(p.id);
      this.#insertResponse.run(p);
      for (const item of items) this.#insertItem.run(item);
      tally.count++;
      tally.bytes += p.bytes;
      this.#expire(tally, EXPIRE_BATCH, EXPIRE_BATCH_BYTES);
      this.#evict(tally, p.id);
      return tally;
    });
    this.#delete = db.transaction((key: IdOwner): Tally | undefined => {
      const row = this.#deleteResponse.get(key);
      if (!row) return undefined;
      // Logged for the other processes on the file, the latest DELETES_KEPT kept.
      const seq = Number(this.#logDelete.run({ id: key.id, owner: key.owner, writer: this.#writer }).lastInsertRowid);
      if (seq > DELETES_KEPT) this.#trimDeletes.run(seq - DELETES_KEPT);
      const tally: Tally = { count: this.#count, bytes: this.#bytes, evicted: 0, expired: 0 };
      this.#gone(row, tally);
      // An expired response is deleted all the same, but it was already gone: the caller is told it was not found.
      if (row.created_ms <= expiryCutoff(this.bounds)) tally.expired++;
      return tally;
    });
    // At most `limit` rows expired or evicted: the open trims a file in transactions of OPEN_TRIM_BATCH.
    this.#trim = db.transaction((limit: number): Tally => {
      const tally: Tally = { count: this.#count, bytes: this.#bytes, evicted: 0, expired: 0 };
      this.#expire(tally, limit);
      this.#evict(tally, null, limit - tally.expired);
      return tally;
    });

    // One step of the idle sweep: what a put's expiry deletes, in a transaction of its own.
    this.#sweepStep = db.transaction((): Tally & { more: boolean } => {
      const tally: Tally = { count: this.#count, bytes: this.#bytes, evicted: 0, expired: 0 };
      const more = this.#expire(tally, EXPIRE_BATCH, EXPIRE_BATCH_BYTES);
      return { ...tally, more };
    });
    // The oldest second held, from the index's first entry (its rows' milliseconds are not read: they come after the JSON).
    this.#selectOldest = db.prepare(`SELECT min(created_at) AS s FROM responses`);

    // Counted from the covering index (created_at, bytes): the JSON is not read.
    this.#selectTotals = db.prepare(`SELECT count(*) AS n, total(bytes) AS b FROM responses`);
    this.#dataVersion = db.prepare('PRAGMA data_version').pluck() as Database.Statement<[], number>;
    this.#logDelete = db.prepare('INSERT INTO deletes (id, owner, writer) VALUES (@id, @owner, @writer)');
    this.#trimDeletes = db.prepare('DELETE FROM deletes WHERE seq <= ?');
    this.#selectDeletes = db.prepare('SELECT seq, id, owner, writer FROM deletes WHERE seq > @after ORDER BY seq LIMIT @n');
    this.#selectDeletesSpan = db.prepare('SELECT min(seq) AS lo, max(seq) AS hi FROM deletes');
    // Deletes before this connection opened are of no cache it serves.
    this.#deletesRead = this.#selectDeletesSpan.get()?.hi ?? 0;
    this.#deletesVersion = -1;
    // The version first: a commit between the two reads only costs a recount later.
    this.#countedAt = this.#dataVersion.get()!;
    const totals = this.#selectTotals.get()!;
    this.#count = totals.n;
    this.#bytes = totals.b;
    // A file written under higher bounds (or left for longer than its TTL) is brought within them now, not by the first put,
    // OPEN_TRIM_BATCH rows a transaction: one transaction for all grew the WAL to most of the file's size (it stays that
    // size on disk while the server runs) and held every deleted row's id in memory at once.
    for (;;) {
      const tally = this.#trim(OPEN_TRIM_BATCH);
      this.#apply(tally);
      if (tally.expired + tally.evicted < OPEN_TRIM_BATCH) break;
    }
    const file = path !== ':memory:';
    this.#sweep = new ExpirySweep(
      bounds,
      () => {
        // Not waiting for another process's write lock (busy_timeout: the event loop held that long on every wake
        // while a writer beside this store held it, and a store that only reads never waited before it swept): the
        // lock taken at once or SQLITE_BUSY, tried again after the shortest wait (`ExpirySweep`).
        this.#checkFile();
        const tally = this.#write(() => this.#sweepStep.immediate(), true);
        this.#apply(tally);
        return tally.more;
      },
      () => {
        const oldest = this.#selectOldest.get()?.s ?? null;
        // Its second's start: a row of it expires no sooner (one of a later millisecond is found by the next wake).
        if (oldest !== null) return oldest * 1000 + (bounds.ttlMs ?? Infinity);
        // Nothing held: a file may be written by another process, looked at again after the longest wait.
        return file ? Infinity : undefined;
      },
      log,
    );
    this.#sweep.wake();
  }

  /**
   * The file at the store's path is still the one open; else (deleted, its directory removed, replaced by a rename or
   * a copy) it is opened again there, a new empty store if nothing is there, and the change logged (`warn`,
   * `store_file_replaced`). The connection would have gone on with the old file, which nothing names any more: every
   * response stored after it was deleted answered `completed` and was gone at the next start. One `stat` (~2-7 us) at
   * every write; a read looks at most every `FILE_CHECK_MS` (49,000 item references are 49,000 reads). Throws when the
   * file there cannot be opened (a file that is not a database): every call tries again, so the store works again once
   * a database is back at its path.
   */
  #checkFile(write = true): void {
    const known = this.#file;
    if (known === undefined) return;
    if (known !== null) {
      if (!this.#readOnly) {
        const at = performance.now();
        if (!write && at - this.#checkedAt < FILE_CHECK_MS) return;
        this.#checkedAt = at;
        const now = statSync(this.#path, { throwIfNoEntry: false });
        if (now && now.ino === known.ino && now.dev === known.dev) return;
        this.#log?.warn(
          { code: 'store_file_replaced', path: this.#path, now: now ? 'another file' : 'none' },
          "the store's file was deleted or replaced while the server ran: opening the file at its path (what was stored in the old file is not in it)",
        );
      } else if (!write) return;
      // Else a write found the connection read-only: opened again, it may write (the file was made writable since).
      this.#readOnly = false;
      this.#sweep.close();
      this.#listed.clear();
      this.#db.close();
      this.#file = null;
      // Deleted: a `-wal` and `-shm` still at its path are the deleted database's (another process has them open, so
      // closing here did not remove them). SQLite would take them for the new file's: its `-shm` indexes a log that
      // is not this file's, and every call failed (SQLITE_IOERR_SHORT_READ) until that process happened to use the
      // store. A `-wal` whose database is gone has nothing to give a new file.
      if (!existsSync(this.#path)) for (const end of ['-wal', '-shm']) rmSync(this.#path + end, { force: true });
    }
    try {
      this.#open();
    } catch (err) {
      throw new Error(`cannot open the store '${this.#path}' again: ${(err as Error).message}`, { cause: err });
    }
  }

  /** Whether the idle sweep has a wake (or a batch) pending: none without a TTL, nor once closed. */
  get sweeping(): boolean {
    return this.#sweep.pending;
  }

  /** Responses held, expired ones not yet deleted included (what `maxResponses` bounds). */
  get size(): number {
    return this.#count;
  }

  /** Bytes held: the UTF-8 JSON of the responses and their items (what `maxBytes` bounds). */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Serialised natively here, in the put's turn, unless `prepared` is `prepare(rec)`'s for this record: then only
   * the transaction runs here (for 15 MB of JSON, its insert is still ~0.1 s of one turn).
   */
  put(rec: StoredResponse, prepared?: PreparedPut): void {
    this.#checkFile();
    this.counters.writes++;
    const { params, items } = prepared instanceof EncodedPut && prepared.rec === rec ? prepared : encodeNow(rec);
    const id = params.id;
    this.#listed.delete(id);
    if (params.bytes < LARGE_PUT_BYTES) {
      this.#apply(this.#write(() => this.#put(params, items)));
    } else {
      // Its commit copies nothing into the database: a turn of its own does, after it.
      this.#db.pragma('wal_autocheckpoint = 0');
      try {
        this.#apply(this.#write(() => this.#put(params, items)));
      } finally {
        this.#db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
        this.#deferCheckpoint();
      }
    }
    this.counters.bytes_written += params.bytes;
    this.#sweep.wake(createdMs(rec) + (this.bounds.ttlMs ?? Infinity));
  }

  /**
   * A record whose strings are long (`textOver` past `NATIVE_TEXT_CHARS`): its row's and items' JSON and their
   * bytes made in slices (`jsonTextWork`, `utf8BytesWork`) for `put(rec, prepared)`, the same text as `put(rec)`
   * makes (`JSON.stringify`'s). Undefined for a short record: `put(rec)` makes it natively at no extra cost.
   */
  prepare(rec: StoredResponse): Work<PreparedPut> | undefined {
    if (!textOver(rec, NATIVE_TEXT_CHARS)) return undefined;
    return encodeWork(rec, true);
  }

  get(id: string, owner: string | null): StoredResponse | undefined {
    this.#checkFile(false);
    this.counters.reads++;
    const row = this.#selectResponse.get({ id, owner, cutoff: expiryCutoff(this.bounds) });
    if (!row) return undefined;
    this.counters.rows_read++;
    return toRecord(row);
  }

  runner(id: string, owner: string | null): string | undefined {
    this.#checkFile(false);
    this.counters.reads++;
    return this.#selectRunner.get({ id, owner, cutoff: expiryCutoff(this.bounds) })?.runner ?? undefined;
  }

  previousOf(id: string, owner: string | null): string | null | undefined {
    this.#checkFile(false);
    this.counters.reads++;
    const cutoff = expiryCutoff(this.bounds);
    return this.#selectPrevious.get({ id, owner, cutoff, second: Math.floor(cutoff / 1000) })?.previous_response_id;
  }

  has(id: string, owner: string | null): boolean {
    this.#checkFile(false);
    this.counters.reads++;
    return this.#hasResponse.get({ id, owner, cutoff: expiryCutoff(this.bounds) }) !== undefined;
  }

  delete(id: string, owner: string | null): boolean {
    this.#checkFile();
    this.counters.writes++;
    const tally = this.#write(() => this.#delete({ id, owner }));
    if (!tally) return false;
    this.#apply(tally);
    return tally.expired === 0;
  }

  /**
   * The responses other connections to the file (other processes) deleted since the last call, oldest first; `'all'`
   * when more were deleted than the log keeps (DELETES_KEPT), so which is not known. One `PRAGMA data_version` (~1 µs)
   * when no other connection has committed anything since. Before, a DELETE through one server never reached another
   * server's WebSocket-mode caches on the same file: a continuation of the deleted response was served from the cache
   * and stored with a chain no later request could load (outside attack atk71 F1).
   */
  othersDeletes(): Array<{ id: string; owner: string | null }> | 'all' {
    this.#checkFile(false);
    const version = this.#dataVersion.get()!;
    if (version === this.#deletesVersion) return [];
    this.#deletesVersion = version;
    const { lo, hi } = this.#selectDeletesSpan.get() ?? { lo: null, hi: null };
    if (hi === null || hi <= this.#deletesRead) return [];
    const from = this.#deletesRead;
    this.#deletesRead = hi;
    // Rows past `from` trimmed already: deletes that cannot be named.
    if (lo !== null && lo > from + 1) return 'all';
    const found: Array<{ id: string; owner: string | null }> = [];
    for (const row of this.#selectDeletes.iterate({ after: from, n: hi - from })) {
      if (row.seq > hi) break;
      if (row.writer !== this.#writer) found.push({ id: row.id, owner: row.owner });
    }
    return found;
  }

  chain(id: string, owner: string | null): StoredResponse[] | undefined {
    return runSync(this.chainWork(id, owner));
  }

  /**
   * The chain's links walked first (ids and sizes, no JSON: a broken chain costs no parse), then its records read
   * oldest first, `CHAIN_PAGE_LINKS` links or `CHAIN_PAGE_BYTES` of JSON a query (a larger record alone), each parsed
   * in slices (`toRecordWork`) with a yield after it. Undefined as for `chain`, also when a link is gone (deleted or
   * expired) or changed before it is read.
   */
  *chainWork(id: string, owner: string | null): Work<StoredResponse[] | undefined> {
    this.#checkFile(false);
    this.counters.reads++;
    const cutoff = expiryCutoff(this.bounds);
    const second = Math.floor(cutoff / 1000);
    const links = this.#selectLinks.all({ id, owner, limit: MAX_CHAIN_LINKS, cutoff, second });
    for (const link of links) if (link.row === null) return undefined;
    // The oldest row must be a root; otherwise the walk hit the limit (a cycle).
    if (links.length === 0 || links[0]!.previous_response_id !== null) return undefined;
    const records: StoredResponse[] = [];
    for (let start = 0; start < links.length; ) {
      let end = start + 1;
      let bytes = links[start]!.bytes ?? 0;
      while (end < links.length && end - start < CHAIN_PAGE_LINKS && bytes + (links[end]!.bytes ?? 0) <= CHAIN_PAGE_BYTES) bytes += links[end++]!.bytes ?? 0;
      yield;
      this.#checkFile(false);
      const page = links.slice(start, end);
      const rows = this.#selectPage.all({ ids: JSON.stringify(page.map((l) => l.id)), owner, cutoff, second });
      // A link gone meanwhile has no row: not the chain walked.
      if (rows.length !== page.length) return undefined;
      rows.sort((a, b) => a.at - b.at);
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!;
        // No longer the link the walk found (put again with another previous response): the chain read is not one chain.
        if (row.at !== i || row.previous_response_id !== page[i]!.previous_response_id) return undefined;
        records.push(yield* toRecordWork(row));
        yield;
      }
      start = end;
    }
    this.counters.rows_read += records.length;
    return records;
  }

  /**
   * Parsed once per version of the row (its input and appended columns, not the Response), then kept: a page of 20
   * of 50,000 items parsed the whole record with `get`. Read-only: the cached items are shared by every page. Only
   * the row's version is read here: its input is read and parsed by the listing's derivation (`InputItemIndex.derive`,
   * run by the session layer's queue of cold listings), in slices, when its turn comes; a listing waiting in that
   * queue holds no copy of the row (one parsed in one turn per listing held `/health` for seconds with twenty at once).
   */
  inputItems(id: string, owner: string | null): InputItemIndex | undefined {
    this.#checkFile(false);
    this.counters.reads++;
    const cutoff = expiryCutoff(this.bounds);
    const found = this.#selectVersion.get({ id, owner, cutoff, second: Math.floor(cutoff / 1000) });
    if (!found) return undefined;
    this.counters.rows_read++;
    return this.#listed.get(id, `${found.row}:${found.input}:${found.appended}`, () => ({
      bytes: found.input + (found.appended ?? 0),
      load: () => this.#loadInput(id, owner, found),
    }));
  }

  /**
   * A listed row's input and appended items, parsed in slices (`parseListWork`), with the heap they take. Read when
   * the listing's turn comes: the row is then read at its version as read now if that is no longer the one listed (a
   * put replaced it meanwhile: the listing answers what is stored when it is read); undefined when the owner's
   * response is gone, as a read a moment later would say.
   */
  *#loadInput(id: string, owner: string | null, listed: VersionRow): ItemsLoad {
    const cutoff = expiryCutoff(this.bounds);
    const live = { id, owner, cutoff, second: Math.floor(cutoff / 1000) };
    let found: VersionRow | undefined = listed;
    let row = this.#selectInput.get({ ...found, ...live });
    if (!row) {
      found = this.#selectVersion.get(live);
      row = found && this.#selectInput.get({ ...found, ...live });
    }
    if (!row || !found) return undefined;
    yield;
    const input = (yield* parseListWork(row.input)) as InputItem[];
    const appended = row.appended === null ? undefined : ((yield* parseListWork(row.appended)) as AppendedItems[]);
    const items = ownInputItems({ input, appended });
    yield;
    return { items, bytes: yield* parsedBytesWork(found.input + (found.appended ?? 0), items) };
  }

  getItem(itemId: string, owner: string | null): InputItem | OutputItem | undefined {
    this.#checkFile(false);
    this.counters.reads++;
    const row = this.#selectItem.get({ item_id: itemId, owner, cutoff: expiryCutoff(this.bounds) });
    if (!row) return undefined;
    this.counters.rows_read++;
    return JSON.parse(row.item) as InputItem | OutputItem;
  }

  close(): void {
    this.#file = undefined; // no file is opened again
    this.#sweep.close();
    this.#listed.clear();
    if (this.#db.open) this.#db.close();
  }

  /**
   * A write transaction, waiting for another process's write lock up to `STORE_BUSY_WAIT_MS`, or not at all (`once`:
   * the sweep; or while `#locked`: a write already waited that long and failed, so the lock is held for longer than
   * a write of this store takes, and each write waiting in turn held the event loop that long). The first write that
   * gets the lock makes writes wait again. A sweep's failure leaves writes waiting: it did not wait.
   */
  #write<T>(fn: () => T, once = false): T {
    this.#waitForLock(once || this.#locked ? 0 : STORE_BUSY_WAIT_MS);
    try {
      const result = fn();
      this.#locked = false;
      return result;
    } catch (err) {
      if (!once && isBusy(err)) this.#locked = true;
      // A file SQLite opened read-only (it was not writable then: chmod, an immutable or read-only mount) stays so for
      // the connection's life: every write failed until a restart, the file long writable again. The next write opens it again.
      if (this.#file !== undefined && isReadOnly(err)) this.#readOnly = true;
      throw err;
    } finally {
      this.#waitForLock(this.#locked ? 0 : STORE_BUSY_WAIT_MS);
    }
  }

  /**
   * A checkpoint two `setImmediate`s ahead, so that the loop polls for I/O (a `/health`, the next request) between the
   * large put's turn and the checkpoint's, whatever phase the put ran in. TRUNCATE with no busy wait: it copies the
   * log and cuts it to nothing, or, with a reader still on it, gives up at once. A write before it checkpoints by
   * itself (the automatic checkpoint is on again), as every write did before.
   */
  #deferCheckpoint(): void {
    if (this.#checkpointQueued) return;
    this.#checkpointQueued = true;
    const db = this.#db;
    setImmediate(() =>
      setImmediate(() => {
        this.#checkpointQueued = false;
        // Closed, or opened again meanwhile (`#checkFile`): the old connection's log was checkpointed as it closed.
        if (db !== this.#db || !db.open) return;
        try {
          // TRUNCATE: the log goes to nothing once copied. PASSIVE copied it and left it at its size (tens of MB after
          // a large put) until some later write let `journal_size_limit` cut it: for good on a server gone idle
          // (outside attack atk62 F4). Never waiting: with another connection on the file reading the log, it
          // cannot finish now (SQLITE_BUSY, not thrown), and the next write's checkpoint copies and cuts it.
          this.#waitForLock(0);
          db.pragma('wal_checkpoint(TRUNCATE)');
        } catch (err) {
          // A file gone or read-only now: the next write finds it (`#checkFile`, `#write`) and checkpoints.
          this.#log?.warn({ code: 'store_checkpoint_failed', path: this.#path, err: (err as Error).message }, "the store's write-ahead log could not be checkpointed");
        }
      }),
    );
  }

  /** The connection's `busy_timeout`, set only when it changes (a pragma is a statement). */
  #waitForLock(ms: number): void {
    if (ms === this.#busyWait) return;
    this.#db.pragma(`busy_timeout = ${ms}`);
    this.#busyWait = ms;
  }

  /** Within a transaction: a row deleted, its items with it. */
  #gone(row: Gone, tally: Tally): void {
    this.#deleteItems.run(row.id);
    this.#listed.delete(row.id);
    tally.count--;
    tally.bytes -= row.bytes;
  }

  /**
   * Within a transaction: delete up to `n` expired rows, oldest `created_at` first (an index range, no scan), and no
   * more than `maxBytes` of them (at least one). Whether it stopped at `n` or `maxBytes` (more may be due).
   */
  #expire(tally: Tally, n: number, maxBytes = Infinity): boolean {
    const cutoff = expiryCutoff(this.bounds);
    if (cutoff === -Infinity) return false;
    const rows = this.#selectExpired.all({ cutoff, second: Math.floor(cutoff / 1000), n });
    let bytes = 0;
    let taken = 0;
    for (const { row, bytes: size } of rows) {
      if (taken > 0 && bytes + size > maxBytes) return true;
      taken++;
      bytes += size;
      const gone = this.#deleteRow.get(row);
      if (!gone) continue;
      this.#gone(gone, tally);
      tally.expired++;
    }
    return rows.length === n;
  }

  /** Within a transaction: delete the oldest puts until within the bounds (at most `limit` of them), never `keep` (the response just put). */
  #evict(tally: Tally, keep: string | null, limit = Infinity): void {
    const { maxResponses, maxBytes } = this.bounds;
    if ((tally.count > maxResponses || tally.bytes > maxBytes) && this.#dataVersion.get() !== this.#countedAt) {
      // Another process committed since the count was taken: its sweep (every process with a TTL sweeps the file)
      // may have deleted rows still counted here, and evicting by that count deleted live responses, up to all but
      // the one just put. Counted again (the covering index; within this transaction, so exact) before evicting.
      this.#countedAt = this.#dataVersion.get()!;
      const totals = this.#selectTotals.get()!;
      tally.count = totals.n;
      tally.bytes = totals.b;
    }
    let left = limit;
    while (left > 0 && (tally.count > maxResponses || tally.bytes > maxBytes)) {
      // Past the count, all the surplus in one statement (a file reopened under a lower bound); past the bytes, one at a time.
      const n = Math.min(tally.count > maxResponses ? tally.count - maxResponses : 1, left);
      const rows = this.#deleteOldest.all({ keep, n });
      if (rows.length === 0) break;
      for (const row of rows) {
        this.#gone(row, tally);
        tally.evicted++;
        left--;
      }
    }
  }

  /** A committed transaction's changes, into the store's fields. */
  #apply(tally: Tally): void {
    // Not below zero: a row another process put after this one counted the file is deleted here all the same.
    this.#count = Math.max(0, tally.count);
    this.#bytes = Math.max(0, tally.bytes);
    this.counters.evicted += tally.evicted;
    this.counters.expired += tally.expired;
  }

  #migrate(path: string): void {
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version === SCHEMA_VERSION) return;
    if (version < 0 || version > SCHEMA_VERSION) {
      this.#db.close();
      throw new Error(
        `response store ${path} has schema version ${version}; this build knows versions 1 to ${SCHEMA_VERSION}`,
      );
    }
    this.#db.transaction(() => {
      // 0: a new file; 1 → 2: responses gains `appended` (NULL for every response stored before: none took appends then);
      // 2 → 3: responses gains `bytes`, computed from what each row holds, and the created_at index;
      // 3 → 4: responses gains `created_at_ms`, NULL in the rows already there; 4 → 5: `runner`, NULL likewise;
      // 5 → 6: `protocol`, NULL likewise; 6 → 7: the deletes log, empty.
      if (version === 0) this.#db.exec(SCHEMA);
      else {
        if (version === 1) this.#db.exec('ALTER TABLE responses ADD COLUMN appended TEXT');
        if (version <= 2) this.#db.exec(MIGRATE_2_TO_3);
        if (version <= 3) this.#db.exec(MIGRATE_3_TO_4);
        if (version <= 4) this.#db.exec(MIGRATE_4_TO_5);
        if (version <= 5) this.#db.exec(MIGRATE_5_TO_6);
        this.#db.exec(MIGRATE_6_TO_7);
      }
      this.#db.pragma(`user_version = ${SCHEMA_VERSION}`);
    })();
  }
}

export { SCHEMA_VERSION };
