/**
 * Arguments for a function call, generated from the tool's JSON Schema
 * (`parameters`), deterministically from a seeded rng.
 *
 * Used by the auto policy when it decides to call a tool nobody scripted.
 * Covers the subset tool schemas use in practice: type (or a list of types),
 * properties/required, items/prefixItems, enum/const/default, anyOf/oneOf
 * (first branch), allOf (merged), local $ref, string formats, numeric bounds,
 * length and item-count bounds. Leaves out `pattern`, `uniqueItems`,
 * `not`, `if/then/else` and conditional dependencies: a schema that leans on
 * them may get arguments that do not validate.
 */
import { intBetween, type Rng, words } from './rng.js';

export type JsonSchema = Record<string, unknown>;

/** Past this depth optional properties and non-required array items are skipped, so recursive schemas end. */
const MAX_DEPTH = 6;

/** The arguments object for a tool; `{}` when the tool declares no parameters. */
export function argsFromSchema(schema: JsonSchema | null | undefined, rng: Rng): Record<string, unknown> {
  if (!isSchema(schema)) return {};
  const value = generate(schema, schema, rng, 0);
  // Function arguments are always an object, whatever the schema's top level says.
  return isSchema(value) ? value : {};
}

function isSchema(x: unknown): x is JsonSchema {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function num(x: unknown): number | undefined {
  return typeof x === 'number' && Number.isFinite(x) ? x : undefined;
}

function generate(schema: JsonSchema, root: JsonSchema, rng: Rng, depth: number): unknown {
  if (typeof schema.$ref === 'string') {
    const target = resolveRef(schema.$ref, root);
    return target && depth < MAX_DEPTH * 2 ? generate(target, root, rng, depth + 1) : {};
  }
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if ('default' in schema && schema.default !== undefined) return schema.default;

  const branches = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : undefined;
  if (branches) {
    // Prefer a branch that is not just `null`: the caller wants a real value.
    const schemas = branches.filter(isSchema);
    const branch = schemas.find((b) => b.type !== 'null') ?? schemas[0];
    if (branch) return generate({ ...withoutKeys(schema, 'anyOf', 'oneOf'), ...branch }, root, rng, depth + 1);
  }
  if (Array.isArray(schema.allOf)) return generate(mergeAllOf(schema, root), root, rng, depth + 1);

  switch (typeOf(schema)) {
    case 'integer':
      return numberFor(schema, rng, true);
    case 'number':
      return numberFor(schema, rng, false);
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array':
      return arrayFor(schema, root, rng, depth);
    case 'object':
      return objectFor(schema, root, rng, depth);
    default:
      return stringFor(schema, rng);
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

function resolveRef(ref: string, root: JsonSchema): JsonSchema | undefined {
  if (!ref.startsWith('#')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(1).split('/').filter((s) => s !== '')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    node = isSchema(node) ? node[key] : undefined;
  }
  return isSchema(node) ? node : undefined;
}

function withoutKeys(schema: JsonSchema, ...keys: string[]): JsonSchema {
  const copy = { ...schema };
  for (const k of keys) delete copy[k];
  return copy;
}

function mergeAllOf(schema: JsonSchema, root: JsonSchema): JsonSchema {
  const merged: JsonSchema = withoutKeys(schema, 'allOf');
  const properties: JsonSchema = { ...(isSchema(schema.properties) ? schema.properties : {}) };
  const required = new Set<unknown>(Array.isArray(schema.required) ? schema.required : []);
  for (const raw of (schema.allOf as unknown[]).filter(isSchema)) {
    // Generated schemas (pydantic and friends) often wrap a nested model as `allOf: [{$ref}]`.
    const part = typeof raw.$ref === 'string' ? (resolveRef(raw.$ref, root) ?? {}) : raw;
    Object.assign(merged, withoutKeys(part, 'properties', 'required'));
    if (isSchema(part.properties)) Object.assign(properties, part.properties);
    if (Array.isArray(part.required)) for (const r of part.required) required.add(r);
  }
  if (Object.keys(properties).length > 0) merged.properties = properties;
  if (required.size > 0) merged.required = [...required];
  return merged;
}

const FORMATS: Record<string, (rng: Rng) => string> = {
  'date-time': () => '2025-01-01T12:00:00Z',
  date: () => '2025-01-01',
  time: () => '12:00:00Z',
  email: (rng) => `${words(rng, 1).join('')}@example.com`,
  uri: (rng) => `https://example.com/${words(rng, 1).join('')}`,
  url: (rng) => `https://example.com/${words(rng, 1).join('')}`,
  uuid: (rng) => {
    const h = Array.from({ length: 32 }, () => Math.floor(rng() * 16).toString(16)).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20)}`;
  },
};

function stringFor(schema: JsonSchema, rng: Rng): string {
  const format = typeof schema.format === 'string' ? FORMATS[schema.format] : undefined;
  let s = format ? format(rng) : words(rng, intBetween(rng, 1, 3)).join(' ');
  const minLength = num(schema.minLength) ?? 0;
  const maxLength = num(schema.maxLength);
  while (s.length < minLength) s += ` ${words(rng, 1).join('')}`;
  if (maxLength !== undefined && s.length > maxLength) s = s.slice(0, maxLength).trimEnd().padEnd(Math.min(minLength, maxLength), 'x');
  return s;
}

/** Small values: an integer near the lower bound (1..10 when unbounded). */
function numberFor(schema: JsonSchema, rng: Rng, integer: boolean): number {
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
  let v = intBetween(rng, a, b);
  if (step !== undefined && step > 0) {
    v = Math.ceil(a / step) * step;
    if (integer) v = Math.round(v);
  }
  return v;
}

function arrayFor(schema: JsonSchema, root: JsonSchema, rng: Rng, depth: number): unknown[] {
  const minItems = num(schema.minItems) ?? 0;
  const maxItems = num(schema.maxItems) ?? Infinity;
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems.filter(isSchema) : [];
  const tuple = Array.isArray(schema.items) ? schema.items.filter(isSchema) : prefix;
  const items = isSchema(schema.items) ? schema.items : undefined;
  const wanted = depth >= MAX_DEPTH ? minItems : Math.max(1, minItems, tuple.length);
  const n = Math.min(wanted, maxItems);
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const itemSchema = tuple[i] ?? items;
    out.push(itemSchema ? generate(itemSchema, root, rng, depth + 1) : words(rng, 1).join(''));
  }
  return out;
}

function objectFor(schema: JsonSchema, root: JsonSchema, rng: Rng, depth: number): Record<string, unknown> {
  const properties = isSchema(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === 'string') : []);
  const out: Record<string, unknown> = {};
  for (const [key, sub] of Object.entries(properties)) {
    // Optional properties appear about half the time (decided by the rng, so still deterministic).
    const include = required.has(key) || (depth < MAX_DEPTH && rng() < 0.5);
    if (include) out[key] = isSchema(sub) ? generate(sub, root, rng, depth + 1) : sub === false ? undefined : 'value';
  }
  // A required name with no property schema still has to be present.
  for (const key of required) if (!(key in out)) out[key] = words(rng, 1).join('');
  for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
  return out;
}
