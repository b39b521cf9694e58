/**
 * Strings for a JSON Schema string that has a `format` or a `pattern`, within
 * its `minLength`/`maxLength` where the two can agree (model/schema-args.ts).
 *
 * Structured outputs (`text.format` json_schema, strict function tools) allow
 * the formats date-time, time, date, duration, email, hostname, ipv4, ipv6
 * and uuid, and `pattern`; a client that checks what it receives (the openai
 * SDK's `zodTextFormat`, a zod `.ip()`, `.regex()`, `.duration()`) failed on
 * `"the quick"` where it asked for an IP address or a pattern.
 *
 * A pattern is generated from its own syntax tree: literals, classes (`[…]`,
 * `\d`, `\w`, `\p{…}`, `.`: a character is picked from a fixed pool by testing
 * it against the class itself, so their meaning is the regex engine's, not a
 * copy of it), groups, alternation, quantifiers and the anchors `^` and `$`.
 * Backreferences, lookarounds and word boundaries are not generated. A
 * string so made matches by construction; it is not tested against the whole
 * pattern afterwards, on purpose: a client's pattern can backtrack
 * exponentially on a string it does not match (`^(a|a)*$b`), and testing
 * would hand it the event loop. The pattern must compile (`u` flag, as JSON
 * Schema validators compile it); when it does not, or uses what is not
 * generated, the caller falls back to plain words, as before.
 */
import { fullFormats } from 'ajv-formats/dist/formats.js';
import type { Rng } from './rng.js';
import { intBetween, words } from './rng.js';
import { ownValue } from '../protocol/fields.js';
import { trustMatch } from './schema-valid.js';

/**
 * A string for a schema with a `pattern`, a `format`, or both, or undefined when neither is one this generates.
 * Both (zod writes both for `.email()`, `.ipv4()`, `.uuid()`): the pattern's string when the format's validator (Ajv's,
 * the one JSON Schema validators use) takes it, else the format's (its canonical form, which such patterns accept):
 * a pattern can allow what its format does not (a domain label ending in `-`).
 */
export function shapedString(schema: { pattern?: unknown; format?: unknown }, rng: Rng, min: number, max: number, maxChars: number): string | undefined {
  const fromPattern = typeof schema.pattern === 'string' ? patternString(schema.pattern, rng, min, max, maxChars) : undefined;
  if (typeof schema.format !== 'string') return fromPattern;
  if (fromPattern !== undefined && formatTakes(schema.format, fromPattern)) return fromPattern;
  return formatString(schema.format, rng, min, max) ?? fromPattern;
}

/**
 * `value` as it may stand for a string schema (a slot filled from the user's message, the answer's text), cut to
 * `maxLength` (never inside a surrogate pair), or undefined when it does not fit: shorter than `minLength`, not of the
 * schema's `format` (Ajv's validator), or under a `pattern` (it is never run on text: the generated string stays).
 * Lengths hold both as UTF-16 units (zod's `.max()`) and as code points (JSON Schema's).
 */
export function fitString(schema: Record<string, unknown>, value: string): string | undefined {
  if (typeof schema['pattern'] === 'string') return undefined;
  const max = typeof schema['maxLength'] === 'number' ? Math.max(0, Math.floor(schema['maxLength'])) : Infinity;
  const min = typeof schema['minLength'] === 'number' ? schema['minLength'] : 0;
  let s = value;
  if (s.length > max) {
    let cut = max;
    if (cut > 0 && cut < s.length && s.charCodeAt(cut - 1) >= 0xd800 && s.charCodeAt(cut - 1) <= 0xdbff) cut--;
    s = s.slice(0, cut);
  }
  if (codePoints(s) < min) return undefined;
  if (typeof schema['format'] === 'string' && !formatTakes(schema['format'], s)) return undefined;
  return s;
}

function isHigh(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Characters as JSON Schema counts them (code points; a lone surrogate counts as one). */
export function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** Strings longer than this are not checked against a format (its validator's regex is the library's, but the string is the client's pattern's). */
const FORMAT_CHECK_CHARS = 1024;

/** Whether Ajv's `format` validator takes `s`; true for a format it does not know (nothing to disagree with). */
export function formatTakes(format: string, s: string): boolean {
  if (!Object.hasOwn(fullFormats, format)) return true;
  if (s.length > FORMAT_CHECK_CHARS) return false;
  const f = (fullFormats as Record<string, unknown>)[format];
  const check = typeof f === 'object' && f !== null && !(f instanceof RegExp) ? (f as { validate?: unknown }).validate : f;
  if (check instanceof RegExp) return check.test(s);
  if (typeof check === 'function') return (check as (x: string) => boolean)(s) === true;
  return true;
}

/** A string of `format` at a length in [min, max] when the format allows one (else its usual length), or undefined for a format not known. */
export function formatString(format: string, rng: Rng, min: number, max: number): string | undefined {
  // A schema's `format: "__proto__"` found Object's own members here (a 500, or `"[object Undefined]"`).
  const make = ownValue(FORMATS, format);
  if (make === undefined) return undefined;
  return make(rng, min, max);
}

/** A length in [min, max] nearest to `want`, or `want` when the range is empty. */
function fit(want: number, min: number, max: number): number {
  if (min > max) return want;
  return Math.min(Math.max(want, min), max);
}

function digits(rng: Rng, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += String(Math.floor(rng() * 10));
  return s;
}

function letters(rng: Rng, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(97 + Math.floor(rng() * 26));
  return s;
}

function hex(rng: Rng, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += Math.floor(rng() * 16).toString(16);
  return s;
}

/** Dot-separated labels of letters, `n` characters in all (n ≥ 1), no label over 63. */
function labels(rng: Rng, n: number): string {
  const parts: string[] = [];
  let left = n;
  while (left > 0) {
    const take = Math.min(left, 63);
    // Never a label of 0 characters: a dot needs one on either side.
    const label = left - take === 1 ? take - 1 : take;
    parts.push(letters(rng, label));
    left -= label + 1;
  }
  return parts.join('.');
}

const FORMATS: Record<string, (rng: Rng, min: number, max: number) => string> = {
  // RFC 3339: fractional seconds stretch it (`.` and one digit at least).
  'date-time': (rng, min, max) => {
    const n = fit(20, min, max);
    return n <= 20 || n === 21 ? '2025-01-01T12:00:00Z' : `2025-01-01T12:00:00.${digits(rng, n - 21)}Z`;
  },
  time: (rng, min, max) => {
    const n = fit(9, min, max);
    return n <= 10 ? '12:00:00Z' : `12:00:00.${digits(rng, n - 10)}Z`;
  },
  date: () => '2025-01-01',
  // ISO 8601: a count of days of any number of digits.
  duration: (rng, min, max) => {
    const n = fit(4, min, max);
    return n <= 3 ? `P${1 + Math.floor(rng() * 9)}D` : `P${1 + Math.floor(rng() * 9)}${digits(rng, n - 3)}D`;
  },
  email: (rng, min, max) => {
    const word = words(rng, 1).join('');
    const n = fit(word.length + 12, min, max);
    // 'a@b.c' (5) is the shortest address the validator takes.
    if (n < 5) return `${word}@example.com`;
    // local@domain: the domain 'x.y' (3) or 'x.io' (4) when short, 'example.com' (11) otherwise; the local part takes the rest.
    const domain = n >= 13 ? 'example.com' : n >= 6 ? 'x.io' : 'x.y';
    const local = n - domain.length - 1;
    return `${(word + letters(rng, Math.max(0, local - word.length))).slice(0, local)}@${domain}`;
  },
  hostname: (rng, min, max) => {
    const n = fit(11, Math.max(1, min), Math.min(253, max));
    return n === 11 ? 'example.com' : labels(rng, Math.max(1, Math.min(n, 253)));
  },
  ipv4: (rng, min, max) => {
    // Four octets of 1 to 3 digits: 7 to 15 characters.
    const n = fit(11, Math.max(7, min), Math.min(15, max));
    let extra = Math.min(8, Math.max(0, n - 7));
    const octets: string[] = [];
    for (let i = 0; i < 4; i++) {
      const d = 1 + Math.min(2, extra);
      extra -= d - 1;
      octets.push(d === 1 ? String(1 + Math.floor(rng() * 9)) : d === 2 ? String(10 + Math.floor(rng() * 90)) : String(100 + Math.floor(rng() * 156)));
    }
    return octets.join('.');
  },
  ipv6: (rng, min, max) => {
    const n = fit(11, Math.max(2, min), Math.min(39, max));
    // '::' (the unspecified address) is the shortest.
    if (n <= 2) return '::';
    if (n <= 6) return `::${hex(rng, n - 2).replace(/^0/, '1')}`;
    if (n <= 10) return `fe80::${hex(rng, n - 6).replace(/^0/, '1')}`;
    if (n <= 14) return `2001:db8::${hex(rng, n - 10).replace(/^0/, '1')}`;
    // Eight groups of 1 to 4 hex digits: 15 to 39 characters.
    let extra = n - 15;
    const groups: string[] = [];
    for (let i = 0; i < 8; i++) {
      const d = 1 + Math.min(3, extra);
      extra -= d - 1;
      groups.push(hex(rng, d));
    }
    return groups.join(':');
  },
  uri: (rng, min, max) => uri(rng, min, max, false),
  // A URL has an authority: `http://a.bc` (11) is the shortest made.
  url: (rng, min, max) => uri(rng, min, max, true),
  uuid: (rng) => {
    const h = hex(rng, 32);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20)}`;
  },
  // ajv-formats' other string formats: one fixed value each that its validator takes.
  'iso-time': () => '12:00:00',
  'iso-date-time': () => '2025-01-01T12:00:00',
  byte: () => 'aGVsbG8=',
  'json-pointer': () => '/a',
  'relative-json-pointer': () => '0/a',
};

function uri(rng: Rng, min: number, max: number, authority: boolean): string {
  const base = 'https://example.com/';
  const word = words(rng, 1).join('');
  const n = fit(base.length + word.length, min, max);
  if (n < base.length && authority) return n >= 11 ? `http://${letters(rng, n - 10)}.bc` : base + word;
  if (n < base.length) return n >= 3 ? `x:${letters(rng, n - 2)}` : base + word;
  return base + (word + letters(rng, Math.max(0, n - base.length - word.length))).slice(0, n - base.length);
}

// ---------------------------------------------------------------- patterns

/** A pattern's syntax tree: a sequence, a choice, a repeat, a literal, a class (by its source), or an anchor (`^`, `$`). */
type Node =
  | { kind: 'seq'; items: Node[] }
  | { kind: 'alt'; options: Node[] }
  | { kind: 'rep'; node: Node; min: number; max: number }
  | { kind: 'lit'; text: string }
  | { kind: 'class'; test: RegExp; members?: readonly string[] }
  | { kind: 'start' }
  | { kind: 'end' };

/** The pattern uses something not generated (a backreference, a lookaround, a word boundary) or is not valid. */
class Unsupported extends Error {}

/** Characters a class's character is picked from: those of them the class takes, at random. */
const POOL = Array.from('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;!?@#$%&*+=/\\|()[]{}<>\'"`~^\t\néüßαλжש日本語😀\u00a0');

/** Extra repeats a quantifier with room may take (beyond its minimum) on a first try. */
const EXTRA_REPEATS = 3;
/** `generate`'s stretch for a first try: each repeat takes 0 to `EXTRA_REPEATS` extra at random. */
const RANDOM = -1;
/** An unbounded quantifier's cap while generating (`*`, `+`, `{n,}`). */
const OPEN_MAX = 16_384;
/** Patterns longer than this are not parsed (a schema's size bounds them anyway). */
const MAX_PATTERN_CHARS = 4096;
/** Attempts at a string that matches and fits the length bounds. */
const TRIES = 24;
/** Tree nodes one attempt may visit: repeats of nothing (`((){1000}){1000}`) generate no characters to run out of. */
const MAX_STEPS = 100_000;

/**
 * Tree nodes (and class-member tests) all pattern generation may spend in one event-loop turn, refilled at the next:
 * each pattern is bounded, but one request's schemas may hold thousands (an outside attack's 200 patterns of dead
 * alternatives held the loop 8.7 s). Past it a pattern's string is words, as for a pattern not generated from. Far
 * above what real schemas spend (a zod schema's dozen patterns: a few thousand).
 */
const TURN_STEPS = 200_000;
let turnSteps = TURN_STEPS;
let refill: NodeJS.Immediate | null = null;

function stepsLeft(): number {
  if (refill === null) {
    refill = setImmediate(() => {
      turnSteps = TURN_STEPS;
      refill = null;
    });
    refill.unref();
  }
  return turnSteps;
}

/** Steps a pattern's parse is charged, per character: about what generating costs for the same time. */
const PARSE_STEPS_PER_CHAR = 8;

/** Parsed trees by pattern source (schemas are re-sent with every request; a bounded cache). */
const trees = new Map<string, Node | null>();
const TREE_CACHE = 256;

/**
 * A string that matches `pattern` with a length in [min, max] when one is
 * found in a few tries, one that matches at any length otherwise, or
 * undefined when the pattern is not one this generates.
 */
export function patternString(pattern: string, rng: Rng, min: number, max: number, maxChars: number): string | undefined {
  if (stepsLeft() <= 0) return undefined;
  const parsed = parsePattern(pattern);
  if (parsed === null) return undefined;
  let matching: string | undefined;
  // The first try takes a few random extra repeats. Then every repeat with room takes `k` more (0: none): the
  // smallest when nothing is known short yet, doubling while too short, then halving the gap to too long.
  let short = -1;
  let long = Infinity;
  let k = 0;
  for (let attempt = 0; attempt < TRIES && turnSteps > 0; attempt++) {
    const out: string[] = [];
    const steps = Math.min(MAX_STEPS, turnSteps);
    const budget: Budget = { chars: maxChars, used: 0, started: false, ended: false, steps, overflow: false };
    const made = generate(parsed, rng, attempt === 0 ? RANDOM : k, out, budget);
    turnSteps -= steps - Math.max(0, budget.steps);
    let s = made ? out.join('') : undefined;
    // A pattern matches anywhere in the string (JSON Schema's `pattern` is a search): text before a match that
    // passed no `^`, or after one that passed no `$`, keeps it a match.
    // Lengths as JSON Schema counts them (code points) for the lower bound, as zod does (UTF-16 units) for the upper:
    // a string within both holds for either.
    const n = s === undefined ? 0 : codePoints(s);
    if (s !== undefined && n < min && min <= max && (!budget.started || !budget.ended)) {
      const pad = 'x'.repeat(min - n);
      s = budget.ended ? pad + s : s + pad;
    }
    if (s !== undefined) trustMatch(pattern, s); // made from the pattern's own tree: the schema check need not run it
    if (s !== undefined && codePoints(s) >= min && s.length <= max) return s;
    if (s !== undefined && (matching === undefined || distance(s, min, max) < distance(matching, min, max))) matching = s;
    // A try out of steps: the pattern's repeats of nothing are too many for any try. One that found no way through
    // (an empty class, an anchor that cannot hold) says nothing of the length.
    if (!made && budget.steps < 0) break;
    if (!made && !budget.overflow) continue;
    const tooShort = s !== undefined && codePoints(s) < min;
    if (attempt === 0) {
      if (tooShort) short = 0;
    } else if (tooShort) short = k;
    else if (k === 0) break; // the fewest repeats are too long already
    else long = k;
    if (short < 0) k = 0;
    else if (long === Infinity) k = Math.max(1, short * 2);
    else {
      k = Math.floor((short + long) / 2);
      if (k <= short) break;
    }
  }
  return matching;
}

/** How far a string's length is from [min, max] (code points below, UTF-16 units above). */
function distance(s: string, min: number, max: number): number {
  const n = codePoints(s);
  return n < min ? min - n : s.length > max ? s.length - max : 0;
}

function parsePattern(pattern: string): Node | null {
  const known = trees.get(pattern);
  if (known !== undefined) return known;
  let parsed: Node | null = null;
  // Parsing is charged too (a class is compiled as a regex of its own: 200 patterns of 800 classes took 0.2 s).
  turnSteps -= PARSE_STEPS_PER_CHAR * pattern.length;
  if (pattern.length <= MAX_PATTERN_CHARS) {
    try {
      // Compiled only to be refused when it is not a pattern (never run on a client's text).
      new RegExp(pattern, 'u');
      parsed = new Parser(pattern).parse();
    } catch {
      parsed = null;
    }
  }
  if (trees.size >= TREE_CACHE) trees.delete(trees.keys().next().value!);
  trees.set(pattern, parsed);
  return parsed;
}

/** Characters left to generate, characters generated, whether a `^` or a `$` was passed, and nodes left to visit. */
interface Budget {
  chars: number;
  used: number;
  started: boolean;
  ended: boolean;
  steps: number;
  /** The characters ran out (too long, not impossible). */
  overflow: boolean;
}

function emit(text: string, out: string[], budget: Budget): boolean {
  if (budget.ended) return false;
  // A lone high surrogate then a lone low one would be one code point, which the pattern's two do not match.
  if (out.length > 0 && isLow(text.charCodeAt(0)) && isHigh(out[out.length - 1]!.charCodeAt(out[out.length - 1]!.length - 1))) return false;
  if (text.length > budget.chars) {
    budget.overflow = true;
    return false;
  }
  budget.chars -= text.length;
  budget.used += text.length;
  out.push(text);
  return true;
}

/** Append a match of `node` to `out`; false when there is none this way (an anchor where text is, the budget spent). */
function generate(node: Node, rng: Rng, stretch: number, out: string[], budget: Budget): boolean {
  if (--budget.steps < 0) return false;
  switch (node.kind) {
    case 'start':
      budget.started = true;
      return budget.used === 0;
    case 'end':
      budget.ended = true;
      return true;
    case 'lit':
      return emit(node.text, out, budget);
    case 'class': {
      // The pool's characters the class takes, found once per parsed pattern (a class visited 100,000 times is not
      // tested against the pool each time).
      if (node.members === undefined) {
        budget.steps -= POOL.length;
        node.members = POOL.filter((c) => node.test.test(c));
      }
      const members = node.members;
      if (members.length === 0) return false;
      return emit(members[Math.floor(rng() * members.length)]!, out, budget);
    }
    case 'seq':
      for (const item of node.items) if (!generate(item, rng, stretch, out, budget)) return false;
      return true;
    case 'alt': {
      // A random option first, then the others in turn when it has no way through (`[]|b`): undone before the next.
      const first = Math.floor(rng() * node.options.length);
      const mark = { n: out.length, chars: budget.chars, used: budget.used, started: budget.started, ended: budget.ended };
      for (let i = 0; i < node.options.length; i++) {
        if (generate(node.options[(first + i) % node.options.length]!, rng, stretch, out, budget)) return true;
        if (budget.steps < 0) return false;
        out.length = mark.n;
        Object.assign(budget, { chars: mark.chars, used: mark.used, started: mark.started, ended: mark.ended });
      }
      return false;
    }
    case 'rep': {
      const room = node.max - node.min;
      const extra = stretch === RANDOM ? intBetween(rng, 0, Math.min(room, EXTRA_REPEATS)) : Math.min(room, stretch);
      for (let i = 0; i < node.min + extra; i++) if (!generate(node.node, rng, stretch, out, budget)) return false;
      return true;
    }
  }
}

/** A recursive-descent parser of the ECMAScript pattern syntax (`u` mode) this generates from. */
class Parser {
  private i = 0;
  private depth = 0;

  constructor(private readonly src: string) {}

  parse(): Node {
    const node = this.alternation();
    if (this.i < this.src.length) throw new Unsupported(`unexpected '${this.src[this.i]}'`);
    return node;
  }

  private alternation(): Node {
    const options = [this.sequence()];
    while (this.src[this.i] === '|') {
      this.i++;
      options.push(this.sequence());
    }
    return options.length === 1 ? options[0]! : { kind: 'alt', options };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.i < this.src.length && this.src[this.i] !== '|' && this.src[this.i] !== ')') {
      const atom = this.atom();
      items.push(this.quantified(atom));
    }
    return items.length === 1 ? items[0]! : { kind: 'seq', items };
  }

  private quantified(atom: Node): Node {
    const c = this.src[this.i];
    let min: number;
    let max: number;
    if (c === '*') [min, max] = [0, OPEN_MAX];
    else if (c === '+') [min, max] = [1, OPEN_MAX];
    else if (c === '?') [min, max] = [0, 1];
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i));
      if (m === null) return atom;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Math.max(min, OPEN_MAX) : Number(m[3]);
      if (min > max || min > OPEN_MAX) throw new Unsupported('a repeat count out of range');
      this.i += m[0].length - 1;
    } else return atom;
    this.i++;
    if (this.src[this.i] === '?') this.i++; // lazy: the same strings
    if (atom.kind === 'start' || atom.kind === 'end') throw new Unsupported('a quantified assertion');
    return { kind: 'rep', node: atom, min, max };
  }

  private atom(): Node {
    const c = this.src[this.i]!;
    if (c === '^' || c === '$') {
      this.i++;
      return { kind: c === '^' ? 'start' : 'end' };
    }
    if (c === '(') return this.group();
    if (c === '[') return this.bracket();
    if (c === '.') {
      this.i++;
      return { kind: 'class', test: /^.$/u };
    }
    if (c === '\\') return this.escape();
    if ('*+?{}'.includes(c) && c !== '}') throw new Unsupported(`nothing to repeat before '${c}'`);
    const cp = this.src.codePointAt(this.i)!;
    const text = String.fromCodePoint(cp);
    this.i += text.length;
    return { kind: 'lit', text };
  }

  private group(): Node {
    if (++this.depth > 64) throw new Unsupported('groups nest too deep');
    this.i++;
    if (this.src[this.i] === '?') {
      const rest = this.src.slice(this.i, this.i + 3);
      if (rest.startsWith('?:')) this.i += 2;
      else if (rest.startsWith('?<') && rest !== '?<=' && rest !== '?<!') {
        const close = this.src.indexOf('>', this.i);
        if (close < 0) throw new Unsupported('an unterminated group name');
        this.i = close + 1;
      } else throw new Unsupported('a lookaround');
    }
    const inner = this.alternation();
    if (this.src[this.i] !== ')') throw new Unsupported('an unterminated group');
    this.i++;
    this.depth--;
    return inner;
  }

  /**
   * A class, `[` to its first unescaped `]` (ECMAScript's: `[]` is the empty class and `[^]` any character; a `]`
   * first is not a member, as it is in POSIX: read so, `[]|(?:x*|y*){18}z[a]` made the whole pattern the "class"
   * each candidate character was tested against, which backtracked for seconds; outside attack).
   */
  private bracket(): Node {
    const start = this.i;
    this.i++;
    if (this.src[this.i] === '^') this.i++;
    while (this.i < this.src.length && this.src[this.i] !== ']') this.i += this.src[this.i] === '\\' ? 2 : 1;
    if (this.i >= this.src.length) throw new Unsupported('an unterminated class');
    this.i++;
    return { kind: 'class', test: new RegExp(`^${this.src.slice(start, this.i)}$`, 'u') };
  }

  private escape(): Node {
    const start = this.i;
    const c = this.src[this.i + 1];
    if (c === undefined) throw new Unsupported('a trailing backslash');
    if ('bB'.includes(c) || /[1-9]/.test(c) || c === 'k') throw new Unsupported('a word boundary or backreference');
    if ('dDwWsS'.includes(c)) {
      this.i += 2;
      return { kind: 'class', test: new RegExp(`^\\${c}$`, 'u') };
    }
    if (c === 'p' || c === 'P') {
      const close = this.src.indexOf('}', this.i);
      if (this.src[this.i + 2] !== '{' || close < 0) throw new Unsupported('a property escape');
      this.i = close + 1;
      return { kind: 'class', test: new RegExp(`^${this.src.slice(start, this.i)}$`, 'u') };
    }
    // A character escape (\n, \t, \x41, \u0041, \u{1F600}, \cJ, \0, \., \/ …): its meaning is the engine's.
    const m = /^\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|c[a-zA-Z]|0|.)/u.exec(this.src.slice(this.i));
    if (m === null) throw new Unsupported('an escape');
    this.i += m[0].length;
    const text = matchOne(new RegExp(`^${m[0]}$`, 'u'));
    if (text === undefined) throw new Unsupported('an escape');
    return { kind: 'lit', text };
  }
}

/** The character a one-character escape stands for, read back from the engine: the escape matched against each candidate. */
function matchOne(re: RegExp): string | undefined {
  const source = re.source;
  // \uXXXX (a pair too), \u{…}, \xHH: the code point itself.
  const u = /^\^\\u\{([0-9a-fA-F]+)\}\$$/.exec(source) ?? /^\^\\x([0-9a-fA-F]{2})\$$/.exec(source);
  if (u) return String.fromCodePoint(parseInt(u[1]!, 16));
  const pair = /^\^\\u([0-9a-fA-F]{4})(?:\\u([0-9a-fA-F]{4}))?\$$/.exec(source);
  if (pair) return String.fromCharCode(parseInt(pair[1]!, 16), ...(pair[2] ? [parseInt(pair[2], 16)] : []));
  for (let cp = 0; cp < 0x80; cp++) {
    const ch = String.fromCharCode(cp);
    if (re.test(ch)) return ch;
  }
  return undefined;
}
