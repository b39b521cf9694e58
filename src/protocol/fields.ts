/**
 * The field readers every edge parser uses: an optional string, enum,
 * boolean, number or integer in range, read from a JSON object off the wire,
 * each refusing a wrong type or value with the API's own code and message
 * naming the parameter. Used by protocol/parse.ts and parse-input.ts. Pure.
 */
import { jsonPreview, WireError } from './errors.js';

/** A JSON object as read from the wire: its fields not yet checked. */
export type Obj = Record<string, unknown>;

/**
 * `table[key]` when `key` is the table's own, else undefined: a key a client (or a command line) names never finds one
 * of Object's members. `constructor` and `__proto__` found them in tables read by plain indexing (a 500 from a tool
 * choice or a schema format, NaN prices, a TypeError from `llr bench --profile`; outside attacks).
 */
export function ownValue<T>(table: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/**
 * `{ ...o, ...extra }`, made faster: the same own keys in the same order (`o`'s where they were, `extra`'s new ones
 * after them) and the same values. V8 copies `o` by cloning its shape, then gives every key added to the clone a new
 * shape of its own: `{ ...tool, description: …, strict: … }` cost 2–3 µs per function tool and `{ ...event,
 * sequence_number }` 1–1.7 µs per event (against ~0.1 µs here), on every response (`npm run bench:overhead`'s ws step).
 * `Object.assign` would call the `__proto__` setter for an own key named `__proto__` (JSON.parse makes one), and
 * lose it: such an object takes the spread.
 */
export function withFields<T extends object, E extends object>(o: T, extra: E): Omit<T, keyof E> & E {
  return Object.hasOwn(o, '__proto__') ? { ...o, ...extra } : Object.assign({}, o, extra);
}

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function assertObj(v: unknown, param: string): asserts v is Obj {
  if (!isObj(v)) throw new WireError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
}

/**
 * How many characters `s` has, counted as the API counts them: Unicode code points, so a character outside the BMP
 * (an emoji: two UTF-16 units) is one, and a lone surrogate is one.
 */
export function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++, n++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
  }
  return n;
}

/**
 * Whether `s` has more than `max` characters (`codePoints`). By `length` a value of 300 emoji was refused as over 512.
 * At most `2 * max` units are read.
 */
export function longerThan(s: string, max: number): boolean {
  if (s.length <= max) return false;
  if (s.length > 2 * max) return true;
  return codePoints(s) > max;
}

/**
 * A string field the API bounds by `maxLength`: over it, 400 `string_above_max_length` in the API's words ("Invalid
 * 'prompt_cache_key': string too long. Expected a string with maximum length 64, but got a string with length 72
 * instead.", as public reports quote it). With `minLength` 1 (`nonEmpty`), `""` is the API's `empty_string`.
 */
export function checkLength(s: string, max: number, param: string, nonEmpty = false): void {
  if (nonEmpty && s.length === 0) {
    throw new WireError('empty_string', `Invalid '${param}': empty string. Expected a string with minimum length 1, but got an empty string instead.`, param);
  }
  if (longerThan(s, max)) {
    throw new WireError(
      'string_above_max_length',
      `Invalid '${param}': string too long. Expected a string with maximum length ${max}, but got a string with length ${codePoints(s)} instead.`,
      param,
    );
  }
}

export function optString(o: Obj, key: string, prefix = ''): string | null {
  const v = o[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') {
    throw new WireError('invalid_type', `Invalid type for '${prefix}${key}': expected a string.`, prefix + key);
  }
  return v;
}

/** The API's words for a list of values: `'a', 'b', and 'c'`. */
export function supported(values: readonly string[]): string {
  const q = values.map((v) => `'${v}'`);
  // "'a' and 'b'"; "'a', 'b', and 'c'" (it said "'a', and 'b'" for two).
  return q.length < 3 ? q.join(' and ') : `${q.slice(0, -1).join(', ')}, and ${q.at(-1)}`;
}

/**
 * A string that must be one of `values` (or absent / null): a field the Response echoes, so a value outside
 * the API's enum would reach typed clients (openai-node's unions, strict decoders) as sent.
 */
export function optEnum<T extends string>(o: Obj, key: string, values: readonly T[], prefix = ''): T | null {
  const v = optString(o, key, prefix);
  if (v === null || (values as readonly string[]).includes(v)) return v as T | null;
  throw new WireError('invalid_value', `Invalid value for '${prefix}${key}': '${v.slice(0, 100)}'. Supported values are: ${supported(values)}.`, prefix + key);
}

export function optBool(o: Obj, key: string, dflt: boolean): boolean {
  const v = o[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw new WireError('invalid_type', `Invalid type for '${key}': expected a boolean.`, key);
  return v;
}

export function optNumber(o: Obj, key: string): number | null {
  const v = o[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new WireError('invalid_type', `Invalid type for '${key}': expected a number.`, key);
  }
  return v;
}

/** An optional integer >= min, with the API's codes and messages. */
export function optInteger(o: Obj, key: string, min: number): number | null {
  const v = optNumber(o, key);
  if (v === null) return null;
  if (!Number.isInteger(v)) {
    throw new WireError('invalid_type', `Invalid type for '${key}': expected an integer, but got a decimal number instead.`, key);
  }
  if (v < min) {
    throw new WireError('integer_below_min_value', `Invalid '${key}': integer below minimum value. Expected a value >= ${min}, but got ${v} instead.`, key);
  }
  // Past 2^53 a JSON integer is not the integer sent (9007199254740993 reads as …992), and 1e300 was echoed `1e+300`.
  if (v > Number.MAX_SAFE_INTEGER) {
    throw new WireError('integer_above_max_value', `Invalid '${key}': integer above maximum value. Expected a value <= ${Number.MAX_SAFE_INTEGER}, but got ${v} instead.`, key);
  }
  return v;
}

/** An optional integer in [min, max], with the API's codes and messages. */
export function optIntegerRange(o: Obj, key: string, min: number, max: number): number | null {
  const v = optInteger(o, key, min);
  if (v !== null && v > max) {
    throw new WireError('integer_above_max_value', `Invalid '${key}': integer above maximum value. Expected a value <= ${max}, but got ${v} instead.`, key);
  }
  return v;
}

/** An optional number in [min, max], with the API's codes and messages. */
export function optRange(o: Obj, key: string, min: number, max: number): number | null {
  const v = optNumber(o, key);
  if (v === null) return null;
  if (v < min) {
    throw new WireError('decimal_below_min_value', `Invalid '${key}': decimal below minimum value. Expected a value >= ${min}, but got ${v} instead.`, key);
  }
  if (v > max) {
    throw new WireError('decimal_above_max_value', `Invalid '${key}': decimal above maximum value. Expected a value <= ${max}, but got ${v} instead.`, key);
  }
  return v;
}

/**
 * `v.type` is a string, else the refusal its value calls for: absent or null, `missing_required_parameter`; sent as
 * another JSON type (`true`, `7`, `[]`, `{}`), `invalid_type` showing what was sent. A tool's or a content part's
 * `type` of another type was told it was missing (the item's own `type` check said it right; outside attack atk109 F1).
 */
export function requireStringType(v: Obj, param: string): asserts v is Obj & { type: string } {
  const type = v['type'];
  if (typeof type === 'string') return;
  if (type === undefined || type === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.type'.`, `${param}.type`);
  throw new WireError('invalid_type', `Invalid type for '${param}.type': expected a string, but got ${jsonPreview(type)} instead.`, `${param}.type`);
}

/** `v.type` is `type`: a check the compiler narrows on. */
export function hasType<T extends string>(v: Obj, type: T): v is Obj & { type: T } {
  return v['type'] === type;
}

export function requireString<K extends string>(v: Obj, key: K, param: string): asserts v is Obj & { [P in K]: string } {
  const x = v[key];
  if (x === undefined) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.${key}'.`, `${param}.${key}`);
  if (typeof x !== 'string') throw new WireError('invalid_type', `Invalid type for '${param}.${key}': expected a string.`, `${param}.${key}`);
}

/** What `ofKind` says a field must be, in the API's words (tools' fields, hosted tools' items). */
export const KIND_WORDS: Readonly<Record<string, string>> = {
  string: 'a string',
  number: 'a number',
  boolean: 'a boolean',
  array: 'an array',
  strings: 'an array of strings',
  named: 'an array of tools ({name, input_schema})',
  string_or_object: 'a string or an object',
  object: 'an object',
};

/** Whether `x` is of `kind` (a key of `KIND_WORDS`; anything else: an object). */
export function ofKind(x: unknown, kind: string): boolean {
  switch (kind) {
    case 'string':
      return typeof x === 'string';
    case 'number':
      // JSON's 1e999 parses to Infinity, which is echoed as null: refused as the other number checks do.
      return typeof x === 'number' && Number.isFinite(x);
    case 'boolean':
      return typeof x === 'boolean';
    case 'array':
      return Array.isArray(x);
    case 'strings':
      return Array.isArray(x) && x.every((e) => typeof e === 'string');
    case 'named':
      return Array.isArray(x) && x.every((t) => isObj(t) && typeof t['name'] === 'string');
    case 'string_or_object':
      return typeof x === 'string' || isObj(x);
    default:
      return isObj(x);
  }
}

/**
 * The API's bounds on the longest strings an input item carries, in Unicode code points: any text (a message's content,
 * a part's `text`, a tool's `output`) 10 MiB, a function call's `arguments` 1 MiB. Its refusal, as public reports quote
 * it: "Invalid 'input[4].output': string too long. Expected a string with maximum length 10485760, but got a string
 * with length 10605342 instead." (`string_above_max_length`; inspect_ai#4682 for `arguments`' 1048576).
 */
export const TEXT_MAX_CHARS = 10_485_760;
export const ARGUMENTS_MAX_CHARS = 1_048_576;
