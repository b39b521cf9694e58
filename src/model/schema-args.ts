/**
 * Arguments for a function call, generated from the tool's JSON Schema
 * (`parameters`), deterministically from a seeded rng.
 *
 * Used by the auto policy when it decides to call a tool nobody scripted, and
 * by the validate stage (`checkToolSchema`), which refuses a tool whose
 * schema no bounded arguments can satisfy before any run starts. Covers the
 * subset tool schemas use in practice: type (or a list of types),
 * properties/required, items/prefixItems, enum/const/default, anyOf/oneOf
 * (first branch), allOf (merged), local $ref, string formats and patterns
 * (model/schema-strings.ts), numeric bounds, length and item-count bounds.
 * Leaves out `uniqueItems`, `not`, `if/then/else`, conditional dependencies
 * and patterns with lookarounds or backreferences: a schema that leans on
 * them may get arguments that do not validate.
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
import { intBetween, type Rng, words } from './rng.js';
import { shapedString } from './schema-strings.js';

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
  let value: unknown;
  try {
    try {
      value = new Generator(schema, rng, false).run();
    } catch (err) {
      // Whatever failed in the full form (an optional part too big or contradictory), the minimal form decides.
      if (!(err instanceof OverBudget || err instanceof SchemaError)) throw err;
      value = new Generator(schema, rng, true).run();
    }
  } catch (err) {
    throw asWireError(err, 'parameters');
  }
  // Function arguments are always an object, whatever the schema's top level says.
  return isSchema(value) ? value : {};
}

/**
 * The validate stage's check of one tool's `parameters`: every `$ref`
 * resolves, bounds are consistent, and the minimal arguments fit the limits.
 * Throws `invalid_tool_schema` naming `param`.
 */
export function checkToolSchema(schema: unknown, param: string, serialized?: string, code: SchemaErrorCode = 'invalid_tool_schema'): void {
  if (!isSchema(schema)) return;
  // Clients send the same tools with every request: a schema already accepted is not walked again.
  const key = serialized !== undefined && serialized.length <= CHECKED_KEY_CHARS ? serialized : undefined;
  if (key !== undefined && checked.has(key)) return;
  try {
    staticCheck(schema);
    new Generator(schema, () => 0, true).run();
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
const CHECKED_KEY_CHARS = 64 * 1024;
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
const SCHEMA_MAP_KEYS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);

/** Walk every subschema (and every `$ref` target) once: refs resolve, bounds agree, the schema is not absurdly large or deep. */
function staticCheck(root: JsonSchema): void {
  let nodes = 0;
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
    bounds(node, 'minItems', 'maxItems', path);
    bounds(node, 'minLength', 'maxLength', path);
    bounds(node, 'minProperties', 'maxProperties', path);
    bounds(node, 'minimum', 'maximum', path);
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
}

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

function bounds(node: JsonSchema, lo: string, hi: string, path: string): void {
  const a = node[lo];
  const b = node[hi];
  if (a !== undefined && typeof a !== 'number') throw new SchemaError(`'${lo}' must be a number`, path);
  if (b !== undefined && typeof b !== 'number') throw new SchemaError(`'${hi}' must be a number`, path);
  if (typeof a === 'number' && typeof b === 'number' && a > b) throw new SchemaError(`'${lo}' (${a}) is greater than '${hi}' (${b})`, path);
}

function resolveRef(ref: string, root: JsonSchema): JsonSchema | undefined {
  if (!ref.startsWith('#')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(1).split('/').filter((s) => s !== '')) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    // Own keys only: '#/__proto__' named Object.prototype, an empty schema, where a missing target is refused.
    node = isSchema(node) ? (Object.hasOwn(node, key) ? node[key] : undefined) : Array.isArray(node) && Object.hasOwn(node, key) ? node[Number(key)] : undefined;
  }
  return isSchema(node) ? node : undefined;
}

/**
 * `o[key] = value` as an own data property whatever the key: a client's property named `__proto__` assigned
 * with `=` set the object's prototype instead, and the key was missing from the JSON (outside attack).
 */
export function setOwn(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

/** `Object.assign(target, source)` with every own key of `source` set as `setOwn` does (`__proto__` included). */
function assignOwn(target: Record<string, unknown>, source: Record<string, unknown>): void {
  for (const key of Object.keys(source)) setOwn(target, key, source[key]);
}

function withoutKeys(schema: JsonSchema, ...keys: string[]): JsonSchema {
  const copy = { ...schema };
  for (const k of keys) delete copy[k];
  return copy;
}

/**
 * One generation. `minimal`: required content only, arrays at `minItems`,
 * strings at their shortest — the smallest arguments the schema allows, used
 * as the fallback and by the validate-time check.
 */
class Generator {
  private nodes = 0;
  private bytes = 0;

  constructor(
    private readonly root: JsonSchema,
    private readonly rng: Rng,
    private readonly minimal: boolean,
  ) {}

  run(): unknown {
    return this.generate(this.root, 0, '#');
  }

  /** Charge work and output size; past the limits the full form gives up (the minimal form fails the schema). */
  private charge(bytes: number, path: string): void {
    this.bytes += bytes;
    if (++this.nodes > SCHEMA_LIMITS.maxNodes) this.over(`generating arguments needs more than ${SCHEMA_LIMITS.maxNodes} schema nodes`, path);
    if (this.bytes > SCHEMA_LIMITS.maxBytes) this.over(`the smallest arguments it allows exceed ${SCHEMA_LIMITS.maxBytes} bytes`, path);
  }

  private over(message: string, path: string): never {
    if (this.minimal) throw new SchemaError(message, path);
    throw new OverBudget(message);
  }

  private generate(schema: JsonSchema, depth: number, path: string): unknown {
    if (depth > SCHEMA_LIMITS.maxDepth) {
      this.over(`required content nests deeper than ${SCHEMA_LIMITS.maxDepth} levels (a required '$ref' cycle?)`, path);
    }
    this.charge(1, path);
    if (typeof schema.$ref === 'string') {
      const target = resolveRef(schema.$ref, this.root);
      if (!target) throw new SchemaError(`'$ref' '${schema.$ref}' does not resolve`, path);
      return this.generate(target, depth + 1, schema.$ref);
    }
    if ('const' in schema) return this.value(schema.const, path);
    if (Array.isArray(schema.enum)) {
      if (schema.enum.length === 0) throw new SchemaError("'enum' is empty", path);
      return this.value(schema.enum[0], path);
    }
    if ('default' in schema && schema.default !== undefined) return this.value(schema.default, path);

    const branches = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : undefined;
    if (branches) {
      // Prefer a branch that is not just `null`: the caller wants a real value.
      const schemas = branches.filter(isSchema);
      const branch = schemas.find((b) => b.type !== 'null') ?? schemas[0];
      if (branch) return this.generate({ ...withoutKeys(schema, 'anyOf', 'oneOf'), ...branch }, depth + 1, path);
    }
    if (Array.isArray(schema.allOf)) return this.generate(this.mergeAllOf(schema, path), depth + 1, path);

    switch (typeOf(schema)) {
      case 'integer':
        return this.numberFor(schema, true, path);
      case 'number':
        return this.numberFor(schema, false, path);
      case 'boolean':
        this.charge(4, path);
        return true;
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

  private mergeAllOf(schema: JsonSchema, path: string): JsonSchema {
    const merged: JsonSchema = withoutKeys(schema, 'allOf');
    const properties: JsonSchema = { ...(isSchema(schema.properties) ? schema.properties : {}) };
    const required = new Set<unknown>(Array.isArray(schema.required) ? schema.required : []);
    for (const raw of (schema.allOf as unknown[]).filter(isSchema)) {
      // Generated schemas (pydantic and friends) often wrap a nested model as `allOf: [{$ref}]`.
      let part = raw;
      if (typeof raw.$ref === 'string') {
        const target = resolveRef(raw.$ref, this.root);
        if (!target) throw new SchemaError(`'$ref' '${raw.$ref}' does not resolve`, path);
        part = target;
      }
      this.charge(1, path);
      assignOwn(merged, withoutKeys(part, 'properties', 'required'));
      if (isSchema(part.properties)) assignOwn(properties, part.properties);
      if (Array.isArray(part.required)) for (const r of part.required) required.add(r);
    }
    if (Object.keys(properties).length > 0) merged.properties = properties;
    if (required.size > 0) merged.required = [...required];
    return merged;
  }

  private stringFor(schema: JsonSchema, path: string): string {
    const minLength = Math.max(0, Math.ceil(num(schema.minLength) ?? 0));
    const maxLength = num(schema.maxLength);
    if (minLength > SCHEMA_LIMITS.maxStringChars) {
      throw new SchemaError(`'minLength' ${minLength} is more than the ${SCHEMA_LIMITS.maxStringChars} characters generated arguments may hold`, path);
    }
    const max = maxLength ?? SCHEMA_LIMITS.maxStringChars;
    // A pattern or a format (model/schema-strings.ts), within the length bounds where they allow it.
    const shaped = shapedString(schema, this.rng, minLength, max, SCHEMA_LIMITS.maxStringChars);
    if (shaped !== undefined) {
      this.charge(shaped.length + 2, path);
      return shaped;
    }
    let s = words(this.rng, intBetween(this.rng, 1, 3)).join(' ');
    if (s.length < minLength) {
      const parts = [s];
      let len = s.length;
      while (len < minLength) {
        const w = ` ${words(this.rng, 1).join('')}`;
        parts.push(w);
        len += w.length;
      }
      s = parts.join('');
    }
    if (maxLength !== undefined && s.length > maxLength) s = s.slice(0, maxLength).trimEnd().padEnd(Math.min(minLength, maxLength), 'x');
    this.charge(s.length + 2, path);
    return s;
  }

  /** Small values: an integer near the lower bound (1..10 when unbounded). */
  private numberFor(schema: JsonSchema, integer: boolean, path: string): number {
    this.charge(8, path);
    let lo = num(schema.minimum);
    let hi = num(schema.maximum);
    const exMin = num(schema.exclusiveMinimum);
    const exMax = num(schema.exclusiveMaximum);
    // Draft 2019+ gives the bound itself; draft 4 gives `true` next to minimum/maximum.
    if (exMin !== undefined) lo = Math.max(lo ?? -Infinity, exMin + 1);
    else if (schema.exclusiveMinimum === true && lo !== undefined) lo += 1;
    if (exMax !== undefined) hi = Math.min(hi ?? Infinity, exMax - 1);
    else if (schema.exclusiveMaximum === true && hi !== undefined) hi -= 1;
    const low = lo ?? (hi !== undefined ? Math.min(1, hi - 9) : 1);
    const high = Math.min(hi ?? Infinity, low + 9);
    const a = Math.ceil(low);
    const b = Math.floor(high);
    if (a > b) {
      // No integer fits (a narrow fractional range): use the middle of the declared range.
      const mid = ((num(schema.minimum) ?? exMin ?? low) + (num(schema.maximum) ?? exMax ?? high)) / 2;
      return integer ? Math.round(mid) : mid;
    }
    const step = num(schema.multipleOf);
    let v = intBetween(this.rng, a, b);
    if (step !== undefined && step > 0) {
      v = Math.ceil(a / step) * step;
      if (integer) v = Math.round(v);
      // A multiple whose quotient is whole in floating point, as validators check it (`v / step % 1 === 0`, Ajv's):
      // 3 × 0.1 is 0.30000000000000004, which they refuse; 4 × 0.1 is 0.4, which they take.
      const top = hi ?? Infinity;
      for (let q = Math.ceil(a / step), n = a, i = 0; i < 1000; i++, q++, n++) {
        // An integer: the integers from the lower bound (an integer multiple of 0.07 is one of 7); else multiples.
        const c = integer ? n : q * step;
        if (c > top) break;
        if ((c / step) % 1 === 0 && c >= a) {
          v = c;
          break;
        }
      }
    }
    return v;
  }

  private arrayFor(schema: JsonSchema, depth: number, path: string): unknown[] {
    const minItems = Math.max(0, Math.ceil(num(schema.minItems) ?? 0));
    const maxItems = num(schema.maxItems) ?? Infinity;
    if (minItems > SCHEMA_LIMITS.maxArrayItems) {
      throw new SchemaError(`'minItems' ${minItems} is more than the ${SCHEMA_LIMITS.maxArrayItems} items generated arguments may hold`, path);
    }
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems.filter(isSchema) : [];
    const tuple = Array.isArray(schema.items) ? schema.items.filter(isSchema) : prefix;
    const items = isSchema(schema.items) ? schema.items : undefined;
    const wanted = this.minimal || depth >= MAX_DEPTH ? minItems : Math.max(1, minItems, Math.min(tuple.length, SCHEMA_LIMITS.maxArrayItems));
    const n = Math.min(wanted, maxItems);
    this.charge(2, path);
    const out: unknown[] = [];
    for (let i = 0; i < n; i++) {
      const itemSchema = tuple[i] ?? items;
      out.push(itemSchema ? this.generate(itemSchema, depth + 1, `${path}/items`) : this.word(path));
    }
    return out;
  }

  private objectFor(schema: JsonSchema, depth: number, path: string): Record<string, unknown> {
    const properties = isSchema(schema.properties) ? schema.properties : {};
    const required = requiredOf(schema);
    this.charge(2, path);
    const out: Record<string, unknown> = {};
    for (const [key, sub] of Object.entries(properties)) {
      // Optional properties appear about half the time (decided by the rng, so still deterministic).
      const include = required.has(key) || (!this.minimal && depth < MAX_DEPTH && this.rng() < 0.5);
      if (!include) continue;
      if (sub === false) {
        if (required.has(key)) throw new SchemaError(`required property '${key}' has the schema 'false': no value can satisfy it`, path);
        continue;
      }
      this.charge(key.length + 4, path);
      setOwn(out, key, isSchema(sub) ? this.generate(sub, depth + 1, `${path}/properties/${key}`) : this.value('value', path));
    }
    // A required name with no property schema still has to be present (`toString` too: an own key, not an inherited one).
    for (const key of required) {
      if (Object.hasOwn(out, key)) continue;
      this.charge(key.length + 4, path);
      setOwn(out, key, this.word(path));
    }
    return out;
  }

  private word(path: string): string {
    const w = words(this.rng, 1).join('');
    this.charge(w.length + 2, path);
    return w;
  }
}

function typeOf(schema: JsonSchema): string {
  const t = schema.type;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const first = t.find((x) => typeof x === 'string' && x !== 'null') ?? t[0];
    if (typeof first === 'string') return first;
  }
  if (isSchema(schema.properties) || Array.isArray(schema.required)) return 'object';
  if (schema.items !== undefined || Array.isArray(schema.prefixItems)) return 'array';
  return 'string';
}

/**
 * The names an object schema requires, as a set: made once per schema object (validation and every model call
 * generate from the same one), in one pass. A `required` of 3 million names was filtered into a new array and a
 * set at each generation, ~0.1-0.24 s of one loop turn each (outside attack).
 */
const requiredSets = new WeakMap<object, ReadonlySet<string>>();
function requiredOf(schema: JsonSchema): ReadonlySet<string> {
  let set = requiredSets.get(schema);
  if (set === undefined) {
    const names = new Set<string>();
    if (Array.isArray(schema.required)) for (const r of schema.required) if (typeof r === 'string') names.add(r);
    set = names;
    requiredSets.set(schema, set);
  }
  return set;
}
