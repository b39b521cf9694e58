/**
 * The demo page against an outside attacker, in a real headless browser
 * (Debian's `chromium` driven by `playwright-core`, as demo-browser.test.ts)
 * against real `llr serve` processes on port 0: races run while the
 * animation is paused, a server killed mid-race, and what a long race's
 * stream costs the page. Waits on the DOM, never on sleeps.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { distSpawnServer, launchChromium } from '../helpers/browser.js';
import type { Child } from '../../src/bench/processes.js';

const profile = mkdtempSync(join(tmpdir(), 'llr-demo-chromium-'));

let spawnServer: (args?: string[]) => Promise<Child>;
let server: Child | null = null;
let browser: BrowserContext | null = null;

beforeAll(async () => {
  spawnServer = await distSpawnServer();
  server = await spawnServer([]);
  browser = await launchChromium(profile);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  rmSync(profile, { recursive: true, force: true });
});

async function openPage(url: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser!.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${url}/demo`);
  await page.locator('[data-design="http"][data-state="idle"]').waitFor();
  return { page, errors };
}

/** Choose the synthetic workload of `toolCalls` tool calls at `speed` on the page's form. */
async function chooseSynthetic(page: Page, toolCalls: number, speed: string): Promise<void> {
  await page.selectOption('select[name="workload"]', 'synthetic');
  await page.fill('input[name="tool_calls"]', String(toolCalls));
  await page.selectOption('select[name="speed"]', speed);
}

const num = (s: string | null) => Number((s ?? '').replace(/[^0-9.]/g, ''));

describe('the demo page under attack', () => {
  it('races run while the animation is paused: on resume each lane shows the last race only, and the summary says which design took longer', async () => {
    const { page, errors } = await openPage(server!.url);
    await chooseSynthetic(page, 2, 'instant');
    await page.click('[data-action="pause-animation"]');
    const start = page.locator('[data-action="race"]');
    for (let i = 0; i < 2; i++) {
      await start.click();
      // The race ran to its end, every message held by the paused animation.
      await page.locator('[data-action="race"]:not([disabled])').waitFor({ timeout: 60_000 });
    }
    await page.click('[data-action="pause-animation"]');
    await page.locator('#summary:not([hidden])').waitFor();
    for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
      expect(await page.locator(`[data-design="${d}"] [data-field="model-calls"]`).textContent(), d).toBe('3');
      expect(await page.locator(`[data-design="${d}"]`).getAttribute('data-state'), d).toBe('done');
    }
    const e2e = async (d: string) => num(await page.locator(`[data-design="${d}"] [data-field="e2e-ms"]`).textContent());
    // Shown to a tenth of a millisecond: within that, either word is the sign of a difference the page cannot show (each
    // figure rounded to a whole millisecond, 28 ms against 28 ms, the difference "0 ms more" failed CI once).
    const diff = (await e2e('http')) - (await e2e('long-lived'));
    const word = Math.abs(diff) < 0.15 ? '(less|more)' : diff > 0 ? 'less' : 'more';
    const text = (await page.locator('[data-field="explanation"]').textContent()) ?? '';
    // The difference is said of the long-lived Response, not left after the HTTP figure, where it read as HTTP's.
    expect(text).toMatch(new RegExp(`over HTTP \\(the long-lived Response took [0-9,]+ ms ${word}\\)`));
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('a page paused through a race holds only the last record of each response and the last byte count of each lane, not every copy', async () => {
    const { page, errors } = await openPage(server!.url);
    await page.selectOption('select[name="workload"]', 'synthetic');
    await page.fill('input[name="tool_calls"]', '30');
    // 31 model calls at 150 ms to first token each: the long-lived lanes' one response each is re-sent every 100 ms for
    // seconds, and each lane's byte count with it.
    await page.selectOption('select[name="speed"]', '1000');
    await page.click('[data-action="pause-animation"]');
    await page.click('[data-action="race"]');
    await page.locator('[data-action="race"]:not([disabled])').waitFor({ timeout: 90_000 });
    const heldCount = Number(await page.locator('[data-action="pause-animation"]').getAttribute('data-held'));
    await page.click('[data-action="pause-animation"]');
    await page.locator('#summary:not([hidden])').waitFor();
    let rows = 0;
    let responses = 0;
    for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
      expect(await page.locator(`[data-design="${d}"]`).getAttribute('data-state'), d).toBe('done');
      expect(await page.locator(`[data-design="${d}"] [data-field="model-calls"]`).textContent(), d).toBe('31');
      rows += await page.locator(`[data-design="${d}"] .wire li`).count();
      responses += num(await page.locator(`[data-design="${d}"] [data-field="responses"]`).textContent());
    }
    // Every wire row, one record per response, and per lane its byte count, two states and its end; the race's
    // first and last messages. (Every copy held: ~100 more records of the long-lived lanes' responses alone.)
    expect(heldCount).toBeGreaterThan(rows);
    expect(heldCount).toBeLessThanOrEqual(rows + responses + 4 * 4 + 2);
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('a server killed mid-race: the page says the stream broke and no lane is left running', async () => {
    const doomed = await spawnServer([]);
    try {
      const { page, errors } = await openPage(doomed.url);
      await chooseSynthetic(page, 40, '65');
      // Every lane running at once when the server goes.
      await page.selectOption('select[name="order"]', 'together');
      await page.click('[data-action="race"]');
      for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) await page.locator(`[data-design="${d}"][data-state="running"]`).waitFor({ timeout: 60_000 });
      doomed.proc.kill('SIGKILL');
      await page.locator('#error:not([hidden])').waitFor();
      await page.locator('[data-action="race"]:not([disabled])').waitFor();
      expect(await page.locator('#error').textContent()).toMatch(/race stream broke/);
      await page.locator('#summary:not([hidden])').waitFor();
      expect(await page.locator('[data-state="running"]').count()).toBe(0);
      for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
        expect(await page.locator(`[data-design="${d}"] [data-field="state"]`).textContent(), d).toBe('failed: the race stream broke');
      }
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await doomed.stop();
    }
  }, 120_000);

  it('a server that stops answering mid-race without closing (suspended, Ctrl-Z): the page gives the race up and says why, not every lane running for good', async () => {
    // A sign of life every 500 ms: the page gives up after three of them with nothing (the default: 5 s, 15 s).
    const frozen = await spawnServer(['--demo-alive-ms', '500']);
    try {
      const { page, errors } = await openPage(frozen.url);
      await chooseSynthetic(page, 40, '65');
      // Every lane running at once when the server goes.
      await page.selectOption('select[name="order"]', 'together');
      await page.click('[data-action="race"]');
      for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) await page.locator(`[data-design="${d}"][data-state="running"]`).waitFor({ timeout: 60_000 });
      frozen.proc.kill('SIGSTOP');
      await page.locator('#error:not([hidden])').waitFor({ timeout: 30_000 });
      expect(await page.locator('#error').textContent()).toMatch(/^The server stopped answering: nothing came for 1.5 s/);
      await page.locator('[data-action="race"]:not([disabled])').waitFor();
      await page.locator('#summary:not([hidden])').waitFor();
      expect(await page.locator('[data-state="running"]').count()).toBe(0);
      for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
        expect(await page.locator(`[data-design="${d}"] [data-field="state"]`).textContent(), d).toBe('failed: the server stopped answering');
      }
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      frozen.proc.kill('SIGCONT');
      await frozen.stop();
    }
  }, 120_000);

  it('one race too many, or a wrong key: the refusal is shown beside the last race\'s results, which stay on screen', async () => {
    const keyed = await spawnServer(['--demo-max-races', '1', '--api-key', 'sk-demo']);
    const held = new AbortController();
    try {
      const page = await browser!.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${keyed.url}/demo`);
      // No lanes until the page has the key: it asks for it.
      await page.locator('[data-for="auth"]:not([hidden])').waitFor();
      await page.fill('input[name="api_key"]', 'sk-wrong');
      await page.click('[data-action="race"]');
      await page.locator('#error', { hasText: 'refused this API key' }).waitFor();
      await page.fill('input[name="api_key"]', 'sk-demo');
      await chooseSynthetic(page, 2, 'instant');
      await page.click('[data-action="race"]');
      await page.locator('#summary:not([hidden])').waitFor({ timeout: 60_000 });
      await page.locator('[data-action="race"]:not([disabled])').waitFor();
      // The one race slot taken by another presenter: a step-mode race that waits for its first step.
      const other = await fetch(`${keyed.url}/demo/api/races`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sk-demo' },
        body: JSON.stringify({ workload: 'synthetic', tool_calls: 2, speed: 'instant', step: true }),
        signal: held.signal,
      });
      expect(other.status).toBe(200);
      await page.click('[data-action="race"]');
      await page.locator('#error', { hasText: '1 demo race is already running' }).waitFor();
      await page.locator('[data-action="race"]:not([disabled])').waitFor();
      for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
        expect(await page.locator(`[data-design="${d}"]`).getAttribute('data-state'), d).toBe('done');
        expect(await page.locator(`[data-design="${d}"] [data-field="model-calls"]`).textContent(), d).toBe('3');
      }
      expect(await page.locator('#summary').isVisible()).toBe(true);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      held.abort();
      await keyed.stop();
    }
  }, 120_000);

  it('a double click on Start while the page still waits for its configuration starts one race, not two (outside attack atk50 F2)', async () => {
    // On a server with keys the configuration loads only once a key is typed: both clicks passed the one-race check
    // while the first waited for it, and two races fed the same lanes (26 model calls for a run of 13).
    const keyed = await spawnServer(['--api-key', 'sk-demo']);
    try {
      const page = await browser!.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      const races: string[] = [];
      page.on('request', (r) => r.method() === 'POST' && r.url().endsWith('/demo/api/races') && races.push(r.url()));
      await page.goto(`${keyed.url}/demo`);
      await page.locator('[data-for="auth"]:not([hidden])').waitFor();
      await page.fill('input[name="api_key"]', 'sk-demo');
      await chooseSynthetic(page, 2, 'instant');
      await page.dblclick('[data-action="race"]');
      await page.locator('#summary:not([hidden])').waitFor({ timeout: 60_000 });
      await page.locator('[data-action="race"]:not([disabled])').waitFor();
      expect(races).toHaveLength(1);
      for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
        expect(await page.locator(`[data-design="${d}"] [data-field="model-calls"]`).textContent(), d).toBe('3');
      }
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await keyed.stop();
    }
  }, 120_000);

  it('while a model call runs, the timeline\'s scale holds the lane\'s time so far, not only the API stages drawn (outside attack atk50 F3)', async () => {
    // A 5 s time to first token: the first call's spans come only when it ends, and the scale fitted to what was drawn
    // made its few milliseconds of API stages fill the timeline meanwhile.
    const slow = await spawnServer(['--ttft-ms', '5000']);
    try {
      const { page, errors } = await openPage(slow.url);
      await chooseSynthetic(page, 1, '1000');
      await page.click('[data-action="race"]');
      const label = '[data-design="http"] svg.timeline';
      // The lane's timeline spans a second while its first call still waits for its first token.
      await page.waitForFunction((sel) => {
        const doc = (globalThis as unknown as { document: { querySelector(s: string): { getAttribute(n: string): string | null } | null } }).document;
        const m = /drawn over ([0-9,.]+) ms/.exec(doc.querySelector(sel)?.getAttribute('aria-label') ?? '');
        return m !== null && Number(m[1]!.replace(/,/g, '')) >= 1000;
      }, label);
      const rects = await page.$$eval(`${label} rect`, (rs) => rs.map((r) => ({ y: Number(r.getAttribute('y')), w: Number(r.getAttribute('width')), title: r.textContent ?? '' })));
      expect(rects.filter((r) => /^(prefill|decode)/.test(r.title))).toEqual([]);
      const api = rects.filter((r) => r.y === 22);
      expect(api.length).toBeGreaterThan(0);
      // Milliseconds of stages over a second of lane time: a sliver, not half the width (1000 units).
      expect(Math.max(...api.map((r) => r.w))).toBeLessThan(100);
      await page.click('[data-action="stop"]');
      await page.locator('[data-action="race"]:not([disabled])').waitFor();
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await slow.stop();
    }
  }, 120_000);

  it('a race\'s stream is drawn once per frame: a wire event does not force a layout of its own', async () => {
    const { page, errors } = await openPage(server!.url);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const metrics = async () => Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    await chooseSynthetic(page, 60, 'instant');
    await page.selectOption('select[name="order"]', 'together');
    // The frames the page was given (a counter run from the test, outside the page's CSP), and the layouts it made.
    await page.evaluate(() => {
      const w = globalThis as unknown as { frames_seen: number; requestAnimationFrame: (f: () => void) => number };
      w.frames_seen = 0;
      const tick = () => {
        w.frames_seen++;
        w.requestAnimationFrame(tick);
      };
      w.requestAnimationFrame(tick);
    });
    const frames = () => page.evaluate(() => (globalThis as unknown as { frames_seen: number }).frames_seen);
    const before = { m: await metrics(), frames: await frames() };
    await page.click('[data-action="race"]');
    // Attached, not visible: a visibility check would lay the page out itself.
    await page.locator('[data-action="race"]:not([disabled])').waitFor({ state: 'attached', timeout: 60_000 });
    const after = { m: await metrics(), frames: await frames() };
    const rows = await page.locator('.wire li').count();
    const layouts = after.m['LayoutCount']! - before.m['LayoutCount']!;
    // Each wire row read the log's scrollHeight to follow it, a layout of the whole page per row (2,880 on the Codex
    // run at 4,000 tokens/s, where the page then took ~23 s of CPU in a 27 s race on the machine the server measures on).
    // Consecutive deltas are one wire row, cut where the lane's reads fall, so the count moves with the machine's load
    // (1,498 once under a parallel test load): enough rows that a layout per row would show, whatever the load.
    expect(rows).toBeGreaterThan(1000);
    expect(layouts, `${layouts} layouts, ${after.frames - before.frames} frames, ${rows} wire rows`).toBeLessThanOrEqual(after.frames - before.frames + 20);
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('a race\'s messages change the page in batches: wire rows at most every 100 ms, the charts redrawn at most every 250 ms', async () => {
    const { page, errors } = await openPage(server!.url);
    await chooseSynthetic(page, 10, '1000');
    await page.selectOption('select[name="order"]', 'together');
    // Each batch of DOM changes to the wire logs, and to the timelines (a redraw), as the page's mutation observer sees them.
    await page.evaluate(() => {
      type Node = { classList?: { contains(c: string): boolean } };
      const g = globalThis as unknown as {
        seen: { draws: number; batches: number };
        MutationObserver: new (cb: (rs: Array<{ target: Node }>) => void) => { observe(n: unknown, o: object): void };
        document: { getElementById(id: string): unknown };
      };
      g.seen = { draws: 0, batches: 0 };
      new g.MutationObserver((rs) => {
        if (rs.some((r) => r.target.classList?.contains('timeline'))) g.seen.draws++;
        if (rs.some((r) => r.target.classList?.contains('wire'))) g.seen.batches++;
      }).observe(g.document.getElementById('lanes'), { childList: true, subtree: true });
    });
    const start = Date.now();
    await page.click('[data-action="race"]');
    await page.locator('#summary:not([hidden])').waitFor({ timeout: 60_000 });
    const ms = Date.now() - start;
    const seen = await page.evaluate(() => (globalThis as unknown as { seen: { draws: number; batches: number } }).seen);
    // Each message changed the page as it came: a frame's redraw of every chart whenever a record or count came
    // (up to 60 a second), and wire rows in every chunk the stream read.
    expect(seen.batches, `${seen.batches} wire batches in ${ms} ms`).toBeLessThanOrEqual(ms / 100 + 3);
    expect(seen.draws, `${seen.draws} redraws in ${ms} ms`).toBeLessThanOrEqual(ms / 250 + 5);
    for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
      expect(await page.locator(`[data-design="${d}"]`).getAttribute('data-state'), d).toBe('done');
      expect(await page.locator(`[data-design="${d}"] [data-field="model-calls"]`).textContent(), d).toBe('11');
    }
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('on a phone-wide viewport (375 px) nothing is wider than the page: the buttons wrap', async () => {
    const { page, errors } = await openPage(server!.url);
    await page.setViewportSize({ width: 375, height: 720 });
    await page.locator('[data-action="pause-animation"]').waitFor();
    // The four buttons in one row were 380 px: "Pause animation" was cut at the page's edge.
    const widths = await page.evaluate(() => {
      const d = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document.documentElement;
      return { scroll: d.scrollWidth, client: d.clientWidth };
    });
    expect(widths.scroll, JSON.stringify(widths)).toBeLessThanOrEqual(widths.client);
    const box = await page.locator('[data-action="pause-animation"]').boundingBox();
    expect(box!.x + box!.width).toBeLessThanOrEqual(375);
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('a page loaded before the server restarted with other flags shows the lanes the race runs, not the old ones', async () => {
    const page = await browser!.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // The configuration the page read from the server before its restart: without WebSockets, two designs.
    await page.route('**/demo/api/config', async (route) => {
      const res = await route.fetch();
      const config = (await res.json()) as { designs: Array<{ id: string }> };
      config.designs = config.designs.filter((d) => d.id === 'http' || d.id === 'long-lived-http');
      await route.fulfill({ response: res, json: config });
    });
    await page.goto(`${server!.url}/demo`);
    await page.locator('[data-design="http"][data-state="idle"]').waitFor();
    expect(await page.locator('[data-design]').count()).toBe(2);
    await chooseSynthetic(page, 2, 'instant');
    await page.click('[data-action="race"]');
    await page.locator('#summary:not([hidden])').waitFor({ timeout: 60_000 });
    // The server (with WebSockets) raced four designs: the page shows all four, each done with its counts.
    for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) {
      expect(await page.locator(`[data-design="${d}"]`).getAttribute('data-state'), d).toBe('done');
      expect(await page.locator(`[data-design="${d}"] [data-field="model-calls"]`).textContent(), d).toBe('3');
    }
    expect(await page.locator('[data-field="explanation"]').textContent()).toMatch(/ms in WebSocket mode/);
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('a step the network loses: the page says so and Next can be pressed again, not left disabled with every lane waiting', async () => {
    const { page, errors } = await openPage(server!.url);
    let lose = true;
    await page.route('**/demo/api/races/*/step', async (route) => {
      if (lose) {
        lose = false;
        await route.abort('connectionreset');
      } else {
        await route.continue();
      }
    });
    await chooseSynthetic(page, 2, 'instant');
    await page.check('input[name="step"]');
    await page.click('[data-action="race"]');
    const next = page.locator('[data-action="step"]:not([disabled])');
    await next.waitFor({ timeout: 60_000 });
    await next.click();
    // The lost step is said, and the button is back: the lanes still wait for it.
    await page.locator('#error', { hasText: 'step' }).waitFor();
    await next.waitFor();
    await next.click();
    await next.waitFor({ timeout: 60_000 });
    await next.click();
    await page.locator('#summary:not([hidden])').waitFor({ timeout: 60_000 });
    for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) expect(await page.locator(`[data-design="${d}"]`).getAttribute('data-state'), d).toBe('done');
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('a race that cannot reach the server is said not to have started, and the last race stays on screen', async () => {
    const { page, errors } = await openPage(server!.url);
    await chooseSynthetic(page, 2, 'instant');
    await page.click('[data-action="race"]');
    await page.locator('#summary:not([hidden])').waitFor({ timeout: 60_000 });
    await page.locator('[data-action="race"]:not([disabled])').waitFor();
    // The server gone between races: the request never gets an answer.
    await page.route('**/demo/api/races', (route) => route.abort('connectionrefused'));
    await page.click('[data-action="race"]');
    await page.locator('#error:not([hidden])').waitFor();
    await page.locator('[data-action="race"]:not([disabled])').waitFor();
    // It read "The race stream broke", of a race that never started.
    expect(await page.locator('#error').textContent()).toMatch(/^The race could not start: /);
    for (const d of ['long-lived', 'ws', 'http', 'long-lived-http']) expect(await page.locator(`[data-design="${d}"]`).getAttribute('data-state'), d).toBe('done');
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);
  it('a page whose script the server refused says so, its buttons disabled; loaded, the note is gone (outside attack atk89 F4)', async () => {
    // Past --max-connections the browser's parallel fetch of demo.js was refused 503: the page showed a working-looking
    // form whose Start did nothing, and no message.
    const page = await browser!.newPage();
    await page.route('**/demo/demo.js', (route) => route.fulfill({ status: 503, contentType: 'application/json', body: '{"error":{"message":"too many connections","type":"server_error","param":null,"code":"too_many_connections"}}' }));
    await page.goto(`${server!.url}/demo`);
    await page.locator('#script-missing').waitFor({ state: 'visible' });
    expect(await page.locator('#script-missing').textContent()).toMatch(/^This page's script has not loaded/);
    expect(await page.locator('[data-action="race"]').isDisabled()).toBe(true);
    await page.close();
    const { page: loaded, errors } = await openPage(server!.url);
    expect(await loaded.locator('#script-missing').count()).toBe(0);
    expect(await loaded.locator('[data-action="race"]').isDisabled()).toBe(false);
    expect(errors).toEqual([]);
    await loaded.close();
  }, 120_000);

  it('a page whose configuration never loaded, with the server still unreachable: Start says so, no unhandled error', async () => {
    const page = await browser!.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.route('**/demo/api/config', (route) => route.abort('connectionrefused'));
    await page.goto(`${server!.url}/demo`);
    await page.locator('#error:not([hidden])').waitFor();
    expect(await page.locator('#error').textContent()).toMatch(/^Cannot load the demo configuration: /);
    // Clicking Start loads the configuration again; it still fails. The page threw (an unhandled rejection) and left
    // the last message on screen.
    await page.locator('#error').evaluate((el) => {
      el.textContent = '';
    });
    await page.click('[data-action="race"]');
    await page.locator('#error:not(:empty)').waitFor();
    expect(await page.locator('#error').textContent()).toMatch(/^Cannot load the demo configuration: /);
    expect(errors).toEqual([]);
    // Once the server answers again, Start loads it and the lanes appear.
    await page.unroute('**/demo/api/config');
    await chooseSynthetic(page, 1, 'instant');
    await page.click('[data-action="race"]');
    await page.locator('#summary:not([hidden])').waitFor({ timeout: 60_000 });
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);
});
