/**
 * `llr` with a standard output it cannot write (`> /dev/full`: ENOSPC on every write): one line on stderr naming
 * standard output and exit status 1, never Node's "Unhandled 'error' event" with a stack trace (outside attack:
 * `llr --help`, `llr workload inspect`, `llr demo` > /dev/full each printed a 20-line stack). `llr serve` and
 * `llr demo` keep serving: a server's log already drops lines it cannot write, and the demo's URL line is one more.
 * An unknown command is one line too, not the whole help after it.
 */
import { spawn } from 'node:child_process';
import { existsSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist, CLI, ROOT } from '../helpers/build.js';

const FULL = '/dev/full';
const WORKLOAD = join(ROOT, 'workloads', 'codex-rollout-a.jsonl');
let fd = -1;

beforeAll(async () => {
  await buildDist();
  if (existsSync(FULL)) fd = openSync(FULL, 'w');
}, 120_000);
afterAll(() => {
  if (fd >= 0) closeSync(fd);
});

/** Runs the CLI with stdout on /dev/full until it exits; its status and stderr. */
function llr(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', fd, 'pipe'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

/** Starts `llr demo` with stdout on /dev/full and resolves with stderr once a line arrives on it, the child still running or not. */
function demo(): Promise<{ stderr: string; running: boolean; stop: () => Promise<number | null> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'demo', '--port', '0', '--store', 'memory'], { stdio: ['ignore', fd, 'pipe'] });
    let stderr = '';
    let exited = false;
    const closed = new Promise<number | null>((r) => child.on('close', (code) => ((exited = true), r(code))));
    const stop = () => {
      if (!exited) child.kill('SIGTERM');
      return closed;
    };
    child.on('error', reject);
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      // The process's own line is written before it exits: give it the turn to exit if it is going to.
      if (stderr.endsWith('\n')) setImmediate(() => setImmediate(() => resolve({ stderr, running: !exited && child.exitCode === null, stop })));
    });
    void closed.then(() => resolve({ stderr, running: false, stop }));
  });
}

describe.skipIf(!existsSync(FULL))('llr with standard output on /dev/full', () => {
  for (const args of [['--help'], ['bench', '--help'], ['workload', 'inspect', WORKLOAD], ['workload', 'convert', WORKLOAD]]) {
    it(`llr ${args.join(' ')}: one line, exit 1, no stack`, async () => {
      const { code, stderr } = await llr(args);
      expect(stderr).not.toMatch(/\n\s+at /);
      expect(stderr).toMatch(/^llr: cannot write to standard output: ENOSPC[^\n]*\n$/);
      expect(code).toBe(1);
    });
  }

  it('llr demo says its URL line could not be written and serves on', async () => {
    const d = await demo();
    try {
      expect(d.stderr).not.toMatch(/\n\s+at /);
      expect(d.stderr).toMatch(/^llr: cannot write to standard output: ENOSPC[^\n]*\n$/);
      expect(d.running).toBe(true);
    } finally {
      expect(await d.stop()).toBe(0);
    }
  });
});

describe('llr with an unknown command', () => {
  it("says so in one line on stderr with where the help is, exit 2 (it printed the whole 114-line help after it)", async () => {
    for (const cmd of ['bogus', '']) {
      const r = await new Promise<{ code: number | null; stderr: string; stdout: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [CLI, cmd, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let stderr = '';
        let stdout = '';
        child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
        child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stderr, stdout }));
      });
      expect(r.stderr).toBe(`llr: unknown command '${cmd}'; known: serve, run, bench, workload, demo (llr --help)\n`);
      expect(r.stdout).toBe('');
      expect(r.code).toBe(2);
    }
  });
});
