/**
 * The prefix cache under runs whose prompts together outgrow it: `--runs`
 * growing prompts (key arrays, as `PromptKeys` keeps them), each model call
 * of each run in turn looking up and inserting its keys, `--grow` new blocks
 * per call, into a cache of `--blocks` blocks (65,536 by default, the
 * server's). Prints, per window of calls, the cache's time per round of
 * calls (one of each run) and how many blocks of the first run's prompt the
 * cache holds. Without a bound on what one insert places, each run's insert
 * evicted the others' blocks and placed its own again, up to the whole cache
 * per call; `--insert-blocks` is that bound (`llr serve
 * --prefix-cache-insert-blocks`). docs/reliability.md gives its figures.
 *
 *   npm run bench:prefix-thrash [-- --runs 2 --grow 30 --rounds 4000 --blocks 65536 --insert-blocks 1024]
 */
import { parseArgs } from 'node:util';
import { DEFAULT_BLOCK_SIZE, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_INSERT_BLOCKS, PrefixCache } from '../model/prefix-cache.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '2' },
    grow: { type: 'string', default: '30' },
    rounds: { type: 'string', default: '4000' },
    blocks: { type: 'string', default: String(DEFAULT_MAX_ENTRIES) },
    'insert-blocks': { type: 'string', default: String(DEFAULT_MAX_INSERT_BLOCKS) },
  },
});
const positive = (name: keyof typeof values): number => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) {
    process.stderr.write(`bench:prefix-thrash: --${name} must be a positive integer, got '${String(values[name])}'\n`);
    process.exit(2);
  }
  return n;
};
const runs = positive('runs');
const grow = positive('grow');
const rounds = positive('rounds');
const cache = new PrefixCache(positive('blocks'), DEFAULT_BLOCK_SIZE, positive('insert-blocks'));
const window = Math.max(1, Math.floor(rounds / 8));

const prompts: number[][] = Array.from({ length: runs }, () => []);
let key = 1;
let start = performance.now();
console.log(`${runs} runs, ${grow} new blocks per call, a cache of ${cache.maxEntries} blocks, at most ${cache.maxInsertBlocks} placed per insert beyond those in place`);
for (let round = 1; round <= rounds; round++) {
  for (const keys of prompts) {
    for (let j = 0; j < grow; j++) keys.push(key++);
    cache.lookupKeys(keys);
    cache.insertKeys(keys);
  }
  if (round % window === 0) {
    const now = performance.now();
    const held = cache.lookupKeys(prompts[0]!) / cache.blockSize;
    console.log(`rounds ${round - window + 1}–${round}: blocks per prompt ${prompts[0]!.length}, ${((now - start) / window).toFixed(3)} ms per round, the first prompt's blocks held ${held}`);
    start = performance.now();
  }
}
