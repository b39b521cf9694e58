/**
 * What the simulated model sends always satisfies the client's JSON Schema,
 * and a schema nothing satisfies is refused before a run. Ajv (2020-12, with
 * ajv-formats' full formats, as clients validate) is the oracle throughout:
 *
 * - the server's own check (model/schema-valid.ts) agrees with Ajv on seeded
 *   random schemas and values;
 * - satisfiable schemas that lean on minProperties, dependentRequired,
 *   propertyNames, uniqueItems, contains, not, oneOf, if/then/else,
 *   multipleOf and exclusive bounds are accepted, and the arguments made for
 *   them under many seeds validate;
 * - unsatisfiable ones are refused (`invalid_tool_schema`, and for a
 *   `text.format` schema `invalid_json_schema`), as are schemas JSON Schema
 *   itself calls invalid (`multipleOf: 0`, a pattern that does not compile);
 * - on seeded random schemas with all of the above, every accepted schema's
 *   generated values validate (and most schemas are accepted, so the
 *   property is not vacuous).
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { describe, expect, it } from 'vitest';
import { argsFromSchema, checkToolSchema, fitsSchema, type JsonSchema, valueFromSchema } from '../../src/model/schema-args.js';
import { SchemaCheck } from '../../src/model/schema-valid.js';
import { mulberry32, pick, type Rng } from '../../src/model/rng.js';
import { WireError } from '../../src/protocol/errors.js';

const ajv = new Ajv2020({ strict: false, logger: false, addUsedSchema: false });
for (const [name, format] of Object.entries(fullFormats)) ajv.addFormat(name, format);

function compile(schema: JsonSchema): ValidateFunction | undefined {
  try {
    const v = ajv.compile(schema);
    ajv.removeSchema(schema);
    return v;
  } catch {
    return undefined;
  }
}

function refusal(fn: () => unknown): WireError | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof WireError) return err;
    throw err;
  }
  return undefined;
}

const obj = (properties: Record<string, unknown>, extra: JsonSchema = {}): JsonSchema => ({ type: 'object', properties, required: Object.keys(properties), ...extra });

/** Satisfiable, each leaning on a keyword the generator once ignored (the outside attack's list and more). */
const satisfiable: Array<[string, JsonSchema]> = [
  // Contradictory bounds are valid JSON Schema; where the value need not match them, nothing is refused.
  ['contradictory bounds on an optional property', { type: 'object', properties: { a: { type: 'array', minItems: 3, maxItems: 1 }, b: { type: 'string' } } }],
  ['contradictory bounds in the first anyOf branch', obj({ a: { anyOf: [{ type: 'string', minLength: 5, maxLength: 2 }, { type: 'integer' }] } })],
  ['contradictory bounds under not', obj({ a: { type: 'integer', not: { minimum: 5, maximum: 1 } } })],
  ['numeric bounds on a string (they do not apply)', obj({ a: { type: 'string', minimum: 5, maximum: 1 } })],
  ['a contradictory if', obj({ a: { type: 'integer', if: { minimum: 10, maximum: 1 }, then: false } })],
  ['a large enum with a bound beside it only its last value meets', obj({ a: { enum: Array.from({ length: 20_000 }, (_, i) => i), minimum: 19_999 } })],
  ['an enum with a pattern beside it', obj({ a: { enum: ['aa', 'bb', 'cc1'], pattern: '\\d$' } })],
  ['an enum with a not beside it', obj({ a: { enum: ['a', 'b', 'c'], not: { const: 'a' } } })],
  ['ipv6 in 2 characters (::)', obj({ a: { type: 'string', format: 'ipv6', maxLength: 2 } })],
  ['an email in 5 characters', obj({ a: { type: 'string', format: 'email', maxLength: 5 } })],
  ['an email of 5 to 12 characters', obj({ a: { type: 'string', format: 'email', minLength: 5, maxLength: 12 } })],
  ['ipv6 of 2 to 6 characters', obj({ a: { type: 'string', format: 'ipv6', minLength: 2, maxLength: 6 } })],
  ['minProperties with no properties', { type: 'object', minProperties: 3 }],
  ['minProperties above the declared', { type: 'object', properties: { a: { type: 'string' } }, minProperties: 3 }],
  ['dependentRequired', obj({ a: { type: 'object', properties: { k: { type: 'string' }, m: { type: 'integer' } }, required: ['k'], dependentRequired: { k: ['m'] } } })],
  ['draft-07 dependencies', obj({ a: { type: 'object', properties: { k: { type: 'string' }, m: { type: 'integer' } }, required: ['k'], dependencies: { k: ['m'] } } })],
  ['dependentSchemas', obj({ a: { type: 'object', properties: { k: { type: 'string' } }, required: ['k'], dependentSchemas: { k: { properties: { n: { type: 'boolean' } }, required: ['n'] } } } })],
  ['propertyNames with minProperties', obj({ a: { type: 'object', propertyNames: { pattern: '^z' }, minProperties: 2 } })],
  // Names no pattern matches satisfy minProperties when no pattern's value can be made (outside attack, atk34).
  ['minProperties where every patternProperties value is unsatisfiable', obj({ a: { type: 'object', patternProperties: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`^q${i}$`, { type: 'string', minLength: 5, maxLength: 1 }])), minProperties: 3 } })],
  ['patternProperties with minProperties', obj({ a: { type: 'object', patternProperties: { '^x_[0-9]+$': { type: 'integer', minimum: 3 } }, additionalProperties: false, minProperties: 2 } })],
  ['additionalProperties schema for a required name', { type: 'object', required: ['q'], additionalProperties: { type: 'integer', minimum: 10 } }],
  ['uniqueItems over an enum', obj({ a: { type: 'array', uniqueItems: true, minItems: 3, items: { enum: ['x', 'y', 'z'] } } })],
  ['uniqueItems over small integers', obj({ a: { type: 'array', uniqueItems: true, minItems: 5, items: { type: 'integer', minimum: 0, maximum: 6 } } })],
  ['uniqueItems over booleans', obj({ a: { type: 'array', uniqueItems: true, minItems: 2, items: { type: 'boolean' } } })],
  ['contains', obj({ a: { type: 'array', items: { type: 'integer' }, contains: { minimum: 100 } } })],
  ['minContains', obj({ a: { type: 'array', contains: { type: 'string', const: 'k' }, minContains: 2 } })],
  ['not const', obj({ a: { type: 'string', not: { const: 'the' } } })],
  ['not of a type', obj({ a: { not: { type: 'string' } } })],
  ['oneOf with overlapping branches', obj({ a: { oneOf: [{ type: 'integer' }, { type: 'number', minimum: 0 }] } })],
  ['oneOf of two shapes', obj({ a: { oneOf: [{ type: 'object', properties: { kind: { const: 'x' } }, required: ['kind'] }, { type: 'object', properties: { kind: { const: 'y' }, n: { type: 'integer' } }, required: ['kind', 'n'] }] } })],
  ['if/then/else', obj({ a: { type: 'object', properties: { k: { type: 'string' } }, required: ['k'], if: { properties: { k: { const: 'no such' } } }, then: { required: ['zz'] }, else: { required: ['yy'] } } })],
  ['if that holds', obj({ a: { type: 'integer', if: { minimum: 0 }, then: { multipleOf: 5 }, else: { maximum: -10 } } })],
  ['integer exclusive bounds', obj({ a: { type: 'integer', exclusiveMinimum: 1, exclusiveMaximum: 3 } })],
  ['number exclusive bounds', obj({ a: { type: 'number', exclusiveMinimum: 1, exclusiveMaximum: 1.5 } })],
  ['number narrow range', obj({ a: { type: 'number', minimum: 1.25, maximum: 1.26 } })],
  ['multipleOf in a range', obj({ a: { type: 'integer', minimum: 10, maximum: 20, multipleOf: 7 } })],
  ['fractional multipleOf in a range', obj({ a: { type: 'number', minimum: 1, maximum: 1.5, multipleOf: 0.7 } })],
  ['negative range', obj({ a: { type: 'integer', maximum: -100 } })],
  ['type list', obj({ a: { type: ['null', 'integer'], minimum: 4 } })],
  ['enum with a type', obj({ a: { type: 'string', enum: [1, 'two', 3] } })],
  ['default that does not fit', obj({ a: { type: 'integer', minimum: 5, default: 1 } })],
  ['allOf narrowing', obj({ a: { allOf: [{ type: 'integer', minimum: 3 }, { maximum: 4 }, { not: { const: 3 } }] } })],
  ['allOf of two property sets', { allOf: [obj({ a: { type: 'string' } }), obj({ b: { type: 'integer' } })], type: 'object' }],
  ['$ref with a sibling', { $defs: { n: { type: 'integer' } }, ...obj({ a: { $ref: '#/$defs/n', minimum: 50 } }) }],
  ['unevaluatedProperties false', { type: 'object', allOf: [obj({ a: { type: 'string' } })], unevaluatedProperties: false }],
  ['pattern within length bounds', obj({ a: { type: 'string', pattern: '^[a-c]+$', minLength: 4, maxLength: 6 } })],
  ['two patterns that agree', obj({ a: { type: 'string', allOf: [{ pattern: '^[a-z]+$' }, { pattern: '^[a-f]' }] } })],
  ['format with length bounds', obj({ a: { type: 'string', format: 'email', maxLength: 40 } })],
  ['an $anchor reference (not a pointer)', { type: 'object', properties: { a: { $ref: '#foo' } }, required: ['a'], foo: { type: 'integer' }, $defs: { s: { $anchor: 'foo', type: 'string' } } }],
  ['an empty pointer segment', { type: 'object', properties: { a: { $ref: '#/$defs/' } }, required: ['a'], $defs: { '': { type: 'integer' } } }],
  ['a huge exclusive minimum and no type', obj({ a: { exclusiveMinimum: 1e20, not: { type: ['string', 'null', 'boolean', 'object', 'array'] } } })],
  ['the widest number range', obj({ a: { type: 'number', exclusiveMinimum: -1.7976931348623157e308, exclusiveMaximum: 1.7976931348623157e308 } })],
  ['not of not', obj({ a: { not: { not: { type: 'integer', minimum: 3, maximum: 3 } } } })],
  ['format uuid with an upper-case pattern', obj({ a: { type: 'string', format: 'uuid', pattern: '^[A-F0-9-]+$' } })],
  ['startsWith and endsWith (zod)', obj({ a: { type: 'string', allOf: [{ pattern: '^ab.*' }, { pattern: '.*z$' }] } })],
  ['contains with unevaluatedItems false', obj({ a: { type: 'array', contains: { type: 'string' }, unevaluatedItems: false, minItems: 1 } })],
  ['formats byte, json-pointer, iso-time', obj({ a: { type: 'string', format: 'byte' }, b: { type: 'string', format: 'json-pointer' }, c: { type: 'string', format: 'iso-time' } })],
  ['600 patternProperties', { type: 'object', required: ['k0'], patternProperties: Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`^p${i}$`, {}])) }],
  ['a recursive tree', { $defs: { node: { type: 'object', properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['v'] } }, ...obj({ root: { $ref: '#/$defs/node' } }) }],
];

/** Unsatisfiable: no value of any size satisfies them. */
/** The only object it allows has a and b, and the `not` bars it: `anyOf`'s two branches together evaluate both. */
const barredByUnevaluated: JsonSchema = {
  type: 'object',
  properties: { a: { const: 1 }, b: { const: 1 } },
  required: ['a', 'b'],
  additionalProperties: false,
  not: { anyOf: [{ properties: { a: true } }, { properties: { b: true } }], unevaluatedProperties: false },
};

const unsatisfiable: Array<[string, JsonSchema]> = [
  // The walk for `unevaluated*` skipped values (`enum`, `default`, …) by key even where the key was a property's name
  // (outside attack): anyOf stopped at its first branch, and the not let the only value through.
  ['unevaluatedProperties under a property named default', obj({ default: barredByUnevaluated })],
  ['unevaluatedProperties in $defs/enum', { type: 'object', properties: { x: { $ref: '#/$defs/enum' } }, required: ['x'], $defs: { enum: barredByUnevaluated } }],
  ['unevaluatedItems under a property named const', obj({ const: { type: 'array', prefixItems: [{ const: 1 }, { const: 2 }], items: false, minItems: 2, not: { anyOf: [{ prefixItems: [true] }, { prefixItems: [true, true] }], unevaluatedItems: false } } })],
  ['integer in [1.5, 1.6]', obj({ a: { type: 'integer', minimum: 1.5, maximum: 1.6 } })],
  ['integer in (1, 2)', obj({ a: { type: 'integer', exclusiveMinimum: 1, exclusiveMaximum: 2 } })],
  ['number in (1, 1)', obj({ a: { type: 'number', exclusiveMinimum: 1, maximum: 1 } })],
  ['multipleOf 7 in [1, 6]', obj({ a: { type: 'integer', minimum: 1, maximum: 6, multipleOf: 7 } })],
  ['multipleOf 0.7 in [1, 1.3]', obj({ a: { type: 'number', minimum: 1, maximum: 1.3, multipleOf: 0.7 } })],
  ['not {}', obj({ a: { not: {} } })],
  ['string and not string', obj({ a: { type: 'string', not: { type: 'string' } } })],
  ['string enum of numbers', obj({ a: { type: 'string', enum: [1, 2] } })],
  ['string const 5', obj({ a: { type: 'string', const: 5 } })],
  ['maxProperties below required', obj({ a: { type: 'string' }, b: { type: 'string' } }, { maxProperties: 1 })],
  ['oneOf of two identical schemas', obj({ a: { oneOf: [{ type: 'string' }, { type: 'string' }] } })],
  ['required name barred by additionalProperties false', { type: 'object', properties: {}, required: ['a'], additionalProperties: false }],
  ['uniqueItems with too few values', obj({ a: { type: 'array', uniqueItems: true, minItems: 3, items: { enum: ['x', 'y'] } } })],
  ['uniqueItems of booleans, 3 items', obj({ a: { type: 'array', uniqueItems: true, minItems: 3, items: { type: 'boolean' } } })],
  ['pattern with a contradicting minLength', obj({ a: { type: 'string', pattern: '^x$', minLength: 3 } })],
  ['uuid with minLength 40', obj({ a: { type: 'string', format: 'uuid', minLength: 40 } })],
  ['date-time with maxLength 2', obj({ a: { type: 'string', format: 'date-time', maxLength: 2 } })],
  ['propertyNames against a required name', obj({ abc: { type: 'string' } }, { propertyNames: { maxLength: 2 } })],
  ['contains nothing can match', obj({ a: { type: 'array', items: { type: 'string' }, contains: { type: 'integer' } } })],
  ['maxContains 0 with minContains', obj({ a: { type: 'array', contains: { type: 'string' }, minContains: 2, maxContains: 1 } })],
  ['allOf disagreeing on const', obj({ a: { allOf: [{ const: 1 }, { const: 2 }] } })],
  ['if/then contradiction', obj({ a: { type: 'integer', if: { minimum: -1e9 }, then: { maximum: -1e10 }, else: false } })],
  ['int32 above its range', obj({ a: { type: 'integer', format: 'int32', minimum: 2147483648 } })],
  ['a multiple of 1 at 1e21 (Ajv reads none)', obj({ a: { type: 'integer', multipleOf: 1, minimum: 1e21 } })],
  ['dependentRequired barred', { type: 'object', properties: { k: { type: 'string' } }, required: ['k'], dependentRequired: { k: ['m'] }, additionalProperties: false }],
];

/** Not JSON Schema at all (the meta-schema refuses them; Ajv will not compile them). */
const invalid: Array<[string, JsonSchema]> = [
  ['multipleOf 0', obj({ a: { type: 'number', multipleOf: 0 } })],
  ['negative multipleOf', obj({ a: { type: 'number', multipleOf: -2 } })],
  ['a pattern that does not compile', obj({ a: { type: 'string', pattern: '(' } })],
  ['a patternProperties name that does not compile', { type: 'object', patternProperties: { '[': { type: 'string' } } }],
  ['a fractional minLength', obj({ a: { type: 'string', minLength: 1.5 } })],
  ['a negative maxItems', obj({ a: { type: 'array', maxItems: -1 } })],
  ['enum not a list', obj({ a: { enum: 'abc' } })],
  ['required not a list of names', { type: 'object', required: [1] }],
  ['an empty enum, even in an anyOf branch (draft 4 refuses it; Ajv too)', obj({ a: { anyOf: [{ enum: [] }, { type: 'integer' }] } })],
  ['an empty enum in a draft-07 dependencies schema', { type: 'object', properties: { a: { type: 'integer' } }, dependencies: { a: { enum: [] } } }],
];

describe('satisfiable schemas: accepted, and every generated value validates', () => {
  it.each(satisfiable)('%s', (_name, schema) => {
    const validate = compile(schema);
    expect(validate, 'the oracle compiles it').toBeDefined();
    expect(refusal(() => checkToolSchema(schema, 'tools[0].parameters'))).toBeUndefined();
    expect(refusal(() => checkToolSchema(schema, 'text.format.schema', undefined, 'invalid_json_schema'))).toBeUndefined();
    for (let seed = 0; seed < 25; seed++) {
      const args = argsFromSchema(schema, mulberry32(seed));
      expect(validate!(args), `seed ${seed}: ${JSON.stringify(args)} ${JSON.stringify(validate!.errors)}`).toBe(true);
    }
  });
});

describe('a $ref to itself beside other keywords (outside fuzzer: a 500 at the model call)', () => {
  it('is folded within the depth limit: the schema is checked and its arguments made, never a stack overflow', () => {
    const schema: JsonSchema = {
      $defs: { r: { type: 'number', maximum: 3, oneOf: [{ type: 'null' }, { type: 'integer' }], $ref: '#/$defs/r' } },
      type: 'object',
      properties: { v: { type: 'array', items: { type: 'object', properties: { a: { $ref: '#/$defs/r' } } }, minItems: 2 } },
      required: ['v'],
    };
    const validate = compile(schema)!;
    expect(refusal(() => checkToolSchema(schema, 'tools[0].parameters'))).toBeUndefined();
    for (let seed = 0; seed < 10; seed++) {
      const args = argsFromSchema(schema, mulberry32(seed));
      expect(validate(args), JSON.stringify(args)).toBe(true);
    }
    const unsatisfiable: JsonSchema = { $defs: { r: { type: 'string', $ref: '#/$defs/r', minLength: 1 } }, ...obj({ a: { $ref: '#/$defs/r' } }) };
    expect(refusal(() => checkToolSchema(unsatisfiable, 'tools[0].parameters'))?.code).toBe('invalid_tool_schema');
  });
});

describe("draft-04's boolean exclusive bounds (Ajv 2020 will not compile them)", () => {
  it('are read as draft 4 means them', () => {
    const schema = obj({ a: { type: 'integer', minimum: 1, exclusiveMinimum: true, maximum: 3, exclusiveMaximum: true } });
    expect(refusal(() => checkToolSchema(schema, 'tools[0].parameters'))).toBeUndefined();
    for (let seed = 0; seed < 10; seed++) expect(argsFromSchema(schema, mulberry32(seed))).toEqual({ a: 2 });
    expect(fitsSchema({ a: 1 }, schema)).toBe(false);
    expect(fitsSchema({ a: 3 }, schema)).toBe(false);
  });
});

describe('unsatisfiable schemas: refused before a run', () => {
  it.each(unsatisfiable)('%s → invalid_tool_schema / invalid_json_schema', (_name, schema) => {
    const tool = refusal(() => checkToolSchema(schema, 'tools[2].parameters'));
    expect(tool?.code).toBe('invalid_tool_schema');
    expect(tool?.status).toBe(400);
    expect(tool?.param).toBe('tools[2].parameters');
    const format = refusal(() => checkToolSchema(schema, 'text.format.schema', undefined, 'invalid_json_schema'));
    expect(format?.code).toBe('invalid_json_schema');
    expect(format?.param).toBe('text.format.schema');
  });
});

describe('schemas JSON Schema calls invalid: refused, naming the keyword', () => {
  it.each(invalid)('%s', (_name, schema) => {
    expect(compile(schema), 'the oracle refuses it too').toBeUndefined();
    const err = refusal(() => checkToolSchema(schema, 'tools[0].parameters'));
    expect(err?.code).toBe('invalid_tool_schema');
    expect(err?.message).toMatch(/multipleOf|pattern|minLength|maxItems|enum|required/);
  });
});

describe('what the check does not follow is refused, not misread', () => {
  it.each([
    ['a nested $id (a new base URI)', { $id: 'http://e/root', type: 'object', properties: { a: { $id: 'http://e/sub', $defs: { t: { type: 'integer' } }, allOf: [{ $ref: '#/$defs/t' }] } }, required: ['a'], $defs: { t: { type: 'string' } } }],
    ['$dynamicRef', { type: 'object', properties: { a: { $dynamicRef: '#/$defs/f' } }, required: ['a'], $defs: { f: false } }],
    ['$recursiveRef', { type: 'object', properties: { a: { $recursiveRef: '#' } } }],
  ] as Array<[string, JsonSchema]>)('%s', (_name, schema) => {
    expect(refusal(() => checkToolSchema(schema, 'tools[0].parameters'))?.message).toMatch(/not supported/);
  });
});

/** Accepted with arguments Ajv takes, or refused `invalid_tool_schema`, within 3 s (a search's budgets, not the loop, end it). */
function answeredWithinBound(schema: JsonSchema): void {
  const started = performance.now();
  const err = refusal(() => checkToolSchema(schema, 'tools[0].parameters'));
  if (err === undefined) expect(compile(schema)!(argsFromSchema(schema, mulberry32(1)))).toBe(true);
  else expect(err.code).toBe('invalid_tool_schema');
  expect(performance.now() - started).toBeLessThan(3000);
}

describe('patterns cost a bounded time per search (outside attack: 41 KB of patternProperties held the loop for minutes)', () => {
  it.each([
    ['an exponential pattern against a required name', { type: 'object', required: [`${'a'.repeat(28)}!`], patternProperties: { '^(a+)+$': { type: 'string' } } }],
    ['an alternation with no quantifier against a required name', { type: 'object', required: ['a'.repeat(30)], patternProperties: { [`${'(a|a)'.repeat(26)}b`]: { type: 'string' } } }],
    ['2,000 exponential patterns × 50 names', { type: 'object', required: Array.from({ length: 50 }, (_, i) => `k${i}`), patternProperties: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`^p${i}(x+x+)+y$`, {}])) }],
  ] as Array<[string, JsonSchema]>)('%s: answered (accepted with valid arguments, or refused) within a bound', (_name, schema) => {
    answeredWithinBound(schema);
  });
});

/** N properties, the first of them `first` (contradictory bounds), in an anyOf's first branch, under 256 required items. */
const wideItems = (n: number, first: unknown = { minLength: 5, maxLength: 1 }): JsonSchema => ({
  type: 'object',
  properties: { x: { type: 'array', minItems: 256, items: { $ref: '#/$defs/b' } } },
  required: ['x'],
  $defs: { b: { type: 'object', properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, i === 0 ? first : {}])), anyOf: [{ required: ['p0'] }, { minProperties: 0 }] } },
});

describe('a search copies and scans a bounded number of keys (outside attack: 9,000 properties reached 256 times held the loop 6.5 s)', () => {
  it.each([
    ['9,000 properties under 256 items', wideItems(9000)],
    ['9,000 properties, the first false', wideItems(9000, false)],
    ['5,000 dependentSchemas scanned for each of 5,000 names', { type: 'object', minProperties: 5000, dependentSchemas: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`d${i}`, { properties: { [`q${i}`]: {} } }])) }],
  ] as Array<[string, JsonSchema]>)('%s: answered within a bound', (_name, schema) => {
    answeredWithinBound(schema);
  });

  it('a schema that is satisfiable within the budget is still accepted: 300 properties under 64 items', () => {
    const schema = wideItems(300);
    (schema.properties as { x: JsonSchema }).x.minItems = 64;
    expect(refusal(() => checkToolSchema(schema, 'tools[0].parameters'))).toBeUndefined();
    expect(compile(schema)!(argsFromSchema(schema, mulberry32(2)))).toBe(true);
  });
});

describe('a pattern that backtracks exponentially is never run unguarded', () => {
  it('a value the generator did not make from the pattern is tested under a time budget', () => {
    // The first pattern makes a long run of a's; the second backtracks exponentially on it (no trailing b).
    const schema = obj({ a: { type: 'string', allOf: [{ pattern: '^a{40}$' }, { pattern: '^(a|a)*b$' }] } });
    const started = performance.now();
    const err = refusal(() => checkToolSchema(schema, 'tools[0].parameters'));
    expect(err?.code).toBe('invalid_tool_schema');
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

/** Random schemas over the keywords the generator searches with, as the fuzzer of schema-args-bounds does for size. */
function randomSchema(rng: Rng, depth: number): JsonSchema {
  const leaf = depth >= 3;
  const kind = pick(rng, leaf ? ['integer', 'number', 'string', 'enum', 'boolean'] : ['object', 'object', 'array', 'integer', 'number', 'string', 'enum', 'oneOf', 'not', 'if', 'allOf']);
  const maybe = (p: number, x: JsonSchema): JsonSchema => (rng() < p ? x : {});
  const small = () => Math.floor(rng() * 6);
  switch (kind) {
    case 'object': {
      const properties: Record<string, unknown> = {};
      const n = small();
      for (let i = 0; i < n; i++) properties[`p${i}`] = randomSchema(rng, depth + 1);
      const names = Object.keys(properties);
      return {
        type: 'object',
        properties,
        required: names.filter(() => rng() < 0.5),
        ...maybe(0.3, { minProperties: small() }),
        ...maybe(0.2, { maxProperties: small() }),
        ...maybe(0.3, { additionalProperties: rng() < 0.5 ? false : { type: 'integer' } }),
        ...maybe(0.2, { propertyNames: { pattern: pick(rng, ['^p', '^[a-z0-9_]+$', '^q']) } }),
        ...maybe(0.2, names.length > 1 ? { dependentRequired: { [names[0]!]: [names[1]!] } } : {}),
        ...maybe(0.15, { patternProperties: { '^x[0-9]$': { type: 'string', maxLength: 3 } } }),
      };
    }
    case 'array':
      return {
        type: 'array',
        items: randomSchema(rng, depth + 1),
        ...maybe(0.5, { minItems: small() }),
        ...maybe(0.3, { maxItems: small() }),
        ...maybe(0.3, { uniqueItems: true }),
        ...maybe(0.2, { contains: randomSchema(rng, depth + 1) }),
      };
    case 'integer':
    case 'number': {
      const lo = Math.floor(rng() * 20) - 5 + (kind === 'number' && rng() < 0.5 ? 0.5 : 0);
      return {
        type: kind,
        ...maybe(0.4, { minimum: lo }),
        ...maybe(0.3, { exclusiveMinimum: lo - 1 }),
        ...maybe(0.4, { maximum: lo + small() }),
        ...maybe(0.2, { exclusiveMaximum: lo + small() }),
        ...maybe(0.3, { multipleOf: pick(rng, [0.5, 2, 3, 7, 0.1]) }),
      };
    }
    case 'string':
      return {
        type: 'string',
        ...maybe(0.3, { minLength: small() }),
        ...maybe(0.3, { maxLength: small() + 1 }),
        ...maybe(0.2, { pattern: pick(rng, ['^[a-f]+$', '^x', 'z$', '^[0-9]{2,4}$']) }),
        ...maybe(0.15, { format: pick(rng, ['email', 'uuid', 'date', 'ipv4']) }),
      };
    case 'enum':
      return { enum: pick(rng, [['a', 'b'], [1, 2, 3], ['a', 1, null], [true]]), ...maybe(0.3, { type: pick(rng, ['string', 'integer']) }) };
    case 'boolean':
      return { type: 'boolean', ...maybe(0.2, { const: false }) };
    case 'oneOf':
      return { oneOf: [randomSchema(rng, depth + 1), randomSchema(rng, depth + 1)] };
    case 'not':
      return { ...randomSchema(rng, depth + 1), not: randomSchema(rng, depth + 2) };
    case 'if':
      return { if: randomSchema(rng, depth + 1), then: randomSchema(rng, depth + 1), else: randomSchema(rng, depth + 1) };
    default:
      return { allOf: [randomSchema(rng, depth + 1), randomSchema(rng, depth + 1)] };
  }
}

describe('random schemas: an accepted schema gets only values that validate', () => {
  it('holds over 600 seeded schemas, most of them accepted', () => {
    let accepted = 0;
    let refused = 0;
    for (let seed = 1; seed <= 600; seed++) {
      const rng = mulberry32(seed);
      const schema: JsonSchema = { type: 'object', properties: { a: randomSchema(rng, 0), b: randomSchema(rng, 1) }, required: ['a'] };
      const validate = compile(schema);
      if (!validate) continue;
      const err = refusal(() => checkToolSchema(schema, 'tools[0].parameters'));
      if (err) {
        expect(err.code).toBe('invalid_tool_schema');
        refused++;
        continue;
      }
      accepted++;
      for (let s = 0; s < 4; s++) {
        const args = argsFromSchema(schema, mulberry32(seed * 31 + s));
        expect(validate(args), `schema seed ${seed}, args seed ${s}: ${JSON.stringify(schema)} → ${JSON.stringify(args)}`).toBe(true);
      }
      const value = valueFromSchema(schema, mulberry32(seed));
      expect(validate(value)).toBe(true);
    }
    expect(accepted).toBeGreaterThan(300);
    expect(refused).toBeGreaterThan(0);
  });
});

/** Random JSON values near a schema's shape: generated ones and mutations of them. */
function mutate(rng: Rng, v: unknown, depth = 0): unknown {
  if (depth > 4) return v;
  const r = rng();
  if (r < 0.1) return pick(rng, [null, 0, -3, 2.5, 'x', '', true, [], {}, 'aaaa', 7, 100]);
  if (Array.isArray(v)) {
    const out = v.map((x) => mutate(rng, x, depth + 1));
    if (rng() < 0.2) out.push(out[0] ?? 1);
    if (rng() < 0.2) out.pop();
    return out;
  }
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (rng() > 0.1) out[k] = mutate(rng, x, depth + 1);
    if (rng() < 0.2) out[pick(rng, ['p0', 'x1', 'zz', 'q'])] = pick(rng, [1, 'ab', null]);
    return out;
  }
  if (typeof v === 'number' && r < 0.3) return v + pick(rng, [1, -1, 0.5, 7]);
  if (typeof v === 'string' && r < 0.3) return v + pick(rng, ['a', 'b', '0', '@']);
  return v;
}

describe('the server check agrees with Ajv', () => {
  it('on generated values and their mutations over 600 seeded schemas', () => {
    let compared = 0;
    let invalidSeen = 0;
    for (let seed = 1; seed <= 600; seed++) {
      const rng = mulberry32(seed + 10_000);
      const schema: JsonSchema = { type: 'object', properties: { a: randomSchema(rng, 0) }, required: ['a'] };
      const validate = compile(schema);
      if (!validate) continue;
      let base: unknown;
      try {
        base = argsFromSchema(schema, mulberry32(seed));
      } catch {
        base = { a: pick(rng, [1, 'x', null, [1, 2], { p0: 1 }]) };
      }
      for (let m = 0; m < 6; m++) {
        const value = m === 0 ? base : mutate(mulberry32(seed * 7 + m), base);
        const ours = new SchemaCheck(schema).valid(value);
        expect(ours, `${JSON.stringify(schema)} on ${JSON.stringify(value)}`).toBe(validate(value));
        expect(fitsSchema(value, schema)).toBe(ours);
        compared++;
        if (!ours) invalidSeen++;
      }
    }
    expect(compared).toBeGreaterThan(2000);
    expect(invalidSeen).toBeGreaterThan(300);
  });
});
