/**
 * The rendered prompt a context keeps (its token ids: a `TokenBuffer`, 4 bytes
 * a token in an array that doubles as it grows) is counted in the server-wide
 * byte budget while it is kept across client time: a paused long-lived run's
 * (at each pause, with its output: `RunCharge`) and a ws-mode connection's
 * cached context (`keptBytes`). Before, only the items' JSON was counted, and
 * text that tokenizes to a token a byte ("0 1 2 …") holds 4 to 8 times its
 * size in token ids: an outside attack's four long-lived runs, each with an
 * 8 MiB tool output, held 270 MB of array buffers with `bytes_held` at 34 MB
 * (ws mode, four 8 MiB creates cached: 300 MB). Real sockets.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { ITEM_HELD_BYTES } from '../../src/engine/budget.js';
import { firstCallFreeModel, gatedModel } from '../helpers/gated-model.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const held = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;
const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
/** ~`n` bytes of text the tokenizer makes one token per byte of. */
const dense = (n: number) => Array.from({ length: n / 2 }, (_, i) => `${i % 10} `).join('');
const MB = 1 << 20;

describe('a kept context’s token ids are charged to --max-server-bytes', () => {
  it('a paused long-lived run: its prompt’s tokens are held from its pause until it ends', async () => {
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] },
      { calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
      { text: 'done' },
    ]);
    const { url } = await testServer({ policy, limits: { maxServerBytes: 64 * MB } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool] });
    await s.next('response.done');
    const before = await held(url);
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: dense(MB) }] });
    await s.next('response.done');
    // The append's frame (~1 MB) and its ~1M token ids (4 MB, or more with the buffer's spare room).
    expect((await held(url)) - before).toBeGreaterThan(4 * MB);
    s.send({ type: 'response.cancel' });
    await s.next('response.cancelled');
    expect(await held(url)).toBe(0);
    s.dispose();
  });

  it('ws mode: a cached context’s tokens are held while it is cached, released at the close', async () => {
    const { server, url } = await testServer({ policy: scriptPolicy([{ text: 'one' }]), limits: { maxServerBytes: 64 * MB } });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: dense(MB), store: false });
    await s.next('response.completed');
    expect(await held(url)).toBeGreaterThan(4 * MB);
    s.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: what a cache keeps is charged whole, past the connection’s cap on frames (queued + context + frame bytes)', async () => {
    // The cap bounds what a connection's frames may hold; a cached context's token ids can be 4 to 8 times its
    // items' bytes, so capping its charge there left most of them uncounted.
    const limits = { maxServerBytes: 64 * MB, maxQueuedBytes: MB, maxContextBytes: 2 * MB, maxFrameBytes: 2 * MB };
    const { server, url } = await testServer({ policy: scriptPolicy([{ text: 'one' }]), limits });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: dense(1.5 * MB), store: false });
    await s.next('response.completed');
    expect(await held(url)).toBeGreaterThan(limits.maxQueuedBytes + limits.maxContextBytes + limits.maxFrameBytes);
    s.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });

  it('each item a kept context holds is charged a fixed overhead besides its bytes (tiny items cost more heap than their JSON)', async () => {
    // Outside attack: four paused runs each appended 49,000 one-letter messages held 27 MB more heap with
    // `bytes_held` at 13 MB: ~137 bytes of heap an item (the parsed object, its slots in the context and the
    // model's scans) against ~47 bytes of JSON counted.
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] }, { text: 'done' }]);
    const { url } = await testServer({ policy, limits: { maxServerBytes: 64 * MB } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool] });
    await s.next('response.done');
    const before = await held(url);
    const items = Array.from({ length: 10_000 }, () => ({ type: 'message', role: 'user', content: 'a' }));
    const frame = { type: 'response.append', input: [...items, { type: 'function_call_output', call_id: 'call_a', output: 'ok' }] };
    s.send(frame);
    await s.next('response.done');
    expect((await held(url)) - before).toBeGreaterThan(JSON.stringify(frame).length + 10_000 * ITEM_HELD_BYTES);
    s.send({ type: 'response.cancel' });
    await s.next('response.cancelled');
    expect(await held(url)).toBe(0);
    s.dispose();
  });

  it('a run in flight holds its prompt’s tokens from its first model call, on every design (here HTTP and ws), until it ends', async () => {
    // A run streaming slowly keeps its whole context meanwhile: an HTTP create of 1 MB of text of a token a byte
    // held its ~4 MB of token ids with only its body (~1 MB) charged, for as long as the model streamed.
    const gated = gatedModel();
    const { server, url } = await testServer({ model: gated.model, limits: { maxServerBytes: 64 * MB } });
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: dense(MB), stream: true }),
    });
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('output_text.delta')) text += new TextDecoder().decode((await reader.read()).value);
    expect(await held(url)).toBeGreaterThan(5 * MB);
    const ws = await RawSocket.connect(url);
    ws.send({ type: 'response.create', model: 'sim-model', input: dense(MB), store: false });
    await ws.next('response.output_text.delta');
    expect(await held(url)).toBeGreaterThan(10 * MB);
    gated.release();
    while (!(await reader.read()).done);
    await ws.next('response.completed');
    ws.dispose();
    // Both ended (the ws connection gone too): nothing held.
    await server.ws.idle();
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
  });

  it('ws mode: a continuation extending its cached context in place is not charged its tokens twice while it runs', async () => {
    // The connection's cache charge stands for the cached context; the run charged its whole prompt again besides,
    // so a continuation of a large cache held about twice its token ids in budget while it streamed.
    const gated = firstCallFreeModel();
    const { server, url } = await testServer({ model: gated.model, limits: { maxServerBytes: 64 * MB } });
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: dense(MB), store: false });
    const first = await s.next('response.completed');
    const cached = await held(url);
    expect(cached).toBeGreaterThan(5 * MB);
    s.send({ type: 'response.create', model: 'sim-model', input: 'more', store: false, previous_response_id: first.response.id });
    await s.next('response.created');
    await s.next('response.output_text.delta');
    expect(await held(url)).toBeLessThan(cached + 64 * 1024);
    gated.release();
    await s.next('response.completed');
    s.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });
});

describe('token ids are charged as they are made, checked against --max-server-bytes (outside attack atk45 F1)', () => {
  // Before: a request was admitted at its own bytes and its token ids, up to 4 bytes per byte of text, charged only at
  // the next model call, unchecked: twelve 4 MB creates held 149 MiB under a 32 MiB budget.

  it('a create whose tokens would pass the whole budget is refused payload_too_large, over a WebSocket (long-lived, ws) and over HTTP, nothing left held', async () => {
    const limit = 3 * MB;
    // A script turn for each create that runs (the refused ones never reach the model).
    const { server, url } = await testServer({ policy: scriptPolicy([{ text: 'one' }, { text: 'two' }]), limits: { maxServerBytes: limit } });
    for (const protocol of ['long-lived', 'ws'] as const) {
      const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
      // ~1 MB of text, a token a byte: ~4 MB of ids, past 3 MiB with the frame.
      s.send({ type: 'response.create', model: 'sim-model', input: dense(MB), store: false });
      // Refused while planned (the prompt is rendered before the response is created): the error event alone.
      // Alone past the whole budget: 413 payload_too_large, not a 503 to retry (atk88 F1, atk90 F2).
      const refused = await s.next('error');
      expect(refused.error.code, protocol).toBe('payload_too_large');
      // The connection goes on: a small create is served.
      s.send({ type: 'response.create', model: 'sim-model', input: 'hi', store: false });
      await s.next('response.completed');
      s.dispose();
    }
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: dense(MB) }) });
    const body = (await res.json()) as { error?: { code?: string }; status?: string };
    expect(res.status, JSON.stringify(body).slice(0, 300)).toBe(413);
    expect(body.error?.code).toBe('payload_too_large');
    await server.ws.idle();
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
    // Never past the budget by more than a slice of ids (16 K characters: 64 KiB) and a socket read.
    expect(server.bytes.peak).toBeLessThanOrEqual(limit + 192 * 1024);
  });

  it('a token count and a compaction are charged their token ids too: past the whole budget payload_too_large, as the same body as a create (atk47 F4)', async () => {
    const limit = 3 * MB;
    const { server, url } = await testServer({ limits: { maxServerBytes: limit } });
    const post = (path: string, body: object) => fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    for (const path of ['/v1/responses/input_tokens', '/v1/responses/compact']) {
      // Alone past the whole budget: 413, as the same body as a create (atk91 F7).
      const refused = await post(path, { model: 'sim-model', input: dense(MB) });
      expect(refused.status, path).toBe(413);
      expect(((await refused.json()) as { error: { code: string } }).error.code, path).toBe('payload_too_large');
      // A body that fits, ids and all, is answered; nothing stays held.
      const ok = await post(path, { model: 'sim-model', input: dense(64 * 1024) });
      expect(ok.status, path).toBe(200);
      await ok.json();
    }
    await server.httpTransport.idle();
    expect(await held(url)).toBe(0);
    expect(server.bytes.peak).toBeLessThanOrEqual(limit + 192 * 1024);
  });

  it('an append whose tokens would pass the budget is refused server_busy; the run stays paused and takes a smaller one', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);
    const limit = 3 * MB;
    const { server, url } = await testServer({ policy, limits: { maxServerBytes: limit } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool] });
    await s.next('response.done');
    const paused = await held(url);
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: dense(MB) }] });
    const refused = await s.next('error');
    expect(refused.error.code).toBe('server_busy');
    // Its frame and the ids made before the refusal are given back: what the paused run held before.
    expect(await held(url)).toBe(paused);
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    expect((await s.next('response.completed')).response.status).toBe('completed');
    s.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
    expect(server.bytes.peak).toBeLessThanOrEqual(limit + 192 * 1024);
  });
});
