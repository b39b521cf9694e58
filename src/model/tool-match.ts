/**
 * How the auto policy reads a request for what its tools do: which declared
 * function tools the user's message plainly asks for, and the arguments the
 * message supplies.
 *
 * Relevance: a tool's name is split into words (`get_weather`, `getWeather`
 * → get, weather); its *content* words are those that are not generic verbs
 * (get, set, list, run, …). The tool is relevant when the message names it
 * exactly, contains one of its content words, or contains two distinct words
 * of its description that are not stop words. Words are compared lowercased
 * with a light plural/possessive fold ("cities" = "city", "what's" = "what").
 *
 * Arguments: string properties named like a location (location, city,
 * place, …), a query (query, q, search, question, …), a path (path, file,
 * filename, …) or a URL (url, link, …) are filled from the message: the
 * capitalised phrase after "in/at/for/near/from/to" (or the words after
 * "in"), the whole message, the first path-like token, the first URL. Other
 * properties keep the schema-generated value. Deterministic: no rng here.
 *
 * Leaves out any real language understanding: a message that asks for a
 * tool's effect in words the tool's name and description do not use is not
 * matched, and a message that mentions those words in passing is.
 */
import type { FunctionTool } from '../protocol/objects.js';
import { setOwn } from './schema-args.js';
import { fitString } from './schema-strings.js';

/** Verbs and fillers tool names share; alone they say nothing about what a tool does. */
const GENERIC = new Set([
  'get', 'set', 'fetch', 'list', 'create', 'update', 'delete', 'remove', 'add', 'run', 'do', 'make', 'call', 'tool',
  'function', 'read', 'write', 'find', 'search', 'lookup', 'look', 'up', 'query', 'retrieve', 'current', 'new', 'by',
  'for', 'of', 'the', 'a', 'an', 'to', 'from', 'with', 'and', 'or', 'info', 'data', 'details', 'api', 'check', 'show',
]);

/** Words a description uses that say nothing about what the tool does. */
const STOP = new Set([
  ...GENERIC,
  'this', 'that', 'these', 'those', 'there', 'their', 'them', 'they', 'into', 'onto', 'over', 'under', 'about', 'when',
  'what', 'which', 'while', 'where', 'will', 'would', 'should', 'could', 'your', 'yours', 'have', 'having', 'been',
  'being', 'were', 'returns', 'return', 'given', 'using', 'use', 'used', 'uses', 'user', 'users', 'value', 'values',
  'specified', 'specific', 'optional', 'required', 'some', 'each', 'every', 'other', 'than', 'then', 'also', 'only',
  'more', 'most', 'such', 'like', 'just', 'please', 'tell', 'know', 'want', 'need', 'help', 'thing', 'things',
]);

/** A message word or tool word, folded so plurals and possessives compare equal. */
function fold(word: string): string {
  let w = word.toLowerCase().replace(/['’]s$/, '');
  if (w.length > 4 && w.endsWith('ies')) w = `${w.slice(0, -3)}y`;
  else if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) w = w.slice(0, -1);
  return w;
}

/** Words of a message: runs of letters, digits, `_`, `'` and `-` (so `my_get_weather` stays one word). */
function messageWords(text: string): Set<string> {
  return new Set((text.match(/[\p{L}\p{N}_'’-]+/gu) ?? []).map(fold));
}

/** `get_weather`, `getWeather`, `get-weather` → get, weather. */
function nameWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter((w) => w !== '')
    .map(fold);
}

/** Characters of a tool name (the edge enforces `^[a-zA-Z0-9_-]{1,64}$`); they are also the exact-mention boundary class. */
const NAME_RUN = /[A-Za-z0-9_-]+/g;

/**
 * A message read once for every tool: its words (folded) and its maximal
 * runs of name characters. Building it is linear in the message; asking
 * about each tool is then independent of the message's length, so 10,000
 * tools against a 1 MB message cost 10,000 set lookups, not 10,000 scans.
 */
export interface MessageIndex {
  text: string;
  words: Set<string>;
  runs: Set<string>;
}

/**
 * How much of a message tool matching reads: its first 64 Ki characters. A
 * request for a tool is phrased in a sentence, not found 10 MB into a pasted
 * log, and indexing a 16 MiB message would hold the event loop for seconds.
 */
export const MATCH_CHARS = 64 * 1024;

export function messageIndex(full: string): MessageIndex {
  const text = full.length > MATCH_CHARS ? full.slice(0, MATCH_CHARS) : full;
  return { text, words: messageWords(text), runs: new Set(text.match(NAME_RUN) ?? []) };
}

/** The name appears with no name character on either side. */
function mentionsExactly(msg: MessageIndex, name: string): boolean {
  // A name made only of name characters is mentioned exactly when it is one of the message's maximal runs.
  if (/^[A-Za-z0-9_-]+$/.test(name)) return msg.runs.has(name);
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?<![\\w-])${escaped}(?![\\w-])`).test(msg.text);
}

/** 0 when the message does not ask for the tool; higher is a plainer request. */
export function relevance(tool: FunctionTool, text: string | MessageIndex): number {
  const msg = typeof text === 'string' ? messageIndex(text) : text;
  if (mentionsExactly(msg, tool.name)) return 100;
  const words = msg.words;
  const all = nameWords(tool.name);
  const content = all.filter((w) => !GENERIC.has(w));
  const nameHits = content.filter((w) => words.has(w)).length;
  const described = new Set(
    (tool.description ?? '').match(/[\p{L}\p{N}]+/gu)?.map(fold).filter((w) => w.length >= 4 && !STOP.has(w)) ?? [],
  );
  const descHits = [...described].filter((w) => words.has(w)).length;
  if (nameHits > 0) return 10 * nameHits + descHits;
  return descHits >= 2 ? descHits : 0;
}

type Slot = 'location' | 'query' | 'path' | 'url';

const SLOT_WORDS: Record<Slot, ReadonlySet<string>> = {
  location: new Set(['location', 'city', 'place', 'address', 'town', 'country', 'region', 'area', 'destination', 'where', 'locality']),
  query: new Set(['query', 'q', 'search', 'question', 'prompt', 'text', 'input', 'topic', 'term', 'keyword', 'message', 'subject']),
  path: new Set(['path', 'file', 'filename', 'filepath', 'dir', 'directory', 'folder']),
  url: new Set(['url', 'uri', 'link', 'href']),
};

function slotOf(property: string): Slot | undefined {
  const words = nameWords(property);
  for (const slot of ['url', 'path', 'location', 'query'] as const) {
    if (words.some((w) => SLOT_WORDS[slot].has(w))) return slot;
  }
  return undefined;
}

/** The value the message gives for a slot, or undefined when it gives none. */
export function extract(slot: Slot, text: string): string | undefined {
  const flat = text.replace(/\s+/g, ' ').trim();
  switch (slot) {
    case 'url':
      return flat.match(/https?:\/\/[^\s<>"')]+/)?.[0].replace(/[.,;:!?]+$/, '');
    case 'path': {
      const tokens = flat.split(' ').map((t) => t.replace(/^[`'"(]+|[`'"),.;:!?]+$/g, ''));
      return tokens.find((t) => /\//.test(t) && !/^https?:/.test(t)) ?? tokens.find((t) => /^[\w.-]+\.[A-Za-z0-9]{1,6}$/.test(t));
    }
    case 'location': {
      const proper = flat.match(/\b(?:in|at|for|near|from|to)\s+((?:[A-Z][\p{L}'’.-]*)(?:\s+(?:[A-Z][\p{L}'’.-]*|of|de|del|la|le))*)/u);
      if (proper) return proper[1]!.replace(/(?:\s+(?:of|de|del|la|le))+$/, '').replace(/[.'’]+$/, '');
      const after = flat.match(/\bin\s+([^?.!,;:]+)/i);
      return after ? after[1]!.trim().split(' ').slice(0, 4).join(' ') : undefined;
    }
    case 'query': {
      const q = flat.replace(/[?!.]+$/, '');
      return q === '' ? undefined : q;
    }
  }
}

/**
 * Overwrite the string properties the message supplies (see the header) in
 * schema-generated arguments; properties with an enum or const, or not typed
 * as strings, are left alone.
 */
export function fillFromMessage(
  args: Record<string, unknown>,
  parameters: Record<string, unknown> | null | undefined,
  text: string,
): Record<string, unknown> {
  const props = parameters?.['properties'];
  if (typeof props !== 'object' || props === null) return args;
  const out = { ...args };
  for (const [name, schema] of Object.entries(props as Record<string, Record<string, unknown>>)) {
    if (typeof schema !== 'object' || schema === null || 'enum' in schema || 'const' in schema) continue;
    const type = schema['type'];
    const isString = type === 'string' || (Array.isArray(type) && type.includes('string'));
    if (!isString) continue;
    const slot = slotOf(name);
    const value = slot && extract(slot, text);
    if (value === undefined || value === '') continue;
    // Only where the schema takes it: its length bounds, its format; never under a pattern (model/schema-strings.ts).
    const fitted = fitString(schema, value);
    if (fitted !== undefined) setOwn(out, name, fitted);
  }
  return out;
}
