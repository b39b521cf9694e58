/**
 * Over a real socket with the official `openai` SDK: the simulated model's
 * function-call arguments and `text.format: json_schema` output validate
 * against the schema the client sent (Ajv 2020-12 with ajv-formats, as a
 * strict client checks them), and a schema no value satisfies is refused
 * with 400 before any run: `invalid_tool_schema` for a tool's parameters,
 * `invalid_json_schema` for a text.format schema.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

const ajv = new Ajv2020({ strict: false, logger: false, addUsedSchema: false });
for (const [name, format] of Object.entries(fullFormats)) ajv.addFormat(name, format);

type Schema = Record<string, unknown>;
const obj = (properties: Schema, extra: Schema = {}): Schema => ({ type: 'object', properties, required: Object.keys(properties), ...extra });

/** Satisfiable schemas the generator once answered with values that did not validate. */
const satisfiable: Array<[string, Schema]> = [
  ['minProperties', { type: 'object', minProperties: 3 }],
  ['dependentRequired', obj({ a: { type: 'object', properties: { k: { type: 'string' }, m: { type: 'integer' } }, required: ['k'], dependentRequired: { k: ['m'] } } })],
  ['propertyNames with minProperties', obj({ a: { type: 'object', propertyNames: { pattern: '^z' }, minProperties: 2 } })],
  ['oneOf, not and uniqueItems together', obj({ a: { oneOf: [{ type: 'integer' }, { type: 'number', minimum: 0 }] }, b: { type: 'string', not: { const: 'the' } }, c: { type: 'array', uniqueItems: true, minItems: 3, items: { enum: ['x', 'y', 'z'] } } })],
];

/** Unsatisfiable schemas (and one JSON Schema calls invalid) that were accepted. */
const unsatisfiable: Array<[string, Schema]> = [
  ['integer in [1.5, 1.6]', obj({ a: { type: 'integer', minimum: 1.5, maximum: 1.6 } })],
  ['not {}', obj({ a: { not: {} } })],
  ['string enum of numbers', obj({ a: { type: 'string', enum: [1, 2] } })],
  ['maxProperties below required', obj({ a: { type: 'string' }, b: { type: 'string' } }, { maxProperties: 1 })],
  ['multipleOf 0', obj({ a: { type: 'number', multipleOf: 0 } })],
];

describe('generated output satisfies the schema (openai SDK, HTTP)', () => {
  it.each(satisfiable)('%s: the forced call’s arguments validate', async (_name, parameters) => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'test', maxRetries: 0 });
    const validate = ajv.compile(parameters);
    for (const input of ['call the tool', 'call it with other words', 'once more']) {
      const res = await client.responses.create({ model: 'sim-model', input, tools: [{ type: 'function', name: 'f', parameters, strict: false }], tool_choice: 'required', store: false });
      const call = res.output.find((o) => o.type === 'function_call');
      expect(call?.type).toBe('function_call');
      const args: unknown = JSON.parse(call!.type === 'function_call' ? call!.arguments : 'null');
      expect(validate(args), `${JSON.stringify(args)} ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });

  it.each(satisfiable)('%s: the text.format json_schema answer validates', async (_name, schema) => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'test', maxRetries: 0 });
    const res = await client.responses.create({ model: 'sim-model', input: 'answer in the format', text: { format: { type: 'json_schema', name: 'out', schema, strict: false } }, store: false });
    const validate = ajv.compile(schema);
    const value: unknown = JSON.parse(res.output_text);
    expect(validate(value), `${res.output_text} ${JSON.stringify(validate.errors)}`).toBe(true);
  });
});

describe('a schema nothing satisfies is refused before a run', () => {
  it.each(unsatisfiable)('%s: tools → 400 invalid_tool_schema, text.format → 400 invalid_json_schema', async (_name, schema) => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'test', maxRetries: 0 });
    const tool = await client.responses
      .create({ model: 'sim-model', input: 'call it', tools: [{ type: 'function', name: 'f', parameters: schema, strict: false }], tool_choice: 'required', store: false })
      .then(() => undefined, (err: unknown) => err);
    expect(tool).toBeInstanceOf(OpenAI.BadRequestError);
    expect((tool as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('invalid_tool_schema');
    expect((tool as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tools[0].parameters');
    const format = await client.responses
      .create({ model: 'sim-model', input: 'answer', text: { format: { type: 'json_schema', name: 'out', schema, strict: false } }, store: false })
      .then(() => undefined, (err: unknown) => err);
    expect(format).toBeInstanceOf(OpenAI.BadRequestError);
    expect((format as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('invalid_json_schema');
    expect((format as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('text.format.schema');
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
  });
});
