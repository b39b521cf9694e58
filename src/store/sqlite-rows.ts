/**
 * The SQLite store's rows as TypeScript sees them, and the way between them
 * and a `StoredResponse`: a put's row and items serialised (`encodeWork`, in
 * slices when its strings are long, so `prepare` can make them before the
 * run ends), and a row read back (`toRecord`). Used by store/sqlite.ts; no
 * I/O.
 */
import type { Work } from '../cooperative.js';
import { PARSE_CHUNK_CHARS, jsonTextWork, parseJsonWork, utf8BytesWork } from '../protocol/json-chunked.js';
import { parseListWork } from './input-items.js';
import { createdMs, itemsById, type PreparedPut, type StoredResponse } from './types.js';
import { isProtocol } from '../protocol/designs.js';

export interface RecordRow {
  owner: string | null;
  created_at: number;
  created_at_ms: number | null;
  response: string;
  input: string;
  appended: string | null;
  runner: string | null;
  protocol: string | null;
}

/** A link of a chain's walk (`chainWork`): `row` and the rest are null where the link is missing or not the owner's. */
export interface LinkRow {
  id: string;
  row: number | null;
  previous_response_id: string | null;
  /** Its JSON's bytes (Response, input, appended), read from the row's header. */
  bytes: number | null;
}

/** A record of a chain, with its link. */
export interface ChainRow extends RecordRow {
  previous_response_id: string | null;
}

export interface PutParams {
  id: string;
  bytes: number;
  owner: string | null;
  previous_response_id: string | null;
  created_at: number;
  created_at_ms: number | null;
  response: string;
  input: string;
  appended: string | null;
  runner: string | null;
  protocol: string | null;
}

export interface ItemParams {
  item_id: string;
  response_id: string;
  owner: string | null;
  item: string;
}

/** A put's row and items, serialised (`encodeWork`): `prepare`'s answer, or made by the put itself. */
export class EncodedPut implements PreparedPut {
  constructor(
    readonly rec: StoredResponse,
    readonly params: PutParams,
    readonly items: ItemParams[],
  ) {}
}

/** `JSON.stringify(v)`: natively, or (`sliced`) in slices when long (`jsonTextWork`). */
function* jsonWork(v: unknown, sliced: boolean): Work<string> {
  return sliced ? yield* jsonTextWork(v) : JSON.stringify(v);
}

/** `Buffer.byteLength(text)`: natively, or (`sliced`) in slices when long (`utf8BytesWork`). */
function* bytesWork(text: string, sliced: boolean): Work<number> {
  return sliced ? yield* utf8BytesWork(text) : Buffer.byteLength(text);
}

/** `encodeWork(rec, false)`, which never yields, run to its end. */
export function encodeNow(rec: StoredResponse): EncodedPut {
  const work = encodeWork(rec, false);
  for (;;) {
    const r = work.next();
    if (r.done) return r.value;
  }
}

/**
 * A record's row (the Response, its input and what was appended, as JSON, and their UTF-8 bytes with its items')
 * and its findable items' rows. Not `sliced` (a put): never yields, each text one `JSON.stringify`.
 */
export function* encodeWork(rec: StoredResponse, sliced: boolean): Work<EncodedPut> {
  const id = rec.response.id;
  const params: PutParams = {
    id,
    bytes: 0,
    owner: rec.owner,
    previous_response_id: rec.response.previous_response_id,
    created_at: rec.created_at,
    // Kept only when it is the record's own millisecond (`createdMs` would ignore it otherwise).
    created_at_ms: rec.created_at_ms !== undefined && createdMs(rec) === rec.created_at_ms ? rec.created_at_ms : null,
    response: yield* jsonWork(rec.response, sliced),
    input: yield* jsonWork(rec.input, sliced),
    appended: rec.appended?.length ? yield* jsonWork(rec.appended, sliced) : null,
    runner: rec.runner ?? null,
    protocol: rec.protocol ?? null,
  };
  let bytes = (yield* bytesWork(params.response, sliced)) + (yield* bytesWork(params.input, sliced));
  if (params.appended !== null) bytes += yield* bytesWork(params.appended, sliced);
  const items: ItemParams[] = [];
  for (const [itemId, item] of itemsById(rec)) {
    const json = yield* jsonWork(item, sliced);
    bytes += yield* bytesWork(json, sliced);
    items.push({ item_id: itemId, response_id: id, owner: rec.owner, item: json });
  }
  params.bytes = bytes;
  return new EncodedPut(rec, params, items);
}

/** Rows hold only what this store wrote, so the JSON is trusted, not re-validated. */
export function toRecord(row: RecordRow): StoredResponse {
  return recordOf(row, JSON.parse(row.response), JSON.parse(row.input), row.appended === null ? null : JSON.parse(row.appended));
}

/**
 * `toRecord`, its long texts (a 16 MiB input, a Response of 49,000 output items) parsed in slices: natively, one row
 * of a chain held the event loop ~100 ms for its parse alone, in the turn that read it.
 */
export function* toRecordWork(row: RecordRow): Work<StoredResponse> {
  const response = row.response.length <= PARSE_CHUNK_CHARS ? JSON.parse(row.response) : yield* parseJsonWork(row.response, Infinity);
  const input = yield* parseListWork(row.input);
  const appended = row.appended === null ? null : yield* parseListWork(row.appended);
  return recordOf(row, response, input, appended);
}

function recordOf(row: RecordRow, response: unknown, input: unknown, appended: unknown): StoredResponse {
  const rec: StoredResponse = {
    response: response as StoredResponse['response'],
    input: input as StoredResponse['input'],
    owner: row.owner,
    created_at: row.created_at,
  };
  if (row.created_at_ms !== null) rec.created_at_ms = row.created_at_ms;
  if (row.runner) rec.runner = row.runner;
  if (row.protocol !== null && isProtocol(row.protocol)) rec.protocol = row.protocol;
  if (appended !== null) rec.appended = appended as NonNullable<StoredResponse['appended']>;
  return rec;
}
