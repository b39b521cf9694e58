/**
 * The Node.js options the repository runs its server with (src/node-flags.ts)
 * are the ones `npm start` and `npm run bench:overhead` pass, and node takes them both on its command
 * line and in NODE_OPTIONS (how the docs tell `llr` bin users to set them).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BENCH_CLIENT_FLAGS, NODE_FLAGS } from '../../src/node-flags.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('node flags', () => {
  it('npm start runs node with them', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['start']).toBe(`node ${NODE_FLAGS.join(' ')} dist/cli.js serve`);
  });

  it('npm run bench:overhead runs its client with its own (its collections land in the measured windows)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['bench:overhead']).toBe(`tsc -p tsconfig.json && node ${BENCH_CLIENT_FLAGS.join(' ')} dist/bench/overhead.js`);
  });

  it('the bin keeps a shebang without options (env -S is not everywhere)', () => {
    expect(readFileSync(join(ROOT, 'src', 'cli.ts'), 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
  });

  it('node takes them on its command line and in NODE_OPTIONS, and they bound the young generation', () => {
    // node exits 9 ("bad option", or "not allowed in NODE_OPTIONS") on an option it refuses. The new space's
    // capacity after a burst of short-lived allocation shows the bound applied: two semi-spaces of at most N MiB.
    const probe = "let k=[];for(let i=0;i<3e6;i++){k.push({i});if(k.length>2e5)k=[]}console.log(require('v8').getHeapSpaceStatistics().find(s=>s.space_name==='new_space').space_size)";
    const newSpace = (flags: readonly string[], how: 'args' | 'env') =>
      Number(
        how === 'args'
          ? execFileSync(process.execPath, [...flags, '-e', probe], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } })
          : execFileSync(process.execPath, ['-e', probe], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: flags.join(' ') } }),
      );
    const mib = (flags: readonly string[]) => Number(/^--max-semi-space-size=(\d+)$/.exec(flags[0]!)![1]);
    for (const flags of [NODE_FLAGS, BENCH_CLIENT_FLAGS]) {
      for (const how of ['args', 'env'] as const) expect(newSpace(flags, how), `${flags.join(' ')} via ${how}`).toBeLessThanOrEqual(2 * mib(flags) * 2 ** 20);
    }
    // The bench client's 64 MiB semi-spaces let the burst grow the new space past the server's 2 × 16 MiB.
    expect(newSpace(BENCH_CLIENT_FLAGS, 'args')).toBeGreaterThan(2 * mib(NODE_FLAGS) * 2 ** 20);
    expect(newSpace(BENCH_CLIENT_FLAGS, 'env')).toBeGreaterThan(2 * mib(NODE_FLAGS) * 2 ** 20);
  });
});
