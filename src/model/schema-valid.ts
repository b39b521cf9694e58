/**
 * Whether a value satisfies a JSON Schema, as JSON Schema 2020-12 reads it
 * (with draft-07's `items` lists, `additionalItems` and `dependencies`, and
 * draft-04's boolean `exclusiveMinimum`/`exclusiveMaximum`, which tool
 * schemas still use): the simulated model's check of its own tool arguments
 * and structured output (model/schema-args.ts), so that what it sends always
 * validates against the schema the client sent, and a schema nothing
 * satisfies is refused before a run instead.
 *
 * Our own, not Ajv's: a client's schema is hostile input, and Ajv compiles
 * it to code first (a schema of 5,000 properties overflowed its stack;
 * 19,000 took 0.6 s of the event loop to fail). This walks the schema
 * against one value, with budgets: at most `STEPS` subschema visits per
 * check and nesting up to `MAX_DEPTH`; past them the value is taken as not
 * valid. Ajv is the tests' oracle (test/unit/schema-valid.test.ts).
 *
 * Covered: type, enum, const, the numeric bounds and multipleOf, string
 * lengths (code points) and format (Ajv's format validators, as
 * model/schema-strings.ts generates them), array bounds, uniqueItems,
 * prefixItems/items, contains with minContains/maxContains, object bounds,
 * required, dependentRequired, dependentSchemas, properties,
 * patternProperties, additionalProperties, propertyNames, allOf, anyOf,
 * oneOf, not, if/then/else, local $ref, unevaluatedProperties and
 * unevaluatedItems (from the annotations of the keywords above, `contains`'
 * matches included).
 *
 * `pattern`: a client's regex can backtrack exponentially on a string it does
 * not match, so one is never run on the event loop unguarded. A string the
 * generator made from that very pattern matches by construction and is not
 * tested again (`trustMatch`); any other is tested in a `vm` context with a
 * timeout, from a per-check budget of time (`PATTERN_MS`). A test that runs
 * out of it counts as no match.
 */
import vm from 'node:vm';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { codePoints, formatTakes } from './schema-strings.js';

type Schema = Record<string, unknown>;

/** Subschema visits in one check. */
const STEPS = 200_000;
/** Nesting of schema (through `$ref`) and value together in one check. */
const MAX_DEPTH = 256;
/** Milliseconds of pattern tests (in the guarded context) one check may spend in all. */
const PATTERN_MS = 50;

/** The budget of one check ran out: the value is taken as not valid. */
class Exhausted extends Error {}

function isSchema(x: unknown): x is Schema {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Which properties and items a subschema evaluated (2020-12 annotations), for `unevaluated*`. */
interface Seen {
  keys: Set<string> | undefined;
  allKeys: boolean;
  items: number;
  allItems: boolean;
  /** Indexes `contains` matched (they count as evaluated, 2020-12). */
  contained: Set<number> | undefined;
}

function seen(): Seen {
  return { keys: undefined, allKeys: false, items: 0, allItems: false, contained: undefined };
}

/** What a string, number, boolean or null gets: annotations only matter for objects and arrays (never changed). */
const SCALAR: Seen = Object.freeze(seen()) as Seen;

function merge(into: Seen, from: Seen): void {
  if (into === SCALAR || from === SCALAR) return;
  if (from.allKeys) into.allKeys = true;
  else if (from.keys) for (const k of from.keys) (into.keys ??= new Set()).add(k);
  if (from.allItems) into.allItems = true;
  else into.items = Math.max(into.items, from.items);
  if (from.contained) for (const i of from.contained) (into.contained ??= new Set()).add(i);
}

function addKey(s: Seen, k: string): void {
  (s.keys ??= new Set()).add(k);
}

/** JSON equality as JSON Schema means it (1 and 1.0 are one number; key order does not matter). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]));
  }
  const ka = Object.keys(a);
  const ob = b as Record<string, unknown>;
  if (ka.length !== Object.keys(ob).length) return false;
  return ka.every((k) => Object.hasOwn(ob, k) && jsonEqual((a as Record<string, unknown>)[k], ob[k]));
}

/** A JSON value's JSON Schema type (`integer` for whole numbers, which are `number`s too). */
function typeMatches(v: unknown, t: string): boolean {
  switch (t) {
    case 'null':
      return v === null;
    case 'boolean':
      return typeof v === 'boolean';
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'string':
      return typeof v === 'string';
    case 'array':
      return Array.isArray(v);
    case 'object':
      return isSchema(v);
    default:
      return false;
  }
}

/** A pattern compiled as JSON Schema validators compile it (`u`), or without `u` when only that parses; null when neither. */
const regexes = new Map<string, RegExp | null>();
const REGEX_CACHE = 512;
export function schemaRegex(pattern: string): RegExp | null {
  let re = regexes.get(pattern);
  if (re !== undefined) return re;
  try {
    re = new RegExp(pattern, 'u');
  } catch {
    try {
      re = new RegExp(pattern);
    } catch {
      re = null;
    }
  }
  if (regexes.size >= REGEX_CACHE) regexes.delete(regexes.keys().next().value!);
  regexes.set(pattern, re);
  return re;
}

/** (pattern, string) pairs known to match (made from the pattern by the generator, or tested) and known not to. */
const matched = new Set<string>();
const unmatched = new Set<string>();
/** Entries in each set, and the longest pattern + string remembered. */
const MATCHED_ENTRIES = 4096;
const MATCHED_KEY_CHARS = 4096;

/** The pair's key in those sets, or undefined when it is too long to remember. */
function pairKey(pattern: string, s: string): string | undefined {
  return pattern.length + s.length > MATCHED_KEY_CHARS ? undefined : `${pattern}\u0000${s}`;
}

function remember(set: Set<string>, key: string | undefined): void {
  if (key === undefined || set.has(key)) return;
  if (set.size >= MATCHED_ENTRIES) set.delete(set.values().next().value!);
  set.add(key);
}

/** Record that `s` matches `pattern` (the generator made it from the pattern's own syntax tree). */
export function trustMatch(pattern: string, s: string): void {
  remember(matched, pairKey(pattern, s));
}

/** Ajv-formats' number formats (int32, int64, float, double): whether `v` is one; true for a format it does not know. */
function numberFormatTakes(format: string, v: number): boolean {
  if (!Object.hasOwn(fullFormats, format)) return true;
  const f = (fullFormats as Record<string, unknown>)[format];
  if (typeof f !== 'object' || f === null || f instanceof RegExp) return true;
  const def = f as { type?: unknown; validate?: unknown };
  if (def.type !== 'number' || typeof def.validate !== 'function') return true;
  return (def.validate as (x: number) => boolean)(v) === true;
}

/**
 * A `$ref` within the document: `#` (the root), a JSON pointer `#/a/b` (an empty segment is a key `""`), or a plain
 * name `#name` (the subschema whose `$anchor` is `name`, or draft-07's `$id: "#name"`). Else undefined.
 */
export function resolveIn(root: Schema, ref: string, anchors?: Map<string, Schema>): unknown {
  if (!ref.startsWith('#')) return undefined;
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) {
    let name: string;
    try {
      name = decodeURIComponent(ref.slice(1));
    } catch {
      return undefined;
    }
    return (anchors ?? rootFacts(root).anchors).get(name);
  }
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (isSchema(node)) node = Object.hasOwn(node, key) ? node[key] : undefined;
    else if (Array.isArray(node) && /^(0|[1-9][0-9]*)$/.test(key)) node = node[Number(key)];
    else return undefined;
  }
  return node;
}

/** What a root holds that checks need: its anchors, and whether any subschema says `unevaluated*`. */
interface RootFacts {
  anchors: Map<string, Schema>;
  unevaluated: boolean;
}
const facts = new WeakMap<object, RootFacts>();
/** Keywords whose value maps names (any names) to schemas. */
const SCHEMA_MAPS: ReadonlySet<string> = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);
/** Objects and arrays walked for a root's facts (the validate stage's walk refuses larger schemas first). */
const FACTS_NODES = 200_000;

export function rootFacts(root: Schema): RootFacts {
  let f = facts.get(root);
  if (f !== undefined) return f;
  f = { anchors: new Map(), unevaluated: false };
  // Each node with what it is: a schema, or a map of names to schemas (`properties`, `$defs`, …), whose names are
  // anything, `enum` and `default` included. Values (`enum`, `const`, `default`, `examples`) are not walked.
  const stack: Array<{ node: unknown; map: boolean }> = [{ node: root, map: false }];
  const seenNodes = new Set<object>();
  while (stack.length > 0) {
    const { node, map } = stack.pop()!;
    if (typeof node !== 'object' || node === null || seenNodes.has(node)) continue;
    if (seenNodes.size >= FACTS_NODES) {
      // Not all seen: `anyOf` then tries every branch, which is exact whatever the rest holds.
      f.unevaluated = true;
      break;
    }
    seenNodes.add(node);
    if (Array.isArray(node)) {
      for (const x of node) stack.push({ node: x, map: false });
      continue;
    }
    const o = node as Schema;
    if (map) {
      for (const k of Object.keys(o)) stack.push({ node: o[k], map: false });
      continue;
    }
    if (typeof o.$anchor === 'string' && !f.anchors.has(o.$anchor)) f.anchors.set(o.$anchor, o);
    if (typeof o.$id === 'string' && o.$id.startsWith('#') && o.$id.length > 1 && !f.anchors.has(o.$id.slice(1))) f.anchors.set(o.$id.slice(1), o);
    if ('unevaluatedProperties' in o || 'unevaluatedItems' in o) f.unevaluated = true;
    for (const k of Object.keys(o)) {
      if (k === 'enum' || k === 'const' || k === 'default' || k === 'examples') continue;
      stack.push({ node: o[k], map: SCHEMA_MAPS.has(k) });
    }
  }
  facts.set(root, f);
  return f;
}

/** The guarded context pattern tests run in (one, reused: a context costs far more than a run in it). */
let sandbox: (vm.Context & { re: RegExp | null; s: string }) | undefined;
const testScript = new vm.Script('re.test(s)');

/** What checks may spend: shared by every check of one search (the validate stage's, or one model call's). */
export interface CheckBudget {
  steps: number;
  patternMs: number;
  /** Keys the generator may still copy or scan (model/schema-args.ts, SCHEMA_LIMITS.maxWork): one count for the search. */
  keys: number;
}

/** Keys a search's generation may copy or scan (SCHEMA_LIMITS.maxWork in model/schema-args.ts, which is this, says why). */
export const SEARCH_KEYS_BUDGET = 200_000;

export function checkBudget(): CheckBudget {
  return { steps: STEPS, patternMs: PATTERN_MS, keys: SEARCH_KEYS_BUDGET };
}

/**
 * Checks against one root (its `$ref`s resolve against it), spending from one budget: a search makes many values
 * and checks each, and a fresh budget per check let a schema of many patterns (or names) hold the event loop for
 * minutes (outside attack).
 */
export class SchemaCheck {
  /**
   * The root's anchors and `unevaluated*` flag, walked for only when a check needs them (a `$ref "#name"`, an
   * `anyOf`): the auto policy checks a fresh copy of a small schema at every ws-mode step, where the walk and its
   * WeakMap entry were most of the check's cost.
   */
  private facts: RootFacts | undefined;
  /** Why the last failed check failed (a path into the value and the keyword), for the refusal's message. */
  reason = '';

  constructor(
    private readonly root: Schema,
    private readonly budget: CheckBudget = checkBudget(),
  ) {}

  private get rootFacts(): RootFacts {
    return (this.facts ??= rootFacts(this.root));
  }

  /** The search's budget is spent: every further check answers false at once. */
  get spent(): boolean {
    return this.budget.steps <= 0;
  }

  /** Whether `value` satisfies `schema` (a subschema of the root, or the root itself). */
  valid(value: unknown, schema: unknown = this.root): boolean {
    // A spent budget answers at once: a search goes on asking, and an exception per question cost seconds.
    if (this.budget.steps <= 0) {
      this.reason = `checking needs more than ${STEPS} steps`;
      return false;
    }
    this.reason = '';
    try {
      return this.check(value, schema, 0, '') !== null;
    } catch (err) {
      if (err instanceof Exhausted) {
        this.reason = err.message;
        return false;
      }
      throw err;
    }
  }

  /** Charge `n` steps of the search's budget (names scanned, patterns tried). */
  private spend(n: number): void {
    if ((this.budget.steps -= n) < 0) throw new Exhausted(`checking needs more than ${STEPS} steps`);
  }

  private fail(where: string, why: string): null {
    if (this.reason === '') this.reason = `${where || '(root)'} ${why}`;
    return null;
  }

  private resolve(ref: string): unknown {
    // A name's anchors are the root's facts (walked once, on the first such `$ref`); a pointer needs none.
    return resolveIn(this.root, ref);
  }

  private matches(pattern: string, s: string): boolean {
    if (--this.budget.steps < 0) throw new Exhausted(`checking needs more than ${STEPS} steps`);
    const re = schemaRegex(pattern);
    if (re === null) return false;
    const key = pairKey(pattern, s);
    if (key !== undefined && matched.has(key)) return true;
    // No quantifier, alternation or group (`(a|a)(a|a)…b` backtracks exponentially with none of `*+?{`: outside attack),
    // no backtracking past one try per start: run directly (a vm run costs ~85 µs, and a schema of
    // 600 patterns tested each against each name spent the whole budget on `^p12$`). Not remembered: it is cheap.
    if (pattern.length <= 1000 && !/[*+?{|(]/.test(pattern)) return re.test(s);
    if (this.budget.patternMs <= 0) {
      // Out of time for pattern tests: the rest of this search's checks are answered at once (no match).
      this.budget.steps = 0;
      throw new Exhausted(`pattern tests took more than ${PATTERN_MS} ms`);
    }
    if (key !== undefined && unmatched.has(key)) return false;
    sandbox ??= vm.createContext({ re: null, s: '' }) as vm.Context & { re: RegExp | null; s: string };
    sandbox.re = re;
    sandbox.s = s;
    const t0 = performance.now();
    let ok: boolean;
    try {
      ok = testScript.runInContext(sandbox, { timeout: Math.max(1, Math.ceil(this.budget.patternMs)) }) === true;
    } catch {
      this.budget.patternMs = 0;
      this.budget.steps = 0;
      throw new Exhausted(`pattern '${pattern.slice(0, 40)}' took more than ${PATTERN_MS} ms to test`);
    } finally {
      sandbox.re = null;
      sandbox.s = '';
    }
    this.budget.patternMs -= performance.now() - t0;
    remember(ok ? matched : unmatched, key);
    return ok;
  }

  /** The annotations `schema` made on `v` when `v` satisfies it, else null. */
  private check(v: unknown, schema: unknown, depth: number, at: string): Seen | null {
    const scalar = typeof v !== 'object' || v === null;
    if (schema === true || schema === undefined) return scalar ? SCALAR : seen();
    if (schema === false) return this.fail(at, 'is not allowed (schema false)');
    if (!isSchema(schema)) return scalar ? SCALAR : seen();
    if (--this.budget.steps < 0) throw new Exhausted(`checking needs more than ${STEPS} steps`);
    if (depth > MAX_DEPTH) throw new Exhausted(`checking nests deeper than ${MAX_DEPTH} levels`);
    const s = schema;
    const out = scalar ? SCALAR : seen();

    // JSON has no Infinity or NaN (JSON.stringify writes null): such a number satisfies nothing.
    if (typeof v === 'number' && !Number.isFinite(v)) return this.fail(at, 'is not a finite number');
    if (typeof s.$ref === 'string') {
      const target = this.resolve(s.$ref);
      if (target === undefined) return this.fail(at, `refers to '${s.$ref}', which does not resolve`);
      const r = this.check(v, target, depth + 1, at);
      if (r === null) return null;
      merge(out, r);
    }

    if (s.type !== undefined) {
      const types = Array.isArray(s.type) ? s.type : [s.type];
      if (!types.some((t) => typeof t === 'string' && typeMatches(v, t))) return this.fail(at, `must be of type ${types.join(' or ')}`);
    }
    if ('const' in s && !jsonEqual(v, s.const)) return this.fail(at, 'must be equal to the constant');
    // An enum's scan costs a step a value: one of 400,000 values reached 2^10 times held the loop 15 s (outside attack).
    if (Array.isArray(s.enum) && (this.budget.steps -= s.enum.length) < 0) throw new Exhausted(`checking needs more than ${STEPS} steps`);
    if (Array.isArray(s.enum) && !s.enum.some((e) => jsonEqual(v, e))) return this.fail(at, 'must be one of the enum values');

    if (typeof v === 'number' && !this.number(v, s, at)) return null;
    if (typeof v === 'string' && !this.string(v, s, at)) return null;
    if (Array.isArray(v) && !this.array(v, s, depth, at, out)) return null;
    if (isSchema(v) && !this.object(v, s, depth, at, out)) return null;

    if (Array.isArray(s.allOf)) {
      for (const sub of s.allOf) {
        const r = this.check(v, sub, depth + 1, at);
        if (r === null) return null;
        merge(out, r);
      }
    }
    if (Array.isArray(s.anyOf)) {
      let any = false;
      for (const sub of s.anyOf) {
        const r = this.subcheck(v, sub, depth + 1, at);
        if (r !== null) {
          any = true;
          merge(out, r);
          if (!this.rootFacts.unevaluated) break;
        }
      }
      if (!any) return this.fail(at, "must match a schema in 'anyOf'");
    }
    if (Array.isArray(s.oneOf)) {
      let count = 0;
      for (const sub of s.oneOf) {
        const r = this.subcheck(v, sub, depth + 1, at);
        if (r !== null) {
          count++;
          merge(out, r);
        }
      }
      if (count !== 1) return this.fail(at, `must match exactly one schema in 'oneOf' (matches ${count})`);
    }
    if ('not' in s && this.subcheck(v, s.not, depth + 1, at) !== null) return this.fail(at, "must not match the schema in 'not'");
    if ('if' in s) {
      const r = this.subcheck(v, s.if, depth + 1, at);
      const branch = r !== null ? s.then : s.else;
      if (r !== null) merge(out, r);
      if (branch !== undefined) {
        const b = this.check(v, branch, depth + 1, at);
        if (b === null) return null;
        merge(out, b);
      }
    }
    if (isSchema(v) && isSchema(s.dependentSchemas)) {
      for (const [k, sub] of Object.entries(s.dependentSchemas)) {
        if (!Object.hasOwn(v, k)) continue;
        const r = this.check(v, sub, depth + 1, at);
        if (r === null) return null;
        merge(out, r);
      }
    }

    if (Array.isArray(v) && 'unevaluatedItems' in s && !out.allItems) {
      for (let i = out.items; i < v.length; i++) if (!out.contained?.has(i) && this.check(v[i], s.unevaluatedItems, depth + 1, `${at}/${i}`) === null) return this.fail(at, `item ${i} is not allowed by 'unevaluatedItems'`);
      out.allItems = true;
    }
    if (isSchema(v) && 'unevaluatedProperties' in s && !out.allKeys) {
      for (const k of Object.keys(v)) {
        if (out.keys?.has(k)) continue;
        if (this.check(v[k], s.unevaluatedProperties, depth + 1, `${at}/${k}`) === null) return this.fail(at, `property '${k}' is not allowed by 'unevaluatedProperties'`);
      }
      out.allKeys = true;
    }
    return out;
  }

  /** A check whose failure is an answer (anyOf, oneOf, not, if), not the reason the whole value fails. */
  private subcheck(v: unknown, schema: unknown, depth: number, at: string): Seen | null {
    const before = this.reason;
    const r = this.check(v, schema, depth, at);
    this.reason = before;
    return r;
  }

  private number(v: number, s: Schema, at: string): boolean {
    const m = s.multipleOf;
    // A whole quotient below 1e21, as Ajv checks it (`q === parseInt(q)`: 1e21 prints as "1e+21"), so its users agree.
    if (typeof m === 'number' && m > 0 && !(Number.isInteger(v / m) && Math.abs(v / m) < 1e21)) return this.fail(at, `must be a multiple of ${m}`) !== null;
    const lo = s.minimum;
    const hi = s.maximum;
    if (typeof lo === 'number' && (s.exclusiveMinimum === true ? v <= lo : v < lo)) return this.fail(at, `must be >= ${lo}`) !== null;
    if (typeof hi === 'number' && (s.exclusiveMaximum === true ? v >= hi : v > hi)) return this.fail(at, `must be <= ${hi}`) !== null;
    if (typeof s.exclusiveMinimum === 'number' && v <= s.exclusiveMinimum) return this.fail(at, `must be > ${s.exclusiveMinimum}`) !== null;
    if (typeof s.exclusiveMaximum === 'number' && v >= s.exclusiveMaximum) return this.fail(at, `must be < ${s.exclusiveMaximum}`) !== null;
    if (typeof s.format === 'string' && !numberFormatTakes(s.format, v)) return this.fail(at, `must be of format '${s.format.slice(0, 40)}'`) !== null;
    return true;
  }

  private string(v: string, s: Schema, at: string): boolean {
    if (typeof s.minLength === 'number' || typeof s.maxLength === 'number') {
      const n = codePoints(v);
      if (typeof s.minLength === 'number' && n < s.minLength) return this.fail(at, `must have at least ${s.minLength} characters`) !== null;
      if (typeof s.maxLength === 'number' && n > s.maxLength) return this.fail(at, `must have at most ${s.maxLength} characters`) !== null;
    }
    if (typeof s.pattern === 'string' && !this.matches(s.pattern, v)) return this.fail(at, `must match the pattern '${s.pattern.slice(0, 60)}'`) !== null;
    if (typeof s.format === 'string' && !formatTakes(s.format, v)) return this.fail(at, `must be of format '${s.format.slice(0, 40)}'`) !== null;
    return true;
  }

  private array(v: unknown[], s: Schema, depth: number, at: string, out: Seen): boolean {
    if (typeof s.minItems === 'number' && v.length < s.minItems) return this.fail(at, `must have at least ${s.minItems} items`) !== null;
    if (typeof s.maxItems === 'number' && v.length > s.maxItems) return this.fail(at, `must have at most ${s.maxItems} items`) !== null;
    if (s.uniqueItems === true) {
      for (let i = 0; i < v.length; i++) {
        for (let j = i + 1; j < v.length; j++) {
          if (--this.budget.steps < 0) throw new Exhausted(`checking needs more than ${STEPS} steps`);
          if (jsonEqual(v[i], v[j])) return this.fail(at, `must not have duplicate items (items ${i} and ${j} are identical)`) !== null;
        }
      }
    }
    // 2020-12: `prefixItems` then `items` for the rest; draft-07: `items` as a list, then `additionalItems`.
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    const rest = Array.isArray(s.items) ? s.additionalItems : s.items;
    for (let i = 0; i < v.length; i++) {
      const sub = i < prefix.length ? prefix[i] : rest;
      if (sub === undefined) continue;
      if (this.check(v[i], sub, depth + 1, `${at}/${i}`) === null) return false;
    }
    if (rest !== undefined) out.allItems = true;
    else out.items = Math.min(v.length, prefix.length);
    if ('contains' in s) {
      let n = 0;
      for (let i = 0; i < v.length; i++) {
        if (this.subcheck(v[i], s.contains, depth + 1, `${at}/${i}`) === null) continue;
        n++;
        (out.contained ??= new Set()).add(i);
      }
      const min = typeof s.minContains === 'number' ? s.minContains : 1;
      if (n < min) return this.fail(at, `must contain at least ${min} matching item(s) ('contains')`) !== null;
      if (typeof s.maxContains === 'number' && n > s.maxContains) return this.fail(at, `must contain at most ${s.maxContains} matching item(s)`) !== null;
    }
    return true;
  }

  private object(v: Schema, s: Schema, depth: number, at: string, out: Seen): boolean {
    const keys = Object.keys(v);
    if (typeof s.minProperties === 'number' && keys.length < s.minProperties) return this.fail(at, `must have at least ${s.minProperties} properties`) !== null;
    if (typeof s.maxProperties === 'number' && keys.length > s.maxProperties) return this.fail(at, `must have at most ${s.maxProperties} properties`) !== null;
    // The set requiredOf made for this schema object, else a short list as it is (a set made and kept in a WeakMap
    // for each fresh copy of a schema cost more than the check), else a long one's set, its duplicates gone.
    const required = requiredSets.get(s) ?? (Array.isArray(s.required) && s.required.length <= SHORT_REQUIRED ? s.required : requiredOf(s));
    this.spend(Array.isArray(required) ? required.length : (required as ReadonlySet<string>).size);
    for (const r of required) if (typeof r === 'string' && !Object.hasOwn(v, r)) return this.fail(at, `must have required property '${r}'`) !== null;
    const requiredBy = (map: unknown) => {
      if (!isSchema(map)) return true;
      const entries = Object.entries(map);
      this.spend(entries.length);
      for (const [k, names] of entries) {
        if (!Object.hasOwn(v, k) || !Array.isArray(names)) continue;
        for (const n of names) if (typeof n === 'string' && !Object.hasOwn(v, n)) return this.fail(at, `must have property '${n}' when '${k}' is present`) !== null;
      }
      return true;
    };
    if (!requiredBy(s.dependentRequired)) return false;
    if (isSchema(s.dependencies)) {
      // draft-07: a list is dependentRequired, a schema dependentSchemas.
      const lists: Schema = {};
      const entries = Object.entries(s.dependencies);
      this.spend(entries.length);
      for (const [k, d] of entries) {
        if (Array.isArray(d)) lists[k] = d;
        else if (Object.hasOwn(v, k) && this.check(v, d, depth + 1, at) === null) return false;
      }
      if (!requiredBy(lists)) return false;
    }
    const props = isSchema(s.properties) ? s.properties : undefined;
    const patterns = isSchema(s.patternProperties) ? Object.keys(s.patternProperties) : [];
    for (const k of keys) {
      // A step for the name, and one for each pattern it is tested against.
      this.spend(1 + patterns.length);
      const where = `${at}/${k}`;
      if ('propertyNames' in s && this.check(k, s.propertyNames, depth + 1, where) === null) return this.fail(at, `property name '${k.slice(0, 40)}' is not allowed by 'propertyNames'`) !== null;
      let covered = false;
      if (props && Object.hasOwn(props, k)) {
        covered = true;
        if (this.check(v[k], props[k], depth + 1, where) === null) return false;
      }
      for (const p of patterns) {
        if (!this.matches(p, k)) continue;
        covered = true;
        if (this.check(v[k], (s.patternProperties as Schema)[p], depth + 1, where) === null) return false;
      }
      if (covered) addKey(out, k);
      else if ('additionalProperties' in s && this.check(v[k], s.additionalProperties, depth + 1, where) === null) {
        return this.fail(at, `must not have the additional property '${k.slice(0, 40)}'`) !== null;
      }
    }
    if ('additionalProperties' in s) out.allKeys = true;
    return true;
  }
}

/**
 * The names an object schema requires, as a set: made once per schema object (validation, the check and every model
 * call read the same one), in one pass. A `required` of 3 million names was filtered into a new array and a set at
 * each generation, ~0.1-0.24 s of one loop turn each (outside attack).
 */
/** A `required` list at most this long is read directly by the check (object()). */
const SHORT_REQUIRED = 32;
const requiredSets = new WeakMap<object, ReadonlySet<string>>();
export function requiredOf(schema: Schema): ReadonlySet<string> {
  let set = requiredSets.get(schema);
  if (set === undefined) {
    const names = new Set<string>();
    if (Array.isArray(schema.required)) for (const r of schema.required) if (typeof r === 'string') names.add(r);
    set = names;
    requiredSets.set(schema, set);
  }
  return set;
}
