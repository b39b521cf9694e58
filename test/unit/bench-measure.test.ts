/**
 * The bench's pure arithmetic: statistics, what one run's samples turn into
 * (per-call overhead, time to first token, API overhead, model time, floor),
 * span attribution from timing events, summaries per configuration, and the
 * targets' verdicts on small hand-made results.
 */
import { describe, expect, it } from 'vitest';
import { deriveRun } from '../../src/bench/derive.js';
import { targetLineText } from '../../src/bench/format.js';
import { overheadGrowth, summarize } from '../../src/bench/summaries.js';
import { target1, target2, target3, target4 } from '../../src/bench/verdicts.js';
import { attributeSpans, type RunSample, type TurnSample } from '../../src/bench/replay.js';
import type { ModelConfig, PausedPhase, RunRecord, StreamPhase } from '../../src/bench/results.js';
import { median, percentile, summary } from '../../src/bench/stats.js';
import type { ClientProtocol } from '../../src/client/index.js';
import type { TimingEvent } from '../../src/protocol/events.js';

const MODEL_1000: ModelConfig = { tokens_per_second: 1000, ttft_ms: 150, prefill_tokens_per_second: 20_000, hop_ms: 0, hops: 2 };
const INSTANT: ModelConfig = { tokens_per_second: null, ttft_ms: 0, prefill_tokens_per_second: null, hop_ms: 0, hops: 2 };

function turn(call: number, o: Partial<TurnSample> = {}): TurnSample {
  return {
    call,
    user_turn: 0,
    sent_at_ms: call * 300,
    first_event_ms: 1,
    first_output_ms: 200,
    last_event_ms: 290,
    done_ms: 300,
    tool_ms: 0,
    events: 27,
    bytes_out: 100,
    bytes_in: 1000,
    prefill_ms: 160,
    decode_ms: 137,
    server_pipeline_ms: 0.1,
    prompt_tokens: null,
    ...o,
  };
}

function sample(design: ClientProtocol, turns: TurnSample[], o: Partial<RunSample> = {}): RunSample {
  return {
    design,
    connect_ms: 2,
    e2e_ms: turns.reduce((n, t) => n + t.done_ms + t.tool_ms, 0),
    turns,
    responses: turns.length,
    tool_ms: turns.reduce((n, t) => n + t.tool_ms, 0),
    model_ms: turns.reduce((n, t) => n + t.prefill_ms + t.decode_ms, 0),
    counters: { model_calls: turns.length, prompt_tokens: 10_000, cached_tokens: 8_000, output_tokens: 100 * turns.length },
    stage_ms: { validate: 1, render: 2 },
    bytes: { client_sent: 1000, server_sent: 9000 },
    client_cpu_ms: 5,
    ...o,
  };
}

function record(design: ClientProtocol, model: ModelConfig, s: RunSample, rep = 0): RunRecord {
  const derived = deriveRun(s, { model, hiddenTokens: s.turns.map(() => 30), rttMs: 0.1, serverCpuMs: 12 });
  return { ...derived, phase: model.tokens_per_second === null ? 'overhead' : 'grid', design, model, rep, tool_factor: 0, off: null, ok: true };
}

describe('stats', () => {
  it('takes nearest-rank percentiles and the middle of an even list as the median', () => {
    expect(percentile([5, 1, 4, 2, 3], 50)).toBe(3);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 99)).toBe(10);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
    expect(summary([1, 2, 3])).toMatchObject({ n: 3, min: 1, max: 3, mean: 2, p50: 2 });
  });
});

describe('deriveRun', () => {
  it('derives per-call overhead and TTFT, the run’s API overhead, model time and floor', () => {
    const s = sample('ws', [turn(0), turn(1, { tool_ms: 50, done_ms: 310 })]);
    const r = deriveRun(s, { model: MODEL_1000, hiddenTokens: [30, 40], rttMs: 0.5, serverCpuMs: 12 });
    expect(r.turns.map((t) => t.overhead_ms)).toEqual([3, 13]);
    // 200 ms to the first output item, less 30 / 40 hidden tokens at 1 ms each.
    expect(r.turns.map((t) => t.ttft_ms)).toEqual([170, 160]);
    expect(r.ttft_ms_median).toBe(165);
    // API overhead: the measured server spans (validate 1 + render 2); the rest of e2e is the residual, shown apart.
    expect(r.api_overhead_ms).toBeCloseTo(3);
    expect(r.residual_ms).toBeCloseTo(s.e2e_ms - s.model_ms - 50 - 3);
    expect(r.model_excess_ms).toBeCloseTo(s.model_ms - r.model_ms_analytic);
    // The decomposition adds up to e2e exactly.
    expect(r.model_ms_analytic + r.model_excess_ms + r.tool_ms + r.api_overhead_ms + r.residual_ms).toBeCloseTo(s.e2e_ms);
    // 2 × 150 ms + 2000 uncached tokens at 20k/s + 200 output tokens at 1k/s.
    expect(r.model_ms_analytic).toBeCloseTo(300 + 100 + 200);
    expect(r.floor_ms).toBeCloseTo(600 + 2 * 0.5);
    expect(r.server_cpu_ms).toBe(12);
  });

  it('gives the instant model no model time and no hidden decode', () => {
    const r = deriveRun(sample('long-lived', [turn(0)]), { model: INSTANT, hiddenTokens: [500], rttMs: null, serverCpuMs: 0 });
    expect(r.model_ms_analytic).toBe(0);
    expect(r.floor_ms).toBeNull();
    expect(r.turns[0]!.ttft_ms).toBe(200);
  });
});

describe('attributeSpans', () => {
  const timing = (spans: Array<[string, number, number]>, counters: Record<string, number> = {}): TimingEvent => ({
    type: 'llr:timing',
    sequence_number: 0,
    response_id: 'resp_1',
    mode: 'x',
    spans: spans.map(([stage, start_ms, duration_ms]) => ({ stage, start_ms, duration_ms })),
    totals: {},
    counters,
    switches: {},
  });

  it('gives the k-th prefill and decode, and the spans before them, to the k-th model call (long-lived: one response)', () => {
    const turns = [turn(0), turn(1)];
    attributeSpans(
      [timing([['validate', 0, 1], ['render', 1, 2], ['prefill', 3, 150], ['decode', 153, 40], ['paused', 193, 10], ['validate_append', 203, 0.5], ['prefill', 204, 151], ['decode', 355, 41], ['usage', 396, 0.25]])],
      turns,
      'long-lived',
    );
    expect(turns.map((t) => [t.prefill_ms, t.decode_ms, t.server_pipeline_ms, t.prompt_tokens])).toEqual([
      [150, 40, 3, null],
      [151, 41, 0.75, null],
    ]);
  });

  it('reads prompt tokens per call when each response is one call (ws, http)', () => {
    const turns = [turn(0), turn(1)];
    attributeSpans([timing([['prefill', 0, 150], ['decode', 150, 10]], { prompt_tokens: 900 }), timing([['prefill', 0, 150], ['decode', 150, 10]], { prompt_tokens: 1000 })], turns, 'ws');
    expect(turns.map((t) => t.prompt_tokens)).toEqual([900, 1000]);
  });

  it('refuses timings that do not match the model calls', () => {
    expect(() => attributeSpans([timing([['prefill', 0, 1], ['decode', 1, 1]])], [turn(0), turn(1)], 'ws')).toThrow(/1 prefills and 1 decodes for 2 model calls/);
  });
});

describe('summaries and targets', () => {
  const flat = (extra: number) => Array.from({ length: 20 }, (_, i) => turn(i, { done_ms: 300 + (i === 0 ? 10 : 1 + (extra * i) / 19) }));

  it('summarises each design and speed with medians and spread over repetitions', () => {
    const runs = [0, 1, 2].map((rep) => record('ws', MODEL_1000, sample('ws', flat(0).map((t) => ({ ...t, done_ms: t.done_ms + rep }))), rep));
    const [row] = summarize(runs, 'grid');
    expect(row).toMatchObject({ design: 'ws', tokens_per_second: 1000, runs: 3, model_calls: 20 });
    expect(row!.e2e_ms_max - row!.e2e_ms_min).toBeCloseTo(40);
    for (const v of [row!.e2e_ms_median, row!.api_overhead_ms_median, row!.ttft_ms_median, row!.floor_ms_median!]) expect(Number.isFinite(v)).toBe(true);
  });

  it('target 1 holds when like-for-like calls stay flat and fails when they grow', () => {
    const ok = [record('long-lived', INSTANT, sample('long-lived', flat(0.2))), record('ws', INSTANT, sample('ws', flat(0)))];
    const t = target1(ok as never);
    expect(t.holds).toBe(true);
    expect(overheadGrowth(ok as never, 'long-lived')!.ratio).toBeLessThan(1.5);
    const bad = [record('long-lived', INSTANT, sample('long-lived', flat(10))), record('ws', INSTANT, sample('ws', flat(0)))];
    const t2 = target1(bad as never);
    expect(t2.holds).toBe(false);
    expect(targetLineText(t2)).toMatch(/^target 1: .* → does not hold \(.*response\.done/);
  });

  it('target 2 compares the median e2e with the floor at 1000 tokens/s', () => {
    const runs = (['long-lived', 'ws'] as const).map((d) => record(d, MODEL_1000, sample(d, flat(0))));
    const t = target2(summarize(runs, 'grid'), 0.1, runs as never);
    // e2e 310 + 19 × 301 = 6029 ms against a floor of 20 × 150 + 100 + 2000 + 20 × 0.1 = 5102 ms.
    expect(t.holds).toBe(false);
    expect(t.values['long_lived_over_floor']).toBeCloseTo(6029 / 5102 - 1, 3);
    // The speed is a parameter: at 4000 tokens/s there is no such grid row.
    expect(target2(summarize(runs, 'grid'), 0.1, runs as never, 4000)).toMatchObject({ verdict: 'not measured', name: expect.stringMatching(/4,000 tokens\/s/) });
    expect(target2([], null).holds).toBeNull();
  });

  it('target 2 not measured says which design is missing from the grid', () => {
    // `llr bench --designs long-lived,http --target-speed 4000 --speeds 4000`: the grid ran at the speed, without ws.
    const runs = [record('long-lived', MODEL_1000, sample('long-lived', flat(0)))];
    const t = target2(summarize(runs, 'grid'), 0.1, runs as never);
    expect(t.verdict).toBe('not measured');
    expect(t.note).toMatch(/\bws\b/);
    expect(t.note).not.toMatch(/long-lived/);
  });

  it('targets 3 and 4 read their phases', () => {
    const stream: StreamPhase = {
      tokens_per_second: 4000,
      single: { tokens: 4000, deltas: 4000, client_rate: 4030, server_rate: 3995, delta_frame_bytes: 174 },
      concurrent: { streams: 100, tokens_per_stream: 1000, deltas: 100_000, events: 100_900, seconds: 1.5, events_per_second: 66_000, demanded_events_per_second: 400_000, raw_frames: 100_000, raw_seconds: 1.1, raw_frames_per_second: 90_000, frame_bytes: 174 },
    };
    expect(target3(stream).holds).toBe(true);
    expect(target3({ ...stream, single: { ...stream.single, client_rate: 3800 } }).holds).toBe(false);
    expect(target3(null).holds).toBeNull();
    // No delta lost is its own check: the rate alone is not enough.
    expect(target3({ ...stream, single: { ...stream.single, deltas: 3999 } })).toMatchObject({ holds: false, verdict: 'does not hold' });
    const paused: PausedPhase = {
      runs: 1000,
      paused: 1000,
      resumed: 1000,
      prompt_tokens_per_run: 152,
      before: { rss: 1, heapUsed: 1, external: 1 },
      after: { rss: 2, heapUsed: 2, external: 2 },
      gc_forced: true,
      rss_bytes_per_run: 47_000,
      heap_bytes_per_run: 15_000,
      append_to_resume_ms: { n: 1000, p50: 0.3, p99: 4, max: 17 },
      open_ms: 1500,
    };
    // Target 4 has no threshold: it is reported, and a run that did not resume is said so in its note.
    expect(target4(paused)).toMatchObject({ holds: null, verdict: 'reported', figure: expect.stringMatching(/45\.9 KiB RSS/) });
    expect(target4({ ...paused, resumed: 999 }).note).toMatch(/NOT every run paused and resumed/);
    expect(targetLineText(target4(paused))).toMatch(/→ reported$/);
  });
});
