/**
 * One peer's conversation with the engine, whatever the design and the
 * transport: a WebSocket connection, or one HTTP request (a one-shot
 * session: one create, errors as HTTP statuses through `Transport.refuse`).
 * It takes typed client events, runs one response at a time (later
 * `response.create` frames wait in order), routes `response.append` and
 * `response.cancel` to the response in flight, and turns every failure into
 * an `error` event (or a refusal). The design-specific part — what
 * pre-inference work a create needs and what survives between responses —
 * is the `ModePolicy`; the bytes are the `Transport`'s (modes/transport.ts).
 *
 * Owns its runs: on disconnect the run in flight is cancelled (every
 * deferred settled, usage recorded once); on shutdown it ends `incomplete`.
 * The queue of waiting creates is bounded by count (`maxQueuedCreates`) and
 * by bytes (`maxQueuedBytes`); when the server ends the connection
 * (shutdown, lifetime limit) every create still waiting gets an `error`
 * event (`server_shutting_down`, or the limit's code) instead of vanishing.
 * A queued create starts once the client has read what the previous
 * responses sent (`Transport.room`), so pipelining does not get a reading
 * client dropped at the send limit.
 */
import type { Logger } from 'pino';
import pDefer from 'p-defer';
import { notPartOf } from '../protocol/parse.js';
import { WireError, isServerFault, toWireError } from '../protocol/errors.js';
import { readyToRun, type ClientEvent, type CreateParams, type ServerEvent } from '../protocol/events.js';
import type { InputItem } from '../protocol/objects.js';
import { withFields } from '../protocol/fields.js';
import { RunMetrics } from '../pipeline/metrics.js';
import type { Protocol } from '../protocol/designs.js';
import { ResponseRun, type EventSink, type RunPlan } from '../engine/run.js';
import type { DeltaBatch } from '../protocol/event-json.js';
import type { Services } from '../engine/services.js';
import type { ParseSpan, SessionInfo, Transport } from './transport.js';
import { RunCharge, pausedAppendRefusal, pastWholeBudget, type ServerBytes } from './server-bytes.js';

export type { SessionInfo, Transport };

export interface ModePolicy {
  readonly protocol: Protocol;
  /** Whether `response.append` is part of this protocol. */
  readonly appendable: boolean;
  /**
   * Pre-inference work for a create (in WebSocket lane `lane`, null for none); throws a WireError for a bad request.
   * `signal` aborts when the session ends while it plans (the client went away, the server ends the connection): work
   * nobody waits for may stop there (a queued chain read, modes/hydrate.ts).
   */
  plan(params: CreateParams, metrics: RunMetrics, lane?: string | null, signal?: AbortSignal): Promise<RunPlan>;
  /** Called when a run has started, before its first event is awaited (e.g. to find it again by id). */
  started?(run: ResponseRun): void;
  /** Called once a run has ended and its terminal event was sent. */
  ended?(run: ResponseRun, plan: RunPlan): void;
  /** Called when a create failed before a run started (e.g. to evict cache): true when its previous response was let go. */
  failed?(params: CreateParams, err: WireError): boolean;
  /**
   * Called once a create planned (`plan` returned) is done with: its run started (after `started`), or it never
   * started (refused while it waited for room, the connection ended first). What `plan` took for it is let go.
   */
  settled?(): void;
  /** Called once the session has ended (nothing runs or starts on it any more): let go of what it registered. */
  closed?(): void;
  /**
   * Bytes of request data the policy keeps between responses (ws mode: the cached context), which the
   * connection's share of the server-wide budget stands for while no work is in flight (modes/server-bytes.ts).
   */
  keptBytes?(): number;
  /**
   * Let go of what the policy keeps between responses (ws mode: its cached contexts), when it alone stops a message
   * from fitting the server's byte budget: a continuation then reads its chain from the store, as on a cache miss.
   * `now`: for another request's room (`ServerBytes.reclaim`), what is guarded at `now` stays (`guardedBytes`).
   */
  shed?(now?: number): void;
  /**
   * Let go of what the policy keeps that the create planned or running does not use (ws mode: its lanes' cached
   * contexts but the one that create continues), when its own charge cannot fit beside them (`ConnectionSession.spareKept`),
   * their charge given back at once (`SessionInfo.keptShrank`).
   */
  spare?(): void;
  /** What `spare` would let go now (0: nothing). */
  spareable?(): number;
  /**
   * What the policy keeps that is still guarded from being let go for other requests (ws mode: each lane's `store:
   * false` cached context whose response ended in client tool calls less than `cacheReclaimGraceMs` ago, `now` on the
   * services' clock): the server-wide reclaim passes it by (`ConnectionSession.reclaimableBytes`), and lets go the rest.
   */
  guardedBytes?(now: number): number;
  /**
   * For a create not yet planned: the error its plan would end in for want of its previous response, when that needs no
   * work to tell and only the run in flight on the connection could change it (ws mode: a continuation of a response
   * this connection does not cache, with `store: false`, or with `store: true` when the store has it not and no run is
   * making it: `previous_response_not_found`; the long-lived protocol: any, `invalid_value`); else null.
   */
  missing?(params: CreateParams): WireError | null;
  /**
   * What the create `params` (planned, or refused while planned) holds besides its frame and the token ids made for it:
   * the context it continues (ws mode: the cached context, or the stored chain it loaded on a miss). Counted when
   * judging whether it could ever fit the byte budget (`cannotFitAlone`).
   */
  planHeld?(params: CreateParams): number;
}

interface Queued {
  params: CreateParams;
  bytes: number;
  parse: ParseSpan | null;
  /** The create's WebSocket lane (`stream_id`), or null. */
  lane: string | null;
}

export class ConnectionSession {
  private readonly queue: Queued[] = [];
  private queuedBytes = 0;
  /** Set when the server ends the connection: what a create that cannot start any more is told. */
  private closingError: WireError | null = null;
  /** What `announceEnd` says on the connection once the run in flight, whose end was decided, has ended. */
  private announceAfterRun: WireError | null = null;
  private ending: Promise<void> | null = null;
  /** Resolved when the create being planned or run finishes (the end waits for it). */
  private busyWaiters: Array<() => void> = [];
  private active: ResponseRun | null = null;
  private busy = false;
  private closed = false;
  /** Aborted once the session ends: a create still being planned may stop its work there (`ModePolicy.plan`). */
  private readonly ended = new AbortController();
  /**
   * Appends (and injects) still being processed, null while none are: when the server ends the connection
   * (shutdown, the lifetime limit) their answers go out before it closes, as over HTTP. Their refusal came after
   * the session had closed and was dropped, so the client could not tell whether its outputs were applied
   * (outside attack). `answering` while the end waits for them; a peer that is gone is not waited for.
   */
  private appending: Set<Promise<void>> | null = null;
  private answering = false;
  /**
   * Called when nothing is running or queued any more (`idle`, `whenIdle`); null while none wait. Allocated as
   * `[f]`, not pushed onto an empty array (V8 then reserves 17 slots): a paused run's connection holds one.
   */
  private idleWaiters: Array<() => void> | null = null;
  /** Numbers error events sent while no response is in flight. */
  private errorSeq = 0;
  /** Resolved once the session has ended (closed or finished) and everything it owed was sent. */
  private readonly over = pDefer<void>();
  private readonly send: EventSink;
  /** The auth check's span until the first response is charged with it (the transport's `info` is left as given). */
  private authSpan: SessionInfo['authSpan'];
  /** Ends a queued create's wait for the transport's `room` (the connection is ending). */
  private wakeRoom: (() => void) | null = null;
  /** A `response.cancel` arrived while the create now starting was still being planned: its run ends `cancelled` as it starts. */
  private cancelStarting = false;
  /** The lane (`stream_id`) of the create being served, whose events carry it; null for none. */
  private lane: string | null = null;
  /**
   * The last response that ran on this connection and ended, and its lane (a `response.inject` naming it is told
   * so, in that lane). One field, not two: every paused run holds its connection's session, and the paused
   * phase of `npm run bench:overhead` measured each session field (`--phases paused`, heap per paused run).
   */
  private lastEnded: { id: string; lane: string | null } | null = null;
  /** The charge of the run planned or running (`pump`), for `heldByRun`; null between runs. */
  private charge: RunCharge | null = null;

  constructor(
    private readonly policy: ModePolicy,
    private readonly services: Services,
    private readonly transport: Transport,
    info: SessionInfo,
    private readonly log: Logger,
    /** The server-wide byte budget each run's spans are charged to while it lives (null: not charged; unit tests). */
    private readonly budget: ServerBytes | null = null,
  ) {
    // A call the client runs leaves at once, not at the end of the turn (transport/batch.ts).
    const send: EventSink = transport.flush
      ? (e: ServerEvent) => {
          transport.send(e);
          if (readyToRun(e)) transport.flush!();
        }
      : (e: ServerEvent) => transport.send(e);
    if (transport.sendDeltas) send.deltas = (b: DeltaBatch) => transport.sendDeltas!(b);
    if (transport.flush) send.flush = () => transport.flush!();
    if (transport.backlog) send.backlog = () => transport.backlog!();
    this.send = send;
    this.authSpan = info.authSpan;
  }

  /** Whether its run is paused for the client's tool outputs (`GET /llr/stats`). */
  get paused(): boolean {
    return this.active?.paused === true;
  }

  /**
   * Whether its run is paused for its client with the client's append on its way in: waiting for room
   * (`share.roomWanted`), arriving (`share.messageArriving`), whole and waiting for or in its parse
   * (`share.peerMessagePending`), or being applied.
   */
  get appendComing(): boolean {
    if (!this.paused) return false;
    const share = this.share;
    return (share?.roomWanted?.() ?? 0) > 0 || share?.messageArriving?.() === true || share?.peerMessagePending?.() === true || (this.appending?.size ?? 0) > 0;
  }

  /** Creates waiting behind its run (`GET /llr/stats`). */
  get queuedCreates(): number {
    return this.queue.length;
  }

  /** Resolves once the session has ended: closed by the peer or finished by the server, its run and queue wound down. */
  get finished(): Promise<void> {
    return this.over.promise;
  }

  get protocol(): Protocol {
    return this.policy.protocol;
  }

  /** Whether its design takes `response.append` (long-lived); a transport's parse refuses it early otherwise. */
  get appendable(): boolean {
    return this.policy.appendable;
  }

  /** What the policy keeps between responses, in bytes (`ModePolicy.keptBytes`; 0 for a design that keeps nothing). */
  keptBytes(): number {
    return this.policy.keptBytes?.() ?? 0;
  }

  /** What the run planned or running here holds of the budget besides its frames (its spans, output, token ids). */
  heldByRun(): number {
    return this.charge?.bytes ?? 0;
  }

  /**
   * The connection's whole share of the server-wide budget (`ConnectionBytes.own`), once its transport set it;
   * `peerMessagePending`: whether a message of its peer's for it is still on its way outside the session, to be applied or
   * refused on its own (a WebSocket frame in its sliced parse, `ConnectionBytes.peerMessagePending`; over HTTP an
   * append for its run being read or applied, `LiveRuns.appendsArriving`); `roomWanted`: the bytes more a message of its
   * peer's arriving waits for in the budget (`ConnectionBytes.roomWanted`; 0: none waits); `stuckBytes`: what ending its
   * message arriving would give back while it is judged unable to fit beside the runs paused for their clients
   * (`ConnectionBytes.stuckBytes`); `request`: over HTTP, what the request itself holds (its body and a stored chain it
   * loaded).
   */
  share: { own(): number; peerMessagePending?(): boolean; messageArriving?(): boolean; roomWanted?(): number; stuckBytes?(): number; stuckGives?(): number; endStuck?(): number; request?(): number } | null = null;

  /**
   * What this session holds of the server-wide budget that only its peer can free: its whole share while its run is
   * paused for the client with nothing else on the connection that could give budget back (`waitsOnPeer`; nor a
   * message of its peer's still on its way, `share.peerMessagePending`, which is applied or refused on its own), else 0.
   */
  heldForPeer(): number {
    if (!this.paused || !this.waitsOnPeer() || this.share?.peerMessagePending?.() === true) return 0;
    return this.share?.own() ?? this.heldByRun();
  }

  /**
   * A create of `bytes` (its frame or body) refused `err` while planned: past the whole budget alone, with the token ids
   * made from it (`heldByRun`) and the charge refused, it is said so (`pastWholeBudget`). Over HTTP the request's own
   * share counts a stored chain it loaded too (left out, such a continuation was told to try again on an idle server;
   * outside attack atk92 F1); over a WebSocket the connection's share holds other things as well, and only the frame
   * counts.
   */
  private cannotFitAlone(err: WireError, bytes: number, params: CreateParams): WireError {
    if (err.code !== 'server_busy' || err.budgetAsk === undefined || this.budget === null) return err;
    // And the context it continues that the policy holds for it (ws mode: its cached context or the chain it loaded;
    // left out, a continuation past the whole budget with its cache was told to try again; outside attack atk92 F3).
    const own = Math.max(bytes, this.share?.request?.() ?? 0) + (this.policy.planHeld?.(params) ?? 0);
    const what = params.previous_response_id ? 'continuation' : 'request';
    const mine = own + this.heldByRun();
    return pastWholeBudget(err, this.budget.max, mine + err.budgetAsk, what, mine) as WireError;
  }

  /**
   * A charge of `k` more bytes for the create planned or running here was refused (its token ids, `RunCharge.spare`; a
   * stored chain it loads, `ConnectionBytes.loaded`): when this connection's own share, the runs paused for their
   * clients (which only their clients can free) and `k` cannot fit the budget together, nothing others give back can
   * make room while this connection keeps its cached contexts, so those the create does not continue are let go
   * (`ModePolicy.spare`, which gives their charge back at once), if that makes room for `k` now (as `ServerBytes.reclaim`
   * asks: let go for a charge refused anyway, a cache is lost for nothing; outside attack atk93 F2). True when it let
   * any go. Kept, a fresh create on a connection whose own cache held the budget was told to try again for good, however
   * idle the server (outside attack atk92 F2; a continuation's chain from the store alike, atk93 F3). Otherwise they
   * stay: the room others hold may come back, and a cache let go is a continuation that misses.
   */
  readonly spareKept = (k: number): boolean => {
    const budget = this.budget;
    const share = this.share;
    if (budget === null || share === null || this.policy.spare === undefined || this.policy.spareable === undefined) return false;
    if (share.own() + budget.peersHeld() + k <= budget.max) return false;
    const spareable = this.policy.spareable();
    if (spareable === 0 || budget.held - spareable + k > budget.max) return false;
    const kept = this.keptBytes();
    this.policy.spare();
    const freed = kept - this.keptBytes();
    if (freed <= 0) return false;
    this.spared += freed;
    this.log.info({ code: 'server_busy', bytes: freed, need: k }, 'cached contexts this connection\'s run does not use let go to make room for it');
    return true;
  };

  /**
   * A charge of `k` more bytes for this session's run was refused (`RunCharge.spare`): in ws mode its connection's
   * cached contexts may make room (`spareKept`); for a run paused for its client, whose append is being applied (its
   * token ids), messages judged unable to fit beside the paused runs end if together they make room
   * (`ServerBytes.endStuck`): while a paused run's append arrives they yield it the room that comes back, but its
   * token ids are charged only once it is applied, and ending only what its frame lacked left them refused (outside
   * attack atk95 F2's fix, two stuck creates each holding half of an append's room). True when room was made.
   */
  private readonly makeRoom = (k: number): boolean => {
    if (this.policy.spare) return this.spareKept(k);
    const budget = this.budget;
    if (budget === null || this.active === null || !this.active.paused) return false;
    // Not when it cannot fit beside the paused runs anyway, its own among them: they would be ended for nothing (outside
    // attack atk96 F2). Only the slice refused is known, not the whole append's need.
    if ((this.share?.own() ?? this.heldByRun()) + budget.peersHeld() + k > budget.max) return false;
    const short = budget.held + k - budget.max;
    return short > 0 && budget.endStuck(this, short) >= short;
  };

  /**
   * A create planned here was refused `err` before its run started (`ModePolicy.failed`): true when its previous
   * response's cached copy was let go with it. One refused for room is counted and logged as any cache let go for the
   * byte budget is (`GET /health` `cached_contexts_let_go`; it was neither: outside attack atk97 F2).
   */
  private failedPlan(params: CreateParams, err: WireError): boolean {
    const letGo = this.policy.failed?.(params, err) === true;
    if (letGo && (err.code === 'server_busy' || err.code === 'payload_too_large')) {
      this.budget?.letGoCounted();
      this.log.info({ code: err.code, previous_response_id: params.previous_response_id }, 'cached context let go with the continuation refused for room');
    }
    return letGo;
  }

  /** Bytes of cached contexts `spareKept` let go for the create being planned (said if it is refused after all). */
  private spared = 0;

  /**
   * An append or inject of `bytes` for the paused `run`, refused `err` while it was applied (its token ids past the
   * budget): when that is `server_busy` and runs paused for their clients hold the budget (`ServerBytes.peersHeld`,
   * with this connection's share but for this frame: it is still appending, so not among them yet), what its client
   * is told (`pausedAppendRefusal`: what it needed at least is its frame and `WireError.budgetAsk`), as for a frame
   * refused at once (`WsConnection.pausedRefusal`): no append can fit, and the run ends `incomplete` (null returned),
   * or this one cannot and a smaller one may. Otherwise `err`. An append whose frame fitted and whose ids could never
   * fit was told to try again for as long as its pause lasted (outside attack atk78 F1).
   */
  private pausedRefusal(run: ResponseRun, err: unknown, bytes: number): unknown {
    if (!(err instanceof WireError) || err.code !== 'server_busy' || this.budget === null) return err;
    if (run !== this.active || !run.paused || run.ended) return err;
    // Only this append in flight: the frames of a burst are charged as they arrive and refunded as each is refused,
    // room that comes back (a paused run's 3,000 refused appends in rounds of 50 ended it). Creates queued behind the
    // paused run give nothing back before it ends (`waitsOnPeer`).
    if ((this.appending?.size ?? 0) > 1) return err;
    const own = Math.max(0, (this.share?.own() ?? this.heldByRun()) - bytes);
    const stuck = this.budget.peersHeld() - this.heldForPeer() + own;
    const need = bytes + (err.budgetAsk ?? 0);
    const said = pausedAppendRefusal(this.budget.max, stuck, need);
    if (said === null) return err;
    this.log.info({ code: 'server_busy', bytes: need, own, stuck, max: this.budget.max, ends_run: said.endsRun }, 'append cannot fit the byte budget that paused runs hold');
    if (said.endsRun && this.endPaused(said, 'server_busy')) return null;
    return said;
  }

  /**
   * The run paused here ends `incomplete` for `err` (said in its stream first, with `reason` its
   * `llr_incomplete_reason`); the connection goes on. False when no run is paused.
   */
  endPaused(err: WireError, reason: string): boolean {
    const run = this.active;
    if (this.closed || run === null || !run.paused || run.ended) return false;
    this.error(err);
    run.stop('incomplete', reason);
    return true;
  }

  /**
   * Whether nothing on this connection can give budget back before the peer's next message: nothing planned or
   * appending, nothing queued but behind a run paused for the client, and no run but that one (a paused run's timeout
   * aside). Creates queued behind a paused run wait for its end: counted as work that could give budget back, they
   * left it out of the runs only their clients can free, and every append on the server was told to try again until
   * its pause timeout (outside attack atk82 F2).
   */
  waitsOnPeer(): boolean {
    if (this.closed || this.appending !== null) return false;
    if (!this.busy) return this.queue.length === 0;
    return this.active !== null && this.active.paused;
  }

  /**
   * `shed` to make room in the server-wide budget (`ServerBytes.reclaim`), logged with what was kept: true when it
   * kept anything.
   */
  letGo(forOthers = false): boolean {
    const kept = this.keptBytes();
    if (!this.shed(forOthers)) return false;
    const freed = kept - this.keptBytes();
    if (freed === 0) return false;
    this.log.info({ code: 'server_busy', bytes: freed }, 'cached context let go to make room in the byte budget');
    return true;
  }

  /**
   * What this session keeps that may be let go for another request's room now (`ServerBytes.reclaim`): not what the
   * policy guards (`ModePolicy.guardedBytes`). An agent whose tool was running lost its `store: false` cache to another
   * client's single large create, which would otherwise have been told to try again, and had to send its whole
   * context again (Codex then left WebSocket mode for the session; outside attack atk97 F1). Judged per lane: a lane in
   * a tool loop guarded the connection's other lanes, however old, and a client kept a large cache for good by ending
   * a tiny create on another lane in a tool call now and then (outside attack atk102 F1).
   */
  reclaimableBytes(): number {
    const kept = this.keptBytes();
    return kept === 0 ? 0 : Math.max(0, kept - (this.policy.guardedBytes?.(this.services.clock.now()) ?? 0));
  }

  /**
   * Let go of what the policy keeps between responses (`ModePolicy.shed`) while idle: true when it kept anything.
   * `forOthers`: for another request's room, what the policy guards stays (`reclaimableBytes`).
   */
  shed(forOthers = false): boolean {
    if (this.busy || this.queue.length > 0 || !this.policy.shed || this.keptBytes() === 0) return false;
    if (forOthers) this.policy.shed(this.services.clock.now());
    else this.policy.shed();
    return true;
  }

  /** The run in flight, or null (background mode reads a run's current state through it, modes/background.ts). */
  get running(): ResponseRun | null {
    return this.active;
  }

  /**
   * One client event; `bytes` is the size of its frame (what a queued create
   * holds in memory), `parse` when the transport parsed it (charged to the
   * response the create starts or the append extends). `refused`: called once if the session keeps nothing of
   * a create, append or inject (refused at once, or once its checks fail), so the transport gives back the
   * frame's share of the byte budget at once rather than when the session's work ends.
   */
  handle(event: ClientEvent, bytes = 0, parse: ParseSpan | null = null, refused?: () => void): void {
    if (this.closed) {
      // The server is ending the connection (shutdown, lifetime limit) and the socket is still open while the run
      // in flight or the create being planned winds down: a create arriving now is told, not dropped unanswered.
      if (event.type === 'response.create' && this.closingError) {
        const closing = this.closingError;
        this.inLane(event.stream_id ?? null, () => this.sendConnectionError(closing));
      }
      return;
    }
    switch (event.type) {
      case 'response.create': {
        const { type: _type, stream_id, ...params } = event;
        const lane = stream_id ?? null;
        const limits = this.services.limits;
        // The creates that would wait: those queued, and this one when a create is in flight (or planned). With
        // nothing in flight it runs at once and waits behind nothing: `--max-queued-creates 0` refused every create
        // (outside attack atk70 F1), where it means one at a time, nothing queued.
        if ((this.busy ? this.queue.length + 1 : this.queue.length) > limits.maxQueuedCreates) {
          this.error(Object.assign(new WireError('queue_full', `At most ${limits.maxQueuedCreates} requests may wait behind the one in flight.`), { lane }));
          refused?.();
          return;
        }
        if (this.queue.length > 0 && this.queuedBytes + bytes > limits.maxQueuedBytes) {
          this.error(Object.assign(new WireError('queue_full', `At most ${limits.maxQueuedBytes} bytes of requests may wait behind the one in flight.`), { lane }));
          refused?.();
          return;
        }
        this.queue.push({ params, bytes, parse, lane });
        this.queuedBytes += bytes;
        void this.pump();
        return;
      }
      case 'response.append': {
        if (!this.policy.appendable) {
          this.error(notPartOf('response.append', this.policy.protocol));
          refused?.();
          return;
        }
        const run = this.active;
        // Every output already held (a retry of an append the run took): a duplicate, with no answer, as one is while
        // the run is paused (an append is never acknowledged; the run resuming is its answer).
        if (run && !run.paused && run.heldAlready(event.input) !== null) {
          refused?.();
          return;
        }
        if (!run || !run.paused) {
          this.error(new WireError('no_paused_response'));
          refused?.();
          return;
        }
        if (event.response_id && event.response_id !== run.id) {
          this.error(new WireError('no_paused_response', `Response '${event.response_id}' is not the paused response on this connection.`, 'response_id'));
          refused?.();
          return;
        }
        // Async (large appends yield to the loop); errors are reported as before, once it settles.
        this.track(
          run.append(event.input, parse).then(settledQuietly, (err: unknown) => {
            const said = this.pausedRefusal(run, err, bytes);
            if (said === null) {
              refused?.();
              return;
            }
            // Numbered in the stream of the response in flight when it is refused (this run's, or the next one's if
            // this run ended meanwhile: a connection counter's number in the middle of that stream would repeat one
            // of its own), by the connection's counter when none is.
            this.error(toWireError(said));
            // Nothing of it was applied (appends are atomic): its frame no longer stands for anything the run keeps.
            refused?.();
          }),
          bytes,
        );
        return;
      }
      case 'response.inject': {
        const run = this.active;
        const lane = this.lane;
        if (!run || run.ended || run.id !== event.response_id) {
          this.injectFailed(event.response_id, event.input);
          refused?.();
          return;
        }
        if (!this.policy.appendable) {
          this.error(
            new WireError(
              'no_paused_response',
              `Response '${run.id}' does not wait for client tool outputs: on the ${this.policy.protocol} protocol a response with tool calls completes; inject into a long-lived one.`,
              'response_id',
            ),
          );
          refused?.();
          return;
        }
        // A `response.append` that names its response and is acknowledged once committed, before sampling resumes.
        this.track(
          run.append(event.input, parse, () => run.emitNotice({ type: 'response.inject.created', response_id: run.id })).then(settledQuietly, (err: unknown) => {
            // The run ended (cancel, pause timeout, shutdown) before the items were committed: not a refusal on their
            // merits but the response gone, which the client is told as for any inject arriving after its end.
            if (run.ended) {
              refused?.();
              if (!this.closed || this.answering) this.injectFailed(event.response_id, event.input, lane);
              return;
            }
            // Judged while its frame is still charged, as an append's is (given back first, the frame's bytes were
            // taken off this connection's share twice: an inject that could never fit was told to try again, atk80 F1).
            const said = this.pausedRefusal(run, err, bytes);
            refused?.();
            if (said === null) return;
            // Numbered as a refused response.append's (above).
            this.error(toWireError(said));
          }),
        );
        return;
      }
      case 'response.cancel': {
        const run = this.active;
        // The create being planned (or waiting for the client to read) is the response in flight: it has no id
        // yet, so only a cancel that names none can mean it. Its run starts and ends `cancelled` at once.
        if (!run && this.busy && !event.response_id) {
          this.cancelStarting = true;
          // One waiting for the client to read, or for all readers to be within the send total, waits no more
          // (it waited up to the stall timeout, outside attack atk53 F3).
          this.wakeRoom?.();
          return;
        }
        if (!run || (event.response_id && event.response_id !== run.id)) {
          // Naming another id while a run is in flight: said so, not that nothing is in flight.
          const other = run && !run.ended && event.response_id;
          const message = other
            ? `No response '${event.response_id!.slice(0, 100)}' is in flight on this connection to cancel; the response in flight is '${run.id}'.`
            : undefined;
          this.error(new WireError('no_response_in_flight', message, event.response_id ? 'response_id' : null));
          return;
        }
        run.stop('cancelled', 'cancelled_by_client');
        return;
      }
      case 'response.processed':
        return;
      case 'response.steer':
        this.steerFailed(event.previous_response_id, event.input, event.invalid);
        return;
      default: {
        const never: never = event;
        this.error(new WireError('unknown_event_type', `Unknown event type '${String((never as { type: unknown }).type)}'.`, 'type'));
      }
    }
  }

  /**
   * Report an error on the socket; numbered in the stream of the response in
   * flight, if any, else by the connection's own counter (the AI SDK's schema
   * requires `sequence_number` on every event). An error refusing a create
   * (`err.lane` set, null for none) goes in that create's lane, and in the
   * stream of the response in flight only if that is its lane too: another
   * lane's numbers must have no gap where it went out.
   */
  error(err: WireError): void {
    if (this.closed && !this.answering) return;
    if (isServerFault(err)) this.log.error({ err: err.cause ?? err }, 'server fault');
    else if (this.services.clientErrorLog?.take() ?? true) this.log.info({ code: err.code, param: err.param }, 'client error');
    if (err.lane !== undefined && err.lane !== this.lane) this.inLane(err.lane, () => this.sendConnectionError(err));
    else if (this.active?.streaming) this.active.emitError(err);
    else this.sendConnectionError(err);
  }

  /**
   * A `response.inject` naming no response in flight here: `response.inject.failed` with the items, so the
   * client can send them elsewhere (`response_already_completed` for the last response that ended on this
   * connection, else `response_not_found`); numbered like an error event. An ended response's is sent in that
   * response's lane. `endedIn`: the lane of a response known to have ended (an inject whose run ended while its
   * items were being checked).
   */
  private injectFailed(id: string, input: InputItem[], endedIn?: string | null): void {
    const ended = endedIn !== undefined || id === this.lastEnded?.id;
    const lane = endedIn !== undefined ? endedIn : ended ? this.lastEnded!.lane : this.lane;
    const shown = id.length > 100 ? `${id.slice(0, 100)}…` : id;
    const error = ended
      ? { code: 'response_already_completed' as const, message: `Response '${shown}' has ended; nothing can be injected into it.` }
      : { code: 'response_not_found' as const, message: `No response '${shown}' is in flight on this connection.` };
    this.log.info({ code: error.code }, 'inject refused');
    const e = { type: 'response.inject.failed' as const, response_id: id, input, error };
    if (this.active?.streaming && lane === this.lane) this.active.emitNotice(e);
    else this.inLane(lane, () => this.send(withFields(e, { sequence_number: this.errorSeq++ })));
  }

  /**
   * Refuse a `response.steer` as the API does where steering is not supported: the input comes back in a
   * `response.steer.failed`, in the target response's lane when it is on this connection (in flight or the last
   * one ended), else with no lane and `response_not_found`; `invalid_input` first when it is not steering input.
   */
  private steerFailed(id: string, input: unknown, invalid: string | undefined): void {
    const inFlight = this.active !== null && !this.active.ended && this.active.id === id;
    const ended = !inFlight && id === this.lastEnded?.id;
    const shown = id.length > 100 ? `${id.slice(0, 100)}…` : id;
    // Input that is not steering input is refused as such first: the client must correct it, whatever the target.
    const error =
      invalid !== undefined
        ? { code: 'invalid_input' as const, message: invalid, type: 'invalid_request_error' as const }
        : inFlight || ended
        ? { code: 'steering_not_supported' as const, message: `Response '${shown}' cannot be steered: this server does not support steering.`, type: 'invalid_request_error' as const }
        : { code: 'response_not_found' as const, message: `No response '${shown}' is on this connection.`, type: 'invalid_request_error' as const };
    this.log.info({ code: error.code }, 'steer refused');
    const e = { type: 'response.steer.failed' as const, steer: { input, previous_response_id: id }, error };
    const lane = inFlight ? this.lane : ended ? this.lastEnded!.lane : null;
    // Numbered as a refused inject's: in the stream of the response in flight when it shares the lane.
    if (this.active?.streaming && lane === this.lane) this.active.emitNotice(e);
    else this.inLane(lane, () => this.send(withFields(e, { sequence_number: this.errorSeq++ })));
  }

  /**
   * Send what `f` sends in `lane` (a create refused or ended before it ran carries its own `stream_id`), then
   * go back to the lane of the response in flight.
   */
  private inLane(lane: string | null, f: () => void): void {
    const setLane = this.transport.lane;
    if (!setLane || lane === this.lane) return f();
    setLane.call(this.transport, lane);
    try {
      f();
    } finally {
      setLane.call(this.transport, this.lane);
    }
  }

  /** An error about no response in flight: numbered by the connection's own counter (every event carries a `sequence_number`). */
  private sendConnectionError(err: WireError): void {
    if (this.transport.refuse) this.transport.refuse(err);
    else this.send(withFields(err.toEvent(), { sequence_number: this.errorSeq++ }));
  }

  private async pump(): Promise<void> {
    if (this.busy || this.closed) return;
    const next = this.queue.shift();
    if (!next) {
      this.notifyIdle();
      return;
    }
    const params = next.params;
    this.queuedBytes -= next.bytes;
    this.busy = true;
    // What the run keeps that no frame stands for (its spans, its output): given back in `finally`, once, however
    // the create or its run ends.
    let held: RunCharge | null = null;
    // The run started here, found by retrieve while it lives (engine/in-flight.ts): removed in `finally`, once.
    let ran: ResponseRun | null = null;
    try {
      // Back-pressure between responses: a whole response can be sent in one
      // turn (an instant model, events echoing a large request), and queued
      // creates running back to back would fill the send buffer of a client
      // that reads, just more slowly, until it is dropped at the limit.
      // The wait also ends when the connection does (shutdown, lifetime: `endOnce` wakes it).
      // Before planning, only the transport's own flush (0: no create's size, so no wait for the total).
      const flushed = this.room(0);
      if (flushed !== null) await flushed;
      if (this.closed) {
        if (this.closingError) this.inLane(next.lane, () => this.sendConnectionError(this.closingError!));
        return;
      }
      held = this.budget === null ? null : new RunCharge(this.budget);
      this.spared = 0;
      if (held !== null) held.spare = this.makeRoom;
      this.charge = held;
      const metrics = new RunMetrics(this.services.clock.now, this.services.limits.maxRunSpans, held);
      if (next.parse) metrics.span('parse', next.parse.start, next.parse.end);
      if (this.authSpan) {
        metrics.count('auth_checks');
        metrics.span('auth', this.authSpan.start, this.authSpan.end);
        this.authSpan = null;
      }
      let plan: RunPlan;
      try {
        plan = await this.policy.plan(params, metrics, next.lane, this.ended.signal);
      } catch (err) {
        const refused = this.cannotFitAlone(toWireError(err), next.bytes, params);
        const wire = sparedFor(lostContinuation(refused, params, this.failedPlan(params, refused)), this.spared);
        if (this.closed && this.ended.signal.aborted && err === this.ended.signal.reason) {
          // The plan stopped because the session ended: told as a create planned past the end is (below).
          if (this.closingError) this.inLane(next.lane, () => this.sendConnectionError(this.closingError!));
          return;
        }
        // An error refusing this create goes in its lane (`error`); the transport takes the lane when its run starts.
        wire.lane = next.lane;
        this.error(wire);
        return;
      }
      // Once planned, with its size: a large create waits here for the total of all readers' unsent bytes
      // (modes/send-bytes.ts `room`). Asked before planning, creates planned together (a large request's render takes
      // a while) all found the total within the bound before any had sent its echoes; asked at both, a create waited
      // twice the longest wait (outside attack atk52 F2).
      // A create cancelled while it waited starts and ends at once: it echoes its request once, cancelled.
      const room = this.cancelStarting ? null : this.room(next.bytes);
      const start = room === null || (await room);
      if (this.closed) {
        // Planned, but the server ended the connection meanwhile: it never starts.
        if (this.closingError) this.inLane(next.lane, () => this.sendConnectionError(this.closingError!));
        return;
      }
      if (!start && !this.cancelStarting) {
        // Readers held the total past its bound for the whole longest wait: refused, not started past it.
        const wire = new WireError(
          'server_busy',
          'The readers of this server have left more bytes unsent than it holds for them (--send-buffer-total-bytes) for as long as a response may wait to start (--send-stall-timeout-ms); try again later.',
        );
        this.log.info({ code: 'server_busy', bytes: next.bytes }, 'send total still past its bound after the longest wait; create refused');
        const said = lostContinuation(wire, params, this.failedPlan(params, wire));
        said.lane = next.lane;
        this.error(said);
        return;
      }
      // From here every event of the response carries its lane (none for a create without one).
      this.lane = next.lane;
      this.transport.lane?.(next.lane);
      this.transport.start?.();
      const run = new ResponseRun(plan, this.services, this.send, {
        // An injected disconnect: nothing more starts on this connection, then the transport drops it.
        drop: () => {
          void this.close();
          this.transport.drop();
        },
        ...(held !== null && { keptHeld: (bytes: number) => held!.keptHeld(bytes) }),
      });
      this.active = run;
      this.services.inFlight?.add(run, plan.owner);
      ran = run;
      this.policy.started?.(run);
      if (this.cancelStarting) {
        this.cancelStarting = false;
        run.stop('cancelled', 'cancelled_by_client');
      }
      // The same line a child logger with the response id would write (its bindings come before the
      // object's fields), without a logger per response: one made here stayed in this async frame's
      // registers while the run was paused, and made the connection's logger a prototype (its own map).
      this.log.debug({ response_id: run.id, model: plan.route.model }, 'response started');
      await run.done;
      this.active = null;
      this.lastEnded = { id: run.id, lane: next.lane };
      this.policy.ended?.(run, plan);
      this.transport.ended?.(run.response);
    } catch (err) {
      // Nothing above should throw; if it does, it is the server's fault and the connection goes on.
      this.active = null;
      this.error(toWireError(err));
    } finally {
      if (ran !== null) this.services.inFlight?.remove(ran);
      this.policy.settled?.();
      held?.close();
      this.charge = null;
      // A cancel meant for a create that never started (refused, or the connection ended) is spent with it.
      this.cancelStarting = false;
      if (this.lane !== null) {
        this.lane = null;
        this.transport.lane?.(null);
      }
      this.busy = false;
      for (const w of this.busyWaiters.splice(0)) w();
      void this.pump();
    }
  }

  /**
   * The transport's `room` for a create of `bytes`: null when it need not wait (no promise, no await: the tool loop's
   * creates), else the wait, which the end of the connection ends too (`wakeRoom`).
   */
  private room(bytes: number): Promise<boolean> | null {
    const room = this.transport.room?.(bytes) ?? null;
    if (room === null) return null;
    return new Promise<boolean>((resolve) => {
      this.wakeRoom = () => resolve(true);
      void room.then(resolve);
    }).then((start) => {
      this.wakeRoom = null;
      return start;
    });
  }

  private notifyIdle(): void {
    const w = this.idleWaiters;
    if (w === null) return;
    this.idleWaiters = null;
    for (const f of w) f();
  }

  private addIdleWaiter(f: () => void): void {
    if (this.idleWaiters === null) this.idleWaiters = [f];
    else this.idleWaiters.push(f);
  }

  /** An append or inject being processed (its refusal already handled): see `appending`. `bytes`: an append's frame. */
  private track(p: Promise<void>, bytes = 0): void {
    const set = (this.appending ??= new Set());
    set.add(p);
    this.applyingBytes += bytes;
    const settled = (): void => {
      set.delete(p);
      this.applyingBytes -= bytes;
      if (set.size === 0 && this.appending === set) this.appending = null;
    };
    p.then(settled, settled);
  }

  /** The frames of the appends being applied to the run paused here (`track`): what their token ids may still need. */
  private applyingBytes = 0;

  /**
   * The room the appends being applied to the run paused here may still take: their token ids are charged as they are
   * applied, each about as many bytes as its frame's text or fewer (`SessionHost.appendsWant`). 0 when not paused.
   */
  get appendsApplying(): number {
    return this.paused ? this.applyingBytes : 0;
  }

  /** The peer is gone (`reason`: how, e.g. `send_buffer_full` for a reader dropped for not reading): cancel the run in flight, drop the queue. */
  close(reason = 'client_disconnected'): Promise<void> {
    return this.end('cancelled', reason, true);
  }

  /** Server shutdown: the run in flight ends `incomplete`; its events still go out; each queued create gets `server_shutting_down`. */
  shutdown(): Promise<void> {
    return this.finish('server_shutdown', new WireError('server_shutting_down'));
  }

  /**
   * Why the server is ending the connection (the lifetime limit), said before `finish`: in the stream of the run
   * in flight, if there is one; else once on the connection, unless creates are waiting for their answer (being
   * planned, waiting for the client to read, queued): `finish` tells each of them with the same error, and one
   * more on the connection was a second answer to the first of them (a client without lanes reads the errors in
   * order, one per create it sent).
   */
  announceEnd(err: WireError): void {
    if (this.closed) return;
    const run = this.active;
    const running = run !== null && !run.ended;
    const waiting = this.queue.length > 0 || (this.busy && this.active === null);
    if (running && run.ending) {
      // Its end is decided (the model done, its long record being written in slices): the stop changes nothing and
      // it ends as it was going to, so an error in its stream before its response.completed told the client of a
      // response cut short that was not. Said on the connection after its terminal event (unless creates wait).
      if (!waiting) this.announceAfterRun = err;
      return;
    }
    if (running || !waiting) this.error(err);
  }

  /**
   * The server ends the connection (shutdown, lifetime limit): the run in
   * flight ends `incomplete` with its terminal event, then every create that
   * has not started gets `queuedError`. Resolves when all of that was sent.
   */
  finish(reason: string, queuedError: WireError): Promise<void> {
    return this.end('incomplete', reason, false, queuedError);
  }

  private end(status: 'cancelled' | 'incomplete', reason: string, detach: boolean, queuedError?: WireError): Promise<void> {
    // Ended once; a later call (the peer's close after a server close) waits for the same end.
    this.ending ??= this.endOnce(status, reason, detach, queuedError);
    return this.ending;
  }

  private async endOnce(status: 'cancelled' | 'incomplete', reason: string, detach: boolean, queuedError?: WireError): Promise<void> {
    this.closed = true;
    this.closingError = queuedError ?? null;
    this.wakeRoom?.();
    this.ended.abort(new WireError('request_aborted', 'The connection ended before this create was planned.'));
    const waiting = this.queue.splice(0);
    this.queuedBytes = 0;
    const run = this.active;
    if (run) {
      if (detach) run.detach();
      run.stop(status, reason);
      await run.done;
    }
    // Appends still being processed when the server ended the run are refused now: answered before the close.
    if (!detach && this.appending !== null) {
      this.answering = true;
      await Promise.allSettled([...this.appending]);
      this.answering = false;
    }
    const after = this.announceAfterRun;
    this.announceAfterRun = null;
    if (after !== null) this.sendConnectionError(after);
    // A create still being planned is told (below, in pump) before the end resolves and the socket closes.
    if (this.busy) await new Promise<void>((resolve) => this.busyWaiters.push(resolve));
    if (queuedError) {
      if (waiting.length > 0) this.log.info({ code: queuedError.code, queued: waiting.length }, 'queued creates refused');
      // No response in flight for them: numbered by the connection's own counter, like any such error.
      for (const q of waiting) this.inLane(q.lane, () => this.sendConnectionError(queuedError));
    }
    this.policy.closed?.();
    this.notifyIdle();
    this.over.resolve();
  }

  /**
   * A create refused `err` at its frame's arrival, before it was planned: `previous_response_not_found` instead when its
   * plan could only end so (`ModePolicy.missing`) and it does not name the run in flight here, whose end caches its
   * response. A `store: false` continuation of a response the connection no longer caches was refused `server_busy`,
   * told to try again, and each retry could only be not found (outside attack atk104 F1).
   */
  refusedOnArrival(params: CreateParams, err: unknown): unknown {
    if (!(err instanceof WireError) || err.code !== 'server_busy') return err;
    // Only the run in flight here can still cache the response it names: one queued or being planned has no id yet.
    // (Any run on the connection kept the refusal `server_busy`, one on another lane too; outside attack atk105 F3.)
    if (this.active !== null && this.active.id === params.previous_response_id) return err;
    const missing = this.policy.missing?.(params) ?? null;
    if (missing === null) return err;
    // A client can send these as fast as it likes: written within the client errors' budget (atk105 F2).
    if (this.services.clientErrorLog?.take() ?? true) this.log.info({ code: missing.code, previous_response_id: params.previous_response_id }, 'create refused for room whose previous response its plan would refuse: that refusal said instead');
    return missing;
  }

  /** Whether nothing is running or queued now. */
  isIdle(): boolean {
    return !this.busy && this.queue.length === 0;
  }

  /** Resolves when nothing is running or queued (tests, shutdown). */
  idle(): Promise<void> {
    if (!this.busy && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.addIdleWaiter(resolve));
  }

  /**
   * `f` once nothing is running or queued: when the session next becomes
   * idle, or in a microtask if it is idle now (as `idle().then(f)` would,
   * without a promise and its reactions held while a run is paused).
   */
  whenIdle(f: () => void): void {
    if (this.isIdle()) queueMicrotask(f);
    else this.addIdleWaiter(f);
  }
}

/** An append that succeeded (or was a duplicate): nothing more to say on a WebSocket, where the run's resuming is the answer. */
function settledQuietly(): void {}

/**
 * A create refused before its run started, `err`, after its connection let go `spared` bytes of its other cached
 * contexts to make room for it (`ConnectionSession.spareKept`): said, since those conversations' continuations will miss
 * (a create refused 413 after all had let another lane's `store: false` conversation go, unsaid; outside attack atk93
 * F2). Room is let go as each slice of token ids is refused, before the create's whole need is known.
 */
function sparedFor(err: WireError, spared: number): WireError {
  if (spared === 0) return err;
  return withNote(err, `To make room for it, this connection let go of its other cached responses (${spared} bytes); a continuation of one is told so.`);
}

/** `err` with `note` after its message, the same refusal otherwise (its code, param, budget ask and retry advice). */
function withNote(err: WireError, note: string): WireError {
  const said = new WireError(err.code, `${err.message} ${note}`, err.param, { cause: err });
  if (err.budgetAsk !== undefined) said.budgetAsk = err.budgetAsk;
  said.budgetHeld = err.budgetHeld;
  said.budgetNote = err.budgetNote;
  if (err.noRetry) said.noRetry = true;
  return said;
}

/**
 * A create refused before its run started, `err`, whose previous response its connection's cache let go with it
 * (`letGo`; a continuation that fails does, as the API's does, but for one refused `server_busy` with its context
 * untouched, which keeps it: ws.ts `failed`): with `store: false` that response is nowhere else, so a refusal that says
 * to try again (`server_busy`) says too that this continuation cannot be retried. Its client was told to try again and
 * every retry was `previous_response_not_found` (outside attack atk85 F4). One that can never fit (`payload_too_large`)
 * says it too: the client must send the whole context again, smaller, not this continuation.
 */
function lostContinuation(err: WireError, params: CreateParams, letGo: boolean): WireError {
  if (!letGo || params.store || (err.code !== 'server_busy' && err.code !== 'payload_too_large') || params.previous_response_id === null) return err;
  return withNote(
    err,
    `This continuation cannot be retried: its previous response '${params.previous_response_id.slice(0, 100)}' was let go from this connection's cache with this refusal (a continuation that fails does), and with store: false it is kept nowhere else; send its whole context again.`,
  );
}
