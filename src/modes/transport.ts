/**
 * The seam between a transport and the session layer. A transport (a
 * WebSocket connection, one HTTP request, the in-memory pair of the unit
 * tests; and a background response, modes/background.ts, which keeps the
 * events for the streams that follow it) gives a session a `Transport`: where its events go and how to drop
 * the peer. It gets back the `ConnectionSession` (modes/session.ts): typed
 * client events in (`handle`), edge errors (`error`), and the ends (`close`
 * when the peer is gone, `finish` when the server ends it).
 *
 * Everything else a transport does is bytes: framing, back-pressure (a
 * reader that does not read is dropped inside `send`, and the transport
 * closes the session with the reason), limits at the edge. Nothing here
 * knows about runs, plans or the engine.
 *
 * Two optional members let a one-shot transport (an HTTP request carries
 * one response and its errors are HTTP statuses) use the same session as a
 * WebSocket connection: `start` opens the stream when a response begins,
 * `refuse` answers an error that no response carries, and `ended` gets the
 * final Response. A WebSocket leaves them out: errors are `error` events.
 */
import type { WireError } from '../protocol/errors.js';
import type { ServerEvent } from '../protocol/events.js';
import type { DeltaBatch } from '../protocol/event-json.js';
import type { Response } from '../protocol/objects.js';

/** What a transport gives a session. */
export interface Transport {
  /**
   * Send one event to the peer (one WebSocket text frame, one SSE frame).
   * Called synchronously by the run: serialise or copy at once. It may
   * throw: the run then fails once with a `server_error`.
   */
  send(event: ServerEvent): void;
  /**
   * Send consecutive deltas of one item, each its own event exactly as
   * `send(batch.event(i))` would send it (one WebSocket message, one SSE
   * frame), in as few writes as the transport can; advance `batch.sent` as
   * each is handed over, so a throw part-way says which went out. Absent:
   * the session sends each delta through `send`.
   */
  sendDeltas?(batch: DeltaBatch): void;
  /** Drop the peer as a server-side fault (chaos knobs): WebSocket close 1011, an SSE stream ends without a terminal event. */
  drop(): void;
  /**
   * Write what this event-loop turn has batched now instead of at its end
   * (transport/batch.ts): the session calls it after a call the client runs
   * (`readyToRun`), the run when the model's stream is over, before the
   * post-inference work. Absent: nothing is batched.
   */
  flush?(): void;
  /** A response is about to start on this transport (HTTP: the SSE headers go out). */
  start?(): void;
  /** A response ended and its terminal event was sent: its final state (HTTP: the JSON body, or the end of the stream). */
  ended?(response: Response): void;
  /**
   * An error no response in flight carries (a refused create, a create the
   * server ended before it started). Absent: an `error` event numbered by
   * the session's own counter. HTTP: an error status and body.
   */
  refuse?(err: WireError): void;
  /**
   * Resolves when the peer has read what was sent so far (the send buffer
   * is flushed, or the peer is gone): a queued create starts only then, so
   * responses pipelined back to back do not get a client that reads, only
   * more slowly, dropped at the send limit; and, on every streaming
   * transport, for a create of `bytes` (its request, which its lifecycle
   * events echo) past the floor of the server-wide bound on unsent bytes,
   * while all readers together are past that bound (`SendShare.room`):
   * false if they still are after the longest wait (the stall timeout),
   * and the create is then refused `server_busy`. Absent or null: at once.
   */
  room?(bytes: number): Promise<boolean> | null;
  /**
   * Null while what is left unsent to the peer stays within half the send
   * limit (`maxSendBufferBytes`); past it, a promise that resolves once the
   * peer has read it all or is gone. A run takes no more of the model's
   * tokens until then (engine/run.ts), so a model faster than its reader
   * (the instant model, a 100,000-token answer) is paced by the reader
   * instead of getting a client that reads dropped at the limit. A peer that
   * reads nothing is dropped after `sendStallTimeoutMs` with nothing leaving.
   * Absent: never waits.
   */
  backlog?(): Promise<void> | null;
  /**
   * The WebSocket lane (`stream_id` of the `response.create` being served,
   * null for none) whose events are sent from now on: each carries it as its
   * `stream_id`, as OpenAI's spec has the events of a response created with
   * one. Absent: lanes are not part of the transport (HTTP).
   */
  lane?(id: string | null): void;
}

export type { ParseSpan } from '../engine/run.js';

/** Who is on the other end: the session's identity, fixed when it opens. */
export interface SessionInfo {
  /** The connection's id (`conn_…`); null for a one-shot HTTP request (its records say `connection: null`). */
  connection: string | null;
  owner: string | null;
  /** The authentication check done before the session opened (upgrade or request), charged to its first response as the `auth` span. */
  authSpan: { start: number; end: number } | null;
  /**
   * Charge `bytes` of request data the session loaded for its work (a stored chain, for a continuation) to this
   * peer's share of the server-wide byte budget (`--max-server-bytes`), for as long as the peer's request bytes are
   * held; throws `server_busy` past it. Absent: not charged (tests, the in-memory transport).
   */
  charge?: (bytes: number) => void;
  /**
   * What the session keeps between responses (`ModePolicy.keptBytes`) shrank while it may be idle (a DELETE evicted
   * a ws-mode cached response): the peer's charge follows it once the session is idle (at once, if it is). Absent:
   * the charge follows only when work ends.
   */
  kept?: () => void;
  /**
   * The session let go of some of what it keeps between responses while it works (ws mode: cached contexts let go to
   * make room for the create being planned, `ModePolicy.spare`): the peer's charge for them is given back now, not
   * when the work ends. Absent: at the work's end.
   */
  keptShrank?: () => void;
}
