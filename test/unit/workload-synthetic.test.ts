/**
 * Synthetic workloads: the run length and output sizes asked for, determinism
 * for a seed, and the same replay shape as a recorded rollout.
 */
import { describe, expect, it } from 'vitest';
import { summarizeWorkload } from '../../src/workload/load.js';
import { syntheticWorkload } from '../../src/workload/synthetic.js';
import { replayable } from '../../src/workload/replayable.js';
import { visibleTokens } from '../../src/model/policies.js';
import { parseBenchArgs } from '../../src/bench/command.js';
import { UsageError } from '../../src/flags.js';

describe('syntheticWorkload', () => {
  const opts = { turns: 10, toolOutputBytes: 2048, outputTokensPerTurn: 80, seed: 7 };

  it('has one user turn of `turns` model calls: exec_command calls, then a message', () => {
    for (const turns of [1, 10, 200]) {
      const w = syntheticWorkload({ ...opts, turns });
      expect(w.userTurns).toHaveLength(1);
      const mts = w.userTurns[0]!.modelTurns;
      expect(mts).toHaveLength(turns);
      expect(mts.at(-1)!.output.map((o) => o.type)).toEqual(['message']);
      for (const mt of mts.slice(0, -1)) {
        expect(mt.output).toHaveLength(1);
        const [c] = mt.output;
        expect(c).toMatchObject({ type: 'function_call', name: 'exec_command' });
        if (c?.type === 'function_call') expect(JSON.parse(c.arguments)).toEqual({ cmd: expect.any(String) });
      }
      expect(summarizeWorkload(w)).toMatchObject({ user_turns: 1, model_calls: turns, tool_calls: turns - 1 });
    }
  });

  it('answers every call with exactly toolOutputBytes bytes after toolDurationMs', () => {
    for (const toolOutputBytes of [0, 1, 113, 40_000]) {
      const w = syntheticWorkload({ ...opts, toolOutputBytes, toolDurationMs: 1300 });
      const outputs = Object.values(w.toolOutputs);
      expect(outputs).toHaveLength(opts.turns - 1);
      for (const o of outputs) {
        expect(Buffer.byteLength(o.output, 'utf8')).toBe(toolOutputBytes);
        expect(o.duration_ms).toBe(1300);
      }
      expect(w.stats.tool_output_bytes).toBe((opts.turns - 1) * toolOutputBytes);
    }
    expect(Object.values(syntheticWorkload(opts).toolOutputs)[0]!.duration_ms).toBe(0);
  });

  it('records the output tokens asked for, and varies the outputs between calls', () => {
    const w = syntheticWorkload(opts);
    expect(w.userTurns[0]!.modelTurns.every((t) => t.output_tokens === 80)).toBe(true);
    expect(w.recorded).toEqual({ model_calls: 10, input_tokens: [], output_tokens: Array(10).fill(80) });
    expect(new Set(Object.values(w.toolOutputs).map((o) => o.output)).size).toBe(9);
  });

  it('gives a call whose command or answer takes more than the tokens asked for what it takes: the figure the replay decodes, so nothing is noted as raised', () => {
    const w = syntheticWorkload({ ...opts, outputTokensPerTurn: 1 });
    const turns = w.userTurns[0]!.modelTurns;
    for (const t of turns) expect(t.output_tokens).toBe(Math.max(1, visibleTokens(t.output)));
    expect(turns.every((t) => t.output_tokens! > 1)).toBe(true);
    expect(w.recorded.output_tokens).toEqual(turns.map((t) => t.output_tokens));
    expect(replayable(w).skipped).toBeUndefined();
  });

  it('is deterministic for a seed and differs between seeds', () => {
    expect(syntheticWorkload(opts)).toEqual(syntheticWorkload(opts));
    expect(syntheticWorkload({ ...opts, seed: 8 }).toolOutputs).not.toEqual(syntheticWorkload(opts).toolOutputs);
  });

  it('rejects options it cannot honour', () => {
    expect(() => syntheticWorkload({ ...opts, turns: 0 })).toThrow(RangeError);
    expect(() => syntheticWorkload({ ...opts, toolOutputBytes: 1.5 })).toThrow(/toolOutputBytes/);
    expect(() => syntheticWorkload({ ...opts, toolDurationMs: -1 })).toThrow(/toolDurationMs/);
    // Past 10^9 the neutral file the bench writes for its servers would be refused by its schema, in the server process.
    expect(() => syntheticWorkload({ ...opts, outputTokensPerTurn: 1_000_000_001 })).toThrow(/outputTokensPerTurn must be at most 1000000000/);
    expect(syntheticWorkload({ ...opts, turns: 2, outputTokensPerTurn: 1_000_000_000 }).userTurns[0]!.modelTurns[0]!.output_tokens).toBe(1e9);
    // The bench's flags say so as a usage error (exit 2), --synthetic's and --scaling's --synthetic-tokens alike.
    for (const argv of [['--synthetic', '2,10,2000000000'], ['--scaling', '2', '--synthetic-tokens', '2000000000']]) {
      expect(() => parseBenchArgs(argv)).toThrow(UsageError);
    }
  });

  it('refuses a workload too large to hold: more than 100,000 calls, or more than 256 MiB of tool outputs (it was built whole before the server listened, growing without end)', () => {
    expect(() => syntheticWorkload({ ...opts, turns: 100_001 })).toThrow(/turns must be at most 100000/);
    expect(() => syntheticWorkload({ ...opts, turns: 100_000, toolOutputBytes: 1_000_000 })).toThrow(/at most 268435456 bytes/);
    // At the limit it is built: 256 MiB of shell output, the slow part. 15-20 s in the CI runs on 2 cores, 16-24 s here
    // with one CPU burner, 28 s with a 1 GiB heap (a smaller machine): too close to the 30 s default timeout.
    expect(syntheticWorkload({ ...opts, turns: 3, toolOutputBytes: 128 * 1024 * 1024 }).name).toMatch(/^synthetic-t3-/);
  }, 120_000);
});
