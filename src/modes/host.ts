/**
 * What the transports see of the server: the session layer's front door.
 * A transport opens a session for a peer (`SessionSet.open`: a WebSocket
 * connection, or one HTTP request as a one-shot session) with the design's
 * policy, and reads the few things an edge needs (limits, clock, log) and
 * the read-only routes' answers (stored responses, run records, health,
 * compaction), and takes its shares of the server-wide byte budget
 * (modes/server-bytes.ts: a `Hold` per HTTP request, `ConnectionBytes` per
 * WebSocket connection). It never sees a run, a plan or the engine's
 * services.
 *
 * `policy()` is the one place that lists the designs: a new design is its
 * policy file, one case here, and the transport's route that names it.
 *
 * Each transport keeps its own `SessionSet` (its in-flight count, `idle()`
 * and `shutdown()`): every session it opened is tracked from the moment it
 * opens until it has wound down, so a create still being planned when the
 * server shuts down is told (`server_shutting_down`) instead of missed.
 */
import type { Logger } from 'pino';
import { WireError } from '../protocol/errors.js';
import type { CompactedResponse, Response } from '../protocol/objects.js';
import type { CompactParams } from '../protocol/parse.js';
import type { CreateParams } from '../protocol/events.js';
import type { Protocol } from '../protocol/designs.js';
import { RunMetrics } from '../pipeline/metrics.js';
import type { PageQuery, RecordPage, RunRecord } from '../engine/records.js';
import { DEFAULT_LIMITS, type Limits, type Services } from '../engine/services.js';
import { compactWindow, countInputTokens, type InputTokenCount } from './compact.js';
import { httpPolicy } from './http.js';
import { LiveRuns, longLivedHttpPolicy } from './long-lived-http.js';
import { BackgroundRuns, type BackgroundResponse } from './background.js';
import type { EventPieces } from '../protocol/event-json.js';
import type { ServerEvent } from '../protocol/events.js';
import type { ParseSpan } from './transport.js';
import { longLivedPolicy } from './long-lived.js';
import { ConnectionSession, type ModePolicy } from './session.js';
import { RunCharge, ServerBytes, connectionBytes, pausedAppendRefusal, pastWholeBudget, type ConnectionBytes, type Hold } from './server-bytes.js';
import { SendBytes, startWaitMs, type SendShare, type Unsent } from './send-bytes.js';
import type { SessionInfo, Transport } from './transport.js';
import { wsModePolicy, type CachedResponses } from './ws.js';
import { InputItemIndex, pageInputItems, type InputItemList, type InputItemsQuery } from '../store/input-items.js';
import { ColdListings } from './cold-listings.js';
import { orphanedResponse, runnerElsewhere } from '../store/runner.js';
import { unfinished } from '../store/types.js';
import { snapshot } from '../engine/response.js';

/** The most deletes × connections one sync of another process's deletes tells one by one (`syncDeletes`). */
export const SYNC_TELLS_MAX = 100_000;

export class SessionHost {
  /** Long-lived runs open over HTTP, found again by id for `append` and `cancel`. */
  readonly live: LiveRuns;

  /** Background responses (`background: true`): in flight, and ended ones whose events are still kept (modes/background.ts). */
  readonly background: BackgroundRuns;

  /**
   * The server-wide byte budget (`maxServerBytes`): one per server, shared
   * by its transports. Given by the composition root, or a new one.
   */
  readonly bytes: ServerBytes;

  /** The server-wide bound on unsent bytes (`maxSendBufferTotalBytes`, modes/send-bytes.ts): every reader's share of it. */
  readonly unsent: SendBytes;

  /** The queue of cold `input_items` listings (`maxQueuedListings`, modes/cold-listings.ts): one list loaded and derived at a time. */
  readonly listings: ColdListings;

  /** Each stored response a ws-mode connection cache holds, with what evicts it from that cache (`deleteStoredResponse`). */
  private readonly wsCached = new Map<string, () => void>();

  /**
   * How an owner's ws-mode policies register what their caches hold, and hear of that owner's deletes (modes/ws.ts):
   * a chain holds only its owner's responses, so only they are told (an API key's hash, or null with no keys).
   */
  private cachedResponses(owner: string | null): CachedResponses {
    return {
      hold: (id, evict) => void this.wsCached.set(id, evict),
      release: (id) => void this.wsCached.delete(id),
      sync: () => this.syncDeletes(),
      watch: (deleted) => {
        let watchers = this.deleteWatchers.get(owner);
        if (!watchers) this.deleteWatchers.set(owner, (watchers = new Set()));
        watchers.add(deleted);
        return () => {
          watchers.delete(deleted);
          if (watchers.size === 0 && this.deleteWatchers.get(owner) === watchers) this.deleteWatchers.delete(owner);
        };
      },
    };
  }

  /** `SYNC_TELLS_MAX`, as this host applies it (tests lower it: past it is a burst of 100,000 tells). */
  syncTellsMax = SYNC_TELLS_MAX;

  /** Per owner, the ws-mode connections told of each delete (one per connection, until it ends). */
  private readonly deleteWatchers = new Map<string | null, Set<(id: string | null) => void>>();

  constructor(
    private readonly services: Services,
    bytes?: ServerBytes,
  ) {
    this.bytes = bytes ?? new ServerBytes(services.limits.maxServerBytes);
    this.live = new LiveRuns(services, this.bytes);
    this.bytes.peersHeld = () => this.heldForPeers();
    this.bytes.endStuck = (except, need) => this.endStuckMessages(except, need);
    this.background = new BackgroundRuns(services);
    this.unsent = new SendBytes(services.limits.maxSendBufferTotalBytes, services.limits.maxSendBufferBytes, startWaitMs(services.limits.sendStallTimeoutMs));
    this.listings = new ColdListings(services.limits.maxQueuedListings ?? DEFAULT_LIMITS.maxQueuedListings);
  }

  get limits(): Readonly<Limits> {
    return this.services.limits;
  }

  /** Whether a create's unknown top-level fields are ignored rather than refused (`llr serve --allow-unknown-parameters`). */
  get allowUnknownParameters(): boolean {
    return this.services.allowUnknownParameters === true;
  }

  /** Whether a line about a client's mistake may be logged now (the server-wide budget, engine/log-budget.ts); if not, it is counted. */
  clientErrorLogged(): boolean {
    return this.services.clientErrorLog?.take() ?? true;
  }

  get log(): Logger {
    return this.services.log;
  }

  /** The server's clock (ms): transports time their auth check with it. */
  now(): number {
    return this.services.clock.now();
  }

  /** A share of the byte budget for one HTTP request (its body is charged as it is read); the transport releases it when the request is done. */
  requestHold(): Hold {
    return this.bytes.hold();
  }

  /** A WebSocket connection's share of the byte budget: its frames held while `session` has work. */
  connectionBytes(session: ConnectionSession): ConnectionBytes {
    const share = connectionBytes(this.bytes, this.services.limits, session);
    session.share = share;
    return share;
  }

  /**
   * Bytes of the server-wide budget held by WebSocket runs paused for their clients' tool outputs, which nothing but
   * their clients' next appends can free (`ConnectionSession.heldForPeer`). When they alone leave no room for an
   * append, refusing it "until other requests end" waits for ever: each paused run waits for the append the budget
   * refuses (four long runs at the default limits did; outside attack atk76 F1).
   */
  heldForPeers(): number {
    let n = this.live.heldForPeers();
    for (const set of this.sessionSets) n += set.heldForPeers();
    return n;
  }

  /**
   * Messages judged unable to fit beside the paused runs, but `except`'s and those of paused runs whose own append waits
   * for room, end until they have given back `need` bytes (`ConnectionBytes.endStuck`): those whose connection keeps a
   * cached context first (it is let go and the message waits on: nobody is closed), then the largest; none when together
   * they cannot. Ending only the one judged, another stuck message took the room it gave back, the append could not be
   * read, and that message waited the request timeout for an append that never came; ending them all, a 150 KiB append
   * closed three 250 KiB uploads where one was enough (outside attack atk95 F2), and a paused run's own waiting append
   * was ended with the message judged for its sake, both runs `incomplete` (atk95 F1). `cachesOnly`: only messages
   * whose connection keeps a cached context count, so nobody is closed (none is let go when those cannot give `need`).
   */
  endStuckMessages(except: ConnectionSession, need: number, cachesOnly = false): number {
    const shares: Array<{ share: NonNullable<ConnectionSession['share']>; gives: number; sheds: boolean }> = [];
    let total = 0;
    for (const set of this.sessionSets) {
      for (const s of set.stuckSessions(except)) {
        const gives = s.share?.stuckGives?.() ?? 0;
        const sheds = s.keptBytes() > 0;
        if (cachesOnly && !(sheds && s.isIdle())) continue;
        if (gives > 0) shares.push({ share: s.share!, gives, sheds });
        total += gives;
      }
    }
    // Ended for less than the need, they would be lost for nothing.
    if (total < need) return 0;
    shares.sort((a, b) => Number(b.sheds) - Number(a.sheds) || b.gives - a.gives);
    let given = 0;
    for (const { share } of shares) {
      if (given >= need) break;
      given += share.endStuck?.() ?? 0;
    }
    return given;
  }

  /**
   * Whether a paused run's append but `except`'s is on its way in (`ConnectionSession.appendComing`; over HTTP one
   * refused for room, `LiveRuns.waitsForRoom`, or being read or applied, `LiveRuns.appendArriving`, which WebSocket
   * messages did not yield to: outside attack atk96 I1): room that comes back is its, until it is applied.
   */
  pausedAppendComing(except: ConnectionSession): boolean {
    if (this.live.waitsForRoom() || this.live.appendArriving()) return true;
    for (const set of this.sessionSets) if (set.appendComing(except)) return true;
    return false;
  }

  /**
   * The room the appends of runs paused for their clients but `except`'s wait for over a WebSocket: beyond what each
   * has charged (`ConnectionSession.share.roomWanted`), and for those read whole and being applied, their token ids,
   * counted as their frames' bytes (`ConnectionSession.appendsApplying`). Room that comes back is theirs first, so a
   * message that would take it yields (`WsConnection.yields`).
   */
  appendsWant(except: ConnectionSession): number {
    // Not an HTTP append refused for room: nothing says its client sends it again, and counted until its run took an
    // append or ended (up to the pause timeout), a create on an idle budget waited its whole request timeout (outside
    // attack atk100 F1).
    let n = 0;
    for (const set of this.sessionSets) {
      for (const w of set.roomWaits(except)) n += w.wanted;
      n += set.appendsApplying(except);
    }
    return n;
  }

  /**
   * What ending the messages judged unable to fit beside the runs paused for their clients (`ConnectionBytes.stuck`,
   * `except`'s among them) would give a run paused for its client, other than `except`'s: its client's message
   * arriving waits for room (`ConnectionSession.share.roomWanted`; over HTTP an append refused for room,
   * `LiveRuns.roomWanted`) that the room left lacks and the room those messages hold would give. Then each waits for
   * the other, and such messages are ended (`endStuckMessages`). The least such shortfall beyond the room left (one run
   * going on is enough), or 0 when none. A message ended because some paused run waited for room, whoever held it, was
   * lost for nothing: a create holding no byte was closed 1013 at once while the paused run's append waited for a third
   * connection's slow upload, after which all fitted (outside attack atk87 F3).
   */
  stuckMessagesHoldPausedRun(except: ConnectionSession): number {
    const room = this.bytes.max - this.bytes.held;
    let stuck = 0;
    for (const set of this.sessionSets) stuck += set.stuckBytes();
    let least = 0;
    // `own`: what the waiting run's own message, judged stuck too, counts among them; ending other messages cannot give
    // the run its own share (it was counted, and a create that held less than the append's frame alone was ended for
    // nothing; outside attack atk91 F1).
    const weigh = (wanted: number, own: number) => {
      if (wanted > room && wanted <= room + stuck - own && (least === 0 || wanted - room < least)) least = wanted - room;
    };
    for (const wanted of this.live.roomWanted()) weigh(wanted, 0);
    for (const set of this.sessionSets) for (const w of set.roomWaits(except)) weigh(w.wanted, w.own);
    return least;
  }

  /**
   * `err`, an append's refusal over HTTP (its body, or its token ids, past the budget; `bytes`: what it needed at
   * least): when it is `server_busy` for `owner`'s long-lived run `id`, paused, and runs paused for their clients hold
   * the budget (`heldForPeers`), what its client is told, as over a WebSocket (`pausedAppendRefusal`): no append can
   * fit, and that run ends `incomplete`, or this one cannot and a smaller one may. Told to try again, its client's
   * retries could never fit, and the run waited for its pause timeout (atk76 F1, atk78 F1). `others`: other appends
   * for the run being read or applied meanwhile, any of which may resume it: then the run does not end here.
   */
  endStuckLiveRun(err: unknown, id: string, owner: string | null, bytes: number, others = 0): unknown {
    if (!(err instanceof WireError) || err.code !== 'server_busy' || !this.live.paused(id, owner)) return err;
    const stuck = this.heldForPeers();
    const said = pausedAppendRefusal(this.bytes.max, stuck, bytes);
    // Told to try again, its run waits for room; told to send less (or ended), it waits for nothing: recorded as waiting,
    // a WebSocket run's append was ended 1013 for room this refused append would never take (outside attack atk91 F6).
    this.live.waitedForRoom(id, owner, said === null ? bytes : 0);
    if (said === null || (said.endsRun && others > 0)) return err;
    if (said.endsRun && !this.live.endPaused(id, owner, said, 'server_busy')) return err;
    this.log.info({ code: 'server_busy', bytes, stuck, max: this.bytes.max, response_id: id, ends_run: said.endsRun }, 'append cannot fit the byte budget that paused runs hold');
    return said;
  }

  /** A reader's share of the server-wide bound on unsent bytes (a WebSocket connection, an SSE stream); closed when it is gone. */
  sendShare(socket: Unsent, log: Logger): SendShare {
    return this.unsent.share(socket, log);
  }

  /** The policy of each design. */
  policy(protocol: Protocol, info: SessionInfo): ModePolicy {
    switch (protocol) {
      case 'long-lived':
        return longLivedPolicy(this.services, info);
      case 'ws':
        // With `store: false` a ws-mode create continues only from its connection's cache: the store is no help there.
        return this.chainsFromStore(wsModePolicy(this.services, info, this.cachedResponses(info.owner)), info.owner, (params) => params.store);
      case 'http':
        return this.chainsFromStore(httpPolicy(this.services, info), info.owner, () => true);
      case 'long-lived-http':
        return longLivedHttpPolicy(this.services, info, this.live);
      default: {
        const never: never = protocol;
        throw new Error(`unknown design ${String(never)}`);
      }
    }
  }

  /**
   * A design whose `previous_response_id` is read from the store: a continuation of a background response still
   * in flight (the store has it at its end) is refused saying so, `invalid_value` on `previous_response_id`, not
   * `previous_response_not_found`: `GET /v1/responses/{id}` finds that response, and a client that drops the id on
   * "not found" and sends the rest would lose the context. The client waits for its end (polls it), then continues.
   * `fromStore`: whether the design reads this create's `previous_response_id` from the store (the design's own rule).
   */
  private chainsFromStore(policy: ModePolicy, owner: string | null, fromStore: (params: CreateParams) => boolean): ModePolicy {
    return {
      ...policy,
      // A background response still running is stored at its end: a continuation of it may be served then.
      missing: (params) => (params.previous_response_id && fromStore(params) && this.background.running(params.previous_response_id, owner) ? null : (policy.missing?.(params) ?? null)),
      plan: async (params, metrics, lane, signal) => {
        if (fromStore(params)) await this.written(params.previous_response_id, owner);
        try {
          return await policy.plan(params, metrics, lane, signal);
        } catch (err) {
          throw fromStore(params) ? this.stillRunning(err, params.previous_response_id, owner) : err;
        }
      },
    };
  }

  /**
   * `err`, or, when it is `previous_response_not_found` (or an unfinished link's `invalid_value`) for a response of `owner` still in flight (a background one, or a
   * stored one of any design that has not ended), the refusal that says so (`invalid_value` on
   * `previous_response_id`): a create, a compaction and a token count alike.
   */
  private stillRunning(err: unknown, prev: string | null | undefined, owner: string | null): unknown {
    // `invalid_value` too: a chain's link stored unfinished is refused so in the store's words (`hydrate.ts`), which
    // cannot tell a run of this process's from one whose process is gone.
    const refused = err instanceof WireError && (err.code === 'previous_response_not_found' || (err.code === 'invalid_value' && err.param === 'previous_response_id'));
    if (!refused || !prev) return err;
    if (this.background.running(prev, owner)) {
      return new WireError(
        'invalid_value',
        `Previous response with id '${prev}' is a background response still in progress: a response can be continued once it has ended. Poll it (GET /v1/responses/${prev}) until its status is no longer 'in_progress', then continue from it.`,
        'previous_response_id',
      );
    }
    // A stored response of any design still being made (streaming, or a long-lived run paused for tool outputs):
    // retrieve answers it `in_progress`, so "not found" told a client that drops the id on it to send the rest
    // without its context, as the background case did before it was answered so (outside conformance tester).
    if (this.services.inFlight?.find(prev, owner)?.ended === false) {
      return new WireError(
        'invalid_value',
        `Previous response with id '${prev}' is still in progress: a response can be continued once it has ended. Wait for its terminal event (or poll GET /v1/responses/${prev} until its status is no longer 'in_progress'), then continue from it.`,
        'previous_response_id',
      );
    }
    return err;
  }

  /**
   * Before `prev` is read from the store: `owner`'s response `prev` whose run has ended and whose store write follows
   * its terminal event (`overlap_persist`) and has not run yet is waited for. A client continuing from a response
   * the moment it read `response.completed` was told `previous_response_not_found` (the write runs in the next turns).
   */
  private async written(prev: string | null | undefined, owner: string | null): Promise<void> {
    const run = prev ? this.services.inFlight?.find(prev, owner) : undefined;
    if (run?.writePending) await new Promise<void>((resolve) => run.afterWrite(resolve));
  }

  /** Every transport's set of sessions, for `held()`. */
  private readonly sessionSets: SessionSet[] = [];

  /** A transport's own set of sessions. */
  sessions(): SessionSet {
    const set = new SessionSet(this, this.services);
    this.sessionSets.push(set);
    return set;
  }

  /**
   * What the server holds for its clients now (`GET /llr/stats`, `held`): sessions open (a WebSocket connection's, an
   * HTTP create's), those with a run paused for tool outputs, creates queued behind a run, ws-mode cached responses,
   * long-lived runs open over HTTP, background runs in flight, and the store's responses, bytes and what its bounds
   * dropped. So a client can see from outside that nothing was left behind (outside attack atk62 F5: none of it
   * was reported).
   */
  held(): Record<string, unknown> {
    let sessions = 0;
    let paused = 0;
    let queued = 0;
    for (const set of this.sessionSets) {
      const counts = set.counts();
      sessions += counts.sessions;
      paused += counts.paused;
      queued += counts.queued;
    }
    const store = this.services.store;
    return {
      sessions,
      runs_paused: paused,
      creates_queued: queued,
      ws_cached_responses: this.wsCached.size,
      live_http_runs: this.live.size,
      background_in_flight: this.background.inFlight,
      store: { responses: store.size, bytes: store.bytes, evicted: store.counters.evicted, expired: store.counters.expired },
    };
  }

  /** `POST /v1/responses/compact` (modes/compact.ts). */
  async compact(params: CompactParams, owner: string | null, charge?: (bytes: number) => void, signal?: AbortSignal, own: () => number = () => 0): Promise<CompactedResponse> {
    return this.rendering(params.previous_response_id, owner, (metrics) => compactWindow(params, this.services, metrics, owner, charge, signal), own);
  }

  /**
   * A request that renders a prompt without a run (a compaction, a token count), once the response it continues is
   * written: its token ids are charged to the server-wide byte budget as they are made, as a run's are (`server_busy`
   * past it), and given back when its answer is made. They were counted nowhere: seven token counts of a 4.5 MB body
   * at once grew the RSS 321 MB under a 32 MiB budget that refused the same body as a create (outside attack atk47 F4).
   */
  private async rendering<T>(prev: string | null | undefined, owner: string | null, work: (metrics: RunMetrics) => Promise<T>, own: () => number): Promise<T> {
    await this.written(prev, owner);
    const held = new RunCharge(this.bytes);
    try {
      return await work(new RunMetrics(this.services.clock.now, this.services.limits.maxRunSpans, held));
    } catch (err) {
      // Past the whole budget alone (`own`: the request's body and the chain it loaded; its token ids so far): said so.
      let alone = err;
      if (err instanceof WireError && err.budgetAsk !== undefined) {
        const mine = own() + held.bytes;
        alone = pastWholeBudget(err, this.bytes.max, mine + err.budgetAsk, 'request', mine);
      }
      throw this.stillRunning(alone, prev, owner);
    } finally {
      held.close();
    }
  }

  /** `POST /v1/responses/input_tokens` (modes/compact.ts): what a create with `params` would count as input tokens. */
  async inputTokens(params: CreateParams, owner: string | null, charge?: (bytes: number) => void, signal?: AbortSignal, own: () => number = () => 0): Promise<InputTokenCount> {
    return this.rendering(params.previous_response_id, owner, (metrics) => countInputTokens(params, this.services, metrics, owner, charge, signal), own);
  }

  /** A stored response the owner may read, or undefined. */
  storedResponse(id: string, owner: string | null): Response | undefined {
    return this.storedWithProtocol(id, owner)?.response;
  }

  /** `storedResponse`, with the design that made it (`StoredResponse.protocol`: unknown for a record from before it was kept). */
  storedWithProtocol(id: string, owner: string | null): { response: Response; protocol: Protocol | undefined } | undefined {
    const rec = this.services.store.get(id, owner);
    let r = rec?.response;
    // Stored as it started (a background response) and never ended: its run is not here (a restart after a crash, or
    // its final write failed and its kept events are gone) nor in another process on the file. It never will end.
    if (rec && r && unfinished(rec) && !this.background.find(id, owner) && !runnerElsewhere(rec.runner)) r = orphanedResponse(r);
    // A row an earlier build wrote (a SQLite file outlives the server) has no `access_programs`, which openai-node 7
    // declares always present: null, as every Response now sends it.
    if (!rec || !r) return undefined;
    const response = 'access_programs' in r ? r : { ...(r as Omit<Response, 'access_programs'>), access_programs: null };
    return { response, protocol: rec.protocol };
  }

  /**
   * Refuses (409 `response_running_elsewhere`) a cancel, delete or streamed retrieve (`what`) of `owner`'s background response `id` that another
   * live process on the store's file runs (stored as it started, `store/runner.ts`): that process alone can cancel it,
   * and its final write would store again what a delete here removed (a DELETE answered `deleted: true`, then the
   * response came back). Reads only the record's runner.
   */
  refuseIfRunningElsewhere(id: string, owner: string | null, what: 'cancel or delete' | 'stream' = 'cancel or delete'): void {
    if (this.background.find(id, owner) || !runnerElsewhere(this.services.store.runner(id, owner))) return;
    const then = what === 'stream' ? 'retrieve it without stream once it has ended' : 'or once it has ended';
    throw new WireError(
      'response_running_elsewhere',
      `Response '${id}' is a background response running in another server process on this store; ${what} it through that server, ${then}.`,
      'response_id',
    );
  }

  /** Whether the owner's stored response `id` exists (without reading it). */
  hasStoredResponse(id: string, owner: string | null): boolean {
    return this.services.store.has(id, owner);
  }

  /**
   * A page of a stored response's own input items (`GET /v1/responses/{id}/input_items`), or undefined when the owner
   * may not read it. The list is loaded and its ids derived once per stored version (the store keeps them), in the
   * server-wide queue of cold listings (`listings`: one list at a time, in slices, so many first pages at once hold
   * the event loop no longer than one); later pages cost their own items. `signal`: the client went away (its
   * listing leaves the queue).
   */
  async storedInputItems(id: string, owner: string | null, q: InputItemsQuery, signal?: AbortSignal): Promise<InputItemList | undefined> {
    const index = this.services.store.inputItems(id, owner);
    if (!index) return undefined;
    if (!index.ready) await this.listings.ready(index, signal);
    if (index.gone) return undefined;
    return pageInputItems(index, q);
  }

  /**
   * `owner`'s response `id` that has ended and whose store write is still to come (`overlap_persist`), with its
   * design: what the store will answer for it in a moment (`storedWithProtocol`); undefined otherwise.
   */
  unwrittenWithProtocol(id: string, owner: string | null): { response: Response; protocol: Protocol } | undefined {
    const run = this.services.inFlight?.find(id, owner);
    return run?.writePending ? { response: snapshot(run.response), protocol: run.protocol } : undefined;
  }

  /** Is `owner`'s `store: true` response `id` being made now (what `inFlightResponse` answers), without copying it? */
  isInFlight(id: string, owner: string | null): boolean {
    return this.services.inFlight?.find(id, owner) !== undefined;
  }

  /**
   * `owner`'s `store: true` response `id` while it is being made (any design, not a background one: `background`
   * answers those), `in_progress` with its output so far (engine/in-flight.ts); ended, its final Response until the
   * store has it (`overlap_persist`); undefined otherwise.
   */
  inFlightResponse(id: string, owner: string | null): Response | undefined {
    const run = this.services.inFlight?.find(id, owner);
    return run ? snapshot(run.response) : undefined;
  }

  /** A page of the own input items (appended ones included) of `owner`'s response `id` in flight, background or not. */
  async backgroundInputItems(id: string, owner: string | null, q: InputItemsQuery, signal?: AbortSignal): Promise<InputItemList | undefined> {
    const items = this.background.inputItems(id, owner) ?? this.services.inFlight?.find(id, owner)?.ownInput;
    if (!items) return undefined;
    // Its ids derived in the queue of cold listings, in slices, as a stored list's are: in one turn, 50,000 items
    // held the loop ~30-55 ms per listing.
    const index = new InputItemIndex(id, items);
    if (!index.ready) await this.listings.ready(index, signal);
    return pageInputItems(index, q);
  }

  /**
   * `DELETE` of `owner`'s background response `id` in flight: its run is cancelled, then its stored final Response
   * and kept events are deleted. Retrieve finds such a response, so a delete found it too (it was a 404). Waits for
   * the store write (with `overlap_persist` it may follow the terminal event), so the response is not stored after
   * it was deleted. False when none is in flight, or when another request deleted it meanwhile (two DELETEs in
   * flight together: the second was answered 200 too, where a DELETE of a deleted response is 404).
   */
  async deleteRunningBackground(id: string, owner: string | null): Promise<boolean> {
    const final = this.background.cancel(id, owner);
    if (!final) return false;
    await final;
    // Its run's store write (deferred with `overlap_persist`) is pending by now: wait for the work pending now, not
    // for a moment with none left, which under other clients' steady load never came (the DELETE hung).
    await this.services.postWork.settled();
    const stored = this.deleteStoredResponse(id, owner);
    return this.background.delete(id, owner, stored) || stored;
  }

  /**
   * `DELETE` of `owner`'s `store: true` response `id` while it is being made (not a background one): as for a
   * background response, its run ends `cancelled` (its client's stream says so), then its stored final Response is
   * deleted. Retrieve finds such a response (`inFlightResponse`), so a delete does too: it was a 404, and the response
   * was stored when it ended after all. False when none is in flight, or another request deleted it meanwhile.
   */
  async deleteRunningForeground(id: string, owner: string | null): Promise<boolean> {
    const run = this.services.inFlight?.find(id, owner);
    if (!run) return false;
    run.stop('cancelled', 'cancelled_by_client');
    await run.done;
    await this.services.postWork.settled();
    // Two DELETEs in flight together: the one that deleted it is answered 200, the other 404 as after it.
    return this.deleteStoredResponse(id, owner);
  }

  /** Deletes a stored response, and evicts it from the ws-mode connection cache holding it, if one does. */
  deleteStoredResponse(id: string, owner: string | null): boolean {
    const deleted = this.services.store.delete(id, owner);
    if (deleted) this.tellDeleted(id, owner);
    return deleted;
  }

  /** The ws-mode caches hear that `owner`'s stored response `id` was deleted (here, or by another process). */
  private tellDeleted(id: string, owner: string | null): void {
    for (const told of this.deleteWatchers.get(owner) ?? []) told(id);
    const evict = this.wsCached.get(id);
    if (evict !== undefined) {
      this.wsCached.delete(id);
      evict();
    }
  }

  /**
   * The deletes other processes on the store's file made since the last look, told to the ws-mode caches as this
   * process's own are; more than the store's log names: every cache forgets what it holds.
   */
  private syncDeletes(): void {
    const others = this.services.store.othersDeletes?.();
    if (others === undefined || (others !== 'all' && others.length === 0)) return;
    if (others === 'all') {
      for (const set of this.deleteWatchers.values()) for (const told of set) told(null);
      for (const evict of [...this.wsCached.values()]) evict();
      this.wsCached.clear();
      return;
    }
    // Each id is told to each of its owner's connections: a burst of 9,999 deletes elsewhere told to 300 connections
    // held the loop ~100 ms in one turn (outside attack atk72 F3). Past SYNC_TELLS_MAX tells for one owner, that
    // owner's caches forget what they hold instead (a miss next time, never a wrong hit), and no other owner's do (the
    // threshold counted every key's connections, and every cache forgot: a chain past 10,000 links, which only its
    // cache can continue, was refused after others' deletes; atk73 L1).
    const byOwner = new Map<string | null, string[]>();
    for (const { id, owner } of others) {
      const ids = byOwner.get(owner);
      if (ids) ids.push(id);
      else byOwner.set(owner, [id]);
    }
    for (const [owner, ids] of byOwner) {
      const watchers = this.deleteWatchers.get(owner);
      if (watchers === undefined || ids.length * watchers.size <= this.syncTellsMax) {
        for (const id of ids) this.tellDeleted(id, owner);
        continue;
      }
      for (const told of watchers) told(null);
      for (const id of ids) {
        const evict = this.wsCached.get(id);
        if (evict === undefined) continue;
        this.wsCached.delete(id);
        evict();
      }
    }
  }

  /** The stored responses ws-mode connection caches hold (one at most per connection; tests). */
  get wsCachedResponses(): number {
    return this.wsCached.size;
  }

  runRecords(q: PageQuery): RecordPage {
    return this.services.records.page(q);
  }

  runRecord(id: string): RunRecord | undefined {
    return this.services.records.get(id);
  }

  /** Post-inference work still running and done (`GET /health`). */
  postWork(): { pending: number; completed: number } {
    return { pending: this.services.postWork.inFlight, completed: this.services.postWork.completed };
  }
}

/** The sessions one transport opened, tracked until each has wound down. */
export class SessionSet {
  private readonly open = new Set<ConnectionSession>();
  private idleWaiters: Array<() => void> = [];
  private shuttingDown = false;

  constructor(
    private readonly host: SessionHost,
    private readonly services: Services,
  ) {}

  get size(): number {
    return this.open.size;
  }

  /** Its sessions, those with a run paused for the client, and the creates queued behind runs. */
  counts(): { sessions: number; paused: number; queued: number } {
    let paused = 0;
    let queued = 0;
    for (const s of this.open) {
      if (s.paused) paused++;
      queued += s.queuedCreates;
    }
    return { sessions: this.open.size, paused, queued };
  }

  /** What its sessions hold of the budget that only their peers can free (`ConnectionSession.heldForPeer`). */
  heldForPeers(): number {
    let n = 0;
    for (const s of this.open) n += s.heldForPeer();
    return n;
  }

  /**
   * Its sessions but `except` paused for their clients with a message arriving that waits for room: what each lacks
   * (`wanted`) and what its own message, judged stuck too, holds (`own`).
   */
  *roomWaits(except: ConnectionSession): Iterable<{ wanted: number; own: number }> {
    for (const s of this.open) {
      const wanted = s !== except && s.paused ? (s.share?.roomWanted?.() ?? 0) : 0;
      if (wanted > 0) yield { wanted, own: s.share?.stuckBytes?.() ?? 0 };
    }
  }

  /** What the appends being applied to its sessions' paused runs but `except`'s may still take (`appendsApplying`). */
  appendsApplying(except: ConnectionSession): number {
    let n = 0;
    for (const s of this.open) if (s !== except) n += s.appendsApplying;
    return n;
  }

  /** Whether one of its sessions but `except` is paused with its client's append on its way in (`appendComing`). */
  appendComing(except: ConnectionSession): boolean {
    for (const s of this.open) if (s !== except && s.appendComing) return true;
    return false;
  }

  /**
   * Its sessions but `except` whose message is judged stuck beside the paused runs and may be ended for a paused run's
   * sake (`SessionHost.endStuckMessages`): not those of paused runs whose own append waits for room, which may be the
   * run helped.
   */
  *stuckSessions(except: ConnectionSession): Iterable<ConnectionSession> {
    for (const s of this.open) {
      if (s === except || (s.share?.stuckBytes?.() ?? 0) === 0) continue;
      if (s.paused && (s.share?.roomWanted?.() ?? 0) > 0) continue;
      yield s;
    }
  }

  /** What ending its sessions' messages judged unable to fit beside the paused runs would give back (`ConnectionBytes.stuckBytes`). */
  stuckBytes(): number {
    let n = 0;
    for (const s of this.open) n += s.share?.stuckBytes?.() ?? 0;
    return n;
  }

  /** Whether shutdown has begun: nothing opens any more. */
  get closing(): boolean {
    return this.shuttingDown;
  }

  /**
   * A session of `protocol` for a peer; `server_shutting_down` once
   * shutdown has begun. It stays in the set until it ends (the transport
   * closes it when the peer is gone; shutdown finishes it).
   */
  openSession(protocol: Protocol, transport: Transport, info: SessionInfo, log: Logger): ConnectionSession {
    if (this.shuttingDown) throw new WireError('server_shutting_down');
    const session = new ConnectionSession(this.host.policy(protocol, info), this.services, transport, info, log, this.host.bytes);
    this.open.add(session);
    void session.finished.then(() => {
      this.open.delete(session);
      if (this.open.size === 0) for (const w of this.idleWaiters.splice(0)) w();
    });
    return session;
  }

  /**
   * A background create (`background: true`, the `http` design): admitted under its cap (and only with `store`),
   * run in a one-shot session of its own whose transport keeps its events (framed by `frame`) for whoever follows
   * it, not in the request's, so the request's end does not end it. Its body's `bytes` stay charged until the run
   * ends. Await `started` for its Response or the create's refusal.
   */
  openBackground(
    params: CreateParams,
    info: SessionInfo,
    log: Logger,
    frame: (e: ServerEvent) => EventPieces,
    bytes: number,
    parse: ParseSpan | null,
  ): BackgroundResponse {
    if (this.shuttingDown) throw new WireError('server_shutting_down');
    const hold = this.host.requestHold();
    const bg = this.host.background.admit(params.store, info.owner, frame, hold);
    hold.admitted(bytes);
    // A stored chain it loads is held by its run too: charged with its body, released when it ends.
    const session = this.openSession('http', bg, { ...info, charge: (n) => hold.add(n) }, log);
    bg.attach(session);
    session.handle({ type: 'response.create', ...params }, bytes, parse);
    return bg;
  }

  /** Resolves once no session is open and every closed one is fully wound down. */
  idle(): Promise<void> {
    if (this.open.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Shutdown: every session's run in flight ends `incomplete` with its terminal event; creates not started are told. */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    await Promise.all([...this.open].map((s) => s.shutdown()));
  }
}

