/**
 * The demo page in a real headless browser: Debian's `chromium` (installed
 * by .ci/install-chromium; never downloaded by Playwright) driven by
 * `playwright-core`, against a real `llr serve` process on port 0. Starts a
 * race from the keyboard on the synthetic workload with the instant model,
 * waits on the DOM until every lane reads done, and checks that the counters
 * the page shows are the server's own records (`GET /llr/runs`), that the
 * console shows no error and that no request left the loopback. Saves a
 * screenshot to test-output/demo.png.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { distSpawnServer, launchChromium } from '../helpers/browser.js';
import type { RunRecord } from '../../src/engine/records.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OUT = join(ROOT, 'test-output');
const profile = mkdtempSync(join(tmpdir(), 'llr-demo-chromium-'));

let server: { url: string; stop: () => Promise<void> } | null = null;
let browser: BrowserContext | null = null;

beforeAll(async () => {
  server = await (await distSpawnServer())([]);
  browser = await launchChromium(profile);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  rmSync(profile, { recursive: true, force: true });
});

function loopback(u: string): boolean {
  const { protocol, hostname } = new URL(u);
  if (protocol === 'data:' || protocol === 'about:') return true;
  return hostname === '127.0.0.1' || hostname === 'localhost' || hostname === '[::1]';
}

describe('the demo page', () => {
  it('races every design on the instant model and shows the server’s own counts', async () => {
    const url = server!.url;
    const page = await browser!.newPage();
    const errors: string[] = [];
    const outside: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    browser!.on('request', (r) => {
      if (!loopback(r.url())) outside.push(r.url());
    });

    await page.goto(`${url}/demo`);
    const designs = ((await (await fetch(`${url}/demo/api/config`)).json()) as { designs: Array<{ id: string }> }).designs.map((d) => d.id);
    for (const d of designs) await page.locator(`[data-design="${d}"][data-state="idle"]`).waitFor();
    await page.selectOption('select[name="workload"]', 'synthetic');
    await page.fill('input[name="tool_calls"]', '6');
    await page.selectOption('select[name="speed"]', 'instant');
    // Keyboard: focus the button and press Enter, as a presenter without a mouse would.
    await page.focus('[data-action="race"]');
    await page.keyboard.press('Enter');
    for (const d of designs) await page.locator(`[data-design="${d}"][data-state="done"]`).waitFor({ timeout: 60_000 });
    await page.locator('#summary:not([hidden])').waitFor();

    const runs = ((await (await fetch(`${url}/llr/runs`)).json()) as { data: RunRecord[] }).data;
    const num = (s: string | null) => Number((s ?? '').replace(/[^0-9.]/g, ''));
    for (const d of designs) {
      const lane = page.locator(`[data-design="${d}"]`);
      const model = await lane.getAttribute('data-model');
      const mine = runs.filter((r) => r.model === model);
      expect(mine.length, d).toBeGreaterThan(0);
      const total = (k: string) => mine.reduce((n, r) => n + (r.counters[k] ?? 0), 0);
      const shown = async (f: string) => num(await lane.locator(`[data-field="${f}"]`).textContent());
      expect(await shown('model-calls'), d).toBe(7);
      expect(await shown('model-calls'), d).toBe(total('model_calls'));
      expect(await shown('tokens-tokenized'), d).toBe(total('tokens_tokenized'));
      expect(await shown('items-validated'), d).toBe(total('items_validated'));
      expect(await shown('responses'), d).toBe(mine.length);
      expect(await shown('bytes-sent'), d).toBeGreaterThan(0);
      expect(await shown('e2e-ms'), d).toBeGreaterThan(0);
      expect(await lane.locator('.timeline rect').count(), d).toBeGreaterThan(0);
      // Each bar's tooltip names its colour as the legend does, then the server's stage (atk89 F8).
      const tips = await lane.locator('.timeline rect > title').allTextContents();
      expect(tips.length, d).toBeGreaterThan(0);
      for (const tip of tips) expect(tip, d).toMatch(/^(time to first token|decode|tool \/ paused|parse \/ validate|render \(tokenise\)|safety|route \/ load state|usage \/ billing \/ log|persist) \(.+\): [\d.]+ ms at [\d.]+ ms$/);
      expect(await lane.locator('.wire li').count(), d).toBeGreaterThan(0);
    }
    expect(await page.locator('[data-field="explanation"]').textContent()).toMatch(/long-lived Response/);

    mkdirSync(OUT, { recursive: true });
    await page.screenshot({ path: join(OUT, 'demo.png'), fullPage: true });
    expect(errors).toEqual([]);
    expect(outside).toEqual([]);
    await page.close();
  }, 90_000);

  it('on a server without WebSockets, races the two HTTP designs and explains them', async () => {
    const own = await (await distSpawnServer())(['--no-websockets']);
    try {
      const page = await browser!.newPage();
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${own.url}/demo`);
      for (const d of ['http', 'long-lived-http']) await page.locator(`[data-design="${d}"][data-state="idle"]`).waitFor();
      expect(await page.locator('[data-design]').count()).toBe(2);
      await page.selectOption('select[name="workload"]', 'synthetic');
      await page.fill('input[name="tool_calls"]', '3');
      await page.selectOption('select[name="speed"]', 'instant');
      await page.locator('[data-action="race"]').click();
      for (const d of ['http', 'long-lived-http']) await page.locator(`[data-design="${d}"][data-state="done"]`).waitFor({ timeout: 60_000 });
      await page.locator('#summary:not([hidden])').waitFor();
      // The comparison the page explains is the long-lived Response over HTTP against the baseline (it was empty).
      expect(await page.locator('[data-field="explanation"]').textContent()).toMatch(/through the long-lived Response over HTTP and [\d,]+ ms over HTTP/);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await own.stop();
    }
  }, 90_000);

  it('steps one model call at a time from the keyboard, and stops', async () => {
    const url = server!.url;
    const page = await browser!.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${url}/demo`);
    await page.locator('[data-design="http"]').waitFor();
    await page.selectOption('select[name="workload"]', 'synthetic');
    await page.fill('input[name="tool_calls"]', '5');
    await page.selectOption('select[name="speed"]', '4000');
    // One lane after another for a timed model too: at the same time, the lanes' wall times include waiting for each
    // other, which turned a short run's ranking (outside attack atk106 F1); not for the Codex run at 65 tokens/s, nor
    // in step mode.
    expect(await page.inputValue('select[name="order"]')).toBe('one-by-one');
    await page.selectOption('select[name="workload"]', 'codex');
    await page.selectOption('select[name="speed"]', '65');
    expect(await page.inputValue('select[name="order"]')).toBe('together');
    await page.selectOption('select[name="speed"]', '4000');
    expect(await page.inputValue('select[name="order"]')).toBe('one-by-one');
    await page.selectOption('select[name="tool_time"]', 'recorded');
    expect(await page.inputValue('select[name="order"]')).toBe('together');
    await page.selectOption('select[name="tool_time"]', 'none');
    await page.selectOption('select[name="workload"]', 'synthetic');
    expect(await page.inputValue('select[name="order"]')).toBe('one-by-one');
    await page.check('input[name="step"]');
    expect(await page.inputValue('select[name="order"]')).toBe('together');
    await page.focus('[data-action="race"]');
    await page.keyboard.press('Enter');
    const step = page.locator('[data-action="step"]:not([disabled])');
    for (let i = 1; i <= 2; i++) {
      // Every lane has made exactly i model calls and waits for the presenter.
      await step.waitFor();
      // The counters follow the server's events: wait for them (the button can be enabled a frame before they
        // update). Playwright's own selector engine, not a page-side eval: the page's CSP forbids eval.
      for (const d of ['long-lived', 'ws', 'http']) {
        await page.locator(`[data-design="${d}"] [data-field="model-calls"]`, { hasText: new RegExp(`^${i}$`) }).waitFor({ timeout: 20_000 });
        expect(await page.locator(`[data-design="${d}"] [data-field="model-calls"]`).textContent(), `${d} after ${i}`).toBe(String(i));
      }
      await step.focus();
      await page.keyboard.press('Enter');
    }
    await step.waitFor();
    await page.locator('[data-action="stop"]').click();
    await page.locator('#summary:not([hidden])').waitFor();
    expect(await page.locator('[data-field="explanation"]').textContent()).toMatch(/stopped/);
    expect(await page.locator('[data-action="race"]').isEnabled()).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);
});
