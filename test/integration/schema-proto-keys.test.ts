/**
 * Property names that are also names on Object.prototype (`__proto__`,
 * `constructor`, `toString`, …) are ordinary JSON property names: a schema
 * that requires them gets them in the generated tool arguments and in a
 * `json_schema` text answer, as own keys of a plain object. Before, the
 * generator assigned `out['__proto__'] = …` (which set the object's
 * prototype, so the key vanished from the JSON), took an inherited
 * `toString` for one already generated, and resolved `$ref: '#/__proto__'`
 * to Object.prototype instead of refusing it (outside attack).
 */
import { describe, expect, it } from 'vitest';
import { argsFromSchema, checkToolSchema, type JsonSchema } from '../../src/model/schema-args.js';
import { mulberry32 } from '../../src/model/rng.js';
import { WireError } from '../../src/protocol/errors.js';
import { testServer } from '../helpers/server.js';

/** A schema from JSON text, so `__proto__` is an own key as a client's body has it. */
const schema = (json: string): JsonSchema => JSON.parse(json) as JsonSchema;

const protoRequired = schema(
  '{"type":"object","properties":{"__proto__":{"type":"object","properties":{"polluted":{"type":"string"}},"required":["polluted"]},"constructor":{"type":"string"},"toString":{"type":"string"}},"required":["__proto__","constructor","toString"]}',
);

function keysOf(value: unknown): string[] {
  return Object.keys(JSON.parse(JSON.stringify(value)) as object).sort();
}

describe('schemas naming Object.prototype properties', () => {
  it('required __proto__, constructor and toString are own keys of the generated arguments', () => {
    const args = argsFromSchema(protoRequired, mulberry32(1));
    expect(Object.getPrototypeOf(args)).toBe(Object.prototype);
    expect(keysOf(args)).toEqual(['__proto__', 'constructor', 'toString']);
    expect(JSON.parse(JSON.stringify(args)).__proto__).toMatchObject({ polluted: expect.any(String) });
  });

  it('a required name with no property schema is generated even when Object.prototype has it', () => {
    const args = argsFromSchema(schema('{"type":"object","required":["toString","valueOf","hasOwnProperty","__proto__"]}'), mulberry32(2));
    expect(keysOf(args)).toEqual(['__proto__', 'hasOwnProperty', 'toString', 'valueOf']);
  });

  it('allOf parts naming __proto__ keep it', () => {
    const args = argsFromSchema(schema('{"type":"object","allOf":[{"properties":{"__proto__":{"type":"string"}},"required":["__proto__"]},{"properties":{"a":{"type":"string"}},"required":["a"]}]}'), mulberry32(3));
    expect(keysOf(args)).toEqual(['__proto__', 'a']);
  });

  it("a $ref to '#/__proto__' does not resolve", () => {
    let err: unknown;
    try {
      checkToolSchema(schema('{"type":"object","properties":{"x":{"$ref":"#/__proto__"}}}'), 'tools[0].parameters');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WireError);
    expect((err as WireError).code).toBe('invalid_tool_schema');
  });

  it('over HTTP: the tool call and a json_schema answer carry the required __proto__ key', async () => {
    const { url } = await testServer();
    const post = async (body: string) => {
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      expect(res.status).toBe(200);
      return (await res.json()) as { output: Array<{ type: string; arguments?: string; content?: Array<{ text: string }> }> };
    };
    const tools = `[{"type":"function","name":"lookup","parameters":${JSON.stringify(protoRequired)}}]`;
    expect(tools).toContain('"__proto__":{');
    const called = await post(`{"model":"sim-model","input":"lookup x","store":false,"tool_choice":"required","tools":${tools}}`);
    const call = called.output.find((i) => i.type === 'function_call')!;
    expect(keysOf(JSON.parse(call.arguments!))).toEqual(['__proto__', 'constructor', 'toString']);
    const answered = await post(
      '{"model":"sim-model","input":"hi","store":false,"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object","properties":{"__proto__":{"type":"string"},"answer":{"type":"string"}},"required":["__proto__","answer"]}}}}',
    );
    const text = answered.output.find((i) => i.type === 'message')!.content![0]!.text;
    expect(keysOf(JSON.parse(text))).toEqual(['__proto__', 'answer']);
  });
});
