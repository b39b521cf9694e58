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
 */
import { countTokens as countO200k, decodeGenerator, encode } from 'gpt-tokenizer/encoding/o200k_base';

// Empty set = no special token is disallowed *and* none is allowed, which the
// library treats as "encode special-token text as plain text" instead of throwing.
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** The o200k token ids of `text`. */
export function encodeText(text: string): number[] {
  return encode(text, PLAIN_TEXT);
}

/** How many o200k tokens `text` encodes to. */
export function countTokens(text: string): number {
  return countO200k(text, PLAIN_TEXT);
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
  return [...decodeGenerator(encodeText(text))];
}
