/**
 * What logprobs cost (`include: ["message.output_text.logprobs"]`): per
 * piece at `top_logprobs` 20, the heap its logprobs hold (after a forced
 * GC), their JSON and the time to make them; then one whole response of
 * `--max-logprob-tokens` pieces (2,048) through an in-process server over
 * SSE, with and without logprobs: the server's CPU (this process's, the
 * client being a plain fetch reader) and the bytes of the stream. The
 * figures docs/reliability.md gives for the bound come from here.
 *
 *   npm run bench:logprobs      (node --expose-gc dist/bench/logprobs-cost.js)
 */
import pino from 'pino';
import { DEFAULT_LIMITS } from '../engine/services.js';
import { MAX_TOP_LOGPROBS, pieceLogprobs } from '../model/logprobs.js';
import { scriptPolicy } from '../model/policies.js';
import { loadTokenizer, tokenPieces } from '../model/tokenizer.js';
import { INSTANT_MODEL, LlrServer } from '../server.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) {
  process.stderr.write('run with node --expose-gc (npm run bench:logprobs does)\n');
  process.exit(2);
}

loadTokenizer();
const PIECES = DEFAULT_LIMITS.maxLogprobTokens;
// Ordinary prose, PIECES pieces of it.
const prose = 'The run pauses when the model calls a tool, and resumes when the client appends its output. ';
let text = prose;
while (tokenPieces(text).length < PIECES) text += prose;
const pieces = tokenPieces(text).slice(0, PIECES);
text = pieces.join('');

pieceLogprobs('warm', 0, MAX_TOP_LOGPROBS, 1);
gc();
const before = process.memoryUsage().heapUsed;
const t0 = performance.now();
const kept = pieces.map((p, i) => pieceLogprobs(p, i, MAX_TOP_LOGPROBS, 1));
const made = performance.now() - t0;
gc();
const heap = (process.memoryUsage().heapUsed - before) / kept.length;
const json = JSON.stringify(kept).length / kept.length;
process.stdout.write(`per piece, top_logprobs ${MAX_TOP_LOGPROBS}: ${Math.round(heap)} B of heap, ${Math.round(json)} B of JSON, ${((made / kept.length) * 1000).toFixed(1)} µs to make (${kept.length} pieces)\n`);

/** One SSE response of `text`: this process's CPU ms over it, and the stream's bytes. */
async function response(url: string, include: boolean): Promise<{ cpuMs: number; bytes: number }> {
  const body = { model: 'sim-model', input: 'go', stream: true, ...(include && { include: ['message.output_text.logprobs'], top_logprobs: MAX_TOP_LOGPROBS }) };
  const cpu = process.cpuUsage();
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  let bytes = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.length;
  const used = process.cpuUsage(cpu);
  return { cpuMs: (used.user + used.system) / 1000, bytes };
}

const rounds = 5;
const server = new LlrServer({ port: 0, store: 'memory', logger: pino({ level: 'silent' }), modelSettings: INSTANT_MODEL, demo: false, policy: scriptPolicy(Array.from({ length: 2 * (rounds + 1) }, () => ({ text }))) });
const { url } = await server.listen();
try {
  await response(url, true); // warm-up
  await response(url, false);
  const withLp: number[] = [];
  const without: number[] = [];
  let lpBytes = 0;
  let plainBytes = 0;
  for (let r = 0; r < rounds; r++) {
    const a = await response(url, true);
    const b = await response(url, false);
    withLp.push(a.cpuMs);
    without.push(b.cpuMs);
    lpBytes = a.bytes;
    plainBytes = b.bytes;
  }
  const median = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  process.stdout.write(
    `one response of ${PIECES} pieces over SSE (median of ${rounds}; server and reader in this process): ` +
      `with logprobs (top ${MAX_TOP_LOGPROBS}) ${Math.round(median(withLp))} ms CPU, ${(lpBytes / 1e6).toFixed(1)} MB streamed; ` +
      `without ${Math.round(median(without))} ms CPU, ${(plainBytes / 1e6).toFixed(2)} MB\n`,
  );
} finally {
  await server.close();
}
