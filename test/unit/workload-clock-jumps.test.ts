/**
 * A rollout whose clock jumps: a tool's time is read from its call's and its output's timestamps, so a clock that went
 * backwards, or leapt forward (a laptop asleep, an NTP step), between them made a negative or a huge tool time. Huge,
 * a bench run with --tool-factor slept it until its deadline, and a demo race with tool time "as recorded" until its
 * own. The rule (workload/types.ts `toolWaitMs`): negative counts 0, past MAX_TOOL_MS counts MAX_TOOL_MS, each noted;
 * the bench and the demo wait a workload's durations by the same rule whatever built it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDeadlineMs } from '../../src/bench/session.js';
import { buildWorkload } from '../../src/demo/workloads.js';
import { parseWorkload } from '../../src/workload/load.js';
import { syntheticWorkload } from '../../src/workload/synthetic.js';
import { MAX_TOOL_MS, toolWaitMs } from '../../src/workload/types.js';

type Rec = Record<string, unknown>;
const DAY = 24 * 3600_000;
const meta: Rec = { type: 'session_meta', payload: { id: 's', base_instructions: { text: 'Be brief.' } } };
const user: Rec = { type: 'response_item', payload: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'go' }] } };
const call = (id: string): Rec => ({ type: 'response_item', payload: { type: 'function_call', name: 'exec_command', arguments: '{"cmd":"ls"}', call_id: id } });
const out = (id: string): Rec => ({ type: 'response_item', payload: { type: 'function_call_output', call_id: id, output: 'ok' } });
const answer: Rec = { type: 'response_item', payload: { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] } };

/** Records at the given times (ms since 2026-01-01), one per line. */
function rollout(recs: Array<[Rec, number]>): string {
  return recs.map(([r, t]) => JSON.stringify({ timestamp: new Date(Date.UTC(2026, 0, 1) + t).toISOString(), ...r })).join('\n') + '\n';
}

/** c1's output a month after its call (the clock leapt), c2's output a minute before its call (it went back). */
const JUMPY = rollout([
  [meta, 0],
  [user, 1_000],
  [call('c1'), 2_000],
  [out('c1'), 2_000 + 30 * DAY],
  [call('c2'), 3_000 + 30 * DAY],
  [out('c2'), 3_000 + 30 * DAY - 60_000],
  [call('c3'), 4_000 + 30 * DAY],
  [out('c3'), 5_500 + 30 * DAY],
  [answer, 6_000 + 30 * DAY],
]);

const dir = mkdtempSync(join(tmpdir(), 'llr-clock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a rollout whose clock jumps', () => {
  it('reads a leap forward as MAX_TOOL_MS and a step back as 0, noting each at its output line; other tools as recorded', () => {
    const w = parseWorkload(JUMPY, 'jumpy.jsonl', 'test');
    expect(w.toolOutputs['c1']!.duration_ms).toBe(MAX_TOOL_MS);
    expect(w.toolOutputs['c2']!.duration_ms).toBe(0);
    expect(w.toolOutputs['c3']!.duration_ms).toBe(1_500);
    const notes = (w.skipped ?? []).filter((s) => s.what.startsWith('the tool time of call'));
    expect(notes.map((n) => [n.line, n.what.split(':')[0]])).toEqual([
      [4, 'the tool time of call c1'],
      [6, 'the tool time of call c2'],
    ]);
    expect(notes[0]!.why).toMatch(/leapt forward/);
    expect(notes[1]!.why).toMatch(/went backwards/);
  });

  it('takes exec_command_end durations (no timestamps) by the same rule', () => {
    const end = (id: string, secs: number): Rec => ({ type: 'event_msg', payload: { type: 'exec_command_end', call_id: id, duration: { secs, nanos: 0 } } });
    const text = [meta, user, call('c1'), out('c1'), end('c1', -5), call('c2'), out('c2'), end('c2', 1e12), call('c3'), out('c3'), end('c3', 2), answer].map((r) => JSON.stringify(r)).join('\n');
    const w = parseWorkload(text, 'exec.jsonl', 'test');
    expect([w.toolOutputs['c1']!.duration_ms, w.toolOutputs['c2']!.duration_ms, w.toolOutputs['c3']!.duration_ms]).toEqual([0, MAX_TOOL_MS, 2_000]);
  });

  it('gives a neutral file past the bound (1e400 reads as Infinity) MAX_TOOL_MS, noted', () => {
    const w = syntheticWorkload({ turns: 3, toolOutputBytes: 10, outputTokensPerTurn: 5, seed: 1 });
    const ids = Object.keys(w.toolOutputs);
    const text = JSON.stringify({ llr_workload: 1, userTurns: w.userTurns, toolOutputs: Object.fromEntries(ids.map((id, i) => [id, { output: 'ok', duration_ms: i === 0 ? 7e9 : 12 }])) });
    const n = parseWorkload(text.replace('7000000000', '1e400'), 'n.json', 'test');
    expect(ids.map((id) => n.toolOutputs[id]!.duration_ms)).toEqual([MAX_TOOL_MS, 12]);
    expect(n.skipped?.some((s) => s.what.includes('duration_ms') && s.why.includes('MAX_TOOL_MS'))).toBe(true);
  });

  it('bounds a bench run: its deadline, far under the timer limit it used to reach, and its tool waits', () => {
    const w = parseWorkload(JUMPY, 'jumpy.jsonl', 'test');
    const cfg = { runTimeoutMs: null, toolFactor: 1, ttftMs: 0, hops: 0, hopMs: 0, callHops: 0, callHopMs: 0, prefillTps: 10_000 };
    expect(runDeadlineMs(w, null, cfg)).toBeLessThan(60_000 + 3 * (MAX_TOOL_MS + 1_500) + 60_000);
    // A workload built in code, not read: the bench waits it by the same rule.
    const built = { ...w, toolOutputs: { ...w.toolOutputs, c1: { output: 'ok', duration_ms: 30 * DAY }, c2: { output: 'ok', duration_ms: -60_000 } } };
    expect(runDeadlineMs(built, null, cfg)).toBe(runDeadlineMs(w, null, cfg));
    expect([toolWaitMs(30 * DAY), toolWaitMs(-60_000), toolWaitMs(Number.NaN), toolWaitMs(Infinity), toolWaitMs(1_500)]).toEqual([MAX_TOOL_MS, 0, 0, MAX_TOOL_MS, 1_500]);
  });

  it('bounds a demo race: its tool time as recorded, and each tool wait', () => {
    const file = join(dir, 'jumpy.jsonl');
    writeFileSync(file, JUMPY);
    const d = buildWorkload({ kind: 'codex' }, { maxToolCalls: 100, maxPromptBytes: 4096 }, file);
    expect(d.min_tool_ms).toBe(MAX_TOOL_MS + 1_500);
    expect(d.toolResult('c1', '')!.duration_ms).toBe(MAX_TOOL_MS);
    expect(d.toolResult('c2', '')!.duration_ms).toBe(0);
  });
});
