/**
 * The chaos knobs' pure parts (src/engine/faults.ts): the `--chaos` spec
 * grammar and its errors, the seeded decisions (deterministic for a seed,
 * about the asked rate), and which moment of a model call's stream is which
 * point; the run's `drop` hook. No sockets (a server is built, never
 * listens); delays use an instant clock.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Chaos, StreamPoints, chaosDraw, parseChaosSpec, type ChaosPoint, type ChaosRule } from '../../src/engine/faults.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import type { Clock } from '../../src/model/clock.js';
import { ResponseRun, type RunHooks } from '../../src/engine/run.js';
import { longLivedPolicy } from '../../src/modes/long-lived.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { parseClientFrame } from '../../src/protocol/parse.js';

const silent = pino({ level: 'silent' });

/** A clock whose sleeps advance its own time at once. */
function instantClock(): Clock {
  let t = 0;
  return {
    now: () => t,
    sleep: async (ms) => {
      t += ms;
    },
  };
}

describe('parseChaosSpec', () => {
  it('reads every kind at every point, with the defaults', () => {
    expect(parseChaosSpec('error@first-token:0.1')).toEqual({ kind: 'error', point: 'first-token', probability: 0.1, ms: 0 });
    expect(parseChaosSpec('disconnect@mid-stream:0.05')).toEqual({ kind: 'disconnect', point: 'mid-stream', probability: 0.05, ms: 0 });
    expect(parseChaosSpec('stall@pause:0.2:3000')).toEqual({ kind: 'stall', point: 'pause', probability: 0.2, ms: 3000 });
    expect(parseChaosSpec('latency@first-token:1:50')).toEqual({ kind: 'latency', point: 'first-token', probability: 1, ms: 50 });
    expect(parseChaosSpec('error@pause')).toEqual({ kind: 'error', point: 'pause', probability: 1, ms: 0 });
    expect(parseChaosSpec('disconnect@pause:0')).toMatchObject({ probability: 0 });
  });

  it.each([
    ['', 'malformed'],
    ['error', 'malformed'],
    ['error@', 'malformed'],
    ['boom@pause', "unknown kind 'boom'"],
    ['error@end', "unknown point 'end'"],
    ['error@pause:1.5', "probability must be a number from 0 to 1, got '1.5'"],
    ['error@pause:-0.1', 'probability must be a number from 0 to 1'],
    ['error@pause:abc', 'probability must be a number from 0 to 1'],
    ['error@pause:', 'probability must be a number from 0 to 1'],
    ['error@pause:1:10', 'an error takes no duration'],
    ['disconnect@pause:1:10', 'a disconnect takes no duration'],
    ['stall@pause:0.2', 'a stall needs a duration in ms'],
    ['latency@first-token', 'a latency needs a duration in ms'],
    ['stall@pause:1:1.5', 'duration must be an integer number of ms'],
    ['stall@pause:1:-1', 'duration must be an integer number of ms'],
    ['stall@pause:1:99999999999', 'duration must be an integer number of ms from 0 to 2147483647'],
    ['stall@pause:1:10:20', 'malformed'],
  ])('refuses %j with a clear message', (spec, why) => {
    expect(() => parseChaosSpec(spec)).toThrow(why);
    expect(() => parseChaosSpec(spec)).toThrow(`--chaos '${spec}'`);
    expect(() => parseChaosSpec(spec)).toThrow('e.g. error@first-token:0.1');
  });
});

describe('seeded decisions', () => {
  it('chaosDraw is a pure function of (seed, run, rule, occurrence), in [0, 1)', () => {
    const a = Array.from({ length: 50 }, (_, i) => chaosDraw(7, i % 5, i % 3, i));
    const b = Array.from({ length: 50 }, (_, i) => chaosDraw(7, i % 5, i % 3, i));
    expect(a).toEqual(b);
    for (const x of a) expect(x >= 0 && x < 1).toBe(true);
    expect(Array.from({ length: 50 }, (_, i) => chaosDraw(8, i % 5, i % 3, i))).not.toEqual(a);
  });

  it('fires about as often as asked', () => {
    let fired = 0;
    for (let run = 0; run < 10_000; run++) if (chaosDraw(1, run, 0, 0) < 0.1) fired++;
    // Binomial(10000, 0.1): sd 30; 6 sd either way.
    expect(fired).toBeGreaterThan(820);
    expect(fired).toBeLessThan(1180);
  });

  /** Which faults a server with these rules injects over `runs` runs, each with the same points. */
  async function faults(rules: ChaosRule[], seed: number, runs: number, points: ChaosPoint[]) {
    const chaos = new Chaos(rules, seed, instantClock());
    const out: string[] = [];
    for (let r = 0; r < runs; r++) {
      const m = new RunMetrics(() => 0);
      const f = chaos.forRun(m, silent)!;
      for (const p of points) out.push(`${r}:${p}:${(await f.at(p, new AbortController().signal, `resp_${r}`)) ?? '-'}`);
      out.push(`${r}:delay=${m.counters.chaos_delay_ms}:stalls=${m.counters.chaos_stalls}:latency=${m.counters.chaos_latency}:errors=${m.counters.chaos_errors}:disconnects=${m.counters.chaos_disconnects}`);
    }
    return out;
  }

  it('the same seed gives the same faults; another seed other faults', async () => {
    const rules = ['error@first-token:0.3', 'disconnect@mid-stream:0.3', 'stall@pause:0.5:100', 'latency@first-token:0.5:7'].map(parseChaosSpec);
    const points: ChaosPoint[] = ['first-token', 'mid-stream', 'pause', 'first-token', 'mid-stream', 'pause'];
    const a = await faults(rules, 42, 40, points);
    expect(await faults(rules, 42, 40, points)).toEqual(a);
    expect(await faults(rules, 43, 40, points)).not.toEqual(a);
    // Every kind did fire somewhere, and never fired where nothing was configured.
    const joined = a.join(' ');
    expect(joined).toMatch(/first-token:error/);
    expect(joined).toMatch(/mid-stream:disconnect/);
    expect(joined).toMatch(/stalls=[12]/);
    expect(joined).toMatch(/latency=[12]/);
    expect(joined).not.toMatch(/pause:(error|disconnect)/);
  });

  it('rules at one point go in order: delays add up, the first error or disconnect wins', async () => {
    const rules = ['latency@pause:1:5', 'stall@pause:1:20', 'disconnect@pause:1', 'error@pause:1'].map(parseChaosSpec);
    const m = new RunMetrics(() => 0);
    const f = new Chaos(rules, 1, instantClock()).forRun(m, silent)!;
    expect(await f.at('pause', new AbortController().signal, 'resp_x')).toBe('disconnect');
    expect(m.counters).toMatchObject({ chaos_latency: 1, chaos_stalls: 1, chaos_delay_ms: 25, chaos_disconnects: 1, chaos_errors: 0 });
    expect(m.spans.map((s) => s.stage)).toEqual(['chaos_latency', 'chaos_stall']);
  });

  it('probability 0 never fires; no rules means no injector at all', async () => {
    const m = new RunMetrics(() => 0);
    const f = new Chaos([parseChaosSpec('error@first-token:0')], 1, instantClock()).forRun(m, silent)!;
    for (let i = 0; i < 100; i++) expect(await f.at('first-token', new AbortController().signal, 'r')).toBeNull();
    expect(new Chaos([], 1, instantClock()).forRun(m, silent)).toBeNull();
  });

  it('an aborted run is not delayed or failed any more', async () => {
    const m = new RunMetrics(() => 0);
    const f = new Chaos([parseChaosSpec('stall@pause:1:1000'), parseChaosSpec('error@pause:1')], 1, instantClock()).forRun(m, silent)!;
    const ac = new AbortController();
    ac.abort();
    expect(await f.at('pause', ac.signal, 'r')).toBeNull();
    expect(m.counters.chaos_stalls + m.counters.chaos_errors).toBe(0);
  });
});

describe('StreamPoints', () => {
  it('first-token before the first output event, mid-stream before the event after the first token, once each', () => {
    const p = new StreamPoints();
    // message.start, text.delta, text.delta, message.end
    expect([p.next(false), p.next(true), p.next(true), p.next(false)]).toEqual(['first-token', null, 'mid-stream', null]);
  });

  it('a one-token message still has its mid-stream point (before its end); a call counts its argument tokens', () => {
    const msg = new StreamPoints();
    expect([msg.next(false), msg.next(true), msg.next(false)]).toEqual(['first-token', null, 'mid-stream']);
    // reasoning (tokens, no wire event) first, then a call.
    const call = new StreamPoints();
    expect([call.next(true), call.next(false), call.next(true), call.next(false)]).toEqual(['first-token', 'mid-stream', null, null]);
  });
});

describe("the run's drop hook (RunHooks)", () => {
  async function run(chaos: string, hooks: (got: ServerEvent[]) => RunHooks) {
    const server = new LlrServer({ store: 'memory', logger: silent, modelSettings: INSTANT_MODEL, policy: scriptPolicy([{ text: 'hello there friend' }]), chaos: [chaos] });
    const svc = server.services;
    const frame = parseClientFrame(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'go' }));
    if (frame.type !== 'response.create') throw new Error('not a create');
    const { type: _t, ...params } = frame;
    const plan = await longLivedPolicy(svc, { connection: 'conn_t', owner: null, authSpan: null }).plan(params, new RunMetrics(svc.clock.now));
    const got: ServerEvent[] = [];
    const r = new ResponseRun(plan, svc, (e) => got.push(e), hooks(got));
    const response = await r.done;
    await svc.postWork.flush();
    const billed = svc.ledger.countFor(response.id);
    svc.store.close();
    return { response, got, billed, record: svc.records.get(response.id)! };
  }

  it('an injected disconnect calls it once; the run sends nothing after it and ends cancelled, billed once', async () => {
    const atDrop: number[] = [];
    const out = await run('disconnect@mid-stream', (got) => ({ drop: () => void atDrop.push(got.length) }));
    expect(atDrop).toEqual([out.got.length]);
    expect(out.got.map((e) => e.type).filter((t) => t === 'response.output_text.delta')).toHaveLength(1);
    expect(out.response.status).toBe('cancelled');
    expect(out.billed).toBe(1);
    expect(out.record).toMatchObject({ status: 'cancelled', counters: { chaos_disconnects: 1 } });
  });

  it('a drop hook that throws is contained: the run still ends once', async () => {
    const out = await run('disconnect@first-token', () => ({
      drop: () => {
        throw new Error('transport gone');
      },
    }));
    expect(out.response.status).toBe('cancelled');
    expect(out.billed).toBe(1);
    expect(out.record.counters).toMatchObject({ chaos_disconnects: 1, engine_faults: 1 });
  });
});
