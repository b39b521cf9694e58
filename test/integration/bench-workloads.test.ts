/**
 * `llr bench --quick --workload X` runs to the end on every kind of workload
 * the reader accepts: each fixture in test/fixtures/workloads/ (Codex
 * rollouts of every variant docs/benchmarks.md lists, and a hand-written
 * neutral-format file), through the built CLI, in a reduced configuration of
 * the quick form — one speed, one repetition, a short TTFT — over the phases
 * that replay the workload: grid and overhead for every fixture, and the
 * ablations (ws with each switch off, six servers: the slow part) for the
 * two whose conversations take turns the switches could trip on — a
 * compaction that starts a new conversation, and aborted calls answered in
 * the next turn's input. The stream and paused phases replay workloads the
 * bench generates itself, the same for any `--workload`; bench-run.test.ts
 * covers the CLI around them.
 *
 * "Sensible numbers", checked against what the workload itself says: every
 * run ends `ok` with the model calls and output tokens the workload has;
 * the grid runs take at least the model time the settings call for; with the
 * instant model the analytic model time is zero and the run splits exactly
 * into the simulator's spans, the API's measured spans and the residual.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Results } from '../../src/bench/results.js';
import { visibleTokens } from '../../src/model/policies.js';
import { loadWorkloadFile } from '../../src/workload/load.js';
import { flatModelTurns, modelCallCount } from '../../src/workload/replayable.js';
import { buildDist, CLI, ROOT } from '../helpers/build.js';

const run = promisify(execFile);
const FIXTURES = join(ROOT, 'test', 'fixtures', 'workloads');
const FILES = readdirSync(FIXTURES).filter((f) => f.endsWith('.jsonl') || f.endsWith('.json')).sort();
/** Fixtures that also run the ablations (see the header). */
const ABLATED = ['rollout-compacted.jsonl', 'rollout-aborted.jsonl'];
const dir = mkdtempSync(join(tmpdir(), 'llr-bench-workloads-'));

beforeAll(async () => {
  await buildDist();
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('llr bench --quick --workload runs to the end on every fixture', () => {
  it('covers a neutral-format file and Codex rollouts', () => {
    expect(FILES).toContain('other-agent.json');
    expect(FILES.filter((f) => f.startsWith('rollout-')).length).toBeGreaterThanOrEqual(6);
    for (const f of ABLATED) expect(FILES).toContain(f);
  });

  for (const file of FILES) {
    const ablations = ABLATED.includes(file);
    it(`${file}${ablations ? ' (with ablations)' : ''}`, async () => {
      const out = join(dir, file.replace(/\W/g, '_'));
      const phases = ablations ? 'grid,overhead,ablations' : 'grid,overhead';
      const args = ['bench', '--quick', '--workload', join(FIXTURES, file), '--speeds', '4000', '--target-speed', '4000', '--reps', '1', '--ttft-ms', '20', '--phases', phases, '--out', out];
      const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { timeout: 100_000 }).catch((e: { stdout: string; stderr: string; message: string }) => {
        throw new Error(`llr ${args.join(' ')} failed: ${e.message}\n${e.stderr}`);
      });
      expect(stderr).not.toMatch(/diverged|run failed/);
      const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
      expect(results.status, results.error ?? '').toBe('complete');
      expect(stdout).toMatch(/^llr bench quick: complete/m);

      // As the bench's servers replay it: a turn that ended in calls nobody answered ends in its text instead
      // (workload/replayable.ts), so a file without output_tokens for it decodes that text's tokens, not the calls'.
      const w = loadWorkloadFile(join(FIXTURES, file));
      const turns = flatModelTurns(w);
      const calls = modelCallCount(w);
      const outputTokens = (n: number) => turns.slice(0, n).reduce((sum, t) => sum + Math.max(t.output_tokens ?? 0, visibleTokens(t.output)), 0);
      expect(results.workload).toMatchObject({ grid_model_calls: Math.min(6, calls), overhead_model_calls: calls });

      const designs = ['http', 'http-stored', 'long-lived', 'long-lived-http', 'ws'];
      expect(results.summary.map((r) => r.design).sort()).toEqual(designs);
      expect(results.overhead_summary.map((r) => r.design).sort()).toEqual(designs);
      if (ablations) {
        // The baseline and each default-on switch turned off, one run each.
        expect(results.ablations.baseline?.runs).toBe(1);
        expect(results.ablations.rows.length).toBeGreaterThanOrEqual(4);
      }
      expect(results.runs.length).toBe(5 + 5 + (ablations ? 1 + results.ablations.rows.length : 0));
      for (const r of results.runs) {
        expect(r.ok, `${r.phase} ${r.design} ${'error' in r ? r.error : ''}`).toBe(true);
        if (!r.ok) continue;
        const n = r.phase === 'grid' ? Math.min(6, calls) : calls;
        expect(r.turns, `${r.phase} ${r.design}`).toHaveLength(n);
        // The grid's last call may lose its tool calls (the run ends there), never its token count.
        if (r.phase !== 'grid' || n === calls) expect(r.counters['output_tokens'], `${r.phase} ${r.design}`).toBe(outputTokens(n));
        expect(Number.isFinite(r.e2e_ms) && r.e2e_ms > 0).toBe(true);
        expect(r.model_excess_ms + r.tool_ms + r.api_overhead_ms + r.residual_ms + r.model_ms_analytic).toBeCloseTo(r.e2e_ms, 6);
        if (r.phase === 'grid') {
          // At least the TTFT base per call and the decode the settings call for.
          expect(r.model_ms_analytic).toBeGreaterThanOrEqual(n * 20 + (r.counters['output_tokens'] ?? 0) / 4);
          expect(r.e2e_ms).toBeGreaterThan(r.model_ms_analytic);
        } else {
          expect(r.model_ms_analytic).toBe(0);
          expect(r.api_overhead_ms).toBeGreaterThan(0);
        }
      }
      // Every target line is printed; 1 and 2 were measured on this workload.
      expect(results.targets.map((t) => t.id)).toEqual([1, 2, 3, 4]);
      expect(results.targets[1]!.verdict).not.toBe('not measured');
    }, 110_000);
  }
});
