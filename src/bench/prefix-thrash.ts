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
import { intFlag, parseCommandLine } from '../command-line.js';
import { DEFAULT_BLOCK_SIZE, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_INSERT_BLOCKS, PrefixCache } from '../model/prefix-cache.js';

const COMMAND = {
  name: 'bench:prefix-thrash',
  usage: `usage: npm run bench:prefix-thrash -- [--runs N] [--grow N] [--rounds N] [--blocks N] [--insert-blocks N]
  --runs N           prompts growing in turn (2, at most 64)
  --grow N           new blocks each prompt adds per call (30, at most 100000)
  --rounds N         calls of each prompt (4000, at most 1000000)
  --blocks N         the cache's capacity in blocks (${DEFAULT_MAX_ENTRIES}, llr serve's default)
  --insert-blocks N  blocks one insert places beyond those in place (${DEFAULT_MAX_INSERT_BLOCKS}, llr serve's default; ${DEFAULT_MAX_ENTRIES}: no bound)
  -h, --help         print this and exit`,
};

const { values } = parseCommandLine(COMMAND, {
  options: { runs: { type: 'string' }, grow: { type: 'string' }, rounds: { type: 'string' }, blocks: { type: 'string' }, 'insert-blocks': { type: 'string' } },
});
const runs = intFlag(COMMAND, 'runs', values.runs, 2, 1, 64);
const grow = intFlag(COMMAND, 'grow', values.grow, 30, 1, 100_000);
const rounds = intFlag(COMMAND, 'rounds', values.rounds, 4000, 1, 1_000_000);
const cache = new PrefixCache(
  intFlag(COMMAND, 'blocks', values.blocks, DEFAULT_MAX_ENTRIES, 1, 10_000_000),
  DEFAULT_BLOCK_SIZE,
  intFlag(COMMAND, 'insert-blocks', values['insert-blocks'], DEFAULT_MAX_INSERT_BLOCKS, 1, 10_000_000),
);
const window = Math.max(1, Math.floor(rounds / 8));

const prompts: number[][] = Array.from({ length: runs }, () => []);
let key = 1;
let start = performance.now();
process.stdout.write(`${runs} runs, ${grow} new blocks per call, a cache of ${cache.maxEntries} blocks, at most ${cache.maxInsertBlocks} placed per insert beyond those in place\n`);
for (let round = 1; round <= rounds; round++) {
  for (const keys of prompts) {
    for (let j = 0; j < grow; j++) keys.push(key++);
    cache.lookupKeys(keys);
    cache.insertKeys(keys);
  }
  if (round % window === 0) {
    const now = performance.now();
    const held = cache.lookupKeys(prompts[0]!) / cache.blockSize;
    process.stdout.write(`rounds ${round - window + 1}–${round}: blocks per prompt ${prompts[0]!.length}, ${((now - start) / window).toFixed(3)} ms per round, the first prompt's blocks held ${held}\n`);
    start = performance.now();
  }
}
