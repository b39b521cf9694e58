/**
 * `llr bench --workload FIFO` with no writer blocks in open(2) reading the
 * workload. Its SIGINT/SIGTERM handlers were installed before that read, and
 * a handler never runs while the thread is blocked: a supervisor's SIGTERM
 * was caught and never acted on, and the process hung for good. The
 * arguments are now read before the handlers exist, so the signal ends it
 * (status 143), as it ends `llr serve` reading the same FIFO.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, CLI } from '../helpers/build.js';

beforeAll(async () => {
  await buildDist();
}, 120_000);

/** What the process's main thread waits in (Linux's /proc wchan), '' once it has exited. */
function waitsIn(pid: number): string {
  return existsSync(`/proc/${pid}/wchan`) ? readFileSync(`/proc/${pid}/wchan`, 'utf8') : '';
}

/** Resolves once `cond` holds, looking every 5 ms (a state in /proc, which sends no event); rejects after `ms`. */
async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe.skipIf(process.platform !== 'linux')('llr bench reading a FIFO no one writes', () => {
  // --workload FIFO, and --report DIR whose results.json is one (the report is rebuilt from it).
  it.each([
    ['--workload', 'workload.jsonl', (dir: string, fifo: string) => ['--workload', fifo, '--out', join(dir, 'out')]],
    ['--report', 'results.json', (dir: string) => ['--report', dir]],
  ] as const)('%s: SIGTERM while it waits for a writer ends it with status 143', async (_flag, name, args) => {
    const dir = mkdtempSync(join(tmpdir(), 'llr-bench-fifo-'));
    try {
      const fifo = join(dir, name);
      execFileSync('mkfifo', [fifo]);
      const child = spawn(process.execPath, [CLI, 'bench', ...args(dir, fifo)], { stdio: 'ignore' });
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
      try {
        await until(() => waitsIn(child.pid!) === 'wait_for_partner', 20_000, 'the bench to block opening the FIFO');
        child.kill('SIGTERM');
        const end = await exited;
        // Ended by the signal (no handler ran): the shell's status for it is 128 + 15.
        expect(end.signal ?? (end.code === 143 ? 'SIGTERM' : end.code)).toBe('SIGTERM');
      } finally {
        child.kill('SIGKILL');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
