/**
 * The headless browser of the page tests: Debian's `chromium` (installed by
 * .ci/install-chromium) driven by playwright-core, one persistent profile per
 * test file, a 1280×720 viewport.
 */
import { existsSync } from 'node:fs';
import { chromium, type BrowserContext } from 'playwright-core';

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
