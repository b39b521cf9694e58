/**
 * The `llr serve` flags for every limit in `Limits` (src/engine/services.ts):
 * one table gives each flag its option name, environment variable and help
 * line, so the parser, `--help` and the docs (docs/reliability.md) cannot
 * drift apart. Used by src/cli.ts; pure, so the tests can check that every
 * limit has a flag.
 */
import { DEFAULT_LIMITS, type Limits } from './engine/services.js';
import { fromEnvironment, numberFlag, stringOptions, UsageError, type NumberRange } from './flags.js';
import { quoted } from './terminal-text.js';

export interface LimitFlag {
  flag: string;
  key: keyof Limits;
  help: string;
  /** The values taken, where not the default (a whole number >= 0, or Infinity unless a timer's `-ms`). A range here is not a timer's: no 2^31-1 ms cap. */
  range?: NumberRange;
}

/**
 * The deepest `--max-json-depth` taken. The server walks a request's values recursively (JSON.stringify for a tool's
 * size and the rendered prompt, the chunked writer, the validators), each level a few stack frames: with every JSON
 * cap lifted, a tool schema nested 2,500 deep overflowed Node's default stack in JSON.stringify (a 500), and 5,000 in
 * the chunked writer. 1,000 leaves those at least twice over; test/integration/json-depth-ceiling.test.ts sends
 * bodies this deep to every design.
 */
export const MAX_JSON_DEPTH = 1000;

export const LIMIT_FLAGS: readonly LimitFlag[] = [
  { flag: 'max-frame-bytes', key: 'maxFrameBytes', help: 'largest WebSocket frame / HTTP body (>= 1: at 0 every request is refused)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-json-depth', key: 'maxJsonDepth', help: `deepest JSON nesting in a body or frame (at most ${MAX_JSON_DEPTH}: the server's own JSON work, JSON.stringify's included, recurses per level, and far deeper values overflowed its stack, a 500)`, range: { integer: true, min: 1, max: MAX_JSON_DEPTH } },
  { flag: 'max-message-fragments', key: 'maxMessageFragments', help: 'frames one WebSocket message may come in (its first and continuations); past it invalid_websocket_frame, close 1008 (Infinity: none)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'pause-timeout-ms', key: 'pauseTimeoutMs', help: 'longest a long-lived run stays paused (0: a run ends at its first pause; unlike the HTTP timeouts 0 is not "none")' },
  { flag: 'sse-heartbeat-ms', key: 'sseHeartbeatMs', help: "while a long-lived run over HTTP is paused, an SSE comment (': keep-alive') on its stream this often, so a client's read timeout does not fire while its tools run; none while bytes wait unsent (0: none)" },
  { flag: 'max-pause-snapshot-bytes', key: 'maxPauseSnapshotBytes', help: "bytes of output (its items' text, as the context budget counts it: up to about twice that as JSON) a long-lived run's pause event (response.done) carries as its full snapshot; past it the pause event is the lean one (--on lean_pause_event's: id, status, usage, pending_tool_calls, no output), each full one having repeated everything so far (Infinity: always full)", range: { integer: true, min: 0, infinity: true } },
  { flag: 'max-pending-calls', key: 'maxPendingCalls', help: 'most tool calls one pause waits for' },
  { flag: 'max-queued-creates', key: 'maxQueuedCreates', help: 'creates queued behind the one in flight, per connection (WebSocket, or HTTP pipelined)' },
  { flag: 'max-queued-bytes', key: 'maxQueuedBytes', help: 'bytes of those queued creates, per connection' },
  { flag: 'send-buffer-bytes', key: 'maxSendBufferBytes', help: 'unsent bytes before a non-reading WS/SSE client is dropped (a run waits for its reader at half of it)' },
  { flag: 'send-buffer-total-bytes', key: 'maxSendBufferTotalBytes', help: 'unsent bytes to all WS/SSE readers together; past it a run whose reader holds 64 KiB or more unsent waits for it to read (nobody is dropped for it)' },
  { flag: 'send-stall-timeout-ms', key: 'sendStallTimeoutMs', help: 'HTTP answer, or a run waiting for its WS reader, left unsent this long with nothing leaving: connection dropped; at shutdown, the longest HTTP answers under way and WebSocket connections closing (terminal event, close frame) get to leave (0: none, and none waited for; keep it above the time a slow reader takes to drain ~1/3 of the kernel send buffer)' },
  { flag: 'ws-close-timeout-ms', key: 'wsCloseTimeoutMs', help: "longest a WebSocket the server closes (a peer's fault, the lifetime limit, shutdown) waits for the peer's close frame, then dropped; at least --send-stall-timeout-ms, so lower both to hold a slot less (0: only that)" },
  { flag: 'lifetime-ms', key: 'connectionLifetimeMs', help: 'WebSocket connection lifetime, and a long-lived run\'s over HTTP (0: every connection is closed at once, not "none")' },
  { flag: 'max-connections', key: 'maxConnections', help: 'open TCP connections; past it 503 too_many_connections (>= 1: at 0 every connection is refused)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'listen-backlog', key: 'listenBacklog', help: "connections the kernel holds completed until the server accepts them (listen's backlog; capped by net.core.somaxconn); past it a new connection's handshake is dropped and retried by the client after 1 s, 3 s, 7 s, …", range: { integer: true, min: 1, max: 2 ** 31 - 1 } },
  { flag: 'max-run-records', key: 'maxRunRecords', help: 'run records kept for GET /llr/runs' },
  { flag: 'max-run-records-bytes', key: 'maxRunRecordsBytes', help: 'estimated bytes of those run records (their spans grow with a run); past it the oldest are dropped, never the newest' },
  { flag: 'max-memory-store-responses', key: 'maxMemoryStoreResponses', help: 'stored responses an in-memory store (--store memory or :memory:) keeps; past it the oldest are evicted' },
  { flag: 'max-memory-store-bytes', key: 'maxMemoryStoreBytes', help: 'bytes (JSON) an in-memory store keeps; past it the oldest are evicted' },
  { flag: 'max-file-store-responses', key: 'maxFileStoreResponses', help: 'stored responses a store on a file (--store PATH) keeps; past it the oldest are deleted' },
  { flag: 'max-file-store-bytes', key: 'maxFileStoreBytes', help: 'bytes (JSON) a store on a file keeps; past it the oldest are deleted (the file keeps its size: freed pages are reused)' },
  { flag: 'store-ttl-ms', key: 'storeTtlMs', help: 'age at which a stored response is gone (404, previous_response_not_found) and deleted, on every store, by later puts and an idle sweep that wakes when the oldest expires (at most once a second, at least once an hour) (>= 1; Infinity: never, no sweep; an age, so above 2^31-1 ms too)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-context-bytes', key: 'maxContextBytes', help: 'bytes (JSON) one long-lived run / ws-mode response keeps in its context (>= 1: at 0 every request is refused)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-context-items', key: 'maxContextItems', help: 'items one long-lived run / ws-mode response keeps in its context (>= 1: at 0 every request is refused)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-cached-lanes', key: 'maxCachedLanes', help: 'WebSocket lanes (stream_id) whose last response a ws-mode connection caches; past it the oldest other lane\'s entry goes (its next continuation loads from the store, or is previous_response_not_found with store: false)', range: { integer: true, min: 1 } },
  { flag: 'cache-reclaim-grace-ms', key: 'cacheReclaimGraceMs', help: "how long after its response ended a ws-mode connection's cached store: false context, whose response ended in client tool calls (its agent is running them), is kept from being let go to make room for other requests (told to try again meanwhile); 0: let go at once, as an idle cache is otherwise; Infinity: until its continuation arrives or its connection ends (an age, so above 2^31-1 ms too)", range: { integer: true, min: 0, infinity: true } },
  { flag: 'max-live-http-runs', key: 'maxLiveHttpRuns', help: 'long-lived runs open over HTTP at once; past it 429' },
  { flag: 'max-background-runs', key: 'maxBackgroundRuns', help: 'background responses (background: true) in flight at once; past it 429' },
  { flag: 'max-queued-listings', key: 'maxQueuedListings', help: 'input_items listings waiting server-wide for a list not yet cached to be read (one list at a time), and as many GET /llr/runs pages waiting to be made (one at a time); past it 429 (>= 1: at 0 no uncached list could ever be listed)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-background-event-bytes', key: 'maxBackgroundEventBytes', help: "bytes of events kept per background response for streams that resume it; past it the oldest are dropped" },
  { flag: 'background-events-ttl-ms', key: 'backgroundEventsTtlMs', help: "how long a background response's events stay after it ends (0: dropped at its end)" },
  { flag: 'max-background-kept-bytes', key: 'maxBackgroundKeptBytes', help: "bytes of ended background responses' events kept server-wide; past it the longest ended go first" },
  { flag: 'headers-timeout-ms', key: 'headersTimeoutMs', help: 'longest to receive an HTTP request\'s headers; past it 408, closed (0: none)' },
  { flag: 'request-timeout-ms', key: 'requestTimeoutMs', help: 'longest to receive a whole HTTP request, body included, or a whole WebSocket message from its first bytes (0: none)' },
  { flag: 'keep-alive-timeout-ms', key: 'keepAliveTimeoutMs', help: 'idle HTTP keep-alive connection closed after (0: none)' },
  { flag: 'ws-idle-timeout-ms', key: 'wsIdleTimeoutMs', help: 'WebSocket peer silent this long (no frame, no pong) is dropped; pinged at half (0: none)' },
  { flag: 'max-server-bytes', key: 'maxServerBytes', help: 'request bytes held server-wide (bodies, queued creates, live contexts, live runs\' spans and long-lived output); past it 503 server_busy (>= 1: at 0 every request is refused)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-tools', key: 'maxTools', help: "entries in one request's tools; past it 400 array_above_max_length" },
  { flag: 'max-json-keys', key: 'maxJsonKeys', help: 'keys in one JSON object of a body or frame (>= 1: at 0 every request is refused)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-json-containers', key: 'maxJsonContainers', help: 'objects and arrays in one body or frame (>= 1: at 0 every request is refused)', range: { integer: true, min: 1, infinity: true } },
  { flag: 'max-schema-nodes', key: 'maxSchemaNodes', help: "subschemas in one request's tool and text.format schemas together" },
  { flag: 'max-logprob-tokens', key: 'maxLogprobTokens', help: "text tokens one response lists logprobs for when its create asks (include message.output_text.logprobs); past it a delta's logprobs are [] and the text part lists no more" },
  { flag: 'max-run-spans', key: 'maxRunSpans', help: "spans one response's timeline (llr:timing, GET /llr/runs) lists; past it (or past --max-server-bytes, which counts a live run's spans) a span only adds to its stage's total and to the spans_dropped counter" },
  { flag: 'max-client-error-logs-per-second', key: 'maxClientErrorLogsPerSecond', help: "info lines about clients' mistakes (refused frames and requests) logged per second, server-wide; past it counted, the count logged (client_errors_unlogged) (Infinity: all)" },
  { flag: 'max-log-buffer-bytes', key: 'maxLogBufferBytes', help: 'log lines waiting for stdout (written asynchronously); past it lines are dropped (0: no limit)' },
];

/** The longest delay a Node timer honours. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `LLR_MAX_JSON_DEPTH` for `max-json-depth`. */
export function envName(flag: string): string {
  return `LLR_${flag.toUpperCase().replace(/-/g, '_')}`;
}

/** The `parseArgs` options for the limit flags. */
export function limitOptions(): Record<string, { type: 'string' }> {
  return stringOptions(LIMIT_FLAGS.map((f) => f.flag));
}

/** The help lines, each with its default. */
export function limitHelp(): string {
  const width = Math.max(24, ...LIMIT_FLAGS.map((f) => f.flag.length + 3));
  return LIMIT_FLAGS.map((f) => `  --${`${f.flag} N`.padEnd(width)}${f.help} (${DEFAULT_LIMITS[f.key]})`).join('\n');
}

/**
 * The limits set by flags (or their environment variables; flags win). A
 * value must be a whole number >= 0 (`Infinity` allowed: no limit; not for
 * a time, as Node fires a timer longer than 2^31-1 ms at once). A bad value
 * is a `UsageError`.
 */
export function limitsFrom(values: Record<string, unknown>, env: Record<string, string | undefined>): Partial<Limits> {
  const out: Partial<Limits> = {};
  for (const f of LIMIT_FLAGS) {
    const fromEnv = env[envName(f.flag)];
    const flagged = typeof values[f.flag] === 'string';
    const raw = flagged ? (values[f.flag] as string) : fromEnv === '' ? undefined : fromEnv;
    if (raw === undefined) continue;
    const read = (): number | undefined => {
      if (f.range) return numberFlag(raw, f.flag, f.range);
      const ms = f.flag.endsWith('-ms');
      // Node fires a timer longer than 2^31-1 ms at once: refuse rather than time out immediately.
      if (ms && (raw === 'Infinity' || raw === 'inf' || Number(raw) > MAX_TIMER_MS)) throw new UsageError(`--${f.flag} is at most ${MAX_TIMER_MS} ms (about 24.8 days), got ${quoted(raw)}`);
      // Whole numbers: Node refuses a fractional HTTP timeout with its own message, and half a byte or a connection means nothing.
      return numberFlag(raw, f.flag, { integer: true, infinity: !ms });
    };
    // A bad value from the environment names the variable too: the flag alone sent a user who never typed it looking for it.
    out[f.key] = flagged ? read() : fromEnvironment(envName(f.flag), read);
  }
  return out;
}
