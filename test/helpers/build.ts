/**
 * Builds dist/ for the tests that spawn the built CLI (`dist/cli.js`). A
 * failing `tsc` fails the test file loudly with the compiler's own output:
 * running a stale or half-emitted dist would test code that is not the
 * source, and the type error would go unnoticed.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CLI = join(ROOT, 'dist', 'cli.js');

/** Runs `tsc -p tsconfig.json`; throws with its diagnostics if it fails. */
export async function buildDist(): Promise<void> {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.json')], { maxBuffer: 16 * 1024 * 1024 });
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    const output = `${stdout ?? ''}${stderr ?? ''}`.trim();
    throw new Error(`tsc failed, so dist/ is not the source; fix the build first:\n${output || String(e)}`, { cause: e });
  }
  if (!existsSync(CLI)) throw new Error(`tsc succeeded but ${CLI} was not built`);
}
