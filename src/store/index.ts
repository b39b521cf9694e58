/**
 * Opens the response store a server is configured with, from one string spec
 * (the CLI's `--store` value), and re-exports the store API.
 *
 * Used by the CLI and the HTTP mode. Leaves out choosing a default: the
 * caller decides where data lives.
 */
import { MemoryStore } from './memory.js';
import { SqliteStore } from './sqlite.js';
import { UNBOUNDED, type MemoryBounds, type ResponseStore } from './types.js';

export { MemoryStore } from './memory.js';
export { SqliteStore, SCHEMA_VERSION } from './sqlite.js';
export { MAX_CHAIN_LINKS, type MemoryBounds, type ResponseStore, type StoreCounters, type StoredResponse } from './types.js';

/**
 * `'memory'` → MemoryStore; `':memory:'` → SQLite in memory; anything else →
 * SQLite file at that path. `bounds` applies to the two in-memory stores (a
 * file's bound is its disk).
 */
export function openStore(spec: string, bounds: MemoryBounds = UNBOUNDED): ResponseStore {
  if (spec === 'memory') return new MemoryStore(bounds);
  if (spec === ':memory:') return new SqliteStore(spec, bounds);
  return new SqliteStore(spec);
}
