/**
 * The simulated model's timing and streaming contract, on a fake clock:
 * decode pacing on an absolute schedule, time to first token with the
 * prefix cache, hidden reasoning, determinism, recording and abort.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { autoPolicy, scriptPolicy, ScriptExhaustedError } from '../../src/model/policies.js';
import { PrefixCache } from '../../src/model/prefix-cache.js';
import { EAGER_DIGEST_CHARS, SimulatedModel, YIELD_EVERY_TOKENS } from '../../src/model/simulated.js';
import type { InputMessage } from '../../src/protocol/objects.js';
import { encodeText, tokenPieces } from '../../src/model/tokenizer.js';
import { collect, deltaCount, FakeClock, fnTool, outputOf, request, SETTINGS, StuckClock, user } from './model-fixtures.js';

const TEXT = 'The quick brown fox jumps over the lazy dog while the server streams tokens.';
const N = tokenPieces(TEXT).length;

afterEach(() => {
  vi.restoreAllMocks();
});

describe('decode pacing', () => {
  it('spends N/R seconds of scheduled time on N tokens at R tok/s, one sleep per token when on time', async () => {
    const clock = new FakeClock();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: TEXT }]), clock });
    const events = await collect(model, request({ settings: { ...SETTINGS, tokensPerSecond: 100 } }));

    expect(N).toBeGreaterThan(10);
    expect(deltaCount(events)).toBe(N);
    expect(clock.sleeps).toEqual(Array(N).fill(10));
    expect(clock.now()).toBeCloseTo((N / 100) * 1000, 6);
    expect(outputOf(events)).toEqual([{ type: 'message', text: TEXT }]);
  });

  it('releases tokens that are already late without sleeping, and keeps the average rate', async () => {
    const clock = new FakeClock();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: TEXT }]), clock });
    let deltas = 0;
    for await (const e of model.sample(request(), new AbortController().signal)) {
      // The consumer stalls for 35 ms after the first token: tokens 2–4 (due at 20, 30, 40 ms) are late.
      if (e.type === 'text.delta' && ++deltas === 1) clock.advance(35);
    }
    expect(clock.sleeps.slice(0, 3)).toEqual([10, 5, 10]);
    expect(clock.sleeps).toHaveLength(N - 3);
    expect(clock.now()).toBeCloseTo(N * 10, 6);
  });

  it('holds 4,000 tok/s on a 1 ms timer, each token still its own event', async () => {
    const clock = new FakeClock(1);
    const text = 'word '.repeat(400).trim();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text }]), clock });
    const events = await collect(model, request({ settings: { ...SETTINGS, tokensPerSecond: 4000 } }));
    const n = deltaCount(events);
    expect(n).toBe(tokenPieces(text).length);
    // Ideal is n/4 ms; one timer tick of slack at the end at most.
    expect(clock.now()).toBeGreaterThanOrEqual(n / 4);
    expect(clock.now()).toBeLessThanOrEqual(n / 4 + 1);
    // Most tokens were late after a 1 ms tick, so far fewer sleeps than tokens.
    expect(clock.sleeps.length).toBeLessThan(n / 2);
  });

  it('never sleeps at an infinite rate but gives the event loop a turn every 64 tokens', async () => {
    const clock = new FakeClock();
    const spy = vi.spyOn(globalThis, 'setImmediate');
    const text = 'token '.repeat(300).trim();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text }]), clock });
    const events = await collect(model, request({ settings: { ...SETTINGS, tokensPerSecond: Infinity } }));
    const n = deltaCount(events);
    expect(clock.sleeps).toEqual([]);
    expect(n).toBeGreaterThan(2 * YIELD_EVERY_TOKENS);
    expect(spy.mock.calls.length).toBeGreaterThanOrEqual(Math.floor(n / YIELD_EVERY_TOKENS));
  });

  it('decodes hidden reasoning tokens first, as one event after their decode time', async () => {
    const clock = new FakeClock();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'Hi.', hiddenTokens: 20 }]), clock });
    const events = await collect(model, request());
    expect(events.map((e) => e.type).slice(0, 3)).toEqual(['prefill', 'reasoning', 'message.start']);
    expect(events[1]).toEqual({ type: 'reasoning', tokens: 20 });
    expect(clock.sleeps[0]).toBe(200);
    // The visible tokens continue the same schedule: token 21 is due at 210 ms.
    expect(clock.sleeps[1]).toBe(10);
  });
});

describe('prefill and the prefix cache', () => {
  const prompt = Array.from({ length: 1000 }, (_, i) => i);
  const settings = { tokensPerSecond: Infinity, ttftBaseMs: 50, prefillTokensPerSecond: 10_000 };

  it('waits ttft = base + uncached / prefill rate before the first token', async () => {
    const clock = new FakeClock();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'ok' }]), clock });
    const events = await collect(model, request({ settings, promptTokens: prompt }));
    expect(events[0]).toEqual({ type: 'prefill', prompt_tokens: 1000, cached_tokens: 0, cache_write_tokens: 960, duration_ms: 150 });
    expect(clock.sleeps).toEqual([150]);
  });

  it('serves a repeated prompt from the cache: cached tokens are free, so ttft shrinks', async () => {
    const clock = new FakeClock();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }]), clock });
    await collect(model, request({ settings, promptTokens: prompt }));
    const second = await collect(model, request({ settings, promptTokens: prompt }));
    // 15 full blocks of 64 are cached; the 40 tokens of the partial block are prefilled again.
    expect(second[0]).toEqual({ type: 'prefill', prompt_tokens: 1000, cached_tokens: 960, cache_write_tokens: 0, duration_ms: 54 });
    expect(clock.sleeps).toEqual([150, 54]);
  });

  it('makes prefill free at an infinite prefill rate (only the base remains)', async () => {
    const clock = new FakeClock();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'a' }]), clock });
    const events = await collect(model, request({ settings: { ...settings, prefillTokensPerSecond: Infinity }, promptTokens: prompt }));
    expect(events[0]).toMatchObject({ type: 'prefill', duration_ms: 50 });
  });

  it('can share one cache between models', async () => {
    const cache = new PrefixCache();
    const a = new SimulatedModel({ policy: scriptPolicy([{ text: 'a' }]), clock: new FakeClock(), prefixCache: cache });
    const b = new SimulatedModel({ policy: scriptPolicy([{ text: 'b' }]), clock: new FakeClock(), prefixCache: cache });
    await collect(a, request({ settings, promptTokens: prompt }));
    const events = await collect(b, request({ settings, promptTokens: prompt }));
    expect(events[0]).toMatchObject({ cached_tokens: 960 });
  });
});

describe('determinism and recording', () => {
  const tools = [fnTool('lookup', { type: 'object', properties: { q: { type: 'string' }, n: { type: 'integer', minimum: 3 } }, required: ['q', 'n'] })];

  it('gives identical output for the same seed and requests, including call ids', async () => {
    const run = async (seed: number) => {
      const model = new SimulatedModel({ policy: autoPolicy(), clock: new FakeClock(), seed });
      const a = await collect(model, request({ tools, items: [user('please lookup the value')] }));
      const b = await collect(model, request({ items: [user('Tell me something about caches')] }));
      return [...a, ...b];
    };
    const first = await run(7);
    expect(await run(7)).toEqual(first);
    const call = first.find((e) => e.type === 'call.start');
    expect(call).toMatchObject({ type: 'call.start', name: 'lookup', call_id: expect.stringMatching(/^call_[0-9]{24}$/) });
    const other = await run(8);
    expect(other.find((e) => e.type === 'call.start')).not.toEqual(call);
  });

  it('records the requests it was asked for, by reference, in a ring of recordRequests', async () => {
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'a' }, { text: 'b' }, { text: 'c' }]), clock: new FakeClock(), recordRequests: 2 });
    const r1 = request();
    const r2 = request({ items: [user('second')] });
    const r3 = request({ items: [user('third')] });
    await collect(model, r1);
    await collect(model, r2);
    expect(model.calls).toHaveLength(2);
    expect(model.calls[0]).toBe(r1);
    expect(model.calls[1]).toBe(r2);
    await collect(model, r3);
    expect(model.calls).toEqual([r2, r3]);
    expect(model.callCount).toBe(3);
  });

  it('keeps no request by default', async () => {
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'a' }]), clock: new FakeClock() });
    await collect(model, request());
    expect(model.calls).toEqual([]);
    expect(model.callCount).toBe(1);
  });

  it('streams a scripted call with its call_id and its arguments as token deltas', async () => {
    const model = new SimulatedModel({
      policy: scriptPolicy([{ text: 'Checking.', calls: [{ name: 'get_weather', arguments: { city: 'Paris' }, call_id: 'call_w' }] }]),
      clock: new FakeClock(),
    });
    const events = await collect(model, request());
    expect(outputOf(events)).toEqual([
      { type: 'message', text: 'Checking.' },
      { type: 'function_call', name: 'get_weather', call_id: 'call_w', arguments: '{"city":"Paris"}' },
    ]);
    expect(events.filter((e) => e.type === 'args.delta').length).toBe(tokenPieces('{"city":"Paris"}').length);
    // The call's end reports the token ids of the arguments it streamed (the engine reuses them for the prompt).
    expect(events.at(-1)).toEqual({ type: 'call.end', tokens: encodeText('{"city":"Paris"}') });
  });

  it('fails the call when the script is exhausted, naming the step count', async () => {
    const policy = scriptPolicy([{ text: 'only one' }]);
    const model = new SimulatedModel({ policy, clock: new FakeClock() });
    await collect(model, request());
    expect(policy.remaining()).toBe(0);
    const err = await collect(model, request()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ScriptExhaustedError);
    expect((err as Error).name).toBe('ScriptExhaustedError');
    expect((err as Error).message).toContain('1 step');
  });
});

describe('abort', () => {
  it('ends the stream between tokens with the signal reason', async () => {
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: TEXT }]), clock: new FakeClock() });
    const ac = new AbortController();
    const reason = new Error('client went away');
    const seen: string[] = [];
    const run = (async () => {
      for await (const e of model.sample(request(), ac.signal)) {
        seen.push(e.type);
        if (e.type === 'text.delta') ac.abort(reason);
      }
    })();
    await expect(run).rejects.toBe(reason);
    expect(seen.filter((t) => t === 'text.delta')).toHaveLength(1);
  });

  it('abandons prefill on abort and caches nothing from it', async () => {
    const cache = new PrefixCache();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'x' }]), clock: new StuckClock(), prefixCache: cache });
    const ac = new AbortController();
    const settings = { tokensPerSecond: 100, ttftBaseMs: 10, prefillTokensPerSecond: 1000 };
    const pending = collect(model, request({ settings, promptTokens: Array.from({ length: 256 }, (_, i) => i) }), ac.signal);
    const reason = new Error('cancelled');
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(cache.size).toBe(0);
  });

  it('refuses to start when the signal is already aborted', async () => {
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'x' }]), clock: new FakeClock() });
    const reason = new Error('already');
    await expect(collect(model, request(), AbortSignal.abort(reason))).rejects.toBe(reason);
  });
});

describe('the conversation digest', () => {
  /** A user message past the eager-digest size whose content counts how often it is read. */
  function countedItem(): { item: InputMessage; reads: () => number } {
    let reads = 0;
    const text = 'x'.repeat(EAGER_DIGEST_CHARS + 1);
    const item = { type: 'message', role: 'user' } as InputMessage;
    Object.defineProperty(item, 'content', { enumerable: true, get: () => (reads++, text) });
    return { item, reads: () => reads };
  }

  it('is skipped for a policy that never draws from the rng (script, replay): the model does not read the conversation', async () => {
    const { item, reads } = countedItem();
    const model = new SimulatedModel({ policy: scriptPolicy([{ text: 'ok' }]), clock: new FakeClock() });
    expect(model.policy.random).toBe(false);
    expect(outputOf(await collect(model, request({ items: [item] })))).toEqual([{ type: 'message', text: 'ok' }]);
    expect(reads()).toBe(0);
  });

  it('is computed for a policy that may draw, from the same conversation', async () => {
    const { item, reads } = countedItem();
    const script = scriptPolicy([{ text: 'ok' }]);
    const model = new SimulatedModel({ policy: { name: 'may draw', plan: (req, rng) => script.plan(req, rng) }, clock: new FakeClock() });
    await collect(model, request({ items: [item] }));
    expect(reads()).toBeGreaterThanOrEqual(2); // sized, then digested
  });
});
