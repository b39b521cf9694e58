/**
 * The o200k merge ranks, read from the plain data file gpt-tokenizer ships
 * (`data/o200k_base.tiktoken`: one `base64-bytes rank` line per token) into
 * a few typed arrays, a slice at a time.
 *
 * Why not the library's own tables: its `bpeRanks/o200k_base.js` is a 2.4 MB
 * script whose compile and run take ~0.25 s in one go, and its byte-pair
 * core builds a 200,000-entry string map in its constructor in one more
 * ~0.1–0.15 s turn (~60 MB of RSS in all). A server that loads them on its
 * first request holds `/health` that long. Here every token's bytes sit in
 * one buffer and an open-addressing hash over those bytes finds a rank: the
 * build is a few tens of ms, written as a `Work` generator (model/
 * cooperative.ts) that yields every `LINES_PER_SLICE` lines so a server can
 * build it between other work, and it holds ~6 MB.
 *
 * Same ranks as the library, entry by entry (test/unit/bpe-tables.test.ts
 * compares with its `bpeRanks` array), with its two kinds of entry: a token
 * whose bytes are well-formed UTF-8 and survive a decode/encode round trip (a
 * leading byte-order mark does not) is a *string* token, any other a *bytes*
 * token, and a gap in the ranks an empty string token. The lookups below
 * answer exactly as the library's string map and byte search do, quirks
 * included (a byte lookup drops a leading byte-order mark before it looks the
 * bytes up as a string), so every merge ranks every pair as the library would.
 */
import type { Work } from '../cooperative.js';

/** Lines of the data file parsed between yield points (well under 1 ms of work). */
export const LINES_PER_SLICE = 4000;

/** Hash slots: a power of two over twice the vocabulary, so probes stay short. */
const SLOTS = 1 << 19;

export interface BpeTables {
  /** Every token's bytes, back to back; token r is `bytes[start[r] .. start[r + 1])`. */
  bytes: Uint8Array;
  start: Uint32Array;
  /** 1 for a string token, 0 for a bytes token. */
  isString: Uint8Array;
  /** Open-addressing hash of the tokens' bytes: rank + 1, 0 for an empty slot. */
  slots: Int32Array;
  /** Ranks in the table (`start.length - 1`). */
  size: number;
}

/** Strict UTF-8 check (no overlongs, no surrogates, nothing past U+10FFFF): the library's test before a string lookup. */
export function isWellFormedUtf8(b: Uint8Array, from = 0, to = b.length): boolean {
  let i = from;
  while (i < to) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    // n continuation bytes, the least code point that needs them (shorter is an overlong form)
    let n = 3;
    let min = 0x10000;
    let cp = c & 0x07;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      min = 0x80;
      cp = c & 0x1f;
    } else if ((c & 0xf0) === 0xe0) {
      n = 2;
      min = 0x800;
      cp = c & 0x0f;
    } else if (c < 0xf0 || c > 0xf4) return false;
    if (i + n >= to) return false;
    for (let k = 1; k <= n; k++) {
      const d = b[i + k]!;
      if ((d & 0xc0) !== 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    i += n + 1;
  }
  return true;
}

function hash(b: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  return (h ^ (h >>> 15)) & (SLOTS - 1);
}

/** The rank of the token whose bytes are `key[from..to)` and whose kind is `string` (1) or bytes (0); undefined if none. */
function find(t: BpeTables, key: Uint8Array, from: number, to: number, kind: number): number | undefined {
  const len = to - from;
  for (let s = hash(key, from, to); ; s = (s + 1) & (SLOTS - 1)) {
    const r = t.slots[s]! - 1;
    if (r < 0) return undefined;
    const a = t.start[r]!;
    if (t.start[r + 1]! - a !== len || t.isString[r] !== kind) continue;
    let i = 0;
    while (i < len && t.bytes[a + i] === key[from + i]) i++;
    if (i === len) return r;
  }
}

/**
 * The library's rank lookup by bytes (a merge candidate): well-formed UTF-8
 * is looked up as a string token, after dropping a leading byte-order mark as
 * the library's decoder does; anything else as a bytes token.
 */
export function rankOfBytes(t: BpeTables, key: Uint8Array, from = 0, to = key.length): number | undefined {
  if (!isWellFormedUtf8(key, from, to)) return find(t, key, from, to, 0);
  if (to - from >= 3 && key[from] === 0xef && key[from + 1] === 0xbb && key[from + 2] === 0xbf) from += 3;
  return find(t, key, from, to, 1);
}

/** The library's lookup of a whole pre-token as a string token: `utf8` holds its UTF-8 bytes; a string with a lone surrogate is never one. */
export function rankOfString(t: BpeTables, s: string, utf8: Uint8Array, len: number): number | undefined {
  return (s as string & { isWellFormed(): boolean }).isWellFormed() ? find(t, utf8, 0, len, 1) : undefined;
}

/** Token `r`'s bytes (a view into the table). */
export function tokenBytes(t: BpeTables, r: number): Uint8Array {
  return t.bytes.subarray(t.start[r]!, t.start[r + 1]!);
}

/** Base64 digit values by character code (-1: not a digit, -2: '=' padding). */
const B64 = new Int8Array(256).fill(-1);
for (let i = 0; i < 64; i++) B64['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] = i;
B64[0x3d] = -2;

/**
 * Build the tables from the `.tiktoken` file's bytes, yielding every
 * `LINES_PER_SLICE` lines. Throws on a malformed line (a truncated or
 * foreign file), so a bad install fails loudly rather than tokenizing wrong.
 */
export function* buildTablesWork(data: Uint8Array): Work<BpeTables> {
  // Upper bounds from the file itself: a line per token, 3 bytes per 4 base64 digits.
  let lineCount = 1;
  for (let i = 0; i < data.length; i++) if (data[i] === 0x0a) lineCount++;
  if (lineCount * 2 > SLOTS) throw new Error('o200k data: more tokens than the hash holds');
  const bytes = new Uint8Array(Math.ceil((data.length * 3) / 4));
  const startAll = new Uint32Array(lineCount + 1);
  const kinds = new Uint8Array(lineCount);
  const t: BpeTables = { bytes, start: startAll, isString: kinds, slots: new Int32Array(SLOTS), size: 0 };
  yield;
  // The parse runs in a plain function, a slice per call: V8 optimises a hot loop there better than in a generator.
  const cursor: Cursor = { at: 0, end: 0, next: 0, lineCount };
  while (parseSlice(t, data, cursor, LINES_PER_SLICE)) yield;
  const { next, end } = cursor;
  if (next === 0) throw new Error('o200k data: no tokens');
  t.size = next;
  t.start = startAll.subarray(0, next + 1);
  t.isString = kinds.subarray(0, next);
  t.bytes = bytes.subarray(0, end);
  return t;
}

interface Cursor {
  /** Next byte of the data to read. */
  at: number;
  /** Bytes of `t.bytes` filled. */
  end: number;
  /** Next rank expected. */
  next: number;
  lineCount: number;
}

/** Parse up to `maxLines` lines from `c.at`; returns whether any data is left. */
function parseSlice(t: BpeTables, data: Uint8Array, c: Cursor, maxLines: number): boolean {
  const { bytes } = t;
  const n = data.length;
  let { at, end, next } = c;
  for (let lines = 0; at < n && lines < maxLines; ) {
    if (data[at] === 0x0a) {
      at++;
      continue;
    }
    const lineAt = at;
    // The token: base64 digits up to the space, decoded straight into `bytes`.
    let stop = end;
    let acc = 0;
    let bits = 0;
    let padded = false;
    for (; at < n && data[at] !== 0x20 && data[at] !== 0x0a; at++) {
      const v = B64[data[at]!]!;
      if (v === -2) padded = true;
      else if (v < 0 || padded) throw new Error(`o200k data: bad token at byte ${lineAt}`);
      else {
        acc = ((acc << 6) | v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
          bits -= 8;
          bytes[stop++] = (acc >> bits) & 0xff;
        }
      }
    }
    if (at >= n || data[at] !== 0x20 || stop === end) throw new Error(`o200k data: malformed line at byte ${lineAt}`);
    at++;
    // The rank: decimal digits up to the line's end.
    let rank = 0;
    const digitsAt = at;
    for (; at < n && data[at] !== 0x0a; at++) {
      const d = data[at]! - 0x30;
      if (d < 0 || d > 9 || at - digitsAt >= 9) throw new Error(`o200k data: bad rank at byte ${lineAt}`);
      rank = rank * 10 + d;
    }
    if (at === digitsAt || rank < next || rank >= c.lineCount) throw new Error(`o200k data: bad rank at byte ${lineAt}`);
    // A gap in the ranks is an empty string token in the library's table.
    for (; next < rank; next++) add(t, next, end, end, 1);
    const bom = stop - end >= 3 && bytes[end] === 0xef && bytes[end + 1] === 0xbb && bytes[end + 2] === 0xbf;
    add(t, rank, end, stop, !bom && isWellFormedUtf8(bytes, end, stop) ? 1 : 0);
    end = stop;
    next = rank + 1;
    lines++;
  }
  c.at = at;
  c.end = end;
  c.next = next;
  return at < n;
}

/** Add rank `r` (bytes already at `bytes[from..to)`); an equal token added earlier is replaced, as a later `Map.set` replaces an earlier one. */
function add(t: BpeTables, r: number, from: number, to: number, kind: number): void {
  t.start[r] = from;
  t.start[r + 1] = to;
  t.isString[r] = kind;
  const len = to - from;
  for (let s = hash(t.bytes, from, to); ; s = (s + 1) & (SLOTS - 1)) {
    const old = t.slots[s]! - 1;
    if (old < 0) {
      t.slots[s] = r + 1;
      return;
    }
    const a = t.start[old]!;
    if (t.start[old + 1]! - a !== len || t.isString[old] !== kind) continue;
    let i = 0;
    while (i < len && t.bytes[a + i] === t.bytes[from + i]) i++;
    if (i === len) {
      t.slots[s] = r + 1;
      return;
    }
  }
}
