/**
 * A one-line figure for the tokenizer: how long o200k tokenization takes for
 * 1 MB of a single letter (one pre-token, the case that used to be quadratic)
 * and 1 MB of ordinary text, in this process.
 *
 *   npm run bench:tokenize
 */
import { countTokens, encodeText } from '../model/tokenizer.js';

const MB = 1024 * 1024;
const prose = 'The server streams one delta per token; tools run on the client, and the run resumes when outputs arrive. '.repeat(MB / 100).slice(0, MB);

function time(label: string, text: string): string {
  encodeText(text.slice(0, 1000)); // warm the code path, not the cache
  const started = performance.now();
  const tokens = encodeText(text);
  const ms = performance.now() - started;
  if (countTokens(text) !== tokens.length) throw new Error('count and encode disagree');
  return `${label}: ${ms.toFixed(0)} ms, ${tokens.length} tokens`;
}

process.stdout.write(`${time("1 MB of 'a'", 'a'.repeat(MB))}\n${time('1 MB of ordinary text', prose)}\n`);
