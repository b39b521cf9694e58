/**
 * The query parameters of a list endpoint (`GET /v1/responses/{id}/input_items`,
 * `GET /llr/runs`), read one way for both: a parameter given twice is refused
 * rather than one of its values picked (as `?protocol=` and
 * `?starting_after=` are); `limit` is a decimal integer (`1e2`, `0x10`,
 * ` 5` or `5.0` are not, though `Number()` reads them as one), checked
 * against its range with the API's codes; `order` is `asc` or `desc`. Pure:
 * no I/O.
 */
import { WireError } from './errors.js';

/** The one value of `name`, or null when absent; given more than once: 400 `invalid_value`, `param` = the name. */
export function singleParam(q: URLSearchParams, name: string): string | null {
  const all = q.getAll(name);
  if (all.length > 1) throw new WireError('invalid_value', `Invalid '${name}': given more than once; give it once.`, name);
  return all[0] ?? null;
}

const INTEGER = /^-?[0-9]+$/;

/** `?limit=`: `def` when absent; a decimal integer from 1 to `max`, else 400 (`invalid_type`, `integer_below_min_value`, `integer_above_max_value`). */
export function limitParam(q: URLSearchParams, def: number, max: number): number {
  const raw = singleParam(q, 'limit');
  if (raw === null) return def;
  if (!INTEGER.test(raw)) {
    throw new WireError('invalid_type', `Invalid type for 'limit': expected an integer, but got '${raw.slice(0, 100)}' instead.`, 'limit');
  }
  // Any length of digits is an integer: compared as a number (a huge one is Infinity, still above the max).
  const limit = Number(raw);
  const shown = raw.length > 40 ? `${raw.slice(0, 40)}…` : raw;
  if (limit < 1) throw new WireError('integer_below_min_value', `Invalid 'limit': integer below minimum value. Expected a value >= 1, but got ${shown} instead.`, 'limit');
  if (limit > max) throw new WireError('integer_above_max_value', `Invalid 'limit': integer above maximum value. Expected a value <= ${max}, but got ${shown} instead.`, 'limit');
  return limit;
}

/** `?order=`: `asc` or `desc` (default `desc`, newest first, as the API's lists). */
export function orderParam(q: URLSearchParams): 'asc' | 'desc' {
  const order = singleParam(q, 'order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') {
    throw new WireError('invalid_value', `Invalid value for 'order': expected one of 'asc' or 'desc', but got '${order.slice(0, 100)}' instead.`, 'order');
  }
  return order;
}
