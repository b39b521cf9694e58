/**
 * Never hang: a spawned server watched for a crash, and deadlines on every
 * phase. `ServerProcess.race(p)` settles with `p`, or rejects as soon as the
 * server process exits unexpectedly (with the tail of its stderr), so a
 * crashed server fails the run at once instead of leaving a client waiting.
 *
 * Used by the runner and the phases. Leaves out restarting a crashed server:
 * a crash is a finding, and the bench stops with partial results.
 */
import type { GcStats } from '../gc-stats.js';
import type { Child } from './processes.js';

export class ServerCrashedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class DeadlineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** How long a failed request waits for the server's exit to be reported before blaming the request. */
const CRASH_GRACE_MS = 1000;

export class ServerProcess {
  private stopping = false;
  private stderr = '';
  readonly crashed: Promise<never>;

  constructor(
    readonly child: Child,
    readonly what: string,
  ) {
    child.proc.stderr?.on('data', (c: Buffer | string) => {
      this.stderr = (this.stderr + c.toString()).slice(-2000);
    });
    this.crashed = new Promise<never>((_, reject) => {
      child.proc.once('exit', (code, signal) => {
        if (this.stopping) return;
        const tail = this.stderr.trim();
        reject(new ServerCrashedError(`${what} exited unexpectedly (${signal ?? `code ${code}`})${tail ? `: ${tail}` : ''}`));
      });
    });
    this.crashed.catch(() => {});
  }

  get url(): string {
    return this.child.url;
  }

  get alive(): boolean {
    return this.child.proc.exitCode === null && this.child.proc.signalCode === null;
  }

  async race<T>(p: Promise<T>): Promise<T> {
    try {
      return await Promise.race([p, this.crashed]);
    } catch (err) {
      if (err instanceof ServerCrashedError) throw err;
      // A dying server often closes its sockets before its exit is reported:
      // give the exit a moment, so the failure names the crash rather than
      // the dropped connection it caused.
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), CRASH_GRACE_MS)));
      const crash = await Promise.race([this.crashed.catch((e: unknown) => e), grace]);
      clearTimeout(timer);
      throw crash ?? err;
    }
  }

  /** GET a JSON path on the server, bounded by `timeoutMs` and the process staying up. */
  async getJson<T>(path: string, timeoutMs = 5000): Promise<T> {
    const res = await this.race(fetch(new URL(path, this.url), { signal: AbortSignal.timeout(timeoutMs) }));
    if (!res.ok) throw new Error(`GET ${path} → HTTP ${res.status}`);
    return (await res.json()) as T;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.child.stop();
  }
}

/** `p`, or a DeadlineError after `ms`. */
export function deadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`${what} did not finish within ${Math.round(ms / 1000)} s`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

export interface ServerStats {
  cpu_us: { user: number; system: number };
  memory: { rss: number; heapUsed: number; heapTotal: number; external: number; arrayBuffers: number };
  gc_available: boolean;
  /** The process's GC pauses by kind (src/gc-stats.ts); absent from a server older than them. */
  gc_pauses?: GcStats;
}

export function cpuMs(a: ServerStats, b: ServerStats): number {
  return (b.cpu_us.user - a.cpu_us.user + b.cpu_us.system - a.cpu_us.system) / 1000;
}

/**
 * Caps on the counts a bench makes things of up front: `--reps 1000000000` planned every run before the first and
 * ended the process out of memory (a V8 fatal error, no message), `--streams 99999999` opened every connection at once.
 * Each is far past what a run on one machine finishes: a grid configuration takes seconds, so 1,000 reps of the quick
 * grid is a day; 10,000 streams and 50,000 paused runs (each a socket in the bench and one in the server) are past a
 * default descriptor limit of 20,000 on the server's side already.
 */
export const MAX_REPS = 1000;
export const MAX_STREAMS = 10_000;
export const MAX_PAUSED_RUNS = 50_000;
