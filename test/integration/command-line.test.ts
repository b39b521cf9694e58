/**
 * The repository's own scripts (src/command-line.ts), run as a person runs
 * them, from the built files: `--help` prints the usage and exits 0; a bad
 * command line (an unknown flag, a count that is not an integer, a value
 * out of range, an unknown phase or scenario) gets its message and the usage
 * on stderr, exit status 2, nothing on stdout and no stack trace. Every case
 * fails before any server is started.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, ROOT } from '../helpers/build.js';

const run = promisify(execFile);

beforeAll(async () => {
  await buildDist();
}, 120_000);

const COMMANDS = [
  { script: 'bench/overhead.js', usage: 'usage: npm run bench:overhead', bad: [[['--nope'], "Unknown option '--nope'"], [['--loops', '1e3'], "--loops needs an integer in [1, Infinity], got '1e3'"], [['--phases', 'loop,warp'], "unknown phase 'warp'"], [['--steps', '61'], '--steps needs an integer in [4, 60]'], [['--loops'], "Option '--loops <value>' argument missing"], [['--pin', '1'], '--pin wants SERVERS:DRIVER'], [['--pin', '4096:0'], '--pin 4096:0: taskset failed']] },
  { script: 'bench/soak.js', usage: 'usage: npm run soak', bad: [[['--nope'], "Unknown option '--nope'"], [['--requests', ' 5'], "--requests needs an integer in [1, Infinity], got ' 5'"], [['--requests', '10', '--warmup', '10'], '--warmup must be smaller than --requests']] },
  { script: 'bench/persist-cost.js', usage: 'usage: npm run bench:persist', bad: [[['--responses', '0'], '--responses needs an integer in [1, Infinity]'], [['--input-bytes', '0x10'], "got '0x10'"]] },
  { script: 'bench/pause-cost.js', usage: 'usage: node dist/bench/pause-cost.js', bad: [[['--calls', '5'], '--calls needs an integer in [10, 1000000]'], [['--nope'], "Unknown option '--nope'"]] },
  { script: 'chaos/cli.js', usage: 'usage: npm run chaos', bad: [[['--seed', 'x'], "--seed needs an integer in [0, 4294967295], got 'x'"], [['--only', 'fuzz,warp'], "unknown scenario 'warp'"]] },
  { script: 'bench/page-faults.js', usage: 'usage: npm run bench:faults', bad: [[['--sizes', '64,0'], "--sizes needs an integer in [1, 1024], got '0'"], [['--chains', '10001'], '--chains needs an integer in [1, 10000]'], [['--nope'], "Unknown option '--nope'"]] },
  { script: 'bench/background-kept.js', usage: 'usage: npm run bench:kept', bad: [[['--responses', '0'], "--responses needs an integer in [1, 20000], got '0'"], [['--input-words', '10001'], '--input-words needs an integer in [1, 10000]'], [['--nope'], "Unknown option '--nope'"]] },
  { script: 'bench/step-timeline.js', usage: 'usage: npm run bench:timeline', bad: [[['--loops', '0'], "--loops needs an integer in [1, 10000], got '0'"], [['--warm', 'x'], "--warm needs an integer in [0, 10000], got 'x'"], [['--nope'], "Unknown option '--nope'"]] },
  { script: 'bench/answer-memory.js', usage: 'usage: npm run bench:answers', bad: [[['--readers', '2001'], '--readers needs an integer in [1, 2000]'], [['--nope'], "Unknown option '--nope'"]] },
  { script: 'bench/prefix-thrash.js', usage: 'usage: npm run bench:prefix-thrash', bad: [[['--runs', '0'], "--runs needs an integer in [1, 64], got '0'"], [['--nope'], "Unknown option '--nope'"]] },
  { script: 'chaos/loop-hold-cli.js', usage: 'usage: npm run bench:loop-hold', bad: [[['--bytes', '1.5'], "--bytes needs an integer in [1, Infinity], got '1.5'"], [['--nope'], "Unknown option '--nope'"]] },
] as const;

describe('command lines of the repository scripts', () => {
  for (const c of COMMANDS) {
    it(`${c.script}: --help prints the usage; a bad command line gets its message and the usage, exit 2`, async () => {
      const script = join(ROOT, 'dist', c.script);
      for (const flag of ['--help', '-h']) {
        const help = await run(process.execPath, [script, flag], { timeout: 30_000 });
        expect(help.stdout.startsWith(c.usage)).toBe(true);
        expect(help.stderr).toBe('');
      }
      for (const [args, says] of c.bad) {
        const err = await run(process.execPath, [script, ...args], { timeout: 30_000 }).then(
          () => null,
          (e: { code: number; stderr: string; stdout: string }) => e,
        );
        expect(err?.code, `${c.script} ${args.join(' ')}`).toBe(2);
        expect(err?.stderr).toContain(says);
        expect(err?.stderr).toContain(c.usage);
        expect(err?.stderr).not.toMatch(/\n\s+at /);
        expect(err?.stdout).toBe('');
      }
    }, 60_000);
  }
});
