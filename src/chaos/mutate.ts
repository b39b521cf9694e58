/**
 * The seeded fuzzer's raw material: realistic valid request bodies (tools
 * with JSON schemas, function_call and function_call_output items, forced
 * tool choices, shell lines that make the model call tools) and mutations
 * that keep most of a body valid so an input reaches deep code rather than
 * stopping at the parser: a value replaced by a wrong type, a boundary
 * number, weird unicode or a lone surrogate, a huge or deeply nested value; a
 * field deleted, duplicated or added; and byte-level damage to the serialised
 * text (truncation, invalid UTF-8, garbage).
 *
 * Deterministic for a seed: the same seed gives the same inputs in the same
 * order. Sizes scale with `Scale` so the short (CI) form stays fast.
 */
import { mulberry32 } from '../model/rng.js';

export class Rng {
  private readonly r: () => number;
  constructor(seed: number) {
    this.r = mulberry32(seed >>> 0);
  }
  next(): number {
    return this.r();
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.r() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)]!;
  }
  chance(p: number): boolean {
    return this.r() < p;
  }
}

export interface Scale {
  /** Largest string the fuzzer builds, characters. */
  maxString: number;
  /** Deepest nesting it builds. */
  maxDepth: number;
  /** Longest array / widest object. */
  maxWidth: number;
  /**
   * Largest body a mutation grows by duplicating (characters of JSON, about): past the server's frame limit a larger
   * one tests nothing more. Without it, duplicating an element already `maxWidth` wide 1,000 times built 20 million
   * objects and the fuzzer itself ran out of heap (`--seed 1304`, the long form).
   */
  maxBytes: number;
}

export const LONG_SCALE: Scale = { maxString: 2_000_000, maxDepth: 20_000, maxWidth: 20_000, maxBytes: 40_000_000 };
export const QUICK_SCALE: Scale = { maxString: 200_000, maxDepth: 5_000, maxWidth: 2_000, maxBytes: 4_000_000 };

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather for a city.',
  parameters: {
    type: 'object',
    properties: {
      city: { type: 'string', minLength: 1, maxLength: 40 },
      days: { type: 'integer', minimum: 1, maximum: 7 },
      units: { type: 'string', enum: ['c', 'f'] },
      tags: { type: 'array', items: { type: 'string' }, minItems: 0, maxItems: 3 },
      where: { $ref: '#/$defs/place' },
    },
    required: ['city'],
    additionalProperties: false,
    $defs: { place: { type: 'object', properties: { lat: { type: 'number' }, lon: { type: 'number' } } } },
  },
  // Not strict: its optional fields and loose $defs are outside the strict subset, which `strict: true` is refused for.
  strict: false,
};
const EXEC = {
  type: 'function',
  name: 'exec_command',
  description: 'Run a shell command.',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
};
const HOSTED = { type: 'web_search_preview', search_context_size: 'low' };

/** Valid create bodies (without `type`): every one is accepted by today's server. */
export function corpus(): Array<{ [k: string]: Json }> {
  return [
    { model: 'sim-model', input: 'hello there', store: false },
    {
      model: 'sim-model',
      instructions: 'You are a careful assistant.',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'please call get_weather for Paris' }] }],
      tools: [WEATHER, EXEC, HOSTED],
      tool_choice: 'auto',
      store: true,
    },
    {
      model: 'sim-model',
      input: [
        { role: 'developer', content: 'Be terse.' },
        { role: 'user', content: 'list files\n$ ls' },
        { type: 'function_call', call_id: 'call_a1', name: 'exec_command', arguments: '{"cmd":"ls"}' },
        { type: 'function_call_output', call_id: 'call_a1', output: 'a.txt\nb.txt' },
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'thinking' }] },
        { role: 'user', content: [{ type: 'input_text', text: 'and now the weather' }, { type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] },
      ],
      tools: [EXEC, WEATHER],
      store: false,
    },
    {
      model: 'sim-model',
      input: 'what is the weather',
      tools: [WEATHER],
      tool_choice: { type: 'function', name: 'get_weather' },
      parallel_tool_calls: false,
      max_output_tokens: 64,
      temperature: 0.7,
      top_p: 0.9,
      metadata: { run: 'chaos', n: '1' },
      reasoning: { effort: 'low', summary: 'auto' },
      prompt_cache_key: 'chaos',
      user: 'u1',
      safety_identifier: 's1',
      service_tier: 'auto',
      store: true,
    },
    {
      model: 'sim-model',
      input: [{ type: 'message', role: 'user', content: 'run these\n$ echo one\n$ echo two' }],
      tools: [EXEC],
      parallel_tool_calls: true,
      store: false,
    },
    {
      model: 'sim',
      input: [
        { role: 'system', content: 'sys' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'earlier answer' }] },
        { type: 'custom_tool_call', call_id: 'c9', name: 'apply_patch', input: '*** Begin Patch' },
        { role: 'user', content: 'continue' },
      ],
      generate: true,
      store: true,
    },
  ];
}

/** A valid append for the given pending calls. */
export function validAppend(callIds: readonly string[], rng: Rng): { [k: string]: Json } {
  return {
    type: 'response.append',
    input: callIds.map((id) => ({ type: 'function_call_output', call_id: id, output: rng.chance(0.5) ? 'ok' : [{ type: 'input_text', text: 'done' }] })),
  };
}

const WEIRD_STRINGS = [
  '',
  ' ',
  '\u0000',
  '\ud800',
  'x\udc00y',
  '\udbff\udfff',
  '\u202e\u200f\u200d',
  '\ufeff',
  '👩‍👩‍👧‍👦',
  'e\u0301\u0301\u0301',
  '%',
  '%E0%A4%A',
  '../../../etc/passwd',
  '__proto__',
  'constructor',
  'resp_000000000000',
  'call_a1',
  'sim-model',
  'response.create',
  '$ rm -rf /',
  '-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----',
  'AKIAIOSFODNN7EXAMPLE',
  '\r\n\r\n',
  'data: [DONE]\n\n',
];

const BOUNDARY_NUMBERS = [0, -0, -1, 1, 0.5, -0.5, 1.5, 2 ** 31, 2 ** 32, 2 ** 53 + 2, -(2 ** 53), 1e308, -1e308, 5e-324, Number.MAX_SAFE_INTEGER, 1e21, 128, 129, 64, 65];

/**
 * A value nested `depth` levels. Deep values are a marker string that
 * `serialize` expands in the text: JSON.stringify (and structuredClone)
 * overflow the stack a few thousand levels down, JSON.parse does not.
 */
function nest(depth: number, rng: Rng): Json {
  const asArray = rng.chance(0.5);
  if (depth > 500) return `\u0000deep:${depth}:${asArray ? 'a' : 'o'}\u0000`;
  let v: Json = rng.chance(0.5) ? 'leaf' : 1;
  for (let i = 0; i < depth; i++) v = asArray ? [v] : { a: v };
  return v;
}

const DEEP_MARKER = /"\\u0000deep:(\d+):([ao])\\u0000"/g;

/** JSON text of a fuzz value, deep markers expanded to real nesting. */
export function serialize(v: Json | object): string {
  return JSON.stringify(v).replace(DEEP_MARKER, (_m, d: string, kind: string) => {
    const n = Number(d);
    return kind === 'a' ? `${'['.repeat(n)}1${']'.repeat(n)}` : `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
  });
}

/** A value of any type and size, biased towards trouble. */
export function weirdValue(rng: Rng, scale: Scale): Json {
  switch (rng.int(0, 11)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
    case 3:
      return rng.pick(BOUNDARY_NUMBERS);
    case 4:
    case 5:
      return rng.pick(WEIRD_STRINGS);
    case 6: {
      const n = rng.pick([100, 10_000, scale.maxString]);
      return rng.pick(['a', 'ab ', '\u00e9', '😀', '\ud800'] as const).repeat(Math.max(1, Math.floor(n / 2)));
    }
    case 7:
      return nest(rng.pick([8, 100, 1_000, Math.min(3_000, scale.maxDepth), scale.maxDepth]), rng);
    case 8: {
      const n = rng.pick([0, 1, 100, scale.maxWidth]);
      return Array.from({ length: n }, (_, i) => (rng.chance(0.5) ? i : { type: 'message', role: 'user', content: String(i) }));
    }
    case 9: {
      const o: { [k: string]: Json } = {};
      const n = rng.pick([1, 50, scale.maxWidth]);
      for (let i = 0; i < n; i++) o[`k${i}`] = i;
      return o;
    }
    case 10:
      return {};
    default:
      return [];
  }
}

/**
 * About how many characters `serialize` makes of `v` (deep markers as their expansion), counting no further than
 * `limit` (one more than it when past it), without building the text: the measure `Scale.maxBytes` bounds.
 */
export function jsonSize(v: Json, limit: number): number {
  let n = 0;
  const stack: Json[] = [v];
  while (stack.length && n <= limit) {
    const x = stack.pop()!;
    if (typeof x === 'string') {
      const deep = x.startsWith('\u0000deep:') ? Number(x.split(':')[1]) : NaN;
      n += Number.isFinite(deep) ? 6 * deep + 1 : x.length + 2;
    } else if (Array.isArray(x)) {
      n += x.length + 2;
      for (const y of x) stack.push(y);
    } else if (x !== null && typeof x === 'object') {
      for (const [k, y] of Object.entries(x)) {
        n += k.length + 4;
        stack.push(y);
      }
      n += 2;
    } else n += x === null ? 4 : String(x).length;
  }
  return Math.min(n, limit + 1);
}

type Path = Array<string | number>;

/** Every path into a value (objects and arrays), bounded. */
function paths(v: Json, limit = 400): Path[] {
  const out: Path[] = [];
  const walk = (x: Json, p: Path) => {
    if (out.length >= limit) return;
    out.push(p);
    if (Array.isArray(x)) x.forEach((y, i) => walk(y, [...p, i]));
    else if (x && typeof x === 'object') for (const [k, y] of Object.entries(x)) walk(y, [...p, k]);
  };
  walk(v, []);
  return out;
}

function getAt(v: Json, p: Path): Json | undefined {
  let x: Json | undefined = v;
  for (const k of p) {
    if (x === null || typeof x !== 'object') return undefined;
    x = (x as Record<string | number, Json>)[k as never];
  }
  return x;
}

const FIELD_NAMES = ['type', 'model', 'input', 'tools', 'tool_choice', 'call_id', 'output', 'arguments', 'name', 'parameters', 'content', 'role', 'text', 'max_output_tokens', 'previous_response_id', 'store', 'stream', 'background', 'generate', 'metadata', 'instructions', '__proto__', 'constructor', 'minItems', 'minLength', '$ref', 'required'];
const TYPE_NAMES = ['message', 'function_call', 'function_call_output', 'item_reference', 'reasoning', 'input_text', 'output_text', 'function', 'web_search_preview', 'custom', 'response.create', 'response.append', '', 'x'.repeat(300)];

/** 1–3 structural mutations of a deep copy. Returns the value and a short description of what was done. */
export function mutate(body: Json, rng: Rng, scale: Scale): { value: Json; how: string } {
  let value = structuredClone(body);
  const how: string[] = [];
  const n = rng.int(1, 3);
  for (let i = 0; i < n; i++) {
    const ps = paths(value);
    const p = rng.pick(ps);
    const op = rng.int(0, 9);
    const parent = p.length ? getAt(value, p.slice(0, -1)) : undefined;
    const key = p.at(-1);
    const set = (x: Json) => {
      if (p.length === 0) value = x;
      else (parent as Record<string | number, Json>)[key as never] = x;
    };
    const at = p.length ? p.join('.') : '<root>';
    if (op <= 3) {
      const w = weirdValue(rng, scale);
      set(w);
      how.push(`set ${at} = ${describe(w)}`);
    } else if (op === 4 && p.length && parent && typeof parent === 'object') {
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete (parent as Record<string, Json>)[key as string];
      how.push(`delete ${at}`);
    } else if (op === 5) {
      const target = getAt(value, p);
      if (target && typeof target === 'object' && !Array.isArray(target)) {
        const k = rng.pick(FIELD_NAMES);
        const w = weirdValue(rng, scale);
        Object.defineProperty(target, k, { value: w, enumerable: true, writable: true, configurable: true });
        how.push(`add ${at}.${k} = ${describe(w)}`);
      } else {
        set(rng.pick(TYPE_NAMES));
        how.push(`set ${at} = type name`);
      }
    } else if (op === 6) {
      const target = getAt(value, p);
      if (Array.isArray(target) && target.length) {
        const wanted = rng.pick([1, 10, Math.min(1_000, scale.maxWidth)]);
        const el = target[rng.int(0, target.length - 1)]!;
        const room = scale.maxBytes - jsonSize(value, scale.maxBytes);
        const times = Math.max(0, Math.min(wanted, Math.floor(room / jsonSize(el, scale.maxBytes))));
        for (let t = 0; t < times; t++) target.push(structuredClone(el));
        how.push(`duplicate an element of ${at} ×${times}`);
      } else {
        set([getAt(value, p) ?? null]);
        how.push(`wrap ${at} in an array`);
      }
    } else if (op === 7) {
      const all = paths(value).filter((q) => q.at(-1) === 'type');
      const q = all.length ? rng.pick(all) : p;
      const par = q.length ? getAt(value, q.slice(0, -1)) : undefined;
      if (par && typeof par === 'object') (par as Record<string | number, Json>)[q.at(-1) as never] = rng.pick(TYPE_NAMES);
      how.push(`retype ${q.join('.')}`);
    } else if (op === 8) {
      const all = paths(value).filter((q) => typeof getAt(value, q) === 'number' || /tokens|top_p|temperature|min|max/.test(String(q.at(-1))));
      const q = all.length ? rng.pick(all) : p;
      const par = q.length ? getAt(value, q.slice(0, -1)) : undefined;
      const num = rng.pick(BOUNDARY_NUMBERS);
      if (par && typeof par === 'object') (par as Record<string | number, Json>)[q.at(-1) as never] = num;
      how.push(`number ${q.join('.')} = ${num}`);
    } else {
      const w = rng.pick(WEIRD_STRINGS);
      const all = paths(value).filter((q) => typeof getAt(value, q) === 'string');
      const q = all.length ? rng.pick(all) : p;
      const par = q.length ? getAt(value, q.slice(0, -1)) : undefined;
      if (par && typeof par === 'object') (par as Record<string | number, Json>)[q.at(-1) as never] = w;
      how.push(`string ${q.join('.')} = ${JSON.stringify(w).slice(0, 40)}`);
    }
  }
  return { value, how: how.join('; ') };
}

function describe(v: Json): string {
  if (typeof v === 'string' && v.startsWith('\u0000deep:')) return `nested(depth ${v.split(':')[1]})`;
  if (v === null || typeof v !== 'object') {
    const s = JSON.stringify(v) ?? String(v);
    return s.length > 40 ? `${s.slice(0, 20)}…(${s.length} chars)` : s;
  }
  let depth = 0;
  let x: Json = v;
  while (x && typeof x === 'object') {
    const first: Json | undefined = Array.isArray(x) ? x[0] : Object.values(x)[0];
    if (first === undefined) break;
    depth++;
    x = first;
  }
  const width = Array.isArray(v) ? v.length : Object.keys(v).length;
  return `${Array.isArray(v) ? 'array' : 'object'}(width ${width}, depth ${depth})`;
}

/** Byte-level damage to a serialised body. */
export function damage(text: string, rng: Rng): { bytes: Buffer; how: string } {
  switch (rng.int(0, 6)) {
    case 0: {
      const at = rng.int(0, text.length);
      return { bytes: Buffer.from(text.slice(0, at)), how: `truncated at ${at}` };
    }
    case 1: {
      const at = rng.int(0, text.length);
      const bad = Buffer.from(rng.pick([[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x00]]));
      return { bytes: Buffer.concat([Buffer.from(text.slice(0, at)), bad, Buffer.from(text.slice(at))]), how: `invalid UTF-8 ${bad.toString('hex')} at ${at}` };
    }
    case 2:
      return { bytes: Buffer.from(text + rng.pick(['}', ']]', 'garbage', ',', '\u0000'])), how: 'trailing garbage' };
    case 3:
      return { bytes: Buffer.from('\ufeff' + text), how: 'byte order mark' };
    case 4:
      return { bytes: Buffer.from(text.replace(/"model":/, '"model":"x","model":')), how: 'duplicate key' };
    case 5:
      return { bytes: Buffer.from(rng.pick(['', 'null', '[]', '42', '"str"', '{', '1e99999', '{"type":', '[' .repeat(100_000)])), how: 'not an object' };
    default: {
      const at = rng.int(0, text.length);
      return { bytes: Buffer.from(text.slice(0, at) + rng.pick(['\\', '\\u12', '"', '\n', 'NaN', 'Infinity']) + text.slice(at)), how: 'broken token' };
    }
  }
}
