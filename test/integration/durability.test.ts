/**
 * The durability point, tested the hard way: a real `llr serve` child process
 * on a SQLite file is SIGKILLed the moment the client sees
 * `response.completed` for a `store:true` response, restarted on the same
 * file, and must serve that response from `GET /v1/responses/{id}`. Ten times
 * per design (long-lived, ws, HTTP + SSE); each restarted server also serves
 * the next response, so the chain costs one process per kill. No sleeps: the
 * test waits on the child's log line, its exit, and the client's events.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Response } from '../../src/protocol/objects.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { LONG_LIVED_BETA, type Protocol } from '../../src/protocol/designs.js';
import { buildDist } from '../helpers/build.js';
import { serveChild, type ServedChild } from '../helpers/serve-child.js';

const dir = mkdtempSync(join(tmpdir(), 'llr-durability-'));
const KILLS_PER_DESIGN = 10;

beforeAll(async () => {
  // The tests run the built CLI: build it, and stop here if the build fails.
  await buildDist();
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Served = ServedChild;

/** `llr serve --port 0 --store FILE --instant` (helpers/serve-child.ts). */
const serve = (store: string, extra: string[] = []): Promise<Served> => serveChild(store, ['--instant', ...extra]);

type Design = Protocol;

/** One store:true response; the server is SIGKILLed synchronously on the client's first sight of response.completed. */
async function completeThenKill(design: Design, s: Served): Promise<string> {
  const body = { model: 'sim-model', input: `remember me (${design})`, store: true };
  if (design === 'http') {
    const res = await fetch(`${s.url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended without response.completed:\n${text}`);
      text += decoder.decode(value, { stream: true });
      const m = /event: response\.completed\ndata: (.*)\n/.exec(text);
      if (m) {
        s.proc.kill('SIGKILL');
        void reader.cancel().catch(() => {});
        return (JSON.parse(m[1]!) as { response: Response }).response.id;
      }
    }
  }
  const headers: Record<string, string> = design === 'long-lived' ? { 'OpenAI-Beta': LONG_LIVED_BETA } : {};
  const ws = new WebSocket(s.url.replace(/^http/, 'ws') + '/v1/responses', { headers });
  return new Promise((resolve, reject) => {
    ws.on('error', () => {}); // the kill resets the socket; that is the point
    ws.once('open', () => ws.send(JSON.stringify({ type: 'response.create', ...body })));
    ws.on('message', (data) => {
      const e = JSON.parse(data.toString()) as ServerEvent;
      if (e.type === 'response.completed') {
        s.proc.kill('SIGKILL');
        resolve(e.response.id);
      } else if (e.type === 'error' || e.type === 'response.failed') {
        reject(new Error(`unexpected ${JSON.stringify(e)}`));
      }
    });
  });
}

async function fetchStored(url: string, id: string): Promise<{ status: number; body: Response }> {
  const res = await fetch(`${url}/v1/responses/${id}`);
  return { status: res.status, body: (await res.json()) as Response };
}

/** Kill-and-restart `KILLS_PER_DESIGN` times on one store file; returns the ids each restart found. */
async function killChain(design: Design): Promise<void> {
  const store = join(dir, `${design}.sqlite`);
  const ids: string[] = [];
  let server = await serve(store);
  for (let i = 0; i < KILLS_PER_DESIGN; i++) {
    const id = await completeThenKill(design, server);
    await server.exited;
    server = await serve(store);
    const got = await fetchStored(server.url, id);
    expect(got.status, `${design} #${i}: ${id} after SIGKILL`).toBe(200);
    expect(got.body).toMatchObject({ id, status: 'completed' });
    ids.push(id);
  }
  // Nothing found once was lost by a later kill.
  for (const id of ids) expect((await fetchStored(server.url, id)).status, `${design} ${id}`).toBe(200);
  server.proc.kill('SIGTERM');
  await server.exited;
}

describe('stored responses survive a SIGKILL right after response.completed', () => {
  // The three designs' chains run side by side, each on its own file: the
  // cost is server start-up (the tokenizer's tables), not the responses.
  it(`${KILLS_PER_DESIGN} kills per design; every response is found after restart`, async () => {
    const chains = (['long-lived', 'ws', 'http'] as const).map(killChain);
    await Promise.all(chains);
  }, 240_000);
});
