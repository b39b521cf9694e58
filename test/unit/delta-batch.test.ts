/**
 * The batched delta path (issue 11): the model hands over every token
 * already due as one batch, the run emits it in one call, and the
 * transports write its frames at once. What a client receives must be what
 * one event per token gave: the same events, numbers and bytes; a budget,
 * a stop or a failed send part-way through a batch ends the stream exactly
 * where one event per token would have; the paced model's tokens keep
 * their own due times.
 */
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import * as wsModule from 'ws';
import { ResponseRun, type EventSink } from '../../src/engine/run.js';
import { longLivedPolicy } from '../../src/modes/long-lived.js';
import { scriptPolicy, type ScriptStep } from '../../src/model/policies.js';
import { mulberry32 } from '../../src/model/rng.js';
import { SimulatedModel } from '../../src/model/simulated.js';
import { tokenPieces } from '../../src/model/tokenizer.js';
import type { ModelEvent } from '../../src/model/types.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { DeltaBatch, DeltaHead } from '../../src/protocol/event-json.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { parseClientFrame } from '../../src/protocol/parse.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';
import { sseTransport } from '../../src/transport/sse.js';
import { batchFrames, textFrames } from '../../src/transport/ws-frames.js';
import { FakeClock, SETTINGS, request } from './model-fixtures.js';

const ALPHABET = [
  'a', 'Z', ' ', '0', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u001f', '\u007f', '\u0080', '\u0081', '\u00ff',
  '\u2028', 'é', 'ß', '中', '😀', '\ud83d', '\ude00', '\ufeff', '<', '&', '{', '}', ':', ',',
];

function randomString(rng: () => number, max: number): string {
  const n = Math.floor(rng() * max);
  let s = '';
  for (let i = 0; i < n; i++) s += rng() < 0.2 ? String.fromCharCode(Math.floor(rng() * 0x10000)) : ALPHABET[Math.floor(rng() * ALPHABET.length)]!;
  return s;
}

/** Mostly ASCII, like model text: the builder's fast path, with a non-ASCII delta now and then. */
function asciiString(rng: () => number, max: number): string {
  const n = Math.floor(rng() * max);
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(rng() < 0.1 ? Math.floor(rng() * 0x20) : 0x20 + Math.floor(rng() * 0x60));
  return s;
}

/** The `ws` library's frame writer (exported by the package; its types leave it out). */
interface SenderLike {
  send(data: string, options: { binary: boolean; mask: boolean; compress: boolean; fin: boolean }, cb: () => void): void;
}
const Sender = (wsModule as unknown as { Sender: new (socket: unknown) => SenderLike }).Sender;

/** The bytes the `ws` library writes for `ws.send(text)` on a server socket (no compression). */
function wsSendBytes(texts: readonly string[]): Buffer {
  const chunks: Buffer[] = [];
  const socket = {
    cork() {},
    uncork() {},
    write(chunk: Buffer | string) {
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
      return true;
    },
  };
  const sender = new Sender(socket);
  for (const t of texts) sender.send(t, { binary: false, mask: false, compress: false, fin: true }, () => {});
  return Buffer.concat(chunks);
}

function randomBatch(rng: () => number, make: (rng: () => number, max: number) => string): DeltaBatch {
  const text = rng() < 0.5;
  const itemId = rng() < 0.1 ? `msg_${randomString(rng, 6)}` : `msg_${Math.floor(rng() * 1e9).toString(16)}`;
  const head = new DeltaHead(text ? 'response.output_text.delta' : 'response.function_call_arguments.delta', itemId, Math.floor(rng() * 300), text ? 0 : null);
  const deltas = Array.from({ length: 1 + Math.floor(rng() * 80) }, () => make(rng, 12));
  return new DeltaBatch(head, deltas, Math.floor(rng() * 2 ** 40));
}

describe('WebSocket frames of a batch', () => {
  it('are byte for byte what ws.send writes for each event, for random deltas (unicode, escapes, lone surrogates)', () => {
    const rng = mulberry32(11);
    for (let round = 0; round < 400; round++) {
      const b = randomBatch(rng, round % 2 === 0 ? randomString : asciiString);
      const texts = b.deltas.map((_, i) => b.json(i));
      texts.forEach((t, i) => expect(t).toBe(JSON.stringify(b.event(i))));
      const { frames, largest } = batchFrames(b);
      expect(frames.equals(wsSendBytes(texts))).toBe(true);
      expect(largest).toBe(Math.max(...texts.map((t) => Buffer.byteLength(t))));
    }
  });

  it('number every message right across digit counts, up to the largest safe integer', () => {
    const rng = mulberry32(21);
    const head = new DeltaHead('response.function_call_arguments.delta', 'fc_1', 3, null);
    for (const first of [0, 5, 95, 990, 99_990, 2 ** 31 - 3, 2 ** 32 - 3, Number.MAX_SAFE_INTEGER - 130]) {
      const b = new DeltaBatch(head, Array.from({ length: 120 }, () => asciiString(rng, 6)), first);
      const texts = b.deltas.map((_, i) => b.json(i));
      texts.forEach((t, i) => expect(JSON.parse(t)).toMatchObject({ sequence_number: first + i }));
      expect(batchFrames(b).frames.equals(wsSendBytes(texts))).toBe(true);
    }
  });

  it('frame payloads of every length class (under 126, 16-bit and 64-bit lengths) the same way', () => {
    const rng = mulberry32(5);
    const sizes = [0, 1, 60, 125, 126, 127, 200, 65535 - 200, 65535, 65536, 70_000, 200_000];
    const texts = sizes.map((n) => (n === 0 ? '' : randomString(rng, 2).padEnd(n, 'x').slice(0, n)));
    expect(textFrames(texts).equals(wsSendBytes(texts))).toBe(true);
    // A large delta through the batch builder: its head, 16-bit and 64-bit frames.
    for (const n of [100, 20_000, 70_000]) {
      const head = new DeltaHead('response.output_text.delta', 'msg_1', 0, 0);
      for (const delta of ['a'.repeat(n), 'é'.repeat(n), '"\n'.repeat(n / 2)]) {
        const b = new DeltaBatch(head, [delta, 'x'], 7);
        expect(batchFrames(b).frames.equals(wsSendBytes([b.json(0), b.json(1)]))).toBe(true);
      }
    }
  });
});

/** A stand-in ServerResponse that records what is written to it. */
function fakeResponse() {
  const chunks: string[] = [];
  const res = {
    writableEnded: false,
    destroyed: false,
    writableLength: 0,
    socket: null,
    writeHead() {},
    on() {},
    write(chunk: string) {
      chunks.push(chunk);
      return true;
    },
  };
  return { res, text: () => chunks.join('') };
}

describe('SSE frames of a batch', () => {
  it('are the same text as one send per event', () => {
    const rng = mulberry32(9);
    for (let round = 0; round < 200; round++) {
      const b = randomBatch(rng, round % 2 === 0 ? randomString : asciiString);
      const one = fakeResponse();
      const each = fakeResponse();
      const batched = sseTransport(one.res as never, 1 << 20, () => {});
      const single = sseTransport(each.res as never, 1 << 20, () => {});
      batched.sendDeltas!(b);
      expect(b.sent).toBe(b.deltas.length);
      b.deltas.forEach((_, i) => single.send(b.event(i)));
      expect(one.text()).toBe(each.text());
    }
  });
});

// ---------------------------------------------------------------- the model

describe('the model hands over every token already due as one batch', () => {
  const TEXT = 'The quick brown fox jumps over the lazy dog, and then some more words to stream. '.repeat(3).trim();
  const pieces = tokenPieces(TEXT);

  async function batches(settings: typeof SETTINGS, batchTokens: number, clock = new FakeClock()) {
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: TEXT }]), clock });
    const out: Array<{ at: number; deltas: readonly string[] }> = [];
    for await (const e of model.sample(request({ settings, batchTokens }), new AbortController().signal)) {
      if (e.type === 'text.delta') out.push({ at: clock.now(), deltas: [e.delta] });
      if (e.type === 'text.deltas') out.push({ at: clock.now(), deltas: e.deltas });
    }
    return out;
  }

  it('instant: batches of batchTokens, the same pieces in order', async () => {
    const got = await batches({ ...SETTINGS, tokensPerSecond: Infinity }, 16);
    expect(got.flatMap((b) => b.deltas)).toEqual(pieces);
    expect(got.map((b) => b.deltas.length)).toEqual(pieces.map((_, i) => i).filter((i) => i % 16 === 0).map((i) => Math.min(16, pieces.length - i)));
  });

  it('paced: each batch holds exactly the tokens due when it is released, on the schedule of one event per token', async () => {
    const rate = 4000;
    const clock = new FakeClock(1);
    const got = await batches({ ...SETTINGS, tokensPerSecond: rate }, 64, clock);
    expect(got.flatMap((b) => b.deltas)).toEqual(pieces);
    let released = 0;
    for (const b of got) {
      released += b.deltas.length;
      // Every token of the batch is due (token i at i * 1000 / rate ms), the next one is not yet.
      expect(b.at).toBeGreaterThanOrEqual((released * 1000) / rate - 1e-9);
      if (released < pieces.length) expect(b.at).toBeLessThan(((released + 1) * 1000) / rate);
    }
    expect(got.length).toBeLessThan(pieces.length / 2);
    // The same clock as one event per token: the rate is unchanged.
    const single = new FakeClock(1);
    await batches({ ...SETTINGS, tokensPerSecond: rate }, 1, single);
    expect(clock.now()).toBe(single.now());
  });

  it('a paced stream slower than the timer still gets one token per batch', async () => {
    const got = await batches({ ...SETTINGS, tokensPerSecond: 100 }, 64);
    expect(got.every((b) => b.deltas.length === 1)).toBe(true);
    expect(got).toHaveLength(pieces.length);
  });
});

// ---------------------------------------------------------------- the run

const servers: LlrServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.services.store.close();
});

function services(steps: ScriptStep[]) {
  const server = new LlrServer({ store: 'memory', logger: pino({ level: 'silent' }), modelSettings: INSTANT_MODEL, policy: scriptPolicy(steps) });
  servers.push(server);
  return server.services;
}

async function startRun(steps: ScriptStep[], sink: EventSink, extra: Record<string, unknown> = {}) {
  const svc = services(steps);
  const info = { connection: 'conn_test', owner: null, authSpan: null };
  const frame = parseClientFrame(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'go', ...extra }));
  if (frame.type !== 'response.create') throw new Error('not a create');
  const { type: _t, ...params } = frame;
  const plan = await longLivedPolicy(svc, info).plan(params, new RunMetrics(svc.clock.now));
  return { svc, run: new ResponseRun(plan, svc, sink) };
}

type Got = ServerEvent[];

/** A sink taking batches (as the WebSocket and SSE sessions give), recording each delta as its event; `hook` may act on a batch first. */
function batchSink(got: Got, hook: (b: DeltaBatch) => void = () => {}): EventSink {
  return Object.assign((e: ServerEvent) => void got.push(e), {
    deltas(b: DeltaBatch) {
      hook(b);
      for (let i = b.sent; i < b.deltas.length; i++) {
        got.push(b.event(i));
        b.sent = i + 1;
      }
    },
  });
}

/** What a client sees, ids aside: each event's type, number and delta or text. */
function shape(got: Got) {
  return got.map((e) => {
    const x = e as { type: string; sequence_number?: number; delta?: string; text?: string };
    return [x.type, x.sequence_number, x.delta ?? x.text ?? null];
  });
}

const LONG = Array.from({ length: 150 }, (_, i) => `word${i}`).join(' ');

describe('a run streaming batches', () => {
  it('sends what one event per token sent: the same events, numbers, deltas and usage', async () => {
    const steps = [{ text: LONG }];
    const batched: Got = [];
    const single: Got = [];
    const a = await startRun(steps, batchSink(batched));
    const b = await startRun(steps, (e) => void single.push(e));
    const [ra, rb] = [await a.run.done, await b.run.done];
    expect(shape(batched)).toEqual(shape(single));
    expect(ra.usage).toEqual(rb.usage);
    expect(batched.filter((e) => e.type === 'response.output_text.delta').length).toBe(tokenPieces(LONG).length);
    expect(a.run.metrics.counters.events_sent).toBe(batched.length);
  });

  it.each([16, 17, 63, 64, 65, 100, 128, tokenPieces(LONG).length - 1, tokenPieces(LONG).length])(
    'max_output_tokens %i ending mid-batch: only the deltas within budget go out, as with one event per token',
    async (budget) => {
      const steps = [{ text: LONG }];
      const batched: Got = [];
      const single: Got = [];
      const a = await startRun(steps, batchSink(batched), { max_output_tokens: budget });
      const b = await startRun(steps, (e) => void single.push(e), { max_output_tokens: budget });
      const [ra, rb] = [await a.run.done, await b.run.done];
      expect(shape(batched)).toEqual(shape(single));
      expect(ra.status).toBe(rb.status);
      expect(ra.incomplete_details).toEqual(rb.incomplete_details);
      expect(ra.usage?.output_tokens).toBe(Math.min(budget, tokenPieces(LONG).length));
      expect(batched.filter((e) => e.type === 'response.output_text.delta').length).toBe(Math.min(budget, tokenPieces(LONG).length));
    },
  );

  it('a stop during a batch ends the stream after it; nothing more streams, numbers stay gapless', async () => {
    const got: Got = [];
    let run!: ResponseRun;
    let batches = 0;
    const started = await startRun([{ text: LONG }], batchSink(got, () => {
      if (++batches === 1) run.stop('cancelled', 'cancelled_by_client');
    }));
    run = started.run;
    const response = await run.done;
    expect(response.status).toBe('cancelled');
    const deltas = got.filter((e) => e.type === 'response.output_text.delta') as Array<{ delta: string }>;
    expect(deltas.length).toBe(64);
    expect(got.map((e) => (e as { sequence_number: number }).sequence_number)).toEqual(got.map((_, i) => i));
    // The message is cut where the stream stopped: its text is what was streamed.
    expect(got.at(-1)?.type).toBe('response.cancelled');
    expect(response.output[0]).toMatchObject({ status: 'incomplete', content: [{ text: deltas.map((d) => d.delta).join('') }] });
  });

  it('a stop from a one-event sink in the middle of a batch ends it at that delta', async () => {
    const got: Got = [];
    let run!: ResponseRun;
    const started = await startRun([{ text: LONG }], (e) => {
      got.push(e);
      if (e.type === 'response.output_text.delta' && e.sequence_number === 9) run.stop('cancelled', 'cancelled_by_client');
    });
    run = started.run;
    const response = await run.done;
    expect(response.status).toBe('cancelled');
    const deltas = got.filter((e) => e.type === 'response.output_text.delta') as Array<{ delta: string }>;
    // response.created, in_progress, output_item.added, content_part.added, then deltas numbered 4..9.
    expect(deltas.length).toBe(6);
    // The message is cut where the stream stopped: its text is what was streamed.
    expect(got.at(-1)?.type).toBe('response.cancelled');
    expect(response.output[0]).toMatchObject({ status: 'incomplete', content: [{ text: deltas.map((d) => d.delta).join('') }] });
  });

  it.each([0, 1, 30, 63, 64])('a send failing after %i deltas of a batch fails the run once, numbers gapless', async (after) => {
    const got: Got = [];
    let failed = 0;
    const sink = batchSink(got, (b) => {
      if (failed++ > 0) return;
      for (let i = 0; i < after; i++) {
        got.push(b.event(i));
        b.sent = i + 1;
      }
      throw new Error('socket broke');
    });
    const { svc, run } = await startRun([{ text: LONG }], sink);
    const response = await run.done;
    await svc.postWork.flush();
    expect(response.status).toBe('failed');
    expect(response.error?.code).toBe('server_error');
    expect(got.filter((e) => e.type === 'response.output_text.delta')).toHaveLength(after);
    expect(got.map((e) => (e as { sequence_number: number }).sequence_number)).toEqual(got.map((_, i) => i));
    expect(got.filter((e) => e.type === 'response.failed')).toHaveLength(1);
    expect(run.metrics.counters.events_unsent).toBe(1);
    expect(run.metrics.counters.events_sent).toBe(got.length);
    // As when one delta's send fails: the delta it failed on counts as output (none past the batch's 64).
    expect(response.usage?.output_tokens).toBe(Math.min(after + 1, 64));
  });

  it('a model yielding single deltas still works with a batch sink', async () => {
    const got: Got = [];
    const server = new LlrServer({
      store: 'memory',
      logger: pino({ level: 'silent' }),
      modelSettings: INSTANT_MODEL,
      model: {
        async *sample(): AsyncGenerator<ModelEvent> {
          yield { type: 'prefill', prompt_tokens: 1, cached_tokens: 0, cache_write_tokens: 0, duration_ms: 0 };
          yield { type: 'message.start' };
          yield { type: 'text.delta', delta: 'a' };
          yield { type: 'text.deltas', deltas: ['b', 'c'] };
          yield { type: 'message.end' };
        },
      },
    });
    servers.push(server);
    const svc = server.services;
    const frame = parseClientFrame(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'go' }));
    if (frame.type !== 'response.create') throw new Error('not a create');
    const { type: _t, ...params } = frame;
    const plan = await longLivedPolicy(svc, { connection: 'c', owner: null, authSpan: null }).plan(params, new RunMetrics(svc.clock.now));
    const response = await new ResponseRun(plan, svc, batchSink(got)).done;
    expect(response.status).toBe('completed');
    expect((got.filter((e) => e.type === 'response.output_text.delta') as Array<{ delta: string }>).map((e) => e.delta)).toEqual(['a', 'b', 'c']);
    expect(response.usage?.output_tokens).toBe(3);
  });
});
