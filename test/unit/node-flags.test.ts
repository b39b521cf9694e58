/**
 * The Node.js options the repository runs its server with (src/node-flags.ts)
 * are the ones `npm start` and `npm run bench:overhead` pass, and node takes them both on its command
 * line and in NODE_OPTIONS (how the docs tell `llr` bin users to set them).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../../src/node-flags.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('node flags', () => {
  it('npm start runs node with them', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['start']).toBe(`node ${NODE_FLAGS.join(' ')} dist/cli.js serve`);
  });

  it('npm run bench:overhead runs its client with them too (its own collections land in the measured windows)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['bench:overhead']).toBe(`tsc -p tsconfig.json && node ${NODE_FLAGS.join(' ')} dist/bench/overhead.js`);
  });

  it('the bin keeps a shebang without options (env -S is not everywhere)', () => {
    expect(readFileSync(join(ROOT, 'src', 'cli.ts'), 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
  });

  it('node takes them on its command line and in NODE_OPTIONS, and they set the young generation', () => {
    // node exits 9 ("bad option", or "not allowed in NODE_OPTIONS") on an option it refuses. The new space's
    // capacity after a burst of short-lived allocation shows the bound applied (Node 20's default tops out at 16 MiB a semi-space).
    const probe = "let k=[];for(let i=0;i<3e6;i++){k.push({i});if(k.length>2e5)k=[]}console.log(require('v8').getHeapSpaceStatistics().find(s=>s.space_name==='new_space').space_size)";
    const viaArgs = Number(execFileSync(process.execPath, [...NODE_FLAGS, '-e', probe], { encoding: 'utf8' }));
    const viaEnv = Number(execFileSync(process.execPath, ['-e', probe], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: NODE_FLAGS.join(' ') } }));
    const plain = Number(execFileSync(process.execPath, ['-e', probe], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } }));
    // Node 20's default caps the new space at 32 MiB (two 16 MiB semi-spaces); the burst grows a 64 MiB bound past that.
    expect(plain).toBeLessThanOrEqual(32 * 2 ** 20);
    expect(viaArgs).toBeGreaterThan(32 * 2 ** 20);
    expect(viaEnv).toBeGreaterThan(32 * 2 ** 20);
  });
});
