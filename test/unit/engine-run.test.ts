/**
 * The run's guarantees, driven without sockets: a scripted model (or a model
 * that throws), a sink that throws at a chosen event, and failing records,
 * billing and store. Whatever throws, a run ends exactly once, `done`
 * resolves, usage is billed once, the record is final and no deferred is
 * left pending; two calls sharing a call_id fail the run instead of hanging
 * it; a stored response is in the store before its terminal event.
 */
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ResponseRun, type EventSink } from '../../src/engine/run.js';
import { PauseRegistry, RunClosedError } from '../../src/engine/pause.js';
import type { Switches } from '../../src/engine/services.js';
import { longLivedPolicy } from '../../src/modes/long-lived.js';
import { wsModePolicy } from '../../src/modes/ws.js';
import { scriptPolicy, type ScriptStep } from '../../src/model/policies.js';
import type { Model, ModelEvent } from '../../src/model/types.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { parseClientFrame } from '../../src/protocol/parse.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { WireError } from '../../src/protocol/errors.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';

const servers: LlrServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.services.store.close();
});

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };

function services(opts: { steps?: ScriptStep[]; model?: Model; switches?: Partial<Switches>; store?: string } = {}) {
  const server = new LlrServer({
    store: opts.store ?? 'memory',
    logger: pino({ level: 'silent' }),
    modelSettings: INSTANT_MODEL,
    ...(opts.model ? { model: opts.model } : { policy: scriptPolicy(opts.steps ?? [{ text: 'hello there' }]) }),
    ...(opts.switches ? { switches: opts.switches } : {}),
  });
  servers.push(server);
  return server.services;
}

type Svc = ReturnType<typeof services>;

async function startRun(svc: Svc, sink: EventSink, extra: Record<string, unknown> = {}, protocol: 'long-lived' | 'ws' = 'long-lived') {
  const info = { connection: 'conn_test', owner: null, authSpan: null };
  const policy = protocol === 'long-lived' ? longLivedPolicy(svc, info) : wsModePolicy(svc, info);
  const frame = parseClientFrame(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], llr: { timing: true }, ...extra }));
  if (frame.type !== 'response.create') throw new Error('not a create');
  const { type: _t, ...params } = frame;
  const plan = await policy.plan(params, new RunMetrics(svc.clock.now));
  return new ResponseRun(plan, svc, sink);
}

/** A sink that records what it took and throws on the first event of `type`. */
function throwingSink(type: string | null) {
  const got: ServerEvent[] = [];
  let thrown = false;
  const sink: EventSink = (e) => {
    if (!thrown && e.type === type) {
      thrown = true;
      throw new RangeError('Maximum call stack size exceeded');
    }
    got.push(e);
  };
  return { got, sink, thrown: () => thrown };
}

const TERMINALS = ['response.completed', 'response.failed', 'response.incomplete', 'response.cancelled'];

/** What every run must satisfy however it ended. */
async function expectEndedOnce(svc: Svc, run: ResponseRun, got: ServerEvent[]) {
  const response = await run.done;
  await svc.postWork.flush();
  expect(run.ended).toBe(true);
  expect(run.pendingCalls()).toEqual([]);
  expect(response.status).not.toBe('in_progress');
  expect(svc.ledger.countFor(run.id)).toBe(1);
  const rec = svc.records.get(run.id)!;
  expect(rec.status).toBe(response.status);
  expect(rec.ended_at).not.toBeNull();
  // Gapless: what the client received is numbered 0..n-1.
  expect(got.map((e) => (e as { sequence_number?: number }).sequence_number)).toEqual(got.map((_, i) => i));
  expect(got.filter((e) => TERMINALS.includes(e.type)).length).toBeLessThanOrEqual(1);
  return response;
}

describe('a run ends exactly once whatever throws', () => {
  it.each(['response.created', 'response.in_progress', 'response.output_item.added', 'response.output_text.delta', 'response.output_item.done'])(
    'a sink throwing at %s fails the run once with a server_error, billed once',
    async (type) => {
      const svc = services();
      const { got, sink, thrown } = throwingSink(type);
      const run = await startRun(svc, sink);
      const response = await expectEndedOnce(svc, run, got);
      expect(thrown()).toBe(true);
      expect(response.status).toBe('failed');
      expect(response.error?.code).toBe('server_error');
      const err = got.find((e) => e.type === 'error');
      expect(err && err.type === 'error' && err.error.code).toBe('server_error');
      expect(got.at(-2)?.type).toBe('response.failed');
      expect(got.at(-1)?.type).toBe('llr:timing');
      expect(svc.records.get(run.id)!.counters['events_unsent']).toBeGreaterThanOrEqual(1);
    },
  );

  it('a sink throwing at the pause (response.done) ends the run instead of leaving it paused', async () => {
    const svc = services({ steps: [{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }] });
    const { got, sink } = throwingSink('response.done');
    const run = await startRun(svc, sink);
    const response = await expectEndedOnce(svc, run, got);
    expect(response.status).toBe('failed');
    expect(run.paused).toBe(false);
  });

  it('a sink throwing at the terminal event still ends the run once; the client gets an error event instead', async () => {
    const svc = services();
    const { got, sink } = throwingSink('response.completed');
    const run = await startRun(svc, sink);
    const response = await expectEndedOnce(svc, run, got);
    expect(response.status).toBe('completed');
    expect(got.filter((e) => TERMINALS.includes(e.type))).toEqual([]);
    const last = got.filter((e) => e.type === 'error');
    expect(last).toHaveLength(1);
  });

  it('a sink throwing at llr:timing changes nothing else', async () => {
    const svc = services();
    const { got, sink } = throwingSink('llr:timing');
    const run = await startRun(svc, sink);
    const response = await expectEndedOnce(svc, run, got);
    expect(response.status).toBe('completed');
    expect(got.at(-1)?.type).toBe('response.completed');
  });

  it('a sink that always throws: done still resolves, failed, billed once, record final', async () => {
    const svc = services();
    const run = await startRun(svc, () => {
      throw new RangeError('Maximum call stack size exceeded');
    });
    const response = await expectEndedOnce(svc, run, []);
    expect(response.status).toBe('failed');
  });

  it('a model that throws mid-stream fails the run with a server_error, billed once', async () => {
    const model: Model = {
      async *sample(): AsyncGenerator<ModelEvent> {
        yield { type: 'prefill', prompt_tokens: 3, cached_tokens: 0, cache_write_tokens: 0, duration_ms: 0 };
        yield { type: 'message.start' };
        yield { type: 'text.delta', delta: 'hel' };
        throw new Error('model blew up');
      },
    };
    const svc = services({ model });
    const { got, sink } = throwingSink(null);
    const run = await startRun(svc, sink);
    const response = await expectEndedOnce(svc, run, got);
    expect(response).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
    expect((response.output[0] as { status?: string }).status).toBe('incomplete');
    expect(response.usage).toMatchObject({ input_tokens: 3, output_tokens: 1 });
  });

  it('run records that throw are contained: the run completes and is billed once', async () => {
    const svc = services();
    svc.records.upsert = () => {
      throw new Error('records broken');
    };
    const { got, sink } = throwingSink(null);
    const run = await startRun(svc, sink);
    const response = await run.done;
    await svc.postWork.flush();
    expect(response.status).toBe('completed');
    expect(got.at(-2)?.type).toBe('response.completed');
    expect(svc.ledger.countFor(run.id)).toBe(1);
  });

  it('billing that throws loses neither the terminal event nor the record', async () => {
    const svc = services();
    svc.ledger.record = () => {
      throw new Error('ledger broken');
    };
    const { got, sink } = throwingSink(null);
    const run = await startRun(svc, sink);
    const response = await run.done;
    await svc.postWork.flush();
    expect(response.status).toBe('completed');
    expect(got.some((e) => e.type === 'response.completed')).toBe(true);
    const rec = svc.records.get(run.id)!;
    expect(rec).toMatchObject({ status: 'completed', post_done: false });
    expect(rec.counters['post_inference_failed']).toBe(1);
  });
});

describe('duplicate call_ids', () => {
  it('the registry refuses a duplicate before registering anything, and close() settles every deferred', async () => {
    const reg = new PauseRegistry(8);
    expect(() => reg.wait(['a', 'b', 'a'])).toThrow(WireError);
    expect(reg.size).toBe(0);
    const first = reg.wait(['a']);
    expect(() => reg.wait(['a'])).toThrowError(/call_id 'a'/);
    reg.close('test');
    await expect(first).rejects.toBeInstanceOf(RunClosedError);
    await expect(reg.wait(['c'])).rejects.toBeInstanceOf(RunClosedError);
  });

  it('stop() ends a pause even when the registry would leave its deferred pending', async () => {
    const svc = services({ steps: [{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'never' }] });
    let paused!: () => void;
    const pausedNow = new Promise<void>((resolve) => (paused = resolve));
    const got: ServerEvent[] = [];
    const run = await startRun(svc, (e) => {
      got.push(e);
      if (e.type === 'response.done') paused();
    });
    await pausedNow;
    // A registry that lost track of its deferred (the old duplicate-id bug): close() settles nothing.
    (run as unknown as { pauses: PauseRegistry }).pauses.close = () => {};
    run.stop('cancelled', 'cancelled_by_client');
    const response = await expectEndedOnce(svc, run, got);
    expect(response.status).toBe('cancelled');
  });

  it.each(['long-lived', 'ws'] as const)('%s: a model turn with two calls sharing a call_id fails the run once', async (protocol) => {
    const dup = { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_x' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_x' }] };
    const svc = services({ steps: [dup, { text: 'never' }] });
    const { got, sink } = throwingSink(null);
    const run = await startRun(svc, sink, {}, protocol);
    const response = await expectEndedOnce(svc, run, got);
    expect(response).toMatchObject({ status: 'failed', error: { code: 'server_error' } }); // the spec's closed enum; the precise code is the error event's
    const err = got.find((e) => e.type === 'error');
    expect(err && err.type === 'error' && err.error).toMatchObject({ code: 'duplicate_call_id', type: 'server_error' });
  });
});

describe('the model\'s output leaves before the post-inference work', () => {
  it.each(['long-lived', 'ws'] as const)('%s: the sink is flushed after the last output event and before the store write and the terminal event', async (protocol) => {
    const svc = services();
    const order: string[] = [];
    const sink: EventSink = Object.assign((e: ServerEvent) => void order.push(e.type), { flush: () => void order.push('flush') });
    const put = svc.store.put.bind(svc.store);
    svc.store.put = (rec) => {
      order.push('store');
      put(rec);
    };
    const run = await startRun(svc, sink, { store: true }, protocol);
    await run.done;
    const at = (x: string) => order.indexOf(x);
    expect(order.filter((x) => x === 'flush')).toHaveLength(1);
    expect(at('flush')).toBeGreaterThan(order.lastIndexOf('response.output_item.done'));
    expect(at('flush')).toBeLessThan(at('store'));
    expect(at('store')).toBeLessThan(at('response.completed'));
  });

  it('a flush that throws is contained: the run still ends once with its terminal event', async () => {
    const svc = services();
    const got: string[] = [];
    const sink: EventSink = Object.assign((e: ServerEvent) => void got.push(e.type), {
      flush: () => {
        throw new Error('socket gone');
      },
    });
    const run = await startRun(svc, sink);
    const r = await run.done;
    expect(r.status).toBe('completed');
    expect(got.filter((t) => t === 'response.completed')).toHaveLength(1);
  });
});

describe('durability: a stored response is in the store before its terminal event', () => {
  it.each(['long-lived', 'ws'] as const)('%s, default switches: the store holds it when the sink sees response.completed', async (protocol) => {
    const svc = services();
    let storedAtTerminal: string | undefined;
    const run = await startRun(
      svc,
      (e) => {
        if (e.type === 'response.completed') storedAtTerminal = svc.store.get(e.response.id, null)?.response.status;
      },
      { store: true },
      protocol,
    );
    await run.done;
    expect(storedAtTerminal).toBe('completed');
    // Billing may stay overlapped: it is not done yet when the terminal event goes out.
    expect(svc.ledger.countFor(run.id)).toBe(0);
    await svc.postWork.flush();
    expect(svc.ledger.countFor(run.id)).toBe(1);
    expect(svc.records.get(run.id)).toMatchObject({ post_deferred: true, post_done: true });
  });

  it('overlap_persist on: the write moves after the terminal event (the documented trade-off)', async () => {
    const svc = services({ switches: { overlap_persist: true } });
    let storedAtTerminal: unknown = 'unset';
    const run = await startRun(
      svc,
      (e) => {
        if (e.type === 'response.completed') storedAtTerminal = svc.store.get(e.response.id, null);
      },
      { store: true },
    );
    await run.done;
    expect(storedAtTerminal).toBeUndefined();
    await svc.postWork.flush();
    expect(svc.store.get(run.id, null)?.response.status).toBe('completed');
  });

  /** What each of the store's puts was handed as its prepared record (the store still writes it). */
  function preparedPuts(store: ReturnType<typeof services>['store']): unknown[] {
    const put = store.put.bind(store);
    const given: unknown[] = [];
    store.put = (rec, prepared) => {
      given.push(prepared);
      put(rec, prepared);
    };
    return given;
  }

  // Past NATIVE_TEXT_CHARS (256 K): the SQLite store serialises the record in slices before the write (`prepare`).
  const LONG = { store: true, instructions: `${'\ud800'.repeat(200_000)}${'x'.repeat(100_000)}` };

  it.each(['long-lived', 'ws'] as const)('%s, a long record on SQLite (made in slices first): stored as the terminal event shows it when the sink sees it', async (protocol) => {
    const svc = services({ store: ':memory:' });
    const given = preparedPuts(svc.store);
    let atTerminal: { stored: unknown; event: unknown } | undefined;
    const run = await startRun(
      svc,
      (e) => {
        if (e.type === 'response.completed') atTerminal = { stored: svc.store.get(e.response.id, null)?.response, event: e.response };
      },
      LONG,
      protocol,
    );
    await run.done;
    expect(given).toHaveLength(1);
    expect(given[0]).toBeDefined();
    expect(atTerminal!.stored).toEqual(atTerminal!.event);
    expect(JSON.stringify(atTerminal!.stored) === JSON.stringify(run.response)).toBe(true);
    // Timed as the write it is part of.
    expect(run.metrics.spans.filter((sp) => sp.stage === 'persist')).toHaveLength(2);
  });

  it('a long record of a response cut short (max_output_tokens): stored as it ended, its unfinished message incomplete', async () => {
    const svc = services({ store: ':memory:', steps: [{ text: 'word '.repeat(200) }] });
    let atTerminal: { stored: unknown; event: unknown } | undefined;
    const run = await startRun(
      svc,
      (e) => {
        if (e.type === 'response.incomplete') atTerminal = { stored: svc.store.get(e.response.id, null)?.response, event: e.response };
      },
      { ...LONG, max_output_tokens: 16 },
    );
    const r = await run.done;
    expect(r).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [{ type: 'message', status: 'incomplete' }] });
    expect(atTerminal!.stored).toEqual(atTerminal!.event);
  });

  it('overlap_persist on, a long record on SQLite: made in slices after the terminal event, then written', async () => {
    const svc = services({ store: ':memory:', switches: { overlap_persist: true } });
    const given = preparedPuts(svc.store);
    let storedAtTerminal: unknown = 'unset';
    const run = await startRun(
      svc,
      (e) => {
        if (e.type === 'response.completed') storedAtTerminal = svc.store.get(e.response.id, null);
      },
      LONG,
    );
    await run.done;
    expect(storedAtTerminal).toBeUndefined();
    await svc.postWork.flush();
    expect(given).toHaveLength(1);
    expect(given[0]).toBeDefined();
    expect(JSON.stringify(svc.store.get(run.id, null)?.response) === JSON.stringify(run.response)).toBe(true);
    expect(svc.records.get(run.id)).toMatchObject({ post_deferred: true, post_done: true });
  });

  it('a store whose put throws: response.failed with a server_error, not stored, billed once, never post_done', async () => {
    const svc = services();
    svc.store.put = () => {
      throw new Error('SQLITE_FULL: database or disk is full');
    };
    const { got, sink } = throwingSink(null);
    const run = await startRun(svc, sink, { store: true });
    const response = await expectEndedOnce(svc, run, got);
    expect(response).toMatchObject({ status: 'failed', completed_at: null, error: { code: 'server_error' } });
    expect(got.some((e) => e.type === 'response.completed')).toBe(false);
    expect(got.map((e) => e.type).slice(-3)).toEqual(['error', 'response.failed', 'llr:timing']);
    expect(svc.records.get(run.id)).toMatchObject({ status: 'failed', post_done: false });
  });
});
