/**
 * Strings for a schema's `format` and `pattern` (model/schema-strings.ts):
 * each format's string is one Ajv's format validator (ajv-formats, the one
 * JSON Schema validators use) takes, at every length the format allows; each
 * pattern's string matches the pattern, for a corpus of patterns clients and
 * schema generators write (zod's own among them) and for 1,000 random ones
 * from a grammar of classes, escapes, groups, alternation and quantifiers;
 * patterns this does not generate from (lookarounds, backreferences) and
 * hostile ones (repeats of nothing, anchors that cannot hold) give way to the
 * caller's words, within a bounded number of steps.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { argsFromSchema, type JsonSchema } from '../../src/model/schema-args.js';
import { formatString, patternString, shapedString } from '../../src/model/schema-strings.js';
import { mulberry32, pick } from '../../src/model/rng.js';

const ajv = new Ajv2020({ strict: false });
// What ajv-formats' plugin adds ("full" mode), as the server checks formats (model/schema-strings.ts).
for (const [name, format] of Object.entries(fullFormats)) ajv.addFormat(name, format);

/** The lengths each format's strings can have, as the format's grammar allows them. */
const FORMAT_LENGTHS: Record<string, (n: number) => boolean> = {
  'date-time': (n) => n === 20 || n >= 22,
  time: (n) => n === 9 || n >= 11,
  date: (n) => n === 10,
  duration: (n) => n >= 3,
  email: (n) => n >= 6,
  hostname: (n) => n >= 1 && n <= 253,
  ipv4: (n) => n >= 7 && n <= 15,
  ipv6: (n) => n >= 3 && n <= 39,
  uri: (n) => n >= 3,
  url: (n) => n >= 11,
  uuid: (n) => n === 36,
};

describe('format strings', () => {
  it.each(Object.keys(FORMAT_LENGTHS))('%s: valid for the format, at any length it allows', (format) => {
    const validate = ajv.compile({ type: 'string', format });
    for (const [min, max] of [[0, 16384], [0, 1], [1, 5], [3, 3], [7, 7], [12, 15], [20, 20], [21, 21], [22, 30], [36, 36], [39, 40], [64, 64], [200, 300], [1000, 2000]] as const) {
      for (let seed = 0; seed < 4; seed++) {
        const s = formatString(format, mulberry32(seed), min, max)!;
        expect(validate(s), `${format} [${min}, ${max}] ${JSON.stringify(s)}`).toBe(true);
        let fits = false;
        for (let n = min; n <= Math.min(max, 400); n++) fits ||= FORMAT_LENGTHS[format]!(n);
        if (fits) {
          expect(s.length, `${format} [${min}, ${max}] ${JSON.stringify(s)}`).toBeGreaterThanOrEqual(min);
          expect(s.length, `${format} [${min}, ${max}] ${JSON.stringify(s)}`).toBeLessThanOrEqual(max);
        }
      }
    }
  });

  it('a format it does not know is left to the caller', () => {
    expect(formatString('int64', mulberry32(1), 0, 10)).toBeUndefined();
  });
});

/** Patterns as clients write them: zod's for its string formats, pydantic's, hand-written ones. */
const CORPUS = [
  '^[a-z]+$', '^\\d{3}-\\d{4}$', '^@[A-Za-z0-9_]+$', '^(foo|bar)$', '^[A-Z]{2}$', '^\\+?[1-9]\\d{1,14}$', '^[0-9]{5}(?:-[0-9]{4})?$',
  '^#(?:[0-9a-fA-F]{3}){1,2}$', '^v?\\d+\\.\\d+\\.\\d+(-[0-9A-Za-z.-]+)?$', '^[a-z0-9]+(?:-[a-z0-9]+)*$', '\\S+@\\S+\\.\\S+', '^\\p{Lu}\\p{Ll}+$',
  '^[^\\s]{3,8}$', '^.{2,4}$', 'abc', '^\\w+$', '^[\\u0041-\\u005A]+$', '^\\u{1F600}+$', '^[^a-z]+$', '^(a|b|c){2,3}d?$', '^\\$\\d+(\\.\\d{2})?$',
  '^\\(\\d{3}\\) \\d{3}-\\d{4}$', '^[A-Z][a-z]*( [A-Z][a-z]*)*$', '^\\x41\\t\\n$', '^\\cJ$', '^[\\]\\[]+$', '^[-a]+$', '^(?<year>\\d{4})-(?<m>\\d{2})$',
  '^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$', '^https?://[^\\s/$.?#].[^\\s]*$', '^\\d+$|^none$', 'x*', '^$', '^\\P{L}+$', '^[\\p{L}\\p{N}]{4}$',
  '^\\uD83D\\uDE00$', '^a{0}b$',
  // An empty class (ECMAScript's `[]`, no `]` member) and `[^]`: the first read as POSIX made the whole pattern one class.
  '[]|(?:x*|y*){18}z[a]', '^[^]{3}$', '^(?:[]|b)c$',
  // zod 4's, for .ipv4(), .ipv6(), .email(), .uuid() and iso.date() (zodTextFormat writes them beside the format)
  '^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$',
  '^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:))$',
  "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
  '^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$',
  '^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))$',
];

const ATOMS = ['a', 'b', 'Z', '0', '\\d', '\\w', '\\s', '\\S', '\\D', '\\W', '.', '[a-c]', '[^a-c]', '[\\d_]', '\\.', '\\/', '\\p{L}', '\\p{N}', '\\P{L}', 'é', '日', '😀', '\\u0041', '\\x42', '\\t', '[😀-😂]', '[\\s\\S]', '\\u{1F389}'];

function randomPattern(rng: () => number, depth: number): string {
  const r = rng();
  if (depth > 3 || r < 0.4) return pick(rng, ATOMS);
  if (r < 0.6) return `(${randomPattern(rng, depth + 1)}${randomPattern(rng, depth + 1)})`;
  if (r < 0.7) return `(?:${randomPattern(rng, depth + 1)}|${randomPattern(rng, depth + 1)})`;
  if (r < 0.85) return `(?:${randomPattern(rng, depth + 1)})${pick(rng, ['*', '+', '?', '{2}', '{1,3}', '{0,}', '*?', '+?'])}`;
  return `${randomPattern(rng, depth + 1)}${randomPattern(rng, depth + 1)}`;
}

describe('pattern strings', () => {
  it.each(CORPUS)('%s: every string matches', async (pattern) => {
    const re = new RegExp(pattern, 'u');
    for (let seed = 0; seed < 20; seed++) {
      // Each in a turn of its own, as a server's requests are (pattern work is bounded per turn).
      await nextTurn();
      const s = patternString(pattern, mulberry32(seed), 0, 16384, 16384);
      expect(s, `seed ${seed}`).toBeDefined();
      expect(re.test(s!), `seed ${seed}: ${JSON.stringify(s)}`).toBe(true);
    }
  });

  it('1,000 random patterns of classes, escapes, groups, alternation and quantifiers: every string matches, within the length bounds it asks', async () => {
    const rng = mulberry32(20261204);
    let made = 0;
    let fitted = 0;
    for (let i = 0; i < 1000; i++) {
      const pattern = (rng() < 0.5 ? '^' : '') + randomPattern(rng, 0) + randomPattern(rng, 0) + (rng() < 0.5 ? '$' : '');
      const re = new RegExp(pattern, 'u');
      const min = pick(rng, [0, 0, 3, 10]);
      const max = min + pick(rng, [5, 50, 16384]);
      await nextTurn();
      const s = patternString(pattern, mulberry32(i), min, max, 16384);
      expect(s, pattern).toBeDefined();
      expect(re.test(s!), `${pattern}: ${JSON.stringify(s)}`).toBe(true);
      made++;
      if ([...s!].length >= min && s!.length <= max) fitted++;
    }
    expect(made).toBe(1000);
    // Most fit: some patterns cannot (a fixed length outside the bounds).
    expect(fitted, `${fitted} fit`).toBeGreaterThan(900);
  });

  it.each([
    ['^@[A-Za-z0-9_]+$', 40, 45],
    ['^[a-z]+$', 100, 100],
    ['^(ab)+$', 8, 8],
    ['^x{2,5}y*$', 30, 40],
    ['^(?:\\d{3}-)+\\d$', 200, 210],
    // Past a thousand repeats of one quantifier.
    ['^[a-z]+$', 2000, 2000],
    // Code points, as JSON Schema counts them, at least; UTF-16 units, as zod counts them, at most.
    ['^😀+$', 3, 6],
  ])('%s in [%i, %i] characters: stretched to fit', async (pattern, min, max) => {
    await nextTurn();
    const s = patternString(pattern, mulberry32(3), min, max, 16384)!;
    expect(new RegExp(pattern, 'u').test(s)).toBe(true);
    expect([...s].length).toBeGreaterThanOrEqual(min);
    expect(s.length).toBeLessThanOrEqual(max);
  });

  it('two lone surrogates a pattern matches apart are not made into one code point', async () => {
    for (const pattern of ['^\\uD83D\\u{DE00}$', '^\\u{D83D}\\u{DE00}$', '^\\uD83D(?:)\\uDE00$']) {
      await nextTurn();
      const s = patternString(pattern, mulberry32(1), 0, 100, 16384);
      if (s !== undefined) expect(new RegExp(pattern, 'u').test(s), pattern).toBe(true);
    }
  });

  it('pattern work is bounded per event-loop turn: hundreds of costly patterns in one turn fall back, the next turn generates again', async () => {
    // After an outside attack's request: 200 properties, each a pattern of dead alternatives repeated (each took
    // 10-25 ms; together 8.7 s of one turn). These each make a 4,000-character string, at thousands of steps.
    const costly = (i: number) => `(?:${'(?:[]|[]|[]|[]|a)'.repeat(50)}){80}${i}`;
    await nextTurn();
    const made: boolean[] = [];
    for (let i = 0; i < 200; i++) {
      const s = patternString(costly(i), mulberry32(i), 0, 16384, 16384);
      if (s !== undefined) expect(new RegExp(costly(i), 'u').test(s)).toBe(true);
      made.push(s !== undefined);
    }
    // The first are made; past the turn's steps the rest fall back at once.
    expect(made[0]).toBe(true);
    expect(made.filter((m) => !m).length).toBeGreaterThan(150);
    await nextTurn();
    expect(patternString(costly(7), mulberry32(1), 0, 16384, 16384)).toBeDefined();
    // Parsing counts too: 800 classes, each compiled as a regex of its own, generating one character.
    await nextTurn();
    const parsed: boolean[] = [];
    for (let i = 0; i < 200; i++) parsed.push(patternString(`(?:${'[a-c]'.repeat(800)}){0}x${i}`, mulberry32(i), 0, 100, 16384) !== undefined);
    expect(parsed[0]).toBe(true);
    expect(parsed.filter((p) => !p).length).toBeGreaterThan(150);
  });

  it.each([
    ['a lookahead', '(?=.*\\d).{8,}'],
    ['a backreference', '^(\\w)\\1$'],
    ['a word boundary', '\\bword\\b'],
    ['not a pattern', '^(unclosed'],
    ['an anchor that cannot hold', '^(a|a)*$b'],
    ['a start anchor after text', 'a^b'],
    ['repeats of nothing, 10^12 of them', '((((){1000}){1000}){1000}){1000}'],
    ['a million repeats', '^(?:(?:a?){1000}){1000}$'],
    ['more characters than a string may hold', '(a{1000}){1000}'],
  ])('%s (%s): no string, the caller falls back', async (_what, pattern) => {
    await nextTurn();
    expect(patternString(pattern, mulberry32(1), 0, 16384, 16384)).toBeUndefined();
  });
});

describe('a schema with a format, a pattern or both, through the argument generator', () => {
  it("zod's schema for formats and a pattern (zodTextFormat writes both): every value validates", async () => {
    const schema: JsonSchema = {
      type: 'object',
      properties: {
        ip: { type: 'string', format: 'ipv4', pattern: CORPUS.at(-5) },
        ip6: { type: 'string', format: 'ipv6', pattern: CORPUS.at(-4) },
        email: { type: 'string', format: 'email', pattern: CORPUS.at(-3) },
        id: { type: 'string', format: 'uuid', pattern: CORPUS.at(-2) },
        day: { type: 'string', format: 'date', pattern: CORPUS.at(-1) },
        // zod's duration and hostname patterns use lookaheads: the format decides.
        dur: { type: 'string', format: 'duration', pattern: '^P(?:(\\d+W)|(?!.*W)(?=\\d|T\\d)(\\d+Y)?(\\d+M)?(\\d+D)?(T(?=\\d)(\\d+H)?(\\d+M)?(\\d+([.,]\\d+)?S)?)?)$' },
        host: { type: 'string', format: 'hostname', pattern: '^(?=.{1,253}\\.?$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[-0-9a-zA-Z]{0,61}[0-9a-zA-Z])?)*\\.?$' },
        when: { type: 'string', format: 'date-time' },
        sku: { type: 'string', pattern: '^[A-Z]{3}-\\d{4}$' },
        tags: { type: 'array', items: { type: 'string', pattern: '^#[a-z]{2,8}$', minLength: 4 }, minItems: 2 },
      },
      required: ['ip', 'ip6', 'email', 'id', 'day', 'dur', 'host', 'when', 'sku', 'tags'],
      additionalProperties: false,
    };
    const validate = ajv.compile(schema);
    for (let seed = 0; seed < 50; seed++) {
      await nextTurn();
      const args = argsFromSchema(schema, mulberry32(seed));
      expect(validate(args), `seed ${seed}: ${JSON.stringify(args)} ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });

  it('a pattern the format refuses gives way to the format', async () => {
    await nextTurn();
    // The pattern allows a domain label ending in '-', which the email format does not.
    const s = shapedString({ format: 'email', pattern: '^a@b-\\.cd$' }, mulberry32(1), 0, 100, 16384)!;
    expect(ajv.compile({ type: 'string', format: 'email' })(s)).toBe(true);
  });
});

describe('a number with a fractional multipleOf', () => {
  it('is a multiple as validators check it (the quotient whole in floating point: 3 × 0.1 is not, 4 × 0.1 is)', () => {
    let checked = 0;
    for (const multipleOf of [0.1, 0.01, 0.07, 0.2, 0.3, 2.5, 0.001]) {
      for (const minimum of [0, 0.25, 0.3, 1, -5, 7.1, 100.05]) {
        for (const type of ['number', 'integer']) {
          const schema: JsonSchema = { type: 'object', properties: { x: { type, minimum, multipleOf } }, required: ['x'], additionalProperties: false };
          // An integer type whose step no integer nearby passes the floating-point check for is left aside.
          const from = Math.ceil(minimum);
          if (type === 'integer' && !Array.from({ length: 1000 }, (_, i) => from + i).some((n) => (n / multipleOf) % 1 === 0)) continue;
          const value = argsFromSchema(schema, mulberry32(checked)).x as number;
          expect(ajv.compile(schema)({ x: value }), `${type} ≥ ${minimum}, multipleOf ${multipleOf}: ${value}`).toBe(true);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(80);
  });
});
