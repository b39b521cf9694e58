/**
 * The headless browser of the page tests: Debian's `chromium` (installed by
 * .ci/install-chromium) driven by playwright-core, one persistent profile per
 * test file, a 1280×720 viewport.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { chromium, type BrowserContext } from 'playwright-core';
import { ROOT } from './build.js';

export const CHROMIUM = '/usr/bin/chromium';

export async function launchChromium(profile: string): Promise<BrowserContext> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run .ci/install-chromium (apt-get install -y chromium)`);
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 720 },
  });
}

/**
 * The page tests' server runs from dist, as `llr serve` does: dist is emitted first (even if work elsewhere has a
 * type error: `tsc` emits anyway), then dist's `spawnServer` is returned.
 */
export async function distSpawnServer(): Promise<typeof import('../../src/bench/processes.js').spawnServer> {
  await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')]).catch(() => {});
  const dist = (await import(pathToFileURL(join(ROOT, 'dist', 'bench', 'processes.js')).href)) as typeof import('../../src/bench/processes.js');
  return dist.spawnServer;
}
