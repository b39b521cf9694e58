/**
 * The server's pino logger: pretty lines when a person is watching a
 * terminal, JSON lines otherwise (files, pipes, CI). `LLR_LOG_LEVEL` or the
 * `level` option sets the level; tests pass `silent`.
 *
 * JSON lines go to stdout asynchronously (sonic-boom without `sync`), in
 * batches of 4 KiB and at least every 100 ms: a synchronous write per line
 * — one per response — was a system call on the event loop at every
 * ws-mode step, and a stdout nobody reads would have stalled the whole
 * server. Call `log.flush()` after a line someone waits for (the listening line). What waits is bounded by `maxBufferBytes`
 * (`llr serve --max-log-buffer-bytes`, default 16 MiB): past it lines are
 * dropped, counted, and reported by one warning once stdout drains.
 * `flushLogSync` writes what waits before the process exits (for at most
 * 2 s: a stdout nobody reads cannot keep the process alive).
 */
import { pino, type Logger } from 'pino';
import { DEFAULT_LIMITS } from './engine/services.js';

export function createLogger(opts: { level?: string; pretty?: boolean; maxBufferBytes?: number } = {}): Logger {
  const level = opts.level ?? process.env['LLR_LOG_LEVEL'] ?? 'info';
  const pretty = opts.pretty ?? Boolean(process.stdout.isTTY);
  if (pretty) {
    return pino({
      level,
      transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true } },
    });
  }
  const max = opts.maxBufferBytes ?? DEFAULT_LIMITS.maxLogBufferBytes;
  const state: SinkState = { dropped: 0, reporting: 0, flushUntil: 0 };
  const dest = pino.destination({
    dest: 1,
    sync: false,
    // Written in batches (a write per line was a thread-pool round trip per response); at least every 100 ms.
    minLength: 4096,
    periodicFlush: 100,
    ...(Number.isFinite(max) && max > 0 ? { maxLength: max } : {}),
    // A full pipe: keep retrying while running (the buffer is bounded); at exit, only until the flush's deadline.
    retryEAGAIN: () => state.flushUntil === 0 || performance.now() < state.flushUntil,
  });
  const log = pino({ level }, dest);
  sinks.set(log, state);
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
  /** While exiting: when `flushLogSync` gives up on a stdout nobody reads (0: not exiting). */
  flushUntil: number;
}
/** Per logger made by `createLogger`. */
const sinks = new WeakMap<Logger, SinkState>();
/** Longest `flushLogSync` waits for a stdout that does not take its lines. */
const EXIT_FLUSH_MS = 2000;

function reportDrops(log: Logger): void {
  const state = sinks.get(log);
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

/**
 * Write every log line still waiting, and how many were dropped, then
 * resolve (at most `EXIT_FLUSH_MS` later: a stdout nobody reads cannot keep
 * a stopping server alive). The way to stop cleanly: unlike `flushLogSync`
 * it also waits for a write already in flight.
 */
export function flushLog(log: Logger): Promise<void> {
  reportDrops(log);
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, EXIT_FLUSH_MS);
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
 * synchronously (a process that exits now: a crash); a write already in
 * flight is not waited for. Gives up after `EXIT_FLUSH_MS` on a stdout nobody reads,
 * so such a server still exits; never throws.
 */
export function flushLogSync(log: Logger): void {
  const stream: unknown = Reflect.get(log, pino.symbols.streamSym);
  const state = sinks.get(log);
  if (state) state.flushUntil = performance.now() + EXIT_FLUSH_MS;
  try {
    if (typeof stream === 'object' && stream !== null && 'flushSync' in stream && typeof stream.flushSync === 'function') {
      stream.flushSync();
      reportDrops(log);
      stream.flushSync();
    }
  } catch {
    // stdout is gone (a closed pipe): nothing left to write to.
  }
}
