/**
 * The chaos knobs on real sockets (port 0): every kind at every point with
 * probability 1 over long-lived, ws mode and HTTP SSE, as a client sees it
 * (docs/reliability.md "Chaos knobs"), and on the server side: one record
 * per run, ended once, billed once, the injected fault counted. Also: plain
 * HTTP, a stall ended by a cancel or a disconnect without a leaked timer,
 * the seeded decisions across servers, and the CLI's validation.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { realClock, type Clock } from '../../src/model/clock.js';
import { chaosDraw, type ChaosPoint } from '../../src/engine/faults.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import type { Response } from '../../src/protocol/objects.js';
import type { LlrServer } from '../../src/server.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
/** One turn with text then a client tool call, then (long-lived, after the append) a final answer. */
const script = () =>
  scriptPolicy([{ text: 'let me look that up', calls: [{ name: 'lookup', arguments: { q: 'x' }, call_id: 'call_1' }] }, { text: 'found it all' }]);
const CREATE = { model: 'sim-model', input: 'go', tools: [tool] };
const TERMINAL = new Set(['response.completed', 'response.failed', 'response.incomplete', 'response.cancelled']);

type Transport = 'long-lived' | 'ws' | 'sse';
interface Outcome {
  events: ServerEvent[];
  /** WS: the close code if the server closed; SSE: whether `data: [DONE]` ended the stream. */
  closeCode: number | null;
  done: boolean;
}

/** Resolves when `pred` holds for the events so far or the socket closed. */
function until(s: RawSocket, pred: (events: ServerEvent[]) => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (pred(s.events)) resolve();
    };
    s.ws.on('message', check);
    s.ws.on('close', () => resolve());
    check();
  });
}

async function overWs(url: string, protocol: 'long-lived' | 'ws'): Promise<Outcome & { socket: RawSocket }> {
  const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
  s.send({ type: 'response.create', ...CREATE });
  await until(s, (es) => es.some((e) => TERMINAL.has(e.type) || e.type === 'response.done'));
  const paused = s.events.find((e) => e.type === 'response.done');
  if (paused && s.ws.readyState === s.ws.OPEN) {
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_1', output: 'result' }] });
    await until(s, (es) => es.some((e) => TERMINAL.has(e.type)));
  }
  if (s.ws.readyState === s.ws.CLOSING) await s.closed;
  const closeCode = s.ws.readyState === s.ws.CLOSED ? (await s.closed).code : null;
  return { events: s.events, closeCode, done: false, socket: s };
}

async function overSse(url: string): Promise<Outcome> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...CREATE, stream: true }) });
  expect(res.status).toBe(200);
  const frames = (await res.text()).split('\n\n').filter(Boolean);
  const done = frames.at(-1) === 'data: [DONE]';
  const events = (done ? frames.slice(0, -1) : frames).map((f) => JSON.parse(f.split('\n')[1]!.slice(6)) as ServerEvent);
  return { events, closeCode: null, done };
}

/** Every record ended once and was billed once; returns them. */
async function records(server: LlrServer) {
  await Promise.all([server.ws.idle(), server.httpTransport.idle()]);
  await server.services.postWork.flush();
  const recs = server.services.records.list();
  for (const rec of recs) {
    expect(rec.status).not.toBe('in_progress');
    expect(rec.ended_at).not.toBeNull();
    expect(server.services.ledger.countFor(rec.response_id)).toBe(1);
  }
  return recs;
}

function errorCode(e: ServerEvent): string | undefined {
  if (e.type !== 'error') return undefined;
  // The WebSocket shape nests the body; SSE's is flat (openai-node's).
  return (e as { error?: { code: string } }).error?.code ?? (e as unknown as { code: string }).code;
}

/** What happened before the fault, by point (for error and disconnect, which end the stream there). */
function expectPoint(point: ChaosPoint, events: ServerEvent[]) {
  const types = events.map((e) => e.type);
  if (point === 'first-token') expect(types).not.toContain('response.output_item.added');
  if (point === 'mid-stream') expect(types.filter((t) => t === 'response.output_text.delta')).toHaveLength(1);
  if (point === 'pause') {
    expect(events.some((e) => e.type === 'response.output_item.done' && e.item.type === 'function_call')).toBe(true);
    expect(types).not.toContain('response.done');
    expect(types).not.toContain('response.completed');
  }
}

const TRANSPORTS: Transport[] = ['long-lived', 'ws', 'sse'];
const POINTS: ChaosPoint[] = ['first-token', 'mid-stream', 'pause'];
const cases = () => TRANSPORTS.flatMap((t) => POINTS.map((p) => [t, p] as const));

async function drive(transport: Transport, chaos: string) {
  const { url, server } = await testServer({ policy: script(), chaos: [chaos] });
  if (transport === 'sse') return { server, out: await overSse(url) };
  const out = await overWs(url, transport);
  if (out.socket.ws.readyState === out.socket.ws.OPEN) {
    out.socket.ws.close();
    await out.socket.closed;
  }
  return { server, out };
}

describe('error@POINT:1', () => {
  it.each(cases())('%s at %s: an error event (injected_fault), then response.failed; recorded failed once', async (transport, point) => {
    const { server, out } = await drive(transport, `error@${point}:1`);
    const types = out.events.map((e) => e.type);
    const at = out.events.findIndex((e) => errorCode(e) === 'injected_fault');
    expect(at).toBeGreaterThanOrEqual(0);
    expect(types[at + 1]).toBe('response.failed');
    const failed = out.events[at + 1] as Extract<ServerEvent, { type: 'response.failed' }>;
    // The Response's error.code is from the spec's closed enum (a typed client decodes it into one); the message names the fault.
    expect(failed.response.error).toMatchObject({ code: 'server_error', message: expect.stringContaining(`error@${point}`) });
    expect(types.filter((t) => TERMINAL.has(t))).toEqual(['response.failed']);
    expectPoint(point, out.events.slice(0, at));
    expect(out.events.map((e) => e.sequence_number)).toEqual(out.events.map((_, i) => i));
    if (transport === 'sse') expect(out.done).toBe(true);
    else expect(out.closeCode).toBeNull();
    const recs = await records(server);
    expect(recs.map((r) => r.status)).toEqual(['failed']);
    expect(recs[0]!.counters).toMatchObject({ chaos_errors: 1, chaos_disconnects: 0 });
  });
});

describe('disconnect@POINT:1', () => {
  it.each(cases())('%s at %s: the server drops the connection, no terminal event; recorded cancelled once', async (transport, point) => {
    const { server, out } = await drive(transport, `disconnect@${point}:1`);
    const types = out.events.map((e) => e.type);
    expect(types.filter((t) => TERMINAL.has(t) || t === 'error')).toEqual([]);
    expectPoint(point, out.events);
    expect(out.events.map((e) => e.sequence_number)).toEqual(out.events.map((_, i) => i));
    if (transport === 'sse') expect(out.done).toBe(false);
    else expect(out.closeCode).toBe(1011);
    const recs = await records(server);
    expect(recs.map((r) => r.status)).toEqual(['cancelled']);
    expect(recs[0]!.counters).toMatchObject({ chaos_disconnects: 1, chaos_errors: 0 });
  });
});

describe.each(['stall', 'latency'] as const)('%s@POINT:1:MS', (kind) => {
  it.each(cases())('%s at %s: the response completes after the delay, counted and spanned', async (transport, point) => {
    const MS = 30;
    const { server, out } = await drive(transport, `${kind}@${point}:1:${MS}`);
    expect(out.events.filter((e) => TERMINAL.has(e.type)).map((e) => e.type)).toEqual(['response.completed']);
    if (transport === 'sse') expect(out.done).toBe(true);
    const recs = await records(server);
    expect(recs.map((r) => r.status)).toEqual(['completed']);
    // A long-lived run makes two model calls (before and after the pause): first-token and mid-stream happen in each.
    const n = transport === 'long-lived' && point !== 'pause' ? 2 : 1;
    const c = recs[0]!.counters;
    expect(kind === 'stall' ? c.chaos_stalls : c.chaos_latency).toBe(n);
    // Timers may fire a fraction of a millisecond early as performance.now() sees it.
    expect(c.chaos_delay_ms).toBeGreaterThanOrEqual(n * (MS - 1));
    expect(recs[0]!.spans.filter((s) => s.stage === `chaos_${kind}`)).toHaveLength(n);
  });
});

describe('plain HTTP (stream:false)', () => {
  const post = (url: string) =>
    fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(CREATE) });

  it.each(POINTS)('error at %s: 500 with the failed Response (server_error, the message naming the injected fault)', async (point) => {
    const { url, server } = await testServer({ policy: script(), chaos: [`error@${point}`] });
    const res = await post(url);
    expect(res.status).toBe(500);
    const body = (await res.json()) as Response;
    expect(body).toMatchObject({ status: 'failed', error: { code: 'server_error', message: expect.stringContaining(`error@${point}`) } });
    expect((await records(server)).map((r) => r.status)).toEqual(['failed']);
  });

  it.each(POINTS)('disconnect at %s: no answer, the connection closes; recorded cancelled once', async (point) => {
    const { url, server } = await testServer({ policy: script(), chaos: [`disconnect@${point}`] });
    await expect(post(url)).rejects.toThrow();
    const recs = await records(server);
    expect(recs.map((r) => r.status)).toEqual(['cancelled']);
    expect(recs[0]!.counters.chaos_disconnects).toBe(1);
  });
});

/** The real clock, counting the sleeps still pending (a stall's timer that outlives its run would stay counted). */
function countingClock(): { clock: Clock; pending: () => number } {
  let pending = 0;
  const clock: Clock = {
    ...realClock,
    sleep(ms, signal) {
      if (ms <= 0) return realClock.sleep(ms, signal);
      pending++;
      return realClock.sleep(ms, signal).finally(() => pending--);
    },
  };
  return { clock, pending: () => pending };
}

describe('a long stall ends with its run', () => {
  const TEN_MINUTES = 600_000;

  it('long-lived: response.cancel during a stall → response.cancelled at once, the timer cleared', async () => {
    const { clock, pending } = countingClock();
    const log = captureLogger();
    const { url, server } = await testServer({ policy: script(), chaos: [`stall@mid-stream:1:${TEN_MINUTES}`], clock, logger: log.logger });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', ...CREATE });
    const line = await log.waitFor((l) => l.msg === 'chaos: injected fault');
    expect(line).toMatchObject({ level: 30, fault: 'stall', point: 'mid-stream', ms: TEN_MINUTES });
    expect(pending()).toBe(1);
    s.send({ type: 'response.cancel' });
    expect((await s.next('response.cancelled')).response.status).toBe('cancelled');
    expect(pending()).toBe(0);
    s.ws.close();
    const recs = await records(server);
    expect(recs.map((r) => r.status)).toEqual(['cancelled']);
    expect(recs[0]!.counters.chaos_stalls).toBe(1);
  });

  it('SSE: the client goes away during a stall → the run ends cancelled, the timer cleared', async () => {
    const { clock, pending } = countingClock();
    const log = captureLogger();
    const { url, server } = await testServer({ policy: script(), chaos: [`stall@first-token:1:${TEN_MINUTES}`], clock, logger: log.logger });
    const ac = new AbortController();
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...CREATE, stream: true }),
      signal: ac.signal,
    });
    await log.waitFor((l) => l.msg === 'chaos: injected fault');
    expect(pending()).toBe(1);
    ac.abort();
    await res.body?.cancel().catch(() => {});
    const recs = await records(server);
    expect(recs.map((r) => r.status)).toEqual(['cancelled']);
    expect(pending()).toBe(0);
  });
});

describe('seeded decisions on a real server', () => {
  it('the same seed fails the same requests, as chaosDraw predicts; off by default', async () => {
    const pattern = async (opts: { chaos?: string[]; chaosSeed?: number }) => {
      const { url } = await testServer({ policy: scriptPolicy(Array.from({ length: 12 }, () => ({ text: 'ok' }))), ...opts });
      const out: boolean[] = [];
      for (let i = 0; i < 12; i++) {
        const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: 'hi' }) });
        out.push(((await res.json()) as Response).status === 'failed');
      }
      return out;
    };
    const a = await pattern({ chaos: ['error@first-token:0.5'], chaosSeed: 5 });
    expect(a).toEqual(Array.from({ length: 12 }, (_, run) => chaosDraw(5, run, 0, 0) < 0.5));
    expect(a).toContain(true);
    expect(a).toContain(false);
    expect(await pattern({ chaos: ['error@first-token:0.5'], chaosSeed: 5 })).toEqual(a);
    expect(await pattern({})).toEqual(Array(12).fill(false));
  });
});

describe('llr serve --chaos', () => {
  const cli = (args: string[]) => promisify(execFile)(process.execPath, ['dist/cli.js', ...args]);

  it('documents the knobs in --help', async () => {
    const { stdout } = await cli(['serve', '--help']);
    expect(stdout).toContain('--chaos KIND@POINT[:P[:MS]]');
    expect(stdout).toContain('--chaos-seed N');
    expect(stdout).toContain('injected_fault');
  });

  it('refuses a bad spec with a clear error before listening', async () => {
    const err = (await cli(['serve', '--port', '0', '--store', 'memory', '--chaos', 'stall@pause:0.2']).catch((e: unknown) => e)) as { code: number; stderr: string };
    expect(err.code).toBe(2);
    expect(err.stderr).toContain("llr: --chaos 'stall@pause:0.2': a stall needs a duration in ms");
  });
});
