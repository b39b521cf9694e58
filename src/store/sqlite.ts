/**
 * `SqliteStore`: the response store on SQLite through better-sqlite3, so
 * stored responses survive a server restart; the default for HTTP mode.
 *
 * One `responses` row per response (the Response and its own input as JSON)
 * and one `items` row per findable item, so getItem is an index lookup and
 * chain() is one recursive query. All calls are synchronous on the caller's
 * thread: that is real request-path work, and the HTTP baseline measures it.
 * Migrates schema version 1 to 2 (an unknown version is refused, not
 * guessed at); leaves out expiry and vacuuming.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { InputItem, OutputItem } from '../protocol/objects.js';
import { MAX_CHAIN_LINKS, PutOrder, UNBOUNDED, itemsById, newCounters, type MemoryBounds, type ResponseStore, type StoredResponse } from './types.js';

/**
 * Bump with a migration in `#migrate` whenever the tables below change.
 * 2: `responses.appended`, what clients appended to a long-lived run (JSON, or NULL when nothing was).
 */
export const SCHEMA_VERSION = 2;

// items is keyed by (item_id, response_id), not item_id alone: input item ids
// are chosen by clients, so two owners may use the same id, and one owner's
// put must never replace (or delete) another owner's item.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS responses (
  id                   TEXT PRIMARY KEY,
  owner                TEXT,
  previous_response_id TEXT,
  created_at           INTEGER NOT NULL,
  response             TEXT NOT NULL,
  input                TEXT NOT NULL,
  appended             TEXT
);
CREATE TABLE IF NOT EXISTS items (
  item_id     TEXT NOT NULL,
  response_id TEXT NOT NULL,
  owner       TEXT,
  item        TEXT NOT NULL,
  PRIMARY KEY (item_id, response_id)
);
CREATE INDEX IF NOT EXISTS items_by_response ON items (response_id);
`;

interface RecordRow {
  owner: string | null;
  created_at: number;
  response: string;
  input: string;
  appended: string | null;
}

/** A chain row; the record columns are null where the link is missing or not the owner's. */
interface ChainRow {
  previous_response_id: string | null;
  owner: string | null;
  created_at: number | null;
  response: string | null;
  input: string | null;
  appended: string | null;
}

interface PutParams {
  id: string;
  owner: string | null;
  previous_response_id: string | null;
  created_at: number;
  response: string;
  input: string;
  appended: string | null;
}

interface ItemParams {
  item_id: string;
  response_id: string;
  owner: string | null;
  item: string;
}

interface IdOwner {
  id: string;
  owner: string | null;
}

export class SqliteStore implements ResponseStore {
  readonly counters = newCounters();
  readonly #db: Database.Database;
  readonly #insertResponse: Database.Statement<[PutParams]>;
  readonly #insertItem: Database.Statement<[ItemParams]>;
  readonly #deleteResponse: Database.Statement<[IdOwner]>;
  readonly #deleteItems: Database.Statement<[string]>;
  readonly #selectResponse: Database.Statement<[IdOwner], RecordRow>;
  readonly #selectItem: Database.Statement<[{ item_id: string; owner: string | null }], { item: string }>;
  readonly #selectChain: Database.Statement<[IdOwner & { limit: number }], ChainRow>;
  readonly #put: (p: PutParams, items: ItemParams[]) => void;
  readonly #delete: (key: IdOwner) => boolean;
  readonly #evict: (id: string) => void;

  /** Sizes in put order, kept only under finite `bounds` (an in-memory database): past either, the oldest go. */
  readonly #order: PutOrder | null;
  readonly #evictOne: Database.Statement<[string]>;

  /**
   * `path` is a file path (parent directories are created) or `':memory:'`;
   * `bounds` (meant for `':memory:'`: a file's bound is its disk) limits the
   * responses kept, evicting the oldest put.
   */
  constructor(
    path: string,
    readonly bounds: MemoryBounds = UNBOUNDED,
  ) {
    this.#order = Number.isFinite(bounds.maxResponses) || Number.isFinite(bounds.maxBytes) ? new PutOrder(bounds) : null;
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.#db = new Database(path);
    // WAL lets readers (a second server process, the sqlite3 shell) run beside
    // the writer; NORMAL sync under WAL survives a process crash, and losing
    // the last commits to a power cut is acceptable for a research server.
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('synchronous = NORMAL');
    this.#migrate(path);

    const db = this.#db;
    this.#insertResponse = db.prepare(
      `INSERT OR REPLACE INTO responses (id, owner, previous_response_id, created_at, response, input, appended)
       VALUES (@id, @owner, @previous_response_id, @created_at, @response, @input, @appended)`,
    );
    this.#insertItem = db.prepare(
      `INSERT OR REPLACE INTO items (item_id, response_id, owner, item)
       VALUES (@item_id, @response_id, @owner, @item)`,
    );
    this.#deleteResponse = db.prepare(`DELETE FROM responses WHERE id = @id AND owner IS @owner`);
    this.#deleteItems = db.prepare(`DELETE FROM items WHERE response_id = ?`);
    this.#evictOne = db.prepare(`DELETE FROM responses WHERE id = ?`);
    this.#selectResponse = db.prepare(
      `SELECT owner, created_at, response, input, appended FROM responses WHERE id = @id AND owner IS @owner`,
    );
    // Newest put wins when an owner holds the same item id in several
    // responses; rowid grows with each insert, and a replace re-inserts.
    this.#selectItem = db.prepare(
      `SELECT item FROM items WHERE item_id = @item_id AND owner IS @owner ORDER BY rowid DESC LIMIT 1`,
    );
    // The walk follows only the owner's rows, so a foreign or missing link
    // ends it with one all-null row (LEFT JOIN) that marks the chain broken.
    this.#selectChain = db.prepare(
      `WITH RECURSIVE walk(id, depth) AS (
         SELECT @id, 0
         UNION ALL
         SELECT r.previous_response_id, walk.depth + 1
           FROM walk JOIN responses r ON r.id = walk.id AND r.owner IS @owner
          WHERE r.previous_response_id IS NOT NULL AND walk.depth < @limit - 1
       )
       SELECT r.previous_response_id, r.owner, r.created_at, r.response, r.input, r.appended
         FROM walk LEFT JOIN responses r ON r.id = walk.id AND r.owner IS @owner
        ORDER BY walk.depth DESC`,
    );

    this.#put = db.transaction((p: PutParams, items: ItemParams[]) => {
      this.#deleteItems.run(p.id);
      this.#insertResponse.run(p);
      for (const item of items) this.#insertItem.run(item);
    });
    this.#delete = db.transaction((key: IdOwner) => {
      if (this.#deleteResponse.run(key).changes === 0) return false;
      this.#deleteItems.run(key.id);
      this.#order?.delete(key.id);
      return true;
    });
    this.#evict = db.transaction((id: string) => {
      this.#evictOne.run(id);
      this.#deleteItems.run(id);
    });
  }

  put(rec: StoredResponse): void {
    this.counters.writes++;
    const id = rec.response.id;
    const params: PutParams = {
      id,
      owner: rec.owner,
      previous_response_id: rec.response.previous_response_id,
      created_at: rec.created_at,
      response: JSON.stringify(rec.response),
      input: JSON.stringify(rec.input),
      appended: rec.appended?.length ? JSON.stringify(rec.appended) : null,
    };
    let bytes = Buffer.byteLength(params.response) + Buffer.byteLength(params.input) + (params.appended === null ? 0 : Buffer.byteLength(params.appended));
    const items: ItemParams[] = [];
    for (const [itemId, item] of itemsById(rec)) {
      const json = JSON.stringify(item);
      bytes += Buffer.byteLength(json);
      items.push({ item_id: itemId, response_id: id, owner: rec.owner, item: json });
    }
    this.#put(params, items);
    this.counters.bytes_written += bytes;
    for (const old of this.#order?.put(id, bytes) ?? []) {
      this.#evict(old);
      this.counters.evicted++;
    }
  }

  get(id: string, owner: string | null): StoredResponse | undefined {
    this.counters.reads++;
    const row = this.#selectResponse.get({ id, owner });
    if (!row) return undefined;
    this.counters.rows_read++;
    return toRecord(row);
  }

  delete(id: string, owner: string | null): boolean {
    this.counters.writes++;
    return this.#delete({ id, owner });
  }

  chain(id: string, owner: string | null): StoredResponse[] | undefined {
    this.counters.reads++;
    const rows = this.#selectChain.all({ id, owner, limit: MAX_CHAIN_LINKS });
    // Check before parsing any JSON: a broken chain costs no parse.
    for (const row of rows) if (row.response === null) return undefined;
    // The oldest row must be a root; otherwise the walk hit the limit (a cycle).
    if (rows.length === 0 || rows[0]!.previous_response_id !== null) return undefined;
    this.counters.rows_read += rows.length;
    return rows.map((row) => toRecord(row as RecordRow));
  }

  getItem(itemId: string, owner: string | null): InputItem | OutputItem | undefined {
    this.counters.reads++;
    const row = this.#selectItem.get({ item_id: itemId, owner });
    if (!row) return undefined;
    this.counters.rows_read++;
    return JSON.parse(row.item) as InputItem | OutputItem;
  }

  close(): void {
    this.#db.close();
  }

  #migrate(path: string): void {
    const version = this.#db.pragma('user_version', { simple: true }) as number;
    if (version === SCHEMA_VERSION) return;
    if (version !== 0 && version !== 1) {
      this.#db.close();
      throw new Error(
        `response store ${path} has schema version ${version}; this build knows versions 1 to ${SCHEMA_VERSION}`,
      );
    }
    this.#db.transaction(() => {
      // 0: a new file; 1 → 2: responses gains `appended` (NULL for every response stored before: none took appends then).
      if (version === 0) this.#db.exec(SCHEMA);
      else this.#db.exec('ALTER TABLE responses ADD COLUMN appended TEXT');
      this.#db.pragma(`user_version = ${SCHEMA_VERSION}`);
    })();
  }
}

/** Rows hold only what this store wrote, so the JSON is trusted, not re-validated. */
function toRecord(row: RecordRow): StoredResponse {
  const rec: StoredResponse = {
    response: JSON.parse(row.response) as StoredResponse['response'],
    input: JSON.parse(row.input) as StoredResponse['input'],
    owner: row.owner,
    created_at: row.created_at,
  };
  if (row.appended !== null) rec.appended = JSON.parse(row.appended) as NonNullable<StoredResponse['appended']>;
  return rec;
}
