/**
 * Wire errors: one `as const` table of codes with their HTTP status, error
 * type and default message, and the `WireError` class that carries one.
 *
 * A `WireError` is the client's fault or a documented protocol condition and
 * becomes an `error` event (WebSocket), an SSE `error` event, or an HTTP error
 * body. Anything else thrown at a boundary is a server fault and is reported
 * as `server_error` (see `toWireError`), never as the client's fault.
 */
import type { ErrorEvent, WireErrorBody } from './events.js';

export const WIRE_ERRORS = {
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The frame is not valid JSON.' },
  unknown_event_type: { status: 400, type: 'invalid_request_error', message: 'Unknown event type.' },
  binary_frame: { status: 400, type: 'invalid_request_error', message: 'Binary frames are not supported; send JSON text frames.' },
  missing_required_parameter: { status: 400, type: 'invalid_request_error', message: 'Missing required parameter.' },
  invalid_type: { status: 400, type: 'invalid_request_error', message: 'Invalid type for parameter.' },
  invalid_value: { status: 400, type: 'invalid_request_error', message: 'Invalid value for parameter.' },
  // The API's code for an input item whose `id` does not begin with its type's prefix (`msg`, `fc`, `rs`, `ctc`), as public
  // client reports quote it: "Invalid 'input[274].id': 'item_…'. Expected an ID that begins with 'fc'."
  invalid_id_prefix: { status: 400, type: 'invalid_request_error', message: 'Invalid ID prefix.' },
  // The API's code for a field it does not know (a typo, another endpoint's field): `Unknown parameter: 'x'.`
  unknown_parameter: { status: 400, type: 'invalid_request_error', message: 'Unknown parameter.' },
  // The API's code for a parameter it knows but will not take here; this server's: a feature it does not serve.
  unsupported_parameter: { status: 400, type: 'invalid_request_error', message: 'Unsupported parameter.' },
  // The API's code for a value it knows but will not take in this request; this server's: a forced tool call the simulated model never makes.
  unsupported_value: { status: 400, type: 'invalid_request_error', message: 'Unsupported value.' },
  no_paused_response: { status: 400, type: 'invalid_request_error', message: 'There is no paused response on this connection to append to.' },
  unknown_call_id: { status: 400, type: 'invalid_request_error', message: 'No pending function call with this call_id.' },
  // The API's refusal of a continuation (or an input) that leaves a client tool call without its output; its code there is null.
  missing_tool_output: { status: 400, type: 'invalid_request_error', message: 'No tool output found for a tool call in the context.' },
  // The API's refusal of a create whose context (the `previous_response_id` chain, then `input`) holds an input item whose
  // `id` is already there: "Duplicate item found with id rs_…. Remove duplicate items from your input and try again."; its
  // code there is null.
  duplicate_item: { status: 400, type: 'invalid_request_error', message: 'Duplicate item found in the input.' },
  no_response_in_flight: { status: 400, type: 'invalid_request_error', message: 'There is no response in flight on this connection to cancel.' },
  previous_response_not_found: { status: 400, type: 'invalid_request_error', message: 'Previous response not found.' },
  response_not_found: { status: 404, type: 'invalid_request_error', message: 'Response not found.' },
  item_not_found: { status: 400, type: 'invalid_request_error', message: 'Referenced item not found.' },
  content_flagged: { status: 400, type: 'invalid_request_error', message: 'The input was flagged by the safety scan.' },
  model_not_found: { status: 400, type: 'invalid_request_error', message: 'The requested model does not exist.' },
  // The API's answer to a wrong key (type and code as it sends them; to a missing key its code is null, here this one).
  invalid_api_key: { status: 401, type: 'invalid_request_error', message: 'Incorrect API key provided.' },
  payload_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is too large.' },
  websocket_connection_limit_reached: {
    status: 400,
    type: 'invalid_request_error',
    message: 'Responses websocket connection limit reached (60 minutes). Create a new websocket connection to continue.',
  },
  too_many_pending_calls: { status: 500, type: 'server_error', message: 'The model made more tool calls than one pause may wait for.' },
  queue_full: { status: 429, type: 'rate_limit_error', message: 'Too many queued requests on this connection.' },
  too_many_live_runs: { status: 429, type: 'rate_limit_error', message: 'Too many long-lived runs are open over HTTP; try again when one ends.' },
  too_many_background_runs: { status: 429, type: 'rate_limit_error', message: 'Too many background responses are in flight; try again when one ends.' },
  too_many_listings: { status: 429, type: 'rate_limit_error', message: 'Too many input_items listings are waiting for their lists to be read; try again shortly.' },
  not_found: { status: 404, type: 'invalid_request_error', message: 'Not found.' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'Method not allowed.' },
  server_error: { status: 500, type: 'server_error', message: 'The server had an error while processing the request.' },
  server_shutting_down: { status: 503, type: 'server_error', message: 'The server is shutting down.' },
  // A background response another server process on the same store file runs: only that process can cancel it, and a
  // delete here would be undone by its final write.
  response_running_elsewhere: {
    status: 409,
    type: 'invalid_request_error',
    message: 'The response is a background response running in another server process on this store; cancel or delete it through that server, or once it has ended.',
  },
  // The store's file failed a read or write (SQLite: locked by another process, disk full, read-only, not a database).
  store_unavailable: { status: 503, type: 'server_error', message: 'The response store could not be read or written; try again later.' },
  duplicate_call_id: { status: 500, type: 'server_error', message: 'The model made two tool calls with the same call_id.' },
  context_length_exceeded: {
    status: 400,
    type: 'invalid_request_error',
    message: "The response's context is larger than this server keeps for one response.",
  },
  // Edge limits and checks (issue 7): each a client mistake or a documented limit, never a 500.
  json_too_deep: { status: 400, type: 'invalid_request_error', message: 'The JSON nests deeper than this server accepts.' },
  integer_below_min_value: { status: 400, type: 'invalid_request_error', message: 'Integer below minimum value.' },
  integer_above_max_value: { status: 400, type: 'invalid_request_error', message: 'Integer above maximum value.' },
  decimal_below_min_value: { status: 400, type: 'invalid_request_error', message: 'Decimal below minimum value.' },
  decimal_above_max_value: { status: 400, type: 'invalid_request_error', message: 'Decimal above maximum value.' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: "The request body must be JSON ('Content-Type: application/json')." },
  origin_not_allowed: { status: 403, type: 'invalid_request_error', message: 'Requests from this Origin are not allowed.' },
  host_not_allowed: { status: 403, type: 'invalid_request_error', message: 'This Host header is not allowed.' },
  too_many_connections: { status: 503, type: 'server_error', message: 'The server has too many open connections; try again later.' },
  request_aborted: { status: 400, type: 'invalid_request_error', message: 'The client closed the connection before the request body ended.' },
  send_buffer_full: { status: 400, type: 'invalid_request_error', message: 'The client did not read the stream; too much was left unsent.' },
  too_many_races: { status: 429, type: 'rate_limit_error', message: 'Too many demo races are running; try again when one ends.' },
  invalid_tool_schema: { status: 400, type: 'invalid_request_error', message: "A tool's parameters schema cannot be satisfied by bounded arguments." },
  injected_fault: { status: 500, type: 'server_error', message: 'An injected fault (llr serve --chaos) failed this response.' },
  // WebSocket upgrades refused before a connection exists (the ws library's handshake checks: 400, or 405 for a method).
  invalid_websocket_handshake: { status: 400, type: 'invalid_request_error', message: 'The WebSocket handshake is malformed.' },
  // A WebSocket frame the `ws` library refuses (bad UTF-8, a malformed frame), said before its close (1007, 1002).
  invalid_websocket_frame: { status: 400, type: 'invalid_request_error', message: 'A WebSocket frame breaks the protocol.' },
  // WebSockets switched off (`llr serve --no-websockets`): clients fall back to HTTP.
  upgrade_required: { status: 426, type: 'invalid_request_error', message: 'WebSockets are switched off on this server; use HTTP.' },
  // The server-wide byte budget (`maxServerBytes`, llr serve --max-server-bytes) is spent: try again when other requests end.
  server_busy: { status: 503, type: 'server_error', message: 'The server holds too much request data at once; try again later.' },
  // Size caps on one request (issue 7: no request holds the event loop): the API's own where it has one.
  array_above_max_length: { status: 400, type: 'invalid_request_error', message: 'Array too long.' },
  object_above_max_properties: { status: 400, type: 'invalid_request_error', message: 'Object has too many properties.' },
  string_above_max_length: { status: 400, type: 'invalid_request_error', message: 'String too long.' },
  empty_string: { status: 400, type: 'invalid_request_error', message: 'Empty string.' },
  empty_array: { status: 400, type: 'invalid_request_error', message: 'Empty array.' },
  invalid_json_schema: { status: 400, type: 'invalid_request_error', message: "The 'text.format' JSON schema cannot be satisfied by bounded output." },
  // The API's code for a function tool's `parameters` it refuses: not an object schema, or outside the strict subset with `strict: true`.
  invalid_function_parameters: { status: 400, type: 'invalid_request_error', message: "A function tool's parameters are not a valid schema." },
  // Requests Node's HTTP parser refuses before any route sees them (transport/raw-answers.ts `answerClientError`).
  invalid_http_request: { status: 400, type: 'invalid_request_error', message: 'The HTTP request is malformed.' },
  request_timeout: { status: 408, type: 'invalid_request_error', message: 'The request did not arrive in time (llr serve --headers-timeout-ms, --request-timeout-ms).' },
  expectation_failed: { status: 417, type: 'invalid_request_error', message: "The request's Expect header asks for what this server does not do (only '100-continue' is supported)." },
  request_headers_too_large: { status: 431, type: 'invalid_request_error', message: "The request's headers are larger than the server accepts." },
  // A request line whose version is not HTTP/1.x (HTTP/2.0, HTTP/0.9 or none, the HTTP/2 preface, HTTP/3.0): RFC 9112 §2.3.
  http_version_not_supported: { status: 505, type: 'invalid_request_error', message: 'This server speaks HTTP/1.1 and HTTP/1.0 only.' },
} as const satisfies Record<string, { status: number; type: WireErrorBody['type']; message: string }>;

export type WireErrorCode = keyof typeof WIRE_ERRORS;

/**
 * Characters of an error's `message` (and `param`) sent at most: past it the text is cut and ends with `…`. Messages
 * quote what the client sent (an item id, a path, a key), and a quote has no bound of its own but the body's: an
 * `item_reference` with an id of 1 MB was refused with that megabyte in the message, and a 16 KB path was echoed in a
 * 404 (outside attack). Sites that quote an id cut it to 100 characters themselves; this bounds every other.
 */
export const MAX_ERROR_TEXT_CHARS = 2_000;

/**
 * The first `max` characters of `JSON.stringify(value)` (a message quoting what the client sent), made without
 * serialising the rest: a quoted value may be a whole body's worth (a schema's `type` of 16 MiB: one stringify of it
 * to keep 100 characters held the loop ~200 ms; outside attack). Reads at most about `max` characters of it.
 */
export function jsonPreview(value: unknown, max = 100): string {
  let out = '';
  const put = (s: string): boolean => {
    out += s;
    return out.length < max;
  };
  const walk = (v: unknown): boolean => {
    if (typeof v === 'string') return put(JSON.stringify(v.length > max ? v.slice(0, max + 1) : v));
    if (Array.isArray(v)) {
      if (!put('[')) return false;
      for (let i = 0; i < v.length; i++) {
        const x: unknown = v[i];
        if ((i > 0 && !put(',')) || !walk(x === undefined ? null : x)) return false;
      }
      return put(']');
    }
    if (v !== null && typeof v === 'object') {
      if (!put('{')) return false;
      let first = true;
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        const x = (v as Record<string, unknown>)[k];
        if (x === undefined || typeof x === 'function') continue;
        if ((!first && !put(',')) || !put(`${JSON.stringify(k.length > max ? k.slice(0, max + 1) : k)}:`) || !walk(x)) return false;
        first = false;
      }
      return put('}');
    }
    return put(JSON.stringify(v) ?? 'null');
  };
  walk(value);
  return out.slice(0, max);
}

/** `text` cut to `max` UTF-16 units with `…` added, never between a surrogate pair's halves. */
export function clipText(text: string, max: number = MAX_ERROR_TEXT_CHARS): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

/** A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `text` with each lone surrogate as U+FFFD (what `String.prototype.toWellFormed` does, Node 20's but not its types). */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, '\ufffd');
}

export class WireError extends Error {
  readonly code: WireErrorCode;
  readonly param: string | null;
  readonly status: number;
  readonly type: WireErrorBody['type'];
  /**
   * The WebSocket lane (`stream_id`) of the `response.create` this error refuses, when the frame named a valid
   * one (protocol/parse.ts); undefined for any other error. The session sends the error in that lane.
   */
  declare lane?: string | null;
  /** A 405's `Allow` header: the methods its route takes (RFC 9110 §15.5.6 requires it); set by `methodNotAllowed`. */
  declare allow?: string;
  /**
   * A failure a client can provoke at will that is no fault of the server's, though the API calls it a
   * `server_error` (a replay past its recorded run's end): a run that ends with it logs a warning with its code,
   * not an error with a stack trace, so that a client asking again and again cannot fill the log with stacks.
   */
  declare foreseen?: true;

  /**
   * For a `server_busy` of the server-wide byte budget: the bytes the refused charge asked for, with what the same
   * operation had charged before it (an append's token ids made so far, `ResponseRun.append`). What a refused append
   * needed at least, to tell whether waiting could ever make room for it (`SessionHost.heldForPeers`).
   */
  declare budgetAsk?: number;

  /** For a `server_busy` of the byte budget: the bytes the server held when the charge was refused, and what it said of
   * its cached contexts kept for their grace (`ServerBytes.charge`): its message is said again with the request's own
   * share (`pastWholeBudget`). */
  declare budgetHeld?: number;
  declare budgetNote?: string;

  /** A refusal that no retry of the same request can mend (`x-should-retry: false` over HTTP, whatever its code). */
  declare noRetry?: true;

  constructor(code: WireErrorCode, message?: string, param: string | null = null, options?: { cause?: unknown }) {
    const entry = WIRE_ERRORS[code];
    // A client's mistake needs no stack (it is the client's, reported to it): capturing one was most of what a refused
    // frame cost (a flood of 7-byte bad frames, ~30 µs each, held the event loop; outside attack). A server fault keeps it.
    const limit = Error.stackTraceLimit;
    if (entry.status < 500) Error.stackTraceLimit = 0;
    // Well-formed: a client's value quoted cut at a surrogate pair (or a lone surrogate it sent) went into the body as
    // a lone surrogate, an escape strict JSON readers refuse (Rust's serde_json, which Codex uses; outside attack).
    super(wellFormed(clipText(message ?? entry.message)), options);
    Error.stackTraceLimit = limit;
    this.name = new.target.name;
    this.code = code;
    this.param = param === null ? null : wellFormed(clipText(param));
    this.status = entry.status;
    this.type = entry.type;
  }

  body(): WireErrorBody {
    return { type: this.type, code: this.code, message: this.message, param: this.param };
  }

  /** The WebSocket shape: the spec's nested `{type:"error", status, error:{…}}`, with the flat fields the SDK types. */
  toEvent(): Omit<ErrorEvent, 'sequence_number'> {
    return { type: 'error', status: this.status, code: this.code, message: this.message, param: this.param, error: this.body() };
  }
}

/**
 * Retry advice an HTTP refusal carries, as the SDKs read it (openai-node and the Agents SDK: `x-should-retry` first,
 * then `retry-after-ms` / `retry-after`; the AI SDK: the two delays). A refusal of load (429, and the 503s of a full
 * budget, connection cap or a store busy past its wait) says when to come back: one second, the scale at which those
 * clear (a run ending, SQLite's 1 s lock wait); without it the SDKs back off 0.5-8 s on their own. A 409
 * `response_running_elsewhere` says not to retry: the SDKs retry every 409 as a lock timeout, but the other process's
 * background run lasts until it ends, so the retries only delay the answer. Others: no advice (the SDK's defaults).
 */
export function retryHeaders(err: WireError): Record<string, string> {
  if (err.noRetry) return { 'x-should-retry': 'false' };
  switch (err.code) {
    case 'queue_full':
    case 'too_many_live_runs':
    case 'too_many_background_runs':
    case 'too_many_listings':
    case 'server_busy':
    case 'store_unavailable':
    case 'too_many_connections':
      return { 'Retry-After': '1', 'Retry-After-Ms': '1000' };
    case 'response_running_elsewhere':
      return { 'x-should-retry': 'false' };
    default:
      return {};
  }
}

/** A 405 for a route that takes only `allow` (e.g. `'GET, HEAD'`): sent with that `Allow` header. */
export function methodNotAllowed(allow: string): WireError {
  const err = new WireError('method_not_allowed', `Method not allowed: this route takes ${allow}.`);
  err.allow = allow;
  return err;
}

/**
 * `Response.error.code` is a closed enum in the API's OpenAPI spec
 * (`ResponseErrorCode`, openai/openai-openapi), and typed clients decode it
 * into one (a Rust serde enum fails the whole event on any other string,
 * e.g. `injected_fault` or `duplicate_call_id`). A failed response carries
 * one of its values: `rate_limit_exceeded` for a rate-limit error, else
 * `server_error` (none of the others, about images and policy, apply here).
 * The precise code still travels in the `error` event sent just before the
 * terminal event, and the message is kept.
 */
export function responseErrorCode(error: WireError): 'server_error' | 'rate_limit_exceeded' {
  return error.type === 'rate_limit_error' ? 'rate_limit_exceeded' : 'server_error';
}

/** Normalise anything thrown at a boundary: unknown faults are the server's. */
export function toWireError(err: unknown): WireError {
  if (err instanceof WireError) return err;
  const store = sqliteFailure(err);
  if (store) {
    // Said with SQLite's own words ('database is locked', 'database or disk is full', 'file is not a database'), not
    // the path (the log has the whole error): a generic 500 "the server had an error" told a client, and an operator
    // reading its answer, nothing of a store another process had locked or a full disk.
    return new WireError('store_unavailable', `The response store could not be read or written (${store.code}: ${store.message}); try again later.`, null, { cause: err });
  }
  return new WireError('server_error', undefined, null, { cause: err });
}

/** A failure of SQLite's (better-sqlite3's `SqliteError`, a `code` of `SQLITE_…`), thrown or the cause of what was. */
function sqliteFailure(err: unknown): { code: string; message: string } | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_')) return { code, message: e.message };
  }
  return undefined;
}

/** Whether a wire error is the server's fault, to be logged as one (at `error`, with the cause), not a refusal. */
export function isServerFault(wire: WireError): boolean {
  return wire.code === 'server_error' || wire.code === 'store_unavailable';
}
