/**
 * Opens the response store a server is configured with, from one string spec
 * (the CLI's `--store` value), and re-exports the store API.
 *
 * Used by the CLI and the HTTP mode. Leaves out choosing a default: the
 * caller decides where data lives.
 */
import { MemoryStore } from './memory.js';
import { SqliteStore } from './sqlite.js';
import { UNBOUNDED, type ResponseStore, type StoreBounds, type StoreLog } from './types.js';

export { MemoryStore } from './memory.js';
export { SqliteStore, SCHEMA_VERSION } from './sqlite.js';
export { CHAIN_PAGE_BYTES, CHAIN_PAGE_LINKS, MAX_CHAIN_LINKS, type MemoryBounds, type StoreLog, type ResponseStore, type StoreBounds, type StoreCounters, type StoredResponse } from './types.js';

/**
 * `'memory'` → MemoryStore; `':memory:'` → SQLite in memory; anything else →
 * SQLite file at that path. `memory` bounds the two in-memory stores (their
 * cost is the heap), `file` a store on a file (its cost is the disk). `log`:
 * where the store reports what no caller hears of (its idle sweep failing).
 */
export function openStore(spec: string, memory: StoreBounds = UNBOUNDED, file: StoreBounds = UNBOUNDED, log?: StoreLog): ResponseStore {
  if (spec === 'memory') return new MemoryStore(memory, log);
  if (spec === ':memory:') return new SqliteStore(spec, memory, log);
  try {
    return new SqliteStore(spec, file, log);
  } catch (err) {
    // SQLite's own words name no file (`llr serve --store notes.txt` said only 'file is not a database'; a SQLite
    // file of another program 'no such column: created_at'): said with the path, the cause kept.
    throw new Error(`cannot open the store '${spec}': ${(err as Error).message}`, { cause: err });
  }
}
