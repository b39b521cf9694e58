/**
 * `llr serve --port 0 --store FILE` from the built CLI (helpers/build.ts) as a child process, for tests where a server
 * must die or two must share a store file (durability, the store's file faults, background runs across processes).
 * Resolves once it logs where it listens; rejects with its output if it exits first. `serveChild` leaves the
 * building to the caller (`buildDist` in a `beforeAll`); `storeChildren` does it, and the clean-up.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { buildDist, CLI } from './build.js';

export interface ServedChild {
  url: string;
  proc: ChildProcess;
  /** Settles when the process exits (by itself or killed). */
  exited: Promise<void>;
}

/**
 * The child, with `extra` flags after the store's and `env` added to its environment; added to `track` until it exits
 * (for a file's `afterAll` to kill).
 */
export function serveChild(store: string, extra: string[] = [], track?: Set<ChildProcess>, env: Record<string, string> = {}): Promise<ServedChild> {
  const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--store', store, ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LLR_LOG_LEVEL: 'info', LLR_PARENT_PID: String(process.pid), ...env },
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

/**
 * A test file's store-file fixture: a temporary folder, the built CLI (built before the file's tests), and `serve`
 * starting `llr serve` children that are killed (with any other process the file adds to `children`), and the
 * folder removed, after the file's tests. Call it at the
 * file's top level (it registers the file's `beforeAll` and `afterAll`).
 */
export function storeChildren(prefix: string): { dir: string; children: Set<ChildProcess>; serve: (store: string, extra?: string[]) => Promise<ServedChild> } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const children = new Set<ChildProcess>();
  beforeAll(async () => {
    await buildDist();
  }, 120_000);
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, children, serve: (store, extra = []) => serveChild(store, extra, children) };
}

/** An HTTP answer as the store tests read it: status, `x-should-retry` (the SDKs obey it) and the JSON body. */
export interface Answer {
  status: number;
  shouldRetry: string | null;
  body: { id?: string; status?: string; error?: { code: string; message: string; param?: string | null } | null };
}

/** `method path` on `url`, with `body` as JSON when given. */
export async function call(url: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, shouldRetry: res.headers.get('x-should-retry'), body: (await res.json()) as Answer['body'] };
}
