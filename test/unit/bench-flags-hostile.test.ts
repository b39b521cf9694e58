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
