/**
 * Preparing workloads for replay: the `--quick` cut to the first N model
 * calls, making interrupted user turns end in an answer, the per-run nonce,
 * the synthetic spec, and the JSON file the server process loads.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { firstInputWithNonce, TRUNCATED_TEXT, truncateWorkload } from '../../src/bench/workload-prep.js';
import { writeWorkloadJson } from '../../src/workload/format.js';
import { DEFAULT_WORKLOAD, loadWorkloadFile, readWorkload, WorkloadError, type Workload } from '../../src/workload/load.js';
import { callsOf, flatModelTurns, modelCallCount, replayable } from '../../src/workload/replayable.js';
import { parseSyntheticSpec, syntheticWorkload } from '../../src/workload/synthetic.js';

const SHIPPED = DEFAULT_WORKLOAD;
const dir = mkdtempSync(join(tmpdir(), 'llr-bench-prep-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('truncateWorkload', () => {
  it('keeps the first N model calls and ends the run on a call without tool calls', () => {
    const w = syntheticWorkload({ turns: 10, toolOutputBytes: 50, outputTokensPerTurn: 30, seed: 3 });
    const cut = truncateWorkload(w, 4);
    expect(modelCallCount(cut)).toBe(4);
    const last = flatModelTurns(cut).at(-1)!;
    expect(last.output).toEqual([{ type: 'message', text: TRUNCATED_TEXT }]);
    expect(last.output_tokens).toBe(30);
    // Only the calls still made keep their outputs.
    const kept = flatModelTurns(cut).flatMap((t) => callsOf(t).map((c) => c.call_id));
    expect(kept).toHaveLength(3);
    expect(Object.keys(cut.toolOutputs).sort()).toEqual([...kept].sort());
    expect(cut.recorded.output_tokens).toHaveLength(4);
    // Cutting at or past the end changes nothing.
    expect(truncateWorkload(w, 10)).toEqual(w);
    expect(truncateWorkload(w, 99)).toEqual(w);
    expect(() => truncateWorkload(w, 0)).toThrow(RangeError);
  });

  it('cuts the shipped rollout across its user turns (the --quick grid workload)', () => {
    const cut = truncateWorkload(readWorkload(SHIPPED), 6);
    expect(cut.userTurns.map((u) => u.modelTurns.length)).toEqual([3, 3]);
    expect(cut.name).toBe('codex-rollout-a.jsonl (first 6 model calls)');
    expect(cut.source).toContain('codemie-ai/codemie-code');
    for (const u of cut.userTurns) expect(callsOf(u.modelTurns.at(-1)!)).toEqual([]);
  });
});

describe('replayable', () => {
  it('drops the unanswered calls of an interrupted user turn and the aborted outputs that answered them', () => {
    const base = syntheticWorkload({ turns: 3, toolOutputBytes: 10, outputTokensPerTurn: 5, seed: 1 });
    const [t0, t1] = base.userTurns[0]!.modelTurns as [Workload['userTurns'][0]['modelTurns'][0], Workload['userTurns'][0]['modelTurns'][0]];
    const callId = callsOf(t1)[0]!.call_id;
    const interrupted: Workload = {
      ...base,
      userTurns: [
        { input: base.userTurns[0]!.input, modelTurns: [t0, t1] },
        { input: [{ type: 'function_call_output', call_id: callId, output: 'aborted' }, { type: 'message', role: 'user', content: 'stop' }], modelTurns: [{ output: [{ type: 'message', text: 'ok' }] }] },
      ],
    };
    const r = replayable(interrupted);
    expect(r.userTurns[0]!.modelTurns[1]!.output.map((o) => o.type)).toEqual(['message']);
    expect(r.userTurns[1]!.input).toEqual([{ type: 'message', role: 'user', content: 'stop' }]);
    expect(r.toolOutputs[callId]).toBeUndefined();
    expect(replayable(base)).toEqual(base);
  });
});

describe('firstInputWithNonce', () => {
  it('puts the nonce in front of the first user message only', () => {
    const input = syntheticWorkload({ turns: 2, toolOutputBytes: 1, outputTokensPerTurn: 1, seed: 1 }).userTurns[0]!.input;
    const out = firstInputWithNonce(input, '[run 1]');
    expect(out[0]).toEqual(input[0]); // the developer preamble stays shared
    expect(out[1]).toMatchObject({ role: 'user', content: [{ type: 'input_text', text: '[run 1]' }, ...(input[1] as { content: unknown[] }).content] });
    expect(firstInputWithNonce([{ type: 'message', role: 'user', content: 'hi' }], 'N')).toEqual([{ type: 'message', role: 'user', content: 'N\nhi' }]);
    expect(input).toHaveLength(2); // not mutated
  });
});

describe('workload files', () => {
  it('parses a synthetic spec and refuses a bad one', () => {
    expect(parseSyntheticSpec('5,200,20')).toEqual({ turns: 5, toolOutputBytes: 200, outputTokensPerTurn: 20, seed: 1 });
    expect(() => parseSyntheticSpec('5,200')).toThrow(/TURNS,TOOL_OUTPUT_BYTES,OUTPUT_TOKENS/);
    expect(() => parseSyntheticSpec('a,b,c')).toThrow(RangeError);
  });

  it('round-trips the JSON the server loads, and still reads a rollout', () => {
    const w = syntheticWorkload({ turns: 5, toolOutputBytes: 200, outputTokensPerTurn: 20, seed: 1 });
    const path = join(dir, 'w.json');
    writeWorkloadJson(path, w);
    expect(loadWorkloadFile(path)).toEqual(w);
    expect(modelCallCount(loadWorkloadFile(SHIPPED))).toBe(66);
  });

  it('names the line of a file that is not a rollout', () => {
    const path = join(dir, 'bad.jsonl');
    writeFileSync(path, '{"timestamp":"x","type":"session_meta","payload":{}}\nnot json\n');
    expect(() => loadWorkloadFile(path)).toThrow(WorkloadError);
    expect(() => loadWorkloadFile(path)).toThrow(/bad\.jsonl:2: /);
    expect(() => loadWorkloadFile(join(dir, 'missing.jsonl'))).toThrow(/cannot read the file/);
  });
});
