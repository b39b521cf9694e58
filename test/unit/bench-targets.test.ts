/**
 * The pure parts of the honest bench: the targets table and its verdicts,
 * the seeded bootstrap interval, the cost profiles, the sweep's gains,
 * paragraph, table and heat map, and the emission total in RunMetrics.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROFILES, PROFILE_NAMES, profileByName, profileKnobs, profileMarkdown } from '../../src/bench/profiles.js';
import { bootstrapMedianCI, median, relativeSpread } from '../../src/bench/stats.js';
import { SWEEP_DESIGNS, gainColour, parseList, rebuildSweep, sweepGains, sweepHeatmap, sweepLoadText, sweepMarkdown, sweepParagraph, sweepSkippedText, type SweepResults, type SweepRow } from '../../src/bench/sweep.js';
import { TARGET_SPECS, passes, spec, targetText, targetsMarkdown, thresholdText, verdictOf } from '../../src/bench/targets.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';

describe('targets table', () => {
  it('drives the verdicts from one threshold per row', () => {
    expect(verdictOf(1, { growth_long_lived: 1.2, growth_ws: 1.5 })).toBe('holds');
    expect(verdictOf(1, { growth_long_lived: 1.51, growth_ws: 1 })).toBe('does not hold');
    expect(verdictOf(1, {})).toBe('not measured');
    expect(verdictOf(2, { floor_long_lived: 2.9, floor_ws: 6.1 })).toBe('does not hold');
    // Target 3: no delta lost AND the rate within 2 %, either way round.
    expect(verdictOf(3, { deltas_lost: 0, rate_deviation: -1.9 })).toBe('holds');
    expect(verdictOf(3, { deltas_lost: 1, rate_deviation: 0 })).toBe('does not hold');
    expect(verdictOf(3, { deltas_lost: 0, rate_deviation: -2.1 })).toBe('does not hold');
    // Target 4 has no threshold: reported, never "holds".
    expect(verdictOf(4, { paused_rss: 46, resume_p99: 4 })).toBe('reported');
  });

  it('writes each threshold once and derives the text from it', () => {
    expect(new Set(TARGET_SPECS.map((s) => s.key)).size).toBe(TARGET_SPECS.length);
    expect(thresholdText(spec('floor_ws'))).toBe('≤ 6 %');
    expect(thresholdText(spec('rate_deviation'))).toBe('±2 %');
    expect(thresholdText(spec('deltas_lost'))).toBe('= 0');
    expect(thresholdText(spec('paused_rss'))).toBe('reported');
    expect(passes(spec('paused_rss'), 10)).toBeNull();
    expect(targetText(2)).toBe('long-lived over the floor ≤ 3 %; ws over the floor ≤ 6 %');
    const md = targetsMarkdown(4000);
    expect(md).toMatch(/above the floor at 4,000 tokens\/s/);
    expect(md.split('\n')).toHaveLength(2 + TARGET_SPECS.length);
  });
});

describe('bootstrap interval of the median', () => {
  const xs = [101, 99, 130, 98, 102, 100, 97, 250, 103];
  it('is deterministic for a seed and contains the median', () => {
    const a = bootstrapMedianCI(xs);
    const b = bootstrapMedianCI(xs);
    expect(a).toEqual(b);
    expect(a.lo).toBeLessThanOrEqual(median(xs));
    expect(a.hi).toBeGreaterThanOrEqual(median(xs));
    // Resampled medians are values of the data (odd n): the interval's ends are data points.
    expect(xs).toContain(a.lo);
    expect(xs).toContain(a.hi);
    // The outlier 250 does not make the median's interval reach it.
    expect(a.hi).toBeLessThan(250);
    expect(bootstrapMedianCI(xs, { seed: 2 })).not.toBe(a);
  });

  it('degrades honestly with few values', () => {
    expect(bootstrapMedianCI([])).toMatchObject({ n: 0 });
    expect(Number.isNaN(bootstrapMedianCI([]).lo)).toBe(true);
    expect(bootstrapMedianCI([7])).toEqual({ lo: 7, hi: 7, n: 1 });
    const three = bootstrapMedianCI([10, 20, 30]);
    expect(three.lo).toBe(10);
    expect(three.hi).toBe(30);
    expect(relativeSpread([90, 100, 110])).toBeCloseTo(0.2);
    expect(Number.isNaN(relativeSpread([1]))).toBe(true);
  });
});

describe('cost profiles', () => {
  it('loopback is today: zero-latency hops; production gives each hop a latency, a count and a source', () => {
    expect(PROFILE_NAMES).toEqual(expect.arrayContaining(['loopback', 'production']));
    expect(profileKnobs(PROFILES['loopback']!)).toEqual({ hopMs: 0, hops: 2, callHopMs: 0, callHops: 0 });
    expect(profileKnobs(PROFILES['production']!)).toEqual({ hopMs: 1, hops: 2, callHopMs: 20, callHops: 1 });
    for (const p of Object.values(PROFILES)) {
      for (const h of p.hops) {
        expect(h.source.length).toBeGreaterThan(20);
        expect(h.latencyMs).toBeGreaterThanOrEqual(0);
      }
    }
    // What is not simulated is listed, with count 0, not silently dropped.
    expect(PROFILES['production']!.hops.find((h) => h.kind === 'none')).toMatchObject({ count: 0 });
    expect(profileMarkdown(PROFILES['production']!)).toMatch(/safety classifier \| per model call/);
  });

  it('refuses an unknown name and route hops of different latencies', () => {
    expect(() => profileByName('cloud')).toThrow(/unknown --profile 'cloud'; known: loopback, production/);
    const mixed = { name: 'x', description: '', hops: [
      { name: 'a', kind: 'route' as const, count: 1, latencyMs: 1, source: 's' },
      { name: 'b', kind: 'route' as const, count: 1, latencyMs: 2, source: 's' },
    ] };
    expect(() => profileKnobs(mixed)).toThrow(/share one latency/);
  });
});

function row(speed: number, hop: number, calls: number, design: SweepRow['design'], e2e: number, ttft: number): SweepRow {
  return { speed, hop_ms: hop, calls, design, runs: 1, e2e_ms_median: e2e, e2e_ms_ci: { lo: e2e, hi: e2e }, ttft_ms_median: ttft };
}

describe('sweep', () => {
  const rows = [
    row(1000, 0, 10, 'http', 1000, 200),
    row(1000, 0, 10, 'ws', 900, 180),
    row(1000, 10, 10, 'http', 2000, 400),
    row(1000, 10, 10, 'ws', 1100, 200),
    row(1000, 10, 10, 'long-lived', 1000, 210),
    // No baseline in this cell: no gain for it.
    row(4000, 0, 10, 'ws', 500, 100),
  ];
  const results: SweepResults = {
    schema: 'llr-bench-sweep/1', command: 'llr bench --sweep', options: { speeds: [1000], hopMs: [0, 10], calls: [10], reps: 1, quick: true, maxDecodeS: 15 },
    profile: 'loopback', hops: 2, call_hops: 0, call_hop_ms: 0, workload: 'w', designs: ['long-lived', 'ws', 'http'], baseline: 'http',
    machine: null, started_at: '', finished_at: null, rows, failures: [], skipped: [],
  };

  it('computes each design’s gain over the baseline per cell', () => {
    const g = sweepGains(rows);
    expect(g).toHaveLength(3);
    expect(g.find((x) => x.design === 'ws' && x.hop_ms === 0)).toMatchObject({ e2e_gain: expect.closeTo(0.1, 9), ttft_gain: expect.closeTo(0.1, 9) });
    expect(g.find((x) => x.design === 'ws' && x.hop_ms === 10)!.e2e_gain).toBeCloseTo(0.45);
    expect(g.find((x) => x.design === 'long-lived')!.e2e_gain).toBeCloseTo(0.5);
    expect(SWEEP_DESIGNS).toEqual(expect.arrayContaining(['long-lived', 'ws', 'http']));
    expect(SWEEP_DESIGNS).not.toContain('http-stored');
  });

  it('says from the data where the gain reaches 40 % and TTFT 45 %, and where not', () => {
    const p = sweepParagraph(sweepGains(rows));
    expect(p).toMatch(/ws reaches 40\.0 % faster end to end in 1 of 2 cells \(1,000 tok\/s, 10 ms\/hop, 10 calls; best 45\.0 %\) and not in the other 1 \(worst 10\.0 % at 1,000 tok\/s, 0 ms\/hop, 10 calls\)/);
    expect(p).toMatch(/ws.*time to first token is 45\.0 % or more faster in 1 of 2 cells/);
    expect(p).toMatch(/long-lived reaches 40\.0 %.*time to first token is 45\.0 % or more faster in 1 of 1/);
    const never = sweepParagraph(sweepGains([row(65, 0, 6, 'http', 100, 10), row(65, 0, 6, 'ws', 98, 9.9)]));
    expect(never).toMatch(/ws never reaches 40\.0 % faster end to end over http in the 1 cells measured: its best is 2\.0 %/);
    expect(never).toMatch(/never 45\.0 % faster \(best 1\.0 %/);
    expect(sweepParagraph([])).toMatch(/says nothing/);
  });

  it('says so when every cell reaches the figure', () => {
    const all = sweepParagraph(sweepGains([row(4000, 0, 66, 'http', 100, 10), row(4000, 0, 66, 'ws', 50, 5), row(4000, 1, 66, 'http', 100, 10), row(4000, 1, 66, 'ws', 55, 5)]));
    expect(all).toMatch(/^ws reaches 40\.0 % faster end to end over http in all 2 cells measured: its best is 50\.0 % \(4,000 tok\/s, 0 ms\/hop, 66 calls\), its worst 45\.0 % \(4,000 tok\/s, 1 ms\/hop, 66 calls\)/);
  });

  it('shows the load each cell ran under, and rebuilds it from the cells of an older sweep.json', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llr-sweep-'));
    try {
      const old: SweepResults = { ...results, machine: { cpus: 2 }, rows: [row(1000, 0, 10, 'http', 1000, 200), row(1000, 0, 10, 'ws', 900, 180)] };
      writeFileSync(join(dir, 'sweep.json'), JSON.stringify(old));
      expect(sweepMarkdown(old)).not.toMatch(/\| load \||load average/);
      mkdirSync(join(dir, 'cell-1000-0-10'));
      const cell = { machine: { loadavg: [11.5, 9, 8] }, summary: [{ design: 'http', server_cpu_ms_median: 4700 }, { design: 'ws', server_cpu_ms_median: 900 }] };
      writeFileSync(join(dir, 'cell-1000-0-10', 'results.json'), JSON.stringify(cell));
      const rebuilt = rebuildSweep(dir);
      expect(rebuilt.rows.map((r) => [r.design, r.load_1m, r.server_cpu_ms])).toEqual([['http', 11.5, 4700], ['ws', 11.5, 900]]);
      const md = readFileSync(join(dir, 'sweep.md'), 'utf8');
      expect(md).toContain('| model | hop ms | calls | load | http e2e ms | long-lived e2e gain |');
      expect(md).toMatch(/\| 1,000 tok\/s \| 0 \| 10 \| 11\.5 \| 1,000 \|/);
      expect(md).toMatch(/on 2 CPUs; above the CPU count other work competed/);
      expect(readFileSync(join(dir, 'sweep-ws.svg'), 'utf8')).toContain('load average 11.5–11.5 on 2 CPUs');
      expect(sweepLoadText(rebuilt)).toBe(
        'Every cell started with a load average above the 2 CPUs (11.5–11.5 over the cells measured): other work competed for the CPU, which slows http (the most CPU work per run) more than the other designs, so these gains are larger than the same cells give on an idle machine.',
      );
      expect(md).toContain(sweepLoadText(rebuilt));
      expect(sweepLoadText({ ...rebuilt, rows: rebuilt.rows.map((r) => ({ ...r, load_1m: 0.5 })) })).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the cells it did not run beside the paragraph', () => {
    expect(sweepSkippedText([], 15)).toBe('');
    const text = sweepSkippedText([{ cell: '65 tok/s, 0 ms/hop, 66 calls', reason: 'decode alone would take 140 s per run (over --sweep-max-decode-s 15)' }], 15);
    expect(text).toBe(
      'Not run (1 cell, decode alone over --sweep-max-decode-s 15 s per run): 65 tok/s, 0 ms/hop, 66 calls (decode alone would take 140 s per run). There the same API work is spread over a longer run, so the gain is expected to be smaller than in the same cells at a faster model; the sweep does not measure it.',
    );
  });

  it('writes a table and a heat map per design', () => {
    const md = sweepMarkdown(results);
    expect(md.split('\n')[0]).toBe('| model | hop ms | calls | http e2e ms | long-lived e2e gain | long-lived TTFT gain | ws e2e gain | ws TTFT gain |');
    expect(md).toMatch(/\| 1,000 tok\/s \| 10 \| 10 \| 2,000 \| 50\.0 % \| 47\.5 % \| 45\.0 % \| 50\.0 % \|/);
    const svg = sweepHeatmap(results, 'ws');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('45% (50%)');
    expect(svg).toContain('10% (10%)');
    expect(gainColour(0.4)).toBe('#2f9e44');
    expect(gainColour(0)).toBe('#ffffff');
    expect(gainColour(NaN)).toBe('#eeeeee');
    expect(() => parseList('1,x', 'sweep-hops', 0)).toThrow(/--sweep-hops/);
    expect(parseList('0, 1,2', 'sweep-hops', 0)).toEqual([0, 1, 2]);
  });
});

describe('emission accounting', () => {
  it('accumulates a total and a count, reported as the emit total, without a span per event', () => {
    let t = 0;
    const m = new RunMetrics(() => t);
    m.emitted(0.25, 3);
    m.emitted(0.5, 1);
    t = 5;
    m.span('decode', 1, 4);
    expect(m.spans).toHaveLength(1);
    expect(m.totals()).toEqual({ decode: 3, emit: 0.75 });
    expect(m.emitCount).toBe(4);
    expect(new RunMetrics(() => 0).totals()).toEqual({});
  });
});

describe('llr bench flags for profiles, targets and the sweep', async () => {
  const { parseBenchArgs } = await import('../../src/bench/command.js');
  const syn = ['--synthetic', '3,200,5'];

  it('takes the hops from the profile, and explicit flags over it', () => {
    expect(parseBenchArgs(syn).config).toMatchObject({ profile: 'loopback', hopMs: 0, hops: 2, callHopMs: 0, callHops: 0, targetSpeed: 1000 });
    expect(parseBenchArgs([...syn, '--profile', 'production']).config).toMatchObject({ profile: 'production', hopMs: 1, hops: 2, callHopMs: 20, callHops: 1 });
    expect(parseBenchArgs([...syn, '--profile', 'production', '--hop-ms', '3', '--call-hops', '0']).config).toMatchObject({ hopMs: 3, callHops: 0, callHopMs: 20 });
    expect(parseBenchArgs([...syn, '--target-speed', '4000']).config.targetSpeed).toBe(4000);
    expect(() => parseBenchArgs([...syn, '--profile', 'nope'])).toThrow(/unknown --profile 'nope'/);
  });

  it('reads the sweep and its quick form', () => {
    expect(parseBenchArgs(syn).sweep).toBeNull();
    const quick = parseBenchArgs([...syn, '--sweep', '--quick']);
    expect(quick.sweep).toMatchObject({ speeds: [1000, 4000], hopMs: [0, 10], calls: [3, 6], reps: 1, quick: true });
    expect(quick.config.designs).toEqual([...SWEEP_DESIGNS]);
    const full = parseBenchArgs([...syn, '--sweep', '--sweep-hops', '0,5', '--sweep-calls', '4', '--reps', '2', '--designs', 'ws,http']);
    expect(full.sweep).toMatchObject({ speeds: [65, 1000, 4000], hopMs: [0, 5], calls: [4], reps: 2, quick: false, maxDecodeS: 15 });
    expect(full.config.designs).toEqual(['ws', 'http']);
    expect(() => parseBenchArgs(['--sweep', '--scaling', '10,20'])).toThrow(/--sweep and --scaling exclude each other/);
  });

  it('estimates a cell’s decode from the workload’s recorded output tokens (the skip rule)', async () => {
    const { outputTokens } = await import('../../src/bench/sweep.js');
    const { syntheticWorkload } = await import('../../src/workload/synthetic.js');
    const w = syntheticWorkload({ turns: 4, toolOutputBytes: 10, outputTokensPerTurn: 30, seed: 1 });
    expect(outputTokens(w, 2)).toBe(60);
    // The final answer takes more than 30 tokens: it is given (and decodes) what it takes.
    const { visibleTokens } = await import('../../src/model/policies.js');
    const answer = Math.max(30, visibleTokens(w.userTurns[0]!.modelTurns.at(-1)!.output));
    expect(answer).toBeGreaterThan(30);
    expect(outputTokens(w, 99)).toBe(90 + answer);
  });
});
