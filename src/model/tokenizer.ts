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
 * library's own encode loop, over its own regex and merge ranks.
 *
 * `encodeStep` does the work in bounded slices, so callers that must not
 * block the event loop (the render stage) can yield between slices.
 */
import { createRequire } from 'node:module';
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/esm/encodingParams/constants';

/**
 * Longest pre-token merged in one piece (UTF-16 code units). Longer ones
 * (runs of one letter, base64 without digits, long whitespace) are merged in
 * pieces of this size: ~0.06 ms each, so tokenizing is ~0.25 s per MB
 * whatever the text. Real words, identifiers and numbers are far shorter.
 */
export const MAX_PRETOKEN_CHARS = 256;

/** `<|im_start|>` and `<|im_end|>` as gpt-tokenizer numbers them (the render stage frames items with them); checked when the tables load. */
export const IM_START = 200003;
export const IM_END = 200004;

/**
 * The library's byte-pair core: rank lookup for a whole pre-token and the
 * merge. Not part of its typed API, so checked once at load: a library
 * update that renames them fails here, loudly, rather than tokenizing wrong.
 */
interface BpeCore {
  getBpeRankFromString(s: string): number | undefined;
  bytePairEncode(s: string): number[];
}

type O200k = typeof import('gpt-tokenizer/encoding/o200k_base');
interface Tables {
  bpe: BpeCore;
  decodeGenerator: O200k['decodeGenerator'];
}
let tables: Tables | null = null;

/**
 * The o200k tables, loaded (synchronously) the first time anything is
 * tokenized rather than when the server starts: they are ~70 MB of RSS and
 * ~0.4 s of start-up, which a server that has not served a request yet (or
 * never tokenizes: `llr bench`'s parent, the CLI's help) need not pay.
 */
function load(): Tables {
  if (tables) return tables;
  const o200k = createRequire(import.meta.url)('gpt-tokenizer/encoding/o200k_base') as O200k;
  // The CommonJS build: the encoder instance (which holds the core) is its default export.
  const core = (o200k.default as unknown as { bytePairEncodingCoreProcessor?: BpeCore }).bytePairEncodingCoreProcessor;
  if (!core || typeof core.getBpeRankFromString !== 'function' || typeof core.bytePairEncode !== 'function') {
    throw new Error('gpt-tokenizer: the byte-pair core this wrapper relies on is missing (library version changed?)');
  }
  const special = (s: string) => o200k.encode(s, { allowedSpecial: 'all' })[0];
  if (special('<|im_start|>') !== IM_START || special('<|im_end|>') !== IM_END) {
    throw new Error('gpt-tokenizer: o200k special token ids differ from the ones the render stage uses');
  }
  tables = { bpe: core, decodeGenerator: o200k.decodeGenerator };
  return tables;
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
  const { bpe } = load();
  const re = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags);
  re.lastIndex = from;
  const stopAt = from + maxChars;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    encodePretoken(m[0], out, bpe);
    if (re.lastIndex >= stopAt) return re.lastIndex;
  }
  return text.length;
}

function encodePretoken(piece: string, out: number[], bpe: BpeCore): void {
  if (piece.length <= MAX_PRETOKEN_CHARS) {
    const rank = bpe.getBpeRankFromString(piece);
    if (rank !== undefined) out.push(rank);
    else for (const t of bpe.bytePairEncode(piece)) out.push(t);
    return;
  }
  for (let i = 0; i < piece.length; ) {
    let end = Math.min(i + MAX_PRETOKEN_CHARS, piece.length);
    // Never cut between the halves of a surrogate pair: each half alone would encode as U+FFFD.
    const last = piece.charCodeAt(end - 1);
    if (end < piece.length && last >= 0xd800 && last <= 0xdbff) end--;
    for (const t of bpe.bytePairEncode(piece.slice(i, end))) out.push(t);
    i = end;
  }
}

/**
 * Load the tables now (a server does at start-up, so its first request does
 * not hold the event loop for the ~0.4 s the load takes; `llr serve
 * --lazy-tokenizer` leaves them to the first request instead).
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
 * `decodeGenerator` holds such bytes back and emits them with the token that
 * completes the character, so a piece is never a broken character; the cost is
 * that there can be fewer pieces than tokens. The simulated model streams each
 * piece as one delta and counts it as one output token, so usage is the piece
 * count (at most the true token count). Lone surrogates are not well-formed
 * and come back as U+FFFD.
 *
 * The generator is drained synchronously here on purpose: the library's UTF-8
 * decoder is shared module state, so an abandoned half-read generator would
 * leak bytes into the next decode.
 */
export function tokenPieces(text: string): string[] {
  if (text === '') return [];
  return piecesOf(encodeText(text));
}

/** The string pieces of token ids (see `tokenPieces`), for a caller that keeps the ids too. */
export function piecesOf(ids: readonly number[]): string[] {
  return [...load().decodeGenerator(ids)];
}
