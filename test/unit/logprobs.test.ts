/**
 * The simulated model's logprobs (model/logprobs.ts): a distribution per
 * piece, deterministic, with the piece first among `top` tokens of the
 * vocabulary, each listed with its exact bytes.
 */
import { describe, expect, it } from 'vitest';
import { eventLogprob, MAX_TOP_LOGPROBS, pieceLogprobs } from '../../src/model/logprobs.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { SimulatedModel } from '../../src/model/simulated.js';
import { tokenPieces } from '../../src/model/tokenizer.js';
import { collect, request } from './model-fixtures.js';

const INSTANT = { tokensPerSecond: Infinity, prefillTokensPerSecond: Infinity, ttftBaseMs: 0 };

const TEXT = 'The café’s menu: 3 soups, ünïcödé, 日本語のテキスト and emoji 🎉🎉 — done.';

describe('pieceLogprobs', () => {
  it('lists the piece first among `top` tokens, each less likely than the one before, all together under probability 1', () => {
    const pieces = tokenPieces(TEXT);
    expect(pieces.join('')).toBe(TEXT);
    for (const top of [0, 1, 2, 5, MAX_TOP_LOGPROBS]) {
      pieces.forEach((piece, i) => {
        const l = pieceLogprobs(piece, i, top, 7);
        expect(l.token).toBe(piece);
        expect(l.bytes).toEqual([...Buffer.from(piece, 'utf8')]);
        // The most likely token: probability 1/2 to 1.
        expect(l.logprob).toBeLessThan(0);
        expect(l.logprob).toBeGreaterThanOrEqual(Math.log(0.5));
        expect(l.top_logprobs).toHaveLength(top);
        if (top === 0) return;
        expect(l.top_logprobs[0]).toEqual({ token: piece, bytes: l.bytes, logprob: l.logprob });
        const lps = l.top_logprobs.map((t) => t.logprob);
        for (let k = 1; k < lps.length; k++) expect(lps[k]).toBeLessThan(lps[k - 1]!);
        expect(lps.reduce((s, x) => s + Math.exp(x), 0)).toBeLessThan(1);
        expect(new Set(l.top_logprobs.map((t) => t.token)).size).toBe(top);
        for (const t of l.top_logprobs) {
          expect(t.bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)).toBe(true);
          // A token's text is its bytes as UTF-8 (U+FFFD where it holds part of a character).
          expect(t.token).toBe(new TextDecoder().decode(Uint8Array.from(t.bytes)));
        }
      });
    }
  });

  it('the listed probabilities sum under 1 in floating point, over many pieces and seeds (a tenth of the rest is never listed)', () => {
    let most = 0;
    for (let seed = 1; seed <= 40; seed++) {
      for (let i = 0; i < 500; i++) {
        const l = pieceLogprobs(' the', i, MAX_TOP_LOGPROBS, seed);
        most = Math.max(most, l.top_logprobs.reduce((t, x) => t + Math.exp(x.logprob), 0));
      }
    }
    expect(most).toBeLessThan(1 - 1e-8);
  });

  it('is the same for the same seed, piece and place, and differs with any of them', () => {
    const a = pieceLogprobs(' hello', 3, 5, 1);
    expect(pieceLogprobs(' hello', 3, 5, 1)).toEqual(a);
    expect(pieceLogprobs(' hello', 4, 5, 1).logprob).not.toBe(a.logprob);
    expect(pieceLogprobs(' hello', 3, 5, 2).logprob).not.toBe(a.logprob);
    expect(pieceLogprobs(' hellO', 3, 5, 1).logprob).not.toBe(a.logprob);
    // Fewer alternatives are the first of more: one distribution, cut at `top`.
    expect(pieceLogprobs(' hello', 3, 3, 1).top_logprobs).toEqual(a.top_logprobs.slice(0, 3));
  });

  it('an event lists them without bytes (the SDK\'s delta and done event types)', () => {
    const l = pieceLogprobs('x', 0, 2, 1);
    expect(eventLogprob(l)).toEqual({ token: 'x', logprob: l.logprob, top_logprobs: l.top_logprobs.map(({ token, logprob }) => ({ token, logprob })) });
  });
});

describe('the simulated model makes logprobs only for what the response may still list', () => {
  it('ModelRequest.logprobs.pieces bounds the pieces given logprobs, one token per event or in batches', async () => {
    const text = 'The quick brown fox jumps over the lazy dog, then naps in the sun.';
    for (const batchTokens of [1, 64]) {
      const model = new SimulatedModel({ policy: scriptPolicy([{ text }]) });
      const events = await collect(model, request({ settings: INSTANT, batchTokens, logprobs: { top: 2, pieces: 4 } }));
      const listed = events.flatMap((e) => (e.type === 'text.delta' ? (e.logprobs ? [e.logprobs] : []) : e.type === 'text.deltas' ? [...(e.logprobs ?? [])] : []));
      expect(listed.map((l) => l.token)).toEqual(tokenPieces(text).slice(0, 4));
      expect(listed.every((l) => l.top_logprobs.length === 2)).toBe(true);
    }
    const none = await collect(new SimulatedModel({ policy: scriptPolicy([{ text }]) }), request({ settings: INSTANT, batchTokens: 64 }));
    expect(none.some((e) => (e.type === 'text.deltas' || e.type === 'text.delta') && e.logprobs !== undefined)).toBe(false);
  });
});
