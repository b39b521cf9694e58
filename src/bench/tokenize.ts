/**
 * One-line figures for the tokenizer: how long o200k tokenization takes, in
 * this process, for 1 MB of a single letter (one pre-token, the case that
 * used to be quadratic), 1 MB of ordinary text, and hostile text whose
 * pre-tokens are long or never repeat (seeded, so every run tokenizes the
 * same text): one 1 MB run of random CJK (one pre-token), random CJK
 * words, random emoji words and random Latin words. The figures
 * docs/reliability.md gives for the tokenizer's rate come from here.
 *
 *   npm run bench:tokenize
 */
import { mulberry32 } from '../model/rng.js';
import { countTokens, encodeText } from '../model/tokenizer.js';

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

process.stdout.write(
  [
    time("1 MB of 'a'", 'a'.repeat(MB)),
    time('1 MB of ordinary text', prose),
    time('random CJK, one run', seeded(1, MB / 3, 0, cjk)),
    time('random CJK, 3-character words', seeded(2, MB / 3, 3, cjk)),
    time('random emoji, 2-emoji words', seeded(3, MB / 4, 4, emoji)),
    time('random Latin words of 6 letters', seeded(4, MB, 6, latin)),
  ].join('\n') + '\n',
);
