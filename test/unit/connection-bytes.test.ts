/**
 * A WebSocket connection's share of the server-wide byte budget, as the
 * session layer gives it (`SessionHost.connectionBytes`, modes/server-bytes.ts),
 * over the in-memory pair: frames are charged the way transport/ws.ts
 * charges them (before `handle`, `watch` after), and the share follows the
 * session's work — held while a run is queued, running or paused, released
 * when it ends, except ws mode's cached context (for a continuation: its
 * items and header), charged while it is cached, released at close. No sockets, no timers: waits on events
 * and on `session.idle()`.
 */
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { scriptPolicy, type ScriptStep } from '../../src/model/policies.js';
import { SessionHost } from '../../src/modes/host.js';
import { ServerBytes } from '../../src/modes/server-bytes.js';
import { SPAN_CHUNK, SPAN_HELD_BYTES } from '../../src/pipeline/metrics.js';
import { itemBytes } from '../../src/engine/budget.js';
import type { InputItem } from '../../src/protocol/objects.js';
import type { SessionInfo } from '../../src/modes/transport.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';
import { MemoryClient } from '../../src/transport/memory.js';

const servers: LlrServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.services.store.close();
});

const log = pino({ level: 'silent' });
const conn: SessionInfo = { connection: 'conn_mem', owner: null, authSpan: null };
const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const CALL: ScriptStep = { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_1' }] };

function open(protocol: 'ws' | 'long-lived', steps: ScriptStep[], budget: number) {
  const server = new LlrServer({ store: 'memory', logger: log, modelSettings: INSTANT_MODEL, policy: scriptPolicy(steps) });
  servers.push(server);
  const bytes = new ServerBytes(budget);
  const host = new SessionHost(server.services, bytes);
  // What the session keeps shrank (a cache let go or deleted): the share hears of it, as transport/ws.ts wires it.
  const info: SessionInfo = { ...conn, kept: () => share.kept() };
  const client = MemoryClient.connect(host.sessions(), protocol, info, log);
  const share = host.connectionBytes(client.session);
  /** One frame as transport/ws.ts handles it; returns its size. */
  const frame = (event: { type: 'response.create' | 'response.append' } & Record<string, unknown>): number => {
    const text = JSON.stringify(event);
    const n = Buffer.byteLength(text);
    share.frame(n, event.type === 'response.create');
    client.send(text);
    share.watch();
    return n;
  };
  return { bytes, client, share, frame };
}

const create = (input: string) => ({ type: 'response.create' as const, model: 'sim-model', input, tools: [tool] });

describe('a WebSocket connection’s share of the byte budget', () => {
  it('long-lived: the create and the append stay charged while the run is paused, and all is released when it completes', async () => {
    const { bytes, client, frame } = open('long-lived', [CALL, { text: 'thanks' }], 1 << 20);
    const paused = client.nextEvent('response.done');
    const c = frame(create('x'.repeat(2000)));
    const pause = await paused;
    // And what the run keeps that no frame stands for, while it lives: its timeline, the first chunk of spans (it has
    // fewer; run-spans-budget.test.ts), its output so far, the call (run-output-budget.test.ts), and its prompt's
    // token ids, 4 bytes each, fewer than its characters (token-buffer-budget.test.ts).
    const output = (pause as { response: { output: InputItem[] } }).response.output;
    const spansAndOutput = SPAN_CHUNK * SPAN_HELD_BYTES + output.reduce((n, item) => n + itemBytes(item), 0);
    const tokens = bytes.held - c - spansAndOutput;
    expect(tokens % 4).toBe(0);
    expect(tokens).toBeGreaterThan(0);
    expect(tokens).toBeLessThan(4 * c);
    const kept = spansAndOutput + tokens;
    const completed = client.nextEvent('response.completed');
    const a = frame({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_1', output: 'found' }] });
    expect(bytes.held).toBe(c + a + kept);
    await completed;
    await client.session.idle();
    expect(bytes.held).toBe(0);
    // Its next model call charged the appended items' token ids too (while the model streamed).
    expect(bytes.peak).toBeGreaterThanOrEqual(c + a + kept);
  });

  it('ws mode: after a response the cached context stays charged (its items and header), until the next response replaces it and the close', async () => {
    const { bytes, client, share, frame } = open('ws', [{ text: 'one' }, { text: 'two' }], 1 << 20);
    let done = client.nextEvent('response.completed');
    const first = frame(create('x'.repeat(3000)));
    await done;
    await client.session.idle();
    expect(bytes.held).toBeGreaterThan(3000);
    expect(bytes.held).toBe(client.session.keptBytes());
    // Its items and header, and its prompt's token ids (4 bytes each, fewer than its characters).
    expect(bytes.held).toBeLessThan(5 * first + 1000);
    done = client.nextEvent('response.completed');
    frame(create('y'.repeat(500)));
    await done;
    await client.session.idle();
    // A fresh create's response replaced the cache: only its context is charged.
    expect(bytes.held).toBe(client.session.keptBytes());
    expect(bytes.held).toBeLessThan(first);
    share.close();
    await client.close();
    expect(bytes.held).toBe(0);
  });

  it('ws mode: a chain of continuations keeps its whole cached context charged, not only its last frame', async () => {
    // Outside attack: a chain of 1 MB continuations cached a 29 MB context per connection, counted as its last
    // 1 MB frame; eight connections held 250 MB of heap under a 64 MB budget.
    const steps = 6;
    const { bytes, client, share, frame } = open('ws', Array.from({ length: steps }, (_, i): ScriptStep => ({ text: `r${i}` })), 1 << 22);
    let prev: string | null = null;
    let sent = 0;
    for (let i = 0; i < steps; i++) {
      const done = client.nextEvent('response.completed');
      sent += frame({ ...create('z'.repeat(10_000)), ...(prev === null ? {} : { previous_response_id: prev }) });
      prev = (await done).response.id;
      await client.session.idle();
    }
    // Every continuation's input is in the cached context (the tools, sent with each, are kept once).
    expect(bytes.held).toBeGreaterThan(steps * 10_000);
    expect(bytes.held).toBe(client.session.keptBytes());
    expect(bytes.held).toBeLessThan(5 * sent + 2000);
    // A continuation that fails evicts the cache: nothing is kept.
    const refused = client.nextEvent('error');
    frame({ ...create('bad'), previous_response_id: prev, input: [{ type: 'function_call_output', call_id: 'call_none', output: 'x' }] });
    await refused;
    await client.session.idle();
    expect(bytes.held).toBe(0);
    share.close();
    await client.close();
  });

  it('ws mode: an idle connection\'s cached context is let go for a charge past the budget, only when that makes it fit (atk80 F2)', async () => {
    const { bytes, client, share, frame } = open('ws', [{ text: 'one' }], 1 << 20);
    const done = client.nextEvent('response.completed');
    frame({ ...create('x'.repeat(100_000)), store: false });
    await done;
    await client.session.idle();
    await Promise.resolve();
    const cache = bytes.held;
    expect(cache).toBe(client.session.keptBytes());
    expect(cache).toBeGreaterThan(100_000);
    // Past the budget even without the cache: refused, and the cache stays.
    const room = bytes.max - cache;
    expect(() => bytes.charge(bytes.max + 1)).toThrow(expect.objectContaining({ code: 'server_busy' }));
    expect(bytes.held).toBe(cache);
    expect(bytes.cachesLetGo).toBe(0);
    // Past the room beside it, within the budget without it: the cache goes, its charge given back at once.
    bytes.charge(room + 1);
    expect(bytes.cachesLetGo).toBe(1);
    expect(client.session.keptBytes()).toBe(0);
    expect(bytes.held).toBe(room + 1);
    bytes.release(room + 1);
    expect(bytes.held).toBe(0);
    share.close();
    await client.close();
  });

  it('ws mode: a frame charged in the same turn as its connection\'s cache is let go is held while its run lasts, and its new cache after (atk80 F2)', async () => {
    const { bytes, client, share, frame } = open('ws', [{ text: 'one' }, { text: 'two' }], 1 << 20);
    const first = client.nextEvent('response.completed');
    frame(create('x'.repeat(100_000)));
    const prev = (await first).response.id;
    await client.session.idle();
    await Promise.resolve();
    const cache = bytes.held;
    // Another request's charge that fits only without the cache lets it go; in the same turn a continuation arrives.
    const other = bytes.max - cache + 1000;
    bytes.charge(other);
    expect(bytes.cachesLetGo).toBe(1);
    const second = client.nextEvent('response.completed');
    const n = frame({ ...create('y'.repeat(1500)), previous_response_id: prev });
    // Its frame stays charged while it runs (the idle step the cache's going asked for waits for the run's end).
    await Promise.resolve();
    expect(bytes.held).toBe(other + n);
    expect((await second).response.previous_response_id).toBe(prev);
    await client.session.idle();
    await Promise.resolve();
    // A cache miss read from the store, and the continuation's context cached and charged once it ended.
    expect(client.session.keptBytes()).toBeGreaterThan(100_000);
    expect(bytes.held).toBe(other + client.session.keptBytes());
    bytes.release(other);
    share.close();
    expect(bytes.held).toBe(0);
    await client.close();
  });

  it('ws mode: a connection\'s own frame lets another idle connection\'s cache go, never its own (atk83 F1)', async () => {
    // Its own went first (least recently used): with `store: false` its continuation was then told its previous
    // response was not found, although the other connection's cache would have made room.
    const server = new LlrServer({ store: 'memory', logger: log, modelSettings: INSTANT_MODEL, policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'a2' }]) });
    servers.push(server);
    const bytes = new ServerBytes(1 << 20);
    const host = new SessionHost(server.services, bytes);
    const connect = (connection: string) => {
      const info: SessionInfo = { ...conn, connection, kept: () => share.kept() };
      const client = MemoryClient.connect(host.sessions(), 'ws', info, log);
      const share = host.connectionBytes(client.session);
      const frame = (event: Record<string, unknown>): void => {
        share.frame(Buffer.byteLength(JSON.stringify(event)), true);
        client.send(JSON.stringify(event));
        share.watch();
      };
      return { client, share, frame };
    };
    const a = connect('conn_a');
    const b = connect('conn_b');
    for (const c of [a, b]) {
      const done = c.client.nextEvent('response.completed');
      c.frame({ ...create('x'.repeat(100_000)), store: false });
      await done;
      await c.client.session.idle();
      await Promise.resolve();
    }
    const prev = a.client.events.find((e) => e.type === 'response.completed')!.response.id;
    const cacheB = b.client.session.keptBytes();
    // Room for all but A's continuation: A's cache is the least recently used, B's is let go.
    const other = bytes.max - bytes.held - 1000;
    bytes.charge(other);
    const second = a.client.nextEvent('response.completed');
    a.frame({ ...create('y'.repeat(1500)), store: false, previous_response_id: prev });
    expect(bytes.cachesLetGo).toBe(1);
    expect(b.client.session.keptBytes()).toBe(0);
    expect((await second).response.previous_response_id).toBe(prev);
    expect(cacheB).toBeGreaterThan(100_000);
    // With no other cache to let go, its next continuation is refused, and its own cache stays.
    await a.client.session.idle();
    await Promise.resolve();
    const kept = a.client.session.keptBytes();
    expect(() => a.frame({ ...create('z'.repeat(bytes.max - bytes.held + 10)), store: false, previous_response_id: prev })).toThrow(expect.objectContaining({ code: 'server_busy' }));
    expect(a.client.session.keptBytes()).toBe(kept);
    expect(bytes.cachesLetGo).toBe(1);
    bytes.release(other);
    a.share.close();
    b.share.close();
    expect(bytes.held).toBe(0);
    await a.client.close();
    await b.client.close();
  });

  it('ws mode: a frame that cannot fit beside its own idle cache whatever others give back lets that cache go (atk85 F3)', async () => {
    // Kept for it (atk83 F1), such a continuation was refused "try again" for good: nothing else held any budget.
    const { bytes, client, share, frame } = open('ws', [{ text: 'one' }, { text: 'two' }], 1 << 20);
    const first = client.nextEvent('response.completed');
    frame({ ...create('x'.repeat(100_000)), store: false });
    const prev = (await first).response.id;
    await client.session.idle();
    await Promise.resolve();
    const cache = bytes.held;
    const second = client.nextEvent('error');
    frame({ ...create('y'.repeat(bytes.max - cache + 1000)), store: false, previous_response_id: prev });
    expect(bytes.cachesLetGo).toBe(1);
    expect(client.session.keptBytes()).toBe(0);
    // The continuation is then a cache miss: with store false, its previous response is not found (a definite answer).
    expect((await second).error.code).toBe('previous_response_not_found');
    await client.session.idle();
    share.close();
    expect(bytes.held).toBe(0);
    await client.close();
  });

  it('long-lived: a paused run whose peer\'s frame is still being parsed holds nothing for good (atk80 I1)', async () => {
    // That frame is applied or refused on its own: counted as held until the peer's next append, another run's append
    // refused past the budget could be ended although it would fit once this frame is refused.
    const { client, share, frame } = open('long-lived', [CALL, { text: 'thanks' }], 1 << 20);
    const paused = client.nextEvent('response.done');
    frame(create('x'.repeat(2000)));
    await paused;
    expect(client.session.heldForPeer()).toBe(share.own());
    expect(share.own()).toBeGreaterThan(2000);
    share.parsing(5000);
    expect(client.session.heldForPeer()).toBe(0);
    share.parsed(5000);
    expect(client.session.heldForPeer()).toBe(share.own());
    share.close();
    await client.close();
  });

  it('a frame past the budget is refused with server_busy and nothing is charged', () => {
    const { bytes, share } = open('ws', [], 1000);
    expect(() => share.frame(1001, true)).toThrow(expect.objectContaining({ code: 'server_busy', status: 503 }));
    expect(bytes.held).toBe(0);
    share.frame(1000, true);
    expect(bytes.held).toBe(1000);
    share.close();
    share.close();
    expect(bytes.held).toBe(0);
  });

  it('a frame whose parse ends after the connection closed charges nothing (a large frame parsed in slices, its peer gone)', () => {
    const { bytes, share } = open('ws', [], 1 << 20);
    share.frame(1000, true);
    share.close();
    share.frame(5000, true);
    share.watch();
    expect(bytes.held).toBe(0);
  });
});
