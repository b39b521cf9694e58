/**
 * The server's pino logger: pretty lines when a person is watching a
 * terminal, JSON lines otherwise (files, pipes, CI). `LLR_LOG_LEVEL` or the
 * `level` option sets the level; tests pass `silent`.
 */
import { pino, type Logger } from 'pino';

export function createLogger(opts: { level?: string; pretty?: boolean } = {}): Logger {
  const level = opts.level ?? process.env['LLR_LOG_LEVEL'] ?? 'info';
  const pretty = opts.pretty ?? Boolean(process.stdout.isTTY);
  if (pretty) {
    return pino({
      level,
      transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true } },
    });
  }
  return pino({ level });
}
