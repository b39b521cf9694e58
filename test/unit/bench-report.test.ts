/**
 * The bench report from a small fake Results: the tables in report.md, the
 * SVG charts (well-formed, escaped, no NaN), the HTML page showing them
 * together, and the chart helpers' scales.
 */
import { describe, expect, it } from 'vitest';
import { deriveRun } from '../../src/bench/derive.js';
import { summarize } from '../../src/bench/summaries.js';
import { target1, target2, target3, target4 } from '../../src/bench/verdicts.js';
import type { RunSample, TurnSample } from '../../src/bench/replay.js';
import { buildReport } from '../../src/bench/report.js';
import type { ModelConfig, Results, RunRecord } from '../../src/bench/results.js';
import { esc, groupedBarChart, lineChart, niceScale, stackedBarChart } from '../../src/bench/svg.js';
import type { ClientProtocol } from '../../src/client/index.js';

const DESIGNS: ClientProtocol[] = ['long-lived', 'ws', 'http', 'http-stored'];

function model(tps: number | null): ModelConfig {
  return { tokens_per_second: tps, ttft_ms: tps === null ? 0 : 150, prefill_tokens_per_second: tps === null ? null : 20_000, hop_ms: 0, hops: 2 };
}

function fakeRun(design: ClientProtocol, tps: number | null, rep: number): RunRecord {
  const extra = design.startsWith('http') ? 20 : 1;
  const turns: TurnSample[] = Array.from({ length: 8 }, (_, i) => ({
    call: i,
    user_turn: i < 3 ? 0 : 1,
    sent_at_ms: i * 400,
    first_event_ms: 1,
    first_output_ms: 180,
    last_event_ms: 390,
    done_ms: 300 + extra * (1 + i / 8) + rep,
    tool_ms: 0,
    events: 27,
    bytes_out: 200,
    bytes_in: 3000,
    prefill_ms: tps === null ? 1 : 160,
    decode_ms: tps === null ? 2 : 137,
    server_pipeline_ms: 0.2,
    prompt_tokens: 1000 + i * 100,
  }));
  const s: RunSample = {
    design,
    connect_ms: 1,
    e2e_ms: turns.reduce((n, t) => n + t.done_ms, 0),
    turns,
    responses: design === 'long-lived' ? 2 : 8,
    tool_ms: 0,
    model_ms: turns.reduce((n, t) => n + t.prefill_ms + t.decode_ms, 0),
    counters: { model_calls: 8, prompt_tokens: 12_000, cached_tokens: 10_000, output_tokens: 800, tokens_tokenized: design.startsWith('http') ? 50_000 : 3000 },
    stage_ms: { validate: 1, render: design.startsWith('http') ? 30 : 2, safety: 0.5 },
    bytes: { client_sent: 10_000, server_sent: 40_000 },
    client_cpu_ms: 3,
  };
  const d = deriveRun(s, { model: model(tps), hiddenTokens: turns.map(() => 20), rttMs: 0.1, serverCpuMs: 20 });
  return { ...d, phase: tps === null ? 'overhead' : 'grid', design, model: model(tps), rep, tool_factor: 0, off: null, ok: true };
}

function fakeResults(): Results {
  const runs: RunRecord[] = [];
  for (const tps of [1000, 4000, null]) for (let rep = 0; rep < 3; rep++) for (const d of DESIGNS) runs.push(fakeRun(d, tps, rep));
  runs.push({ phase: 'grid', design: 'ws', model: model(1000), rep: 3, tool_factor: 0, off: null, ok: false, error: 'ws: the run did not finish within 1000 ms' });
  const summary = summarize(runs, 'grid');
  const overheadRuns = runs.filter((r): r is RunRecord & { ok: true } => r.ok && r.phase === 'overhead');
  return {
    schema: 'llr-bench/1',
    status: 'failed',
    error: '1 run(s) and 0 phase(s) failed',
    started_at: '2026-01-01T00:00:00.000Z',
    finished_at: '2026-01-01T00:01:00.000Z',
    machine: { cpus: 2, cpu: 'Test <CPU> & co', memory_gb: 8, node: 'v20.0.0', platform: 'linux' },
    config: { mode: 'quick' },
    workload: { name: 'fake', source: 'made up for a test', grid_model_calls: 8, overhead_model_calls: 8, summary: {} },
    loopback_rtt_ms: { n: 10, p50: 0.1, p99: 0.3 },
    runs,
    summary,
    overhead_summary: summarize(runs, 'overhead'),
    ablations: { baseline: null, rows: [] },
    stream: null,
    paused: null,
    targets: [target1(overheadRuns), target2(summary, 0.1), target3(null), target4(null)],
    phase_errors: [],
  };
}

describe('target 1 without continuation calls (outside attack atk38 F6)', () => {
  it("says the overhead phase ran but its workload has no continuation call, not that the phase did not run", () => {
    const one = (d: ClientProtocol) => {
      const r = fakeRun(d, null, 0) as RunRecord & { ok: true };
      return { ...r, turns: r.turns.slice(0, 1) };
    };
    const t = target1([one('long-lived'), one('ws')] as never);
    expect(t).toMatchObject({ verdict: 'not measured', holds: null });
    expect(t.note).toBe('the overhead phase ran, but its workload has 1 model call and no continuation call (a call after a tool\'s output) to compare over the run');
    expect(target1([]).note).toBe('the overhead phase did not run or failed');
    expect(target1([one('long-lived')] as never).note).toBe('the overhead phase did not run or failed');
  });
});

describe('buildReport', () => {
  const results = fakeResults();
  const report = buildReport(results);

  it('writes a table row per design and speed, the targets and the failures', () => {
    const md = report.markdown;
    expect(md).toContain('## Targets');
    expect(md).toMatch(/- target 1: .*→ holds/);
    expect(md).toMatch(/- target 3: not measured/);
    for (const d of DESIGNS) {
      expect(md).toMatch(new RegExp(`\\| ${d} \\| 1000 tok/s \\|`));
      expect(md).toMatch(new RegExp(`\\| ${d} \\| instant \\|`));
    }
    expect(md).toContain('## Failures');
    expect(md).toContain('did not finish within 1000 ms');
    expect(md).toContain('made up for a test');
  });

  it('draws the charts as well-formed SVG with escaped text and finite coordinates', () => {
    expect(report.charts.map((c) => c.file)).toEqual(['e2e.svg', 'api-overhead.svg', 'turn-overhead.svg', 'stages-instant.svg', 'stages-grid.svg']);
    for (const c of report.charts) {
      expect(c.svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
      expect(c.svg.trim().endsWith('</svg>')).toBe(true);
      expect(c.svg).not.toMatch(/NaN|Infinity|undefined/);
      expect(c.svg.match(/<rect|<path/g)!.length).toBeGreaterThan(4);
    }
    const e2e = report.charts[0]!.svg;
    for (const d of DESIGNS) expect(e2e).toContain(`>${d}</text>`);
    expect(e2e).toContain('>1000 tok/s</text>');
  });

  it('puts the charts and the tables on one HTML page', () => {
    expect(report.html.startsWith('<!doctype html>')).toBe(true);
    expect(report.html.match(/<svg /g)).toHaveLength(report.charts.length);
    expect(report.html).toContain('<table>');
    expect(report.html).toContain('Test &lt;CPU&gt; &amp; co');
  });

  it("lists the workload reader's notes, the rest counted, escaped on the page (atk46 F3: the report said nothing of them)", () => {
    const listed = [
      { line: 7, what: 'a <ghost_snapshot> item', why: 'not part of what the model is sent or says (not replayed)', more: 3 },
      { line: 9, what: '1 part(s) of function_call_output c1', why: 'not text (an image or file): replayed as a marker' },
    ];
    const noted = buildReport({ ...results, workload: { ...results.workload, summary: { notes: { count: 40, listed } } } });
    expect(noted.markdown).toContain('## Workload notes');
    expect(noted.markdown).toContain('- line 7: a <ghost_snapshot> item — not part of what the model is sent or says (not replayed) (and 3 more like it)');
    expect(noted.markdown).toContain('- line 9: 1 part(s) of function_call_output c1 — not text');
    expect(noted.markdown).toContain('… and 35 more: `llr workload inspect` on the workload lists them all');
    expect(noted.html).toContain('<h2>Workload notes</h2>');
    expect(noted.html).toContain('a &lt;ghost_snapshot&gt; item');
    // None: no section (results.json files written before the notes were kept have no `notes` at all).
    expect(report.markdown).not.toContain('Workload notes');
    expect(buildReport({ ...results, workload: { ...results.workload, summary: { notes: { count: 0, listed: [] } } } }).markdown).not.toContain('Workload notes');
  });

  it('survives results with no runs at all (a bench that failed at once)', () => {
    const empty = { ...results, runs: [], summary: [], overhead_summary: [], targets: [] };
    const r = buildReport(empty);
    expect(r.charts).toEqual([]);
    expect(r.markdown).toContain('# llr bench report');
  });
});

describe('svg helpers', () => {
  it('picks round axis maxima', () => {
    expect(niceScale(1834)).toEqual({ max: 2000, step: 500 });
    expect(niceScale(0.9)).toEqual({ max: 1, step: 0.2 });
    expect(niceScale(0)).toEqual({ max: 1, step: 0.2 });
  });

  it('escapes labels', () => {
    expect(esc('<a & "b">')).toBe('&lt;a &amp; &quot;b&quot;&gt;');
    const svg = groupedBarChart({ title: 'x<y', yLabel: 'ms', series: ['a&b'], groups: [{ label: 'g', values: [{ value: 1 }] }] });
    expect(svg).toContain('x&lt;y');
    expect(svg).toContain('a&amp;b');
  });

  it('draws lines and stacks without data as empty charts', () => {
    expect(lineChart({ title: 't', xLabel: 'x', yLabel: 'y', series: [] })).toMatch(/<\/svg>\n$/);
    const stacked = stackedBarChart({ title: 't', yLabel: 'ms', segmentNames: ['a', 'b'], bars: [{ label: 'one', segments: { a: 2, b: -1 } }] });
    expect(stacked.match(/<rect x=/g)).toHaveLength(1 + 2); // one segment (b is skipped) + two legend swatches
  });
});
