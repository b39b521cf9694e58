/**
 * Arguments for a function call, generated from the tool's JSON Schema
 * (`parameters`), deterministically from a seeded rng; and the `text.format`
 * JSON schema's answers.
 *
 * Used by the auto policy when it decides to call a tool nobody scripted, and
 * by the validate stage (`checkToolSchema`), which refuses a schema no
 * bounded value satisfies before any run starts. Generate and check: a value
 * is made (type or a list of types, properties/required, items/prefixItems,
 * enum/const/default, anyOf/oneOf/if branches, allOf merged, local $ref,
 * string formats and patterns from model/schema-strings.ts, numeric bounds
 * and multipleOf, lengths and counts, minProperties, dependentRequired,
 * dependentSchemas, patternProperties, propertyNames, uniqueItems, contains)
 * and checked against the schema (model/schema-valid.ts). Where a subschema
 * asks for a search (SEARCH_KEYS: not, oneOf, if, uniqueItems, ...) other
 * choices are tried when its first value fails. What goes out always passes
 * the check: the full form when it does, else the schema's witness, the first
 * value of a fixed search (the one validation found). A schema for which the
 * search finds nothing is refused; docs/protocol.md ("Arguments satisfy the
 * schema") lists the satisfiable shapes it can miss.
 *
 * Bounded (SCHEMA_LIMITS): a schema is client input, and `minItems: 1e9`,
 * `minLength: 6e8`, a required `$ref` to itself or thousands of required
 * properties would otherwise freeze the event loop or exhaust the heap.
 * Generation first tries the full form (optional properties, a few array
 * items); if that outgrows the limits it falls back to the minimal form
 * (required content only, at its minimum sizes). A schema whose minimal form
 * does not fit, or that is contradictory, is an `invalid_tool_schema` error.
 */
import { WireError } from '../protocol/errors.js';
import { hashString, intBetween, mulberry32, type Rng, words } from './rng.js';
import { shapedString } from './schema-strings.js';
import { type CheckBudget, checkBudget, jsonEqual, requiredOf, resolveIn, SchemaCheck, schemaRegex, SEARCH_KEYS_BUDGET } from './schema-valid.js';

export type JsonSchema = Record<string, unknown>;

/** Past this depth optional properties and non-required array items are skipped, so recursive schemas end. */
const MAX_DEPTH = 6;

/** The bounds on generated arguments (documented in docs/reliability.md). */
export const SCHEMA_LIMITS = {
  /** Nesting of generated values plus `$ref`/`allOf`/`anyOf` hops. */
  maxDepth: 32,
  /** Items in one generated array (a larger `minItems` is unsatisfiable). */
  maxArrayItems: 256,
  /** Characters in one generated string (a larger `minLength` is unsatisfiable). */
  maxStringChars: 16_384,
  /** Serialised size of the whole arguments object. */
  maxBytes: 64 * 1024,
  /** Schema nodes visited to generate one arguments object. */
  maxNodes: 20_000,
  /**
   * Keys scanned by one search (an object's walk of its declared names, a scan of `dependentSchemas`; a key copied,
   * a fold's copy of `properties`, counts COPY_WEIGHT), over all its tries: the check budget's `keys`
   * (model/schema-valid.ts). A node of 9,000 properties reached 256 times held the loop for seconds while it counted
   * as 256 nodes (outside attack).
   */
  maxWork: SEARCH_KEYS_BUDGET,
  /** Subschemas the static check walks (a larger schema is refused). */
  maxSchemaNodes: 100_000,
} as const;

/** The schema cannot be satisfied within the limits, or contradicts itself. */
export class SchemaError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The full form outgrew the limits (the minimal form may still fit). */
class OverBudget extends Error {}

/** The arguments object for a tool; `{}` when the tool declares no parameters. Throws `invalid_tool_schema`. */
export function argsFromSchema(schema: JsonSchema | null | undefined, rng: Rng): Record<string, unknown> {
  if (!isSchema(schema)) return {};
  const value = valueFromSchema(schema, rng, true);
  return isSchema(value) ? value : {};
}

/**
 * A value that satisfies `schema` (model/schema-valid.ts checks it): the full form (optional properties, a few
 * items) from `rng` when it does, else the schema's witness, the first value of a fixed search that does (the one the
 * validate stage found when it accepted the schema). `object`: only an object will do (a tool's arguments).
 * Throws `invalid_tool_schema` when nothing is found (a schema the validate stage never saw).
 */
export function valueFromSchema(schema: JsonSchema, rng: Rng, object = false): unknown {
  try {
    let value: unknown;
    const budget = checkBudget();
    try {
      value = new Generator(schema, rng, false, 0, budget).run();
    } catch (err) {
      // Whatever failed in the full form (an optional part too big or contradictory, or a stack too deep for the
      // engine), the search decides.
      if (!(err instanceof OverBudget || err instanceof SchemaError || err instanceof RangeError)) throw err;
    }
    if (value !== undefined && (!object || isSchema(value)) && new SchemaCheck(schema, budget).valid(value)) return value;
    return witness(schema, object);
  } catch (err) {
    throw asWireError(err, 'parameters');
  }
}

/** Whether `value` satisfies `schema` (model/schema-valid.ts): the auto policy's test of arguments it changed. */
export function fitsSchema(value: unknown, schema: unknown): boolean {
  if (!isSchema(schema)) return schema !== false;
  return new SchemaCheck(schema).valid(value);
}

/** Searches for a value: the minimal and the full form, then both with their choices (branches, enum values, types) drawn. */
const WITNESS_TRIES = 10;
const witnesses = new WeakMap<JsonSchema, { value: unknown; object: boolean }>();

/**
 * The first value of a fixed, deterministic search that satisfies `schema` (and is an object, for `object`), or a
 * SchemaError naming why the last candidate failed. Remembered by schema object.
 */
function witness(schema: JsonSchema, object: boolean): unknown {
  const known = witnesses.get(schema);
  if (known !== undefined && (known.object || !object)) return known.value;
  // One budget for the whole search: ten tries each with a fresh one let a schema of many patterns hold the loop.
  const budget = checkBudget();
  const check = new SchemaCheck(schema, budget);
  let why = '';
  let error: unknown;
  for (let t = 0; t < WITNESS_TRIES; t++) {
    let value: unknown;
    try {
      value = new Generator(schema, () => 0, t % 2 === 0, t < 2 ? 0 : t, budget).run();
    } catch (err) {
      if (err instanceof RangeError) {
        // The engine's stack ran out (the depth limits are meant to stop that first): no value from this try.
        error ??= new SchemaError(`generating a value nests too deep (${err.message})`, '#');
        continue;
      }
      if (!(err instanceof OverBudget || err instanceof SchemaError)) throw err;
      error ??= err;
      continue;
    }
    if (object && !isSchema(value)) {
      why ||= 'the value it allows is not an object';
      continue;
    }
    if (check.valid(value)) {
      witnesses.set(schema, { value, object });
      return value;
    }
    why ||= check.reason;
  }
  if (error instanceof SchemaError && why === '') throw error;
  if (error instanceof OverBudget && why === '') throw new SchemaError(error.message, '#');
  throw new SchemaError(`no value found that satisfies it (${WITNESS_TRIES} tries; the first failed: ${why})`, '#');
}

/**
 * The validate stage's check of one tool's `parameters` (or of a `text.format` schema, `code: invalid_json_schema`):
 * every `$ref` resolves, keyword values are ones JSON Schema allows, bounds are consistent, and the search finds a
 * value the schema accepts within the limits. Throws `invalid_tool_schema` naming `param`.
 */
export function checkToolSchema(schema: unknown, param: string, serialized?: string, code: SchemaErrorCode = 'invalid_tool_schema'): void {
  if (!isSchema(schema)) return;
  // Clients send the same tools with every request: a schema already accepted is not walked again.
  const key = serialized !== undefined && serialized.length <= CHECKED_KEY_CHARS ? `${code}:${serialized}` : undefined;
  if (key !== undefined && checked.has(key)) return;
  try {
    const contradiction = staticCheck(schema);
    try {
      witness(schema, code === 'invalid_tool_schema');
    } catch (err) {
      // Nothing found: a contradiction the walk saw is the likelier cause than the search's last try, and is named as
      // where to look (the search may also have missed a value elsewhere).
      if (contradiction === undefined || !(err instanceof SchemaError)) throw err;
      throw new SchemaError(`no value found that satisfies it (here ${contradiction.message})`, contradiction.path);
    }
  } catch (err) {
    throw asWireError(err, param, code);
  }
  if (key !== undefined) {
    if (checked.size >= CHECKED_ENTRIES) checked.delete(checked.keys().next().value!);
    checked.add(key);
  }
}

/** Accepted schemas remembered by their JSON (at most this many, each at most this long). */
const CHECKED_ENTRIES = 256;
export const CHECKED_KEY_CHARS = 64 * 1024;
const checked = new Set<string>();

/** A tool's `parameters` or the `text.format` schema of structured outputs. */
type SchemaErrorCode = 'invalid_tool_schema' | 'invalid_json_schema';

function asWireError(err: unknown, param: string, code: SchemaErrorCode = 'invalid_tool_schema'): unknown {
  if (err instanceof WireError) return err;
  if (err instanceof SchemaError || err instanceof OverBudget) {
    const where = err instanceof SchemaError && err.path ? ` at '${err.path}'` : '';
    return new WireError(code, `Invalid '${param}'${where}: ${err.message}`, param, { cause: err });
  }
  return err;
}

function isSchema(x: unknown): x is JsonSchema {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function num(x: unknown): number | undefined {
  return typeof x === 'number' && Number.isFinite(x) ? x : undefined;
}

/** Keywords whose value is one schema, a list of schemas, or a map of name → schema. */
const SCHEMA_KEYS = new Set(['items', 'additionalProperties', 'additionalItems', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties']);
const SCHEMA_LIST_KEYS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items']);
const SCHEMA_MAP_KEYS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);

/** Walk every subschema (and every `$ref` target) once: refs resolve, bounds agree, the schema is not absurdly large or deep. */
function staticCheck(root: JsonSchema): SchemaError | undefined {
  let nodes = 0;
  // Bounds that contradict each other are valid JSON Schema, and harmless where the value need not match (an optional
  // property, one `anyOf` branch, inside a `not`): the search decides, and the first one found names the refusal when
  // it finds nothing.
  let contradiction: SchemaError | undefined;
  const contradicts = (why: string, path: string): void => {
    contradiction ??= new SchemaError(why, path);
  };
  const seen = new Set<JsonSchema>();
  const walk = (node: unknown, path: string, depth: number): void => {
    if (!isSchema(node) || seen.has(node)) return;
    seen.add(node);
    if (++nodes > SCHEMA_LIMITS.maxSchemaNodes) throw new SchemaError(`the schema has more than ${SCHEMA_LIMITS.maxSchemaNodes} subschemas`, path);
    if (depth > SCHEMA_LIMITS.maxDepth * 4) throw new SchemaError(`the schema nests deeper than ${SCHEMA_LIMITS.maxDepth * 4} levels`, path);
    if (typeof node.$ref === 'string') {
      const target = resolveRef(node.$ref, root);
      if (!target) throw new SchemaError(`'$ref' '${node.$ref}' does not resolve to a schema in this document (only local '#/…' references are supported)`, path);
      walk(target, node.$ref, depth + 1);
    }
    checkType(node, path);
    checkKeywords(node, path);
    for (const k of ['$dynamicRef', '$recursiveRef']) {
      if (k in node) throw new SchemaError(`'${k}' is not supported (only local '$ref's are resolved)`, path);
    }
    // A nested `$id` starts a new base URI, against which its `$ref`s would resolve: not followed, so refused (an
    // anchor spelled `$id: "#name"` is fine).
    if (node !== root && typeof node.$id === 'string' && !node.$id.startsWith('#')) {
      throw new SchemaError(`a nested '$id' (${quoted(node.$id)}) is not supported: its '$ref's would resolve against another base`, path);
    }
    bounds(node, 'minItems', 'maxItems', path, contradicts);
    bounds(node, 'minLength', 'maxLength', path, contradicts);
    bounds(node, 'minProperties', 'maxProperties', path, contradicts);
    bounds(node, 'minimum', 'maximum', path, contradicts);
    // Draft 4's meta-schema refuses an empty `enum` (later drafts only advise against one), and so does Ajv: anywhere.
    if (Array.isArray(node.enum) && node.enum.length === 0) throw new SchemaError("'enum' is empty: no value can satisfy it", path);
    if (typeof node.minItems === 'number' && node.minItems > SCHEMA_LIMITS.maxArrayItems) {
      throw new SchemaError(`'minItems' ${node.minItems} is more than the ${SCHEMA_LIMITS.maxArrayItems} items generated arguments may hold`, path);
    }
    if (typeof node.minLength === 'number' && node.minLength > SCHEMA_LIMITS.maxStringChars) {
      throw new SchemaError(`'minLength' ${node.minLength} is more than the ${SCHEMA_LIMITS.maxStringChars} characters generated arguments may hold`, path);
    }
    for (const [k, v] of Object.entries(node)) {
      if (SCHEMA_LIST_KEYS.has(k) && Array.isArray(v)) v.forEach((s, i) => walk(s, `${path}/${k}/${i}`, depth + 1));
      else if (SCHEMA_KEYS.has(k)) walk(v, `${path}/${k}`, depth + 1);
      else if (SCHEMA_MAP_KEYS.has(k) && isSchema(v)) for (const [name, s] of Object.entries(v)) walk(s, `${path}/${k}/${name}`, depth + 1);
    }
  };
  walk(root, '#', 0);
  return contradiction;
}

/** What copying a key costs against SCHEMA_LIMITS.maxWork, where scanning one costs 1 (a copy takes several times as long). */
const COPY_WEIGHT = 4;

/** Keywords beside an `enum` that constrain nothing: an enum value needs no check against them. */
const ENUM_NEUTRAL: ReadonlySet<string> = new Set(['enum', 'title', 'description', '$comment', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly']);

/** JSON Schema's type names: a `type` is one of them or a list of them. */
const JSON_TYPES: ReadonlySet<string> = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);

/**
 * A `type` that is not a JSON Schema type name is refused, as the API
 * validates tool schemas: generation took any other string for `string`, so
 * a schema typed with a megabyte of garbage was accepted and echoed in every
 * lifecycle event (chaos fuzz seed 11). The message quotes at most 40
 * characters of the value.
 */
function checkType(node: JsonSchema, path: string): void {
  if (!('type' in node)) return;
  const t = node.type;
  const ok = typeof t === 'string' ? JSON_TYPES.has(t) : Array.isArray(t) && t.every((x) => typeof x === 'string' && JSON_TYPES.has(x));
  if (ok) return;
  const shown = typeof t === 'string' ? JSON.stringify(t.slice(0, 40)) + (t.length > 40 ? '…' : '') : Array.isArray(t) ? 'a list with other values' : typeof t;
  throw new SchemaError(`'type' must be one of ${[...JSON_TYPES].join(', ')}, or a list of them; got ${shown}`, path);
}

/** Keywords whose value is a count: a non-negative integer (JSON Schema's meta-schema). */
const COUNT_KEYS = ['minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties', 'minContains', 'maxContains'];

/**
 * The keyword values JSON Schema's meta-schema constrains and a validator would refuse the schema for: `multipleOf`
 * above 0, counts that are non-negative integers, `pattern`s (and `patternProperties` names) that compile as
 * regular expressions, `enum` a list, `required` a list of names. Accepted before, and then never satisfied.
 */
function checkKeywords(node: JsonSchema, path: string): void {
  if ('multipleOf' in node && !(typeof node.multipleOf === 'number' && Number.isFinite(node.multipleOf) && node.multipleOf > 0)) {
    throw new SchemaError("'multipleOf' must be a number greater than 0", path);
  }
  for (const k of COUNT_KEYS) {
    const v = node[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isInteger(v) && v >= 0)) throw new SchemaError(`'${k}' must be a non-negative integer`, path);
  }
  for (const k of ['minimum', 'maximum']) {
    if (k in node && !(typeof node[k] === 'number' && Number.isFinite(node[k]))) throw new SchemaError(`'${k}' must be a number`, path);
  }
  for (const k of ['exclusiveMinimum', 'exclusiveMaximum']) {
    const v = node[k];
    if (v !== undefined && typeof v !== 'boolean' && !(typeof v === 'number' && Number.isFinite(v))) throw new SchemaError(`'${k}' must be a number`, path);
  }
  if ('pattern' in node) {
    if (typeof node.pattern !== 'string') throw new SchemaError("'pattern' must be a string", path);
    if (schemaRegex(node.pattern) === null) throw new SchemaError(`'pattern' ${quoted(node.pattern)} is not a valid regular expression`, path);
  }
  if (isSchema(node.patternProperties)) {
    for (const p of Object.keys(node.patternProperties)) {
      if (schemaRegex(p) === null) throw new SchemaError(`'patternProperties' name ${quoted(p)} is not a valid regular expression`, path);
    }
  }
  checkSubschemaShapes(node, path);
  if ('enum' in node && !Array.isArray(node.enum)) throw new SchemaError("'enum' must be a list", path);
  if ('required' in node && !(Array.isArray(node.required) && node.required.every((r) => typeof r === 'string'))) {
    throw new SchemaError("'required' must be a list of property names", path);
  }
}

/** A subschema as the meta-schema allows one: an object, or `true` / `false`. */
function isSubschema(x: unknown): boolean {
  return isSchema(x) || typeof x === 'boolean';
}

/**
 * Keywords whose value is a subschema, a list of them or a map of them hold one (the meta-schema's shapes): a
 * `properties` of `5` or `[]`, an `items` of `5`, an `additionalProperties` of `"no"`, an empty `allOf` were taken and
 * then constrained nothing, and the model called the tool with arguments no schema could check (outside conformance
 * tester atk98 F1). An array typed without `items` stays valid (the meta-schema allows it: any items), although Chat
 * Completions was reported to refuse one: the workload reader infers such schemas from recorded calls.
 */
function checkSubschemaShapes(node: JsonSchema, path: string): void {
  for (const k of SCHEMA_KEYS) {
    if (!(k in node)) continue;
    const v = node[k];
    // `items` may be a list of subschemas (drafts before 2020-12's `prefixItems`).
    if (k === 'items' && Array.isArray(v)) {
      if (!v.every(isSubschema)) throw new SchemaError("'items' must be a schema or a list of schemas", path);
      continue;
    }
    if (!isSubschema(v)) throw new SchemaError(`'${k}' must be a schema (an object or a boolean)${k === 'items' ? ' or a list of schemas' : ''}`, path);
  }
  for (const k of ['allOf', 'anyOf', 'oneOf', 'prefixItems']) {
    if (!(k in node)) continue;
    const v = node[k];
    if (!Array.isArray(v) || v.length === 0 || !v.every(isSubschema)) throw new SchemaError(`'${k}' must be a non-empty list of schemas`, path);
  }
  for (const k of SCHEMA_MAP_KEYS) {
    if (!(k in node)) continue;
    const v = node[k];
    // Draft 7's `dependencies` maps a name to a schema or to a list of property names.
    const ok = isSchema(v) && Object.values(v).every((s) => isSubschema(s) || (k === 'dependencies' && Array.isArray(s) && s.every((n) => typeof n === 'string')));
    if (!ok) throw new SchemaError(`'${k}' must be an object mapping names to schemas`, path);
  }
}

/** A client's string in a message, at most 40 characters of it. */
function quoted(s: string): string {
  return JSON.stringify(s.slice(0, 40)) + (s.length > 40 ? '…' : '');
}

/** A bound that is not a number is refused; a lower bound above the upper one is passed to `contradicts`. */
function bounds(node: JsonSchema, lo: string, hi: string, path: string, contradicts: (why: string, path: string) => void): void {
  const a = node[lo];
  const b = node[hi];
  if (a !== undefined && typeof a !== 'number') throw new SchemaError(`'${lo}' must be a number`, path);
  if (b !== undefined && typeof b !== 'number') throw new SchemaError(`'${hi}' must be a number`, path);
  if (typeof a === 'number' && typeof b === 'number' && a > b) contradicts(`'${lo}' (${a}) is greater than '${hi}' (${b})`, path);
}

function resolveRef(ref: string, root: JsonSchema): JsonSchema | undefined {
  const node = resolveIn(root, ref);
  return isSchema(node) ? node : undefined;
}

/**
 * `o[key] = value` as an own data property whatever the key: a client's property named `__proto__` assigned
 * with `=` set the object's prototype instead, and the key was missing from the JSON (outside attack).
 */
export function setOwn(o: Record<string, unknown>, key: string, value: unknown): void {
  // Only `__proto__` has a setter on a plain object's chain; a define costs several times an assignment.
  if (key === '__proto__') Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  else o[key] = value;
}

function withoutKeys(schema: JsonSchema, ...keys: string[]): JsonSchema {
  const copy = { ...schema };
  for (const k of keys) delete copy[k];
  return copy;
}

/** Keywords that make a subschema's value a search: its first value is checked, and others are tried if it fails. */
const SEARCH_KEYS = [
  'not', 'oneOf', 'anyOf', 'if', 'enum', 'uniqueItems', 'contains', 'propertyNames', 'dependentRequired', 'dependentSchemas',
  'dependencies', 'minProperties', 'maxProperties', 'unevaluatedProperties', 'unevaluatedItems', 'patternProperties', 'multipleOf',
];
/** Names tried from `patternProperties` for `minProperties` before names no pattern need match; as many of those follow. */
const PATTERN_MISSES = 16;
/** Other values tried for one subschema whose first fails its check, and for one generation in all. */
const NODE_RETRIES = 6;
const RETRIES = 64;

/**
 * One generation. `minimal`: required content only, arrays at `minItems`,
 * strings at their shortest — the smallest arguments the schema allows, used
 * as the fallback and by the validate-time check. `alt`: choices (a branch,
 * an enum value, a type of a list) are drawn at random instead of first.
 */
class Generator {
  private nodes = 0;
  private bytes = 0;
  private retries = RETRIES;
  private readonly check: SchemaCheck;
  /** Draws choices once a subschema's first value failed (or from the start in `alt`). */
  private choices: Rng | undefined;

  constructor(
    private readonly root: JsonSchema,
    private readonly rng: Rng,
    private readonly minimal: boolean,
    alt = 0,
    private readonly budget: CheckBudget = checkBudget(),
  ) {
    this.check = new SchemaCheck(root, budget);
    if (alt > 0) this.choices = mulberry32(alt * 0x9e3779b1);
  }

  run(): unknown {
    return this.generate(this.root, 0, '#');
  }

  /** An index in [0, n): the first, or drawn once choices are being varied. */
  private choose(n: number): number {
    return this.choices === undefined || n <= 1 ? 0 : Math.floor(this.choices() * n);
  }

  /** Charge work and output size; past the limits the full form gives up (the minimal form fails the schema). */
  private charge(bytes: number, path: string): void {
    this.bytes += bytes;
    if (++this.nodes > SCHEMA_LIMITS.maxNodes) this.over(`generating arguments needs more than ${SCHEMA_LIMITS.maxNodes} schema nodes`, path);
    if (this.bytes > SCHEMA_LIMITS.maxBytes) this.over(`the smallest arguments it allows exceed ${SCHEMA_LIMITS.maxBytes} bytes`, path);
  }

  /** Charge keys copied or scanned to the search's budget (SCHEMA_LIMITS.maxWork). */
  private spend(keys: number, path: string): void {
    if ((this.budget.keys -= keys) < 0) this.over(`generating arguments needs more than ${SCHEMA_LIMITS.maxWork} keys copied or scanned`, path);
  }

  private over(message: string, path: string): never {
    if (this.minimal) throw new SchemaError(message, path);
    throw new OverBudget(message);
  }

  /**
   * A value for `schema`. Where the schema asks for a search (SEARCH_KEYS), the value is checked against it and, when
   * it fails, up to NODE_RETRIES others are made with varied choices (within RETRIES for the whole generation).
   */
  private generate(schema: JsonSchema, depth: number, path: string): unknown {
    if (!SEARCH_KEYS.some((k) => k in schema)) return this.produce(schema, depth, path);
    let first: unknown;
    let error: unknown;
    const saved = this.choices;
    try {
      for (let i = 0; i <= NODE_RETRIES; i++) {
        if (i > 0) {
          if (this.retries-- <= 0) break;
          this.choices = mulberry32(hashSeed(path, i, this.retries));
        }
        let value: unknown;
        try {
          value = this.produce(schema, depth, path);
        } catch (err) {
          if (!(err instanceof SchemaError)) throw err;
          error ??= err;
          continue;
        }
        if (this.check.valid(value, schema)) return value;
        if (i === 0 || first === undefined) first = value;
      }
    } finally {
      this.choices = saved;
    }
    if (first !== undefined) return first; // the whole value's check names what is wrong
    throw error;
  }

  /**
   * One of `values` (the node's `enum`): the chosen one when the node's other keywords take it, else the next one
   * round from it they take (a `minimum`, a `pattern`, a `not` beside the list), while the search's budget lasts;
   * else the chosen one, and the whole value's check says why.
   */
  private enumValue(schema: JsonSchema, values: readonly unknown[]): unknown {
    const at = this.choose(values.length);
    const chosen = values[at];
    if (values.length === 1 || Object.keys(schema).every((k) => ENUM_NEUTRAL.has(k))) return chosen;
    const rest = withoutKeys(schema, 'enum');
    for (let k = 0; k < values.length && !this.check.spent; k++) {
      const v = values[(at + k) % values.length];
      if (this.check.valid(v, rest)) return v;
    }
    return chosen;
  }

  private produce(schema: JsonSchema, depth: number, path: string): unknown {
    if (depth > SCHEMA_LIMITS.maxDepth) {
      this.over(`required content nests deeper than ${SCHEMA_LIMITS.maxDepth} levels (a required '$ref' cycle?)`, path);
    }
    this.charge(1, path);
    if (typeof schema.$ref === 'string') {
      const target = resolveRef(schema.$ref, this.root);
      if (!target) throw new SchemaError(`'$ref' '${schema.$ref}' does not resolve`, path);
      // 2019-09 on: keywords beside a `$ref` apply too.
      this.spend(Object.keys(schema).length, path);
      const siblings = withoutKeys(schema, '$ref', '$defs', 'definitions', '$schema', '$id', 'title', 'description', '$comment');
      const merged = Object.keys(siblings).length > 0 ? this.mergeAllOf({ ...siblings, allOf: [target] }, path) : target;
      return this.generate(merged, depth + 1, schema.$ref);
    }
    if ('const' in schema) return this.value(schema.const, path);
    if (Array.isArray(schema.enum)) {
      if (schema.enum.length === 0) throw new SchemaError("'enum' is empty", path);
      return this.value(this.enumValue(schema, schema.enum), path);
    }
    if ('default' in schema && schema.default !== undefined && this.choices === undefined && this.check.valid(schema.default, schema)) {
      return this.value(schema.default, path);
    }

    const branches = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : undefined;
    if (branches) {
      const schemas = branches.filter(isSchema);
      if (schemas.length > 0) {
        // Prefer a branch that is not just `null` (the caller wants a real value), unless choices are being varied.
        const preferred = schemas.findIndex((b) => b.type !== 'null');
        const index = this.choices === undefined ? Math.max(0, preferred) : this.choose(schemas.length);
        const key = Array.isArray(schema.anyOf) ? 'anyOf' : 'oneOf';
        const parts = [...(Array.isArray(schema.allOf) ? schema.allOf : []), schemas[index]!];
        return this.generate(this.mergeAllOf({ ...withoutKeys(schema, key), allOf: parts }, path), depth + 1, path);
      }
    }
    if (isSchema(schema.if) || typeof schema.if === 'boolean') {
      // One of the two outcomes: `then` first; `else` when choices vary (the check decides which holds).
      const branch = this.choose(2) === 0 ? schema.then : schema.else;
      const rest = withoutKeys(schema, 'if', 'then', 'else');
      const parts = [...(Array.isArray(rest.allOf) ? rest.allOf : []), branch];
      return this.generate(isSchema(branch) ? this.mergeAllOf({ ...rest, allOf: parts }, path) : rest, depth + 1, path);
    }
    if (Array.isArray(schema.allOf)) return this.generate(this.mergeAllOf(schema, path), depth + 1, path);
    // `not: {not: X}` is X.
    if (isSchema(schema.not) && isSchema(schema.not.not) && Object.keys(schema.not).length === 1) {
      const rest = withoutKeys(schema, 'not');
      return this.generate(this.mergeAllOf({ ...rest, allOf: [...(Array.isArray(rest.allOf) ? rest.allOf : []), schema.not.not] }, path), depth + 1, path);
    }

    switch (typeOf(schema, this.choices === undefined ? 0 : this.choose(8))) {
      case 'integer':
        return this.numberFor(schema, true, path);
      case 'number':
        return this.numberFor(schema, false, path);
      case 'boolean':
        this.charge(4, path);
        return this.choose(2) === 0;
      case 'null':
        this.charge(4, path);
        return null;
      case 'array':
        return this.arrayFor(schema, depth, path);
      case 'object':
        return this.objectFor(schema, depth, path);
      default:
        return this.stringFor(schema, path);
    }
  }

  /** A literal from the schema (const, enum, default): charged by its size, not copied. */
  private value(v: unknown, path: string): unknown {
    this.charge(typeof v === 'string' ? v.length + 2 : typeof v === 'object' && v !== null ? JSON.stringify(v).length : 8, path);
    return v;
  }

  /**
   * `allOf` folded into one schema: properties and required lists joined, numeric and size bounds narrowed to the
   * tightest, other keywords taken from the last part that sets them (the check still holds the value to every part).
   */
  private mergeAllOf(schema: JsonSchema, path: string, hops = 0): JsonSchema {
    // A `$ref` beside other keywords that refers to itself (`r: {$ref: r, type: number}`) folds forever otherwise.
    if (hops > SCHEMA_LIMITS.maxDepth) this.over(`'allOf' and '$ref' fold deeper than ${SCHEMA_LIMITS.maxDepth} levels (a '$ref' cycle?)`, path);
    const own = isSchema(schema.properties) ? schema.properties : undefined;
    const ownRequired: readonly unknown[] = Array.isArray(schema.required) ? schema.required : [];
    this.spend(Object.keys(schema).length, path);
    // `properties` and `required` as the schema has them, until a part adds to them: then copies (a fold per anyOf
    // branch tried copied a node's thousands of properties each time).
    const merged: JsonSchema = withoutKeys(schema, 'allOf');
    let properties: JsonSchema | undefined;
    let required: Set<unknown> | undefined;
    for (const raw of (schema.allOf as unknown[]).filter(isSchema)) {
      // Generated schemas (pydantic and friends) often wrap a nested model as `allOf: [{$ref}]`.
      let part = raw;
      if (typeof raw.$ref === 'string') {
        const target = resolveRef(raw.$ref, this.root);
        if (!target) throw new SchemaError(`'$ref' '${raw.$ref}' does not resolve`, path);
        part = Object.keys(raw).length > 1 ? { ...withoutKeys(raw, '$ref'), allOf: [target] } : target;
        if (part !== target) part = this.mergeAllOf(part, path, hops + 1);
      }
      this.charge(1, path);
      this.spend(Object.keys(part).length, path);
      for (const key of Object.keys(part)) {
        if (key === 'properties' || key === 'required') continue;
        const mine = merged[key];
        const theirs = part[key];
        if (typeof mine === 'number' && typeof theirs === 'number' && TIGHTEST.has(key)) setOwn(merged, key, TIGHTEST.get(key)!(mine, theirs));
        else setOwn(merged, key, theirs);
        // Two parts' patterns both hold: kept, for stringFor to try strings of each and their joins.
        if (key === 'pattern' && typeof mine === 'string' && typeof theirs === 'string' && mine !== theirs) {
          const list = (merged as { [PATTERNS]?: string[] })[PATTERNS] ?? [mine];
          if (!list.includes(theirs)) list.push(theirs);
          (merged as { [PATTERNS]?: string[] })[PATTERNS] = list;
        }
      }
      if (isSchema(part.properties)) {
        const theirs = Object.entries(part.properties);
        if (properties === undefined) {
          this.spend(COPY_WEIGHT * (own === undefined ? 0 : Object.keys(own).length), path);
          properties = { ...(own ?? {}) };
        }
        this.spend(COPY_WEIGHT * theirs.length, path);
        for (const [k, sub] of theirs) {
          const mine = properties[k];
          // The same property in two parts: both hold (an allOf of the two), not the last one alone.
          setOwn(properties, k, isSchema(mine) && isSchema(sub) && mine !== sub ? { allOf: [mine, sub] } : sub);
        }
      }
      if (Array.isArray(part.required) && part.required.length > 0) {
        if (required === undefined) {
          this.spend(ownRequired.length, path);
          required = new Set<unknown>(ownRequired);
        }
        this.spend(part.required.length, path);
        for (const r of part.required) required.add(r);
      }
    }
    if (properties !== undefined && Object.keys(properties).length > 0) merged.properties = properties;
    if (required !== undefined && required.size > 0) merged.required = [...required];
    return merged;
  }

  private stringFor(schema: JsonSchema, path: string): string {
    const minLength = Math.max(0, Math.ceil(num(schema.minLength) ?? 0));
    const maxLength = num(schema.maxLength);
    if (minLength > SCHEMA_LIMITS.maxStringChars) {
      throw new SchemaError(`'minLength' ${minLength} is more than the ${SCHEMA_LIMITS.maxStringChars} characters generated arguments may hold`, path);
    }
    const max = maxLength ?? SCHEMA_LIMITS.maxStringChars;
    const patterns = (schema as { [PATTERNS]?: string[] })[PATTERNS];
    if (patterns !== undefined && patterns.length > 1) {
      // Several patterns (zod's startsWith + endsWith, two .regex()): a string of one, or one of each joined, that
      // all of them take (with the length bounds and the format).
      const all: JsonSchema = { type: 'string', allOf: patterns.slice(0, 8).map((p) => ({ pattern: p })) };
      for (const k of ['minLength', 'maxLength', 'format']) if (k in schema) all[k] = schema[k];
      const rng = this.choices ?? this.rng;
      const made = patterns.slice(0, 8).map((p) => shapedString({ pattern: p }, rng, 0, max, SCHEMA_LIMITS.maxStringChars) ?? '');
      const candidates = [...made];
      for (let i = 0; i < made.length; i++) for (let j = 0; j < made.length; j++) if (i !== j) candidates.push(made[i]! + made[j]!);
      const found = candidates.find((c) => this.check.valid(c, all));
      if (found !== undefined) {
        this.charge(found.length + 2, path);
        return found;
      }
    }
    // A pattern or a format (model/schema-strings.ts), within the length bounds where they allow it.
    let shaped = shapedString(schema, this.choices ?? this.rng, minLength, max, SCHEMA_LIMITS.maxStringChars);
    if (shaped !== undefined && typeof schema.pattern === 'string' && typeof schema.format === 'string') {
      // A format's string the pattern refuses only for its case (`format: uuid` with `^[A-F0-9-]+$`).
      const both = { pattern: schema.pattern, format: schema.format };
      const base = shaped;
      if (!this.check.valid(base, both)) shaped = [base.toUpperCase(), base.toLowerCase()].find((c) => this.check.valid(c, both)) ?? base;
    }
    if (shaped !== undefined) {
      this.charge(shaped.length + 2, path);
      return shaped;
    }
    const rng = this.choices ?? this.rng;
    let s = words(rng, intBetween(rng, 1, 3)).join(' ');
    if (s.length < minLength) {
      const parts = [s];
      let len = s.length;
      while (len < minLength) {
        const w = ` ${words(rng, 1).join('')}`;
        parts.push(w);
        len += w.length;
      }
      s = parts.join('');
    }
    if (maxLength !== undefined && s.length > maxLength) s = s.slice(0, maxLength).trimEnd().padEnd(Math.min(minLength, maxLength), 'x');
    this.charge(s.length + 2, path);
    return s;
  }

  /**
   * Small values: near the lower bound (1..10 when unbounded), an integer where one fits. Exclusive bounds (2019+:
   * the bound itself; draft 4: `true` beside minimum/maximum) and `multipleOf` narrow the choice; when no value is in
   * the range (an integer between 1.5 and 1.6, a multiple of 7 between 1 and 6) the schema is contradictory.
   */
  private numberFor(schema: JsonSchema, integer: boolean, path: string): number {
    this.charge(8, path);
    const { lo, loOpen, hi, hiOpen } = numericRange(schema);
    const step = num(schema.multipleOf);
    const above = (v: number) => (loOpen ? v > lo : v >= lo);
    const below = (v: number) => (hiOpen ? v < hi : v <= hi);
    // JSON numbers are finite (JSON.stringify writes Infinity as null).
    const fits = (v: number) => Number.isFinite(v) && above(v) && below(v) && (!integer || Number.isInteger(v)) && (step === undefined || step <= 0 || Number.isInteger(v / step));
    // Past 2^53 adding 1 changes nothing: a step above `x` that floating point can hold.
    const past = (x: number) => x + Math.max(1, Math.abs(x) * 2 ** -40);
    // Where to start: the lower bound, or a little under the upper one, or 1.
    const start = lo > -Infinity ? lo : hi < Infinity ? Math.min(1, hi - 9) : 1;
    const offset = this.choices !== undefined ? this.choose(10) : intBetween(this.rng, 0, 9);
    if (step !== undefined && step > 0) {
      // Multiples from the first at or above the start (for an integer, the integers from there: an integer multiple
      // of 0.07 is one of 7), the quotient whole in floating point, as validators check it (3 × 0.1 is
      // 0.30000000000000004, which they refuse; 4 × 0.1 is 0.4, which they take).
      let found: number | undefined;
      const first = integer ? Math.ceil(start) : Math.ceil(start / step);
      for (let i = 0, n = first; i < 1000; i++, n++) {
        const c = integer ? n : n * step;
        if (!below(c)) break;
        if (fits(c)) {
          found = c;
          if (i >= offset || !fits(integer ? c + step : (n + 1) * step)) break;
        }
      }
      if (found === undefined) throw new SchemaError(`no ${integer ? 'integer ' : ''}multiple of ${step} lies in ${rangeText(lo, loOpen, hi, hiOpen)} (within 1000 tries)`, path);
      return found;
    }
    let a = Math.ceil(start);
    if (!above(a)) a = Math.ceil(past(a));
    if (fits(a)) {
      const b = Math.min(a + offset, hi < Infinity ? Math.floor(hi) : a + offset);
      let v = a;
      for (let c = b; c >= a; c--) {
        if (fits(c)) {
          v = c;
          break;
        }
      }
      // A number that is not an integer, when choices vary (a `oneOf` of an integer and a number tells them apart).
      if (!integer && this.choices !== undefined && this.choose(2) === 1 && fits(v + 0.5)) return v + 0.5;
      return v;
    }
    if (integer) throw new SchemaError(`no integer lies in ${rangeText(lo, loOpen, hi, hiOpen)}`, path);
    // A narrow range with no integer in it: its middle (or a bound that is in it).
    const mid = lo > -Infinity && hi < Infinity ? lo / 2 + hi / 2 : lo > -Infinity ? past(lo) : -past(-hi);
    for (const c of [mid, lo, hi, past(lo), -past(-hi)]) if (fits(c)) return c;
    throw new SchemaError(`no number lies in ${rangeText(lo, loOpen, hi, hiOpen)}`, path);
  }

  private arrayFor(schema: JsonSchema, depth: number, path: string): unknown[] {
    const minItems = Math.max(0, Math.ceil(num(schema.minItems) ?? 0));
    const maxItems = num(schema.maxItems) ?? Infinity;
    if (minItems > SCHEMA_LIMITS.maxArrayItems) {
      throw new SchemaError(`'minItems' ${minItems} is more than the ${SCHEMA_LIMITS.maxArrayItems} items generated arguments may hold`, path);
    }
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems.filter(isSchema) : [];
    const tuple = Array.isArray(schema.items) ? schema.items.filter(isSchema) : prefix;
    const rest = Array.isArray(schema.items) ? schema.additionalItems : schema.items;
    const items = isSchema(rest) ? rest : undefined;
    // `contains`: the first `minContains` items (1 by default) are made to hold it too.
    const contains = 'contains' in schema && schema.contains !== true ? schema.contains : undefined;
    const containsCount = contains === undefined ? 0 : Math.max(0, Math.ceil(num(schema.minContains) ?? 1));
    const floor = Math.max(minItems, Math.min(containsCount, SCHEMA_LIMITS.maxArrayItems));
    const wanted = this.minimal || depth >= MAX_DEPTH ? floor : Math.max(1, floor, Math.min(tuple.length, SCHEMA_LIMITS.maxArrayItems));
    const n = Math.min(wanted, maxItems);
    this.charge(2, path);
    const unique = schema.uniqueItems === true;
    const out: unknown[] = [];
    const saved = this.choices;
    try {
      for (let i = 0; i < n; i++) {
        let itemSchema: JsonSchema | undefined = tuple[i] ?? items;
        if (i < containsCount && isSchema(contains)) itemSchema = itemSchema ? this.mergeAllOf({ allOf: [itemSchema, contains] }, path) : contains;
        let item = itemSchema ? this.generate(itemSchema, depth + 1, `${path}/items`) : this.word(path);
        // Unique items: other choices for an item equal to an earlier one (an enum's next value, another number).
        for (let t = 1; unique && t <= 16 && out.some((x) => jsonEqual(x, item)); t++) {
          this.choices = mulberry32(hashSeed(path, i, t));
          item = itemSchema ? this.generate(itemSchema, depth + 1, `${path}/items`) : this.word(path);
        }
        this.choices = saved;
        out.push(item);
      }
    } finally {
      this.choices = saved;
    }
    return out;
  }

  private objectFor(schema: JsonSchema, depth: number, path: string): Record<string, unknown> {
    const properties = isSchema(schema.properties) ? schema.properties : {};
    const declared = requiredOf(schema);
    // Names required only because another present name asks for them (dependentRequired and friends).
    const dependent = new Set<string>();
    const required = { has: (k: string) => declared.has(k) || dependent.has(k) };
    this.charge(2, path);
    this.spend(Object.keys(properties).length + declared.size, path);
    const out: Record<string, unknown> = {};
    let count = 0;
    /** Sets `key` (unless its schema is `false`); the schema its value was made for. */
    const put = (key: string): unknown => {
      const sub = this.schemaForKey(schema, key, path);
      if (sub === false) {
        if (required.has(key)) throw new SchemaError(`required property '${key}' has the schema 'false': no value can satisfy it`, path);
        return sub;
      }
      this.charge(key.length + 4, path);
      const had = Object.hasOwn(out, key);
      setOwn(out, key, isSchema(sub) ? this.generate(sub, depth + 1, `${path}/properties/${key}`) : this.word(path));
      if (!had) count++;
      return sub;
    };
    for (const key of Object.keys(properties)) {
      // Optional properties appear about half the time (decided by the rng, so still deterministic).
      const include = required.has(key) || (!this.minimal && depth < MAX_DEPTH && (this.choices ?? this.rng)() < 0.5);
      if (include) put(key);
    }
    // A required name with no property schema still has to be present (`toString` too: an own key, not an inherited one).
    for (const key of declared) if (!Object.hasOwn(out, key)) put(key);
    // Names other present names require (dependentRequired, draft-07 `dependencies` lists), and the required
    // names of a present name's dependent schema: until nothing more is added.
    const dependents = (key: string): string[] => {
      const names: string[] = [];
      for (const map of [schema.dependentRequired, schema.dependencies]) {
        const d = isSchema(map) && Object.hasOwn(map, key) ? map[key] : undefined;
        if (Array.isArray(d)) for (const n of d) if (typeof n === 'string') names.push(n);
        if (isSchema(d) && Array.isArray(d.required)) for (const n of d.required) if (typeof n === 'string') names.push(n);
      }
      const ds = isSchema(schema.dependentSchemas) && Object.hasOwn(schema.dependentSchemas, key) ? schema.dependentSchemas[key] : undefined;
      if (isSchema(ds) && Array.isArray(ds.required)) for (const n of ds.required) if (typeof n === 'string') names.push(n);
      this.spend(names.length, path);
      return names;
    };
    for (let pending = Object.keys(out), guard = 0; pending.length > 0 && guard < 10_000; guard++) {
      const next: string[] = [];
      for (const key of pending) {
        for (const n of dependents(key)) {
          if (Object.hasOwn(out, n)) continue;
          dependent.add(n);
          put(n);
          next.push(n);
        }
      }
      pending = next;
    }
    // `minProperties`: declared optional properties first, then names of `patternProperties` or `propertyNames`.
    const minProperties = Math.ceil(num(schema.minProperties) ?? 0);
    if (count < minProperties) {
      // A name that is not required may be one whose value cannot be made (its schema unsatisfiable): it is left out
      // and another is tried. Whether a name was added and its value fits.
      const tryPut = (key: string): boolean => {
        let sub: unknown;
        try {
          sub = put(key);
        } catch (err) {
          if (err instanceof SchemaError) return false;
          throw err;
        }
        if (!Object.hasOwn(out, key)) return false;
        if (isSchema(sub) && !this.check.valid(out[key], sub)) {
          delete out[key];
          count--;
          return false;
        }
        return true;
      };
      for (const key of Object.keys(properties)) {
        if (count >= minProperties) break;
        if (!Object.hasOwn(out, key)) tryPut(key);
      }
      const patterns = isSchema(schema.patternProperties) ? Object.keys(schema.patternProperties) : [];
      this.spend(patterns.length, path);
      const names = isSchema(schema.propertyNames) ? schema.propertyNames : undefined;
      for (let i = 0, misses = 0; count < minProperties && misses < 2 * PATTERN_MISSES; i++) {
        const rng = this.choices ?? mulberry32(hashSeed(path, i, 0));
        let key: string | undefined;
        // Half the tries at most go to the patterns' names: when none of their values can be made (each pattern's
        // schema unsatisfiable), a name no pattern matches still can be (outside attack: 9,999 such patterns and
        // `minProperties: 3` were refused).
        const byPattern = patterns.length > 0 && misses < PATTERN_MISSES;
        if (byPattern) key = shapedString({ pattern: patterns[i % patterns.length] }, rng, 1, 64, 256);
        if (key === undefined && names) {
          const saved = this.choices;
          this.choices = rng;
          try {
            const made = this.generate({ type: 'string', ...names }, depth + 1, `${path}/propertyNames`);
            key = typeof made === 'string' ? made : undefined;
          } finally {
            this.choices = saved;
          }
        }
        key ??= `${words(rng, 1).join('')}_${i + 1}`;
        if (Object.hasOwn(out, key)) {
          // A name taken already (a pattern with one string, `^z`): the same with a number after or before it, if the
          // names' schema and the pattern still take it.
          const nameSchema: JsonSchema = { type: 'string', ...(names ?? {}), ...(byPattern ? { pattern: patterns[i % patterns.length] } : {}) };
          const base = key;
          key = [`${base}${i + 1}`, `${i + 1}${base}`].find((k) => !Object.hasOwn(out, k) && this.check.valid(k, nameSchema)) ?? base;
        }
        if (Object.hasOwn(out, key) || key.length > 256) {
          misses++;
          continue;
        }
        // A name the schema bars (`additionalProperties: false`), or whose value cannot be made.
        if (!tryPut(key)) misses++;
      }
      if (count < minProperties) {
        throw new SchemaError(`'minProperties' ${minProperties} cannot be reached with the names the schema allows`, path);
      }
    }
    return out;
  }

  /** The schema a property's value follows: its declared one, a matching `patternProperties` one, or `additionalProperties`. */
  private schemaForKey(schema: JsonSchema, key: string, path: string): unknown {
    const properties = isSchema(schema.properties) ? schema.properties : undefined;
    if (properties && Object.hasOwn(properties, key)) return properties[key];
    // No more tests once the search's budget is spent (each would build the list and recompile a pattern again).
    if (isSchema(schema.patternProperties) && key.length <= 256 && !this.check.spent) {
      const pp = schema.patternProperties;
      for (const p in pp) {
        if (!Object.hasOwn(pp, p)) continue;
        if (this.check.spent) break;
        this.spend(1, path);
        if (this.check.valid(key, { pattern: p })) return pp[p];
      }
    }
    // A name a present name's dependent schema declares.
    if (isSchema(schema.dependentSchemas)) {
      const deps = Object.values(schema.dependentSchemas);
      this.spend(deps.length, path);
      for (const dep of deps) {
        if (isSchema(dep) && isSchema(dep.properties) && Object.hasOwn(dep.properties, key)) return dep.properties[key];
      }
    }
    if ('additionalProperties' in schema) return schema.additionalProperties;
    if ('unevaluatedProperties' in schema) return schema.unevaluatedProperties;
    return undefined;
  }

  private word(path: string): string {
    const w = words(this.choices ?? this.rng, 1).join('');
    this.charge(w.length + 2, path);
    return w;
  }
}

/** Numeric bounds as one range with open or closed ends (draft 2019+ and draft 4 exclusive bounds both read). */
function numericRange(schema: JsonSchema): { lo: number; loOpen: boolean; hi: number; hiOpen: boolean } {
  let lo = -Infinity;
  let loOpen = false;
  let hi = Infinity;
  let hiOpen = false;
  const min = num(schema.minimum);
  const max = num(schema.maximum);
  if (min !== undefined) [lo, loOpen] = [min, schema.exclusiveMinimum === true];
  if (max !== undefined) [hi, hiOpen] = [max, schema.exclusiveMaximum === true];
  const exMin = num(schema.exclusiveMinimum);
  const exMax = num(schema.exclusiveMaximum);
  if (exMin !== undefined && exMin >= lo) [lo, loOpen] = [exMin, true];
  if (exMax !== undefined && exMax <= hi) [hi, hiOpen] = [exMax, true];
  return { lo, loOpen, hi, hiOpen };
}

function rangeText(lo: number, loOpen: boolean, hi: number, hiOpen: boolean): string {
  return `${loOpen ? '(' : '['}${lo}, ${hi}${hiOpen ? ')' : ']'}`;
}

/** Where a merged schema keeps every pattern of its parts (a symbol: never sent, never read as JSON Schema). */
const PATTERNS = Symbol('patterns');

/** The tightest of two values of a bound keyword met in two `allOf` parts. */
const TIGHTEST = new Map<string, (a: number, b: number) => number>([
  ['minimum', Math.max], ['exclusiveMinimum', Math.max], ['minLength', Math.max], ['minItems', Math.max], ['minProperties', Math.max], ['minContains', Math.max],
  ['maximum', Math.min], ['exclusiveMaximum', Math.min], ['maxLength', Math.min], ['maxItems', Math.min], ['maxProperties', Math.min], ['maxContains', Math.min],
]);

/** A seed for one retry, from where it is and which try it is. */
function hashSeed(path: string, i: number, j: number): number {
  return hashString(`${path}#${i}#${j}`);
}

const ANY_TYPES = ['string', 'integer', 'number', 'boolean', 'object', 'array', 'null'];

/** The type to make: the schema's, or for a list the first that is not `null` (the `pick`-th of the list when choices vary). */
function typeOf(schema: JsonSchema, pick = 0): string {
  const t = schema.type;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const names = t.filter((x): x is string => typeof x === 'string');
    const first = pick > 0 && names.length > 0 ? names[pick % names.length] : (names.find((x) => x !== 'null') ?? names[0]);
    if (typeof first === 'string') return first;
  }
  if (isSchema(schema.properties) || Array.isArray(schema.required)) return 'object';
  if (schema.items !== undefined || Array.isArray(schema.prefixItems)) return 'array';
  // No type: a string, or any type when choices vary (`not: {type: string}` wants something else).
  return pick > 0 ? ANY_TYPES[pick % ANY_TYPES.length]! : 'string';
}
