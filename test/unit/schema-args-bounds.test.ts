/**
 * The schema-driven argument generator is bounded: hostile or contradictory
 * schemas are refused with `invalid_tool_schema` (the validate-time check)
 * or fall back to their minimal arguments, never a hang or a crash; a seeded
 * fuzzer of random schemas checks that generation always finishes fast and
 * stays within SCHEMA_LIMITS.
 */
import { describe, expect, it } from 'vitest';
import { SCHEMA_LIMITS, argsFromSchema, checkToolSchema, type JsonSchema } from '../../src/model/schema-args.js';
import { mulberry32, pick, type Rng } from '../../src/model/rng.js';
import { WireError } from '../../src/protocol/errors.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { validateTools } from '../../src/pipeline/validate.js';

function refused(fn: () => unknown): WireError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WireError);
    return err as WireError;
  }
  throw new Error('expected invalid_tool_schema, got a value');
}

const manyRequired = (n: number): JsonSchema => {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) properties[`property_number_${i}`] = { type: 'string', minLength: 20 };
  return { type: 'object', properties, required: Object.keys(properties) };
};

const hostile: Array<[string, JsonSchema]> = [
  ['minItems 1e9', { type: 'object', properties: { a: { type: 'array', minItems: 1e9 } }, required: ['a'] }],
  ['minLength 6e8', { type: 'object', properties: { s: { type: 'string', minLength: 6e8 } }, required: ['s'] }],
  ['required self $ref', { type: 'object', properties: { next: { $ref: '#' } }, required: ['next'] }],
  ['required $ref cycle', { $defs: { A: { type: 'object', properties: { b: { $ref: '#/$defs/B' } }, required: ['b'] }, B: { type: 'object', properties: { a: { $ref: '#/$defs/A' } }, required: ['a'] } }, type: 'object', properties: { a: { $ref: '#/$defs/A' } }, required: ['a'] }],
  ['allOf of itself', { type: 'object', allOf: [{ $ref: '#' }] }],
  ['unresolvable $ref', { type: 'object', properties: { x: { $ref: '#/$defs/Missing' } } }],
  ['remote $ref', { type: 'object', properties: { x: { $ref: 'https://example.com/schema.json' } } }],
  ['minItems > maxItems', { type: 'object', properties: { a: { type: 'array', minItems: 3, maxItems: 1 } }, required: ['a'] }],
  ['minLength > maxLength', { type: 'object', properties: { s: { type: 'string', minLength: 9, maxLength: 2 } }, required: ['s'] }],
  ['minimum > maximum', { type: 'object', properties: { n: { type: 'integer', minimum: 10, maximum: 1 } }, required: ['n'] }],
  ['minProperties > maxProperties at the root', { type: 'object', minProperties: 3, maxProperties: 1 }],
  ['contradictory bounds in an allOf', { type: 'object', properties: { a: { allOf: [{ type: 'integer' }, { minimum: 9, maximum: 2 }] } }, required: ['a'] }],
  ['empty enum', { type: 'object', properties: { e: { enum: [] } }, required: ['e'] }],
  ['required false property', { type: 'object', properties: { no: false }, required: ['no'] }],
  ['5,000 required properties', manyRequired(5000)],
  ['nested minItems multiply', { type: 'object', properties: { a: { type: 'array', minItems: 200, items: { type: 'array', minItems: 200, items: { type: 'string', minLength: 50 } } } }, required: ['a'] }],
];

describe('checkToolSchema: unsatisfiable schemas are a client error', () => {
  it.each(hostile)('%s → invalid_tool_schema naming the param, quickly', (_name, schema) => {
    const started = performance.now();
    const err = refused(() => checkToolSchema(schema, 'tools[3].parameters'));
    expect(err.code).toBe('invalid_tool_schema');
    expect(err.status).toBe(400);
    expect(err.param).toBe('tools[3].parameters');
    expect(err.message).toMatch(/^Invalid 'tools\[3\]\.parameters'/);
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it.each(hostile)('%s → the generator (second line) refuses or gives bounded arguments, without hanging', (_name, schema) => {
    const started = performance.now();
    for (let seed = 0; seed < 5; seed++) {
      try {
        expect(JSON.stringify(argsFromSchema(schema, mulberry32(seed))).length).toBeLessThanOrEqual(SCHEMA_LIMITS.maxBytes);
      } catch (err) {
        expect((err as WireError).code).toBe('invalid_tool_schema');
      }
    }
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it.each(hostile.slice(0, 5))('%s is unsatisfiable on the required path: the generator refuses it', (_name, schema) => {
    expect(refused(() => argsFromSchema(schema, mulberry32(1))).code).toBe('invalid_tool_schema');
  });

  it('a contradiction where the value must match is refused by name: the bounds and where they are', () => {
    const cases: Array<[JsonSchema, RegExp]> = [
      [{ type: 'object', properties: { a: { type: 'array', minItems: 3, maxItems: 1 } }, required: ['a'] }, /at '#\/properties\/a': no value found that satisfies it \(here 'minItems' \(3\) is greater than 'maxItems' \(1\)\)/],
      [{ type: 'object', properties: { e: { enum: [] } }, required: ['e'] }, /at '#\/properties\/e': 'enum' is empty/],
      [{ type: 'object', properties: { a: { allOf: [{ type: 'integer' }, { minimum: 9, maximum: 2 }] } }, required: ['a'] }, /at '#\/properties\/a\/allOf\/1': no value found that satisfies it \(here 'minimum' \(9\) is greater than 'maximum' \(2\)\)/],
    ];
    for (const [schema, message] of cases) expect(refused(() => checkToolSchema(schema, 'tools[0].parameters')).message).toMatch(message);
  });

  it('a type that is not a JSON Schema type name is refused, anywhere in the schema, quoting at most 40 characters', () => {
    for (const type of ['float', 'String', '\ud800'.repeat(100_000), 42, ['string', 'date'], { no: 1 }]) {
      const schema: JsonSchema = { type: 'object', properties: { a: { type: 'string' }, deep: { type: 'object', properties: { lat: { type } } } } };
      const err = refused(() => checkToolSchema(schema, 'tools[0].parameters'));
      expect(err.code).toBe('invalid_tool_schema');
      expect(err.message).toMatch(/'type' must be one of string, number, integer, boolean, object, array, null/);
      expect(err.message.length).toBeLessThan(600);
    }
    // Every type name, alone or listed, passes.
    for (const type of ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null', ['string', 'null'], []]) {
      expect(() => checkToolSchema({ type: 'object', properties: { x: { type } } }, 'tools[0].parameters')).not.toThrow();
    }
  });

  it('a keyword whose value must be a schema, a list or a map of them holds one: refused by name, anywhere (outside conformance tester atk98 F1)', () => {
    // Each was taken, constrained nothing, and the model called the tool with arguments no schema could check.
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ properties: 5 }, /'properties' must be an object mapping names to schemas/],
      [{ properties: [] }, /'properties' must be an object mapping names to schemas/],
      [{ properties: { a: 5 } }, /'properties' must be an object mapping names to schemas/],
      [{ patternProperties: { '^a': 'x' } }, /'patternProperties' must be an object mapping names to schemas/],
      [{ $defs: { A: 5 } }, /'\$defs' must be an object mapping names to schemas/],
      [{ items: 5 }, /'items' must be a schema \(an object or a boolean\) or a list of schemas/],
      [{ items: [{ type: 'string' }, 5] }, /'items' must be a schema or a list of schemas/],
      [{ additionalProperties: 'no' }, /'additionalProperties' must be a schema/],
      [{ not: 5 }, /'not' must be a schema/],
      [{ allOf: [] }, /'allOf' must be a non-empty list of schemas/],
      [{ anyOf: [] }, /'anyOf' must be a non-empty list of schemas/],
      [{ oneOf: {} }, /'oneOf' must be a non-empty list of schemas/],
      [{ prefixItems: [1] }, /'prefixItems' must be a non-empty list of schemas/],
    ];
    for (const [keyword, message] of bad) {
      for (const schema of [{ type: 'object', ...keyword }, { type: 'object', properties: { deep: { type: 'object', properties: { x: keyword } } } }]) {
        const err = refused(() => checkToolSchema(schema as JsonSchema, 'tools[0].parameters'));
        expect(err.code).toBe('invalid_tool_schema');
        expect(err.message).toMatch(message);
      }
    }
    // What the meta-schema allows passes: boolean subschemas, a list `items`, draft 7's `dependencies` by names, an
    // array without `items` (any items).
    const fine: JsonSchema[] = [
      { type: 'object', properties: { a: true, b: false }, additionalProperties: false },
      { type: 'object', properties: { t: { type: 'array', items: [{ type: 'string' }, true] } } },
      { type: 'object', properties: { a: { type: 'string' } }, dependencies: { a: ['b'], b: { required: ['a'] } } },
      { type: 'object', properties: { list: { type: 'array' } } },
      { type: 'object', properties: { n: { not: { type: 'null' } } } },
    ];
    for (const schema of fine) expect(() => checkToolSchema(schema, 'tools[0].parameters')).not.toThrow();
  });

  it('the validate stage reports the tool index', () => {
    const tools = [
      { type: 'function' as const, name: 'fine', parameters: { type: 'object', properties: { q: { type: 'string' } } }, strict: null, description: null },
      { type: 'function' as const, name: 'bad', parameters: hostile[0]![1], strict: null, description: null },
    ];
    const err = refused(() => validateTools(tools as never, new RunMetrics(() => 0)));
    expect(err.param).toBe('tools[1].parameters');
  });

  it('accepts large but satisfiable schemas: a big optional part shrinks to the minimal arguments', () => {
    const wide: JsonSchema = {
      type: 'object',
      properties: {
        id: { type: 'string' },
        blobs: { type: 'array', items: { type: 'string', minLength: 10_000 }, maxItems: 100 },
        more: { type: 'array', prefixItems: Array.from({ length: 50 }, () => ({ type: 'string', minLength: 5000 })) },
      },
      required: ['id'],
    };
    expect(() => checkToolSchema(wide, 'tools[0].parameters')).not.toThrow();
    for (let seed = 0; seed < 20; seed++) {
      const args = argsFromSchema(wide, mulberry32(seed));
      expect(typeof args.id).toBe('string');
      expect(JSON.stringify(args).length).toBeLessThanOrEqual(SCHEMA_LIMITS.maxBytes);
    }
  });

  it('accepts 1,000 required properties (under the byte cap)', () => {
    expect(() => checkToolSchema(manyRequired(1000), 'p')).not.toThrow();
    expect(Object.keys(argsFromSchema(manyRequired(1000), mulberry32(2)))).toHaveLength(1000);
  });
});

/** A random schema: types, bounds (some huge, some contradictory), refs (some recursive or dangling), combinators. */
function randomSchema(rng: Rng, depth: number, defs: string[]): JsonSchema {
  const big = () => pick(rng, [0, 1, 3, 50, 300, 5000, 1e6, 1e9]);
  const kind = depth > 4 ? pick(rng, ['string', 'integer', 'ref']) : pick(rng, ['object', 'array', 'string', 'integer', 'number', 'boolean', 'ref', 'anyOf', 'allOf', 'enum']);
  switch (kind) {
    case 'object': {
      const properties: Record<string, unknown> = {};
      const n = pick(rng, [0, 1, 3, 8, 40]);
      for (let i = 0; i < n; i++) properties[`p${i}`] = randomSchema(rng, depth + 1, defs);
      const required = Object.keys(properties).filter(() => rng() < 0.5);
      if (rng() < 0.1) required.push('undeclared');
      return { type: 'object', properties, required };
    }
    case 'array':
      return { type: 'array', items: randomSchema(rng, depth + 1, defs), minItems: rng() < 0.5 ? big() : 0, ...(rng() < 0.3 ? { maxItems: big() } : {}) };
    case 'string':
      return { type: 'string', ...(rng() < 0.5 ? { minLength: big() } : {}), ...(rng() < 0.3 ? { maxLength: big() } : {}), ...(rng() < 0.2 ? { format: pick(rng, ['uuid', 'email', 'date-time']) } : {}) };
    case 'integer':
    case 'number':
      return { type: kind, ...(rng() < 0.5 ? { minimum: big() } : {}), ...(rng() < 0.5 ? { maximum: big() } : {}), ...(rng() < 0.2 ? { multipleOf: pick(rng, [0.5, 3, 7]) } : {}) };
    case 'boolean':
      return { type: 'boolean' };
    case 'enum':
      return { enum: rng() < 0.1 ? [] : ['a', 'b'] };
    case 'ref':
      return { $ref: rng() < 0.1 ? '#/$defs/nope' : `#/$defs/${pick(rng, defs)}` };
    case 'anyOf':
      return { anyOf: [randomSchema(rng, depth + 1, defs), { type: 'null' }] };
    default:
      return { allOf: [randomSchema(rng, depth + 1, defs), { $ref: `#/$defs/${pick(rng, defs)}` }] };
  }
}

describe('argsFromSchema: a required list is read once per schema', () => {
  it('reads required on the first generation only: later ones (every model call) reuse its names', () => {
    let reads = 0;
    const names = ['a', 'b', 'a'];
    const schema: JsonSchema = { type: 'object', properties: { a: { type: 'string' } } };
    Object.defineProperty(schema, 'required', { enumerable: true, get: () => (reads++, names) });
    const first = argsFromSchema(schema, mulberry32(1));
    const readsFirst = reads;
    for (let seed = 2; seed < 6; seed++) expect(Object.keys(argsFromSchema(schema, mulberry32(seed))).sort()).toEqual(['a', 'b']);
    expect(Object.keys(first).sort()).toEqual(['a', 'b']);
    expect(readsFirst).toBeGreaterThan(0);
    expect(reads).toBe(readsFirst);
  });
});

describe('argument generator fuzz', () => {
  it('finishes fast and stays bounded on 400 random schemas, and agrees with the validate-time check', () => {
    const rng = mulberry32(20261130);
    const defs = ['A', 'B', 'C'];
    let accepted = 0;
    let slowest = 0;
    for (let i = 0; i < 400; i++) {
      const $defs: Record<string, unknown> = {};
      for (const d of defs) $defs[d] = randomSchema(rng, 2, defs);
      const schema: JsonSchema = { ...randomSchema(rng, 0, defs), type: 'object', $defs };
      const started = performance.now();
      let ok = true;
      try {
        checkToolSchema(schema, 'tools[0].parameters');
      } catch (err) {
        expect(err, JSON.stringify(schema).slice(0, 300)).toBeInstanceOf(WireError);
        expect((err as WireError).code).toBe('invalid_tool_schema');
        ok = false;
      }
      for (let seed = 0; seed < 3; seed++) {
        try {
          const args = argsFromSchema(schema, mulberry32(seed));
          expect(JSON.stringify(args).length).toBeLessThanOrEqual(SCHEMA_LIMITS.maxBytes + 1024);
        } catch (err) {
          expect((err as WireError).code).toBe('invalid_tool_schema');
          // A schema the check accepted must always generate.
          expect(ok, `accepted but failed to generate: ${JSON.stringify(schema).slice(0, 300)}`).toBe(false);
        }
      }
      if (ok) accepted++;
      slowest = Math.max(slowest, performance.now() - started);
    }
    // The fuzzer exercises both outcomes.
    expect(accepted).toBeGreaterThan(40);
    expect(accepted).toBeLessThan(360);
    expect(slowest).toBeLessThan(3000);
  });
});
