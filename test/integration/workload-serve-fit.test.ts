/**
 * `llr serve --workload F` fits the server to the workload as the bench does for its servers (runner.ts
 * fitLimits): a replayed model call with more parallel calls than one pause waits for (--max-pending-calls,
 * 128) failed every long-lived run of it with too_many_pending_calls (outside attack, 2026-12-02). An
 * explicit --max-pending-calls still wins.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replayRun } from '../../src/bench/replay.js';
import { connectClient } from '../../src/client/index.js';
import { loadWorkloadFile } from '../../src/workload/load.js';
import { buildDist } from '../helpers/build.js';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'llr-serve-fit-'));
const procs: ChildProcess[] = [];

beforeAll(async () => {
  await buildDist();
}, 120_000);
afterAll(() => {
  for (const p of procs) p.kill();
  rmSync(dir, { recursive: true, force: true });
});

const WIDE = 150;
const file = join(dir, 'wide.json');
writeFileSync(
  file,
  JSON.stringify({
    llr_workload: 1,
    userTurns: [
      {
        input: [{ type: 'message', role: 'user', content: 'go' }],
        modelTurns: [
          { output: Array.from({ length: WIDE }, (_, i) => ({ type: 'function_call', name: 'f', arguments: '{}', call_id: `p${i}` })) },
          { output: [{ type: 'message', text: 'done' }] },
        ],
      },
    ],
    toolOutputs: Object.fromEntries(Array.from({ length: WIDE }, (_, i) => [`p${i}`, { output: 'ok' }])),
  }),
);

function serve(extra: string[], workload = file): Promise<string> {
  const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--store', 'memory', '--instant', '--no-demo', '--workload', workload, ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LLR_LOG_LEVEL: 'info', LLR_PARENT_PID: String(process.pid) },
  });
  procs.push(proc);
  let out = '';
  return new Promise((resolve, reject) => {
    proc.stdout!.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const m = /"url":"(http[^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    });
    proc.once('exit', (code) => reject(new Error(`llr serve exited (${code}) before listening:\n${out}`)));
  });
}

async function replay(url: string): Promise<{ status: string; calls: number }> {
  const client = await connectClient('long-lived', url);
  let calls = 0;
  try {
    const agent = client.run({ model: 'sim-model', input: 'go', tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }] }, async () => {
      calls++;
      return 'ok';
    });
    for await (const _ of agent);
    const response = await agent;
    return { status: response.status, calls };
  } finally {
    await client.close();
  }
}

describe('llr serve --workload', () => {
  it(`replays a model call of ${WIDE} parallel calls over long-lived (it failed: too_many_pending_calls)`, async () => {
    expect(await replay(await serve([]))).toEqual({ status: 'completed', calls: WIDE });
  }, 60_000);

  it('keeps an explicit --max-pending-calls', async () => {
    expect((await replay(await serve(['--max-pending-calls', '128']))).status).toBe('failed');
  }, 60_000);
});

// A long run whose context passes the 16 MiB request body (the recorded agent compacted inside its user turn; the
// replay keeps the full history): 9 tool outputs of 2 MiB, so the http design's last request carries 18 MiB.
const big = join(dir, 'big.json');
const BIG_CALLS = 9;
writeFileSync(
  big,
  JSON.stringify({
    llr_workload: 1,
    userTurns: [
      {
        input: [{ type: 'message', role: 'user', content: 'go' }],
        modelTurns: [
          ...Array.from({ length: BIG_CALLS }, (_, i) => ({ output: [{ type: 'function_call', name: 'f', arguments: '{}', call_id: `b${i}` }] })),
          { output: [{ type: 'message', text: 'done' }] },
        ],
      },
    ],
    toolOutputs: Object.fromEntries(Array.from({ length: BIG_CALLS }, (_, i) => [`b${i}`, { output: 'x'.repeat(2 * 1024 * 1024) }])),
  }),
);

describe('llr serve --workload, a context past the request body limit', () => {
  it('replays over http to the end (it failed: payload_too_large at the last call)', async () => {
    const w = loadWorkloadFile(big);
    const sample = await replayRun({ design: 'http', url: await serve([], big), workload: w, nonce: 'big', toolFactor: 0, timeoutMs: 60_000 });
    expect(sample.turns).toHaveLength(BIG_CALLS + 1);
  }, 90_000);

  it('keeps an explicit --max-frame-bytes', async () => {
    const w = loadWorkloadFile(big);
    const err = await replayRun({ design: 'http', url: await serve(['--max-frame-bytes', String(16 * 1024 * 1024)], big), workload: w, nonce: 'big2', toolFactor: 0, timeoutMs: 60_000 }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/payload_too_large/);
  }, 90_000);
});
