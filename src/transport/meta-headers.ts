/**
 * The API's meta headers on every HTTP answer (its "Debugging requests" guide): `openai-version`, the REST version,
 * and `openai-processing-ms`, the time the request took before its answer's headers. `x-request-id` is set beside
 * them by each answer's maker (its log line names it).
 */
import type { ServerResponse } from 'node:http';

/** The REST version the API's answers name in `openai-version`. */
export const OPENAI_VERSION = '2020-10-01';

/** Whole milliseconds since `since` (a `performance.now()`), as `openai-processing-ms` gives them. */
export function processingMs(since: number): string {
  return String(Math.round(performance.now() - since));
}

/**
 * `openai-processing-ms` on the answer: whole milliseconds from the request's headers being read (`since`) to its
 * answer's headers going out. Every way headers go out (`writeHead`, or the implicit one of `write`, `end` and
 * `flushHeaders`) passes through `writeHead`, so the stamp is taken there, once.
 */
export function stampProcessingTime(res: ServerResponse, since: number): void {
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    if (!this.headersSent) this.setHeader('openai-processing-ms', processingMs(since));
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
}
