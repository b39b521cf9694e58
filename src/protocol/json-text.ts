/**
 * JSON text off the wire, before it is parsed: its shape is bounded (nesting
 * depth, keys per object, objects and arrays in all) in one linear pass, and
 * a large text is parsed in slices that yield to the event loop
 * (protocol/json-chunked.ts). A bad text is `invalid_json` naming the body or
 * frame. Used by the transports' edges, the demo, the workload reader and
 * compaction. Pure.
 */
import type { Work } from '../cooperative.js';
import { WireError } from './errors.js';
import { parseJsonWork } from './json-chunked.js';

/** The deepest JSON nesting accepted by default (see `Limits.maxJsonDepth`). */
export const DEFAULT_MAX_JSON_DEPTH = 64;
/** The most keys one JSON object may have by default (see `Limits.maxJsonKeys`). */
export const DEFAULT_MAX_JSON_KEYS = 10_000;
/**
 * The most objects and arrays one body or frame may hold by default (see
 * `Limits.maxJsonContainers`): 16 MiB of `[[]]` is 8 million arrays, whose
 * garbage collection alone holds the loop for seconds; 200,000 is twice
 * what the input cap (50,000 items and parts) and the schema cap need.
 */
export const DEFAULT_MAX_JSON_CONTAINERS = 200_000;

/** Characters the shape check scans between yields (~1–3 ms). */
const SHAPE_SLICE_CHARS = 512 * 1024;

/**
 * Refuse JSON text that nests deeper than `maxDepth` arrays/objects, or has
 * an object with more than `maxKeys` keys, or more than `maxContainers`
 * objects and arrays in all, before it is parsed: a value
 * thousands of levels deep parses fine but overflows the stack later, when a
 * response, an event or a stored record serialises it; an object with a
 * million keys takes seconds to parse and to walk (V8 keeps it as a hash
 * table), while the API's own objects are small (`metadata`: 16 keys, a
 * strict schema: 5,000 properties in all). One linear pass without
 * recursion that yields every 512 K characters; the param named is the
 * top-level key whose value is at fault.
 */
export function* jsonShapeWork(text: string, maxDepth: number, maxKeys = Infinity, maxContainers = Infinity): Generator<void, void, void> {
  let containers = 0;
  let depth = 0;
  let keyStart = -1;
  let keyEnd = -1;
  let lastStart = -1;
  let lastEnd = -1;
  // Per open container: its key count so far (objects) or -1 (arrays).
  const keys: number[] = [];
  const param = () => (keyStart >= 0 ? text.slice(keyStart, Math.min(keyEnd, keyStart + 100)) : null);
  let nextYield = SHAPE_SLICE_CHARS;
  for (let i = 0; i < text.length; i++) {
    if (i >= nextYield) {
      yield;
      nextYield = i + SHAPE_SLICE_CHARS;
    }
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      // Skip the string: the next quote not escaped by an odd run of backslashes.
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        if (j < 0) return; // unterminated: JSON.parse reports it
        let k = j - 1;
        while (text.charCodeAt(k) === 92) k--;
        if ((j - 1 - k) % 2 === 0) break;
      }
      if (depth === 1) {
        lastStart = i + 1;
        lastEnd = j;
      }
      i = j;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > maxDepth) {
        const p = param();
        throw new WireError('json_too_deep', `The JSON nests deeper than ${maxDepth} levels${p ? ` (in '${p}')` : ''}; this server accepts at most ${maxDepth}.`, p);
      }
      keys.push(c === 123 ? 0 : -1);
      if (++containers > maxContainers) {
        const p = param();
        throw new WireError(
          'array_above_max_length',
          `The JSON holds more than ${maxContainers} objects and arrays${p ? ` (the last in '${p}')` : ''}; this server accepts at most ${maxContainers} (llr serve --max-json-containers).`,
          p,
        );
      }
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      depth--;
      keys.pop();
    } else if (c === 58 /* : */) {
      if (depth === 1) {
        keyStart = lastStart;
        keyEnd = lastEnd;
      }
      const n = keys.length - 1;
      if (n >= 0 && keys[n]! >= 0 && ++keys[n]! > maxKeys) {
        const p = param();
        throw new WireError(
          'object_above_max_properties',
          `An object in the JSON has more than ${maxKeys} keys${p ? ` (in '${p}')` : ''}; this server accepts at most ${maxKeys} (llr serve --max-json-keys).`,
          p,
        );
      }
    }
  }
}

/** `jsonShapeWork` in one go (the depth check alone when `maxKeys` is left out). */
export function checkJsonDepth(text: string, max: number, maxKeys = Infinity, maxContainers = Infinity): void {
  const work = jsonShapeWork(text, max, maxKeys, maxContainers);
  while (!work.next().done);
}

/** JSON text from the edge (an HTTP body or a WebSocket frame) → a value, depth-checked first. */
export function parseJsonText(text: string, what: 'body' | 'frame', maxDepth = DEFAULT_MAX_JSON_DEPTH, maxKeys = DEFAULT_MAX_JSON_KEYS, maxContainers = DEFAULT_MAX_JSON_CONTAINERS): unknown {
  checkJsonDepth(text, maxDepth, maxKeys, maxContainers);
  return parseChecked(text, what);
}

function invalidJson(what: 'body' | 'frame', err: unknown): WireError {
  const subject = what === 'body' ? 'The request body' : 'The frame';
  return new WireError('invalid_json', `${subject} is not valid JSON: ${(err as Error).message}`, null, { cause: err });
}

function parseChecked(text: string, what: 'body' | 'frame'): unknown {
  // The SyntaxError of a text that is not JSON is the client's: only its message is used, and capturing its stack
  // was half of what a refused frame cost (a flood of 7-byte bad frames held the event loop; outside attack).
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalidJson(what, err);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** Texts up to this many characters are parsed in one turn (~5–10 ms); longer ones in slices. */
export const COOPERATIVE_PARSE_CHARS = 1024 * 1024;

/**
 * `parseJsonText` as cooperative work (run it with `runCooperative`): the
 * shape check and, for a text over `COOPERATIVE_PARSE_CHARS`, the parse
 * itself go in slices (protocol/json-chunked.ts), so a 16 MiB body or frame
 * never holds the event loop for long.
 */
export function* parseJsonTextWork(
  text: string,
  what: 'body' | 'frame',
  maxDepth = DEFAULT_MAX_JSON_DEPTH,
  maxKeys = DEFAULT_MAX_JSON_KEYS,
  maxContainers = DEFAULT_MAX_JSON_CONTAINERS,
): Work<unknown> {
  yield* jsonShapeWork(text, maxDepth, maxKeys, maxContainers);
  if (text.length <= COOPERATIVE_PARSE_CHARS) return parseChecked(text, what);
  yield;
  try {
    return yield* parseJsonWork(text, maxDepth);
  } catch (err) {
    if (err instanceof SyntaxError) throw invalidJson(what, err);
    throw err;
  }
}
