/**
 * The one tokenizer of the project: o200k_base (the GPT-4o / o-series / GPT-5
 * vocabulary), wrapped so every layer counts and splits text the same way.
 *
 * Used by the pipeline (rendering the prompt into token ids the prefix cache
 * is keyed on), by the policies (counting visible tokens) and by the
 * simulated model (splitting output into one delta per token). Leaves out
 * chat templates and special tokens: text that happens to contain
 * `<|endoftext|>` or similar is encoded as ordinary text, so user input can
 * never make tokenization throw.
 *
 * Linear on any input. The library pre-tokenizes with the o200k split regex
 * and byte-pair-merges each pre-token; its merge is quadratic in the
 * pre-token's length, so one run of 200,000 `a`s (a single pre-token) took
 * ~25 s. Here the same regex splits the text, and a pre-token longer than
 * `MAX_PRETOKEN_CHARS` is merged in pieces of at most that many UTF-16 units
 * (never splitting a surrogate pair), the way production tokenizers cap
 * their merge input. Text whose pre-tokens are all shorter — every ordinary
 * text — encodes exactly as the library encodes it: the loop below is the
 * library's encode loop and model/bpe-merge.ts its merge, over its own regex
 * and merge ranks (read from its data file, model/bpe-tables.ts).
 *
 * `encodeStep` does the work in bounded slices, so callers that must not
 * block the event loop (the render stage) can yield between slices.
 *
 * The tables (model/bpe-tables.ts, ~6 MB, ~0.1–0.2 s to build) load when first needed,
 * not at start-up. A server waits for them without blocking its loop:
 * `afterTokenizer` runs a step once `tokenizerReady()` has built them a
 * slice at a time (the render stage, the first tokenizing stage of every
 * request, goes through it, so everything after it finds them loaded).
 * Concurrent waiters share one load; a failed load rejects each waiter with
 * a `server_error` and the next caller tries again. A synchronous caller
 * that finds them unloaded (the CLI, tests, `llr serve --eager-tokenizer` at
 * start-up) builds them in one go. The merge cache (model/bpe-merge.ts)
 * grows with use, up to its bound.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/esm/encodingParams/constants';
import { createO200KSpecialTokenMap } from 'gpt-tokenizer/esm/encodingParams/o200k_base';
import { WireError } from '../protocol/errors.js';
import { buildTablesWork, rankOfString, tokenBytes, type BpeTables } from './bpe-tables.js';
import { BpeMerger } from './bpe-merge.js';
import { runCooperative, runSync } from '../cooperative.js';

/**
 * Longest pre-token merged in one piece (UTF-16 code units). Longer ones
 * (runs of one letter, base64 without digits, long whitespace) are merged in
 * pieces of this size, so tokenizing stays linear: `npm run bench:tokenize`
 * gives 0.54–0.71 s per MB of random CJK, emoji or Latin words on the
 * project's 2-vCPU VM, ~0.1 s per MB of ordinary text (the merge cache).
 * Real words, identifiers and numbers are far shorter.
 */
export const MAX_PRETOKEN_CHARS = 256;

/** `<|im_start|>` and `<|im_end|>` as gpt-tokenizer numbers them (the render stage frames items with them); checked when the tables load. */
export const IM_START = 200003;
export const IM_END = 200004;

interface Tables {
  bpe: BpeMerger;
  /** String tokens decoded so far, by rank (filled as the model's output uses them). */
  strings: Array<string | undefined>;
  /** Special tokens by id (decoded as their text, as the library decodes them). */
  special: Map<number, string>;
}
let tables: Tables | null = null;
let pending: Promise<void> | null = null;
let failures = 0;
let loadMs: number | null = null;
/** Bumped when the source changes, so a load begun on the old source is not installed. */
let generation = 0;

/** Where the tables' data comes from: the library's data file, or (tests) a source that gates or fails the read. */
export interface TokenizerSource {
  read(): Promise<Uint8Array>;
  readSync(): Uint8Array;
}

const librarySource: TokenizerSource = {
  read: () => readFile(dataFile()),
  readSync: () => readFileSync(dataFile()),
};
let source = librarySource;

function dataFile(): string {
  return createRequire(import.meta.url).resolve('gpt-tokenizer/data/o200k_base.tiktoken');
}

/**
 * Read the tables from `src` from now on (null: the library's data file),
 * dropping any loaded ones so the next use loads again. For tests: a load
 * they can hold open or make fail. A load already under way finishes on its
 * old source and is not installed.
 */
export function setTokenizerSource(src: TokenizerSource | null): void {
  source = src ?? librarySource;
  tables = null;
  pending = null;
  loadMs = null;
  generation++;
}

function install(t: BpeTables, startedAt: number): Tables {
  const specials = createO200KSpecialTokenMap();
  if (specials.get('<|im_start|>') !== IM_START || specials.get('<|im_end|>') !== IM_END) {
    throw new Error('gpt-tokenizer: o200k special token ids differ from the ones the render stage uses');
  }
  if (t.size > Math.min(...specials.values())) throw new Error('o200k data: ranks overlap the special tokens');
  tables ??= { bpe: new BpeMerger(t), strings: new Array<string | undefined>(t.size), special: new Map([...specials].map(([k, v]) => [v, k])) };
  loadMs ??= performance.now() - startedAt;
  return tables;
}

/** The tables, built now in one go if nothing has built them yet (the synchronous path). */
function load(): Tables {
  if (tables) return tables;
  const t0 = performance.now();
  return install(runSync(buildTablesWork(source.readSync())), t0);
}

/**
 * Resolves once the tables are loaded, building them a slice at a time
 * (each slice a few ms of one loop turn) if nothing has yet. Concurrent
 * callers share one load. Rejects with a `server_error` WireError if the
 * load fails; the next call starts a new load.
 */
export function tokenizerReady(): Promise<void> {
  if (tables) return Promise.resolve();
  if (pending) return pending;
  const t0 = performance.now();
  const gen = generation;
  const from = source;
  const load = (async () => {
    const data = await from.read();
    const built = await runCooperative(buildTablesWork(data));
    if (gen === generation) install(built, t0);
  })();
  const settled: Promise<void> = load.then(
    () => {
      if (pending === settled) pending = null;
    },
    (cause: unknown) => {
      if (pending === settled) pending = null;
      failures++;
      throw new WireError('server_error', 'The tokenizer tables could not be loaded, so the request was not processed; try again.', null, { cause });
    },
  );
  pending = settled;
  return settled;
}

/** Run `step` once the tables are loaded: at once (no extra turn) when they are, after `tokenizerReady()` when not. */
export function afterTokenizer<T>(step: () => Promise<T>): Promise<T> {
  return tables ? step() : tokenizerReady().then(step);
}

/** Whether the tables are loaded, being loaded, or not yet asked for (`/llr/stats`), with how long the load took, how many loads failed and how many merges are cached. */
export function tokenizerState(): { state: 'unloaded' | 'loading' | 'loaded'; load_ms: number | null; failed_loads: number; merge_cache: number } {
  return { state: tables ? 'loaded' : pending ? 'loading' : 'unloaded', load_ms: loadMs, failed_loads: failures, merge_cache: tables?.bpe.cached ?? 0 };
}

/**
 * Encode pre-tokens of `text` from offset `from` (which must be a pre-token
 * boundary: 0 or a value this function returned), pushing their token ids to
 * `out`, until at least `maxChars` characters are consumed or the text ends.
 * Returns the offset reached (`text.length` when done). The regex has no
 * look-behind, so restarting at a boundary gives exactly the tokens one pass
 * would.
 */
export function encodeStep(text: string, from: number, out: number[], maxChars = Infinity): number {
  const cursor: EncodeCursor = { at: from, end: from };
  // A long pre-token is finished before returning (its end read, then its pieces merged): the caller restarts the
  // regex at the offset returned.
  do encodeSlice(text, cursor, out, maxChars);
  while (cursor.end > cursor.at || cursor.scan !== undefined);
  return cursor.at;
}

/**
 * Where encoding of a text stands: at `at`, which is a pre-token boundary,
 * or (when `end > at`) a piece boundary inside a long pre-token that ends at
 * `end`. Start with `{ at: 0, end: 0 }`; done when `at === text.length`.
 * `scan` is set while the end of the pre-token at `at` is still being read
 * (`PretokenScan`): a call may then return without moving `at`.
 */
export interface EncodeCursor {
  at: number;
  end: number;
  scan?: PretokenScan;
}

/**
 * Encode from `cursor` until at least `maxChars` characters are consumed or
 * the text ends, pushing token ids to `out` and moving the cursor. Unlike
 * `encodeStep` it also stops inside a long pre-token, between the pieces it
 * is merged in (`MAX_PRETOKEN_CHARS`): one run of megabytes without a space
 * (random CJK) is one pre-token, and encoding it in one call held the event
 * loop for seconds. The pieces a resumed call merges are the ones one call
 * would have: they are cut from the pre-token's start. It stops, too, after
 * reading `2 * pretokenWindow` characters of a pre-token whose end is still
 * unknown (`cursor.scan`), without moving `at`: call it again.
 */
export function encodeSlice(text: string, cursor: EncodeCursor, out: number[], maxChars: number): void {
  const { bpe } = load();
  const stopAt = cursor.at + maxChars;
  if (cursor.end > cursor.at) {
    cursor.at = encodePieces(text, cursor.at, cursor.end, out, bpe, stopAt);
    if (cursor.at < cursor.end) return;
    if (cursor.at >= stopAt) return;
  }
  let end: number;
  const win: PretokenWindow = { view: null, start: 0, end: 0 };
  while ((end = nextPretoken(text, cursor, win)) >= 0) {
    const start = pretokenStart;
    if (end - start <= MAX_PRETOKEN_CHARS) {
      encodePretoken(text.slice(start, end), out, bpe);
      cursor.at = cursor.end = end;
    } else {
      cursor.end = end;
      cursor.at = encodePieces(text, start, end, out, bpe, stopAt);
      if (cursor.at < end) return;
    }
    if (cursor.at >= stopAt) return;
  }
  if (end === PENDING) return;
  cursor.at = cursor.end = text.length;
}

/** Where the pre-token `nextPretoken` found starts (a module variable: no array per pre-token). */
let pretokenStart = 0;

/** `nextPretoken`: the pre-token's end is still being read (`cursor.scan`); call again. */
const PENDING = -2;

/**
 * The end of the next pre-token at or after `cursor.at` (its start in
 * `pretokenStart`), -1 when the text has none, or `PENDING`. The split regex
 * matches every character (each alternative is non-empty and together they
 * cover letters, numbers, other characters and white space), so the next
 * pre-token starts at `cursor.at`: a sticky `test` finds its end without the
 * match array and string `exec` allocates per pre-token (most of the
 * tokenizer's garbage, and a step's). Far from the text's end the match is
 * made in a window of it (`windowedPretoken`), and a pre-token whose end the
 * window cannot tell is read run by run over calls (`scanPretoken`), so no
 * call reads more than a few windows of characters. The general search stays
 * as the fallback, with its stack-overflow handling.
 */
function nextPretoken(text: string, cursor: EncodeCursor, win: PretokenWindow): number {
  const from = cursor.at;
  if (from >= text.length) return -1;
  if (cursor.scan !== undefined || text.length - from > 2 * pretokenWindow) {
    let end: number;
    if (cursor.scan !== undefined) end = scanPretoken(text, cursor.scan);
    else {
      end = windowedPretoken(text, from, win);
      if (end <= SCAN_WHITE) {
        cursor.scan = startScan(text, from, end);
        end = scanPretoken(text, cursor.scan);
      }
    }
    if (end !== PENDING) cursor.scan = undefined;
    if (end >= 0) {
      pretokenStart = from;
      return end;
    }
    if (end === PENDING) return PENDING;
  }
  const sticky = STICKY;
  sticky.lastIndex = from;
  let found = false;
  noteRead(text.length - from);
  try {
    found = sticky.test(text);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
  }
  if (found) {
    pretokenStart = from;
    return sticky.lastIndex;
  }
  const re = SPLIT;
  re.lastIndex = from;
  const m = splitNext(re, text);
  if (m === null) return -1;
  pretokenStart = m.index;
  return re.lastIndex;
}

/**
 * Characters a window of the text holds past a pre-token's start, at least (`windowedPretoken`); a multiple of
 * `MAX_PRETOKEN_CHARS`. One match of the split regex over a run of one pre-token reads the whole run in one go, at
 * up to ~60 ns a character (lone surrogates, CJK): 2.5 million lone surrogates held the loop 130-400 ms in one
 * turn. A window bounds that to ~8 ms.
 */
let pretokenWindow = 64 * 1024;

/** Set the window (`pretokenWindow`) and return the one it replaces: for tests that check windowed and whole matches agree. */
export function setPretokenWindow(chars: number): number {
  if (!Number.isInteger(chars) || chars < MAX_PRETOKEN_CHARS || chars % MAX_PRETOKEN_CHARS !== 0) throw new RangeError(`pretoken window ${chars}: a multiple of ${MAX_PRETOKEN_CHARS}`);
  const was = pretokenWindow;
  pretokenWindow = chars;
  return was;
}

/** The most characters past its start any one regex call of the tokenizer was given since the last call (a test's bound check). */
export function widestPretokenRead(): number {
  const was = widestRead;
  widestRead = 0;
  return was;
}

let widestRead = 0;

function noteRead(chars: number): void {
  if (chars > widestRead) widestRead = chars;
}

/** The slice of the text `windowedPretoken` matches in, kept for the pre-tokens after it (one per `encodeSlice` call). */
interface PretokenWindow {
  view: string | null;
  start: number;
  end: number;
}

/**
 * Characters past a match's end (or past the run `leadRunEnd` finds) the regex may have read: a contraction after
 * a run of letters (`'ll`, `'ve`, `'re`) reads up to three, a run's end one.
 */
const MATCH_READ_AHEAD = 4;

/** `windowedPretoken`: the pre-token is white space, letters or punctuation, and only reading its runs to their ends can tell where it ends (`scanPretoken`). */
const SCAN_WHITE = -3;
const SCAN_LETTERS = -4;
const SCAN_PUNCT = -5;

/**
 * The end of the pre-token at `from`, matched in a window `[start, end)` of the text that holds at least
 * `pretokenWindow` characters past `from` (a slice: no copy); `SCAN_*` when its end is further than the window
 * can tell, or -1 when only a match over the text can tell.
 *
 * The regex reads forward only, so its match in the window is its match in the text unless it read the window's
 * end. What each alternative reads past the match's end is bounded (`MATCH_READ_AHEAD`), except the letter
 * alternatives' leading run (`leadRunEnd`: read whole, then given back) and the white-space alternatives
 * (`\s*[\r\n]+`, `\s+(?!\S)`, `\s+`), which read the whole white-space run first: for them the run's end must be
 * in the window. A match reaching the window's end from a window that starts at `from` (a pre-token longer than
 * the window) is cut at the boundary of its merge pieces nearest `from + pretokenWindow` (where `encodePieces`
 * cuts, so the pieces are the same): matched again from there, the rest of the run ends where the whole would
 * (each alternative's end depends only on the run after the cut, which is more than a window from it). Where the
 * run matched from that boundary could end elsewhere (`restartsAlike`), or the leading or white-space run reaches
 * past the window, its runs are read to their ends instead (`scanPretoken`).
 */
function windowedPretoken(text: string, from: number, win: PretokenWindow): number {
  const size = pretokenWindow;
  for (;;) {
    if (win.view === null || from < win.start || from + size > win.end) {
      win.start = from;
      win.end = Math.min(text.length, from + 2 * size);
      win.view = text.slice(win.start, win.end);
    }
    const sticky = STICKY;
    sticky.lastIndex = from - win.start;
    noteRead(win.end - from);
    if (!sticky.test(win.view)) return -1;
    const end = win.start + sticky.lastIndex;
    if (win.end === text.length) return end;
    // A white-space alternative's match is white space only; any other starting with white space (a prefix before
    // letters or punctuation) has no white space second.
    const whiteSpace = isWhiteSpace(text, from) && (end - from === 1 || isWhiteSpace(text, from + 1));
    if (whiteSpace) {
      NON_WHITE_SPACE.lastIndex = end - win.start;
      if (NON_WHITE_SPACE.test(win.view)) return end;
    } else if (end + MATCH_READ_AHEAD < win.end && leadRunEnd(win.view, from - win.start) + MATCH_READ_AHEAD < win.view.length) return end;
    if (win.start < from) {
      win.view = null;
      continue;
    }
    if (whiteSpace) return SCAN_WHITE;
    // A short match whose leading run the regex read past the window (`ʰZZZ…`: the `ʰ` alone unless a lower-case letter follows the capitals).
    if (end + MATCH_READ_AHEAD < win.end) return SCAN_LETTERS;
    const letters = isLetterOrMark(text, from) || (!isLineBreak(text, from) && isLetterOrMark(text, afterCodePoint(text, from)));
    const cut = pieceBoundary(text, from, from + size);
    if (restartsAlike(text, from, cut, win, letters)) return cut;
    return letters ? SCAN_LETTERS : SCAN_PUNCT;
  }
}

/**
 * Where the run of characters of the letter alternatives' leading class (`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*`) that
 * the regex reads at `i` ends: from `i`, or from after `i` when that is a prefix (`[^\r\n\p{L}\p{N}]`, tried
 * first). A match may end inside such a run after its first alternative read all of it (its greedy leading run,
 * given back to find a letter of the trailing class: `ʰʰZZZ` ends after the `ʰ`s, `ʰʰZZZa` after the `a`).
 * `i` itself when no such run starts there, the common case.
 */
function leadRunEnd(view: string, i: number): number {
  UPPER_RUN.lastIndex = matchesAt(PREFIX, view, i) ? afterCodePoint(view, i) : i;
  UPPER_RUN.test(view);
  return UPPER_RUN.lastIndex;
}

const UPPER_RUN = /[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*/uy;
const PREFIX = /[^\r\n\p{L}\p{N}]/uy;

/**
 * Whether the split regex matched again from `cut`, inside a pre-token that starts at `from` and runs on more than
 * a window past `cut` (`win` starts at `from`), ends where the pre-token does.
 *
 * A run of letters (`from` a letter or mark, or a prefix before one) is matched by the first alternative as a
 * leading run of `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]` then a trailing run of `[\p{Ll}\p{Lm}\p{Lo}\p{M}]` (or by the
 * second, leading run only). From a lower-case letter (trailing class only) the match is the same trailing run; from
 * an upper-case or title-case letter (leading class only) the same leading run and what follows it. From a character
 * of both classes only when no lower-case letter came before it since `from`: then it is in the leading run too
 * (matched again inside the trailing run, a leading run would take what the trailing run stopped at: `ś́ʰZZ`).
 *
 * A run of punctuation (`[^\s\p{L}\p{N}]+[\r\n/]*`): from a point of its leading run (no line break since `from`:
 * its tail starts with one; matched again in the tail, a slash would lead a punctuation run of its own, a line break
 * white space's) where neither the character nor the next is a mark (a mark after a prefix starts a letter run; the next is the next code point: `😀́` is a prefix and a mark).
 */
function restartsAlike(text: string, from: number, cut: number, win: PretokenWindow, letters: boolean): boolean {
  if (!letters) {
    if (isWhiteSpace(text, cut) || isMark(text, cut) || isMark(text, afterCodePoint(text, cut))) return false;
    LINE_BREAK.lastIndex = from - win.start;
    return !(LINE_BREAK.test(win.view!) && LINE_BREAK.lastIndex <= cut - win.start);
  }
  if (matchesAt(ONE_CASE, text, cut)) return true;
  if (!isLetterOrMark(text, cut)) return false;
  LOWER_CASE.lastIndex = from - win.start;
  return !(LOWER_CASE.test(win.view!) && LOWER_CASE.lastIndex <= cut - win.start);
}

/**
 * A pre-token whose end its window could not tell (`windowedPretoken`), read run by run — each run with a regex
 * of one character class, which reads a run once and gives nothing back — over as many `encodeSlice` calls as it
 * takes, at most `2 * pretokenWindow` characters a call. Its end is then what the split regex's alternatives make
 * of those runs (`finishRun`): the same end as one match over the text, without a call that reads megabytes
 * (the run of 8 M repeats of `日` after an `a`, which the regex reads whole, then stack-overflows on).
 */
interface PretokenScan {
  from: number;
  /** The run being read: white space, the letters' leading or trailing run, punctuation or its tail. */
  phase: typeof WHITE | typeof UPPER | typeof LOWER | typeof PUNCT | typeof TAIL;
  /** Where the run being read starts: the letters' leading run starts after a prefix, if any. */
  start: number;
  /** How far it has been read. */
  at: number;
  /** White space: the end of the last line break read; the leading run: the end of the last letter of both classes read; else -1. */
  mark: number;
}

const WHITE = 0;
const UPPER = 1;
const LOWER = 2;
const PUNCT = 3;
const TAIL = 4;

/** The runs `scanPretoken` reads, by phase: each one class, sticky. */
const RUNS: readonly RegExp[] = [/\s*/uy, /[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*/uy, /[\p{Ll}\p{Lm}\p{Lo}\p{M}]*/uy, /[^\s\p{L}\p{N}]*/uy, /[\r\n/]*/y];
/** Past the last letter of both classes in a leading run: each leading-only run is followed by one of both classes. */
const THROUGH_LAST_BOTH = /(?:[\p{Lu}\p{Lt}]*[\p{Lm}\p{Lo}\p{M}])*/uy;
const LOWER_LETTER = /\p{Ll}/uy;
const CONTRACTION = /'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])/y;

function startScan(text: string, from: number, kind: number): PretokenScan {
  if (kind === SCAN_WHITE) return { from, phase: WHITE, start: from, at: from, mark: -1 };
  if (kind === SCAN_PUNCT) {
    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`: the space is taken when punctuation follows it (it did: the match was longer).
    const start = text.charCodeAt(from) === 32 ? from + 1 : from;
    return { from, phase: PUNCT, start, at: start, mark: -1 };
  }
  const start = matchesAt(PREFIX, text, from) ? afterCodePoint(text, from) : from;
  return { from, phase: UPPER, start, at: start, mark: -1 };
}

/** Read on (`PretokenScan`): the pre-token's end once its last run ends, `PENDING` while it goes on, or -1 (only a match over the text can tell). */
function scanPretoken(text: string, scan: PretokenScan): number {
  let budget = 2 * pretokenWindow;
  while (budget > 0) {
    let limit = Math.min(text.length, scan.at + budget);
    // Never between the halves of a surrogate pair: a half alone is of no letter class.
    if (limit < text.length && isHighSurrogate(text.charCodeAt(limit - 1))) limit++;
    budget -= limit - scan.at;
    const view = text.slice(scan.at, limit);
    noteRead(view.length);
    const run = RUNS[scan.phase]!;
    run.lastIndex = 0;
    run.test(view);
    const read = run.lastIndex;
    if (scan.phase === WHITE && read > 0) {
      const lineBreak = Math.max(view.lastIndexOf('\n', read - 1), view.lastIndexOf('\r', read - 1));
      if (lineBreak >= 0) scan.mark = scan.at + lineBreak + 1;
    } else if (scan.phase === UPPER && read > 0) {
      THROUGH_LAST_BOTH.lastIndex = 0;
      THROUGH_LAST_BOTH.test(read === view.length ? view : view.slice(0, read));
      if (THROUGH_LAST_BOTH.lastIndex > 0) scan.mark = scan.at + THROUGH_LAST_BOTH.lastIndex;
    }
    scan.at += read;
    if (scan.at === limit && limit < text.length) continue;
    const end = finishRun(text, scan);
    if (end !== PENDING) return end;
  }
  return PENDING;
}

/**
 * The run `scan` read ends at `scan.at`: the pre-token's end as the split regex makes it, or `PENDING` with the
 * next run to read.
 */
function finishRun(text: string, scan: PretokenScan): number {
  const at = scan.at;
  switch (scan.phase) {
    case WHITE:
      // `\s*[\r\n]+` ends after the run's last line break; else `\s+(?!\S)` leaves the run's last character to what
      // follows it, unless the text ends there; `\s+` takes a run of one.
      if (scan.mark >= 0) return scan.mark;
      return at === text.length || at - scan.from < 2 ? at : at - 1;
    case UPPER: {
      // `[^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]*[Ll Lm Lo M]+'s?`: the leading run, then a lower-case letter's trailing run…
      if (at < text.length && matchesAt(LOWER_LETTER, text, at)) {
        scan.phase = LOWER;
        scan.start = at;
        return PENDING;
      }
      // …or the leading run given back to its last letter of both classes (from after the prefix, then from the
      // prefix: a mark is a prefix and a letter of both classes)…
      const both = scan.mark >= 0 ? scan.mark : scan.start > scan.from && isMark(text, scan.from) ? scan.start : -1;
      if (both >= 0) return both === at ? at + contraction(text, at) : both;
      // …else `[^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]+[Ll Lm Lo M]*'s?`, the leading run alone.
      if (at > scan.start) return at + contraction(text, at);
      return -1;
    }
    case LOWER:
      return at + contraction(text, at);
    case PUNCT:
      if (at === scan.start) return -1;
      scan.phase = TAIL;
      scan.start = at;
      return PENDING;
    default:
      return at;
  }
}

/** The length of the contraction (`'ll`, `'s`, …) at `i`, or 0. */
function contraction(text: string, i: number): number {
  CONTRACTION.lastIndex = i;
  return CONTRACTION.test(text) ? CONTRACTION.lastIndex - i : 0;
}

function matchesAt(re: RegExp, text: string, i: number): boolean {
  re.lastIndex = i;
  return re.test(text);
}

/** A letter of one of the two classes only: lower-case, or upper- or title-case. */
const ONE_CASE = /[\p{Ll}\p{Lu}\p{Lt}]/uy;
const LOWER_CASE = /\p{Ll}/gu;
const LINE_BREAK = /[\r\n]/g;

/** Where the code point at `i` ends (a surrogate pair is one). */
function afterCodePoint(text: string, i: number): number {
  const c = text.charCodeAt(i + 1);
  return isHighSurrogate(text.charCodeAt(i)) && c >= 0xdc00 && c <= 0xdfff ? i + 2 : i + 1;
}

function isLineBreak(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  return c === 10 || c === 13;
}

function isLetterOrMark(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  if (c < 0x80) return (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
  LETTER_OR_MARK.lastIndex = i;
  return LETTER_OR_MARK.test(text);
}

function isMark(text: string, i: number): boolean {
  if (text.charCodeAt(i) < 0x80) return false;
  MARK.lastIndex = i;
  return MARK.test(text);
}

const LETTER_OR_MARK = /[\p{L}\p{M}]/uy;
const MARK = /\p{M}/uy;

/** The last boundary at or before `limit` of the merge pieces of a long pre-token starting at `from` (`encodePieces`). */
function pieceBoundary(text: string, from: number, limit: number): number {
  let i = from;
  while (i + MAX_PRETOKEN_CHARS <= limit) {
    let to = i + MAX_PRETOKEN_CHARS;
    if (isHighSurrogate(text.charCodeAt(to - 1))) to--;
    i = to;
  }
  return i;
}

/** Whether `text[i]` is white space as the split regex's `\s` reads it. */
function isWhiteSpace(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  if (c < 0x80) return c === 32 || (c >= 9 && c <= 13);
  WHITE_SPACE.lastIndex = i;
  return WHITE_SPACE.test(text);
}

const WHITE_SPACE = /\s/uy;
const NON_WHITE_SPACE = /\S/g;

/**
 * The next pre-token from `re.lastIndex`. V8's regex engine overflows its
 * stack on a match of millions of some characters (about 4 M repeats of a
 * combining mark or a CJK character, found by an outside attack; the
 * library throws the same): then the run up to the next white space is
 * taken as one pre-token, merged in pieces like any long one, instead of
 * failing a valid request with a server error. The window and the scan keep
 * every match the server makes to two windows of text, far below that; the
 * fallback stays for a match over a whole text (`setPretokenWindow` raised),
 * where it can split such a run otherwise than the regex would (digits after
 * 5 M `日`s).
 */
function splitNext(re: RegExp, text: string): RegExpExecArray | null {
  const from = re.lastIndex;
  try {
    return re.exec(text);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    let end = from + 1;
    while (end < text.length && !/\s/.test(text[end]!)) end++;
    re.lastIndex = end;
    return Object.assign([text.slice(from, end)], { index: from, input: text, groups: undefined }) as RegExpExecArray;
  }
}

/**
 * Merge the long pre-token `text[from, end)` — `from` its start or a piece
 * boundary a previous call returned — in pieces of `MAX_PRETOKEN_CHARS`,
 * until `stopAt`; returns the piece boundary reached (`end` when done).
 */
function encodePieces(text: string, from: number, end: number, out: number[], bpe: BpeMerger, stopAt: number): number {
  let i = from;
  while (i < end) {
    let to = Math.min(i + MAX_PRETOKEN_CHARS, end);
    // Never cut between the halves of a surrogate pair: each half alone would encode as U+FFFD.
    const last = text.charCodeAt(to - 1);
    if (to < end && last >= 0xd800 && last <= 0xdbff) to--;
    for (const t of bpe.encode(text.slice(i, to))) out.push(t);
    i = to;
    if (i >= stopAt) break;
  }
  return i;
}

/**
 * The split regex, one for the module: `encodeStep` is synchronous and sets
 * `lastIndex` before each use, so nothing can see another call's state (a
 * new RegExp per call cost more than encoding a short text).
 */
const SPLIT = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags);
/** The same regex anchored at `lastIndex` (`nextPretoken`). */
const STICKY = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags.replace('g', '') + 'y');

/** A pre-token's UTF-8 bytes, for the whole-token lookup (3 bytes per UTF-16 unit at most). */
const utf8 = new Uint8Array(3 * MAX_PRETOKEN_CHARS);
const utf8Encoder = new TextEncoder();

/** A pre-token of at most `MAX_PRETOKEN_CHARS`: one token, or its merge. */
function encodePretoken(piece: string, out: number[], bpe: BpeMerger): void {
  const rank = rankOfString(bpe.tables, piece, utf8, utf8Encoder.encodeInto(piece, utf8).written);
  if (rank !== undefined) out.push(rank);
  else for (const t of bpe.encode(piece)) out.push(t);
}

/**
 * Load the tables now, in one go (`llr serve --eager-tokenizer` does at
 * start-up, so not even its first request waits for them).
 */
export function loadTokenizer(): void {
  load();
}

/** The o200k token ids of `text`. */
export function encodeText(text: string): number[] {
  const out: number[] = [];
  encodeStep(text, 0, out);
  return out;
}

/** How many o200k tokens `text` encodes to (the same count `encodeText` gives). */
export function countTokens(text: string): number {
  return encodeText(text).length;
}

/**
 * Split `text` into the string pieces of its o200k tokens, in order, so that
 * `tokenPieces(s).join('') === s` for any well-formed string.
 *
 * A token can end in the middle of a multi-byte UTF-8 character (emoji, CJK).
 * Such bytes are held back and emitted with the token that completes the
 * character (as the library's `decodeGenerator` does), so a piece is never a
 * broken character; the cost is
 * that there can be fewer pieces than tokens. The simulated model streams each
 * piece as one delta and counts it as one output token, so usage is the piece
 * count (at most the true token count). Lone surrogates are not well-formed
 * and come back as U+FFFD.
 *
 * The decoder below is shared module state, used synchronously and flushed
 * at the end of each call, so no bytes carry over from one call to the next
 * (ids that end mid-character give U+FFFD there).
 */
export function tokenPieces(text: string): string[] {
  if (text === '') return [];
  return piecesOf(encodeText(text));
}

/** The string pieces of token ids (see `tokenPieces`), for a caller that keeps the ids too. */
export function piecesOf(ids: readonly number[]): string[] {
  const t = load();
  const out: string[] = [];
  let buf = '';
  for (const id of ids) {
    const v = tokenValue(t, id);
    // An id that is no token is skipped, as the library's decoder skips it.
    if (v === undefined || v === '') continue;
    buf += typeof v === 'string' ? v : pieceDecoder.decode(v, { stream: true });
    // Wait for the low half of a surrogate pair (a character split across tokens).
    if (buf.length === 0 || isHighSurrogate(buf.charCodeAt(buf.length - 1))) continue;
    out.push(buf);
    buf = '';
  }
  buf += pieceDecoder.decode();
  if (buf.length > 0) out.push(buf);
  return out;
}

const pieceDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
const stringDecoder = new TextDecoder('utf-8', { ignoreBOM: true });

/** What id `r` decodes to, as the library's table holds it: a string token's text, a bytes token's bytes, a special token's name. */
function tokenValue(t: Tables, r: number): string | Uint8Array | undefined {
  const tables = t.bpe.tables;
  if (!Number.isInteger(r) || r < 0 || r >= tables.size) return t.special.get(r);
  if (!tables.isString[r]) return tokenBytes(tables, r);
  return (t.strings[r] ??= stringDecoder.decode(tokenBytes(tables, r)));
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

/** How many ordinary tokens the vocabulary has (ids 0 to this − 1; special tokens come after). */
export function vocabularySize(): number {
  return load().bpe.tables.size;
}

/**
 * Ordinary token `id`'s bytes and its text (those bytes as UTF-8, U+FFFD for a sequence the token holds only part
 * of, as the API shows such a token), or undefined for an id that is no ordinary token. For logprobs' alternatives.
 */
export function tokenOf(id: number): { text: string; bytes: Uint8Array } | undefined {
  const t = load();
  const tables = t.bpe.tables;
  if (!Number.isInteger(id) || id < 0 || id >= tables.size) return undefined;
  const bytes = tokenBytes(tables, id);
  return { text: tables.isString[id] ? (t.strings[id] ??= stringDecoder.decode(bytes)) : stringDecoder.decode(bytes), bytes };
}
