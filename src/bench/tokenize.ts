/**
 * One-line figures for the tokenizer: how long o200k tokenization takes, in
 * this process, for 1 MB of a single letter (one pre-token, the case that
 * used to be quadratic), 1 MB of ordinary text, and hostile text whose
 * pre-tokens are long or never repeat (seeded, so every run tokenizes the
 * same text): one 1 MB run of random CJK (one pre-token), random CJK
 * words, random emoji words and random Latin words. Then the longest
 * single `encodeSlice` call (16,384 characters a call, as the render
 * slices) on 8 M-character shapes whose pre-token end lies far past the
 * match window. The figures docs/reliability.md gives for the tokenizer's
 * rate and its longest turn come from here.
 *
 *   npm run bench:tokenize
 */
import { mulberry32 } from '../model/rng.js';
import { countTokens, encodeSlice, encodeText, type EncodeCursor } from '../model/tokenizer.js';

const MB = 1024 * 1024;
const prose = 'The server streams one delta per token; tools run on the client, and the run resumes when outputs arrive. '.repeat(MB / 100).slice(0, MB);

/** About `chars` UTF-16 units from `unit`, in words of `word` units (0: one run) separated by spaces. */
function seeded(seed: number, chars: number, word: number, unit: (r: () => number) => string): string {
  const rng = mulberry32(seed);
  const parts: string[] = [];
  let n = 0;
  let inWord = 0;
  while (n < chars) {
    if (word > 0 && inWord === word) {
      parts.push(' ');
      n++;
      inWord = 0;
      continue;
    }
    const u = unit(rng);
    parts.push(u);
    n += u.length;
    inWord += u.length;
  }
  return parts.join('');
}

const cjk = (r: () => number) => String.fromCharCode(0x4e00 + Math.floor(r() * 20_000));
const emoji = (r: () => number) => String.fromCodePoint(0x1f300 + Math.floor(r() * 700));
const latin = (r: () => number) => String.fromCharCode(0x61 + Math.floor(r() * 26));

function time(label: string, text: string): string {
  encodeText(text.slice(0, 1000)); // warm the code path, not the cache
  const started = performance.now();
  const tokens = encodeText(text);
  const ms = performance.now() - started;
  if (countTokens(text) !== tokens.length) throw new Error('count and encode disagree');
  const mb = Buffer.byteLength(text) / 1e6;
  return `${label}: ${ms.toFixed(0)} ms, ${tokens.length} tokens, ${(ms / 1000 / mb).toFixed(2)} s per MB (UTF-8)`;
}

/** The longest `encodeSlice` call over `text`, sliced as the render does. */
function longestSlice(label: string, text: string): string {
  const cursor: EncodeCursor = { at: 0, end: 0 };
  let longest = 0;
  let calls = 0;
  while (cursor.at < text.length) {
    const started = performance.now();
    encodeSlice(text, cursor, [], 16 * 1024);
    longest = Math.max(longest, performance.now() - started);
    calls++;
  }
  return `${label}: longest call ${longest.toFixed(1)} ms over ${calls} calls`;
}

const M8 = 8_000_000;
encodeText(seeded(5, 1000, 0, cjk)); // the process's first CJK merge work, apart from the figures

process.stdout.write(
  [
    time("1 MB of 'a'", 'a'.repeat(MB)),
    time('1 MB of ordinary text', prose),
    time('random CJK, one run', seeded(1, MB / 3, 0, cjk)),
    time('random CJK, 3-character words', seeded(2, MB / 3, 3, cjk)),
    time('random emoji, 2-emoji words', seeded(3, MB / 4, 4, emoji)),
    time('random Latin words of 6 letters', seeded(4, MB, 6, latin)),
    longestSlice("8 M: 'a' then 日", `a${'日'.repeat(M8)} end`),
    longestSlice("8 M: 'e' then combining accents", `e${'\u0301'.repeat(M8)} end`),
    longestSlice("8 M: 'ʰ' then capitals", `ʰ${'Z'.repeat(M8)} end`),
    longestSlice("8 M: 'a日日' repeated", `${'a日日'.repeat(M8 / 3)} end`),
    longestSlice('8 M: ideographic spaces', `${'\u3000'.repeat(M8)}x`),
    longestSlice('8 M: lone surrogates', `${'\ud800'.repeat(M8)} end`),
  ].join('\n') + '\n',
);
