/**
 * The simulated model's log probabilities: for each token piece it streams,
 * the logprob of that piece and of `top` alternatives, as the Responses API
 * returns them when a create asks (`include: ["message.output_text.logprobs"]`,
 * `top_logprobs`: 0 to 20).
 *
 * Deterministic for a seed, a piece and its place in the text, so the same
 * text gets the same figures in every design. A distribution, not noise: the
 * piece the model chose is the most likely (probability 1/2 to 1), each
 * alternative less likely than the one before, and all of them together
 * below 1. The alternatives are other tokens of the vocabulary (o200k),
 * drawn at random: a token's text may hold part of a character (U+FFFD),
 * its `bytes` are exact. The piece itself is listed first among the top
 * ones, as a model sampling its most likely token lists it. Used by
 * model/simulated.ts; pure apart from the tokenizer's tables.
 */
import { hashString, mulberry32 } from './rng.js';
import { tokenOf, vocabularySize } from './tokenizer.js';

/** The most alternatives a create may ask for (`top_logprobs`, the API's bound). */
export const MAX_TOP_LOGPROBS = 20;

export interface TopLogprob {
  token: string;
  bytes: number[];
  logprob: number;
}

/** One streamed piece's logprobs, as an `output_text` part lists them (ResponseOutputText.Logprob). */
export interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

/**
 * The logprobs of `piece`, the `position`-th piece of its text, with `top` of the most likely tokens at that
 * position (the piece first, then `top` − 1 alternatives; none when `top` is 0).
 */
export function pieceLogprobs(piece: string, position: number, top: number, seed: number): TokenLogprob {
  const rng = mulberry32(hashString(piece, (seed ^ Math.imul(position + 1, 0x9e3779b1)) >>> 0));
  // The chosen piece: probability 1/2 to 1 − 10^-6 (a model's most likely token); the rest shared below it. A tenth
  // of the rest stays with tokens not listed: the listed ones' probabilities sum to 1 − 10^-7 at most, under 1 in
  // floating point too (the chosen one at 1 − 10^-16 and alternatives taking all the rest summed to 1.0000000000000002).
  const chosen = 0.5 + (0.5 - 1e-6) * rng();
  const own: TopLogprob = { token: piece, bytes: [...Buffer.from(piece, 'utf8')], logprob: Math.log(chosen) };
  const tops: TopLogprob[] = top > 0 ? [{ ...own, bytes: own.bytes.slice() }] : [];
  const size = top > 1 ? vocabularySize() : 0;
  const seen = new Set([piece]);
  let rest = 0.9 * (1 - chosen);
  // Each alternative takes 1/2 to 9/10 of what is left: together under 1 − chosen, and each less than the one before
  // (the next is at most 9/10 of the 1/2 or less its predecessor left).
  for (let tries = 0; tops.length < top && tries < top * 4; tries++) {
    const alt = tokenOf(Math.floor(rng() * size));
    if (alt === undefined || seen.has(alt.text)) continue;
    seen.add(alt.text);
    const p = rest * (0.5 + 0.4 * rng());
    rest -= p;
    tops.push({ token: alt.text, bytes: [...alt.bytes], logprob: Math.log(p) });
  }
  return { ...own, top_logprobs: tops };
}

/** A piece's logprobs as a delta or `output_text.done` event lists them (the SDK's types there carry no `bytes`). */
export function eventLogprob(l: TokenLogprob): { token: string; logprob: number; top_logprobs: Array<{ token: string; logprob: number }> } {
  return { token: l.token, logprob: l.logprob, top_logprobs: l.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob })) };
}
