/**
 * The teaching demo against an outside attacker, on real sockets (port 0):
 * a page that leaves before its race stream starts, a race stopped while a
 * lane's call is in flight or while its lanes wait at a step. Each waits on server events
 * (the socket's close, the race's end), not on sleeps.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { setTokenizerSource, tokenizerReady } from '../../src/model/tokenizer.js';
import type { RunRecord } from '../../src/engine/records.js';
import { testServer } from '../helpers/server.js';
import { sseEvents } from '../../src/client/http.js';
import { DEMO_DESIGNS } from '../../src/demo/designs.js';
import type { DemoMessage, LaneStateMessage } from '../../src/demo/messages.js';

const data = readFileSync(createRequire(import.meta.url).resolve('gpt-tokenizer/data/o200k_base.tiktoken'));

/** A tokenizer source whose read the test releases, and which tells the test when the read began. */
function gatedSource() {
  let release!: (d: Uint8Array) => void;
  let began!: () => void;
  const gate = new Promise<Uint8Array>((res) => (release = res));
  const readBegan = new Promise<void>((res) => (began = res));
  const src = {
    read: () => {
      began();
      return gate;
    },
    readSync: (): Uint8Array => {
      throw new Error('a synchronous tokenizer load');
    },
  };
  return { src, release, readBegan };
}

afterEach(() => setTokenizerSource(null));

async function records(url: string): Promise<RunRecord[]> {
  return ((await (await fetch(`${url}/llr/runs`)).json()) as { data: RunRecord[] }).data;
}

describe('demo races and pages that go away', () => {
  it('a page gone before its race stream started (the tokenizer was still loading): no race runs on for nobody', async () => {
    const gated = gatedSource();
    setTokenizerSource(gated.src);
    const { url, server } = await testServer({ demo: { maxRaces: 1 } });
    // The server's side of the page's socket: closed once the server has seen the page leave.
    const serverSawClose = new Promise<void>((resolve) => server.http.once('request', (req) => req.socket.once('close', () => resolve())));
    const body = JSON.stringify({ workload: 'synthetic', tool_calls: 100, speed: '65', tool_time: 'recorded' });
    const page = connect(Number(new URL(url).port), '127.0.0.1');
    page.on('error', () => {});
    page.write(`POST /demo/api/races HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    // The body is read; the race waits for the tokenizer's tables (the first request after start-up).
    await gated.readBegan;
    page.destroy();
    await serverSawClose;
    gated.release(data);
    // The race's own wait for the tables was queued first: it has gone on (and started its race, if it does) by the time this resolves.
    await tokenizerReady();
    // Run on, the race would take minutes (101 model calls at 65 tokens/s and 300 ms per tool, per lane) and hold the only race slot.
    await server.demo!.idle();
    expect(server.demo!.racesRunning).toBe(0);
    expect(server.demo!.models.size).toBe(0);
    expect((await records(url)).filter((r) => r.status === 'in_progress')).toEqual([]);
    const next = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 1, speed: 'instant' }),
    });
    expect(next.status).toBe(200);
    expect(await next.text()).toMatch(/"type":"race.done","race_id":"r[0-9a-f]+","status":"done"/);
  });

  it('a race stopped by its deadline reports no lane as done: none finished the workload', async () => {
    const { url } = await testServer({ demo: { raceTimeoutMs: 1500 } });
    // Step mode, never stepped: every lane waits at its first tool calls until the deadline stops the race.
    const res = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 5, speed: 'instant', step: true }),
    });
    expect(res.status).toBe(200);
    const msgs: DemoMessage[] = [];
    for await (const e of sseEvents(res.body!)) msgs.push(e as unknown as DemoMessage);
    expect(msgs.at(-1)).toMatchObject({ type: 'race.done', status: 'stopped' });
    expect(msgs.filter((m) => m.type === 'lane.done')).toEqual([]);
    for (const d of DEMO_DESIGNS) {
      const last = msgs.filter((m): m is LaneStateMessage => m.type === 'lane.state' && m.design === d.id).at(-1);
      expect(last, d.id).toMatchObject({ state: 'failed', error: 'the race did not finish within 1500 ms' });
    }
  });
  it('a page that stops its race mid-call: the HTTP lane drops its request in flight too, so no model call decodes on for nobody', async () => {
    const { url, server } = await testServer({ demo: { maxRaces: 1 } });
    const page = new AbortController();
    const res = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 3, speed: '65' }),
      signal: page.signal,
    });
    let model = '';
    // The HTTP lane's first response has been created: its 60 tokens take ~1 s at 65 tokens/s.
    for await (const e of sseEvents(res.body!)) {
      const m = e as unknown as DemoMessage;
      if (m.type === 'race') model = m.designs.find((d) => d.id === 'http')!.model;
      if (m.type === 'wire' && m.design === 'http' && m.event === 'response.created') break;
    }
    page.abort();
    await server.demo!.idle();
    // The lane's request ends as a disconnect once the server finds its client gone (a write after the client's FIN
    // fails: transport/socket-watch.ts), which may be after the race has let go of it.
    await server.httpTransport.idle();
    await server.services.postWork.flush();
    // The call in flight ended with the page (the client's disconnect), as the socket lanes' do. It decoded to its end
    // at 65 tokens/s, then the next call answered the stop's one line: up to a long Codex answer's ~8 s at 65 tokens/s,
    // while the race kept its slot (a presenter's Stop, then Start, got 429 too_many_races).
    const http = (await records(url)).filter((r) => r.model === model);
    expect(http.map((r) => r.status)).toEqual(['cancelled']);
    expect(server.demo!.racesRunning).toBe(0);
  });

  it('a page that stops reading is dropped once nothing of its stream leaves, not kept for good with the unsent stream', async () => {
    const { url, server } = await testServer({ limits: { sendStallTimeoutMs: 300 } });
    const serverSide = new Promise<Socket>((resolve) => server.http.once('request', (req) => resolve(req.socket)));
    const body = JSON.stringify({ workload: 'synthetic', tool_calls: 2, speed: 'instant' });
    const page = connect(Number(new URL(url).port), '127.0.0.1');
    page.on('error', () => {});
    page.write(`POST /demo/api/races HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    const socket = await serverSide;
    const closed = once(socket, 'close');
    // The page reads nothing and the kernel's buffers are full (as they are after a few MB on loopback): from now on
    // the socket's writes never complete, so what the race writes stays in the socket, unsent.
    const stuck = socket as unknown as { _write: unknown; _writev: unknown };
    stuck._write = () => {};
    stuck._writev = () => {};
    // Dropped once nothing has left for the stall timeout (mid-race or after): before, the socket stayed open for good
    // with the stream in it, as the send-buffer check runs only as the race writes and a race's stream is a few MB.
    await closed;
    await server.demo!.idle();
    expect(server.demo!.racesRunning).toBe(0);
    expect(server.demo!.models.size).toBe(0);
    page.destroy();
  });
});

describe('demo races that cannot finish in time', () => {
  it('a race whose least possible duration is past the race limit is refused up front, not failed at the deadline', async () => {
    // 10 s of race limit. Synthetic calls decode 60 tokens each: at 65 tokens/s a call takes >= 923 ms (and the
    // server's time to first token, none on this test server).
    const { url, server } = await testServer({ demo: { raceTimeoutMs: 10_000 } });
    const race = (body: object, signal?: AbortSignal) =>
      fetch(`${url}/demo/api/races`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), ...(signal && { signal }) });
    // 6 calls: >= 5.5 s a lane. Together it fits; one lane after another (four lanes, >= 22 s) it cannot, nor 13
    // calls together (>= 12 s). The Codex run at 65 tokens/s with its lanes one after another (9,118 output tokens,
    // >= 140 s a lane) ran for the default limit's ten minutes and failed there.
    for (const body of [
      { workload: 'synthetic', tool_calls: 5, speed: '65', order: 'one-by-one' },
      { workload: 'synthetic', tool_calls: 5, speed: '65', order: 'one-by-one', tool_time: 'recorded' },
      { workload: 'synthetic', tool_calls: 12, speed: '65', order: 'together' },
      // A prompt's commands are decoded as each call's arguments: 10 commands of 150 characters of base64-like text,
      // ~100 tokens each, >= 15 s. Counted as no output, it was accepted and failed at the deadline (atk106 F2).
      { workload: 'prompt', prompt: Array.from({ length: 10 }, (_, i) => `$ echo ${Buffer.from(`${i}`.repeat(112)).toString('base64').replace(/[A-Z]/g, (c) => c.toLowerCase() + i)}`).join('\n'), speed: '65', order: 'together' },
    ]) {
      const res = await race(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const err = ((await res.json()) as { error: { code: string; param: string | null; message: string } }).error;
      expect(err).toMatchObject({ code: 'invalid_value', param: 'speed' });
      expect(err.message).toMatch(/at least [\d,.]+ s .*race limit of 10 s/);
    }
    expect(await records(url)).toEqual([]);
    // One that can finish in time starts.
    const page = new AbortController();
    const ok = await race({ workload: 'synthetic', tool_calls: 5, speed: '65', order: 'together' }, page.signal);
    expect(ok.status).toBe(200);
    page.abort();
    await server.demo!.idle();
  });
});

describe('demo request bodies', () => {
  it('a prompt at the byte limit is accepted however JSON escapes it; one byte over is refused naming the prompt', async () => {
    const { url, server } = await testServer();
    const race = (prompt: string, signal?: AbortSignal) =>
      fetch(`${url}/demo/api/races`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ workload: 'prompt', prompt, speed: 'instant' }),
        ...(signal && { signal }),
      });
    // 16,384 bytes of prompt, each escaped to two or six bytes of JSON: a body well over the prompt's limit.
    const limit = server.demo!.options.maxPromptBytes;
    for (const filler of ['"', '\n', '\u0001']) {
      const prompt = `$ ls\n${filler.repeat(limit - 5)}`;
      expect(Buffer.byteLength(prompt)).toBe(limit);
      const page = new AbortController();
      const ok = await race(prompt, page.signal);
      expect(ok.status, JSON.stringify(filler)).toBe(200);
      page.abort();
      await server.demo!.idle();
      const over = await race(`${prompt}${filler}`);
      expect(over.status, JSON.stringify(filler)).toBe(413);
      expect(((await over.json()) as { error: { param: string | null } }).error.param).toBe('prompt');
    }
  });

  it('step: a race not in step mode is refused (its lanes wait for no step), not answered {"allowed": null}; an unknown id is not echoed at length', async () => {
    const { url, server } = await testServer();
    const page = new AbortController();
    const res = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 40, speed: '65' }),
      signal: page.signal,
    });
    let raceId = '';
    for await (const e of sseEvents(res.body!)) {
      const m = e as unknown as DemoMessage;
      if (m.type !== 'race') continue;
      raceId = m.race_id;
      break;
    }
    const step = await fetch(`${url}/demo/api/races/${raceId}/step`, { method: 'POST' });
    expect(step.status).toBe(400);
    expect(((await step.json()) as { error: { code: string; param: string | null } }).error).toMatchObject({ code: 'invalid_value', param: 'step' });
    page.abort();
    await server.demo!.idle();
    const unknown = await fetch(`${url}/demo/api/races/r${'0'.repeat(5000)}/step`, { method: 'POST' });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { message: string } }).error.message.length).toBeLessThan(300);
  });
});

describe('demo race bodies at the edge, as /v1 bodies', () => {
  // 8,005 bytes of prompt (within its 16 KiB limit), escaped by JSON to ~48 KiB of body: within the demo's own body limit.
  const body = JSON.stringify({ workload: 'prompt', prompt: `$ ls\n${'\u0001'.repeat(8000)}`, speed: 'instant' });
  const post = (url: string) => fetch(`${url}/demo/api/races`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const health = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;

  it('a race body is charged to --max-server-bytes: past the whole budget 413, not to retry, as on /v1; nothing held after', async () => {
    expect(Buffer.byteLength(body)).toBeGreaterThan(40 * 1024);
    const { url, server } = await testServer({ limits: { maxServerBytes: 32 * 1024 } });
    const res = await post(url);
    // Larger than the whole budget: it can never fit (it was a 503 "try again"; atk89 F7).
    expect(res.status).toBe(413);
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('--max-server-bytes') });
    await server.demo!.idle();
    expect(server.demo!.racesRunning).toBe(0);
    expect(await health(url)).toBe(0);
  });

  it('a race body is bounded by --max-frame-bytes: past it 413 payload_too_large', async () => {
    const { url, server } = await testServer({ limits: { maxFrameBytes: 16 * 1024 } });
    const res = await post(url);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    await server.demo!.idle();
    expect(server.demo!.racesRunning).toBe(0);
  });

  it('a race body stays charged while its race runs, and is released when it ends', async () => {
    const { url, server } = await testServer();
    const page = new AbortController();
    const res = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 5, speed: 'instant', step: true }),
      signal: page.signal,
    });
    for await (const e of sseEvents(res.body!)) if ((e as unknown as DemoMessage).type === 'race') break;
    // Step mode, never stepped: the race waits; its body (and the lanes' paused runs) are held.
    expect(await health(url)).toBeGreaterThan(0);
    page.abort();
    await server.demo!.idle();
    await server.ws.idle();
    expect(await health(url)).toBe(0);
  });
});

describe("a race's wait for the server's deferred post-inference work", () => {
  it('under a steady load of post-work (each job defers the next) the race still starts and ends: it waits for the work pending, not for none', async () => {
    const { url, server } = await testServer();
    const post = server.services.postWork;
    let running = true;
    let jobs = 0;
    // Other clients' runs ending one after another: from now until the test ends, post-work is never all done.
    const next = (): void => post.defer(() => void (running && (jobs++, next())));
    next();
    try {
      const res = await fetch(`${url}/demo/api/races`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ workload: 'synthetic', tool_calls: 2, speed: 'instant' }),
      });
      expect(await res.text()).toMatch(/"type":"race.done","race_id":"r[0-9a-f]+","status":"done"/);
      expect(post.inFlight).toBeGreaterThan(0);
      expect(jobs).toBeGreaterThan(0);
    } finally {
      running = false;
      await post.flush();
    }
  }, 20_000);

  it('a race waiting for post-work ends when its page closes, its slot free, though that work has not finished', async () => {
    const { url, server } = await testServer({ demo: { maxRaces: 1 } });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // Post-work pending when the race starts (a store write that hangs, say): the race waits for it before its clock starts.
    server.services.postWork.defer(() => gate);
    const page = new AbortController();
    const res = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 2, speed: 'instant' }),
      signal: page.signal,
    });
    for await (const e of sseEvents(res.body!)) if ((e as unknown as DemoMessage).type === 'race') break;
    page.abort();
    await server.demo!.idle();
    expect(server.demo!.racesRunning).toBe(0);
    expect(server.services.postWork.inFlight).toBe(1);
    const again = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 1, speed: 'instant' }),
    });
    expect(again.status).toBe(200);
    // The work pending at its start is waited for: the second race ends once it is released.
    const text = again.text();
    release();
    expect(await text).toMatch(/"status":"done"/);
  }, 20_000);
});
