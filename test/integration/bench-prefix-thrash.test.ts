/**
 * `npm run bench:prefix-thrash` (src/bench/prefix-thrash.ts) at a tiny size:
 * it prints a window line per eighth of the rounds, and the cache holds a
 * share of the first prompt while two prompts outgrow it together (its
 * command line: test/integration/command-line.test.ts).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, ROOT } from '../helpers/build.js';

const run = promisify(execFile);
const SCRIPT = join(ROOT, 'dist/bench/prefix-thrash.js');

beforeAll(async () => {
  await buildDist();
}, 120_000);

describe('bench:prefix-thrash', () => {
  it('prints each window, with the first prompt still partly held once the prompts outgrow the cache', async () => {
    const { stdout } = await run(process.execPath, [SCRIPT, '--runs', '2', '--grow', '5', '--rounds', '80', '--blocks', '200', '--insert-blocks', '10']);
    const windows = stdout.split('\n').filter((l) => l.startsWith('rounds '));
    expect(windows).toHaveLength(8);
    const held = windows.map((l) => Number(/blocks held (\d+)/.exec(l)![1]));
    // 400 blocks per prompt by the end, against a cache of 200: both prompts keep a share, neither is cached whole.
    expect(held.at(-1)).toBeGreaterThan(0);
    expect(held.at(-1)).toBeLessThan(200);
  });
});
