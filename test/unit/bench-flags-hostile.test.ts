/**
 * `llr bench` flags given an empty value, or a --target-speed the grid never runs (outside attack): each is a usage
 * error before anything runs. `--speeds ''`, `--designs ''`, `--phases ''` and `--sweep-speeds ''` fell back to the
 * defaults unsaid and started a whole bench; `--out ''` wrote results.json and the servers' SQLite files into the
 * current directory; `--target-speed 7` ran the bench and then had no grid run for target 2, though the help says it
 * must be one of --speeds.
 */
import { describe, expect, it } from 'vitest';
import { parseBenchArgs } from '../../src/bench/command.js';
import { UsageError } from '../../src/flags.js';
import { MAX_PAUSED_RUNS, MAX_REPS, MAX_STREAMS } from '../../src/bench/guard.js';

const syn = ['--synthetic', '3,200,5'];

describe('llr bench: hostile flag values', () => {
  for (const flag of ['speeds', 'designs', 'phases', 'out', 'calls', 'report', 'store', 'profile', 'workload']) {
    it(`--${flag} '' is a usage error naming the flag`, () => {
      const args = flag === 'workload' ? [`--${flag}=`] : [...syn, `--${flag}=`];
      expect(() => parseBenchArgs(args)).toThrow(UsageError);
      expect(() => parseBenchArgs(args)).toThrow(`--${flag} needs a value, got ''`);
    });
  }

  it("--sweep-speeds '', --sweep-hops '' and --sweep-calls '' with --sweep are usage errors", () => {
    for (const flag of ['sweep-speeds', 'sweep-hops', 'sweep-calls']) expect(() => parseBenchArgs([...syn, '--sweep', `--${flag}=`])).toThrow(`--${flag} needs a value`);
  });

  // `--reps 1000000000` planned every run up front and ended the process out of memory (a V8 fatal error, no message);
  // `--streams 99999999` would open every connection at once. Each count a bench makes things of up front is capped.
  it('--reps, --streams and --paused-runs past their caps are usage errors naming the cap; at the cap they are taken', () => {
    for (const [flag, max] of [['reps', MAX_REPS], ['streams', MAX_STREAMS], ['paused-runs', MAX_PAUSED_RUNS]] as const) {
      expect(() => parseBenchArgs([...syn, `--${flag}`, String(max + 1)])).toThrow(UsageError);
      expect(() => parseBenchArgs([...syn, `--${flag}`, '1000000000'])).toThrow(`--${flag} needs an integer >= 1 and <= ${max}`);
    }
    const { config } = parseBenchArgs([...syn, '--reps', String(MAX_REPS), '--streams', String(MAX_STREAMS), '--paused-runs', String(MAX_PAUSED_RUNS)]);
    expect([config.reps, config.stream.streams, config.paused.runs]).toEqual([MAX_REPS, MAX_STREAMS, MAX_PAUSED_RUNS]);
  });

  it("--profile naming one of Object's own members is an unknown profile, not a TypeError", () => {
    for (const name of ['constructor', '__proto__', 'toString']) expect(() => parseBenchArgs([...syn, '--profile', name])).toThrow(UsageError);
  });

  it('--target-speed must be one of the grid speeds when the grid runs', () => {
    expect(() => parseBenchArgs([...syn, '--target-speed', '7'])).toThrow(UsageError);
    expect(() => parseBenchArgs([...syn, '--target-speed', '7'])).toThrow(/--target-speed 7 is not one of --speeds \(1000, 4000\)/);
    expect(parseBenchArgs([...syn, '--target-speed', '4000']).config.targetSpeed).toBe(4000);
    expect(parseBenchArgs([...syn, '--speeds', '65,7', '--target-speed', '7']).config.targetSpeed).toBe(7);
    // Without the grid there is no target 2 to measure; the speed is only a label then.
    expect(parseBenchArgs([...syn, '--phases', 'overhead', '--target-speed', '7']).config.targetSpeed).toBe(7);
    // The default target speed with other speeds is as before (target 2 reported unmeasured).
    expect(parseBenchArgs([...syn, '--speeds', '65']).config.speeds).toEqual([65]);
  });
});
