/**
 * A replay's deadline allows for the API's own work (src/bench/session.ts, `apiWorkMs`): with the instant model
 * it was a minute whatever the run's length, and a replay of 5,000 tool steps failed its deadline on
 * long-lived and http although nothing hung (outside attack).
 */
import { describe, expect, it } from 'vitest';
import { LONG_RUN_MS, gridRunTimes, parseBenchArgs, spanText } from '../../src/bench/command.js';
import { apiWorkMs, leastRunMs, runDeadlineMs, shownTokensFloor, workloadTextChars } from '../../src/bench/session.js';
import { countTokens } from '../../src/model/tokenizer.js';
import type { ReplayTurn } from '../../src/model/types.js';
import { UsageError } from '../../src/flags.js';
import { syntheticWorkload } from '../../src/workload/synthetic.js';
import { modelCallCount, presentedContextBytes } from '../../src/workload/replayable.js';
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

  it("a grid run that cannot end before its deadline is refused before anything starts, not found out 24.8 days later (outside attack atk38 F2)", () => {
    // 3 calls of 10^9 output tokens (the most a recorded call may hold) at 65 tokens/s: 534 days of decoding.
    const refusal = (() => {
      try {
        parseBenchArgs(['--synthetic', '3,10,1000000000', '--speeds', '65,1000']);
      } catch (err) {
        return err;
      }
      return null;
    })();
    expect(refusal).toBeInstanceOf(UsageError);
    expect((refusal as Error).message).toMatch(/^at 65 tokens\/s one grid run takes at least 534 days \(3 model calls decoding 3000000000 output tokens \(as recorded, or at least what each call shows\), prefilling at least \d+ context tokens at 20000 tokens\/s\), past its deadline of 24\.9 days/);
    // --run-timeout-ms sets the deadline: a run that needs longer is refused the same way; one that fits is not.
    expect(() => parseBenchArgs(['--synthetic', '3,10,1000', '--speeds', '1000', '--run-timeout-ms', '2000'])).toThrow(/takes at least 3\.\d s .*past its deadline of 2\.0 s \(--run-timeout-ms\)/);
    expect(parseBenchArgs(['--synthetic', '3,10,1000', '--speeds', '1000', '--run-timeout-ms', '60000']).gridNotes).toHaveLength(1);
    // Only the grid replays at a model speed: without it nothing is refused.
    expect(parseBenchArgs(['--synthetic', '3,10,1000000000', '--speeds', '65', '--phases', 'overhead']).gridNotes).toEqual([]);
  });

  it("a grid run's least time is its calls' time to first token and hops, its recorded output tokens at the speed and its tools × --tool-factor", () => {
    const w = syntheticWorkload({ turns: 4, toolOutputBytes: 10, outputTokensPerTurn: 500, seed: 1 });
    const { calls, prefillTokens } = leastRunMs(w, 1000, cfg);
    expect(calls).toBeGreaterThanOrEqual(4);
    // The conversation's text, 8 characters a token at the most, prefilled once at --prefill-tps (10,000 here).
    expect(prefillTokens).toBe(Math.floor(workloadTextChars(w) / 8));
    expect(prefillTokens).toBeGreaterThan(0);
    const prefillMs = prefillTokens / 10;
    expect(leastRunMs(w, 1000, cfg)).toEqual({ ms: calls * 500 + prefillMs, calls, outputTokens: calls * 500, prefillTokens });
    expect(leastRunMs(w, 1000, { ...cfg, ttftMs: 150, hops: 2, hopMs: 5, toolFactor: 0 }).ms).toBeCloseTo(calls * (500 + 150 + 20) + prefillMs, 9);
    expect(leastRunMs(w, null, { ...cfg, toolFactor: 0 })).toMatchObject({ ms: 0, prefillTokens: 0 });
    // Never above the deadline it is checked against.
    const [g] = gridRunTimes(parseBenchArgs(['--synthetic', '4,10,500', '--speeds', '65', '--reps', '2', '--designs', 'ws,http']).config);
    expect(g).toMatchObject({ tps: 65, calls, outputTokens: calls * 500, runs: 4, prefillTps: 20_000 });
    expect(g!.leastMs).toBeCloseTo(calls * 150 + (calls * 500 * 1000) / 65 + g!.prefillTokens / 20, 6);
    expect(g!.leastMs).toBeLessThan(g!.deadlineMs);
    expect([spanText(1), spanText(31_390), spanText(845_000), spanText(3 * 3_600_000 + 720_000), spanText(2_147_483_647), spanText(4.6e10)]).toEqual(['1 ms', '31.4 s', '14 min 5 s', '3 h 12 min', '24.9 days', '532 days']);
  });

  it('--help and --report read no workload, and are not checked (outside attack atk41 F1: both failed, reading the missing one)', () => {
    expect(parseBenchArgs(['--help'])).toMatchObject({ help: true, gridNotes: [] });
    expect(parseBenchArgs(['--report', '/nonexistent'])).toMatchObject({ report: '/nonexistent', gridNotes: [] });
  });

  it('counts the prefill of large tool outputs: a slow prefill is announced, and the deadline allows for it (outside attack atk41 F2)', () => {
    // 3 calls whose tool outputs are 200,000 bytes each, prefilled at 1 token/s: hours, where the check said 0.45 s.
    const [slow] = parseBenchArgs(['--synthetic', '3,200000,1', '--prefill-tps', '1', '--speeds', '1000']).gridNotes;
    expect(slow!.prefillTokens).toBeGreaterThan(50_000);
    expect(slow!.leastMs).toBeGreaterThan(LONG_RUN_MS);
    expect(slow!.leastMs).toBeLessThan(slow!.deadlineMs);
    // No counts recorded: the deadline's prefill allowance follows the text (4 characters a token), not a fixed 50,000 tokens.
    const w = syntheticWorkload({ turns: 6, toolOutputBytes: 4_000_000, outputTokensPerTurn: 1, seed: 1 });
    const noCounts = { ...w, recorded: { ...w.recorded, input_tokens: [] } };
    const deadline = runDeadlineMs(noCounts, 1000, { ...cfg, prefillTps: 1000 });
    expect(deadline).toBeGreaterThan((workloadTextChars(noCounts) / 4) * 2 * 3);
  });

  it('counts at least the tokens of what a call shows, recorded or not: 1,048,574 emoji arguments were allowed 100 tokens (outside attack atk66 F2)', () => {
    const call = (args: string, output_tokens?: number): ReplayTurn => ({ output: [{ type: 'function_call', name: 'shell', arguments: args, call_id: 'call_1' }], ...(output_tokens === undefined ? {} : { output_tokens }) });
    const emoji = `"${'\u{1F600}'.repeat(1_048_574)}"`;
    const w = syntheticWorkload({ turns: 1, toolOutputBytes: 10, outputTokensPerTurn: 1, seed: 1 });
    w.userTurns[0]!.modelTurns = [call(emoji), { output: [{ type: 'message', text: 'done' }] }];
    const least = leastRunMs(w, 4000, { ...cfg, toolFactor: 0 });
    expect(least.outputTokens).toBeGreaterThanOrEqual(524_287 + 100);
    // The real decode (one token an emoji, measured) at 4,000 tokens/s fits the deadline; it did not (262 s against 258 s).
    expect(runDeadlineMs(w, 4000, cfg)).toBeGreaterThan((countTokens(emoji) / 4000) * 1000);
    // A recorded count above what the call shows is kept.
    expect(shownTokensFloor(call('{}', 5))).toBe(1);
    expect(leastRunMs({ ...w, userTurns: [{ ...w.userTurns[0]!, modelTurns: [call('{}', 5000), { output: [{ type: 'message', text: 'done' }] }] }] }, 1000, { ...cfg, toolFactor: 0 }).outputTokens).toBe(5000 + 100);
    // Within a third of the real count on texts of every kind, so the deadline (three times the least) covers the decode.
    const texts = [
      'const x = require("fs").readFileSync(path, "utf8");\n'.repeat(500),
      '\u{1F600}\u{1F680}\u{1F4A9}'.repeat(2000),
      '東京都の天気は晴れです。明日は雨が降るでしょう。'.repeat(500),
      'Élève déjà présenté à l’école, où ça coûte très cher. '.repeat(500),
      'Привет, как дела? Всё хорошо, спасибо. '.repeat(500),
      'a'.repeat(100_000),
    ];
    for (const t of texts) {
      const floor = shownTokensFloor({ output: [{ type: 'message', text: t }] });
      expect(floor * 3, t.slice(0, 20)).toBeGreaterThanOrEqual(countTokens(t));
    }
  });

  it('allows for the context the replay presents where the recording counted less (a run compacted inside a user turn, a file without counts; atk68 F3)', () => {
    // 200 calls of 40 KB tool outputs in one user turn: the replay presents the whole history at every call.
    const w = syntheticWorkload({ turns: 200, toolOutputBytes: 40_000, outputTokensPerTurn: 5, seed: 1 });
    const calls = modelCallCount(w);
    const bytes = presentedContextBytes(w);
    // About 40 KB more at each call: the sum grows with the square of the run.
    expect(bytes).toBeGreaterThan((40_000 * calls * (calls - 1)) / 2);
    // Recorded as small (the agent compacted): the allowance follows the replay, 2 µs a presented token of 8 bytes.
    const small = { ...w, recorded: { model_calls: calls, input_tokens: Array.from({ length: calls }, () => 1000), output_tokens: [] } };
    expect(runDeadlineMs(small, null, cfg)).toBeGreaterThanOrEqual(Math.round(60_000 + 3 * (calls * 20 + Math.floor(bytes / 8) * 0.002)));
    expect(runDeadlineMs(small, null, cfg, 'http')).toBe(runDeadlineMs(small, null, cfg));
    // Only the http designs send the whole conversation at every call: a hung ws or long-lived replay of a long run
    // waited 41.8 h for a deadline counted so (atk72 F2); theirs counts what was recorded.
    for (const design of ['ws', 'long-lived', 'long-lived-http'] as const) {
      expect(runDeadlineMs(small, null, cfg, design), design).toBe(Math.round(60_000 + 3 * (calls * 20 + calls * 1000 * 0.002)));
    }
    expect(apiWorkMs(small, calls)).toBe(calls * 20 + calls * 1000 * 0.002);
    // Recorded as larger than the floor: the recording's counts stand.
    expect(apiWorkMs(small, calls, 10)).toBe(calls * 20 + calls * 1000 * 0.002);
    expect(apiWorkMs(small, calls, 1e9)).toBe(calls * 20 + 1e9 * 0.002);
  });
});
