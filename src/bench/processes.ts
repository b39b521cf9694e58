/**
 * Child processes for benchmarks: the server (`llr serve`) and a raw `ws`
 * echo/frame server (frame-server.ts) each run in their own process, so the driver's measurements
 * include real loopback I/O and no shared event loop. Each child prints one
 * JSON line with its URL; a child that exits early or never says where it
 * listens fails the benchmark with its output instead of hanging.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '../node-flags.js';

export interface Child {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/** CPU lists (taskset's `-c` form) of the benchmark's children; null: wherever the scheduler puts them. */
let childCpus: string | null = null;

/**
 * Pin this process (every thread, and those it starts later) to `driver` and every child started from now on to
 * `children`, with Linux's `taskset`: the method ("servers and client pinned to separate cores").
 * Throws if `taskset` is missing or refuses a list (a CPU this machine does not have).
 */
export function pinCpus(children: string, driver: string): void {
  // The children's list checked now (a process started on it), so a bad one fails before any phase runs.
  execFileSync('taskset', ['-c', children, 'true'], { stdio: ['ignore', 'ignore', 'pipe'] });
  taskset(driver, process.pid);
  childCpus = children;
}

function taskset(cpus: string, pid: number): void {
  // -a: every thread the process has; threads started later inherit their starter's affinity.
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A child pinned as `pinCpus` asked (killed if it cannot be, so a benchmark never runs half pinned). */
function pinChild(proc: ChildProcess): void {
  if (childCpus === null || proc.pid === undefined) return;
  try {
    taskset(childCpus, proc.pid);
  } catch (err) {
    proc.kill('SIGKILL');
    throw err;
  }
}

function waitForUrl(proc: ChildProcess, what: string, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`${what} did not report its address within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(err);
    };
    proc.stdout?.setEncoding('utf8');
    proc.stdout?.on('data', (chunk: string) => {
      out += chunk;
      for (const line of out.split('\n')) {
        const m = /"url":"(http[^"]+)"/.exec(line);
        if (m) {
          clearTimeout(timer);
          proc.stdout?.removeAllListeners('data');
          proc.stdout?.resume();
          resolve(m[1]!);
          return;
        }
      }
    });
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (c: string) => (out += c));
    proc.once('exit', (code) => fail(new Error(`${what} exited with code ${code} before listening:\n${out}`)));
  });
}

/** How long a child has to exit after SIGTERM before it is killed. */
export const STOP_GRACE_MS = 10_000;

/**
 * SIGTERM, then SIGKILL after `graceMs`: a child that cannot act on SIGTERM (stopped, or its event
 * loop stuck) would otherwise keep `stop()` waiting for ever, and a phase that already failed on a
 * deadline would never print why (its error is reported after the `finally` that stops the server).
 */
export function stopper(proc: ChildProcess, graceMs = STOP_GRACE_MS): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      proc.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      proc.kill('SIGTERM');
    });
}

/** `llr serve` on a free port, JSON logs, with extra flags (and extra node flags, e.g. `--expose-gc`). */
export async function spawnServer(args: string[] = [], opts: { nodeArgs?: string[] } = {}): Promise<Child> {
  // The options `llr` itself runs with (node-flags.ts), then the environment's and the caller's (a later option wins).
  const nodeArgs = [...NODE_FLAGS, ...(process.env['LLR_BENCH_SERVER_NODE_ARGS']?.split(' ').filter(Boolean) ?? []), ...(opts.nodeArgs ?? [])];
  // A port and a store unless the caller gives its own (`llr serve` takes each flag once).
  const given = (flag: string) => args.some((a) => a === flag || a.startsWith(`${flag}=`));
  const defaults = [...(given('--port') ? [] : ['--port', '0']), ...(given('--store') ? [] : ['--store', 'memory'])];
  const proc = spawn(process.execPath, [...nodeArgs, here('../cli.js'), 'serve', ...defaults, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LLR_LOG_LEVEL: 'info', LLR_PARENT_PID: String(process.pid) },
  });
  const url = await waitForUrl(proc, 'llr serve');
  pinChild(proc);
  return { url, proc, stop: stopper(proc) };
}

/** A raw `ws` server that echoes, and blasts frames on request (frame-server.ts). */
export async function spawnFrameServer(opts: { nodeArgs?: string[] } = {}): Promise<Child> {
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), here('./frame-server.js')], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LLR_PARENT_PID: String(process.pid) } });
  const url = await waitForUrl(proc, 'frame server');
  pinChild(proc);
  return { url, proc, stop: stopper(proc) };
}
