/**
 * Workload files built to hurt the readers (outside attack, 2026-12-02): very
 * many records, very many calls in one user turn, very many skipped lines,
 * content parts of the wrong shape. Each either reads (and `llr workload
 * inspect` reports it in bounded time) or is refused with a WorkloadError
 * naming its line; never a TypeError or a RangeError from deep inside.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { fitLimits } from '../../src/bench/runner.js';
import { workloadCommand } from '../../src/workload/inspect.js';
import { parseWorkload, WorkloadError } from '../../src/workload/load.js';

const TS = '2026-10-05T17:45:00.000Z';
const rec = (type: string, payload: Record<string, unknown>) => JSON.stringify({ timestamp: TS, type, payload });
const meta = () => rec('session_meta', { id: 's1', source: 'cli', base_instructions: { text: 'You are Codex.' } });
const user = (text: string) => rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
const answer = (text: string) => rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
const call = (call_id: string) => rec('response_item', { type: 'function_call', name: 'shell', arguments: '{}', call_id });
const output = (call_id: string) => rec('response_item', { type: 'function_call_output', call_id, output: 'ok' });
const usage = (input: number, out: number) => rec('event_msg', { type: 'token_count', info: { last_token_usage: { input_tokens: input, output_tokens: out } } });
const read = (lines: string[]) => parseWorkload(lines.join('\n') + '\n', 'x.jsonl', 'test');

const dir = mkdtempSync(join(tmpdir(), 'llr-workload-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `llr workload inspect FILE`'s output, in process. */
async function inspect(lines: string[]): Promise<string> {
  const file = join(dir, `f${Math.random().toString(36).slice(2)}.jsonl`);
  writeFileSync(file, lines.join('\n') + '\n');
  let out = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  try {
    await workloadCommand(['inspect', file]);
  } finally {
    spy.mockRestore();
  }
  return out;
}

describe('hostile workloads', () => {
  it('one user turn of 150,000 model calls reads (its figures were push(...)ed: a RangeError, exit 1)', async () => {
    const n = 150_000;
    const lines = [meta(), user('x')];
    for (let i = 0; i < n; i++) lines.push(call(`c${i}`), usage(100 + i, 5), output(`c${i}`));
    lines.push(answer('done'), usage(100 + n, 3));
    const w = read(lines);
    expect(w.userTurns).toHaveLength(1);
    expect(w.userTurns[0]!.modelTurns).toHaveLength(n + 1);
    expect(w.calls).toHaveLength(n + 1);
    // The bench's server flags for it (fitLimits took Math.max(...) of every model call).
    expect(fitLimits(w)).toEqual([]);
    // And inspect (Math.max(...) of every tool duration).
    expect(await inspect(lines)).toMatch(/^tool durations: median 0 ms, max 0 ms$/m);
  }, 60_000);

  it('inspect groups 40,000 skipped lines in linear time (it copied the list per line: quadratic, no end)', async () => {
    const lines = [meta(), user('x')];
    for (let i = 0; i < 40_000; i++) lines.push(rec('zz_unknown', {}));
    lines.push(answer('done'));
    const t = performance.now();
    const out = await inspect(lines);
    expect(out).toMatch(/^ {2}lines 3, 4, 5, 6, 7, 8, … \(×40000\): a "zz_unknown" record — a record type this reader does not know$/m);
    // Linear: well under a second here; the quadratic copy took 20 s here, 140 s for 100,000 lines.
    expect(performance.now() - t).toBeLessThan(5_000);
  }, 60_000);
});

export { WorkloadError };
