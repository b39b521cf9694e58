/**
 * A replay's deadline allows for the API's own work (src/bench/session.ts, `apiWorkMs`): with the instant model
 * it was a minute whatever the run's length, and a replay of 5,000 tool steps failed its deadline on
 * long-lived and http although nothing hung (outside attack).
 */
import { describe, expect, it } from 'vitest';
import { apiWorkMs, runDeadlineMs } from '../../src/bench/session.js';
import { syntheticWorkload } from '../../src/workload/synthetic.js';
import type { Workload } from '../../src/workload/types.js';

/** Only what the allowance reads: each call's recorded context tokens. */
const workload = (input_tokens: number[]) => ({ recorded: { model_calls: input_tokens.length, input_tokens, output_tokens: [] } }) as unknown as Workload;

const cfg = { runTimeoutMs: null, toolFactor: 1, ttftMs: 0, hops: 0, hopMs: 0, callHops: 0, callHopMs: 0, prefillTps: 10_000 };

describe('a replay deadline', () => {
  it('with the instant model, is longer for a longer run: 5,000 tool steps of 1 KiB outputs get far more than a minute', () => {
    const short = runDeadlineMs(syntheticWorkload({ turns: 20, toolOutputBytes: 1024, outputTokensPerTurn: 30, seed: 1 }), null, cfg);
    const long = runDeadlineMs(syntheticWorkload({ turns: 5000, toolOutputBytes: 1024, outputTokensPerTurn: 30, seed: 1 }), null, cfg);
    expect(short).toBeGreaterThanOrEqual(60_000);
    expect(long).toBeGreaterThan(10 * 60_000);
    expect(long).toBeGreaterThan(short * 10);
    // `--run-timeout-ms` overrides it.
    expect(runDeadlineMs(syntheticWorkload({ turns: 5000, toolOutputBytes: 1024, outputTokensPerTurn: 30, seed: 1 }), null, { ...cfg, runTimeoutMs: 1234 })).toBe(1234);
  });

  it("is at most what a Node timer takes (2^31 - 1 ms): past it the timer fired at once and the run 'did not finish within 7.5e+29 ms'", () => {
    const w = syntheticWorkload({ turns: 3, toolOutputBytes: 10, outputTokensPerTurn: 30, seed: 1 });
    w.userTurns[0]!.modelTurns[0]!.output_tokens = 1e30;
    expect(runDeadlineMs(w, 65, cfg)).toBe(2 ** 31 - 1);
    expect(runDeadlineMs(w, null, { ...cfg, runTimeoutMs: 1e12 })).toBe(2 ** 31 - 1);
  });

  it('grows with every call and with the context each call presents', () => {
    // 5,000 calls whose context grows by 200 tokens a call: 2.5e9 tokens presented in all.
    const steps = 5000;
    const growing = Array.from({ length: steps }, (_, i) => 1000 + 200 * i);
    const ms = apiWorkMs(workload(growing), steps);
    const tokens = growing.reduce((a, b) => a + b, 0);
    expect(ms).toBe(steps * 20 + tokens * 0.002);
    // Far past the minute the deadline was: the http design re-processes every call's whole context.
    expect(ms).toBeGreaterThan(60 * 60_000);
    // Twice the steps, about four times the allowance.
    const twice = Array.from({ length: 2 * steps }, (_, i) => 1000 + 200 * i);
    expect(apiWorkMs(workload(twice), 2 * steps) / ms).toBeGreaterThan(3.5);
  });

  it('counts calls the recording has no count for at its last count, or 50,000 tokens', () => {
    expect(apiWorkMs(workload([100, 300]), 4)).toBe(4 * 20 + (100 + 300 + 2 * 300) * 0.002);
    expect(apiWorkMs(workload([]), 2)).toBe(2 * 20 + 2 * 50_000 * 0.002);
  });
});
