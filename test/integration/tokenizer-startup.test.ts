/**
 * Start-up without the tokenizer's tables (issue 11) on real sockets: a
 * server started by default has not loaded them before its first request
 * (`/llr/stats` says so, in process and from a spawned `llr serve`);
 * concurrent first requests share one load and all succeed; `/health` is
 * answered while the load is under way; a failed load gives every waiting
 * request a server_error, and a later request loads again and succeeds;
 * `eagerTokenizer` loads them at creation. The load is held open by a gated
 * source (model/tokenizer.ts `setTokenizerSource`), so "during the load" is
 * a state the test controls, not a race.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { setTokenizerSource, tokenPieces } from '../../src/model/tokenizer.js';
import type { Response } from '../../src/protocol/objects.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { testServer } from '../helpers/server.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { LONG_LIVED_BETA, WS_MODE_BETA } from '../../src/protocol/designs.js';
import { buildDist, CLI } from '../helpers/build.js';

const data = readFileSync(createRequire(import.meta.url).resolve('gpt-tokenizer/data/o200k_base.tiktoken'));
const ANSWER = 'the tables were loaded for this answer';

interface Stats {
  tokenizer: { state: string; load_ms: number | null; failed_loads: number };
}

/** A source whose read the test releases or fails, and which tells the test when the read began. */
function gatedSource() {
  let release!: (d: Uint8Array) => void;
  let fail!: (e: Error) => void;
  let began!: () => void;
  const gate = new Promise<Uint8Array>((res, rej) => {
    release = res;
    fail = rej;
  });
  const readBegan = new Promise<void>((res) => (began = res));
  const src = {
    reads: 0,
    read: () => {
      src.reads++;
      began();
      return gate;
    },
    readSync: (): Uint8Array => {
      throw new Error('a synchronous load in the server: some path tokenized before awaiting the tables');
    },
  };
  return { src, release, fail, readBegan };
}

const stats = async (url: string) => ((await (await fetch(`${url}/llr/stats`)).json()) as Stats).tokenizer;
const create = (url: string, input: string) =>
  fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input, store: false }) });

beforeEach(() => setTokenizerSource(null));
afterEach(() => setTokenizerSource(null));

describe('tokenizer tables load with the first request', () => {
  it('are not loaded before it; concurrent first requests share one load and succeed; /health answers during the load', async () => {
    const gated = gatedSource();
    setTokenizerSource(gated.src);
    const { url } = await testServer({ policy: scriptPolicy(Array.from({ length: 6 }, () => ({ text: ANSWER }))) });
    expect((await stats(url)).state).toBe('unloaded');

    // A create over each WebSocket design too: every path waits for the tables (a synchronous load would throw here).
    const sockets = [await RawSocket.connect(url, { headers: { 'OpenAI-Beta': WS_MODE_BETA } }), await RawSocket.connect(url, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } })];
    for (const s of sockets) s.send({ type: 'response.create', model: 'sim-model', input: 'over a socket', store: false });
    const done: boolean[] = [];
    const firsts = ['one', 'two', 'three', 'four'].map((input, i) =>
      create(url, input).then(async (res) => {
        done[i] = true;
        return { status: res.status, body: (await res.json()) as Response };
      }),
    );
    await gated.readBegan;
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { status: string }).status).toBe('ok');
    expect((await stats(url)).state).toBe('loading');
    expect(done.filter(Boolean)).toEqual([]);

    gated.release(data);
    const results = await Promise.all(firsts);
    for (const r of results) {
      expect(r.status).toBe(200);
      expect(r.body.status).toBe('completed');
      const text = r.body.output.flatMap((o) => (o.type === 'message' ? o.content.map((c) => ('text' in c ? c.text : '')) : [])).join('');
      expect(text).toBe(ANSWER);
      expect(r.body.usage?.output_tokens).toBe(tokenPieces(ANSWER).length);
      expect(r.body.usage?.input_tokens).toBeGreaterThan(0);
    }
    for (const s of sockets) {
      const completed = await s.next('response.completed');
      expect(completed.response.usage?.output_tokens).toBe(tokenPieces(ANSWER).length);
    }
    expect(gated.src.reads).toBe(1);
    const after = await stats(url);
    expect(after.state).toBe('loaded');
    expect(after.load_ms).toBeGreaterThan(0);
  });

  it('gives every waiting request a server_error when the load fails, and loads again on a later request', async () => {
    const gated = gatedSource();
    setTokenizerSource(gated.src);
    const { url } = await testServer({ policy: scriptPolicy(Array.from({ length: 4 }, () => ({ text: ANSWER }))) });
    const waiting = [create(url, 'a'), create(url, 'b'), create(url, 'c')];
    await gated.readBegan;
    gated.fail(new Error('EIO: the data file could not be read'));
    for (const res of await Promise.all(waiting)) {
      expect(res.status).toBe(500);
      const { error } = (await res.json()) as { error: { type: string; code: string; message: string } };
      expect(error).toMatchObject({ type: 'server_error', code: 'server_error' });
      expect(error.message).toMatch(/tokenizer tables could not be loaded/);
    }
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect(await stats(url)).toMatchObject({ state: 'unloaded', failed_loads: expect.any(Number) });

    const good = gatedSource();
    setTokenizerSource(good.src);
    const later = create(url, 'again');
    await good.readBegan;
    good.release(data);
    const res = await later;
    expect(res.status).toBe(200);
    expect(((await res.json()) as Response).status).toBe('completed');
  });

  it('are loaded at creation with eagerTokenizer', async () => {
    const gated = gatedSource();
    setTokenizerSource({ read: gated.src.read, readSync: () => data });
    const { url } = await testServer({ eagerTokenizer: true });
    expect((await stats(url)).state).toBe('loaded');
    expect(gated.src.reads).toBe(0);
  });
});

describe('`llr serve` (a real process)', () => {
  beforeAll(buildDist, 120_000);

  it('listens without the tables and loads them with its first request', async () => {
    const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--store', 'memory', '--instant'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LLR_LOG_LEVEL: 'info' } });
    const exited = new Promise<void>((res) => proc.once('exit', () => res()));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        proc.stdout.setEncoding('utf8').on('data', (c: string) => {
          out += c;
          const m = /"url":"(http[^"]+)"/.exec(out);
          if (m) resolve(m[1]!);
        });
        proc.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
        proc.once('exit', (code) => reject(new Error(`llr serve exited (${code}) before listening:\n${out}`)));
      });
      expect((await stats(url)).state).toBe('unloaded');
      const res = await create(url, 'hello');
      expect(res.status).toBe(200);
      expect((await stats(url)).state).toBe('loaded');
    } finally {
      proc.kill('SIGTERM');
      await exited;
    }
  });
});
