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
import type { Router } from '../pipeline/route.js';
import type { ResponseStore } from '../store/types.js';
import type { RunRecords } from './records.js';

/**
 * The optimizations this project reproduces, each switchable so its
 * contribution can be measured (see docs/architecture.md). They affect the
 * continuation designs; the HTTP baseline does all the work every time.
 */
export interface Switches {
  /** ws: keep the previous response's rendered tokens; off → re-render the whole context. */
  rendered_token_cache: boolean;
  /** ws / long-lived: validate and scan only new items; off → the whole context every time. */
  incremental_checks: boolean;
  /** ws / long-lived: reuse the routing decision; off → route (and pay the hops) again. */
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
}

export const DEFAULT_SWITCHES: Switches = {
  rendered_token_cache: true,
  incremental_checks: true,
  routing_reuse: true,
  overlap_post_inference: true,
  skip_intermediate_hop: true,
  overlap_persist: false,
};

export interface Limits {
  /** Largest WebSocket frame / HTTP body, bytes (default 16 MiB). */
  maxFrameBytes: number;
  /** Longest a long-lived run may stay paused, ms (default 10 minutes). */
  pauseTimeoutMs: number;
  /** Most tool calls one pause may wait for (default 128). */
  maxPendingCalls: number;
  /** Most `response.create` frames queued behind the one in flight (default 64). */
  maxQueuedCreates: number;
  /** WebSocket connection lifetime, ms (default 60 minutes). */
  connectionLifetimeMs: number;
  /** Bytes a WebSocket may hold unsent for a client that does not read (default 64 MiB); past it the connection is dropped. */
  maxSendBufferBytes: number;
  /** Bytes (JSON) of items one long-lived run or ws-mode response may hold in its context (default 32 MiB). */
  maxContextBytes: number;
  /** Items one long-lived run or ws-mode response may hold in its context (default 50,000). */
  maxContextItems: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxFrameBytes: 16 * 1024 * 1024,
  pauseTimeoutMs: 10 * 60 * 1000,
  maxPendingCalls: 128,
  maxQueuedCreates: 64,
  connectionLifetimeMs: 60 * 60 * 1000,
  maxSendBufferBytes: 64 * 1024 * 1024,
  maxContextBytes: 32 * 1024 * 1024,
  maxContextItems: 50_000,
};

export interface Services {
  model: Model;
  router: Router;
  store: ResponseStore;
  ledger: Ledger;
  post: PostInference;
  postWork: PostWorkTracker;
  records: RunRecords;
  log: Logger;
  clock: Clock;
  switches: Switches;
  limits: Limits;
}
