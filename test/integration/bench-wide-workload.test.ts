/**
 * `llr bench --workload` on a recorded run wider than the server's default
 * limits: one model call with 130 parallel calls to 130 different tools
 * (past --max-tools 128 and --max-pending-calls 128). The bench's servers
 * are started with those limits raised to fit (runner.ts fitLimits), so
 * every design replays it; before, the ws warm-up was refused
 * (array_above_max_length) and the bench stopped, exit 1.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Results } from '../../src/bench/results.js';
import { buildDist, CLI } from '../helpers/build.js';

const dir = mkdtempSync(join(tmpdir(), 'llr-bench-wide-'));
beforeAll(async () => {
  await buildDist();
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('a model call with 130 parallel calls to 130 tools replays on every design', async () => {
  const rec = (type: string, payload: object) => JSON.stringify({ timestamp: '2026-10-05T17:45:00.000Z', type, payload });
  const n = 130;
  const lines = [
    rec('session_meta', { id: 's', base_instructions: { text: 'You are Codex.' } }),
    rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'go' }] }),
    ...Array.from({ length: n }, (_, i) => rec('response_item', { type: 'function_call', name: `tool${i}`, arguments: '{}', call_id: `c${i}` })),
    ...Array.from({ length: n }, (_, i) => rec('response_item', { type: 'function_call_output', call_id: `c${i}`, output: `out ${i}` })),
    rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] }),
  ];
  const file = join(dir, 'wide.jsonl');
  writeFileSync(file, `${lines.join('\n')}\n`);
  const out = join(dir, 'out');
  const args = ['bench', '--workload', file, '--phases', 'overhead', '--designs', 'long-lived,ws,http', '--reps', '1', '--out', out];
  const r = await promisify(execFile)(process.execPath, [CLI, ...args], { timeout: 100_000 }).catch((e: { code: number; stderr: string }) => e);
  const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
  expect(results.status, `${results.error ?? ''} ${(r as { stderr: string }).stderr}`).toBe('complete');
  expect(results.overhead_summary.map((s) => s.design).sort()).toEqual(['http', 'long-lived', 'ws']);
}, 120_000);
