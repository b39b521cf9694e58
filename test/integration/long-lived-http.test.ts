/**
 * The long-lived protocol over plain HTTP (`long-lived-http`) on real
 * sockets: one SSE stream per run that pauses at `response.done`, appends
 * (`POST /v1/responses/{id}/append` → 202 `{}`) that resume the same stream,
 * the WebSocket protocol's error codes as HTTP error bodies, cancel, a stream
 * closed by the client, shutdown while paused, the per-key ownership of a
 * run and the cap on live runs. Every run ends once and is billed once.
 */
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, describe, expect, it, vi } from 'vitest';
import OpenAI from 'openai';
import { LongLivedHttpClient, ServerError } from '../../src/client/index.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { SseStream, postJson } from '../helpers/sse-stream.js';
import { gatedModel } from '../helpers/gated-model.js';
import { gatedPlanning } from '../helpers/gated-planning.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const create = (extra: Record<string, unknown> = {}) => ({ model: 'sim-model', input: 'go', tools: [tool], ...extra });
const twoCalls = () =>
  scriptPolicy([
    { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
    { text: 'all done' },
  ]);
const out = (call_id: string, output = 'ok') => ({ type: 'function_call_output', call_id, output });

async function pausedRun(opts: Parameters<typeof testServer>[0] = {}, headers: Record<string, string> = {}) {
  const ctx = await testServer({ policy: twoCalls(), ...opts });
  const s = await SseStream.open(ctx.url, create(), headers);
  const done = await s.next('response.done');
  const id = done.response.id;
  const append = (input: unknown[], h = headers) => postJson(`${ctx.url}/v1/responses/${id}/append`, { input }, h);
  return { ...ctx, s, done, id, append };
}

/**
 * A server (its request paths recorded), a LongLivedHttpClient (its posts recorded) and a tool that says when it is
 * called (`inTool`) and answers 'ok' only once released (`gate`).
 */
async function gatedToolClient() {
  const { url, server } = await testServer({ policy: twoCalls() });
  const paths: string[] = [];
  server.http.on('request', (req: { method?: string; url?: string }) => void paths.push(`${req.method} ${req.url}`));
  const client = new LongLivedHttpClient(url, { timing: false });
  const posts = postsOf(client);
  let called!: () => void;
  const inTool = new Promise<void>((res) => (called = res));
  let release!: () => void;
  const gate = new Promise<void>((res) => (release = res));
  const gatedTool = async () => {
    called();
    await gate;
    return 'ok';
  };
  return { server, paths, client, posts, inTool, gate, release, gatedTool };
}

/** The URLs a LongLivedHttpClient posts to (appends, cancels), recorded as it calls its post. */
function postsOf(client: LongLivedHttpClient): string[] {
  const urls: string[] = [];
  const target = client as unknown as { post(url: string, body: string): Promise<unknown> };
  const post = target.post.bind(target);
  target.post = (url, body) => {
    urls.push(url);
    return post(url, body);
  };
  return urls;
}

describe('long-lived over HTTP', () => {
  it('pauses at response.done, resumes the same stream on append (202 {}), ends once with a gapless stream', async () => {
    const { s, done, id, append, server } = await pausedRun();
    expect(done.response.pending_tool_calls).toEqual(['call_a', 'call_b']);
    expect(await append([out('call_a')])).toEqual({ status: 202, json: {} });
    expect(await append([out('call_b')])).toEqual({ status: 202, json: {} });
    const end = await s.next('response.completed');
    expect(end.response.id).toBe(id);
    expect(await s.ended).toEqual({ done: true });
    expect(s.events.map((e) => e.sequence_number)).toEqual(s.events.map((_, i) => i));
    expect(s.events.filter((e) => e.type === 'response.created')).toHaveLength(1);
    await server.services.postWork.flush();
    const rec = server.services.records.get(id)!;
    expect(rec).toMatchObject({ protocol: 'long-lived-http', connection: null, status: 'completed' });
    expect(rec.counters).toMatchObject({ pauses: 1, appends: 2, model_calls: 2, render_full: 1 });
    expect(server.services.ledger.countFor(id)).toBe(1);
    expect(server.httpTransport.inFlight).toBe(0);
  });

  it('refuses a create without stream:true and an unknown ?protocol=', async () => {
    const { url } = await testServer();
    const plain = await postJson(`${url}/v1/responses?protocol=long-lived`, create());
    expect(plain.status).toBe(400);
    expect(plain.json.error).toMatchObject({ code: 'invalid_value', param: 'stream', type: 'invalid_request_error' });
    expect(plain.json.error.message).toMatch(/stream/);
    const other = await postJson(`${url}/v1/responses?protocol=carrier-pigeon`, { ...create(), stream: true });
    expect(other.status).toBe(400);
    expect(other.json.error).toMatchObject({ code: 'invalid_value', param: 'protocol' });
    // Given twice, even with one valid value, it is refused rather than one of them picked.
    for (const q of ['protocol=long-lived&protocol=http', 'protocol=long-lived&protocol=long-lived']) {
      const twice = await postJson(`${url}/v1/responses?${q}`, { ...create(), stream: true });
      expect(twice.status).toBe(400);
      expect(twice.json.error).toMatchObject({ code: 'invalid_value', param: 'protocol' });
      expect(twice.json.error.message).toMatch(/more than once/);
    }
    // A client call in the input without its output could never be answered (the run waits for the model's calls only):
    // refused as on the other designs (it ran, and its stored response refused every continuation; atk89 F6).
    const input = [{ type: 'message', role: 'user', content: 'go' }, { type: 'function_call', call_id: 'call_mine', name: 'lookup', arguments: '{}' }];
    const dangling = await postJson(`${url}/v1/responses?protocol=long-lived`, { ...create(), input, stream: true });
    expect(dangling).toMatchObject({ status: 400, json: { error: { code: 'missing_tool_output', param: 'input' } } });
  });

  it('append to an unknown id → 404 response_not_found; cancel of one → the same', async () => {
    const { url } = await testServer();
    for (const path of ['append', 'cancel']) {
      const r = await postJson(`${url}/v1/responses/resp_nope/${path}`, { input: [out('call_a')] });
      expect(r.status).toBe(404);
      expect(r.json.error).toMatchObject({ code: 'response_not_found', param: 'response_id' });
    }
  });

  it('unknown call id → 400 unknown_call_id, nothing applied, the run stays paused; a bad body → 400', async () => {
    const { s, append, server, id, url } = await pausedRun();
    const bad = await append([out('call_zzz')]);
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'unknown_call_id', param: 'input[0].call_id' });
    const noInput = await postJson(`${url}/v1/responses/${id}/append`, {});
    expect(noInput.status).toBe(400);
    expect(noInput.json.error).toMatchObject({ code: 'missing_required_parameter', param: 'input' });
    // An empty array answers nothing: refused (it was 202 {} and did nothing, the run left paused; atk69 F1).
    const empty = await append([]);
    expect(empty).toMatchObject({ status: 400, json: { error: { code: 'empty_array', param: 'input', type: 'invalid_request_error' } } });
    // A field the body does not have is named, as a create's is (a typo was dropped without a word; atk89 F1).
    const typo = await postJson(`${url}/v1/responses/${id}/append`, { input: [out('call_a'), out('call_b')], response_Id: 'resp_other' });
    expect(typo).toMatchObject({ status: 400, json: { error: { code: 'unknown_parameter', param: 'response_Id' } } });
    // Still paused: both outputs are accepted (with the client_metadata Codex sends) and the run completes.
    expect((await postJson(`${url}/v1/responses/${id}/append`, { input: [out('call_a'), out('call_b')], client_metadata: { a: 'b' } })).status).toBe(202);
    expect((await s.next('response.completed')).response.status).toBe('completed');
    expect(server.services.records.get(id)!.counters['appends']).toBe(1);
  });

  it('append while the run is streaming (not paused) → 400 no_paused_response', async () => {
    const { model, release } = gatedModel();
    const { url, server } = await testServer({ model });
    const s = await SseStream.open(url, create());
    const created = await s.next('response.created');
    await s.next('response.output_text.delta');
    const r = await postJson(`${url}/v1/responses/${created.response.id}/append`, { input: [out('call_a')] });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'no_paused_response' });
    release();
    expect((await s.next('response.completed')).response.status).toBe('completed');
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(created.response.id)).toBe(1);
  });

  it('only the key that created the run may append or cancel it (404 for another key)', async () => {
    const k1 = { Authorization: 'Bearer k1' };
    const k2 = { Authorization: 'Bearer k2' };
    const { url, s, id, append } = await pausedRun({ apiKeys: ['k1', 'k2'] }, k1);
    const stranger = await append([out('call_a'), out('call_b')], k2);
    expect(stranger.status).toBe(404);
    expect(stranger.json.error.code).toBe('response_not_found');
    expect((await postJson(`${url}/v1/responses/${id}/cancel`, {}, k2)).status).toBe(404);
    expect((await postJson(`${url}/v1/responses/${id}/cancel`, {})).status).toBe(401);
    expect((await append([out('call_a'), out('call_b')], k1)).status).toBe(202);
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it('cancel → 200 with the cancelled Response, the stream ends response.cancelled, the run is gone', async () => {
    const { url, s, id, append, server } = await pausedRun();
    const c = await postJson(`${url}/v1/responses/${id}/cancel`);
    expect(c.status).toBe(200);
    expect(c.json).toMatchObject({ id, status: 'cancelled' });
    expect((await s.next('response.cancelled')).response.id).toBe(id);
    expect(await s.ended).toEqual({ done: true });
    expect((await append([out('call_a')])).status).toBe(404);
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  // A client that lost a cancel's answer and retried was told its run could not be cancelled (400 invalid_value):
  // the store did not say which design made the response. As for a background response, the API's rule: a cancel of
  // a response that has ended answers its final Response, unchanged.
  const storeDir = mkdtempSync(join(tmpdir(), 'llr-llhttp-cancel-'));
  afterAll(() => rmSync(storeDir, { recursive: true, force: true }));
  it.each(['memory', 'sqlite'])('a cancel repeated, or of a run that has ended, answers its final Response (%s store)', async (kind) => {
    const store = kind === 'memory' ? 'memory' : join(storeDir, 'cancel.sqlite');
    const { url, s, id, append, server } = await pausedRun({ store });
    const first = await postJson(`${url}/v1/responses/${id}/cancel`);
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({ id, status: 'cancelled' });
    await s.ended;
    await server.services.postWork.flush();
    for (let i = 0; i < 3; i++) expect(await postJson(`${url}/v1/responses/${id}/cancel`)).toEqual({ status: 200, json: first.json });
    expect((await append([out('call_a')])).status).toBe(404);
    // One that completed (the script's next turn is its answer): answered as it ended, completed.
    const s2 = await SseStream.open(url, create());
    const completed = (await s2.next('response.completed')).response;
    const id2 = completed.id;
    await s2.ended;
    await server.services.postWork.flush();
    const late = await postJson(`${url}/v1/responses/${id2}/cancel`);
    expect(late.status).toBe(200);
    expect(late.json).toMatchObject({ id: id2, status: 'completed', output: completed.output });
    expect(server.services.ledger.countFor(id)).toBe(1);
    expect(server.services.ledger.countFor(id2)).toBe(1);
  });

  it('a repeated cancel of a run with store: false is 404, as its retrieve is (nothing of it is kept)', async () => {
    const { url } = await testServer({ policy: twoCalls() });
    const s = await SseStream.open(url, create({ store: false }));
    const id = (await s.next('response.done')).response.id;
    expect((await postJson(`${url}/v1/responses/${id}/cancel`)).status).toBe(200);
    await s.ended;
    const again = await postJson(`${url}/v1/responses/${id}/cancel`);
    expect(again.status).toBe(404);
    expect(again.json.error).toMatchObject({ code: 'response_not_found' });
  });

  it('a paused run keeps its stream alive with SSE comments every --sse-heartbeat-ms, only while paused; the events are unchanged (atk111 I3)', async () => {
    const { s, server, append, done } = await pausedRun({ limits: { sseHeartbeatMs: 20 } });
    const paused = s.events.indexOf(done);
    const first = await s.comment();
    const second = await s.comment();
    for (const c of [first, second]) expect(c).toEqual({ text: ': keep-alive', after: paused + 1 });
    expect((await append([out('call_a'), out('call_b')])).status).toBe(202);
    await s.next('response.completed');
    expect(await s.ended).toEqual({ done: true });
    // None before the first pause, none while the run streamed.
    expect(s.comments.every((c) => s.events[c.after - 1]!.type === 'response.done')).toBe(true);
    expect(s.events.filter((e) => e.type === 'response.completed')).toHaveLength(1);
    await server.httpTransport.idle();
  });

  it("openai-node's stream reads a paused run's keep-alive comments as nothing: its events are the run's, in order (atk111 I3)", async () => {
    const { url, server } = await testServer({ policy: twoCalls(), limits: { sseHeartbeatMs: 10 } });
    // The SDK's fetch, whose body is watched for the comment passing through to the SDK's parser.
    let sawComment: () => void = () => {};
    const commented = new Promise<void>((r) => (sawComment = r));
    const watched: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (!res.body || !res.headers.get('content-type')?.startsWith('text/event-stream')) return res;
      const decoder = new TextDecoder();
      const body = res.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, c) {
            if (decoder.decode(chunk, { stream: true }).includes(': keep-alive')) sawComment();
            c.enqueue(chunk);
          },
        }),
      );
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0, fetch: watched });
    const stream = await client.responses.create({ ...(create() as object), model: 'sim-model', stream: true } as never, { query: { protocol: 'long-lived' } });
    const types: string[] = [];
    let id = '';
    let appended: Promise<number> | null = null;
    for await (const ev of stream as unknown as AsyncIterable<{ type: string; response?: { id: string }; sequence_number: number }>) {
      types.push(ev.type);
      if (ev.type === 'response.created') id = ev.response!.id;
      // Appended once a comment has passed to the SDK's parser (the SDK reads on only while it is iterated: not awaited here).
      if (ev.type === 'response.done') appended = commented.then(async () => (await postJson(`${url}/v1/responses/${id}/append`, { input: [out('call_a'), out('call_b')] })).status);
    }
    expect(await appended).toBe(202);
    expect(types.filter((t) => t === 'response.done')).toHaveLength(1);
    expect(types.filter((t) => t === 'response.output_item.done')).toHaveLength(3);
    expect(types.at(-1)).toBe('response.completed');
    await server.httpTransport.idle();
  });

  it('the client closing the stream while paused cancels the run, once', async () => {
    const { s, id, server, append } = await pausedRun();
    s.abort();
    await s.ended;
    await server.httpTransport.idle();
    await server.services.postWork.flush();
    const rec = server.services.records.get(id)!;
    expect(rec.status).toBe('cancelled');
    expect(rec.counters['billing_records']).toBe(1);
    expect(server.services.ledger.countFor(id)).toBe(1);
    expect((await append([out('call_a')])).status).toBe(404);
  });

  it('a client gone while its create was being planned: its run never starts, so nothing waits paused for nobody', async () => {
    // The injected routing hop is where planning waits, on a gate the test holds.
    const { opts, inPlan, release } = gatedPlanning();
    const { url, server } = await testServer({ policy: twoCalls(), ...opts });
    const sockets: Socket[] = [];
    server.http.on('connection', (s: Socket) => sockets.push(s));
    const abort = new AbortController();
    const req = fetch(`${url}/v1/responses?protocol=long-lived`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...create(), stream: true }),
      signal: abort.signal,
    }).catch(() => null);
    await inPlan;
    expect(server.httpTransport.inFlight).toBe(1);
    abort.abort();
    await req;
    await Promise.all(sockets.map((s) => (s.destroyed ? null : once(s, 'close'))));
    release();
    // The one-shot session ends once its planning has: planned for a peer that is gone, the run is never started
    // (as on a WebSocket whose client left while its create was planned).
    await server.httpTransport.idle();
    expect(server.httpTransport.inFlight).toBe(0);
    expect(server.services.records.page({ owner: null, limit: 10, after: null, order: 'desc' }).data).toEqual([]);
    expect(server.services.ledger.entries.length).toBe(0);
  });

  it('shutdown while paused → response.incomplete (server_shutdown) on the stream, billed once', async () => {
    const { s, id, server } = await pausedRun();
    const closing = server.close();
    const end = await s.next('response.incomplete');
    expect(end.response.id).toBe(id);
    expect(end.response).toMatchObject({ incomplete_details: null, llr_incomplete_reason: 'server_shutdown' });
    expect(await s.ended).toEqual({ done: true });
    await closing;
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  it('an append body naming another response_id than its path is refused (400 invalid_value), nothing applied', async () => {
    const { s, id, append, url, server } = await pausedRun();
    const otherId = 'resp_another_run';
    // A user message would be accepted by either run: it must not land silently in the path's run.
    const wrong = await postJson(`${url}/v1/responses/${id}/append`, { response_id: otherId, input: 'for the other run' });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error).toMatchObject({ code: 'invalid_value', param: 'response_id' });
    const bad = await postJson(`${url}/v1/responses/${id}/append`, { response_id: 7, input: [out('call_a')] });
    expect(bad.json.error).toMatchObject({ code: 'invalid_type', param: 'response_id' });
    // The path's own id in the body is fine (a body copied from a response.append event).
    expect(await postJson(`${url}/v1/responses/${id}/append`, { response_id: id, input: [out('call_a')] })).toEqual({ status: 202, json: {} });
    expect(await append([out('call_b')])).toEqual({ status: 202, json: {} });
    await s.next('response.completed');
    await server.services.postWork.flush();
    expect(server.services.records.get(id)!.counters).toMatchObject({ appends: 2 });
  });

  it('shutdown while an append is being processed: the append is answered (JSON error), not cut off by the closing server', async () => {
    const { s, id, append, server } = await pausedRun();
    // The append's checks take a while (as an 8 MB one's do): shutdown begins and ends the run meanwhile.
    const live = (server.httpTransport as unknown as { host: { live: { append: (...a: unknown[]) => Promise<void> } } }).host.live;
    const real = live.append.bind(live);
    // The server closes every connection once its transports have shut down: without the fix, before the append was answered.
    let connectionsClosed!: () => void;
    const closedAll = new Promise<void>((resolve) => (connectionsClosed = resolve));
    const closeAll = server.http.closeAllConnections.bind(server.http);
    server.http.closeAllConnections = () => {
      connectionsClosed();
      closeAll();
    };
    let closing: Promise<void> | null = null;
    live.append = async (...a: unknown[]) => {
      closing = server.close();
      await s.next('response.incomplete');
      // Until the server closes its connections, or (with the fix: it waits for this append) a few event-loop turns pass.
      let turns = Promise.resolve();
      for (let i = 0; i < 20; i++) turns = turns.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
      await Promise.race([closedAll, turns]);
      return real(...a);
    };
    const answer = await append([out('call_a')]).catch((err: Error) => ({ status: 0, json: String(err.cause ?? err) }));
    expect(answer.status).toBe(404);
    expect(answer.json.error).toMatchObject({ code: 'response_not_found', param: 'response_id' });
    expect(closing).not.toBeNull();
    await closing;
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  it('at most --max-live-http-runs runs are open: past it 429 too_many_live_runs, and a slot frees when one ends', async () => {
    const { url, id } = await pausedRun({ limits: { maxLiveHttpRuns: 1 } });
    const refused = await postJson(`${url}/v1/responses?protocol=long-lived`, { ...create(), stream: true });
    expect(refused.status).toBe(429);
    expect(refused.json.error).toMatchObject({ code: 'too_many_live_runs', type: 'rate_limit_error' });
    expect((await postJson(`${url}/v1/responses/${id}/cancel`)).status).toBe(200);
    const again = await SseStream.open(url, create());
    expect((await again.next('response.created')).response.id).not.toBe(id);
  });

  it('LongLivedHttpClient runs an agent loop as one Response and can cancel a paused run', async () => {
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
      { text: 'all done' },
      { calls: [{ name: 'lookup', arguments: { q: 'c' }, call_id: 'call_c' }] },
    ]);
    const { url } = await testServer({ policy });
    const client = new LongLivedHttpClient(url);
    const run = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, (call) => `out ${call.call_id}`);
    const r = await run;
    expect(r.status).toBe('completed');
    expect(run.responses).toHaveLength(1);
    expect(run.transcript.filter((i) => i.type === 'function_call_output')).toHaveLength(2);
    expect((await run.telemetry()).map((t) => t.response_id)).toEqual([r.id]);

    // Cancel while the client runs its tools (the server is paused): the run ends `cancelled`, no append is sent.
    let called!: () => void;
    const inTool = new Promise<void>((res) => (called = res));
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const second = client.run({ model: 'sim-model', input: 'again', tools: [tool] as never }, async () => {
      called();
      await gate;
      return 'late';
    });
    await inTool;
    await client.cancel();
    release();
    expect((await second).status).toBe('cancelled');
    await client.close();
  });

  it('LongLivedHttpClient: a run only awaited keeps none of its events (each pause snapshot held the whole output); one iterated sees them all', async () => {
    const steps = 40;
    const turns = () => [
      ...Array.from({ length: steps }, (_, i) => ({ calls: [{ name: 'lookup', arguments: { q: `${i}` }, call_id: `call_${i}` }] })),
      { text: 'all done' },
    ];
    const { url } = await testServer({ policy: scriptPolicy([...turns(), ...turns()]) });
    const client = new LongLivedHttpClient(url, { timing: false });
    const awaited = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, () => 'x'.repeat(100));
    expect((await awaited).status).toBe('completed');
    // Nothing was kept for an iterator: one started now has no event to read.
    let kept = 0;
    for await (const _ of awaited) kept++;
    expect(kept).toBe(0);
    client.newConversation();
    const iterated = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, () => 'x'.repeat(100));
    const types: string[] = [];
    for await (const e of iterated) types.push(e.type);
    expect((await iterated).status).toBe('completed');
    expect(types.filter((t) => t === 'response.done')).toHaveLength(steps);
    expect(types.at(-1)).toBe('response.completed');
    await client.close();
  });

  it('LongLivedHttpClient reads its stream without fetch: a pause longer than fetch\'s body timeout (300 s) does not fail the run', async () => {
    // A stand-in for undici's body timeout: `expire()` fails every event-stream body fetch has open, as 300 s of
    // silence would (the stream is silent while the run is paused). The tool "runs longer than that" by calling it.
    const real = globalThis.fetch;
    const open = new Set<ReadableStreamDefaultController<Uint8Array>>();
    vi.stubGlobal('fetch', async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
      const res = await real(input, init);
      if (!res.body || !res.headers.get('content-type')?.startsWith('text/event-stream')) return res;
      const reader = res.body.getReader();
      const body = new ReadableStream<Uint8Array>({
        start: (c) => void open.add(c),
        async pull(c) {
          const { done, value } = await reader.read();
          try {
            if (done) c.close();
            else c.enqueue(value);
          } catch {
            // Expired meanwhile.
          }
        },
        cancel: (why) => reader.cancel(why),
      });
      return new Response(body, { status: res.status, headers: res.headers });
    });
    const expire = () => {
      for (const c of open) c.error(new TypeError('terminated', { cause: { code: 'UND_ERR_BODY_TIMEOUT' } }));
      open.clear();
    };
    try {
      const { url, server } = await testServer({ policy: twoCalls() });
      const client = new LongLivedHttpClient(url, { timing: false });
      const run = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, (call) => {
        expire();
        return `out ${call.call_id}`;
      });
      const r = await run;
      expect(r.status).toBe('completed');
      expect(r.output.at(-1)).toMatchObject({ type: 'message' });
      await server.services.postWork.flush();
      expect(server.services.records.get(r.id)).toMatchObject({ status: 'completed', counters: { pauses: 1, appends: 1 } });
      await client.close();
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('LongLivedHttpClient: close() right after a run ends raises nothing; close() while paused ends the run on the server as a disconnect', async () => {
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] },
      { text: 'done' },
      { calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
    ]);
    const { url, server } = await testServer({ policy });
    // What `llr run` does: the run resolves at its terminal event and the client is closed at once, while the timing
    // event and [DONE] may still be arriving. The stream's abort was then emitted as an error on a socket nobody
    // listened to any more: an uncaught AbortError.
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const client = new LongLivedHttpClient(url);
      const r = await client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, () => new Promise<string>((res) => setImmediate(() => res('ok'))));
      expect(r.status).toBe('completed');
      await client.close();
      await server.httpTransport.idle();
      expect((await fetch(`${url}/health`)).status).toBe(200);
      expect(uncaught).toEqual([]);

      // Closed while paused (its tool still running): the stream ends, and the server cancels the run as a disconnect.
      let called!: () => void;
      const inTool = new Promise<void>((res) => (called = res));
      const second = client.run({ model: 'sim-model', input: 'again', tools: [tool] as never }, () => {
        called();
        return new Promise<string>(() => {});
      });
      const settled = second.then(
        () => 'resolved',
        () => 'rejected',
      );
      await inTool;
      await client.close();
      expect(await settled).toBe('rejected');
      await server.httpTransport.idle();
      await server.services.postWork.flush();
      const rec = server.services.records.list().find((x) => x.protocol === 'long-lived-http' && x.status !== 'completed');
      expect(rec?.status).toBe('cancelled');
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });

  it('LongLivedHttpClient: cancel() before response.created (the create still being planned) cancels the run once it has an id; no tool runs', async () => {
    // Without an id there is nothing to POST a cancel to: the cancel was dropped, and the run went on, ran its tools
    // and completed, though the caller had cancelled it (the WebSocket client's cancel reaches a create being planned).
    const { opts, inPlan, release } = gatedPlanning();
    const { url, server } = await testServer({ policy: twoCalls(), ...opts });
    const client = new LongLivedHttpClient(url, { timing: false });
    let tools = 0;
    const run = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, () => {
      tools++;
      return 'ok';
    });
    await inPlan;
    const cancelled = client.cancel();
    release();
    const r = await run;
    await cancelled;
    expect(r.status).toBe('cancelled');
    expect(tools).toBe(0);
    await server.services.postWork.flush();
    expect(server.services.records.get(r.id)!.status).toBe('cancelled');
    await client.close();
  });

  it('LongLivedHttpClient: close() while a tool runs sends no append when the tool finishes', async () => {
    const { server, paths, client, posts, inTool, gate, release, gatedTool } = await gatedToolClient();
    const run = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, gatedTool);
    const settled = run.then(
      () => 'resolved',
      () => 'rejected',
    );
    await inTool;
    await client.close();
    expect(await settled).toBe('rejected');
    release();
    // The tool's answer reaches the client's continuation in microtasks: past them (the next turn), an append would
    // have been posted; then whatever was sent has reached the server once its transport is idle.
    await gate;
    await new Promise((res) => setImmediate(res));
    expect(posts.filter((u) => u.includes('/append'))).toEqual([]);
    await server.httpTransport.idle();
    expect(paths.filter((p) => p.includes('/append'))).toEqual([]);
    expect(paths).toHaveLength(1);
  });

  it('LongLivedHttpClient: cancel() while a tool runs, then a new run: the cancelled run\'s tool sends no append when it finishes', async () => {
    // The continuation checked the client-wide `cancelling` flag, which the next run() resets, and the run's own abort
    // signal, which a cancel never sets: the first run's outputs were POSTed to its cancelled response once the second
    // run had started.
    const { server, paths, client, posts, inTool, gate, release, gatedTool } = await gatedToolClient();
    let firstDone!: () => void;
    const firstToolDone = new Promise<void>((res) => (firstDone = res));
    const first = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, gatedTool);
    await inTool;
    await client.cancel();
    const ended = await first;
    expect(ended.status).toBe('cancelled');
    const second = client.run({ model: 'sim-model', input: 'again', tools: [tool] as never }, async () => 'ok');
    release();
    void gate.then(() => setImmediate(firstDone));
    await firstToolDone;
    expect((await second).status).toBe('completed');
    // firstToolDone came a turn after the first tool's answer: a late append would have been posted by now.
    expect(posts.filter((u) => u.includes(`${ended.id}/append`))).toEqual([]);
    await server.httpTransport.idle();
    expect(paths.filter((p) => p.includes(`${ended.id}/append`))).toEqual([]);
  });

  it.each(['then awaited', 'awaited meanwhile'] as const)('LongLivedHttpClient: a run whose iterator broke off early (%s) keeps no more events for nobody', async (order) => {
    // The fix above kept every event once an iterator had started, though the caller broke out of it after
    // response.created (to learn the id) and only awaited after: each pause snapshot kept again.
    const steps = 40;
    const { url } = await testServer({
      policy: scriptPolicy([...Array.from({ length: steps }, (_, i) => ({ calls: [{ name: 'lookup', arguments: { q: `${i}` }, call_id: `call_${i}` }] })), { text: 'all done' }]),
    });
    const client = new LongLivedHttpClient(url, { timing: false });
    const run = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, () => 'x'.repeat(100));
    const outcome = order === 'awaited meanwhile' ? Promise.resolve(run) : null;
    for await (const e of run) if (e.type === 'response.created') break;
    expect((await (outcome ?? run)).status).toBe('completed');
    let kept = 0;
    for await (const _ of run) kept++;
    expect(kept).toBe(0);
    await client.close();
  });

  it('LongLivedHttpClient: an append the server refuses fails the run with its error, and the run ends on the server', async () => {
    const { url, server } = await testServer({ policy: twoCalls() });
    const client = new LongLivedHttpClient(url);
    // A tool output carrying a credential is refused by the append's safety scan.
    const run = client.run({ model: 'sim-model', input: 'go', tools: [tool] as never }, () => 'key: AKIAABCDEFGHIJKLMNOP');
    const err = await run.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServerError);
    expect((err as ServerError).code).toBe('content_flagged');
    // Said as this client's end of the run, not only the server's words (atk89 F3).
    expect((err as ServerError).message).toMatch(/\(The server refused this client's append to its paused run, and the client ended the run: it cannot send less\.\)$/);
    await server.httpTransport.idle();
    const recs = server.services.records.page({ owner: null, limit: 10, after: null, order: 'desc' }).data;
    expect(recs.map((r) => [r.protocol, r.status])).toEqual([['long-lived-http', 'cancelled']]);
    await client.close();
  });

  it('LongLivedHttpClient finishes against a server that sends no timing and keeps no [DONE] promise', async () => {
    // A minimal Responses SSE server: created, completed, and the stream simply ends.
    const srv = createServer((req, res) => {
      req.resume();
      const response = { id: 'resp_min', object: 'response', status: 'completed', output: [], usage: null };
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(`event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: { ...response, status: 'in_progress' } })}\n\n`);
      res.end(`event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', sequence_number: 1, response })}\n\n`);
    });
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    try {
      const client = new LongLivedHttpClient(`http://127.0.0.1:${(srv.address() as AddressInfo).port}`);
      const run = client.run({ model: 'm', input: 'hi' }, () => '');
      expect((await run).status).toBe('completed');
      expect(await run.telemetry()).toEqual([]);
      await client.close();
    } finally {
      srv.closeAllConnections();
      srv.close();
    }
  });
});
