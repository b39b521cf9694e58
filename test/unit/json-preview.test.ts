/**
 * `jsonPreview`: what an error message quotes of a client's value, the first 100 characters of its JSON, made
 * without serialising the rest (a schema's `type` or an image part's `detail` may be a whole body's worth).
 */
import { describe, expect, it } from 'vitest';
import { jsonPreview } from '../../src/protocol/errors.js';

const values: unknown[] = [
  null,
  true,
  42,
  -0.5,
  1e21,
  'object',
  '',
  'a'.repeat(99) + '😀' + 'b'.repeat(10),
  'a'.repeat(98) + '😀',
  '\ud800'.repeat(50),
  'quote " and \\ backslash \n newline',
  ['string', 'null'],
  [],
  {},
  { type: 'object', properties: { a: { type: 'string' } } },
  Array.from({ length: 500 }, (_, i) => i),
  Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`key${i}`, { nested: [i, `v${i}`] }])),
  [[[[[[[[[[[[[[[['deep']]]]]]]]]]]]]]]],
  { ['k'.repeat(300)]: 1 },
];

describe('jsonPreview', () => {
  it.each(values.map((v) => [JSON.stringify(v).slice(0, 40), v]))('is the first 100 characters of JSON.stringify: %s', (_label, v) => {
    expect(jsonPreview(v)).toBe(JSON.stringify(v).slice(0, 100));
    expect(jsonPreview(v, 7)).toBe(JSON.stringify(v).slice(0, 7));
  });

  it('reads about as much of the value as it quotes, however large it is', () => {
    // An array that says it holds a billion elements and counts what is read of it: JSON.stringify would read them all.
    let reads = 0;
    const huge = new Proxy([] as unknown[], {
      get(target, key, receiver) {
        if (key === 'length') return 1e9;
        if (typeof key === 'string' && /^\d+$/.test(key)) {
          reads++;
          return 'x';
        }
        return Reflect.get(target, key, receiver);
      },
    });
    expect(jsonPreview(huge)).toBe(`[${Array.from({ length: 25 }, () => '"x"').join(',')}`.slice(0, 100));
    expect(reads).toBeLessThanOrEqual(30);
    expect(jsonPreview('y'.repeat(16 * 1024 * 1024))).toBe(JSON.stringify('y'.repeat(200)).slice(0, 100));
  });
});
