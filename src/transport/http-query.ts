/**
 * What the HTTP routes read from a request besides its body: the query
 * parameters of a create (`?protocol=`), a retrieve (`stream`,
 * `starting_after`, `include`) and a page of run records, a path segment's
 * percent-encoding, the timing opt-in header, a POST's content and transfer
 * codings, and an append body's `response_id`. Each refusal is a `WireError`
 * naming its parameter. Pure: no I/O. Used by transport/http.ts (and the
 * demo's and WebSocket routes for the content type and timing header).
 */
import type { IncomingMessage } from 'node:http';
import { WireError } from '../protocol/errors.js';
import type { HttpProtocol } from '../protocol/designs.js';
import { checkInclude } from '../store/input-items.js';
import { limitParam, orderParam, singleParam } from '../protocol/list-query.js';

/** `GET /llr/runs` page size: default and most. */
export const RUNS_PAGE_DEFAULT = 100;
export const RUNS_PAGE_MAX = 1000;

/** `?protocol=` of `POST /v1/responses`: absent or `http` is the baseline, `long-lived` the long-lived Response over HTTP. */
export function createProtocol(url: URL): HttpProtocol {
  if (url.searchParams.getAll('protocol').length > 1) {
    throw new WireError('invalid_value', "'protocol' is given more than once: give it once.", 'protocol');
  }
  const q = url.searchParams.get('protocol');
  if (q === null || q === 'http') return 'http';
  if (q === 'long-lived') return 'long-lived-http';
  throw new WireError('invalid_value', `Unknown protocol '${q.slice(0, 100)}': use 'long-lived', or 'http' (or nothing) for the HTTP + SSE baseline.`, 'protocol');
}

/**
 * Whether a request or WebSocket upgrade opts in to the `llr:timing`
 * extension event with `X-LLR-Timing: 1` (this project's clients and
 * benchmarks do; the create body's `llr.timing` and the upgrade query
 * `?llr_timing=1` are the other ways). Clients that did not ask get the
 * standard stream unchanged: openai-node's `responses.stream()` helper
 * throws on any event type it does not know, and the AI SDK and the Agents
 * SDK would take it for part of the next turn. The timing is in the run
 * record (`GET /llr/runs/{id}`) either way.
 */
export function timingHeader(req: IncomingMessage): boolean {
  return req.headers['x-llr-timing'] === '1';
}

/**
 * An append body may carry `response_id`, as a `response.append` event does: it must then be the path's. It was
 * ignored, so a body meant for another run (`{response_id: B, input: "…"}` posted to A's path) landed in A.
 */
export function checkAppendResponseId(body: unknown, id: string): void {
  const named = (body as Record<string, unknown>)['response_id'];
  if (named === undefined || named === null) return;
  if (typeof named !== 'string') throw new WireError('invalid_type', "Invalid type for 'response_id': expected a string.", 'response_id');
  if (named !== id) {
    throw new WireError(
      'invalid_value',
      `The body's response_id '${named.slice(0, 100)}' is not the response of the path ('${id.slice(0, 100)}'); leave it out or make them the same.`,
      'response_id',
    );
  }
}

/** A path segment decoded; bad percent-encoding is the client's mistake. */
export function decodeId(raw: string, param: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new WireError('invalid_value', `Invalid '${param}': '${raw.slice(0, 100)}' is not valid percent-encoding.`, param);
  }
}

/**
 * POST bodies must be JSON. `application/json` with an optional
 * `charset=utf-8` is accepted (the openai SDKs and Codex send it); any other
 * type (e.g. the `x-www-form-urlencoded` of `curl -d`, or the `text/plain` a
 * browser form may send without a CORS preflight) gets 415. A request with
 * no `Content-Type` at all is accepted as JSON (documented).
 */
export function checkJsonContentType(req: IncomingMessage): void {
  // A compressed body would be read as its compressed bytes (`invalid_json`, or worse, a body that happens to parse):
  // this server decodes none, so it says so (415), as it does for a media type it does not read.
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
    throw new WireError('unsupported_media_type', `Unsupported Content-Encoding '${encoding.slice(0, 100)}': send the body uncompressed.`, 'Content-Encoding');
  }
  // The same for a transfer coding other than `chunked` (`Transfer-Encoding: gzip, chunked`): Node removes the
  // chunking only, and the body was read as its gzip bytes, or taken as sent when it was not compressed after all.
  const codings = (req.headers['transfer-encoding'] ?? '')
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '' && t !== 'chunked');
  if (codings.length > 0) {
    throw new WireError('unsupported_media_type', `Unsupported Transfer-Encoding '${codings.join(', ').slice(0, 100)}': send the body uncompressed ('chunked' alone, or a Content-Length).`, 'Transfer-Encoding');
  }
  const ct = req.headers['content-type'];
  if (ct === undefined) return;
  const [type, ...params] = ct.split(';').map((p) => p.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/"/g, '');
  if (type === 'application/json' && (charset === undefined || charset === 'utf-8' || charset === 'utf8')) return;
  throw new WireError(
    'unsupported_media_type',
    `Unsupported Content-Type '${ct.slice(0, 100)}': send the body as 'application/json' (UTF-8).`,
    'Content-Type',
  );
}

/**
 * The query of `GET /v1/responses/{id}` (openai-node's `ResponseRetrieveParams`): whether it asks for the stream.
 * `stream` and `include_obfuscation` are `true` or `false`, each given at most once, and `include` takes the API's
 * `ResponseIncludable` values, as for `input_items` (they change nothing: the response is returned as stored); they
 * were read loosely, so `stream=1` or `stream=yes` got the JSON, `stream=true&stream=false` the stream, and an unknown
 * `include` passed. Else 400 `invalid_value` naming the parameter.
 */
export function retrieveQuery(q: URLSearchParams): boolean {
  const flag = (name: string): boolean => {
    const v = singleParam(q, name);
    if (v === null || v === 'false') return false;
    if (v === 'true') return true;
    throw new WireError('invalid_value', `Invalid value for '${name}': expected 'true' or 'false', but got '${v.slice(0, 100)}' instead.`, name);
  };
  const stream = flag('stream');
  flag('include_obfuscation');
  checkInclude(q);
  return stream;
}

/** `?starting_after=N` of a streamed retrieve: a sequence number (an integer >= 0), or null when absent. */
export function startingAfter(url: URL): number | null {
  // Given twice it has no one meaning (the first was taken silently), as for `protocol`.
  if (url.searchParams.getAll('starting_after').length > 1) {
    throw new WireError('invalid_value', "'starting_after' is given more than once: give it once.", 'starting_after');
  }
  const raw = url.searchParams.get('starting_after');
  if (raw === null) return null;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n)) {
    throw new WireError('invalid_value', "Invalid 'starting_after': expected a sequence number (an integer >= 0).", 'starting_after');
  }
  return n;
}

/** `?limit=` (1–1000, default 100), `?after=` (a record id), `?order=asc|desc` (default desc). */
export function pageQuery(url: URL): { limit: number; after: string | null; order: 'asc' | 'desc' } {
  const q = url.searchParams;
  return { limit: limitParam(q, RUNS_PAGE_DEFAULT, RUNS_PAGE_MAX), after: singleParam(q, 'after'), order: orderParam(q) };
}
