/**
 * `llr run`, the example agent, stopped or left waiting, as a person meets
 * it (the built CLI, a real server on port 0):
 * - SIGINT / SIGTERM while a command it runs for the model is running: the
 *   command's whole process group is killed (`bash -c 'sleep 300 & …'` left
 *   bash and sleep running, orphaned), one line on stderr, status 130 / 143.
 * - a server that accepts and never answers (no upgrade answer, no headers):
 *   it gives up after --idle-timeout-ms with one line and status 1 (it
 *   waited for ever, printing nothing).
 */
import { execFileSync, spawn } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildDist, CLI } from '../helpers/build.js';
import { testServer } from '../helpers/server.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { INSTANT_MODEL } from '../../src/server.js';

beforeAll(async () => {
  await buildDist();
}, 120_000);

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** Whether a process is still running (a zombie has exited: only its parent has yet to reap it). */
function alive(pid: number): boolean {
  if (!existsSync(`/proc/${pid}/stat`)) return false;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}

function exited(child: ReturnType<typeof spawn>): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

describe.skipIf(process.platform !== 'linux')('llr run: stopped mid-command', () => {
  for (const [signal, status] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    it(`${signal}: the running command's process group is killed, status ${status}`, async () => {
      const { url } = await testServer();
      const dir = mkdtempSync(join(tmpdir(), 'llr-run-stop-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const fifo = join(dir, 'pid');
      execFileSync('mkfifo', [fifo]);
      // bash starts sleep in the background and tells the test its pid through the fifo, then waits on it.
      const prompt = `go\n$ sleep 300 & echo $! > ${fifo}; wait`;
      const child = spawn(process.execPath, [CLI, 'run', '--url', url, prompt], { stdio: ['ignore', 'pipe', 'pipe'] });
      const stderr: Buffer[] = [];
      child.stderr.on('data', (d: Buffer) => stderr.push(d));
      child.stdout.resume();
      const done = exited(child);
      cleanups.push(() => child.kill('SIGKILL'));
      const pidText = await new Promise<string>((resolve) => {
        let text = '';
        createReadStream(fifo, 'utf8')
          .on('data', (d) => (text += d))
          .on('end', () => resolve(text));
      });
      const sleepPid = Number(pidText.trim());
      cleanups.push(() => {
        try {
          process.kill(sleepPid, 'SIGKILL');
        } catch {
          // gone
        }
      });
      expect(alive(sleepPid)).toBe(true);
      child.kill(signal);
      const { code } = await done;
      expect(code).toBe(status);
      expect(Buffer.concat(stderr).toString()).toBe(`llr: stopped by ${signal}; killed 1 running command(s)\n`);
      expect(alive(sleepPid)).toBe(false);
    }, 30_000);
  }
});

describe('llr run: stopped mid-text', () => {
  it('the stop line starts a line of its own (it was glued to the streamed text: `You said:llr: stopped by SIGINT`; atk63 F3)', async () => {
    // 50 tokens a second: the text streams for a minute, so the signal lands in the middle of it.
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'word '.repeat(3000) }]), modelSettings: { ...INSTANT_MODEL, tokensPerSecond: 50 } });
    const child = spawn(process.execPath, [CLI, 'run', '--url', url, '--protocol', 'ws', 'talk'], { stdio: ['ignore', 'pipe', 'pipe'] });
    cleanups.push(() => child.kill('SIGKILL'));
    const done = exited(child);
    const stderr: Buffer[] = [];
    child.stderr.on('data', (d: Buffer) => stderr.push(d));
    let stdout = '';
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes('word word')) resolve();
      }),
    );
    child.kill('SIGINT');
    expect((await done).code).toBe(130);
    expect(stdout).toMatch(/word ?\n$/);
    expect(Buffer.concat(stderr).toString()).toBe('llr: stopped by SIGINT\n');
  }, 30_000);
});

describe('llr run: a server that never answers', () => {
  let silent: Server;
  let silentUrl = '';
  beforeAll(async () => {
    const sockets: Socket[] = [];
    silent = createServer((s) => {
      sockets.push(s);
      s.resume();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    return () => {
      for (const s of sockets) s.destroy();
      silent.close();
    };
  });

  for (const protocol of ['long-lived', 'ws', 'http', 'long-lived-http']) {
    it(`${protocol}: gives up after --idle-timeout-ms with one line, status 1`, async () => {
      const child = spawn(process.execPath, [CLI, 'run', '--url', silentUrl, '--protocol', protocol, '--idle-timeout-ms', '300', 'hi'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      cleanups.push(() => child.kill('SIGKILL'));
      const stderr: Buffer[] = [];
      child.stderr.on('data', (d: Buffer) => stderr.push(d));
      child.stdout.resume();
      const { code } = await exited(child);
      expect(code).toBe(1);
      expect(Buffer.concat(stderr).toString()).toBe(`llr: no answer from ${silentUrl} for 300 ms (--idle-timeout-ms)\n`);
    }, 30_000);
  }
});
