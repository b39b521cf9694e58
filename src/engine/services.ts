/**
 * What one server instance shares between its connections and responses:
 * the model, the router, the store, the ledger, post-inference work, the run
 * records, the logger, the clock, and the configuration with its documented
 * defaults and the named optimization switches.
 */
import type { Logger } from 'pino';
import type { Clock } from '../model/clock.js';
import type { Model } from '../model/types.js';
import type { Ledger, PostInference, PostWorkTracker } from '../pipeline/post.js';
import type { InFlightRuns } from './in-flight.js';
import type { Router } from '../pipeline/route.js';
import type { ResponseStore } from '../store/types.js';
import type { RunRecords } from './records.js';
import type { Chaos } from './faults.js';
import type { LogBudget } from './log-budget.js';

/**
 * The optimizations this project reproduces, each switchable so its
 * contribution can be measured (see docs/architecture.md). They affect the
 * continuation designs; the HTTP baseline does all the work every time.
 */
export interface Switches {
  /** ws: keep the previous response's rendered tokens; off → re-render the whole context. */
  rendered_token_cache: boolean;
  /** ws continuations and long-lived appends (pipeline/checks.ts): validate and scan only new items; off → the whole context every time. */
  incremental_checks: boolean;
  /** ws: reuse the cached routing decision; off → route (and pay the hops) again. A long-lived run routes once by construction. */
  routing_reuse: boolean;
  /** ws / long-lived: billing, persistence and the log run after the terminal event. */
  overlap_post_inference: boolean;
  /** ws: a continuation goes straight to the engine that served the previous response, skipping one injected hop. */
  skip_intermediate_hop: boolean;
  /**
   * ws / long-lived, with `overlap_post_inference` on: persist a `store:true`
   * response after its terminal event too. Off (the default): it is committed
   * to the store before the terminal event, so a client that saw
   * `response.completed` can always fetch it, even after a crash.
   */
  overlap_persist: boolean;
  /**
   * long-lived: a pause's `response.done` carries a lean response (id,
   * object, created_at, status, model, previous_response_id, usage,
   * pending_tool_calls) instead of the full snapshot (instructions, tools,
   * every output item so far: tens of KB per pause late in a run). Off (the
   * default): clients receive the full snapshot, as before. The items are in
   * their `output_item.done` events either way; Codex needs only the type.
   */
  lean_pause_event: boolean;
}

export const DEFAULT_SWITCHES: Switches = {
  rendered_token_cache: true,
  incremental_checks: true,
  routing_reuse: true,
  overlap_post_inference: true,
  skip_intermediate_hop: true,
  overlap_persist: false,
  lean_pause_event: false,
};

export interface Limits {
  /** Largest WebSocket frame / HTTP body, bytes (default 16 MiB). */
  maxFrameBytes: number;
  /** Longest a long-lived run may stay paused, ms (default 10 minutes). */
  pauseTimeoutMs: number;
  /**
   * How often a long-lived run over HTTP that is paused sends an SSE comment (`: keep-alive`) on its stream, ms
   * (default 15 s; 0: none): silent for the whole pause, the stream met clients' read timeouts (Node's `fetch` gives
   * up after 300 s, openai-python after 600 s, the default pause timeout) while the client's tools ran.
   */
  sseHeartbeatMs: number;
  /**
   * Bytes of output (its items as the context budget measures them, `itemBytes`) a long-lived run's pause event
   * carries in full (default 256 KiB; Infinity: always): past it a pause's `response.done` is the lean one
   * (`leanSnapshot`, as `--on lean_pause_event` sends it). Each pause's snapshot carried everything so far, so a run
   * of 2,000 steps writing 16 KB arguments sent a 32 MB event at each of its last pauses, 33 GB in all, its step
   * 12.6 → 237 ms (outside attack atk110 F1).
   */
  maxPauseSnapshotBytes: number;
  /** Most tool calls one pause may wait for (default 128). */
  maxPendingCalls: number;
  /** Most `response.create` frames queued behind the one in flight (default 64). */
  maxQueuedCreates: number;
  /** WebSocket connection lifetime, and the longest a long-lived run over HTTP lives, ms (default 60 minutes). */
  connectionLifetimeMs: number;
  /**
   * Bytes one reader (a WebSocket, or an HTTP SSE stream) may leave unsent
   * because it does not read (default 4 MiB); past it the connection is
   * dropped and its run ends as a disconnect. Why 4 MiB: what sits unsent
   * costs about four times its size in RSS (string copies, frames, socket
   * buffers: 64 MiB measured 220–290 MB per slow connection), while a
   * reader that keeps up never has more than a few events pending; a single
   * event larger than the limit still goes out when the buffer is below it.
   * At half of it a run waits for its reader (`Transport.backlog`), so a
   * model faster than a reader that reads is paced instead of dropping it.
   */
  maxSendBufferBytes: number;
  /**
   * Bytes all readers together (WebSocket connections and SSE streams) may
   * leave unsent before runs are paced server-wide (default 256 MiB): past
   * it, a run whose reader holds 64 KiB or more unsent (or half of
   * `maxSendBufferBytes`, when less) waits for it to read, as at the
   * per-reader pacing threshold; nobody is dropped for it
   * (modes/send-bytes.ts).
   */
  maxSendBufferTotalBytes: number;
  /**
   * Longest an HTTP answer (SSE stream or JSON body) may sit unsent to a
   * client that reads nothing, ms (default 30 s; 0: no limit): while bytes
   * wait to be sent and none leave for this long, the connection is dropped
   * (a run still in flight ends as a disconnect). Bounds in time what a
   * non-reading client keeps in memory when its whole answer arrived in one
   * burst, before the send-buffer check (`maxSendBufferBytes`) could trip.
   * Also how long a WebSocket run waits for its reader with nothing leaving.
   */
  sendStallTimeoutMs: number;
  /**
   * Longest a WebSocket the server closes (a peer's fault, the lifetime limit, shutdown) waits for its peer's close
   * frame before it is dropped, ms (default 30 s, the `ws` library's): at least `sendStallTimeoutMs` (a reader behind
   * at shutdown gets what it was sent). A peer that never answered held its connection slot 30 s, no flag (atk70 F3).
   */
  wsCloseTimeoutMs: number;
  /** Bytes (JSON) of items one long-lived run or ws-mode response may hold in its context (default 32 MiB). */
  maxContextBytes: number;
  /** Items one long-lived run or ws-mode response may hold in its context (default 50,000). */
  maxContextItems: number;
  /** WebSocket lanes (`stream_id`) whose last response one ws-mode connection caches (default 16); past it the oldest other lane's entry goes. */
  maxCachedLanes: number;
  /**
   * How long after its response ended a ws-mode connection's cached `store: false` context whose response ended in
   * client tool calls (its agent is running them) is kept from being let go for other requests (`ServerBytes.reclaim`),
   * ms; 0: let go at once like any idle cache.
   */
  cacheReclaimGraceMs: number;
  /** Deepest JSON nesting accepted in an HTTP body or a WebSocket frame (default 64; real tool schemas use < 20). */
  maxJsonDepth: number;
  /**
   * Frames (a first frame and its continuations) one WebSocket message may come in (default 16,384, the `ws`
   * library's own); past it the peer is told (`invalid_websocket_frame`) and the connection closes with 1008. Each
   * fragment is a buffer the library holds until the message ends, so the count bounds that overhead (an empty
   * continuation costs a peer 6 bytes); `Infinity`: none.
   */
  maxMessageFragments: number;
  /** Bytes of `response.create` frames queued behind the one in flight on one connection (default 32 MiB). */
  maxQueuedBytes: number;
  /** Open TCP connections (HTTP and WebSocket) the server accepts at once (default 1024); past it 503 `too_many_connections`. */
  maxConnections: number;
  /**
   * The listening socket's accept queue (`listen(2)`'s backlog, default 1,024, the connection cap's default; Node's own is 511): connections the kernel has
   * completed and the server has not yet accepted. Past it the kernel drops a new connection's handshake and the
   * client retries it after 1 s, 3 s, 7 s, … (a burst of connections at once, e.g. hundreds of long-lived runs
   * over HTTP appending together on fresh connections while the event loop is busy). The kernel caps it at
   * `net.core.somaxconn` (4096 on Linux ≥ 5.4).
   */
  listenBacklog: number;
  /** Run records kept for `GET /llr/runs` (a ring, default 1,000: newest kept). */
  maxRunRecords: number;
  /**
   * Estimated bytes of those records (records.ts `recordBytes`: a record's
   * spans grow with its run's steps, so a count alone did not bound them);
   * past it the oldest are dropped, never the newest.
   */
  maxRunRecordsBytes: number;
  /**
   * Stored responses an in-memory store keeps (`--store memory` or
   * `:memory:`; default 10,000): past it the oldest put is evicted, as the
   * API lets stored responses expire (a GET naming it is 404, a
   * `previous_response_id` 400 `previous_response_not_found`). A store on a
   * file has its own bounds (`maxFileStoreResponses`, `maxFileStoreBytes`).
   */
  maxMemoryStoreResponses: number;
  /** Bytes (JSON, estimated for `--store memory`) an in-memory store keeps (default 256 MiB); past it the oldest are evicted. */
  maxMemoryStoreBytes: number;
  /**
   * Stored responses a store on a file keeps (default 1,000,000); past it the
   * oldest put is deleted with its items, as for an in-memory store. Its own
   * bound, not `maxMemoryStoreResponses`: what it costs is disk, not heap (the
   * store keeps only a count and a byte total in memory), so the bound can be
   * a hundred times higher.
   */
  maxFileStoreResponses: number;
  /**
   * Bytes (the UTF-8 JSON of each response, its input and its items) a store
   * on a file keeps (default 4 GiB: a few hundred thousand responses of a
   * long agent conversation, and a modest share of a disk); past it the
   * oldest are deleted. The file does not shrink: freed pages are reused.
   */
  maxFileStoreBytes: number;
  /**
   * Age (ms after its creation: the millisecond its `created_at` was taken
   * from) at which a stored response is gone, on every store (default 30
   * days, as the API keeps stored responses): a GET
   * naming it is 404, a `previous_response_id` naming it (or a later
   * response of its chain) 400 `previous_response_not_found`, as for an
   * evicted one; later puts and the store's idle sweep (a timer set for
   * when the oldest expires: `ExpirySweep`) delete it, a batch at a time. An
   * age, not a timer's delay, so not capped at 2^31-1 ms; Infinity: kept
   * until evicted, and no sweep.
   */
  storeTtlMs: number;
  /**
   * Long-lived runs open over HTTP at once (`POST /v1/responses?protocol=long-lived`,
   * default 512); past it 429 `too_many_live_runs`. Each also holds an SSE
   * connection (bounded by `maxConnections`); half of those stay free for the
   * appends that resume the runs and for other requests.
   */
  maxLiveHttpRuns: number;
  /**
   * Background responses (`background: true`, modes/background.ts) in flight at once, creates being planned
   * included (default 64); past it 429 `too_many_background_runs`. Each holds its create body until it ends.
   */
  maxBackgroundRuns: number;
  /**
   * `GET /v1/responses/{id}/input_items` listings waiting, server-wide, for a list not yet in its store's cache to be
   * read and its ids derived (modes/cold-listings.ts: one list at a time, in slices; default 64); past it 429
   * `too_many_listings`. A listing of a cached list does not wait.
   */
  maxQueuedListings: number;
  /**
   * Bytes of events kept per background response, for streams that read or resume it (default 4 MiB, the
   * send buffer's); past it the oldest are dropped and a resume from before them is refused (400).
   */
  maxBackgroundEventBytes: number;
  /** How long a background response's events stay after it ended, ms (default 10 minutes; 0: dropped at its end). */
  backgroundEventsTtlMs: number;
  /** Bytes of ended background responses' events kept server-wide (default 64 MiB); past it the longest ended go first. */
  maxBackgroundKeptBytes: number;
  /**
   * Longest an HTTP client may take to send a request's headers, ms (default
   * 10 s; 0: no limit). A connection that opens and sends nothing, or only
   * part of its headers (a half-open or idle client), is closed past it (with
   * Node's `408`), so it cannot hold a connection slot. Also bounds an
   * upgrade request's headers.
   */
  headersTimeoutMs: number;
  /** Longest an HTTP client may take to send a whole request, headers and body, ms (default 60 s; 0: no limit); past it `408` and close. */
  requestTimeoutMs: number;
  /** Longest an HTTP keep-alive connection stays open idle between requests, ms (default 5 s; 0: no limit). */
  keepAliveTimeoutMs: number;
  /**
   * A WebSocket peer from which nothing arrives (no frame, no pong) and
   * which takes no bytes for this long is dropped, ms (default 60 s; 0: no
   * heartbeat; transport/heartbeat.ts). The server pings every half of it;
   * every standard client answers pings on its own, so a
   * client that is silent while its tool runs stays connected (its paused
   * run ends only by the pause timeout, a cancel, or the connection's end).
   * A peer that vanished (half-open TCP) answers no ping and is dropped; its
   * run ends as a disconnect.
   */
  wsIdleTimeoutMs: number;
  /**
   * Bytes the whole server may hold for its clients' requests at once
   * (default 256 MiB): request bodies being read, WebSocket creates queued
   * behind the one in flight and frames being handled, and the contexts
   * that live across model calls (long-lived runs, ws-mode connection
   * caches), and live runs' timelines (their spans) and long-lived runs'
   * output. Each connection has its own budgets (`maxQueuedBytes`,
   * `maxContextBytes`, `maxFrameBytes`); this one bounds their sum over
   * all connections. Past it a request is refused with 503 `server_busy`
   * (over a WebSocket an `error` event; the connection goes on). Kept by
   * the session layer (modes/server-bytes.ts), charged at the edge.
   */
  maxServerBytes: number;
  /** Most entries in one request's `tools` (default 128, the API's cap); past it 400 `array_above_max_length`. */
  maxTools: number;
  /** Most keys in one JSON object of a body or frame (default 10,000); past it 400 `object_above_max_properties`. */
  maxJsonKeys: number;
  /** Most objects and arrays in one body or frame (default 200,000); past it 400 `array_above_max_length`. */
  maxJsonContainers: number;
  /**
   * Most subschemas in one request's schemas, all tools' `parameters` and
   * `text.format.schema` together (default 20,000; the API allows a strict
   * schema 5,000 properties); past it 400 `invalid_tool_schema` /
   * `invalid_json_schema`. Bounds the schema checks' work per request.
   */
  maxSchemaNodes: number;
  /**
   * Bytes of log lines waiting to be written to stdout (default 16 MiB).
   * Lines are written asynchronously: a synchronous write per line (one per
   * response) was a system call on every ws-mode step, and a slow stdout
   * reader would stall the whole server. Past it, lines are dropped (and the
   * next line that fits says how many), rather than the server's memory
   * growing for a reader that does not read. Flushed at shutdown.
   */
  maxLogBufferBytes: number;
  /**
   * `info` lines about clients' mistakes (a refused WebSocket frame, a refused HTTP request) written per second,
   * server-wide (default 100); past it they are counted and the count logged once the second is over
   * (engine/log-budget.ts). A client flooding refused frames wrote ~165 bytes of log per 7-byte frame. Infinity: every line.
   */
  maxClientErrorLogsPerSecond: number;
  /**
   * Spans one response's timeline lists (default 100,000: a long-lived run
   * records about 7 per tool step, so 14,000 steps are listed whole). Past
   * it a span is added to its stage's total and counted in `spans_dropped`,
   * not listed: every append, refused or empty, records spans, so a client
   * could grow a paused run's timeline (its `llr:timing` event, its record)
   * without bound.
   */
  maxRunSpans: number;
  /**
   * Text pieces (tokens) one response lists logprobs for when its create asks
   * (`include: ["message.output_text.logprobs"]`; default 2,048): each holds
   * up to 21 tokens with their bytes (`top_logprobs` 20), ~4.6 KB of heap in
   * the text part it is kept in (`npm run bench:logprobs`), so a long answer
   * held megabytes more than its text. Past it a delta lists none (`logprobs: []`) and the text part no more.
   */
  maxLogprobTokens: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxFrameBytes: 16 * 1024 * 1024,
  pauseTimeoutMs: 10 * 60 * 1000,
  sseHeartbeatMs: 15_000,
  maxPauseSnapshotBytes: 256 * 1024,
  maxPendingCalls: 128,
  maxQueuedCreates: 64,
  connectionLifetimeMs: 60 * 60 * 1000,
  maxContextBytes: 32 * 1024 * 1024,
  maxContextItems: 50_000,
  maxCachedLanes: 16,
  cacheReclaimGraceMs: 30_000,
  maxSendBufferBytes: 4 * 1024 * 1024,
  maxSendBufferTotalBytes: 256 * 1024 * 1024,
  sendStallTimeoutMs: 30_000,
  wsCloseTimeoutMs: 30_000,
  maxJsonDepth: 64,
  maxMessageFragments: 16_384,
  maxQueuedBytes: 32 * 1024 * 1024,
  maxConnections: 1024,
  listenBacklog: 1024,
  maxRunRecords: 1000,
  maxRunRecordsBytes: 64 * 1024 * 1024,
  maxMemoryStoreResponses: 10_000,
  maxMemoryStoreBytes: 256 * 1024 * 1024,
  maxFileStoreResponses: 1_000_000,
  maxFileStoreBytes: 4 * 1024 * 1024 * 1024,
  storeTtlMs: 30 * 24 * 60 * 60 * 1000,
  maxLiveHttpRuns: 512,
  maxBackgroundRuns: 64,
  maxQueuedListings: 64,
  maxBackgroundEventBytes: 4 * 1024 * 1024,
  backgroundEventsTtlMs: 10 * 60 * 1000,
  maxBackgroundKeptBytes: 64 * 1024 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
  wsIdleTimeoutMs: 60_000,
  maxServerBytes: 256 * 1024 * 1024,
  maxTools: 128,
  maxJsonKeys: 10_000,
  maxJsonContainers: 200_000,
  maxSchemaNodes: 20_000,
  maxLogBufferBytes: 16 * 1024 * 1024,
  maxClientErrorLogsPerSecond: 100,
  maxRunSpans: 100_000,
  maxLogprobTokens: 2048,
};

export interface Services {
  model: Model;
  router: Router;
  store: ResponseStore;
  ledger: Ledger;
  post: PostInference;
  postWork: PostWorkTracker;
  /** `store: true` responses being made now, for retrieve (engine/in-flight.ts); absent: none is found before it ends. */
  inFlight?: InFlightRuns;
  records: RunRecords;
  log: Logger;
  clock: Clock;
  switches: Switches;
  limits: Limits;
  /** Chaos knobs (engine/faults.ts); absent or without rules: no fault is injected (the default). */
  chaos?: Chaos;
  /** A create's unknown top-level fields are ignored, not refused `unknown_parameter` (`llr serve --allow-unknown-parameters`). */
  allowUnknownParameters?: boolean;
  /** The server-wide budget of client-error log lines (`maxClientErrorLogsPerSecond`, engine/log-budget.ts); absent: every line. */
  clientErrorLog?: LogBudget;
}
