/**
 * `llr bench --help` states each preset's overhead-phase repetitions per design. It was written by hand and said
 * `--full` runs "9 reps (long-lived, ws) / 3" while the preset (and docs/benchmarks.md) runs long-lived-http 9 too;
 * the help now reads the presets.
 */
import { describe, expect, it } from 'vitest';
import { benchHelp, FULL, overheadRepsText, QUICK } from '../../src/bench/command.js';

describe('llr bench --help', () => {
  it.each([
    ['--quick', QUICK],
    ['--full', FULL],
  ] as const)('%s: the help names every design with the overhead repetitions its preset runs', (flag, preset) => {
    const text = overheadRepsText(preset);
    // Read back: each design with the count said after its group.
    const said: Record<string, number> = {};
    for (const m of text.matchAll(/((?:[a-z-]+(?:, | and ))*[a-z-]+) (\d+)(?: reps)?/g)) {
      for (const d of m[1]!.split(/, | and /)) said[d] = Number(m[2]);
    }
    expect(said, flag).toEqual(Object.fromEntries(preset.designs.map((d) => [d, preset.overheadReps[d]])));
    expect(benchHelp().replace(/\s+/g, ' ')).toContain(text);
  });

  it('--full: long-lived-http is said with its 9 repetitions', () => {
    expect(FULL.overheadReps['long-lived-http']).toBe(9);
    expect(overheadRepsText(FULL)).toBe('long-lived, ws and long-lived-http 9 reps, http and http-stored 3');
    expect(overheadRepsText(QUICK)).toBe('long-lived and ws 5 reps, http and http-stored 1, long-lived-http 3');
  });
});
