/**
 * The server under test, in its own process: `node dist/cli.js serve --port 0
 * --instant …`, so a crash is seen as a crash (exit code, signal and the tail
 * of stderr kept for the report) and its memory is the server's alone.
 *
 * Also the two probes every chaos scenario uses: `/health` with a deadline
 * (is it alive and responsive?) and the process's resident set size, read
 * from /proc (Linux; elsewhere from `/llr/stats`). Logs go to a bounded tail:
 * the suite keeps only error-level lines, for the report.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { NODE_FLAGS } from '../node-flags.js';

export interface ServerProcOptions {
  /** Path of the built CLI (`dist/cli.js`). */
  cli: string;
  /** `--store` value: `memory` or a SQLite file. */
  store?: string;
  /** Extra `serve` flags (e.g. `--tokens-per-second 2000`). `--instant` is added unless `paced`. */
  args?: string[];
  /** Use the real model pacing from `args` instead of `--instant`. */
  paced?: boolean;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const TAIL_BYTES = 16 * 1024;
const MAX_ERROR_LINES = 20;

export class ServerProc {
  readonly url: string;
  readonly exited: Promise<ExitInfo>;
  exit: ExitInfo | null = null;
  private stderrTail = '';
  /** Error-level log lines (pino level ≥ 50), first few kept. */
  readonly errorLines: string[] = [];
  errorLineCount = 0;
  /** An exit we asked for (SIGTERM/SIGKILL) is not a crash. */
  expectedExit = false;

  private constructor(
    readonly proc: ChildProcess,
    url: string,
  ) {
    this.url = url;
    this.exited = new Promise((resolve) => {
      const done = (code: number | null, signal: NodeJS.Signals | null) => {
        this.exit = { code, signal };
        resolve(this.exit);
      };
      if (proc.exitCode !== null || proc.signalCode !== null) done(proc.exitCode, proc.signalCode);
      else proc.once('exit', done);
    });
  }

  static start(opts: ServerProcOptions): Promise<ServerProc> {
    const args = [...NODE_FLAGS, opts.cli, 'serve', '--port', '0', '--store', opts.store ?? 'memory', ...(opts.paced ? [] : ['--instant']), ...(opts.args ?? [])];
    const proc = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LLR_LOG_LEVEL: 'info', LLR_PARENT_PID: String(process.pid) },
    });
    return new Promise((resolve, reject) => {
      let early = '';
      let server: ServerProc | null = null;
      let partial = '';
      proc.stdout!.setEncoding('utf8');
      proc.stderr!.setEncoding('utf8');
      proc.stderr!.on('data', (c: string) => {
        if (server) server.stderrTail = (server.stderrTail + c).slice(-TAIL_BYTES);
        else early = (early + c).slice(-TAIL_BYTES);
      });
      proc.stdout!.on('data', (c: string) => {
        const lines = (partial + c).split('\n');
        partial = lines.pop() ?? '';
        if (partial.length > TAIL_BYTES) partial = '';
        for (const line of lines) {
          if (!server) {
            early = (early + line + '\n').slice(-TAIL_BYTES);
            const m = /"url":"(http[^"]+)"/.exec(line);
            if (m) {
              server = new ServerProc(proc, m[1]!);
              server.stderrTail = early;
              resolve(server);
            }
            continue;
          }
          const level = /"level":(\d+)/.exec(line);
          if (level && Number(level[1]) >= 50) {
            server.errorLineCount++;
            if (server.errorLines.length < MAX_ERROR_LINES) server.errorLines.push(line.slice(0, 600));
          }
        }
      });
      proc.once('exit', (code, signal) => {
        if (!server) reject(new Error(`llr serve exited (code ${code}, signal ${signal}) before listening:\n${early}`));
      });
    });
  }

  get pid(): number {
    return this.proc.pid!;
  }

  get alive(): boolean {
    return this.exit === null;
  }

  /** The tail of stderr (and early stdout): where an unhandled error's stack shows up. */
  get stderr(): string {
    return this.stderrTail;
  }

  /** Resident set size in bytes, or null if the process is gone. */
  rss(): number | null {
    try {
      const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
      const m = /VmRSS:\s+(\d+) kB/.exec(status);
      return m ? Number(m[1]) * 1024 : null;
    } catch {
      return null;
    }
  }

  signal(sig: NodeJS.Signals): void {
    this.expectedExit = true;
    if (this.alive) this.proc.kill(sig);
  }

  /** SIGTERM, then SIGKILL if it does not exit within `graceMs`. */
  async stop(graceMs = 10_000): Promise<ExitInfo> {
    if (!this.alive) return this.exit!;
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    const e = await this.exited;
    clearTimeout(timer);
    return e;
  }
}

/** Samples a process's RSS while a scenario runs: start, peak, end. */
export class RssSampler {
  start = 0;
  peak = 0;
  end = 0;
  private timer: NodeJS.Timeout;

  /** `server` is read at each sample: a restarted target is followed. */
  constructor(
    private readonly server: () => ServerProc,
    everyMs = 100,
  ) {
    this.start = this.peak = this.end = server().rss() ?? 0;
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  sample(): number {
    const r = this.server().rss();
    if (r !== null) {
      this.end = r;
      if (r > this.peak) this.peak = r;
    }
    return this.end;
  }

  stop(): { start: number; peak: number; end: number } {
    clearInterval(this.timer);
    this.sample();
    return { start: this.start, peak: this.peak, end: this.end };
  }
}

export interface HealthProbe {
  ok: boolean;
  ms: number;
  body: Record<string, unknown> | null;
}

/** `GET /health` with a deadline: ok only if it answered 200 in time; waits at most `maxWaitMs` for the answer. */
export function probeHealth(url: string, deadlineMs: number, maxWaitMs = Math.max(deadlineMs * 20, 5_000)): Promise<HealthProbe> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const finish = (ok: boolean, body: Record<string, unknown> | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ok, ms: performance.now() - t0, body });
    };
    const req = request(`${url}/health`, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let body: Record<string, unknown> | null = null;
        try {
          body = JSON.parse(text) as Record<string, unknown>;
        } catch {
          body = null;
        }
        finish(res.statusCode === 200 && performance.now() - t0 <= deadlineMs, body);
      });
      res.on('error', () => finish(false, null));
    });
    // The deadline judges responsiveness; a slow answer is still waited for (bounded) to learn the body.
    const timer = setTimeout(() => {
      req.destroy();
      finish(false, null);
    }, maxWaitMs);
    req.on('error', () => finish(false, null));
    req.end();
  });
}

/**
 * Watches a server's responsiveness from a separate, otherwise idle process:
 * `GET /health` every `everyMs`, reporting each answer slower than
 * `deadlineMs` (or missing). A probe from the harness itself would also
 * measure the harness's own busy event loop.
 */
export class HealthWatch {
  private readonly proc: ChildProcess;
  maxMs = 0;
  probes = 0;

  constructor(url: string, onSlow: (ms: number) => void, deadlineMs = 250, everyMs = 200) {
    const script = `
      const http = require('node:http');
      const url = process.argv[1] + '/health';
      const tick = () => {
        const t0 = performance.now();
        let done = false;
        const end = (ok) => { if (done) return; done = true; process.stdout.write(JSON.stringify({ ms: Math.round(performance.now() - t0), ok }) + '\\n'); setTimeout(tick, ${everyMs}); };
        const req = http.get(url, { agent: false, timeout: 60000 }, (res) => { res.resume(); res.on('end', () => end(res.statusCode === 200)); });
        req.on('error', () => end(false));
        req.on('timeout', () => { req.destroy(); end(false); });
      };
      tick();`;
    this.proc = spawn(process.execPath, ['-e', script, url], { stdio: ['ignore', 'pipe', 'ignore'] });
    let partial = '';
    this.proc.stdout!.setEncoding('utf8');
    this.proc.stdout!.on('data', (c: string) => {
      const lines = (partial + c).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const { ms, ok } = JSON.parse(line) as { ms: number; ok: boolean };
        this.probes++;
        if (ok && ms > this.maxMs) this.maxMs = ms;
        if (ok && ms > deadlineMs) onSlow(ms);
      }
    });
  }

  stop(): void {
    this.proc.kill('SIGKILL');
  }
}
