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
 * `status`. An item sent without an id gets one derived from the response id
 * and its position, the same at every listing (so a cursor stays valid), not
 * an id `item_reference` can name; so does the second of two items sent with
 * one id. Pure: no I/O.
 */
import { createHash } from 'node:crypto';
import { WireError } from '../protocol/errors.js';
import type { InputItem } from '../protocol/objects.js';
import type { StoredResponse } from './types.js';

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
};

/** The query of a listing: `?limit=`, `?order=`, `?after=`, `?before=` (`include` is accepted and changes nothing). */
export function parseInputItemsQuery(q: URLSearchParams): InputItemsQuery {
  const rawLimit = q.get('limit');
  let limit = INPUT_ITEMS_PAGE_DEFAULT;
  if (rawLimit !== null) {
    limit = Number(rawLimit);
    if (rawLimit.trim() === '' || !Number.isInteger(limit)) throw new WireError('invalid_type', `Invalid type for 'limit': expected an integer, but got '${rawLimit.slice(0, 100)}' instead.`, 'limit');
    if (limit < 1) throw new WireError('integer_below_min_value', `Invalid 'limit': integer below minimum value. Expected a value >= 1, but got ${limit} instead.`, 'limit');
    if (limit > INPUT_ITEMS_PAGE_MAX) {
      throw new WireError('integer_above_max_value', `Invalid 'limit': integer above maximum value. Expected a value <= ${INPUT_ITEMS_PAGE_MAX}, but got ${limit} instead.`, 'limit');
    }
  }
  const order = q.get('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') {
    throw new WireError('invalid_value', `Invalid value for 'order': expected one of 'asc' or 'desc', but got '${order.slice(0, 100)}' instead.`, 'order');
  }
  return { limit, order, after: q.get('after'), before: q.get('before') };
}

/** One page of `rec`'s input items. A cursor that names no item of this list is refused (400, `param` the cursor). */
export function listInputItems(rec: StoredResponse, q: InputItemsQuery): InputItemList {
  // Ids are unique in the list, so a cursor names one place: an id the client gave twice is kept the first time only
  // (the SDK's auto-pagination, resuming after the second, would otherwise loop back to the first).
  const seen = new Set<string>();
  const all = rec.input.map((item, i) => {
    const out = resourceItem(item, rec.response.id, i, seen);
    seen.add(out.id as string);
    return out;
  });
  const ordered = q.order === 'asc' ? all : all.reverse();
  const at = (cursor: string, param: 'after' | 'before'): number => {
    const i = ordered.findIndex((it) => it.id === cursor);
    if (i < 0) throw new WireError('invalid_value', `Invalid '${param}': no input item '${cursor.slice(0, 100)}' in response '${rec.response.id}'.`, param);
    return i;
  };
  const start = q.after === null ? 0 : at(q.after, 'after') + 1;
  const end = q.before === null ? ordered.length : at(q.before, 'before');
  const window = ordered.slice(start, Math.max(start, end));
  // With only `before`, the page is the items right before it (the previous page), still in `order`.
  const data = q.before !== null && q.after === null ? window.slice(Math.max(0, window.length - q.limit)) : window.slice(0, q.limit);
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data.at(-1)?.id as string | undefined) ?? null,
    has_more: window.length > data.length,
  };
}

/** An input item as the API returns it from a listing. */
function resourceItem(item: InputItem, responseId: string, index: number, taken: ReadonlySet<string>): Record<string, unknown> {
  const type = typeof item.type === 'string' ? item.type : 'message';
  const own = (item as { id?: unknown }).id;
  const id = typeof own === 'string' && own !== '' && !taken.has(own) ? own : derivedId(type, responseId, index);
  const out: Record<string, unknown> = { id, ...item, type };
  out.id = id;
  if (type === 'message') {
    const role = (item as { role?: unknown }).role;
    const assistant = role === 'assistant';
    const content = (item as { content?: unknown }).content;
    if (typeof content === 'string') {
      out.content = [assistant ? { type: 'output_text', text: content, annotations: [] } : { type: 'input_text', text: content }];
    } else if (assistant && Array.isArray(content)) {
      out.content = content.map((p: Record<string, unknown>) => (p?.type === 'output_text' && !Array.isArray(p.annotations) ? { ...p, annotations: [] } : p));
    }
    out.status ??= 'completed';
  } else if (type === 'function_call' || type === 'function_call_output') {
    out.status ??= 'completed';
  }
  return out;
}

function derivedId(type: string, responseId: string, index: number): string {
  const prefix = ID_PREFIX[type] ?? 'item';
  return `${prefix}_${createHash('sha256').update(`${responseId}/${index}`).digest('hex').slice(0, 32)}`;
}
