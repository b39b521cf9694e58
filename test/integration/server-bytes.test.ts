/**
 * The server-wide byte budget (`--max-server-bytes`, issue 7): connections
 * that each stay within their own budgets cannot together hold more than
 * the server's. Past it: HTTP 503 `server_busy` with a JSON body, over a
 * WebSocket an `error` event with a `sequence_number` (the connection goes
 * on); every charge is released when its work ends. Real sockets.
 */
import type { Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { scriptPolicy, type ScriptStep } from '../../src/model/policies.js';
import { ServerBytes } from '../../src/modes/server-bytes.js';
import WebSocket from 'ws';
import { RawSocket, UnexpectedErrorEvent } from '../helpers/raw-socket.js';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';
import { firstCallFreeModel, gatedModel } from '../helpers/gated-model.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const pauseThenText = () => scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);
const KiB = 1024;
const create = (n: number, extra: object = {}) => ({ type: 'response.create', model: 'sim-model', input: 'x'.repeat(n), ...extra });
const held = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;
const poster = (url: string) => (path: string, body: object) =>
  fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
/** A raw `ws` client on the long-lived protocol, open (its frames sent by hand, fragments and all). */
function openLongLived(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses?protocol=long-lived`);
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}
/** About `n` characters of plain words (a token every five bytes or so). */
const lorem = (n: number) => 'lorem ipsum dolor sit amet '.repeat(Math.floor(n / 27));
/** `n` characters of numbers, `0 1 2 …` (about a token a number). */
function numbers(n: number): string {
  let out = '';
  for (let i = 0; out.length < n; i++) out += `${i % 1000} `;
  return out.slice(0, n);
}
/** `n` characters of printable ASCII noise (a fixed sequence): many token ids per byte, unlike repeated letters. */
function noise(n: number): string {
  let x = 12345;
  let out = '';
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += String.fromCharCode(33 + (x % 94));
  }
  return out;
}
/**
 * A ws-mode run held in flight (a gated model; `release` ends it) on a connection of its own whose create leaves less
 * room than a 40 KiB frame in a 1 MiB budget: such a frame is refused for room on arrival.
 */
async function runFillingBudget(extra: object = {}) {
  const { model, release } = gatedModel();
  const { server, url } = await testServer({ model, limits: { maxServerBytes: 1024 * KiB } });
  const socket = await RawSocket.connect(url);
  socket.send(create(0, { input: lorem(570 * KiB), store: false, ...extra }));
  const running = await socket.next('response.created');
  expect(await held(url)).toBeGreaterThan(1024 * KiB - 40 * KiB);
  return { server, url, release, socket, running };
}
/** An HTTP answer refusing a request past the byte budget: 503 `server_busy`. */
async function expectServerBusy(res: Response): Promise<void> {
  expect(res.status).toBe(503);
  expect(((await res.json()) as { error: { code: string } }).error.code).toBe('server_busy');
}
/** Cancel a long-lived run over HTTP and read its stream to the end. */
async function cancelRun(post: ReturnType<typeof poster>, id: string, reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
  expect((await post(`/v1/responses/${id}/cancel`, {})).status).toBe(200);
  while (!(await reader.read()).done);
}
/** A long-lived run over HTTP read until its first pause: its stream's reader (kept open) and its id. */
async function pausedRun(stream: Response): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; id: string }> {
  expect(stream.status).toBe(200);
  const reader = stream.body!.getReader();
  let text = '';
  while (!text.includes('response.done')) {
    const r = await reader.read();
    // Ended before its pause: fails, where it spun for good on the ended stream.
    if (r.done) throw new Error(`the stream ended before its pause: ${text.slice(0, 300)}`);
    text += new TextDecoder().decode(r.value);
  }
  return { reader, id: /"id":"(resp_[^"]+)"/.exec(text)![1]! };
}

/** Over HTTP: the largest long-lived create of dense text the budget takes (its body and its token ids), paused. */
async function largestPausedRun(post: (path: string, body: object) => Promise<Response>, max: number): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; id: string }> {
  // From a third of the budget, 8 KiB less at a time.
  for (let size = Math.floor(max / 3); ; size -= 8 * KiB) {
    const res = await post('/v1/responses?protocol=long-lived', { model: 'sim-model', input: noise(size), tools: [tool], stream: true });
    // 503 beside what is held, 413 past the whole budget alone: smaller.
    if (res.status !== 503 && res.status !== 413) return pausedRun(res);
    await res.arrayBuffer();
  }
}
/** Over a WebSocket: `b`'s long-lived create as large as the budget takes beside what is held, paused (`perByte`: what a run holds per byte of input). */
async function largestPausedCreate(url: string, b: RawSocket, max: number, perByte: number): Promise<void> {
  // The largest size that is not refused, from the room left, refined 2 KiB at a time.
  for (let size = Math.floor((max - (await held(url))) / perByte); ; size -= 2 * KiB) {
    b.send(create(size, { tools: [tool] }));
    const paused = await b.next('response.done').catch((err: unknown) => {
      if (!(err instanceof UnexpectedErrorEvent) || !['server_busy', 'payload_too_large'].includes(err.event.error.code)) throw err;
      return null;
    });
    if (paused) return;
  }
}
/** A model that calls `lookup` twice, `call_a` then `call_b` (one call a response), then takes the `after` steps. */
const twoCalls = (...after: ScriptStep[]) =>
  scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] }, ...after]);
/**
 * Two long-lived WebSocket runs paused on their calls (`call_a`, `call_b`) under a budget of `max`: A's create of 10
 * bytes, B's of 400 KiB; the model's steps after those two calls are `after`. The request timeout is two minutes
 * unless given, so a wait for it fails the test.
 */
async function twoPausedRuns(max: number, after: ScriptStep[], opts: { requestTimeoutMs?: number; logger?: Logger } = {}) {
  const policy = twoCalls(...after);
  const { server, url } = await testServer({ policy, logger: opts.logger, limits: { maxServerBytes: max, requestTimeoutMs: opts.requestTimeoutMs ?? 120_000 } });
  const a = await RawSocket.longLived(url);
  a.send(create(10, { tools: [tool] }));
  await a.next('response.done');
  const b = await RawSocket.longLived(url);
  b.send(create(400 * KiB, { tools: [tool] }));
  await b.next('response.done');
  return { policy, server, url, a, b };
}
/** B's append answers its call and its run completes; every step of the model was taken; all sockets closed, nothing is held. */
async function bCompletes(t: { policy: ReturnType<typeof scriptPolicy>; server: { ws: { idle(): Promise<void> } }; url: string; a: RawSocket; b: RawSocket }): Promise<void> {
  t.b.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_b', output: 'ok' }] });
  await t.b.next('response.completed');
  expect(t.policy.remaining()).toBe(0);
  t.a.dispose();
  t.b.dispose();
  await t.server.ws.idle();
  expect(await held(t.url)).toBe(0);
}
/**
 * B's append answers its call and its run completes, then C's create, left waiting for room, is taken and completes
 * with no error; every step of the model was taken; all sockets closed, nothing is held.
 */
async function bThenCComplete(t: { policy: ReturnType<typeof scriptPolicy>; server: { ws: { idle(): Promise<void> } }; url: string; a: RawSocket; b: RawSocket; c: RawSocket }): Promise<void> {
  t.b.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_b', output: 'ok' }] });
  await t.b.next('response.completed');
  await t.c.next('response.completed');
  expect(t.c.all('error')).toEqual([]);
  expect(t.policy.remaining()).toBe(0);
  for (const s of [t.a, t.b, t.c]) s.dispose();
  await t.server.ws.idle();
  expect(await held(t.url)).toBe(0);
}
/**
 * `refused`, an HTTP append to the paused run `id`, was told to send less (503, not to be retried); a small append then
 * answers `call_a`, the run completes, and nothing is held once every request is done.
 */
async function toldToSendLess(
  refused: Response,
  t: { post: ReturnType<typeof poster>; id: string; reader: ReadableStreamDefaultReader<Uint8Array>; server: { httpTransport: { idle(): Promise<void> } }; url: string },
): Promise<void> {
  expect(refused.status).toBe(503);
  expect(refused.headers.get('x-should-retry')).toBe('false');
  expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/cannot fit while they stay paused \(this run among them\)\. Send a smaller one; the run stays paused\./);
  expect((await t.post(`/v1/responses/${t.id}/append`, { input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] })).status).toBe(202);
  let text = '';
  for (let r = await t.reader.read(); !r.done; r = await t.reader.read()) text += new TextDecoder().decode(r.value);
  expect(text).toContain('event: response.completed');
  await t.server.httpTransport.idle();
  expect(await held(t.url)).toBe(0);
}
/**
 * Over HTTP, with less than 64 KiB (`room`) left beside the paused runs: an append a little larger than the room is
 * answered "No append can fit", and `run`'s stream ends `incomplete` for `server_busy`.
 */
async function noAppendCanFit(post: (path: string, body: object) => Promise<Response>, run: { reader: ReadableStreamDefaultReader<Uint8Array>; id: string }, room: number): Promise<void> {
  expect(room).toBeLessThan(64 * KiB);
  const refused = await post(`/v1/responses/${run.id}/append`, { input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(room + KiB) }] });
  expect(refused.status).toBe(503);
  expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/^No append can fit/);
  let text = '';
  for (let r = await run.reader.read(); !r.done; r = await run.reader.read()) text += new TextDecoder().decode(r.value);
  expect(text).toMatch(/event: response\.incomplete\n[^\n]*"llr_incomplete_reason":"server_busy"/);
}
/**
 * A long-lived connection whose create of `size` bytes cannot be read whole: its reading paused for the budget, then
 * judged and left to wait (the server pings a peer whose message waits, `probePeer`).
 */
async function createLeftWaiting(url: string, waitFor: ReturnType<typeof captureLogger>['waitFor'], size: number): Promise<RawSocket> {
  const c = await RawSocket.longLived(url);
  const judged = new Promise((resolve) => c.ws.once('ping', resolve));
  c.send(create(size));
  await waitFor((l) => /reading paused/.test(l.msg));
  await judged;
  return c;
}
/** A request body whose `first` bytes are sent at once and the rest only on `release()`. */
function heldBack(first: Uint8Array, rest: Uint8Array): { body: ReadableStream<Uint8Array>; release: () => void } {
  let release!: () => void;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(first);
      release = () => {
        c.enqueue(rest);
        c.close();
      };
    },
  });
  return { body, release: () => release() };
}
/**
 * A valid append answering `call_a` of the paused HTTP run `id`, its first bytes read and the rest held back until
 * `slow.release()`; `valid` its answer; `room` what is left of the budget (`max`) meanwhile, less than 64 KiB.
 */
async function appendArriving(url: string, id: string, max: number): Promise<{ slow: { release: () => void }; valid: Promise<Response>; room: number }> {
  const answer = Buffer.from(JSON.stringify({ input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] }));
  const before = await held(url);
  const slow = heldBack(answer.subarray(0, 10), answer.subarray(10));
  const valid = fetch(`${url}/v1/responses/${id}/append`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: slow.body, duplex: 'half' } as RequestInit);
  // Until its first bytes are charged.
  while ((await held(url)) === before);
  const room = max - (await held(url));
  expect(room).toBeLessThan(64 * KiB);
  return { slow, valid, room };
}

describe('ServerBytes', () => {
  it('charges up to the budget, refuses past it with server_busy, releases once', () => {
    const b = new ServerBytes(100);
    const h = b.hold();
    h.add(60);
    expect(() => b.hold().add(41)).toThrow(expect.objectContaining({ code: 'server_busy', status: 503 }));
    expect(b.held).toBe(60);
    h.keep(10);
    expect(b.held).toBe(10);
    h.releaseAll();
    h.releaseAll();
    expect(b.held).toBe(0);
    expect(b.peak).toBe(60);
  });
});

describe('the server-wide byte budget', () => {
  it('a paused long-lived WebSocket run holds its create; another connection past the budget gets server_busy and goes on', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'small' }, { text: 'done' }]);
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: 64 * KiB } });
    const a = await RawSocket.longLived(url);
    a.send(create(40 * KiB, { tools: [tool] }));
    const paused = await a.next('response.done');
    expect(await held(url)).toBeGreaterThan(40 * KiB);

    const b = await RawSocket.longLived(url);
    b.send(create(40 * KiB));
    const busy = await b.next('error');
    expect(busy).toMatchObject({ status: 503, error: { code: 'server_busy', type: 'server_error' }, sequence_number: 0 });
    // The connection goes on: a small create fits.
    b.send(create(10));
    await b.next('response.completed', { skipErrors: true });

    // The paused run's charge is released when it ends (its append is charged too, then released with it).
    a.send({ type: 'response.append', response_id: paused.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    await a.next('response.completed');
    // Both connections idle (their runs ended): nothing held, though they are still open.
    expect(await held(url)).toBe(0);
    a.dispose();
    b.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('over a WebSocket: appends a paused run refuses are not held for the run\'s life (outside attack)', async () => {
    // Each refused append's frame stayed charged until the run ended (up to the connection's cap, 80 MiB at the
    // defaults): 100,000 refused 100-byte appends on one paused run held 10 MB of budget, nothing of it kept.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }, { text: 'queued' }]);
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: 1024 * KiB, maxQueuedCreates: 1 } });
    const a = await RawSocket.longLived(url);
    a.send(create(10, { tools: [tool] }));
    const paused = await a.next('response.done');
    const before = await held(url);
    const out = (call_id: string, extra: object = {}) => ({
      type: 'response.append',
      ...extra,
      input: [{ type: 'function_call_output', call_id, output: 'y'.repeat(100 * KiB) }],
    });
    // Refused after its checks (unknown call id), and at once (another response's id): 20 x 100 KiB in all.
    for (let i = 0; i < 10; i++) a.send(out('call_zzz'));
    for (let i = 0; i < 10; i++) a.send(out('call_a', { response_id: 'resp_other' }));
    const codes: string[] = [];
    for (let i = 0; i < 20; i++) codes.push(((await a.next('error')) as { error: { code: string } }).error.code);
    expect(codes.sort()).toEqual([...Array(10).fill('no_paused_response'), ...Array(10).fill('unknown_call_id')]);
    expect(await held(url)).toBe(before);
    // Creates refused queue_full behind the paused run: only the one queued is held.
    const queued = create(50 * KiB);
    a.send(queued);
    for (let i = 0; i < 10; i++) a.send(create(100 * KiB));
    for (let i = 0; i < 10; i++) expect(await a.next('error')).toMatchObject({ error: { code: 'queue_full' } });
    expect(await held(url)).toBe(before + Buffer.byteLength(JSON.stringify(queued)));
    // A taken append is still charged while the run keeps it, and everything is released at the run's end.
    a.send(out('call_a', { response_id: paused.response.id }));
    await a.next('response.completed');
    await a.next('response.completed');
    expect(await held(url)).toBe(0);
    a.dispose();
    await server.ws.idle();
  });

  it('a create that alone, with its token ids, or its body alone, needs more than the whole budget is told it cannot fit, not to retry (atk88 F1, atk89 F7)', async () => {
    // On an idle server it was told to try again when other requests end (the bytes held were its own), with Retry-After,
    // and openai-node sent it three times.
    const max = 3 * 1024 * KiB;
    const { server, url } = await testServer({ limits: { maxServerBytes: max, maxFrameBytes: 4 * 1024 * KiB } });
    const body = { model: 'sim-model', input: noise(2 * 1024 * KiB) };
    // 413, which no client retries (Codex retries every 5xx whatever x-should-retry says; atk90 F2).
    const res = await poster(url)('/v1/responses', body);
    expect(res.status).toBe(413);
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(res.headers.get('retry-after')).toBeNull();
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'payload_too_large', message: expect.stringMatching(/^This request needs at least \d+ bytes of the server's byte budget of 3145728 .*It cannot fit however long it waits; send a smaller one\.$/) });
    // A token count and a compaction of it likewise (they were told to try again; atk91 F7).
    for (const path of ['/v1/responses/input_tokens', '/v1/responses/compact']) {
      const counted = await poster(url)(path, body);
      expect(counted.status, path).toBe(413);
      expect(counted.headers.get('x-should-retry'), path).toBe('false');
      expect(((await counted.json()) as { error: { message: string } }).error.message, path).toContain('It cannot fit however long it waits');
    }
    // A continuation over HTTP counts the stored chain it loaded (told to try again; outside attack atk92 F1).
    const chained = await testServer({ store: 'memory', limits: { maxServerBytes: 3_000_000, maxFrameBytes: 4 * 1024 * KiB } });
    const first = (await (await poster(chained.url)('/v1/responses', { model: 'sim-model', input: 'a'.repeat(1_000_000), store: true })).json()) as { id: string; status: string };
    expect(first.status).toBe('completed');
    const continued = await poster(chained.url)('/v1/responses', { model: 'sim-model', input: 'b'.repeat(1_000_000), previous_response_id: first.id });
    expect(continued.status).toBe(413);
    expect(continued.headers.get('x-should-retry')).toBe('false');
    expect(((await continued.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    await chained.server.httpTransport.idle();
    expect(await held(chained.url)).toBe(0);
    // A body larger than the whole budget likewise: it was told the server held 0 bytes and to try again (atk89 F7).
    const tiny = await testServer({ limits: { maxServerBytes: 3000 } });
    const big = await poster(tiny.url)('/v1/responses', { model: 'sim-model', input: 'x'.repeat(4000) });
    expect(big.status).toBe(413);
    expect(big.headers.get('x-should-retry')).toBe('false');
    expect(((await big.json()) as { error: { message: string } }).error.message).toMatch(/^This request's body needs at least \d+ bytes, and the server's whole byte budget is 3000 .*it cannot fit however long it waits; send a smaller one\.$/);
    // The same over a WebSocket: said in the error event; the connection goes on.
    const ws = await RawSocket.connect(url);
    ws.send({ type: 'response.create', ...body });
    expect((await ws.next('error', { skipErrors: true })).error).toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('It cannot fit however long it waits') });
    // A small create then goes on.
    ws.send({ type: 'response.create', model: 'sim-model', input: 'hi' });
    await ws.next('response.completed');
    ws.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a create refused for room is told how much of what the server holds is its own, and how little the others must hold (atk102 I2, atk103 I3)', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'small' }]);
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: 256 * KiB } });
    const a = await RawSocket.longLived(url);
    a.send(create(120 * KiB, { tools: [tool] }));
    await a.next('response.done');
    const others = await held(url);
    // Its body fits beside the paused run; its token ids (noise: many per byte) do not.
    const said = (message: string) => {
      const m = /holds (\d+) bytes of requests and keeps at most (\d+) .*\. (\d+) of them are this request's own .*needs at least (\d+) \(more if its token ids not yet made need it\), so it cannot fit before the others hold at most (\d+) \(they hold (\d+)\)/.exec(message);
      expect(m, message).not.toBeNull();
      const [all, max, own, need, room, theirs] = m!.slice(1).map(Number) as [number, number, number, number, number, number];
      expect(max).toBe(256 * KiB);
      expect(theirs).toBe(others);
      expect(own + theirs).toBe(all);
      expect(room).toBe(max - need);
      expect(theirs).toBeGreaterThan(room);
    };
    const refused = await poster(url)('/v1/responses', { model: 'sim-model', input: noise(30 * KiB) });
    expect(refused.status).toBe(503);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('server_busy');
    said(body.error.message);
    expect(await held(url)).toBe(others);

    const b = await RawSocket.connect(url);
    b.send(create(0, { input: noise(30 * KiB) }));
    const busy = await b.next('error');
    expect(busy.error.code).toBe('server_busy');
    said(busy.error.message);
    expect(await held(url)).toBe(others);
    a.dispose();
    b.dispose();
    await server.ws.idle();
  });

  it('over HTTP: a long-lived SSE run holds its body; a POST past the budget gets 503 server_busy; all released after', async () => {
    const { server, url } = await testServer({ policy: pauseThenText(), limits: { maxServerBytes: 64 * KiB } });
    const post = poster(url);
    const { type: _t, ...first } = create(40 * KiB, { tools: [tool], stream: true });
    const { reader, id } = await pausedRun(await post('/v1/responses?protocol=long-lived', first));

    const { type: _t2, ...second } = create(40 * KiB);
    const refused = await post('/v1/responses', second);
    await expectServerBusy(refused);

    await cancelRun(post, id, reader);
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
    const { type: _t3, ...third } = create(40 * KiB);
    expect((await post('/v1/responses', third)).status).toBe(200);
    expect(server.bytes.peak).toBeLessThanOrEqual(64 * KiB);
  });

  it('over HTTP: a long-lived run holds the appends it took for its life, as over a WebSocket; a refused one not (outside attack)', async () => {
    // An append's body was released once read, so the context an HTTP run grew by appends was never counted:
    // three 8 MB appends left bytes_held at 211 bytes (the same over a WebSocket: 24 MB), and 512 such runs
    // could hold 16 GiB of contexts past a 256 MiB budget.
    const twoPauses = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
      { text: 'done' },
    ]);
    // 512 KiB: an append of 150 KiB of `y` holds its body and as much again in token ids (a token per 4 letters).
    const { server, url } = await testServer({ policy: twoPauses, limits: { maxServerBytes: 512 * KiB } });
    const post = poster(url);
    const { reader, id } = await pausedRun(await post('/v1/responses?protocol=long-lived', { model: 'sim-model', input: 'go', tools: [tool], stream: true }));
    const before = await held(url);
    const out = (call_id: string, n: number) => ({ input: [{ type: 'function_call_output', call_id, output: 'y'.repeat(n) }] });
    // Refused (unknown call id): nothing of it is kept, nor charged after its answer.
    expect((await post(`/v1/responses/${id}/append`, out('call_zzz', 100 * KiB))).status).toBe(400);
    expect(await held(url)).toBe(before);
    // Taken (a partial append: the run stays paused): its bytes stay charged while the run keeps them.
    expect((await post(`/v1/responses/${id}/append`, out('call_a', 150 * KiB))).status).toBe(202);
    expect(await held(url)).toBeGreaterThanOrEqual(before + 150 * KiB);
    // Past the budget now: another request's body is refused.
    const refused = await post(`/v1/responses/${id}/append`, out('call_b', 120 * KiB));
    await expectServerBusy(refused);
    await cancelRun(post, id, reader);
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
    expect(server.bytes.peak).toBeLessThanOrEqual(512 * KiB);
  });

  it('over HTTP: a paused run whose appends fill the budget ends at the append that cannot fit, not at its pause timeout (atk76 F1)', async () => {
    // Refused 503 "try again when other requests end", the SDK's retries could never fit: the run's own appends held
    // the budget, and it waited for its pause timeout (four such runs at the default limits, all of them lost).
    const calls = Array.from({ length: 200 }, (_, i) => ({ calls: [{ name: 'lookup', arguments: { q: `q${i}` }, call_id: `call_${i}` }] }));
    const { server, url } = await testServer({ policy: scriptPolicy(calls), limits: { maxServerBytes: 1024 * KiB } });
    const post = poster(url);
    const stream = await post('/v1/responses?protocol=long-lived', { model: 'sim-model', input: 'go', tools: [tool], stream: true });
    const reader = stream.body!.getReader();
    let text = '';
    const pauses = () => text.split('event: response.done').length - 1;
    const untilPauses = async (n: number) => {
      while (pauses() < n) text += new TextDecoder().decode((await reader.read()).value);
    };
    await untilPauses(1);
    const id = /"id":"(resp_[^"]+)"/.exec(text)![1]!;
    let refused: Response | null = null;
    // Appends of 20 KiB until one is refused: the run's own appends then hold all but less than one append's room.
    for (let i = 0; i < 199 && !refused; i++) {
      const res = await post(`/v1/responses/${id}/append`, { input: [{ type: 'function_call_output', call_id: `call_${i}`, output: 'y'.repeat(20 * KiB) }] });
      if (res.status === 202) await untilPauses(i + 2);
      else refused = res;
    }
    expect(refused?.status).toBe(503);
    // Final: the SDK retries a 503 unless told not to, and its retry found the run gone, 404 (outside attack atk82 F4).
    expect(refused!.headers.get('x-should-retry')).toBe('false');
    const body = (await refused!.json()) as { error: { code: string; message: string } };
    expect(body.error).toMatchObject({ code: 'server_busy', message: expect.stringContaining('No append can fit') });
    // Its stream says so, then ends once: incomplete, for the server's own reason.
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
    const tail = text.slice(text.lastIndexOf('event: response.done'));
    expect(tail).toMatch(/event: error\n[^\n]*server_busy[\s\S]*event: response\.incomplete\n[^\n]*"llr_incomplete_reason":"server_busy"/);
    expect(text.split('event: response.incomplete').length - 1).toBe(1);
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
  });

  it('over HTTP: an append whose token ids can never fit beside its paused run is told to send less, not to retry; a smaller one goes on (atk78 F1)', async () => {
    // Its body fitted and its ids did not: it was told to try again when other requests end, which nothing would mend.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'again' }]);
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: 2048 * KiB } });
    const post = poster(url);
    const { reader, id } = await pausedRun(await post('/v1/responses?protocol=long-lived', { model: 'sim-model', input: 'go', tools: [tool], stream: true }));
    const refused = await post(`/v1/responses/${id}/append`, { input: [{ type: 'function_call_output', call_id: 'call_a', output: noise(600 * KiB) }] });
    // Told to send less, its run waits for no room: recorded as waiting, a WebSocket run's append was ended 1013 for
    // room this refused one would never take (outside attack atk91 F6).
    expect(server.host.live.waitsForRoom()).toBe(false);
    await toldToSendLess(refused, { post, id, reader, server, url });
  });

  it('over HTTP: what a paused run holds counts its create\'s body: with no room left for any append, the run ends (atk79 F1)', async () => {
    // Its create's body was left out of what paused runs hold: room that did not exist, and an append no room could
    // take was told to try again for as long as the pause lasted.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }]);
    const max = 2048 * KiB;
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: max } });
    const post = poster(url);
    const run = await largestPausedRun(post, max);
    // An append a little larger than the room: the run's body (hundreds of KiB) is no room for it.
    await noAppendCanFit(post, run, max - (await held(url)));
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
  });

  it('over HTTP: a chunked append that cannot fit beside its paused run is told to send less, as one with a Content-Length (atk82 F3)', async () => {
    // Its need was what had been read and one byte, which always fitted: told to try again, for as long as the pause.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'again' }]);
    const max = 1024 * KiB;
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: max } });
    const post = poster(url);
    const { reader, id } = await pausedRun(await post('/v1/responses?protocol=long-lived', { model: 'sim-model', input: 'go', tools: [tool], stream: true }));
    const whole = Buffer.from(JSON.stringify({ input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(max) }] }));
    const chunked = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < whole.length; i += 16 * KiB) c.enqueue(whole.subarray(i, i + 16 * KiB));
        c.close();
      },
    });
    const refused = await fetch(`${url}/v1/responses/${id}/append`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: chunked, duplex: 'half' } as RequestInit);
    await toldToSendLess(refused, { post, id, reader, server, url });
  });

  it('over HTTP: an append that cannot fit does not end its run while another append for it is still arriving (atk82 F5)', async () => {
    // The valid append still uploading was answered 404 once the larger one had ended the run.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'again' }]);
    const max = 2048 * KiB;
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: max } });
    const post = poster(url);
    const run = await largestPausedRun(post, max);
    const { slow, valid, room } = await appendArriving(url, run.id, max);
    // Larger than the room: refused, told to try again (the append arriving may resume the run), the run kept.
    const refused = await post(`/v1/responses/${run.id}/append`, { input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(room + KiB) }] });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/try again when other requests end/);
    slow.release();
    expect((await valid).status).toBe(202);
    let text = '';
    for (let r = await run.reader.read(); !r.done; r = await run.reader.read()) text += new TextDecoder().decode(r.value);
    expect(text).toContain('event: response.completed');
    expect(text).not.toContain('event: response.incomplete');
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
  });

  it('over HTTP: another key\'s append for the same run id still arriving does not keep a stuck run from ending (atk83 F2)', async () => {
    // It was counted among the run's appends in flight: the owner's append that could never fit was told to try again.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }]);
    const max = 2048 * KiB;
    const { server, url } = await testServer({ policy, apiKeys: ['k1', 'k2'], limits: { maxServerBytes: max } });
    const as = (key: string) => ({ 'Content-Type': 'application/json', Authorization: `Bearer ${key}` });
    const post = (path: string, body: object) => fetch(`${url}${path}`, { method: 'POST', headers: as('k1'), body: JSON.stringify(body) });
    const run = await largestPausedRun(post, max);
    const health = () => held(url);
    const before = await health();
    const slow = heldBack(Buffer.from('{"input":[{"type":"function_call_output",'), Buffer.from('"call_id":"call_a","output":"x"}]}'));
    const foreign = fetch(`${url}/v1/responses/${run.id}/append`, { method: 'POST', headers: as('k2'), body: slow.body, duplex: 'half' } as RequestInit);
    while ((await health()) === before);
    await noAppendCanFit(post, run, max - (await health()));
    slow.release();
    expect((await foreign).status).toBe(404);
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
  });

  it('a paused HTTP run with an append for it still arriving is not among the runs only their clients can free: another run\'s append is told to try again, and fits once it has (atk82 F5)', async () => {
    // That append may resume the run: counted as held for good, a WebSocket run's append was ended "No append can fit".
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'w' }, call_id: 'call_w' }] },
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] },
      { text: 'http done' },
      { text: 'ws done' },
    ]);
    const max = 2048 * KiB;
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: max } });
    const w = await RawSocket.longLived(url);
    w.send(create(10, { tools: [tool] }));
    await w.next('response.done');
    const post = poster(url);
    const run = await largestPausedRun(post, max);
    const { slow, valid, room } = await appendArriving(url, run.id, max);
    w.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_w', output: 'y'.repeat(room + KiB) }] });
    expect((await w.next('error')).error.message).toMatch(/try again when other requests end/);
    slow.release();
    expect((await valid).status).toBe(202);
    let text = '';
    for (let r = await run.reader.read(); !r.done; r = await run.reader.read()) text += new TextDecoder().decode(r.value);
    expect(text).toContain('event: response.completed');
    await server.httpTransport.idle();
    w.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_w', output: 'y'.repeat(room + KiB) }] });
    await w.next('response.completed');
    expect(w.all('response.incomplete')).toEqual([]);
    w.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a WebSocket message still arriving is charged: uploads past the budget pause reading, then all complete (outside attack)', async () => {
    // Before: frames were charged only once whole and parsed, so 30 peers each holding 15 MiB of an unfinished
    // fragmented message kept 564 MB of RSS with bytes_held 0, and ~1.8 GB once they all finished together.
    const MiB = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    // Room for two of the three messages and what planning them charges besides (their token ids, a few hundred
    // bytes): with exactly 2 MiB, two planned at once passed it by those bytes and one was refused server_busy, which
    // happened whenever the machine was busy enough for the two to be planned together.
    const budget = 2 * MiB + 64 * KiB;
    const { server, url } = await testServer({ logger, limits: { maxServerBytes: budget } });
    const peers = await Promise.all([0, 1, 2].map(() => openLongLived(url)));
    const completed = peers.map(
      (ws) =>
        new Promise<string>((resolve) =>
          ws.on('message', (d) => {
            const e = JSON.parse(String(d)) as { type: string; error?: { code: string } };
            if (e.type === 'response.completed' || e.type === 'error') resolve(e.error?.code ?? e.type);
          }),
        ),
    );
    // Three unfinished messages of 1 MiB each (fragments; the `ws` client answers the server's pings meanwhile).
    for (const ws of peers) {
      ws.send('{"type":"response.create","model":"sim-model","input":"hi"', { fin: false });
      ws.send(Buffer.alloc(MiB, 0x20), { fin: false, binary: false });
    }
    await waitFor((l) => l.code === 'server_busy' && /reading paused/.test(l.msg));
    const busy = await held(url);
    expect(busy).toBeGreaterThan(MiB);
    expect(busy).toBeLessThanOrEqual(budget);
    // Each finishes its message: as the first ones are handled and release their charge, the paused one reads on.
    for (const ws of peers) ws.send('}', { fin: true });
    expect(await Promise.all(completed)).toEqual(['response.completed', 'response.completed', 'response.completed']);
    // A frame admitted while it arrived may pass the budget by its last socket read when it completes (≤ 64 KiB each).
    expect(server.bytes.peak).toBeLessThanOrEqual(budget + 3 * 64 * KiB);
    for (const ws of peers) ws.close();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  /**
   * A server with a 1 MiB byte budget and a 300 ms request timeout, and a long-lived connection to it whose create
   * frame is sent but not finished (more fragments to follow): its close code, when it comes, in `closed`.
   */
  async function unfinishedCreate() {
    const MiB = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    const { url } = await testServer({ logger, limits: { maxServerBytes: MiB, requestTimeoutMs: 300 } });
    const ws = await openLongLived(url);
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.send('{"type":"response.create","model":"sim-model","input":"hi"', { fin: false });
    return { url, ws, closed, waitFor, MiB };
  }

  it('a connection left waiting for budget past the request timeout is closed 1013, releasing its share (no wait for good)', async () => {
    // Connections that each hold part of the budget with an unfinished message, all waiting for more, would
    // otherwise wait for each other forever. Here another connection's run in flight holds most of a 1 MiB budget, and
    // this peer's message, which would fit alone, waits for it to end.
    const { logger, waitFor } = captureLogger();
    const { model, release } = gatedModel();
    const { server, url } = await testServer({ logger, model, limits: { maxServerBytes: 1024 * KiB, requestTimeoutMs: 300 } });
    const a = await RawSocket.longLived(url);
    a.send(create(600 * KiB));
    await a.next('response.output_text.delta');
    const ws = await openLongLived(url);
    const said: string[] = [];
    ws.on('message', (d: Buffer) => said.push(d.toString()));
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.send('{"type":"response.create","model":"sim-model","input":"', { fin: false });
    ws.send(Buffer.alloc(600 * KiB, 0x20), { fin: false, binary: false });
    await waitFor((l) => /reading paused/.test(l.msg));
    expect(await closed).toBe(1013);
    // Said before the close (it was a bare 1013: a paused run's client never learnt how its run ended; atk82 F1).
    expect(said.map((t) => JSON.parse(t) as { type: string; error?: { code: string; message: string } })).toEqual([
      expect.objectContaining({ type: 'error', error: expect.objectContaining({ code: 'server_busy', message: expect.stringContaining('--request-timeout-ms') }) }),
    ]);
    expect(await waitFor((l) => /within the byte budget; closing 1013/.test(l.msg))).toMatchObject({ code: 'server_busy' });
    // The run goes on, and ends.
    release();
    expect((await a.next('response.completed')).response.status).toBe('completed');
    a.ws.close();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a message that cannot fit the budget beside what its own connection holds ends at once: an error event, then 1013 (outside attack atk47)', async () => {
    // Before: it waited the whole request timeout (here a minute) for budget no other connection held, then closed.
    const { logger, waitFor } = captureLogger();
    const { url } = await testServer({ logger, policy: pauseThenText(), limits: { maxServerBytes: 1024 * KiB, requestTimeoutMs: 60_000 } });
    // A message alone larger than the whole budget, on an idle connection: no connection could take it, so not 1013
    // (try again later: Codex reconnected and sent it 35 times; atk90 F2) but 1009, message too big.
    const lone = await RawSocket.longLived(url);
    lone.send(create(2048 * KiB));
    expect((await lone.next('error')).error).toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('--max-server-bytes') });
    expect((await lone.closed).code).toBe(1009);
    // An append that does not fit beside its own paused run: the run ends with its one terminal event, then the close.
    const ws = await RawSocket.longLived(url);
    ws.send(create(600 * KiB, { tools: [tool] }));
    await ws.next('response.done');
    ws.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(600 * KiB) }] });
    expect((await ws.next('error')).error.code).toBe('server_busy');
    expect((await ws.closed).code).toBe(1013);
    // The paused run's one terminal event came after the error.
    const after = ws.events.slice(ws.events.findIndex((e) => e.type === 'error')).map((e) => e.type);
    expect(after).toEqual(['error', 'response.incomplete']);
    await waitFor((l) => /cannot fit the byte budget beside what this connection holds/.test(l.msg));
    expect(await held(url)).toBe(0);
  });

  it('runs paused for their clients that hold the whole budget: the append that cannot fit ends its run, the others go on (outside attack atk76 F1)', async () => {
    // Refused "try again when other requests end", each paused run waited for an append the budget refused, and none
    // could end before its pause timeout: four long runs at the default limits stood still for minutes.
    const policy = twoCalls({ text: 'b done' }, { text: 'a again' });
    const max = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    const { url } = await testServer({ logger, policy, limits: { maxServerBytes: max } });
    const a = await RawSocket.longLived(url);
    a.send(create(256 * KiB, { tools: [tool] }));
    await a.next('response.done');
    // B's create as large as fits beside A (a run holds its frame and its prompt's token ids, found from A's share).
    const b = await RawSocket.longLived(url);
    await largestPausedCreate(url, b, max, (await held(url)) / (256 * KiB));
    const room = max - (await held(url));
    expect(room).toBeLessThan(64 * KiB);

    // A's append, one frame a little larger than the room left, cannot fit, and only the two paused runs hold the
    // budget: A's run ends, its socket stays open.
    a.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(Math.max(0, room) + 512) }] });
    const busy = await a.next('error');
    expect(busy.error).toMatchObject({ code: 'server_busy', message: expect.stringContaining('paused for their clients') });
    const ended = await a.next('response.incomplete');
    expect(ended.response).toMatchObject({ status: 'incomplete', incomplete_details: null, llr_incomplete_reason: 'server_busy' });
    await waitFor((l) => /append cannot fit the byte budget that paused runs hold/.test(l.msg));

    // Its budget given back, B's append fits and B's run ends as usual; A's connection takes a new create.
    b.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_b', output: 'ok' }] });
    await b.next('response.completed');
    a.send(create(10));
    await a.next('response.completed');
    expect(a.events.filter((e) => e.type === 'response.incomplete')).toHaveLength(1);
    expect(policy.remaining()).toBe(0);
    a.dispose();
    b.dispose();
    expect(await held(url)).toBe(0);
  });

  it('an append whose token ids can never fit beside its paused run is told to send less, not to retry; a smaller one goes on (atk78 F1)', async () => {
    // Its frame fitted and its ids did not: it was told to try again when other requests end, which nothing would mend.
    const { logger, waitFor } = captureLogger();
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'again' }]);
    const { server, url } = await testServer({ logger, policy, limits: { maxServerBytes: 2048 * KiB } });
    const ws = await RawSocket.longLived(url);
    ws.send(create(10, { tools: [tool] }));
    await ws.next('response.done');
    // 600 KiB of printable noise: about a token per one or two bytes, four bytes of budget per token id.
    ws.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: noise(600 * KiB) }] });
    expect((await ws.next('error')).error).toMatchObject({ code: 'server_busy', message: expect.stringMatching(/Send a smaller one; the run stays paused\./) });
    await waitFor((l) => /append cannot fit the byte budget that paused runs hold/.test(l.msg) && l['ends_run'] === false);
    // The same as an inject (it was told to try again: its frame's charge was given back before it was judged; atk80 F1).
    const runId = ws.all('response.done')[0]!.response.id;
    ws.send({ type: 'response.inject', response_id: runId, input: [{ type: 'function_call_output', call_id: 'call_a', output: noise(600 * KiB) }] });
    expect((await ws.next('error')).error).toMatchObject({ code: 'server_busy', message: expect.stringMatching(/Send a smaller one; the run stays paused\./) });
    ws.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    await ws.next('response.completed');
    expect(ws.all('response.incomplete')).toEqual([]);
    ws.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a paused run\'s append arriving in many reads that cannot fit beside the paused runs waits, and at the request timeout its run ends with an error and its terminal event (atk82 F1)', async () => {
    // It waited the whole request timeout and the connection closed bare: its client never learnt how its run ended.
    // It waits (the other run may go on and give its budget back), then says so.
    const max = 1024 * KiB;
    const { policy, server, url, a, b } = await twoPausedRuns(max, [{ text: 'b done' }], { requestTimeoutMs: 500 });
    const room = max - (await held(url));
    expect(room).toBeGreaterThan(64 * KiB);
    a.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(room + 200 * KiB) }] });
    expect((await a.next('error')).error).toMatchObject({ code: expect.stringMatching(/^(server_busy|request_timeout)$/) });
    expect((await a.next('response.incomplete')).response.status).toBe('incomplete');
    expect([1008, 1013]).toContain((await a.closed).code);
    await bCompletes({ policy, server, url, a, b });
  });

  it('a create arriving on a connection with no run that cannot fit beside the paused runs ends once a paused run\'s append waits for its room; that run goes on (atk82 F7)', async () => {
    // Its upload took the room left and waited the whole request timeout while the paused run's append could not be
    // read, each waiting for the other; then a bare 1013.
    const max = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    const { policy, server, url, a, b } = await twoPausedRuns(max, [{ text: 'a done' }, { text: 'b done' }], { logger });
    const room = max - (await held(url));
    expect(room).toBeGreaterThan(64 * KiB);
    const c = await RawSocket.longLived(url);
    c.send(create(room + 200 * KiB));
    await waitFor((l) => /reading paused/.test(l.msg));
    a.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(100 * KiB) }] });
    expect((await c.next('error')).error).toMatchObject({ code: 'server_busy', message: expect.stringContaining("beside the runs paused for their clients, and a paused run's tool output needs the room it holds") });
    expect((await c.closed).code).toBe(1013);
    await a.next('response.completed');
    c.dispose();
    await bCompletes({ policy, server, url, a, b });
  });

  it('a create that cannot fit beside a run paused only for a moment waits for it, and is taken once that run has gone on (atk85 F1)', async () => {
    // Ended at once with 1013, it would have fitted: the paused run's client appended, and its run gave its budget back.
    const max = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    const { policy, server, url, a, b } = await twoPausedRuns(max, [{ text: 'a done' }, { text: 'b done' }, { text: 'c done' }], { logger });
    const room = max - (await held(url));
    const c = await createLeftWaiting(url, waitFor, room + 200 * KiB);
    a.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    await a.next('response.completed');
    await bThenCComplete({ policy, server, url, a, b, c });
  });

  it('a create holding no room waits while a paused run\'s append waits for a third connection\'s upload, and is taken once the runs have gone on (atk87 F3)', async () => {
    // It was closed 1013 at once because some paused run's append waited for room, although ending it gave none back.
    const max = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    const { policy, server, url, a, b } = await twoPausedRuns(max, [{ text: 'a done' }, { text: 'b done' }, { text: 'c done' }], { logger });
    const room = max - (await held(url));
    expect(room).toBeGreaterThan(128 * KiB);
    // S uploads an (invalid) create in fragments, all but its last, taking all of the room but 64 KiB.
    const s = await openLongLived(url);
    const before = await held(url);
    const head = `{"type":"response.create","model":"sim-model","temperature":"hot","input":"`;
    s.send(head + 'x'.repeat(room - 64 * KiB - head.length), { fin: false });
    while ((await held(url)) === before);
    // A's 100 KiB append waits for room S holds.
    a.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(100 * KiB) }] });
    await waitFor((l) => /reading paused/.test(l.msg));
    // C's create cannot fit beside the paused runs and gets no byte in: judged, it waits (pinged) rather than being closed.
    const c = await RawSocket.longLived(url);
    const judged = new Promise<string>((resolve) => c.ws.once('ping', () => resolve('waits')));
    c.send(create(room + 200 * KiB));
    expect(await Promise.race([judged, c.closed.then(() => 'closed')])).toBe('waits');
    // S's upload ends (refused: its room comes back); A's append is read and its run goes on, then B's; then C's create.
    const refused = new Promise((resolve) => s.on('message', (m) => resolve(JSON.parse(m.toString()))));
    s.send('"}', { fin: true });
    expect(await refused).toMatchObject({ type: 'error' });
    await a.next('response.completed');
    s.close();
    await bThenCComplete({ policy, server, url, a, b, c });
  });

  it('two messages stuck beside the paused runs, each holding half of what a paused run\'s append lacks, both end, and the run goes on', async () => {
    // Neither alone gives the append enough room: judged one at a time, each would have waited for the other until the
    // request timeout. The rule counts every stuck message together (SessionHost.stuckMessagesHoldPausedRun).
    const max = 1024 * KiB;
    const { logger, waitFor, lines } = captureLogger();
    const { policy, server, url, a, b } = await twoPausedRuns(max, [{ text: 'a done' }, { text: 'b done' }], { logger });
    const room = max - (await held(url));
    expect(room).toBeGreaterThan(128 * KiB);
    const paused = () => lines.filter((l) => /reading paused/.test(l.msg)).length;
    // C1 uploads half of the room as the first fragment of a create, and waits (a slow upload, not stuck).
    const c1 = await openLongLived(url);
    const before = await held(url);
    const head = `{"type":"response.create","model":"sim-model","input":"`;
    c1.send(head + 'x'.repeat(Math.floor(room / 2) - head.length), { fin: false });
    while ((await held(url)) === before);
    // C2's create takes the rest of the room and cannot be read whole: stuck.
    const c2 = await openLongLived(url);
    const c2Closed = new Promise<number>((resolve) => c2.once('close', resolve));
    const c2Said = new Promise<{ type: string; error: { code: string } }>((resolve) => c2.once('message', (m) => resolve(JSON.parse(m.toString()))));
    c2.send(JSON.stringify(create(room + 100 * KiB)));
    await waitFor(() => paused() >= 1);
    // C1's next fragment cannot be read either: stuck too, holding its half.
    const c1Closed = new Promise<number>((resolve) => c1.once('close', resolve));
    const c1Said = new Promise<{ type: string; error: { code: string } }>((resolve) => c1.once('message', (m) => resolve(JSON.parse(m.toString()))));
    c1.send('x'.repeat(room), { fin: false });
    await waitFor(() => paused() >= 2);
    // A's append needs more than either holds (with its token ids, no more than both).
    a.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: lorem(Math.floor(room * 0.53)) }] });
    expect((await c1Said).error.code).toBe('server_busy');
    expect((await c2Said).error.code).toBe('server_busy');
    expect(await c1Closed).toBe(1013);
    expect(await c2Closed).toBe(1013);
    await a.next('response.completed');
    await bCompletes({ policy, server, url, a, b });
  });

  it('a paused run\'s append judged stuck ends alone: the other paused run\'s append, which its end was for, goes on (outside attack atk95 F1)', async () => {
    // Every other stuck message was ended with the one judged, the waiting run's own append among them: both runs
    // ended incomplete, both connections closed 1013.
    const max = 2 * 1024 * KiB;
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'w' }, call_id: 'call_w' }] },
      { calls: [{ name: 'lookup', arguments: { q: 'x' }, call_id: 'call_x' }] },
      { text: 'w done' },
      { text: 'n done' },
    ]);
    const { logger, waitFor, lines } = captureLogger();
    const { server, url } = await testServer({ policy, logger, limits: { maxServerBytes: max, requestTimeoutMs: 120_000 } });
    const w = await RawSocket.longLived(url);
    w.send(create(0, { input: numbers(220 * KiB), tools: [tool] }));
    await w.next('response.done');
    const x = await RawSocket.longLived(url);
    x.send(create(0, { input: numbers(220 * KiB), tools: [tool] }));
    await x.next('response.done');
    // N holds part of the budget with a slow upload (not stuck).
    const n = await openLongLived(url);
    const before = await held(url);
    const head = `{"type":"response.create","model":"sim-model","input":"`;
    n.send(head + 'x'.repeat(100 * KiB - head.length), { fin: false });
    while ((await held(url)) === before);
    const paused = () => lines.filter((l) => /reading paused/.test(l.msg)).length;
    // W's append cannot fit beside X's run; then X's, larger, cannot fit beside W's.
    w.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_w', output: 'x'.repeat(760 * KiB) }] });
    await waitFor(() => paused() >= 1);
    x.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_x', output: 'x'.repeat(1350 * KiB) }] });
    // X's append ends with its run; W's is read and its run completes.
    expect(JSON.stringify(await x.next('response.incomplete', { skipErrors: true }))).toContain('"llr_incomplete_reason":"server_busy"');
    expect((await x.closed).code).toBe(1013);
    expect((await w.next('response.completed')).response.status).toBe('completed');
    const nDone = new Promise<{ type: string }>((resolve) => n.on('message', (m) => {
      const e = JSON.parse(m.toString()) as { type: string };
      if (e.type === 'response.completed' || e.type === 'error') resolve(e);
    }));
    n.send('"}', { fin: true });
    expect((await nDone).type).toBe('response.completed');
    for (const s of [w, x]) s.dispose();
    n.close();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('messages stuck beside a paused run end only until its append has the room it lacks; the others are not closed (outside attack atk95 F2)', async () => {
    // A 150 KiB append closed three uploads holding 250 KiB each, where one was enough.
    const max = 2 * 1024 * KiB;
    const { logger, waitFor, lines } = captureLogger();
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'y' }, call_id: 'call_y' }] }, { text: 'y done' }, { text: 'c' }, { text: 'c' }, { text: 'c' }]);
    const { server, url } = await testServer({ policy, logger, limits: { maxServerBytes: max, requestTimeoutMs: 120_000 } });
    const y = await RawSocket.longLived(url);
    y.send(create(0, { input: numbers(400 * KiB), tools: [tool] }));
    await y.next('response.done');
    const head = `{"type":"response.create","model":"sim-model","input":"`;
    const cs: WebSocket[] = [];
    // Each upload's first answer (its create's first event, or its error), and whether its socket closed.
    const answers: Array<Promise<string>> = [];
    const closed: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const c = await openLongLived(url);
      answers.push(new Promise((resolve) => c.once('message', (m) => resolve((JSON.parse(m.toString()) as { type: string }).type))));
      closed.push(false);
      c.once('close', () => (closed[i] = true));
      const before = await held(url);
      c.send(head + 'x'.repeat(250 * KiB - head.length), { fin: false });
      while ((await held(url)) === before);
      cs.push(c);
    }
    const paused = () => lines.filter((l) => /reading paused/.test(l.msg)).length;
    for (const [i, c] of cs.entries()) {
      c.send('x'.repeat(650 * KiB) + '"}', { fin: true });
      await waitFor(() => paused() >= i + 1);
    }
    y.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_y', output: 'x'.repeat(150 * KiB) }] });
    await y.next('response.completed');
    // Each upload is answered: one was ended for the append (closed 1013), the other two were not closed.
    const types = await Promise.all(answers);
    expect(types.filter((t) => t === 'error').length).toBeGreaterThanOrEqual(1);
    expect(lines.filter((l) => /closing 1013/.test(l.msg))).toHaveLength(1);
    expect(closed.filter(Boolean).length).toBeLessThanOrEqual(1);
    y.dispose();
    for (const c of cs) c.close();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('another stuck connection\'s idle cache goes before a message is closed for a paused run\'s append, and the room is the append\'s (outside attack atk96 F1)', async () => {
    // The message judged was closed 1013 where letting another stuck connection's idle cache go, which closes nobody,
    // covered what the append lacked; and with that cache let go, its connection's own stuck message took the room
    // before the append.
    const max = 2 * 1024 * KiB;
    const { logger, waitFor, lines } = captureLogger();
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'y' }, call_id: 'call_y' }] }, { text: 'cached' }, { text: 'y done' }, { text: 'c' }, { text: 'c' }]);
    const { server, url } = await testServer({ store: 'memory', policy, logger, limits: { maxServerBytes: max, requestTimeoutMs: 120_000 } });
    const y = await RawSocket.longLived(url);
    y.send(create(0, { input: numbers(400 * KiB), tools: [tool] }));
    await y.next('response.done');
    const pausedRun = await held(url);
    // C1, a ws-mode connection, keeps a cached context larger than what the append will lack.
    const c1 = await RawSocket.connect(url);
    c1.send(create(0, { input: numbers(130 * KiB), store: true }));
    await c1.next('response.completed');
    const paused = () => lines.filter((l) => /reading paused/.test(l.msg)).length;
    const fragment = async (ws: WebSocket, text: string, fin = false) => {
      const before = await held(url);
      ws.send(text, { fin });
      while ((await held(url)) === before);
    };
    // C1's next create arrives (its first fragment in), so its cache is not reclaimed as an idle connection's.
    await fragment(c1.ws, `{"type":"response.create","model":"sim-model","store":false,"stream_id":"b","input":"${'y'.repeat(10 * KiB)}`);
    // C2, holding no cache, uploads; its next fragment cannot be read (stuck), nor can C1's rest.
    const c2 = await RawSocket.connect(url);
    await fragment(c2.ws, `{"type":"response.create","model":"sim-model","store":false,"input":"${'x'.repeat(100 * KiB)}`);
    // Its message cannot fit beside the paused run until that run goes on.
    const room = max - (await held(url));
    const rest = max - pausedRun + 50 * KiB;
    expect(rest).toBeGreaterThan(room + 100 * KiB);
    c2.ws.send('x'.repeat(rest), { fin: false });
    await waitFor(() => paused() >= 1);
    c1.ws.send('y'.repeat(600 * KiB), { fin: false });
    await waitFor(() => paused() >= 2);
    // Y's append lacks less than C1's cache gives back: that cache goes, and nobody is closed. Plain words: its token ids
    // take fewer bytes than its frame (what the messages yield for while it is applied; a run of one letter, about two
    // characters a token, needs twice as many, and may be told to try again).
    y.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_y', output: lorem(150 * KiB) }] });
    await y.next('response.completed');
    expect(lines.filter((l) => /cached context let go/.test(l.msg))).toHaveLength(1);
    expect(lines.filter((l) => /closing 10\d\d/.test(l.msg))).toEqual([]);
    // Both uploads are read once whole, and each is answered on its open connection: run, or (both together past the
    // budget) told to try again, which then works.
    c1.ws.send('"}', { fin: true });
    c2.ws.send('"}', { fin: true });
    const answered = (c: RawSocket) =>
      new Promise<string>((resolve) => {
        const look = (m: WebSocket.RawData) => {
          const e = JSON.parse(m.toString()) as { type: string; error?: { code: string; message: string } };
          if (e.type === 'response.completed' || e.type === 'error') {
            c.ws.off('message', look);
            resolve(e.type === 'error' ? `${e.error!.code}: ${e.error!.message}` : e.type);
          }
        };
        c.ws.on('message', look);
      });
    for (const [c, said] of [c1, c2].map((c) => [c, answered(c)] as const)) {
      const first = await said;
      if (first !== 'response.completed') {
        expect(first).toMatch(/^server_busy: .*try again when other requests end/);
        const again = answered(c);
        c.send(create(10, { store: false }));
        expect(await again).toBe('response.completed');
      }
    }
    for (const s of [y, c1, c2]) s.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a paused run\'s append that fits beside the paused runs does not yield to another paused run\'s append that cannot: that one ends for it (outside attack atk100 F2)', async () => {
    // Yielding, it was never seen to wait for room, the other append was not ended for it, and its run stalled until
    // that append's request timeout.
    const max = 2 * 1024 * KiB;
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'y2' }, call_id: 'call_y2' }] },
      { calls: [{ name: 'lookup', arguments: { q: 'y1' }, call_id: 'call_y1' }] },
      { text: 'y1 done' },
    ]);
    const { logger, waitFor, lines } = captureLogger();
    const { server, url } = await testServer({ policy, logger, limits: { maxServerBytes: max, requestTimeoutMs: 120_000 } });
    const y2 = await RawSocket.longLived(url);
    y2.send(create(0, { input: lorem(400 * KiB), tools: [tool] }));
    await y2.next('response.done');
    const y1 = await RawSocket.longLived(url);
    y1.send(create(0, { input: lorem(100 * KiB), tools: [tool] }));
    await y1.next('response.done');
    const paused = () => lines.filter((l) => /reading paused/.test(l.msg)).length;
    const room = max - (await held(url));
    expect(room).toBeGreaterThan(300 * KiB);
    // Y2's append cannot fit beside Y1's paused run: it waits, holding the room left.
    y2.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_y2', output: 'x'.repeat(room + 150 * KiB) }] });
    await waitFor(() => paused() >= 1);
    // Y1's fits beside the paused runs, not in the room Y2's left: Y2's ends for it, and Y1's run goes on.
    y1.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_y1', output: lorem(150 * KiB) }] });
    expect((await y2.next('error')).error).toMatchObject({ code: 'server_busy', message: expect.stringContaining("a paused run's tool output needs the room it holds") });
    expect((await y2.closed).code).toBe(1013);
    expect((await y1.next('response.completed')).response.status).toBe('completed');
    for (const s of [y1, y2]) s.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a ws message does not yield to an HTTP append refused for room that its client never sends again (outside attack atk100 F1)', async () => {
    // The refused append's size was counted as room wanted until its run took an append or ended: a create on an
    // almost empty budget waited its whole request timeout and was closed 1013.
    const max = 2 * 1024 * KiB;
    const { logger, waitFor, lines } = captureLogger();
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'h' }, call_id: 'call_h' }] }, { text: 'w done' }]);
    const { server, url } = await testServer({ policy, logger, limits: { maxServerBytes: max, requestTimeoutMs: 120_000 } });
    const post = poster(url);
    const run = await pausedRun(await post('/v1/responses?protocol=long-lived', { model: 'sim-model', input: lorem(10 * KiB), tools: [tool], stream: true }));
    const paused = () => lines.filter((l) => /reading paused/.test(l.msg)).length;
    // T's upload holds most of the budget; H's append is refused for room meanwhile, and not sent again.
    const t = await openLongLived(url);
    const before = await held(url);
    t.send(`{"type":"response.create","model":"sim-model","store":false,"input":"${'x'.repeat(1600 * KiB)}`, { fin: false });
    while ((await held(url)) === before);
    const refused = await post(`/v1/responses/${run.id}/append`, { input: [{ type: 'function_call_output', call_id: 'call_h', output: 'o'.repeat(1800 * KiB) }] });
    expect(refused.status).toBe(503);
    await refused.arrayBuffer();
    // W's create cannot be read beside T's upload; once T is gone, it is.
    const w = await RawSocket.connect(url);
    w.send(create(0, { input: lorem(500 * KiB), store: false }));
    await waitFor(() => paused() >= 1);
    t.terminate();
    expect((await w.next('response.completed')).response.status).toBe('completed');
    w.dispose();
    await cancelRun(post, run.id, run.reader);
    await server.httpTransport.idle();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a WebSocket message that cannot fit beside a paused HTTP run whose append was refused for room ends, and the run goes on (atk87 F1)', async () => {
    // Over HTTP the append is refused, not held: the run was not seen to wait for room, and the two waited for each
    // other the whole request timeout, the client told to retry meanwhile.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'http done' }]);
    const max = 2048 * KiB;
    const { logger, waitFor } = captureLogger();
    const { server, url } = await testServer({ policy, logger, limits: { maxServerBytes: max, requestTimeoutMs: 120_000 } });
    const post = poster(url);
    const run = await pausedRun(await post('/v1/responses?protocol=long-lived', { model: 'sim-model', input: 'x'.repeat(800 * KiB), tools: [tool], stream: true }));
    const room = max - (await held(url));
    const c = await createLeftWaiting(url, waitFor, room + 200 * KiB);
    const append = { input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(100 * KiB) }] };
    const refused = await post(`/v1/responses/${run.id}/append`, append);
    expect(refused.status).toBe(503);
    await refused.arrayBuffer();
    expect((await c.next('error')).error).toMatchObject({ code: 'server_busy', message: expect.stringContaining("beside the runs paused for their clients, and a paused run's tool output needs the room it holds") });
    expect((await c.closed).code).toBe(1013);
    expect((await post(`/v1/responses/${run.id}/append`, append)).status).toBe(202);
    let text = '';
    for (let r = await run.reader.read(); !r.done; r = await run.reader.read()) text += new TextDecoder().decode(r.value);
    expect(text).toContain('event: response.completed');
    c.dispose();
    await server.httpTransport.idle();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a paused run with a create queued behind it counts among the runs only their clients can free (atk82 F2)', async () => {
    // The queued create was counted as work that gives budget back: every append on the server was told to try again
    // until the pause timeout.
    const policy = twoCalls({ text: 'queued ran' }, { text: 'b done' });
    const max = 1024 * KiB;
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: max } });
    const a = await RawSocket.longLived(url);
    a.send(create(256 * KiB, { tools: [tool] }));
    await a.next('response.done');
    a.send(create(10));
    // B's create as large as fits beside A.
    const b = await RawSocket.longLived(url);
    await largestPausedCreate(url, b, max, (await held(url)) / (256 * KiB));
    const room = max - (await held(url));
    expect(room).toBeLessThan(64 * KiB);
    a.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(Math.max(0, room) + 512) }] });
    expect((await a.next('error')).error).toMatchObject({ code: 'server_busy', message: expect.stringContaining('No append can fit') });
    expect((await a.next('response.incomplete')).response).toMatchObject({ llr_incomplete_reason: 'server_busy' });
    // The queued create runs once the run has ended; B goes on.
    expect((await a.next('response.completed')).response.output[0]).toMatchObject({ type: 'message' });
    await bCompletes({ policy, server, url, a, b });
  });

  it('an idle ws-mode connection\'s cached context is let go to make room: a paused run\'s append goes on (outside attack atk80 F2)', async () => {
    // An idle cache is not a request that ends: the append was told to try again when other requests end for as long
    // as the ws-mode connection stayed idle, and the run waited for its pause timeout.
    const max = 1024 * KiB;
    const policy = scriptPolicy([{ text: 'cached' }, { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }, { text: 'again' }]);
    const { server, url } = await testServer({ store: 'memory', policy, limits: { maxServerBytes: max } });
    const health = async () => (await (await fetch(`${url}/health`)).json()) as { bytes_held: number; cached_contexts_let_go: number };
    const cacher = await RawSocket.connect(url);
    cacher.send(create(500 * KiB, { store: true }));
    const cached = await cacher.next('response.completed');
    const cache = await held(url);
    expect(cache).toBeGreaterThan(500 * KiB);
    const run = await RawSocket.longLived(url);
    run.send(create(10, { tools: [tool] }));
    await run.next('response.done');
    const room = max - (await health()).bytes_held;
    // Past the room beside the cache (its frame alone fills it, and its token ids come on top), within the budget
    // without it: the cache goes and the run goes on.
    expect(room).toBeLessThan(cache / 2);
    run.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'y'.repeat(room) }] });
    await run.next('response.completed');
    expect(run.all('error')).toEqual([]);
    expect((await health()).cached_contexts_let_go).toBe(1);
    // The idle connection's continuation is then a cache miss: its chain is read from the store, and it goes on.
    cacher.send(create(10, { store: true, previous_response_id: cached.response.id }));
    expect((await cacher.next('response.completed')).response.previous_response_id).toBe(cached.response.id);
    expect(policy.remaining()).toBe(0);
    run.dispose();
    cacher.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: an agent\'s store: false cache is not let go for another client\'s create while its tool runs (within --cache-reclaim-grace-ms); at 0 it is (outside attack atk97 F1)', async () => {
    // One other client's large create let the cache go 200 ms after the agent's response: the agent's continuation,
    // which fitted, was previous_response_not_found, and it had to send its whole context again.
    const max = 1024 * KiB;
    for (const grace of [30_000, 0]) {
      const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'other' }, { text: 'agent done' }]);
      const { server, url } = await testServer({ policy, limits: { maxServerBytes: max, cacheReclaimGraceMs: grace } });
      const agent = await RawSocket.connect(url);
      agent.send(create(0, { input: lorem(200 * KiB), tools: [tool], store: false }));
      const first = await agent.next('response.completed');
      expect(first.response.output[0]).toMatchObject({ type: 'function_call', call_id: 'call_a' });
      const cache = await held(url);
      // Another client's create (its body and token ids, about 1.8 bytes a character of words) fits the budget only
      // without the agent's cache.
      const other = await poster(url)('/v1/responses', { model: 'sim-model', input: lorem(Math.floor((max - cache / 2) / 1.8)) });
      const health = (await (await fetch(`${url}/health`)).json()) as { cached_contexts_let_go: number };
      agent.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }], tools: [tool] });
      if (grace > 0) {
        // Guarded: the other client is told to try again, and when room may come back (atk102 I2); the agent goes on
        // from its cache.
        expect(other.status).toBe(503);
        expect(((await other.json()) as { error: { code: string; message: string } }).error).toMatchObject({
          code: 'server_busy',
          message: expect.stringMatching(/try again when other requests end\. \d+ bytes of them are cached contexts of agents running their tools, kept for --cache-reclaim-grace-ms after their responses: room may come back then\.$/),
        });
        expect(health.cached_contexts_let_go).toBe(0);
        expect((await agent.next('response.completed')).response.output[0]).toMatchObject({ type: 'message' });
      } else {
        expect(other.status).toBe(200);
        await other.arrayBuffer();
        expect(health.cached_contexts_let_go).toBe(1);
        expect((await agent.next('error', { skipErrors: true })).error).toMatchObject({ code: 'previous_response_not_found' });
      }
      agent.dispose();
      await server.ws.idle();
      expect(await held(url)).toBe(0);
    }
  });

  it('ws mode: the grace guards the lane whose agent runs its tools, not the connection\'s other lanes (outside attack atk102 F1)', async () => {
    // A lane in a tool loop guarded every lane of its connection: a client kept a large cache for good by ending a tiny
    // create on another lane in a tool call now and then, and every other request was told to try again.
    const max = 1024 * KiB;
    const policy = scriptPolicy([{ text: 'big, finished' }, { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'other' }, { text: 'agent done' }]);
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: max } });
    const c = await RawSocket.connect(url);
    // Lane "big": a large cache whose turn is over. Lane "loop": a tiny one whose response ended in a tool call.
    c.send(create(0, { input: lorem(200 * KiB), store: false, stream_id: 'big' }));
    await c.next('response.completed');
    c.send(create(0, { input: 'call it', tools: [tool], store: false, stream_id: 'loop' }));
    const looping = await c.next('response.completed');
    const cache = await held(url);
    // Another client's create fits only without lane "big": that lane goes, lane "loop" stays.
    const other = await poster(url)('/v1/responses', { model: 'sim-model', input: lorem(Math.floor((max - cache / 2) / 1.8)) });
    expect(other.status).toBe(200);
    await other.arrayBuffer();
    expect(((await (await fetch(`${url}/health`)).json()) as { cached_contexts_let_go: number }).cached_contexts_let_go).toBe(1);
    c.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'loop', previous_response_id: looping.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }], tools: [tool] });
    expect((await c.next('response.completed')).response.output[0]).toMatchObject({ type: 'message' });
    c.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a store: false continuation refused server_busy while planned keeps its previous response cached, and its retry is served once room comes back (atk85 F4, atk103 F2)', async () => {
    // Let go with the refusal, as any failed continuation's previous response is, it could not be retried: told to try
    // again, every retry was previous_response_not_found (atk85 F4), and then told to send its whole context, which an
    // agent beside another's guarded cache could not for as long as that one's loop went on (atk103 F2).
    const max = 1024 * KiB;
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'cached' }, { text: 'looked up' }, { text: 'served on retry' }]);
    const { url } = await testServer({ policy, limits: { maxServerBytes: max } });
    // Another connection's run paused for its client holds ~450 KB: room that may come back, so "try again" is true.
    const x = await RawSocket.longLived(url);
    x.send(create(300 * KiB, { tools: [tool] }));
    await x.next('response.done');
    const w = await RawSocket.connect(url);
    w.send({ type: 'response.create', model: 'sim-model', store: false, input: lorem(250 * KiB) });
    const first = await w.next('response.completed');
    // Its frame fits beside the cache; its token ids do not, beside the paused run.
    const continuation = { type: 'response.create', model: 'sim-model', store: false, previous_response_id: first.response.id, input: lorem(80 * KiB) };
    w.send(continuation);
    const refused = await w.next('error', { skipErrors: true });
    expect(refused.error).toMatchObject({ code: 'server_busy', message: expect.stringContaining('try again when other requests end') });
    expect(refused.error.message).not.toContain('cannot be retried');
    // The paused run takes its tool output and ends: the same continuation, sent again, is served from the cache.
    x.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    await x.next('response.completed');
    w.send(continuation);
    const done = await w.next('response.completed');
    expect(done.response).toMatchObject({ previous_response_id: first.response.id, status: 'completed' });
    expect(done.response.output[0]).toMatchObject({ type: 'message', content: [{ text: 'served on retry' }] });
    expect(((await (await fetch(`${url}/health`)).json()) as { cached_contexts_let_go: number }).cached_contexts_let_go).toBe(0);
    w.dispose();
    x.dispose();
  });

  it('ws mode: a store: false continuation of a response its connection no longer caches, refused for room at its frame, is told not found, not to retry (outside attack atk104 F1)', async () => {
    // Refused at its frame's arrival, before its previous response was looked up, it was told server_busy "try again",
    // and every retry could only be previous_response_not_found.
    const max = 1024 * KiB;
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'first' }, { text: 'second' }, { text: 'third' }, { text: 'fourth' }]);
    const log = captureLogger();
    const { server, url } = await testServer({ policy, logger: log.logger, limits: { maxServerBytes: max, cacheReclaimGraceMs: Infinity, maxClientErrorLogsPerSecond: 2 } });
    // Another agent's store: false cache, guarded while its tool runs: room that may come back.
    const blocker = await RawSocket.connect(url);
    blocker.send(create(0, { input: lorem(480 * KiB), tools: [tool], store: false }));
    const looping = await blocker.next('response.completed');
    const w = await RawSocket.connect(url);
    w.send(create(0, { input: lorem(10 * KiB), store: false }));
    const first = await w.next('response.completed');
    const continuation = { type: 'response.create', model: 'sim-model', store: false, previous_response_id: first.response.id, input: noise(40 * KiB) };
    w.send(continuation);
    const second = await w.next('response.completed');
    // The connection now caches the second response only; the same continuation of the first, again, cannot fit.
    w.send(continuation);
    const stale = await w.next('error', { skipErrors: true });
    expect(stale.error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id', message: expect.stringContaining(first.response.id) });
    // Each is logged within the client errors' budget (--max-client-error-logs-per-second): a line for every refused
    // frame was a flood any client could make (atk105 F2).
    const burstStart = performance.now();
    for (let i = 0; i < 10; i++) w.send(continuation);
    for (let i = 0; i < 10; i++) expect((await w.next('error', { skipErrors: true })).error.code).toBe('previous_response_not_found');
    const windows = Math.ceil((performance.now() - burstStart) / 1000) + 1;
    expect(log.lines.filter((l) => String(l.msg).includes('that refusal said instead')).length).toBeLessThanOrEqual(2 * (windows + 1));
    // With store: true too, the chain read from the store, which has neither that response nor an id never made
    // (atk105 F1); a stored response not cached here may be read from the store once room comes back: try again.
    w.send({ ...continuation, store: true });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({ code: 'previous_response_not_found', message: expect.stringContaining(first.response.id) });
    w.send({ ...continuation, store: true, previous_response_id: 'resp_never_made' });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({ code: 'previous_response_not_found', message: expect.stringContaining('resp_never_made') });
    const stored = await poster(url)('/v1/responses', { model: 'sim-model', input: 'stored', store: true, generate: false });
    const storedId = ((await stored.json()) as { id: string }).id;
    w.send({ ...continuation, store: true, previous_response_id: storedId });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({ code: 'server_busy' });
    // A continuation of the cached response that cannot fit at its arrival is still told to try again, and is served
    // once the room has come back.
    const current = { ...continuation, previous_response_id: second.response.id };
    w.send(current);
    const busy = await w.next('error', { skipErrors: true });
    expect(busy.error).toMatchObject({ code: 'server_busy', message: expect.stringContaining('try again when other requests end') });
    // The other agent's loop goes on: its turn over, its cache is no longer guarded, and room comes back for the retry.
    blocker.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: looping.response.id, input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }], tools: [tool] });
    await blocker.next('response.completed');
    w.send(current);
    expect((await w.next('response.completed')).response).toMatchObject({ previous_response_id: second.response.id, status: 'completed', output: [{ type: 'message', content: [{ text: 'fourth' }] }] });
    w.dispose();
    blocker.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a continuation refused for room at its frame while a run is in flight on another lane is told not found unless it names that run (outside attack atk105 F3)', async () => {
    // Any run on the connection kept the refusal server_busy, though only the run in flight can cache the response a
    // continuation names: every retry was server_busy until the connection was idle, then not found.
    const { server, url, release, socket: w, running } = await runFillingBudget({ stream_id: 'a' });
    const frame = { type: 'response.create', model: 'sim-model', store: false, stream_id: 'b', input: noise(40 * KiB) };
    w.send({ ...frame, previous_response_id: 'resp_not_here' });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({ code: 'previous_response_not_found', message: expect.stringContaining('resp_not_here') });
    // Naming the run in flight: its end caches it, and the retry may be served then.
    w.send({ ...frame, previous_response_id: running.response.id });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({ code: 'server_busy' });
    release();
    await w.next('response.completed');
    w.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('long-lived: a create naming a previous response, refused for room at its frame, is told it is not supported, not to retry (outside attack atk107 F1)', async () => {
    // Told server_busy, try again, then refused invalid_value at every retry once room came back.
    const { server, url, release, socket: a } = await runFillingBudget();
    const b = await RawSocket.longLived(url);
    b.send({ type: 'response.create', model: 'sim-model', previous_response_id: 'resp_any', input: noise(40 * KiB) });
    expect((await b.next('error', { skipErrors: true })).error).toMatchObject({ code: 'invalid_value', param: 'previous_response_id' });
    // Without one, it is told to try again.
    b.send({ type: 'response.create', model: 'sim-model', input: noise(40 * KiB) });
    expect((await b.next('error', { skipErrors: true })).error).toMatchObject({ code: 'server_busy' });
    release();
    await a.next('response.completed');
    a.dispose();
    b.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a continuation that with its cached context needs more than the whole budget is told it cannot fit, not to retry (outside attack atk92 F3)', async () => {
    // Only its frame was counted: told to try again on a server holding nothing but its own connection's cache.
    const { server, url } = await testServer({ policy: scriptPolicy([{ text: 'cached' }, { text: 'never' }, { text: 'fresh' }]), limits: { maxServerBytes: 1024 * KiB } });
    const w = await RawSocket.connect(url);
    w.send({ type: 'response.create', model: 'sim-model', store: false, input: lorem(560 * KiB) });
    const first = await w.next('response.completed');
    w.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: first.response.id, input: lorem(30 * KiB) });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({
      code: 'payload_too_large',
      message: expect.stringMatching(/its body, the context it continues and the token ids made from them, with nothing else held\. It cannot fit however long it waits; send a smaller one\. This continuation cannot be retried/),
    });
    w.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a fresh create that cannot fit beside its own connection\'s cached context lets that cache go and completes (outside attack atk92 F2)', async () => {
    // The connection's own cache was never let go for it while it was planned: told to try again for good, on a server
    // holding nothing else.
    const { logger, lines } = captureLogger();
    const { server, url } = await testServer({ logger, policy: scriptPolicy([{ text: 'cached' }, { text: 'fresh' }, { text: 'later' }]), limits: { maxServerBytes: 1024 * KiB } });
    const w = await RawSocket.connect(url);
    w.send({ type: 'response.create', model: 'sim-model', store: false, input: lorem(560 * KiB) });
    const first = await w.next('response.completed');
    w.send({ type: 'response.create', model: 'sim-model', store: false, input: lorem(30 * KiB) });
    const fresh = await w.next('response.completed');
    expect(fresh.response.status).toBe('completed');
    expect(w.all('error')).toEqual([]);
    // The old cache's charge went with it: what is held is the new, small cache's (its 30 KiB, ids and overhead).
    expect(await held(url)).toBeLessThan(128 * KiB);
    expect(lines.filter((l) => /does not use let go to make room/.test(l.msg))).toHaveLength(1);
    // The cache it let go is said to be so; the fresh response is cached and continues.
    w.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: first.response.id, input: 'again' });
    expect((await w.next('error', { skipErrors: true })).error.message).toContain("This connection's cached copy of it was let go to make room");
    // With store: true too, which reads the store (it said only "not found"; outside attack atk91 F4).
    w.send({ type: 'response.create', model: 'sim-model', store: true, previous_response_id: first.response.id, input: 'again' });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({
      code: 'previous_response_not_found',
      message: expect.stringContaining('was let go to make room in the server\'s byte budget (llr serve --max-server-bytes), and it was created with store: false'),
    });
    w.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: fresh.response.id, input: 'on' });
    expect((await w.next('response.completed')).response.status).toBe('completed');
    w.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a store: true continuation the budget refuses beside its cached copy is read from the store, at the first try (outside attack atk93 F1)', async () => {
    // A header change or a fork renders anew beside the cached copy's token ids: told 413 "cannot fit however long it
    // waits", and the same frame then fitted (from the store, once the failure had evicted the cache).
    for (const variant of ['header', 'fork'] as const) {
      const { server, url } = await testServer({ store: 'memory', limits: { maxServerBytes: 900 * KiB } });
      const w = await RawSocket.connect(url);
      const lane = variant === 'fork' ? { stream_id: 'a' } : {};
      w.send({ type: 'response.create', model: 'sim-model', store: true, instructions: 'be brief', input: numbers(200 * KiB), ...lane });
      const first = await w.next('response.completed');
      const cont =
        variant === 'fork'
          ? { stream_id: 'b', instructions: 'be brief' }
          : { instructions: 'be verbose' };
      w.send({ type: 'response.create', model: 'sim-model', store: true, previous_response_id: first.response.id, input: 'next question', ...cont });
      expect((await w.next('response.completed')).response.status, variant).toBe('completed');
      expect(w.all('error'), variant).toEqual([]);
      w.dispose();
      await server.ws.idle();
      expect(await held(url), variant).toBe(0);
    }
  });

  it('ws mode: a continuation whose stored chain cannot fit beside its connection\'s other lanes lets them go and completes (outside attack atk93 F3)', async () => {
    // It was told to try again for good on an otherwise idle server: only the token ids could let them go.
    const { server, url } = await testServer({ store: 'memory', limits: { maxServerBytes: 768 * KiB } });
    const o = await RawSocket.connect(url);
    o.send({ type: 'response.create', model: 'sim-model', store: true, input: lorem(400 * KiB) });
    const stored = await o.next('response.completed');
    o.dispose();
    await server.ws.idle();
    const w = await RawSocket.connect(url);
    w.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'a', input: lorem(250 * KiB) });
    const a = await w.next('response.completed');
    w.send({ type: 'response.create', model: 'sim-model', store: true, stream_id: 'b', previous_response_id: stored.response.id, input: 'next' });
    expect((await w.next('response.completed')).response.status).toBe('completed');
    expect(w.all('error')).toEqual([]);
    // Lane a's conversation was let go for it, and its continuation says so.
    w.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'a', previous_response_id: a.response.id, input: 'more' });
    expect((await w.next('error', { skipErrors: true })).error.message).toContain('was let go to make room');
    w.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a create refused after its connection let its other lanes go for it says so; the let-go hint is given only while the store has the response (outside attack atk93 F2, F5)', async () => {
    const { server, url } = await testServer({ store: 'memory', limits: { maxServerBytes: 1024 * KiB } });
    const w = await RawSocket.connect(url);
    w.send({ type: 'response.create', model: 'sim-model', store: true, stream_id: 'a', input: numbers(150 * KiB) });
    const a = await w.next('response.completed');
    // Lane b's create needs more than the whole budget; lane a was let go while its token ids were made.
    w.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'b', input: numbers(400 * KiB) });
    expect((await w.next('error', { skipErrors: true })).error).toMatchObject({
      code: 'payload_too_large',
      message: expect.stringMatching(/It cannot fit however long it waits; send a smaller one\. To make room for it, this connection let go of its other cached responses \(\d+ bytes\); a continuation of one is told so\.$/),
    });
    // Lane a's response is stored: a store: false continuation is told to continue it with store: true, until it is deleted.
    w.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'a', previous_response_id: a.response.id, input: 'more' });
    expect((await w.next('error', { skipErrors: true })).error.message).toContain('continue it with store: true');
    expect((await fetch(`${url}/v1/responses/${a.response.id}`, { method: 'DELETE' })).status).toBe(200);
    w.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'a', previous_response_id: a.response.id, input: 'more' });
    const gone = (await w.next('error', { skipErrors: true })).error;
    expect(gone.code).toBe('previous_response_not_found');
    expect(gone.message).not.toContain('store: true');
    // Not called a store: false response: it was stored, and deleted since (outside attack atk95 F3).
    expect(gone.message).toContain('the store no longer has it (deleted or expired)');
    w.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a continuation whose previous response is deleted while it runs is not cached when it completes: it holds no budget (outside attack atk93 I1)', async () => {
    // It was cached, never to be continued from the cache (its lineage is broken), and held its budget until the lane's
    // next create.
    const { model, release } = firstCallFreeModel();
    const { server, url } = await testServer({ model, store: 'memory', limits: { maxServerBytes: 4 * 1024 * KiB } });
    const w = await RawSocket.connect(url);
    w.send({ type: 'response.create', model: 'sim-model', store: true, input: lorem(200 * KiB) });
    const first = await w.next('response.completed');
    w.send({ type: 'response.create', model: 'sim-model', store: true, previous_response_id: first.response.id, input: 'next' });
    await w.next('response.output_text.delta');
    expect((await fetch(`${url}/v1/responses/${first.response.id}`, { method: 'DELETE' })).status).toBe(200);
    release();
    await w.next('response.completed');
    // Once idle, nothing is cached: nothing held.
    while ((await held(url)) !== 0) await new Promise((r) => setImmediate(r));
    w.send({ type: 'response.create', model: 'sim-model', store: true, previous_response_id: first.response.id, input: 'again' });
    expect((await w.next('error', { skipErrors: true })).error.code).toBe('previous_response_not_found');
    w.dispose();
    await server.ws.idle();
  });

  it('ws mode: a message that waited its whole time for room beside a paused run lets its connection\'s cached contexts go before it is closed, and is read (outside attack atk93 F4)', async () => {
    // It was closed 1013 with the caches, although without them it fitted at once.
    const { logger, waitFor } = captureLogger();
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'a' }, { text: 'b' }, { text: 'd' }]);
    const { server, url } = await testServer({ policy, logger, limits: { maxServerBytes: 2 * 1024 * KiB, requestTimeoutMs: 1000 } });
    const p = await RawSocket.longLived(url);
    p.send(create(0, { input: numbers(530 * KiB), tools: [tool] }));
    await p.next('response.done');
    const w = await RawSocket.connect(url);
    for (const lane of ['a', 'b']) {
      w.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: lane, input: numbers(60 * KiB) });
      await w.next('response.completed');
    }
    const room = 2 * 1024 * KiB - (await held(url));
    expect(room).toBeLessThan(150 * KiB);
    w.send({ type: 'response.create', model: 'sim-model', store: false, stream_id: 'd', input: lorem(150 * KiB) });
    await waitFor((l) => /waited its whole time for room/.test(l.msg));
    expect((await w.next('response.completed')).response.status).toBe('completed');
    expect(w.all('error')).toEqual([]);
    w.dispose();
    p.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a continuation that does not fit beside its connection\'s cached context lets the cache go and is read; the socket stays open (outside attack atk47)', async () => {
    // Before: it waited the whole request timeout, then closed 1013, although the cache is only a copy.
    const { logger, lines, waitFor } = captureLogger();
    const { server, url } = await testServer({ logger, store: 'memory', limits: { maxServerBytes: 1024 * KiB, requestTimeoutMs: 60_000 } });
    const ws = await RawSocket.connect(url);
    // store: false: the cache is the only copy, so the continuation is told its previous response is not found.
    ws.send(create(300 * KiB, { store: false }));
    const first = await ws.next('response.completed');
    expect(await held(url)).toBeGreaterThan(300 * KiB);
    ws.send(create(700 * KiB, { store: false, previous_response_id: first.response.id }));
    // Said why: the budget let the cache go (it said only "not found"; outside fuzzer atk88 I1).
    expect((await ws.next('error')).error).toMatchObject({
      code: 'previous_response_not_found',
      message: expect.stringMatching(/not found\. This connection's cached copy of it was let go to make room in the server's byte budget/),
    });
    await waitFor((l) => /cached context let go/.test(l.msg));
    // store: true: the continuation reads its chain from the store, as on any cache miss; that chain and the message
    // need more than the whole budget together, which the error event says: not to retry (it was told to try again;
    // outside attack atk92 F3).
    ws.send(create(300 * KiB, { store: true }));
    const stored = await ws.next('response.completed');
    ws.send(create(700 * KiB, { store: true, previous_response_id: stored.response.id }));
    expect((await ws.next('error')).error).toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('its body, the context it continues and the token ids made from them') });
    expect(lines.filter((l) => /cached context let go/.test(l.msg))).toHaveLength(2);
    // The connection goes on.
    ws.send(create(10));
    expect((await ws.next('response.completed')).response.status).toBe('completed');
    ws.ws.close();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('a message has the request timeout to arrive whole: one left unfinished gets request_timeout and a 1008 close, its share released (outside attack atk45 F2)', async () => {
    // Before: a message still arriving had no deadline (each fragment a sign of life), so peers sending a large first
    // fragment and then a byte now and then held most of the budget for as long as they liked.
    const MiB = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    const { url } = await testServer({ logger, limits: { maxServerBytes: 4 * MiB, requestTimeoutMs: 300 } });
    const ws = await openLongLived(url);
    const events: Array<{ type: string; error?: { code: string; message: string } }> = [];
    ws.on('message', (d) => events.push(JSON.parse(String(d)) as (typeof events)[number]));
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    // Within the budget, so reading never pauses: only the deadline ends it.
    ws.send('{"type":"response.create","model":"sim-model","input":"', { fin: false });
    ws.send(Buffer.alloc(MiB, 0x61), { fin: false, binary: false });
    await waitFor((l) => l.code === 'request_timeout');
    expect(await closed).toBe(1008);
    expect(events).toEqual([expect.objectContaining({ type: 'error', error: expect.objectContaining({ code: 'request_timeout' }) })]);
    expect(events[0]!.error!.message).toContain('--request-timeout-ms');
    expect(await held(url)).toBe(0);
    // Messages that do arrive in time, one after another on one connection, are not cut (the deadline is per message).
    const b = await RawSocket.longLived(url);
    for (let i = 0; i < 3; i++) {
      b.send(create(10));
      expect((await b.next('response.completed')).response.status).toBe('completed');
    }
  });

  it('an append left unfinished past the request timeout ends the paused run with its terminal event, then the 1008 close', async () => {
    const { logger, waitFor } = captureLogger();
    const { url } = await testServer({ logger, policy: pauseThenText(), limits: { requestTimeoutMs: 300 } });
    const ws = await openLongLived(url);
    const types: string[] = [];
    const paused = new Promise<void>((resolve) =>
      ws.on('message', (d) => {
        const e = JSON.parse(String(d)) as { type: string; error?: { code: string } };
        types.push(e.error ? `${e.type}:${e.error.code}` : e.type);
        if (e.type === 'response.done') resolve();
      }),
    );
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'look it up', tools: [tool] }));
    await paused;
    types.length = 0;
    ws.send('{"type":"response.append","input":[{"type":"function_call_output","call_id":"call_a","output":"', { fin: false });
    ws.send(Buffer.alloc(64 * KiB, 0x61), { fin: false, binary: false });
    await waitFor((l) => l.code === 'request_timeout');
    expect(await closed).toBe(1008);
    // Said in the run's stream, then the run's one terminal event.
    expect(types[0]).toBe('error:request_timeout');
    expect(types.filter((t) => /^response\.(completed|incomplete|failed|cancelled)$/.test(t))).toHaveLength(1);
    expect(await held(url)).toBe(0);
  });

  it('a peer gone while its reading is paused for the budget is noticed within seconds, its share released (outside attack atk47)', async () => {
    // Before: a paused socket reads no FIN, so the share stayed until the request timeout (here a minute).
    const MiB = 1024 * KiB;
    const { logger, waitFor } = captureLogger();
    const { url } = await testServer({ logger, limits: { maxServerBytes: MiB, requestTimeoutMs: 60_000 } });
    const ws = await openLongLived(url);
    ws.send('{"type":"response.create","model":"sim-model","input":"', { fin: false });
    ws.send(Buffer.alloc(2 * MiB, 0x20), { fin: false, binary: false });
    await waitFor((l) => l.code === 'server_busy' && /reading paused/.test(l.msg));
    expect(await held(url)).toBeGreaterThan(0);
    ws.terminate();
    await waitFor((l) => l.msg === 'websocket closed');
    expect(await held(url)).toBe(0);
  });

  it('a control frame read in the same socket read as a message leaves nothing charged once it is read (262 bytes stayed)', async () => {
    // The receiver emits the message and reads on in a later turn: the ping behind it was charged with the message,
    // and stayed charged until the peer's next message or the close (a pong to the server's probe did the same).
    const { url } = await testServer({});
    const ws = await openLongLived(url);
    const socket = (ws as unknown as { _socket: { cork(): void; uncork(): void } })._socket;
    const completed = new Promise<void>((resolve) => ws.on('message', (d) => String(d).includes('"response.completed"') && resolve()));
    const pong = new Promise<void>((resolve) => ws.once('pong', () => resolve()));
    socket.cork();
    ws.send(JSON.stringify(create(10)));
    ws.ping();
    socket.uncork();
    await Promise.all([completed, pong]);
    expect(await held(url)).toBe(0);
    ws.close();
  });

  it('each buffer of a message still arriving is charged besides its bytes: tiny fragments pause reading too (outside attack)', async () => {
    // Before: four peers each dripping a 1 MiB frame a byte per TCP write grew the RSS ~280 MB (~230 bytes a read, each
    // a buffer the `ws` receiver holds) with bytes_held at 1.2 MB, their payload; 8,000 one-byte fragments are 8 KB.
    const { url, ws, closed, waitFor } = await unfinishedCreate();
    for (let i = 0; i < 8_000; i++) ws.send(' ', { fin: false, binary: false });
    // 8 KB of payload, past a 1 MiB budget only by its buffers' count.
    await waitFor((l) => l.code === 'server_busy' && /reading paused/.test(l.msg));
    // Its buffers alone pass the whole budget: closed 1009 (message too big), its share released.
    expect(await closed).toBe(1009);
    expect(await held(url)).toBe(0);
  });

  it('a stored chain a continuation loads is charged while it runs: over HTTP and on a ws-mode cache miss, another past the budget gets server_busy', async () => {
    // The first model call answers at once; later ones wait for the gate (or their run's end).
    const { model, release } = firstCallFreeModel();
    const { url } = await testServer({ model, store: 'memory', limits: { maxServerBytes: 1_000 * KiB } });
    const post = (body: object) => fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', ...body }) });
    // A stored response of 600 KiB: its body was charged while it ran, and released.
    const a = (await (await post({ input: 'x'.repeat(600 * KiB), store: true })).json()) as { id: string; status: string };
    expect(a.status).toBe('completed');
    expect(await held(url)).toBe(0);
    // A continuation of it over HTTP holds the chain it loaded while it runs (its stream is open, its model waits).
    const b = await post({ input: 'next', previous_response_id: a.id, stream: true });
    const reader = b.body!.getReader();
    await reader.read();
    expect(await held(url)).toBeGreaterThan(600 * KiB);
    // Another continuation would hold 600 KiB more: past the 1,000 KiB budget.
    const c = await post({ input: 'again', previous_response_id: a.id });
    expect(c.status).toBe(503);
    expect(((await c.json()) as { error: { code: string } }).error.code).toBe('server_busy');
    // So would one in ws mode, from a connection whose cache does not hold it: an error event, the connection goes on.
    const ws = await RawSocket.connect(url);
    ws.send(create(10, { previous_response_id: a.id }));
    expect((await ws.next('error')).error.code).toBe('server_busy');
    release();
    while (!(await reader.read()).done);
    // Released with the request: the chain's charge went with it.
    expect(await held(url)).toBe(0);
    ws.send(create(10, { previous_response_id: a.id }));
    expect((await ws.next('response.completed')).response.status).toBe('completed');
  });

  it('the default is 256 MiB', async () => {
    const { DEFAULT_LIMITS } = await import('../../src/engine/services.js');
    expect(DEFAULT_LIMITS.maxServerBytes).toBe(256 * 1024 * 1024);
  });
});

describe('readBody', () => {
  it('leaves no listener on the request once settled (one kept the whole body text alive for an SSE stream’s life)', async () => {
    const { createServer } = await import('node:http');
    const { readBody } = await import('../../src/transport/body.js');
    const counts: Array<{ before: number[]; after: number[]; text: number }> = [];
    const names = ['close', 'error', 'data', 'end'] as const;
    const server = createServer((req, res) => {
      const before = names.map((n) => req.listenerCount(n));
      void readBody(req, 1 << 20)
        .then((text) => counts.push({ before, after: names.map((n) => req.listenerCount(n)), text: text.length }))
        .catch(() => counts.push({ before, after: names.map((n) => req.listenerCount(n)), text: -1 }))
        .finally(() => res.end('ok'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    try {
      await (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'x'.repeat(100_000) })).text();
      await (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'x'.repeat(2 << 20) })).text();
    } finally {
      server.closeAllConnections();
      server.close();
    }
    expect(counts.map((c) => c.text)).toEqual([100_000, -1]);
    for (const c of counts) expect(c.after).toEqual(c.before);
  });
});
