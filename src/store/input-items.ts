/**
 * `GET /v1/responses/{id}/input_items`: a stored response's own input items
 * as the API lists them, one cursor page at a time.
 *
 * The API's list shape (`{object: "list", data, first_id, last_id,
 * has_more}`, openai-node's `ResponseItemList`) and parameters: `limit`
 * 1–100 (default 20), `order` `asc` | `desc` (default `desc`, newest item
 * first), `after` / `before` an item id of this list. Items come back in
 * their resource form: every item has an `id`, a message has `type`,
 * `status` and a content list (a string content becomes one `input_text`
 * part, or `output_text` for an assistant), a tool call or output has a
 * `status`, an `input_image` part a `detail` (`auto` when not sent). An item sent without an id gets one derived from the response id
 * and its position, the same at every listing (so a cursor stays valid), that
 * an `item_reference` can name as it names any stored item (`findListedItem`);
 * so does the second of two items sent with one id. Pure: no I/O.
 */
import { runSync, type Work } from '../cooperative.js';
import { createHash } from 'node:crypto';
import { WireError } from '../protocol/errors.js';
import { RESPONSE_INCLUDABLE } from '../protocol/parse.js';
import { parseJsonWork, PARSE_CHUNK_CHARS } from '../protocol/json-chunked.js';
import { limitParam, orderParam, singleParam } from '../protocol/list-query.js';
import { withImageDetail, type InputItem } from '../protocol/objects.js';
import { ownInputItems, type ResponseStore, type StoredResponse } from './types.js';
import { ownValue } from '../protocol/fields.js';

export const INPUT_ITEMS_PAGE_DEFAULT = 20;
export const INPUT_ITEMS_PAGE_MAX = 100;

export interface InputItemsQuery {
  limit: number;
  order: 'asc' | 'desc';
  after: string | null;
  before: string | null;
}

export interface InputItemList {
  object: 'list';
  data: Array<Record<string, unknown>>;
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

const ID_PREFIX: Record<string, string> = {
  message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  reasoning: 'rs',
  compaction: 'cmp',
  // The API's own (an input item's id is refused without it: protocol/parse-input.ts): a listed call sent back as input.
  custom_tool_call: 'ctc',
};

export { RESPONSE_INCLUDABLE };

/**
 * The query of a listing: `?limit=`, `?order=`, `?after=`, `?before=`, each
 * at most once (protocol/list-query.ts), and `include` (repeatable, as
 * `include=` or `include[]=`, the form openai-node sends; each value one of
 * `RESPONSE_INCLUDABLE`, else 400 `invalid_value`, `param: include[i]`).
 */
export function parseInputItemsQuery(q: URLSearchParams): InputItemsQuery {
  const limit = limitParam(q, INPUT_ITEMS_PAGE_DEFAULT, INPUT_ITEMS_PAGE_MAX);
  const order = orderParam(q);
  checkInclude(q);
  return { limit, order, after: singleParam(q, 'after'), before: singleParam(q, 'before') };
}

/** `include` of a listing or a retrieve (`include=` or `include[]=`, repeatable): each one of `RESPONSE_INCLUDABLE`, else 400 `invalid_value`, `param: include[i]`. */
export function checkInclude(q: URLSearchParams): void {
  const include = [...q.getAll('include'), ...q.getAll('include[]')];
  include.forEach((v, i) => {
    if (!(RESPONSE_INCLUDABLE as readonly string[]).includes(v)) {
      throw new WireError('invalid_value', `Invalid value for 'include[${i}]': '${v.slice(0, 100)}'. Supported values are: ${RESPONSE_INCLUDABLE.map((x) => `'${x}'`).join(', ')}.`, `include[${i}]`);
    }
  });
}

/**
 * Items (summed over the lists held) and bytes (about the heap the held lists
 * were parsed into, `parsedBytes`; 0 for a list the store holds itself) a store's
 * `InputItemsCache` keeps by default: four lists at `--max-context-items`
 * (50,000), and whatever the SQLite store parsed for them up to 64 MiB. A
 * list past either bound alone is listed without being kept.
 */
export const INPUT_ITEMS_CACHE_ITEMS = 200_000;
export const INPUT_ITEMS_CACHE_BYTES = 64 * 1024 * 1024;

/**
 * Heap one parsed object or array takes besides its members' values, about: V8 measures ~39 bytes an empty
 * array and ~23 an empty object. Counting a parsed list by its JSON's length alone let the SQLite store's cache
 * hold ~13× its bound: rows of `[[],[],…]` (3 characters of JSON each) held 888 MB of heap for 65 MB of JSON
 * (outside attack).
 */
export const PARSED_CONTAINER_BYTES = 40;

/**
 * About the heap the parsed `items` take: their JSON's UTF-8 bytes (at least what a string takes, one byte a
 * character in V8, or two for a string with a character past Latin-1, 2–3 bytes of UTF-8) plus
 * `PARSED_CONTAINER_BYTES` for each object and array in them (a walk with its own stack, not recursion).
 */
export function parsedBytes(jsonBytes: number, items: readonly unknown[]): number {
  return runSync(parsedBytesWork(jsonBytes, items));
}

/** Containers counted between two points where `parsedBytesWork` may pause. */
const COUNT_SLICE = 16 * 1024;

/** `parsedBytes` as work that pauses every `COUNT_SLICE` objects and arrays (a list of 49,000 items is walked in slices). */
export function* parsedBytesWork(jsonBytes: number, items: readonly unknown[]): Work<number> {
  let containers = 0;
  const stack: unknown[] = [items];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null) continue;
    if (++containers % COUNT_SLICE === 0) yield;
    if (Array.isArray(v)) {
      for (const x of v) if (typeof x === 'object' && x !== null) stack.push(x);
    } else {
      for (const k in v) {
        const x = (v as Record<string, unknown>)[k];
        if (typeof x === 'object' && x !== null) stack.push(x);
      }
    }
  }
  return jsonBytes + containers * PARSED_CONTAINER_BYTES;
}

/**
 * The members of a JSON array this server wrote (`JSON.stringify` of a list of objects: a stored row's `input` or
 * `appended`), parsed a slice at a time, the value `JSON.parse(text)` gives: a row of 49,000 items was parsed in
 * one turn, and twenty cold listings' rows in twenty turns back to back (outside attack). A slice is the members up to the
 * first `},{` past `PARSE_CHUNK_CHARS` characters, handed to `JSON.parse` wrapped in brackets; that `},{` may be
 * inside a string or a member, and the slice then does not parse (its text is a prefix of the list's, lexed alike:
 * it parses only if it ends between two members), so the rest is parsed member by member, larger members walked
 * into (protocol/json-chunked.ts, slower than native on small items: its scan is JS). Yields after every slice.
 */
export function* parseListWork(text: string): Work<unknown[]> {
  if (text.length <= PARSE_CHUNK_CHARS) return JSON.parse(text) as unknown[];
  const out: unknown[] = [];
  const push = (part: unknown[]) => {
    for (const v of part) out.push(v);
  };
  const last = text.length - 1;
  let from = 1;
  for (;;) {
    if (last - from <= PARSE_CHUNK_CHARS) {
      if (last > from) push(JSON.parse(`[${text.slice(from, last)}]`) as unknown[]);
      return out;
    }
    const at = text.indexOf('},{', from + PARSE_CHUNK_CHARS);
    let part: unknown[] | undefined;
    if (at >= 0 && at + 1 - from <= 2 * PARSE_CHUNK_CHARS) {
      try {
        part = JSON.parse(`[${text.slice(from, at + 1)}]`) as unknown[];
      } catch {
        part = undefined;
      }
    }
    if (part === undefined) {
      yield;
      push((yield* parseJsonWork(`[${text.slice(from)}`, Infinity)) as unknown[]);
      return out;
    }
    push(part);
    from = at + 2;
    yield;
  }
}

/** What a store hands a listing: the items (memory store), or work that reads and parses them (SQLite store; undefined: the row is gone). */
export type LoadedItems = { items: readonly InputItem[]; bytes: number };
export type ItemsLoad = Work<LoadedItems | undefined>;

/** Items whose ids are derived between two points where the derivation may pause (`InputItemIndex.derive`). */
const DERIVE_SLICE = 256;

/**
 * A stored response's listed items (its input, then what was appended to
 * it) with each item's id and the position of each id, derived once per
 * stored version of the response and kept in its store's `InputItemsCache`:
 * a page then costs its own items plus one map lookup per cursor, not the
 * whole list (a `?limit=1` page of 49,000 items derived every id and copied
 * the whole record, ~100 ms of event loop a page; outside attack). Read-only:
 * `items` may be the store's own objects, never changed here.
 *
 * An id is the item's own the first time it occurs (a cursor names one place:
 * an id the client gave twice is kept the first time only, or the SDK's
 * auto-pagination, resuming after the second, would loop back to the first),
 * else one derived from the response id and the position, with `_1`, `_2`, …
 * appended while an earlier item carries it (an appended item: its client
 * knows the response id).
 */
export class InputItemIndex {
  readonly #ids: string[] = [];
  readonly #positions = new Map<string, number>();
  /** Hex of the response id's hash, hashed once a list; the position follows it in a derived id. */
  readonly #base: string;
  /** Items whose ids were derived so far (the next to derive). */
  #next = 0;
  /** The items, once loaded. */
  #items: readonly InputItem[] | null;
  /** About the heap they take (`parsedBytes`), once loaded; until then the store's estimate. */
  #bytes: number;
  /** How they load (SQLite store: read and parse the row), until they have; started once, resumed by every run. */
  #load: (() => ItemsLoad) | null;
  #loading: ItemsLoad | null = null;
  /** The row was gone when read, or reading it failed (rethrown to every listing). */
  #gone = false;
  #failed: { err: unknown } | null = null;
  /** Told once the items are loaded (or found gone): the store's cache counts them then. */
  onLoaded: ((index: InputItemIndex) => void) | null = null;

  constructor(
    readonly responseId: string,
    source: readonly InputItem[] | { load: () => ItemsLoad; bytes: number },
    bytes = 0,
  ) {
    this.#base = idBase(responseId);
    if (Array.isArray(source)) {
      this.#items = source as readonly InputItem[];
      this.#load = null;
      this.#bytes = bytes;
    } else {
      const pending = source as { load: () => ItemsLoad; bytes: number };
      this.#items = null;
      this.#load = pending.load;
      this.#bytes = pending.bytes;
    }
  }

  /**
   * The listed items: loaded now, at once, if they were not yet (a listing loads them in slices first, `derive`);
   * none when the row was gone.
   */
  get items(): readonly InputItem[] {
    if (this.#items === null && !this.#gone) runSync(this.#loadSteps());
    return this.#items ?? [];
  }

  /** Whether reading the items failed (every listing of this index gets the error). */
  get failed(): boolean {
    return this.#failed !== null;
  }

  /** Whether the record was gone when its items were read (the listing is then not found). */
  get gone(): boolean {
    return this.#gone;
  }

  /** Whether the items are loaded and every id derived (or the row was found gone): a page then costs its own items. */
  get ready(): boolean {
    return this.#gone || this.#failed !== null || (this.#items !== null && this.#next >= this.#items.length);
  }

  /** Items the list holds and about the heap they take (the store's estimate until loaded), as its cache counts them. */
  get held(): { items: number; bytes: number } {
    return { items: this.#items?.length ?? 0, bytes: this.#bytes };
  }

  /** Items whose ids have been derived: `items.length` once done (a test counts the work with it). */
  get derived(): number {
    return this.#next;
  }

  /**
   * The load (if the items are not loaded yet: the SQLite store's row, parsed in slices), then the derivation,
   * pausing every `DERIVE_SLICE` items (run by the session layer's queue of cold listings, modes/cold-listings.ts,
   * one list at a time, so a first listing of 50,000 items gives the event loop its turns and twenty at once do
   * not take all of them). Resumes where any earlier run left off: two listings deriving at once share the work,
   * each item's id derived once.
   */
  *derive(): Generator<void, void, void> {
    if (this.#items === null) {
      yield* this.#loadSteps();
      if (this.#items === null) return;
    }
    const items = this.#items;
    while (this.#next < items.length) {
      const stop = Math.min(items.length, this.#next + DERIVE_SLICE);
      while (this.#next < stop) this.#step();
      if (this.#next < items.length) yield;
    }
  }

  /** Drives the load one step a turn, whichever run started it; settles the index once it ends. */
  *#loadSteps(): Generator<void, void, void> {
    for (;;) {
      if (this.#failed) throw this.#failed.err;
      if (this.#items !== null || this.#gone) return;
      this.#loading ??= this.#load!();
      let r: IteratorResult<void, LoadedItems | undefined>;
      try {
        r = this.#loading.next();
      } catch (err) {
        this.#failed = { err };
        this.#settle();
        throw err;
      }
      if (!r.done) {
        yield;
        continue;
      }
      if (r.value === undefined) this.#gone = true;
      else {
        this.#items = r.value.items;
        this.#bytes = r.value.bytes;
      }
      this.#settle();
    }
  }

  #settle(): void {
    this.#load = null;
    this.#loading = null;
    this.onLoaded?.(this);
  }

  /** The id of item `i` (derived now if it was not yet). */
  id(i: number): string {
    const items = this.items;
    while (this.#next <= i && this.#next < items.length) this.#step();
    return this.#ids[i]!;
  }

  /** Where `id` is in the list, or -1 (derives what is left first: an id may be one of a later item). */
  position(id: string): number {
    const items = this.items;
    while (this.#next < items.length) this.#step();
    return this.#positions.get(id) ?? -1;
  }

  #step(): void {
    const i = this.#next;
    const item = this.#items![i]!;
    const own = (item as { id?: unknown }).id;
    let id: string;
    if (typeof own === 'string' && own !== '' && !this.#positions.has(own)) id = own;
    else {
      const derived = derivedId(itemType(item), this.#base, i);
      id = derived;
      for (let n = 1; this.#positions.has(id); n++) id = `${derived}_${n}`;
    }
    this.#positions.set(id, i);
    this.#ids.push(id);
    this.#next = i + 1;
  }
}

/**
 * A store's recently listed `InputItemIndex`es, by response id, each for one
 * version of its record (`version`: the record object the memory store holds,
 * the row the SQLite store read): a replaced record's index is not served.
 * The store drops an id's index when it replaces, deletes, evicts or expires
 * the record. Bounded (`INPUT_ITEMS_CACHE_ITEMS`, `INPUT_ITEMS_CACHE_BYTES`):
 * the least recently listed go first.
 */
export class InputItemsCache {
  readonly #entries = new Map<string, { version: unknown; index: InputItemIndex; items: number; bytes: number }>();
  #items = 0;
  #bytes = 0;

  constructor(
    readonly maxItems = INPUT_ITEMS_CACHE_ITEMS,
    readonly maxBytes = INPUT_ITEMS_CACHE_BYTES,
  ) {}

  /** Items and bytes held (what the bounds limit). */
  get held(): { lists: number; items: number; bytes: number } {
    return { lists: this.#entries.size, items: this.#items, bytes: this.#bytes };
  }

  /**
   * `id`'s index at `version`, else a new one from `make`: its items (kept if they fit), or work that loads them
   * (the SQLite store's row, read and parsed by the listing's derivation, not here: kept meanwhile counted at
   * `bytes`, the row's JSON, and counted again once loaded); undefined, nothing kept, when `make` finds the record
   * no longer at `version` (another process's write between the store's two reads).
   */
  get(
    id: string,
    version: unknown,
    make: () => { items: readonly InputItem[]; bytes: number } | { load: () => ItemsLoad; bytes: number } | undefined,
  ): InputItemIndex | undefined {
    const hit = this.#entries.get(id);
    if (hit && hit.version === version) {
      // Most recently used last: the bounds drop from the front.
      this.#entries.delete(id);
      this.#entries.set(id, hit);
      return hit.index;
    }
    this.delete(id);
    const made = make();
    if (!made) return undefined;
    const index = 'items' in made ? new InputItemIndex(id, made.items, made.bytes) : new InputItemIndex(id, made);
    const entry = { version, index, items: 0, bytes: 0 };
    this.#entries.set(id, entry);
    index.onLoaded = () => this.#count(id, entry);
    this.#count(id, entry);
    return index;
  }

  /** Counts `entry` at what its index holds now; drops it if it alone is past a bound (or its row was gone), else the least recently listed until within them. */
  #count(id: string, entry: { index: InputItemIndex; items: number; bytes: number }): void {
    if (this.#entries.get(id) !== entry) return;
    const { items, bytes } = entry.index.held;
    this.#items += items - entry.items;
    this.#bytes += bytes - entry.bytes;
    entry.items = items;
    entry.bytes = bytes;
    if (entry.index.gone || entry.index.failed || items > this.maxItems || bytes > this.maxBytes) {
      this.delete(id);
      return;
    }
    for (const old of this.#entries.keys()) {
      if (this.#items <= this.maxItems && this.#bytes <= this.maxBytes) break;
      this.delete(old);
    }
  }

  delete(id: string): void {
    const entry = this.#entries.get(id);
    if (!entry) return;
    this.#entries.delete(id);
    entry.index.onLoaded = null;
    this.#items -= entry.items;
    this.#bytes -= entry.bytes;
  }

  clear(): void {
    for (const entry of this.#entries.values()) entry.index.onLoaded = null;
    this.#entries.clear();
    this.#items = 0;
    this.#bytes = 0;
  }
}

/**
 * One page of a stored response's input items (`index`: its input, then
 * what clients appended to it, a long-lived run's tool outputs). A cursor
 * that names no item of this list is refused (400, `param` the cursor). Only
 * the page's items are copied to their resource form, and each cursor is one
 * lookup: a page of 20 of 50,000 items costs 20 copies, once the list's ids
 * are derived (`InputItemIndex.derive`, once per stored version).
 */
export function pageInputItems(index: InputItemIndex, q: InputItemsQuery): InputItemList {
  const n = index.items.length;
  const position = (k: number): number => (q.order === 'asc' ? k : n - 1 - k);
  const at = (cursor: string, param: 'after' | 'before'): number => {
    const i = index.position(cursor);
    if (i < 0) throw new WireError('invalid_value', `Invalid '${param}': no input item '${cursor.slice(0, 100)}' in response '${index.responseId}'.`, param);
    return position(i);
  };
  const start = q.after === null ? 0 : at(q.after, 'after') + 1;
  const end = Math.max(start, q.before === null ? n : at(q.before, 'before'));
  // With only `before`, the page is the items right before it (the previous page), still in `order`.
  const from = q.before !== null && q.after === null ? Math.max(start, end - q.limit) : start;
  const to = Math.min(end, from + q.limit);
  const data: Array<Record<string, unknown>> = [];
  for (let k = from; k < to; k++) {
    const i = position(k);
    data.push(resourceItem(index.items[i]!, index.id(i)));
  }
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data.at(-1)?.id as string | undefined) ?? null,
    has_more: end - start > data.length,
  };
}

/** A page of `rec`'s input items, its ids derived here (a one-off listing; the stores keep theirs for `pageInputItems`). */
export function listInputItems(rec: StoredResponse, q: InputItemsQuery): InputItemList {
  return pageInputItems(new InputItemIndex(rec.response.id, ownInputItems(rec)), q);
}

function itemType(item: InputItem): string {
  return typeof item.type === 'string' ? item.type : 'message';
}

/** An input item as the API returns it from a listing. */
function resourceItem(item: InputItem, id: string): Record<string, unknown> {
  const type = itemType(item);
  const out: Record<string, unknown> = { id, ...item, type };
  out.id = id;
  if (type === 'message') {
    const role = (item as { role?: unknown }).role;
    const assistant = role === 'assistant';
    const content = (item as { content?: unknown }).content;
    // An assistant's text is listed as the API's output_text, whose schema requires `annotations` and `logprobs`.
    if (typeof content === 'string') {
      out.content = [assistant ? { type: 'output_text', text: content, annotations: [], logprobs: [] } : { type: 'input_text', text: content }];
    } else if (assistant && Array.isArray(content)) {
      out.content = content.map((p: Record<string, unknown>) =>
        p?.type === 'output_text' && !(Array.isArray(p.annotations) && Array.isArray(p.logprobs))
          ? { ...p, annotations: Array.isArray(p.annotations) ? p.annotations : [], logprobs: Array.isArray(p.logprobs) ? p.logprobs : [] }
          : p,
      );
    }
    if (!assistant && Array.isArray(out.content)) out.content = withImageDetail(out.content as unknown[]);
    out.status ??= 'completed';
  } else if (STATUS_REQUIRED.has(type)) {
    out.status ??= 'completed';
    if (Array.isArray(out.output)) out.output = withImageDetail(out.output as unknown[]);
    if (type === 'shell_call') {
      out.environment ??= null;
      const action = out.action;
      if (typeof action === 'object' && action !== null && !Array.isArray(action)) {
        out.action = { ...action, timeout_ms: (action as Record<string, unknown>).timeout_ms ?? null, max_output_length: (action as Record<string, unknown>).max_output_length ?? null };
      }
    }
    if (type === 'shell_call_output') out.max_output_length ??= null;
    if (type === 'computer_call') out.pending_safety_checks ??= [];
    if (type === 'image_generation_call') out.result ??= null;
    if (type === 'code_interpreter_call') {
      out.code ??= null;
      out.outputs ??= null;
    }
    if (type === 'tool_search_call' || type === 'tool_search_output') {
      out.call_id ??= null;
      out.execution ??= 'server';
    }
  }
  return out;
}

/**
 * The item types whose listed resource requires a `status` (the spec's `ItemResource` variants) although a client
 * may send them without one: openai-node's `ResponseCustomToolCall` and `ResponseCustomToolCallOutput` have none,
 * the others an optional one. The API lists such an item `completed`; so does this server (an `apply_patch_call`'s
 * and its output's status are enums of their own, `completed` in both). `shell_call`'s `environment` (and its action's
 * `timeout_ms` and `max_output_length`) and `shell_call_output`'s `max_output_length` are required there too
 * (nullable): `null` when not sent, as are an `image_generation_call`'s `result` and a `code_interpreter_call`'s
 * `code` and `outputs`; a `computer_call`'s `pending_safety_checks`: none, `[]`; a `tool_search_call`'s and a
 * `tool_search_output`'s `call_id` (nullable: `null`) and `execution` (`server`, the hosted tool's; listed without them,
 * openai-python's strict validation failed: outside attack atk111 F2). The hosted tools' statuses have
 * more values (`searching`, `generating`, `interpreting`, `failed`), `completed` among them.
 */
const STATUS_REQUIRED: ReadonlySet<string> = new Set([
  'function_call',
  'function_call_output',
  'custom_tool_call',
  'custom_tool_call_output',
  'computer_call',
  'computer_call_output',
  'shell_call',
  'shell_call_output',
  'apply_patch_call',
  'apply_patch_call_output',
  'local_shell_call',
  'file_search_call',
  'web_search_call',
  'image_generation_call',
  'code_interpreter_call',
  'tool_search_call',
  'tool_search_output',
]);

/** `base`: hex of the response id's hash (`InputItemIndex`); the position follows it (8 hex digits: items are far fewer than 2^32). */
/**
 * What a derived id carries of its response: the hex of the response's own id (`resp_` and 32 hex digits, as
 * `newId` makes them), so an `item_reference` naming a listed id finds its response (`listedItemResponse`) and
 * the item at that position. Another id (none is made here) gets a hash of it, which no reference resolves. Ids
 * were a hash of the response id before, the same at every listing but naming nothing `item_reference` could find.
 */
function idBase(responseId: string): string {
  return RESPONSE_ID.test(responseId) ? responseId.slice(5) : createHash('sha256').update(responseId).digest('hex').slice(0, 24);
}

const RESPONSE_ID = /^resp_[0-9a-f]{32}$/;
const DERIVED_ID = /^[a-z]+_([0-9a-f]{32})[0-9a-f]{8}(?:_[0-9]+)?$/;

/** The response a derived id (`derivedId`, an `_n` suffix included) was listed under, or null for any other id. */
export function listedItemResponse(itemId: string): string | null {
  const m = DERIVED_ID.exec(itemId);
  return m ? `resp_${m[1]}` : null;
}

/**
 * The owner's stored item listed under `itemId` by `input_items` (derived: an item sent without an id, or the second
 * of two sent with one), a copy, or undefined: the list is read and its ids derived as a listing derives them, in
 * slices (the index is the store's cached one, shared with listings). Items that carry their own id are found by the
 * store's `getItem`; this finds the rest.
 */
export function* findListedItem(store: Pick<ResponseStore, 'inputItems'>, itemId: string, owner: string | null): Generator<void, InputItem | undefined, void> {
  const responseId = listedItemResponse(itemId);
  if (responseId === null) return undefined;
  const index = store.inputItems(responseId, owner);
  if (!index) return undefined;
  yield* index.derive();
  if (index.gone) return undefined;
  const at = index.position(itemId);
  return at < 0 ? undefined : (structuredClone(index.items[at]) as InputItem);
}

function derivedId(type: string, base: string, index: number): string {
  // An item typed `constructor` was listed under `function Object() { [native code] }_…` (outside attack).
  return `${ownValue(ID_PREFIX, type) ?? 'item'}_${base}${index.toString(16).padStart(8, '0')}`;
}
