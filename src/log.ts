/**
 * The server's pino logger: pretty lines when a person is watching a
 * terminal, JSON lines otherwise (files, pipes, CI). `LLR_LOG_LEVEL` or the
 * `level` option sets the level; tests pass `silent`.
 *
 * JSON lines go to stdout asynchronously (sonic-boom without `sync`), in
 * batches of 4 KiB and at least every 100 ms: a synchronous write per line
 * — one per response — was a system call on the event loop at every
 * ws-mode step, and a stdout nobody reads would have stalled the whole
 * server. Call `log.flush()` after a line someone waits for (the listening
 * line). What waits is bounded by `maxBufferBytes` (`llr serve
 * --max-log-buffer-bytes`, default 16 MiB; 0: no bound): past it lines are
 * dropped, counted, and reported by one warning once stdout drains.
 *
 * Exiting: `flushLog` (a stopping server) and, for a logger made with
 * `ownsProcess`, the process's `exit` (a crash included) write what waits,
 * together for at most `EXIT_FLUSH_MS`: a stdout nobody reads cannot keep
 * the process alive. What is still unwritten then is dropped (the stream
 * is destroyed, so pino's own exit hook has nothing left to flush).
 */
import fs from 'node:fs';
import { pino, type Logger } from 'pino';
import { DEFAULT_LIMITS } from './engine/services.js';
import { UsageError } from './flags.js';
import { quoted } from './terminal-text.js';

/** Longest the exit flushes wait, together, for a stdout that does not take its lines. */
export const EXIT_FLUSH_MS = 2000;

export interface LoggerOptions {
  level?: string;
  pretty?: boolean;
  maxBufferBytes?: number;
  /** The process's own logger (`llr serve`): flush at process exit, bounded. */
  ownsProcess?: boolean;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  // An empty LLR_LOG_LEVEL is unset, as every other LLR_ variable is.
  const level = opts.level ?? (process.env['LLR_LOG_LEVEL'] || 'info');
  // Checked before anything is set up: pino's own refusal came after the exit hook below was registered,
  // and that hook then crashed the process with a stack trace (`llr serve --log-level nope`).
  if (level !== 'silent' && !(level in pino.levels.values)) {
    throw new UsageError(`unknown log level ${quoted(level)} (--log-level, LLR_LOG_LEVEL); known: ${[...Object.keys(pino.levels.values), 'silent'].join(', ')}`);
  }
  const pretty = opts.pretty ?? Boolean(process.stdout.isTTY);
  if (pretty) {
    return pino({
      level,
      transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true } },
    });
  }
  const max = opts.maxBufferBytes ?? DEFAULT_LIMITS.maxLogBufferBytes;
  const state: SinkState = { dropped: 0, reporting: 0, flushUntil: 0, broken: false };
  // Registered before the destination exists, so it runs before pino's own exit hook: that hook flushes
  // synchronously and, on a full pipe, would retry forever or throw.
  if (opts.ownsProcess) process.once('exit', () => flushLogSync(log));
  const dest = pino.destination({
    dest: 1,
    sync: false,
    // Written in batches (a write per line was a thread-pool round trip per response); at least every 100 ms.
    minLength: 4096,
    periodicFlush: 100,
    ...(Number.isFinite(max) && max > 0 ? { maxLength: max } : {}),
    // A full pipe: keep retrying while running (the buffer is bounded); when exiting, only until the deadline.
    retryEAGAIN: () => !state.broken && (state.flushUntil === 0 || performance.now() < state.flushUntil),
  });
  const log = pino({ level }, dest);
  sinks.set(log, { state, dest });
  // A report that is itself dropped gives its count back.
  dest.on('drop', () => void (state.dropped += state.reporting > 0 ? state.reporting : 1));
  dest.on('drain', () => reportDrops(log));
  // stdout closed under us (EPIPE: the reader is gone): nothing can be written any more, which must not crash the server.
  dest.on('error', () => void state.dropped++);
  return log;
}

interface SinkState {
  /** Lines dropped since the last report. */
  dropped: number;
  /** While a report is being written: the count it carries. */
  reporting: number;
  /** Once exiting: when the exit flushes give up on a stdout nobody reads (0: not exiting). */
  flushUntil: number;
  /** A synchronous exit flush's write failed for good (EPIPE: the reader is gone): give up at once. */
  broken: boolean;
}
interface Sink {
  state: SinkState;
  dest: { flushSync(): void; destroy(): void; destroyed?: boolean };
}
/** Per logger made by `createLogger` (not the pretty one). */
const sinks = new WeakMap<Logger, Sink>();

function reportDrops(log: Logger): void {
  const state = sinks.get(log)?.state;
  if (!state || state.dropped === 0) return;
  const n = state.dropped;
  state.dropped = 0;
  state.reporting = n;
  try {
    log.warn({ dropped: n }, `${n} log lines were dropped: stdout was not read fast enough (--max-log-buffer-bytes)`);
  } finally {
    state.reporting = 0;
  }
}

/** Start (once) the exit deadline the flushes share. */
function exiting(state: SinkState): void {
  if (state.flushUntil === 0) state.flushUntil = performance.now() + EXIT_FLUSH_MS;
}

/**
 * Write every log line still waiting, and how many were dropped, then
 * resolve, by the shared exit deadline at the latest. The way to stop
 * cleanly: unlike `flushLogSync` it also waits for a write already in
 * flight.
 */
export function flushLog(log: Logger): Promise<void> {
  const sink = sinks.get(log);
  if (sink) exiting(sink.state);
  reportDrops(log);
  const left = sink ? Math.max(0, sink.state.flushUntil - performance.now()) : EXIT_FLUSH_MS;
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, left);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    try {
      log.flush(done);
    } catch {
      done();
    }
  });
}

/**
 * Write every log line still waiting, and how many were dropped,
 * synchronously (the process exits now), until the shared exit deadline;
 * then drop what is left. A write already in flight is not waited for.
 * Never throws.
 */
export function flushLogSync(log: Logger): void {
  const sink = sinks.get(log);
  if (!sink || sink.dest.destroyed) return;
  exiting(sink.state);
  try {
    flushSyncBounded(sink);
    reportDrops(log);
    flushSyncBounded(sink);
  } catch {
    // stdout is gone (a closed pipe) or nobody read it before the deadline.
  }
  try {
    sink.dest.destroy();
  } catch {
    // Already closing.
  }
}

/**
 * sonic-boom's `flushSync`, made to give up on a write that fails for good. It asks `retryEAGAIN` only about
 * EAGAIN and EBUSY and retries any other failure every 100 ms for ever: with the reader of stdout gone (EPIPE) a
 * process exiting with lines still waiting never exited (an `llr serve` whose parent was killed ignored SIGTERM,
 * its main thread asleep in that loop; outside attack). Its synchronous writes are seen here, for this call only:
 * such a failure marks the sink broken and is handed on as EAGAIN, which `retryEAGAIN` then refuses, so
 * `flushSync` throws.
 */
function flushSyncBounded(sink: Sink): void {
  const write = fs.writeSync;
  const state = sink.state;
  const bounded = function (this: unknown, ...args: unknown[]): number {
    try {
      return (write as (...a: unknown[]) => number).apply(this, args);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code !== 'EAGAIN' && e.code !== 'EBUSY') {
        state.broken = true;
        e.code = 'EAGAIN';
      }
      throw e;
    }
  };
  (fs as { writeSync: unknown }).writeSync = bounded;
  try {
    sink.dest.flushSync();
  } finally {
    (fs as { writeSync: unknown }).writeSync = write;
  }
}
