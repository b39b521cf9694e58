/**
 * `withFields` (protocol/fields.ts) stands in for `{ ...o, ...extra }` on the
 * hot path: the same keys in the same order and the same values, so what a
 * client receives is unchanged; and an own `__proto__` key (JSON.parse makes
 * one) stays an own key, as the spread keeps it.
 */
import { describe, expect, it } from 'vitest';
import { withFields } from '../../src/protocol/fields.js';
import { newResponse } from '../../src/engine/response.js';
import type { CreateParams } from '../../src/protocol/events.js';

describe('withFields', () => {
  const cases: Array<[string, object, object]> = [
    ['new keys go after the object’s own', { type: 'function', name: 'f', parameters: {} }, { description: null, strict: true }],
    ['a key already there keeps its place and takes the new value', { b: 1, a: 2, c: 3 }, { a: 9, d: 4 }],
    ['an empty object', {}, { sequence_number: 7 }],
    ['numeric-like keys', { 2: 'x', z: 1, 1: 'y' }, { 0: 'w', y: 2 }],
  ];
  it.each(cases)('is the spread: %s', (_, o, extra) => {
    const got = withFields(o, extra);
    const spread = { ...o, ...extra };
    expect(Object.keys(got)).toEqual(Object.keys(spread));
    expect(JSON.stringify(got)).toBe(JSON.stringify(spread));
    expect(got).not.toBe(o);
  });

  it('keeps an own __proto__ key as an own key, with its value, and leaves the prototype alone', () => {
    const o = JSON.parse('{"type":"function","__proto__":{"polluted":true},"name":"f"}') as object;
    const got = withFields(o, { strict: true });
    expect(Object.keys(got)).toEqual(['type', '__proto__', 'name', 'strict']);
    expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
    expect(JSON.stringify(got)).toBe('{"type":"function","__proto__":{"polluted":true},"name":"f","strict":true}');
    expect((got as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('echoes a function tool as the spread did: the client’s keys in its order, the defaults after', () => {
    const tools = JSON.parse(
      '[{"name":"a","type":"function","parameters":{"type":"object"}},{"type":"function","name":"b","strict":false,"description":"d","extra":1},{"type":"function","__proto__":{"x":1},"name":"c"}]',
    ) as CreateParams['tools'];
    const r = newResponse({ model: 'm', tools, tool_choice: 'auto', parallel_tool_calls: true, store: false } as unknown as CreateParams, 0);
    expect(JSON.stringify(r.tools)).toBe(
      '[{"name":"a","type":"function","parameters":{"type":"object"},"description":null,"strict":true},' +
        '{"type":"function","name":"b","strict":false,"description":"d","extra":1,"parameters":null},' +
        '{"type":"function","__proto__":{"x":1},"name":"c","description":null,"parameters":null,"strict":true}]',
    );
  });
});
