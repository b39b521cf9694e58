/**
 * The SQLite store's tables (`SCHEMA`), their version and the migrations
 * from each earlier one, and the expression a row's age counts from. Used by
 * store/sqlite.ts; SQL text only.
 */

/**
 * Bump with a migration in `#migrate` whenever the tables below change.
 * 2: `responses.appended`, what clients appended to a long-lived run (JSON, or NULL when nothing was).
 * 3: `responses.bytes` (the UTF-8 bytes of the row's JSON and its items', what `maxBytes` bounds) and
 *    `responses_by_created` (created_at, bytes): expiry finds the oldest through it, and the open counts
 *    bytes from it without reading the JSON.
 * 4: `responses.created_at_ms`, the creation in ms (NULL when the writer did not know it, and in rows from
 *    before): a response's age counts from it (`CREATED_MS`), not from the start of `created_at`'s second.
 * 5: `responses.runner`, the process running a response stored before its end (a background response, stored
 *    `in_progress` when it starts), NULL for every other row.
 * 6: `responses.protocol`, the design that made the response (`long-lived-http`: a repeated cancel of its run is
 *    answered with its final Response), NULL in rows from before.
 * 7: `deletes`, the latest DELETEs of responses (`DELETES_KEPT`), by which store connection: another process on the
 *    file learns of them (`SqliteStore.othersDeletes`) and its WebSocket-mode caches stop serving what was deleted.
 */
export const SCHEMA_VERSION = 7;

/** A row's creation in Unix ms, as `createdMs` reads a record: its own column, else its second's start. */
export const CREATED_MS = 'coalesce(created_at_ms, created_at * 1000)';

// items is keyed by (item_id, response_id), not item_id alone: input item ids
// are chosen by clients, so two owners may use the same id, and one owner's
// put must never replace (or delete) another owner's item.
/** The deletes log (version 7): AUTOINCREMENT, so a sequence number is never used twice, trimmed or not. */
const DELETES_TABLE = `CREATE TABLE IF NOT EXISTS deletes (
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  id     TEXT NOT NULL,
  owner  TEXT,
  writer TEXT NOT NULL
);`;

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS responses (
  id                   TEXT PRIMARY KEY,
  owner                TEXT,
  previous_response_id TEXT,
  created_at           INTEGER NOT NULL,
  response             TEXT NOT NULL,
  input                TEXT NOT NULL,
  appended             TEXT,
  bytes                INTEGER NOT NULL DEFAULT 0,
  created_at_ms        INTEGER,
  runner               TEXT,
  protocol             TEXT
);
CREATE TABLE IF NOT EXISTS items (
  item_id     TEXT NOT NULL,
  response_id TEXT NOT NULL,
  owner       TEXT,
  item        TEXT NOT NULL,
  PRIMARY KEY (item_id, response_id)
);
CREATE INDEX IF NOT EXISTS items_by_response ON items (response_id);
CREATE INDEX IF NOT EXISTS responses_by_created ON responses (created_at, bytes);
${DELETES_TABLE}
`;

/** 2 → 3: the bytes of every stored row (its JSON and its items', UTF-8), then the index. */
export const MIGRATE_2_TO_3 = `
ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
UPDATE responses SET bytes =
  length(CAST(response AS BLOB)) + length(CAST(input AS BLOB)) + coalesce(length(CAST(appended AS BLOB)), 0)
  + coalesce((SELECT sum(length(CAST(item AS BLOB))) FROM items WHERE items.response_id = responses.id), 0);
CREATE INDEX IF NOT EXISTS responses_by_created ON responses (created_at, bytes);
`;

/** 3 → 4: no pass over the rows; theirs stays NULL, read as `created_at * 1000` (what their age counted from before). */
export const MIGRATE_3_TO_4 = `ALTER TABLE responses ADD COLUMN created_at_ms INTEGER;`;

/** 4 → 5: no pass over the rows; NULL in all of them (none was stored before its end). */
export const MIGRATE_4_TO_5 = `ALTER TABLE responses ADD COLUMN runner TEXT;`;

/** 5 → 6: no pass over the rows; NULL in all of them (the design that made each is not known). */
export const MIGRATE_5_TO_6 = `ALTER TABLE responses ADD COLUMN protocol TEXT;`;

/** 6 → 7: the deletes log, empty (deletes before it are of no cache now running). */
export const MIGRATE_6_TO_7 = DELETES_TABLE;
