/**
 * The server's log (src/log.ts) as a real `llr serve` child writes it: JSON
 * lines written asynchronously to stdout, every one of them there by the
 * time the process has exited after SIGTERM; and a stdout nobody reads
 * costs at most `--max-log-buffer-bytes` and never stalls the server (lines
 * past it are dropped and counted once stdout drains). No sleeps: the test
 * waits on the child's output, its exit and HTTP answers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { buildDist } from '../helpers/build.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist', 'cli.js');

beforeAll(async () => {
  await buildDist();
}, 120_000);

interface Child {
  url: string;
  proc: ChildProcess;
  /** Everything written to stdout, once the process has exited. */
  output: Promise<string>;
}

function serve(extra: string[] = []): Promise<Child> {
  const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--store', 'memory', '--instant', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LLR_LOG_LEVEL: 'info', LLR_PARENT_PID: String(process.pid) },
  });
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  const output = new Promise<string>((resolve) => proc.once('close', () => resolve(out)));
  return new Promise((resolve, reject) => {
    const seek = () => {
      const m = /"url":"(http[^"]+)"/.exec(out);
      if (!m) return;
      proc.stdout!.off('data', seek);
      resolve({ url: m[1]!, proc, output });
    };
    proc.stdout!.on('data', seek);
    proc.once('exit', (code) => reject(new Error(`llr serve exited (${code}) before listening:\n${out}`)));
  });
}

async function create(url: string, i: number): Promise<void> {
  const res = await fetch(`${url}/v1/responses`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'sim-model', input: `hello ${i}`, store: false }),
  });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { status: string }).status).toBe('completed');
}

const lines = (out: string) => out.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { msg: string; dropped?: number });

describe('server log', () => {
  it('writes one line per response, and every waiting line is out when the process has exited after SIGTERM', async () => {
    const { url, proc, output } = await serve();
    const n = 40;
    for (let i = 0; i < n; i++) await create(url, i);
    proc.kill('SIGTERM');
    const logged = lines(await output);
    expect(logged.filter((l) => l.msg === 'response finished')).toHaveLength(n);
    expect(logged.some((l) => l.msg === 'shutting down')).toBe(true);
  }, 60_000);

  it('warns at start when --max-server-bytes is below --max-frame-bytes: a request between them can never be held (atk70 F6)', async () => {
    const { proc, output } = await serve(['--max-server-bytes', '5000', '--max-frame-bytes', '8000']);
    proc.kill('SIGTERM');
    const warned = lines(await output).filter((l) => (l as { code?: string }).code === 'server_bytes_below_frame');
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ max_server_bytes: 5000, max_frame_bytes: 8000 });
    const { proc: fine, output: fineOut } = await serve(['--max-server-bytes', '8000', '--max-frame-bytes', '8000']);
    fine.kill('SIGTERM');
    expect(lines(await fineOut).filter((l) => (l as { code?: string }).code === 'server_bytes_below_frame')).toEqual([]);
  }, 30_000);

  it('warns at start when --max-live-http-runs passes half of --max-connections: the runs\' streams could take every slot their appends need (atk119 F1)', async () => {
    const code = (l: unknown) => (l as { code?: string }).code === 'live_http_runs_past_half_connections';
    const { proc, output } = await serve(['--max-connections', '20']);
    proc.kill('SIGTERM');
    const warned = lines(await output).filter(code);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ max_live_http_runs: 512, max_connections: 20 });
    const { proc: fine, output: fineOut } = await serve(['--max-connections', '20', '--max-live-http-runs', '10']);
    fine.kill('SIGTERM');
    expect(lines(await fineOut).filter(code)).toEqual([]);
  }, 30_000);

  it('warns at start when --max-context-bytes passes 40 % of --max-server-bytes: one run could fill the budget before its own bound (atk76 F1b)', async () => {
    const code = (l: unknown) => (l as { code?: string }).code === 'context_bytes_past_server_budget';
    const { proc, output } = await serve(['--max-server-bytes', '268435456', '--max-context-bytes', '1073741824']);
    proc.kill('SIGTERM');
    const warned = lines(await output).filter(code);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ max_context_bytes: 1073741824, max_server_bytes: 268435456 });
    // The defaults (32 MiB of context, 256 MiB of budget) are fine.
    const { proc: fine, output: fineOut } = await serve([]);
    fine.kill('SIGTERM');
    expect(lines(await fineOut).filter(code)).toEqual([]);
  }, 30_000);

  it('says at start which limits a workload raised, and names none it did not raise (atk86 F5), and which given limits are below its needs (atk87 F2)', async () => {
    const code = (l: unknown) => (l as { code?: string }).code === 'limits_fitted_to_workload';
    const below = (l: unknown) => (l as { code?: string }).code === 'limits_below_workload';
    const dir = mkdtempSync(join(tmpdir(), 'llr-fit-'));
    const file = join(dir, 'wide.json');
    const properties = Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`p${i}`, { type: 'string' }]));
    writeFileSync(file, JSON.stringify({ llr_workload: 1, tools: [{ type: 'function', name: 'wide', parameters: { type: 'object', properties } }], userTurns: [{ input: [{ type: 'message', role: 'user', content: 'hi' }], modelTurns: [{ output: [{ type: 'message', text: 'done' }] }] }] }));
    try {
      const { proc, output } = await serve(['--workload', file]);
      proc.kill('SIGTERM');
      const warned = lines(await output).filter(code);
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ level: 40, raised: { maxJsonKeys: 10_001 } });
      // Given by flag: kept, and not said.
      const { proc: set, output: setOut } = await serve(['--workload', file, '--max-json-keys', '20000']);
      set.kill('SIGTERM');
      const setLines = lines(await setOut);
      expect(setLines.filter(code)).toEqual([]);
      expect(setLines.filter(below)).toEqual([]);
      // Given below what the workload needs: said, with what it needs (atk87 F2).
      const { proc: low, output: lowOut } = await serve(['--workload', file, '--max-json-keys', '500']);
      low.kill('SIGTERM');
      const lowLines = lines(await lowOut);
      expect(lowLines.filter(code)).toEqual([]);
      expect(lowLines.filter(below)).toEqual([expect.objectContaining({ level: 40, below: { maxJsonKeys: { given: 500, needs: 10_001 } } })]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  // Found by an outside fuzzer: a server whose stdout reader had gone (its parent killed) did not exit on SIGTERM, its
  // main thread in sonic-boom's synchronous flush, which retries a write that fails with anything but EAGAIN (EPIPE:
  // nobody reads the pipe) every 100 ms, for ever. The exit hook's flush must give up on it.
  it('a process whose stdout reader is gone still exits: the exit flush gives up on EPIPE', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'test', 'fixtures', 'log-exit-child.mjs'), join(ROOT, 'dist', 'log.js')], {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    onTestFinished(() => void child.kill('SIGKILL'));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await new Promise((resolve) => child.stdout!.once('data', resolve));
    const closed = new Promise((resolve) => child.stdout!.once('close', resolve));
    child.stdout!.destroy();
    await closed;
    child.send('exit now');
    expect(await exited).toBe(0);
  }, 20_000);

  it('a stdout nobody reads does not stall the server: lines past --max-log-buffer-bytes are dropped and counted', async () => {
    const { url, proc, output } = await serve(['--max-log-buffer-bytes', '8192']);
    // Nobody reads: the pipe fills (64 KiB on Linux), then the server's own buffer, then lines are dropped.
    proc.stdout!.pause();
    const n = 600;
    for (let i = 0; i < n; i++) await create(url, i);
    proc.stdout!.resume();
    proc.kill('SIGTERM');
    const logged = lines(await output);
    const finished = logged.filter((l) => l.msg === 'response finished').length;
    const dropped = logged.filter((l) => l.dropped !== undefined).reduce((a, l) => a + l.dropped!, 0);
    expect(finished).toBeLessThan(n);
    expect(dropped).toBeGreaterThan(0);
    // Every line is either written or counted as dropped (the connection lines are dropped too, so at least n).
    expect(finished + dropped).toBeGreaterThanOrEqual(n);
  }, 120_000);
});
