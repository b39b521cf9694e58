/**
 * The instant-model phase's account, run by run: with `--instant` the model
 * time the settings call for is zero by construction (no TTFT, infinite
 * prefill and decode rates), so a run's end-to-end time is
 *
 *   e2e = 0 (model) + simulator spans + tools + API spans + residual
 *
 * where the simulator spans are the simulated model's own bookkeeping
 * (prefix-cache hashing, the replay policy: not API work, and no real
 * model's time either), the API spans are the server's measured stages
 * outside the model, emission included, and the residual is what no span
 * explains (loopback, the client, server work outside spans). The overhead
 * the report gives for the run is e2e minus the first three terms, so it is
 * exactly the API spans plus the residual, both shown.
 *
 * The summary tables give each column its own median, which need not add
 * up; this table shows one real run per design (the one with the median
 * end-to-end time), whose terms do. Used by the report; tested against the
 * runs' own fields. Leaves out the grid (a timed model), where the same
 * identity holds with the analytic model time in the first term.
 */
import { CLIENT_PROTOCOLS } from '../client/index.js';
import { okRuns } from './summaries.js';
import type { RunRecord } from './results.js';

export interface InstantSplit {
  design: string;
  /** 1-based repetition of the run shown. */
  rep: number;
  runs: number;
  e2e_ms: number;
  /** Zero by construction with the instant model. */
  model_ms: number;
  simulator_ms: number;
  /** The client's time running the tools (instant tools: its own bookkeeping, which grows under load). */
  tools_ms: number;
  /** e2e − model − simulator − tools: exactly api_ms + residual_ms. */
  overhead_ms: number;
  api_ms: number;
  /** The API spans by stage, largest first. */
  stages: Array<[string, number]>;
  residual_ms: number;
}

/** One run per design of the overhead phase: the median one by e2e (the lower of the two middle runs when even). */
export function instantSplits(runs: readonly RunRecord[]): InstantSplit[] {
  const out: InstantSplit[] = [];
  for (const design of CLIENT_PROTOCOLS) {
    const mine = okRuns(runs, 'overhead')
      .filter((r) => r.design === design)
      .sort((a, b) => a.e2e_ms - b.e2e_ms);
    if (mine.length === 0) continue;
    const r = mine[(mine.length - 1) >> 1]!;
    const stages = Object.entries(r.stage_ms)
      .filter(([k, v]) => k !== 'prefill' && k !== 'decode' && v >= 0.05)
      .sort((a, b) => b[1] - a[1]);
    out.push({
      design,
      rep: r.rep + 1,
      runs: mine.length,
      e2e_ms: r.e2e_ms,
      model_ms: r.model_ms_analytic,
      simulator_ms: r.model_excess_ms,
      tools_ms: r.tool_ms,
      overhead_ms: r.e2e_ms - r.model_ms_analytic - r.model_excess_ms - r.tool_ms,
      api_ms: r.api_overhead_ms,
      stages,
      residual_ms: r.residual_ms,
    });
  }
  return out;
}

const f1 = (x: number) => x.toFixed(1);

/** The report's table: head and rows, every figure to 0.1 ms. */
export function instantSplitTable(runs: readonly RunRecord[]): { title: string; head: string[]; rows: string[][]; note: string } | null {
  const splits = instantSplits(runs);
  if (splits.length === 0) return null;
  return {
    title: 'Instant model: where one run goes (the median run of each design)',
    head: ['design', 'run', 'e2e ms', 'model ms (0 by construction)', 'simulator spans ms', 'tools ms', 'overhead ms', 'API spans ms', 'residual ms', 'API spans by stage, ms'],
    rows: splits.map((s) => [
      s.design,
      `rep ${s.rep} of ${s.runs}`,
      f1(s.e2e_ms),
      f1(s.model_ms),
      f1(s.simulator_ms),
      f1(s.tools_ms),
      f1(s.overhead_ms),
      f1(s.api_ms),
      f1(s.residual_ms),
      s.stages.map(([k, v]) => `${k} ${f1(v)}`).join(', '),
    ]),
    note:
      'Each row is one run, so its terms add up: e2e = model + simulator spans + tools + overhead, and overhead = API spans (the server\'s measured stages outside the model, emission included) + residual (loopback, the client, server work outside any span). The simulator spans are the simulated model\'s own bookkeeping (prefix-cache hashing, the replay policy), counted as neither model time nor API work.',
  };
}
