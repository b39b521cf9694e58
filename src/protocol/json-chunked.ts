/**
 * Parsing a large JSON text (an HTTP body or a WebSocket frame up to the
 * 16 MiB default limit) in slices, so the event loop is never held for the
 * whole of it: `JSON.parse` of 16 MiB of small objects runs 0.1–0.4 s in one
 * turn, and over 3 s when one object has a million keys.
 *
 * How: a container whose text spans more than `chunkChars` is not handed to
 * `JSON.parse` whole. Its members are found with a lexical scan (strings
 * skipped with `indexOf`, brackets counted) and parsed natively in batches of
 * at most `chunkChars` (`[m1,m2,…]`, `{k1:v1,…}`); a member that is itself
 * larger is walked the same way. The work is a generator that yields after
 * every batch, run by the transport with `runCooperative`
 * (src/cooperative.ts), which gives the loop a turn every few ms. The result is
 * the value `JSON.parse` would give (same key order, later duplicate keys
 * win, `__proto__` an own property); the scan also enforces the nesting
 * limit, naming the top-level key like `checkJsonDepth`.
 *
 * Used by `parseJsonTextWork` (protocol/json-text.ts) for texts above
 * `COOPERATIVE_PARSE_CHARS`; smaller ones keep the one-turn `JSON.parse`.
 * Leaves out worker threads: the parsed value would have to be copied back
 * with the structured clone, which costs the main thread about what parsing
 * does.
 */
import type { Work } from '../cooperative.js';
import { WireError } from './errors.js';

/** Largest slice handed to `JSON.parse` at once (~0.2–1 ms of work). */
export const PARSE_CHUNK_CHARS = 64 * 1024;

type Container = unknown[] | Record<string, unknown>;

/**
 * Levels of nesting the walk goes into (each a generator the next resumes through); a container deeper is handed to
 * `JSON.parse` whole (not recursive). Only a `maxDepth` raised past the default 64 reaches it: a stored row nested
 * thousands of levels deep, each larger than a slice, overflowed the stack (RangeError, every page of its listing 500)
 * after scanning a slice per level (seconds).
 */
const WALK_DEPTH = 256;

class ChunkedParser {
  private topKey: string | null = null;

  constructor(
    private readonly s: string,
    private readonly maxDepth: number,
    private readonly chunk: number,
  ) {}

  *run(): Work<unknown> {
    let i = this.ws(0);
    const { value, end } = yield* this.value(i, 0);
    i = this.ws(end);
    if (i !== this.s.length) this.fail(i, 'unexpected text after the JSON value');
    return value;
  }

  private fail(at: number, what: string): never {
    throw new SyntaxError(`${what} at position ${at}`);
  }

  private ws(i: number): number {
    const s = this.s;
    for (let c = s.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = s.charCodeAt(++i));
    return i;
  }

  /**
   * End (exclusive) of the string starting at `i` (a quote); -1 once it is known to end at or past `stop` (a
   * container's scan, which needs no more: its container then does not end within its slice).
   */
  private stringEnd(i: number, stop = Infinity): number {
    const s = this.s;
    let j = i;
    for (;;) {
      j = s.indexOf('"', j + 1);
      if (j < 0) {
        if (stop < Infinity) return -1;
        this.fail(i, 'unterminated string');
      }
      if (j >= stop) return -1;
      let k = j - 1;
      while (s.charCodeAt(k) === 0x5c) k--;
      if ((j - 1 - k) % 2 === 0) return j + 1;
    }
  }

  /**
   * End of the value starting at `i` if it ends within `limit` characters,
   * else -1; checks that its nesting fits under `depth`. A string or scalar
   * always gets its end (they cannot be split).
   */
  private valueEnd(i: number, depth: number, limit: number): number {
    const s = this.s;
    const c = s.charCodeAt(i);
    if (c === 0x22) return this.stringEnd(i);
    if (c !== 0x7b && c !== 0x5b) {
      let j = i;
      for (let d = s.charCodeAt(j); j < s.length && d !== 0x2c && d !== 0x5d && d !== 0x7d && d !== 0x20 && d !== 0x0a && d !== 0x0d && d !== 0x09; d = s.charCodeAt(++j));
      if (j === i) this.fail(i, 'expected a value');
      return j;
    }
    let level = 0;
    const stop = Math.min(s.length, i + limit);
    for (let j = i; j < stop; j++) {
      const d = s.charCodeAt(j);
      if (d === 0x22) {
        // A string past the slice is not scanned to its end: with a long one, every container around it scanned
        // all of it, a quote at a time, once per level (seconds for a 6 MB string of escaped quotes 60 levels deep).
        const end = this.stringEnd(j, i + limit);
        if (end < 0) return -1;
        j = end - 1;
      } else if (d === 0x7b || d === 0x5b) {
        if (depth + ++level > this.maxDepth) this.tooDeep();
      } else if (d === 0x7d || d === 0x5d) {
        if (--level === 0) return j + 1;
      }
    }
    return -1;
  }

  private tooDeep(): never {
    const param = this.topKey?.slice(0, 100) ?? null;
    throw new WireError('json_too_deep', `The JSON nests deeper than ${this.maxDepth} levels${param ? ` (in '${param}')` : ''}; this server accepts at most ${this.maxDepth}.`, param);
  }

  private native(from: number, to: number, wrap: '' | '[]' | '{}'): unknown {
    const text = this.s.slice(from, to);
    try {
      return JSON.parse(wrap === '' ? text : `${wrap[0]}${text}${wrap[1]}`);
    } catch (err) {
      this.fail(from, (err as Error).message);
    }
  }

  /** The value at `i` (no leading whitespace) at nesting `depth` (containers around it). */
  private *value(i: number, depth: number): Work<{ value: unknown; end: number }> {
    // Deeper than `WALK_DEPTH`, a container is parsed whole, however large: the walk recurses a level at a time.
    const end = this.valueEnd(i, depth, depth < WALK_DEPTH ? this.chunk : Infinity);
    if (end >= 0) return { value: this.native(i, end, ''), end };
    // A container too large for one slice: its members, in batches.
    const isArray = this.s.charCodeAt(i) === 0x5b;
    if (depth + 1 > this.maxDepth) this.tooDeep();
    const out: Container = isArray ? [] : {};
    const close = isArray ? 0x5d : 0x7d;
    let p = this.ws(i + 1);
    if (this.s.charCodeAt(p) === close) return { value: out, end: p + 1 };
    let batchStart = -1;
    let batchEnd = -1;
    const flush = () => {
      if (batchStart < 0) return;
      const part = this.native(batchStart, batchEnd, isArray ? '[]' : '{}');
      if (isArray) for (const v of part as unknown[]) (out as unknown[]).push(v);
      else for (const k of Object.keys(part as object)) setKey(out as Record<string, unknown>, k, (part as Record<string, unknown>)[k]);
      batchStart = -1;
    };
    for (;;) {
      // One member: `value`, or `"key": value`.
      const memberStart = p;
      let key: string | null = null;
      let v = p;
      if (!isArray) {
        if (this.s.charCodeAt(p) !== 0x22) this.fail(p, 'expected a property name');
        const keyEnd = this.stringEnd(p);
        if (depth === 0) this.topKey = this.s.slice(p + 1, keyEnd - 1);
        key = this.native(p, keyEnd, '') as string;
        v = this.ws(keyEnd);
        if (this.s.charCodeAt(v) !== 0x3a) this.fail(v, "expected ':'");
        v = this.ws(v + 1);
      }
      const room = batchStart < 0 ? this.chunk : this.chunk - (p - batchStart);
      let end = this.valueEnd(v, depth + 1, Math.max(room, 1));
      if (end >= 0 && end - memberStart <= this.chunk) {
        if (batchStart < 0) batchStart = memberStart;
        batchEnd = end;
      } else {
        flush();
        yield;
        // Its end already found (a long string, or a member whose key made it long): parsed without a second scan.
        const member = end >= 0 ? { value: this.native(v, end, ''), end } : yield* this.value(v, depth + 1);
        end = member.end;
        if (isArray) (out as unknown[]).push(member.value);
        else setKey(out as Record<string, unknown>, key!, member.value);
      }
      p = this.ws(end);
      const d = this.s.charCodeAt(p);
      if (d === close) {
        flush();
        return { value: out, end: p + 1 };
      }
      if (d !== 0x2c) this.fail(p, `expected ',' or '${isArray ? ']' : '}'}'`);
      p = this.ws(p + 1);
      if (batchStart >= 0 && p - batchStart > this.chunk) {
        flush();
        yield;
      }
    }
  }
}

/** `JSON.parse`'s assignment: `__proto__` becomes an own property, not the prototype. */
function setKey(o: Record<string, unknown>, k: string, v: unknown): void {
  if (k === '__proto__') Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  else o[k] = v;
}

/**
 * Parse `text` in slices (see the header). Throws `SyntaxError` for invalid
 * JSON (the caller reports `invalid_json`) and `json_too_deep` past
 * `maxDepth` nested arrays/objects.
 */
export function parseJsonWork(text: string, maxDepth: number, chunkChars = PARSE_CHUNK_CHARS): Work<unknown> {
  return new ChunkedParser(text, maxDepth, chunkChars).run();
}

/**
 * The other direction: the pieces of `JSON.stringify(value)` (joined, they
 * are its text), leaves stringified natively, yielding between members, for
 * answers and sealed compactions of up to 16 MiB. Exact for the JSON-shaped
 * values the server handles (plain objects, arrays, strings, numbers,
 * booleans, null; `undefined` members left out), and an object's `toJSON`
 * is called as `JSON.stringify` calls it (a live run's record is a class
 * whose `toJSON` gives its plain form: `GET /llr/runs` lost its counters,
 * totals and spans without it); leaves out replacers, which none has.
 */
/**
 * Work between yields, counted in characters: a string's or key's length, and `VALUE_WORK` for each value besides
 * (`CONTAINER_WORK` for an object or array). Each yield is only taken once the loop budget is spent. Leaves count
 * too: an array of 3 million one-character strings (a `required` list of a 12 MB schema) held the loop ~1.4 s in one
 * turn when only objects and arrays were counted, and so did many strings each just under `STRING_SLICE_CHARS`.
 */
const WORK_PER_YIELD = 64 * 1024;
const VALUE_WORK = 16;
const CONTAINER_WORK = 256;
/**
 * Strings longer than this are escaped in slices of this size: a character that needs an escape (a lone
 * surrogate's `\\udXXX`, a control character) costs JSON.stringify ~120 ns, so a slice holds the loop ~30 ms.
 */
const STRING_SLICE_CHARS = 256 * 1024;

/** The pieces of `JSON.stringify(value)` (joined, they are the text). */
export function* stringifyWork(value: unknown): Work<string[]> {
  const out: string[] = [];
  yield* stringifyInto(value, out);
  return out;
}

/**
 * `stringifyWork`, pushing its pieces onto `out`: at each yield the caller may take what `out` holds (join it and empty
 * the array) and the pieces that follow continue the text, so a large answer is written as it is made and no more of
 * it than a slice is held at once (transport/json-out.ts).
 */
export function* stringifyInto(value: unknown, out: string[]): Work<void> {
  let work = 0;
  /** A value that is neither a long string nor an object or array: stringified here, with no generator of its own. */
  const leaf = (v: unknown): boolean => (typeof v !== 'object' || v === null) && !(typeof v === 'string' && v.length > STRING_SLICE_CHARS);
  const pushLeaf = (v: unknown, inArray: boolean): void => {
    const s = JSON.stringify(v);
    out.push(s === undefined ? (inArray ? 'null' : '') : s);
    work += VALUE_WORK + (typeof v === 'string' ? v.length : 0);
  };
  /**
   * A small container stringified natively, in one piece (`smallPlain`): walked here member by member, the 1,000
   * records of a `GET /llr/runs` page (2 MB) took ~150 ms against 7 ms for JSON.stringify of the same page, and an
   * outside attack's 100 pages at once held new connections ~13 s.
   */
  const pushSmall = (x: unknown): boolean => {
    if (typeof x !== 'object' || x === null) return false;
    const chars = smallPlain(x, SMALL_NATIVE_CHARS);
    if (chars < 0) {
      // The count's own walk, up to the limit, is work too: a deep value is counted again at each level it is walked.
      work += SMALL_NATIVE_CHARS;
      return false;
    }
    out.push(JSON.stringify(x));
    work += chars;
    return true;
  };
  // `v` is already what `toJSON` made of it (`plain`), as JSON.stringify calls it once per member.
  function* walk(v: unknown, inArray: boolean): Work<void> {
    if (typeof v === 'string' && v.length > STRING_SLICE_CHARS) {
      // A long string in slices (never between a surrogate pair's halves, which JSON.stringify
      // would escape one by one): no second string of its size is built in one turn.
      out.push('"');
      for (let at = 0; at < v.length; ) {
        let end = Math.min(v.length, at + STRING_SLICE_CHARS);
        const last = v.charCodeAt(end - 1);
        if (end < v.length && last >= 0xd800 && last <= 0xdbff) end--;
        out.push(JSON.stringify(v.slice(at, end)).slice(1, -1));
        at = end;
        work = 0;
        yield;
      }
      out.push('"');
      return;
    }
    if (typeof v !== 'object' || v === null) {
      pushLeaf(v, inArray);
      return;
    }
    work += CONTAINER_WORK;
    if (Array.isArray(v)) {
      out.push('[');
      for (let i = 0; i < v.length; i++) {
        if (work >= WORK_PER_YIELD) {
          work = 0;
          yield;
        }
        if (i > 0) out.push(',');
        const x = plain(v[i], String(i));
        if (leaf(x)) pushLeaf(x, true);
        else if (!pushSmall(x)) yield* walk(x, true);
      }
      out.push(']');
      return;
    }
    out.push('{');
    let first = true;
    for (const k of Object.keys(v)) {
      if (work >= WORK_PER_YIELD) {
        work = 0;
        yield;
      }
      const x = plain((v as Record<string, unknown>)[k], k);
      if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
      out.push(first ? `${JSON.stringify(k)}:` : `,${JSON.stringify(k)}:`);
      work += k.length;
      first = false;
      if (leaf(x)) pushLeaf(x, false);
      else if (!pushSmall(x)) yield* walk(x, false);
    }
    out.push('}');
  }
  yield* walk(plain(value, ''), true);
}

/**
 * Containers whose count (`textChars`'s) is at most this are stringified natively by `stringifyInto`: even all in
 * escapes (~120 ns a character), one holds the loop ~2 ms.
 */
const SMALL_NATIVE_CHARS = 16 * 1024;

/**
 * `textChars`'s count of `v` if it is at most `limit` and nothing in it has a `toJSON` (whose output the count does
 * not see), else -1.
 */
function smallPlain(v: object, limit: number): number {
  let total = 0;
  const stack: object[] = [v];
  while (stack.length > 0) {
    const x = stack.pop()!;
    total += NODE_CHARS;
    if (Array.isArray(x)) {
      for (const e of x) {
        if (typeof e === 'object' && e !== null) stack.push(e);
        else total += NODE_CHARS + (typeof e === 'string' ? e.length : 0);
        if (total > limit) return -1;
      }
    } else {
      if (typeof (x as { toJSON?: unknown }).toJSON === 'function') return -1;
      for (const k of Object.keys(x)) {
        const e = (x as Record<string, unknown>)[k];
        total += k.length;
        if (typeof e === 'object' && e !== null) stack.push(e);
        else total += NODE_CHARS + (typeof e === 'string' ? e.length : 0);
        if (total > limit) return -1;
      }
    }
    if (total > limit) return -1;
  }
  return total;
}

/** What JSON.stringify serialises for `v` under `key`: its `toJSON(key)` when it has one. */
function plain(v: unknown, key: string): unknown {
  if (typeof v !== 'object' || v === null) return v;
  const toJSON = (v as { toJSON?: unknown }).toJSON;
  return typeof toJSON === 'function' ? (toJSON as (k: string) => unknown).call(v, key) : v;
}

/** Each value or member counted as this many characters in `textOver`'s estimate. */
const NODE_CHARS = 8;

/**
 * Whether `JSON.stringify(v)` could be long enough to matter: its strings' and keys' characters plus
 * NODE_CHARS per value together pass `limit`. A walk that stops once past it, and costs a small value
 * (a tool's schema) about a microsecond; JSON-shaped values only.
 */
export function textOver(v: unknown, limit: number): boolean {
  return textChars(v, limit) > limit;
}

/**
 * `textOver`'s count of `v`'s text: its strings' and keys' characters plus NODE_CHARS per value, the walk stopped
 * once the count passes `limit` (the count then is over `limit`, by less than one member's).
 */
export function textChars(v: unknown, limit: number): number {
  let total = 0;
  const stack: unknown[] = [v];
  while (stack.length > 0) {
    const x = stack.pop();
    total += NODE_CHARS;
    if (typeof x === 'string') total += x.length;
    // A container's leaves are counted in place and the limit checked as they are: every element of an array of
    // 3 million strings was pushed (~0.2 s in one turn) before the first was counted.
    else if (Array.isArray(x)) {
      for (const e of x) {
        if (typeof e === 'object' && e !== null) stack.push(e);
        else total += NODE_CHARS + (typeof e === 'string' ? e.length : 0);
        if (total > limit) return total;
      }
    } else if (typeof x === 'object' && x !== null) {
      for (const k of Object.keys(x)) {
        const e = (x as Record<string, unknown>)[k];
        total += k.length;
        if (typeof e === 'object' && e !== null) stack.push(e);
        else total += NODE_CHARS + (typeof e === 'string' ? e.length : 0);
        if (total > limit) return total;
      }
    }
    if (total > limit) return total;
  }
  return total;
}

/** Text below this (by `textOver`) is stringified natively, in one go: at most ~30 ms even if all of it needs escapes. */
export const NATIVE_TEXT_CHARS = STRING_SLICE_CHARS;

/**
 * `JSON.stringify(value)` as one string: natively when short (`textOver`), else in slices (`stringifyWork`).
 * One JSON.stringify of a tool schema holding 2.5 million lone surrogates held the loop ~300 ms.
 */
export function* jsonTextWork(value: unknown): Work<string> {
  if (!textOver(value, NATIVE_TEXT_CHARS)) return JSON.stringify(value);
  const pieces = yield* stringifyWork(value);
  // Joined a slice of pieces at a time: one join of the 6 million pieces of a 3-million-name `required` took ~0.15 s.
  if (pieces.length <= JOIN_PIECES) return pieces.join('');
  const parts: string[] = [];
  for (let at = 0; at < pieces.length; at += JOIN_PIECES) {
    parts.push(pieces.slice(at, at + JOIN_PIECES).join(''));
    yield;
  }
  return parts.join('');
}

/**
 * `JSON.stringify(value)` when it is at most `maxChars` long, else undefined, made in slices (`jsonTextWork`) but never
 * joined when longer: the caller wanted the text only as a short key (a schema's, `checkToolSchema`), and the join of
 * a structured-output schema of 2.4 million lone surrogates (14.4 M characters) held the loop ~100 ms for nothing.
 * Throws as JSON.stringify would.
 */
export function* jsonTextIfShortWork(value: unknown, maxChars: number): Work<string | undefined> {
  if (!textOver(value, NATIVE_TEXT_CHARS)) {
    const text = JSON.stringify(value) as string | undefined;
    return text !== undefined && text.length <= maxChars ? text : undefined;
  }
  const pieces = yield* stringifyWork(value);
  let chars = 0;
  for (const piece of pieces) chars += piece.length;
  if (chars > maxChars) return undefined;
  return pieces.join('');
}

/** Pieces `jsonTextWork` joins in one turn. */
const JOIN_PIECES = 64 * 1024;

/**
 * `Buffer.from(JSON.stringify(value))`, made in slices: the pieces `stringifyWork` makes are written one part at a time
 * (a part: at most `JOIN_PIECES` pieces and about `STRING_SLICE_CHARS` characters, or one longer piece) into a buffer
 * sized by counting them first, with no text of the whole built. For a Response's echo of 2.4 million lone
 * surrogates, `jsonTextWork`'s last join (14.4 M characters, ~75–160 ms here: a fresh string of 29 MB) and the
 * `Buffer.from` of its text (~50 ms) ran in one turn, with the next echo's first slice after them: ~250 ms.
 */
export function* jsonBytesWork(value: unknown): Work<Buffer> {
  if (!textOver(value, NATIVE_TEXT_CHARS)) return Buffer.from(JSON.stringify(value), 'utf8');
  const pieces = yield* stringifyWork(value);
  const parts: string[] = [];
  let bytes = 0;
  for (let at = 0; at < pieces.length; ) {
    let end = at;
    let chars = 0;
    while (end < pieces.length && end - at < JOIN_PIECES && (end === at || chars + pieces[end]!.length <= STRING_SLICE_CHARS)) chars += pieces[end++]!.length;
    const part = end === at + 1 ? pieces[at]! : pieces.slice(at, end).join('');
    parts.push(part);
    bytes += Buffer.byteLength(part, 'utf8');
    at = end;
    yield;
  }
  pieces.length = 0;
  const out = Buffer.allocUnsafeSlow(bytes);
  let at = 0;
  for (let i = 0; i < parts.length; i++) {
    at += out.write(parts[i]!, at, 'utf8');
    parts[i] = '';
    yield;
  }
  return out;
}

/**
 * `Buffer.byteLength(text)` (its UTF-8 bytes), natively when short, else in `STRING_SLICE_CHARS` slices (never
 * between a surrogate pair's halves, which would count as two lone ones): for the text `jsonTextWork` made, whose
 * one count of 15 MB took ~40–80 ms.
 */
export function* utf8BytesWork(text: string): Work<number> {
  if (text.length <= STRING_SLICE_CHARS) return Buffer.byteLength(text);
  let bytes = 0;
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + STRING_SLICE_CHARS);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    bytes += Buffer.byteLength(text.slice(at, end));
    at = end;
    yield;
  }
  return bytes;
}
