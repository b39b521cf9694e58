/**
 * `llr serve --port 0 --store FILE` from the built CLI (helpers/build.ts) as a child process, for tests where a server
 * must die or two must share a store file (durability, the store's file faults, background runs across processes).
 * Resolves once it logs where it listens; rejects with its output if it exits first. Leaves the building to the
 * caller (`buildDist` in a `beforeAll`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI } from './build.js';

export interface ServedChild {
  url: string;
  proc: ChildProcess;
  /** Settles when the process exits (by itself or killed). */
  exited: Promise<void>;
}

/** The child, with `extra` flags after the store's; added to `track` until it exits (for a file's `afterAll` to kill). */
export function serveChild(store: string, extra: string[] = [], track?: Set<ChildProcess>): Promise<ServedChild> {
  const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--store', store, ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LLR_LOG_LEVEL: 'info', LLR_PARENT_PID: String(process.pid) },
  });
  track?.add(proc);
  const exited = new Promise<void>((resolve) =>
    proc.once('exit', () => {
      track?.delete(proc);
      resolve();
    }),
  );
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stderr!.setEncoding('utf8').on('data', (c: string) => (out += c));
    proc.stdout!.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const m = /"url":"(http[^"]+)"/.exec(out);
      if (m) {
        proc.stdout!.removeAllListeners('data');
        proc.stdout!.resume();
        resolve({ url: m[1]!, proc, exited });
      }
    });
    proc.once('exit', (code) => reject(new Error(`llr serve exited (${code}) before listening:\n${out}`)));
  });
}
