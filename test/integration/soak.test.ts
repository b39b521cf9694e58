/**
 * The quick soak (`npm run soak -- --quick`): 2,000 HTTP `store: false`
 * requests with 50 KB inputs against `llr serve --store memory --instant` in
 * its own process. The server's live heap (after a forced GC) must stay
 * within the soak bound of its warm value: it keeps nothing per request
 * beyond its bounded rings (records, ledger, prefix cache). The heap, not
 * RSS, is asserted: RSS also moves with the allocator and the machine.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
type Soak = typeof import('../../src/bench/soak.js');
let soak: Soak;

beforeAll(async () => {
  // The server runs from dist/: build it first (a type error elsewhere is `npm test`'s business, not this test's).
  await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')]).catch(() => {});
  soak = (await import(pathToFileURL(join(ROOT, 'dist', 'bench', 'soak.js')).href)) as Soak;
}, 180_000);

describe('soak (quick)', () => {
  it('2,000 requests with 50 KB inputs: the heap stays within the bound of its warm value', async () => {
    const r = await soak.runSoak({ requests: 2000, warmup: 500, concurrency: 8, inputBytes: 50 * 1024 });
    expect(r.failures).toBe(0);
    expect(r.samples.length).toBeGreaterThanOrEqual(3);
    expect(r.heap_growth_mb).toBeLessThan(soak.SOAK_RSS_BOUND_MB);
  }, 900_000);
});
