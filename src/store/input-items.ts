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
import { limitParam, orderParam, singleParam } from '../protocol/list-query.js';
import type { InputItem } from '../protocol/objects.js';
import { ownInputItems, type StoredResponse } from './types.js';

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

/**
 * What `include` may name: the API's `ResponseIncludable` (openai-node
 * 6.49). A listing returns what it stores, so a valid one changes nothing
 * here; an unknown one is refused as the API refuses it.
 */
export const RESPONSE_INCLUDABLE = [
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
  'message.output_text.logprobs',
] as const;

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
 * One page of `rec`'s input items: its input, then what clients appended to
 * it (a long-lived run's tool outputs). A cursor that names no item of this
 * list is refused (400, `param` the cursor). Each item's id is found for the
 * whole list (cursors), but only the page's items are copied to their
 * resource form: a page of 20 of 50,000 items costs 20 copies.
 */
export function listInputItems(rec: StoredResponse, q: InputItemsQuery): InputItemList {
  const items = ownInputItems(rec);
  // Ids are unique in the list, so a cursor names one place: an id the client gave twice is kept the first time only
  // (the SDK's auto-pagination, resuming after the second, would otherwise loop back to the first).
  const seen = new Set<string>();
  const base = createHash('sha256').update(rec.response.id).digest('hex').slice(0, 24);
  const ids = items.map((item, i) => {
    const own = (item as { id?: unknown }).id;
    if (typeof own === 'string' && own !== '' && !seen.has(own)) {
      seen.add(own);
      return own;
    }
    const derived = derivedId(itemType(item), base, i);
    let id = derived;
    // An earlier item may carry the id derived for this one (an appended item: its client knows the response id).
    for (let n = 1; seen.has(id); n++) id = `${derived}_${n}`;
    seen.add(id);
    return id;
  });
  const position = (k: number): number => (q.order === 'asc' ? k : items.length - 1 - k);
  const at = (cursor: string, param: 'after' | 'before'): number => {
    const i = ids.indexOf(cursor);
    if (i < 0) throw new WireError('invalid_value', `Invalid '${param}': no input item '${cursor.slice(0, 100)}' in response '${rec.response.id}'.`, param);
    return position(i);
  };
  const start = q.after === null ? 0 : at(q.after, 'after') + 1;
  const end = Math.max(start, q.before === null ? items.length : at(q.before, 'before'));
  // With only `before`, the page is the items right before it (the previous page), still in `order`.
  const from = q.before !== null && q.after === null ? Math.max(start, end - q.limit) : start;
  const to = Math.min(end, from + q.limit);
  const data: Array<Record<string, unknown>> = [];
  for (let k = from; k < to; k++) {
    const i = position(k);
    data.push(resourceItem(items[i]!, ids[i]!));
  }
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data.at(-1)?.id as string | undefined) ?? null,
    has_more: end - start > data.length,
  };
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
    out.status ??= 'completed';
  } else if (type === 'function_call' || type === 'function_call_output') {
    out.status ??= 'completed';
  }
  return out;
}

/** `base`: hex of the response id's hash, hashed once per listing; the position follows it (8 hex digits: items are far fewer than 2^32). */
function derivedId(type: string, base: string, index: number): string {
  return `${ID_PREFIX[type] ?? 'item'}_${base}${index.toString(16).padStart(8, '0')}`;
}
