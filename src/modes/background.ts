/**
 * Background mode (`background: true` on `POST /v1/responses`), as the API
 * has it: the run goes on server-side whatever becomes of the request that
 * created it. The create is answered as soon as the run has started (its
 * Response, `status: "in_progress"`, `background: true`), `GET
 * /v1/responses/{id}` reads its current state, `POST .../cancel` ends it
 * `cancelled`, and its events are kept so a stream can be read, or read
 * again after a disconnect, from any sequence number (`GET
 * /v1/responses/{id}?stream=true&starting_after=N`).
 *
 * Nothing here is a new design: a background create is the `http` design's
 * one-shot session (modes/http.ts) whose `Transport` is a
 * `BackgroundResponse` instead of the request. It keeps each event's frame
 * (serialised by the transport that asked: SSE) and hands it to whoever
 * follows the response; a follower that goes away (or is dropped for not
 * reading) leaves the run alone. The session ends when the run does, or at
 * shutdown (`incomplete`, like every run in flight).
 *
 * Bounds (docs/reliability.md): runs in flight, admitted creates being
 * planned included (`maxBackgroundRuns`, 429 `too_many_background_runs`
 * past it); bytes of kept events per response (`maxBackgroundEventBytes`:
 * past it the oldest are dropped, and a stream that would start before them
 * is refused); how long an ended response's events stay
 * (`backgroundEventsTtlMs`); and bytes of ended responses' events kept
 * server-wide (`maxBackgroundKeptBytes`: past it the longest ended go
 * first). Each run also holds its create body's bytes in the server-wide
 * byte budget until it ends, as a streaming HTTP create does.
 */
import { WireError } from '../protocol/errors.js';
import { isTimingEvent, type ServerEvent } from '../protocol/events.js';
import type { InputItem, Response } from '../protocol/objects.js';
import { piecesLength, type EventPieces } from '../protocol/event-json.js';
import { snapshot } from '../engine/response.js';
import type { Services } from '../engine/services.js';
import type { Hold } from './server-bytes.js';
import type { ConnectionSession } from './session.js';
import type { Transport } from './transport.js';
import { unfinished } from '../store/types.js';
import { THIS_RUNNER, orphanedResponse } from '../store/runner.js';

/**
 * How often (ms) a background response's `in_progress` row that its final write failed to replace is tried again
 * (`BackgroundRuns.settle`), besides at every later background response's end.
 */
export const SETTLE_RETRY_MS = 5_000;
/** At most this many such rows are remembered for another try (the oldest forgotten first). */
const MAX_UNSETTLED = 10_000;

/** One reader of a background response's events: a stream the transport writes (SSE). */
export interface Follower {
  /** The stream starts (HTTP: the SSE headers go out). Called once, before any frame. */
  start(): void;
  /** One event's frame, in sequence order. */
  frame(pieces: EventPieces): void;
  /** What this turn has batched goes out now (modes/transport.ts `flush`). */
  flush?(): void;
  /** The response has ended and every event was given: the stream ends (SSE: `data: [DONE]`). */
  end(): void;
  /** An injected disconnect (chaos knobs), or a reader the kept events left behind: the stream ends without a terminal event. */
  drop(): void;
  /** Bytes given to the stream that its socket has not taken yet (none known: every event is given at once). */
  unsent?(): number;
  /** `resume` once the stream's unsent bytes have left (called after `unsent()` reached `FOLLOW_WINDOW`). */
  whenDrained?(resume: () => void): void;
  /**
   * Whether this reader asked for the `llr:timing` extension event (`X-LLR-Timing: 1`; the create's own stream:
   * as its create asked). The run sends it when its create asked; every other reader is left without it, as a
   * client that did not ask never receives it (openai-node's stream helper throws on an event type it does not know).
   */
  readonly timing: boolean;
}

/**
 * Unsent bytes a follower may hold before it is given no more events until they have left: the rest it reads
 * from the kept events, which every follower shares. Given every event at once, each follower that read nothing
 * held up to the send limit (4 MiB) unsent, outside the server-wide bound, which does not pace background
 * streams: 400 resumes of one response took the server from 563 MB to 2 GB of RSS (outside attack).
 */
export const FOLLOW_WINDOW = 64 * 1024;

/** One kept event: its sequence number and its frame. */
interface Kept {
  seq: number;
  pieces: EventPieces;
  bytes: number;
  /** The `llr:timing` extension event: only for readers that asked for it. */
  timing: boolean;
}

/**
 * What a kept response costs besides its events: its entry, maps and promises, and the Responses it holds (the one
 * it started with, the newest an event carried) with the JSON text kept for the first: counted so that many small
 * ones are bounded too. Measured with `npm run bench:kept`: with 256 here, and `KEPT_EVENT_BYTES`, a small response
 * was counted ~3.3 KB less than the heap its keeping took.
 */
export const KEPT_RESPONSE_BYTES = 4096;

/**
 * What a kept event holds besides its frame's bytes: its `Kept` record, its pieces array, and the frame string's own
 * header and the cons string left over it once measured (`piecesLength` flattens it). Counting the frames' bytes
 * alone (and 256 bytes a response), 2,000 small responses of 58 kept events each took 22.2 KB of heap apiece against
 * 12.4 KB counted in `background_kept_bytes` (`npm run bench:kept`), so `--max-background-kept-bytes` bounded about
 * half the heap it was set for: ~170 bytes an event went uncounted, response entry included.
 */
export const KEPT_EVENT_BYTES = 160;

/** The background responses of one server: in flight, and ended ones whose events are still kept. */
export class BackgroundRuns {
  /** By response id, from the run's start until its events are dropped. */
  private readonly byId = new Map<string, BackgroundResponse>();
  /** Ended responses still kept, oldest end first (expiry and eviction take them from the front). */
  private readonly endedKept = new Map<string, BackgroundResponse>();
  private admitted = 0;
  private keptBytes = 0;
  /**
   * Dropped responses whose events readers behind still read (`BackgroundResponse.forget`): still counted in
   * `keptBytes` until the last of those readers is done, oldest drop first.
   */
  private readonly lingering = new Set<BackgroundResponse>();
  private expiry: ReturnType<typeof setTimeout> | null = null;
  /**
   * Responses of this server stored `in_progress` as they started whose final write failed (`unstoredFinal`): their
   * row names this live process as its runner, so every other server on the file answered them `in_progress` (and
   * refused their DELETE and cancel) for as long as this one lived. Replaced by their failed record (`settle`) once
   * the store writes again: at every later background response's end, and every `SETTLE_RETRY_MS`.
   */
  private readonly unsettled = new Map<string, string | null>();
  private settleTimer: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly services: Services) {}

  /** Background runs in flight: admitted (being planned) or running. */
  get inFlight(): number {
    return this.admitted;
  }

  /** Bytes of ended responses' kept events (and their entries). */
  get endedBytes(): number {
    return this.keptBytes;
  }

  /**
   * A background create's transport, admitted under the cap: `store` must be true (the API refuses a background
   * response it could not keep), and at most `maxBackgroundRuns` may be in flight. `frame` serialises an event as
   * the followers' stream carries it; `hold` is the create body's share of the byte budget, released when the run ends.
   */
  admit(store: boolean, owner: string | null, frame: (e: ServerEvent) => EventPieces, hold: Hold): BackgroundResponse {
    if (!store) {
      throw new WireError(
        'invalid_value',
        "Background mode requires 'store': true: a background response is read back by id (retrieve, resume, cancel), so it must be stored.",
        'store',
      );
    }
    const cap = this.services.limits.maxBackgroundRuns;
    if (this.admitted >= cap) {
      throw new WireError('too_many_background_runs', `At most ${cap} background responses may be in flight at once (llr serve --max-background-runs); try again when one ends.`);
    }
    this.admitted++;
    return new BackgroundResponse(this, this.services, owner, frame, hold);
  }

  /** The kept background response `id` of `owner` (in flight, or ended with its events kept); another key's is missing. */
  find(id: string, owner: string | null): BackgroundResponse | undefined {
    this.sweep();
    const r = this.byId.get(id);
    return r && r.owner === owner ? r : undefined;
  }

  /** Whether `owner`'s background response `id` is in flight (started, not ended). */
  running(id: string, owner: string | null): boolean {
    const r = this.find(id, owner);
    return r !== undefined && !r.isOver;
  }

  /**
   * The current state of an in-flight background response of `owner`; or, ended, its final Response if the store
   * could not keep it (the run failed saying so: a client polling for it would otherwise find nothing); else
   * undefined (the store has it).
   */
  current(id: string, owner: string | null): Response | undefined {
    return this.find(id, owner)?.current();
  }

  /**
   * The own input items of `owner`'s background response `id` while it is in flight (the store lists them once it
   * has ended); undefined otherwise. Retrieve finds such a response, so its listing did too: it was a 404.
   */
  inputItems(id: string, owner: string | null): InputItem[] | undefined {
    const r = this.find(id, owner);
    return r && !r.isOver ? r.inputItems() : undefined;
  }

  /** Cancel an in-flight background response: resolves with its final Response; undefined when none is in flight. */
  cancel(id: string, owner: string | null): Promise<Response> | undefined {
    return this.find(id, owner)?.cancel();
  }

  /**
   * `DELETE /v1/responses/{id}` of `owner`'s background response `id`, `stored` when the store had it (and has
   * deleted it): its kept events go too, so a streamed retrieve no longer reads what was deleted (one in flight
   * keeps none when it ends). One the store could not keep is deleted here: retrieve answers its failed final
   * Response, so delete finds it too. Returns whether it was deleted here (false when it was never stored or kept).
   */
  delete(id: string, owner: string | null, stored: boolean): boolean {
    const r = this.find(id, owner);
    if (!r || (!stored && !r.unstoredFinal)) return false;
    if (r.isOver) {
      this.drop(r);
      this.bound();
    } else r.deleted = true;
    return true;
  }

  /** Shutdown: kept events are dropped and the expiry timer stops (the runs themselves end through their sessions). */
  close(): void {
    if (this.expiry) clearTimeout(this.expiry);
    this.expiry = null;
    if (this.settleTimer) clearInterval(this.settleTimer);
    this.settleTimer = null;
    this.unsettled.clear();
    for (const r of this.endedKept.values()) this.drop(r);
  }

  /** @internal The run started: found by id from now on. */
  registered(r: BackgroundResponse): void {
    this.byId.set(r.id!, r);
  }

  /** @internal An admitted create that never started (refused, shutdown while planned): its slot frees. */
  released(): void {
    this.admitted--;
  }

  /** @internal The run ended: its slot frees; its events stay for the TTL, within the server-wide bound. */
  ended(r: BackgroundResponse): void {
    this.admitted--;
    if (r.id !== null && r.unstoredFinal) {
      this.unsettled.delete(r.id);
      this.unsettled.set(r.id, r.owner);
      if (this.unsettled.size > MAX_UNSETTLED) this.unsettled.delete(this.unsettled.keys().next().value!);
    }
    this.settle();
    const ttl = this.services.limits.backgroundEventsTtlMs;
    // A response deleted before its end keeps nothing.
    if (r.id === null || ttl <= 0 || r.deleted) {
      if (r.id !== null) this.drop(r);
      this.bound();
      return;
    }
    this.endedKept.set(r.id, r);
    this.keptBytes += r.bytes + KEPT_RESPONSE_BYTES;
    const max = this.services.limits.maxBackgroundKeptBytes;
    // The longest ended go first; the one that just ended is kept even alone past the bound (it is what a client resumes).
    for (const old of this.endedKept.values()) {
      if (this.keptBytes <= max || old === r) break;
      this.drop(old);
    }
    this.bound();
    this.sweep();
  }

  /**
   * Each unsettled response's row, still `in_progress` with this process as its runner, replaced by the record its
   * readers answer once its runner is gone (`orphanedResponse`: failed); one the store no longer has, or has final, is
   * done. Stops at the first write that fails (the store still cannot write): tried again later.
   */
  private settle(): void {
    for (const [id, owner] of this.unsettled) {
      try {
        const rec = this.services.store.get(id, owner);
        if (rec && unfinished(rec) && rec.runner === THIS_RUNNER) {
          const { runner: _, ...rest } = rec;
          this.services.store.put({ ...rest, response: orphanedResponse(rec.response) });
        }
      } catch {
        break;
      }
      this.unsettled.delete(id);
    }
    if (this.unsettled.size > 0 && this.settleTimer === null) {
      this.settleTimer = setInterval(() => this.settle(), SETTLE_RETRY_MS);
      this.settleTimer.unref();
    } else if (this.unsettled.size === 0 && this.settleTimer !== null) {
      clearInterval(this.settleTimer);
      this.settleTimer = null;
    }
  }

  /** Drop what has been kept past its TTL, and time the next expiry. */
  private sweep(): void {
    const ttl = this.services.limits.backgroundEventsTtlMs;
    const now = this.services.clock.now();
    for (const r of this.endedKept.values()) {
      if (now - r.endedAt < ttl) break;
      this.drop(r);
    }
    if (this.expiry) clearTimeout(this.expiry);
    this.expiry = null;
    const next = this.endedKept.values().next();
    if (next.done) return;
    this.expiry = setTimeout(() => this.sweep(), Math.max(1, next.value.endedAt + ttl - now));
    this.expiry.unref();
  }

  /**
   * Its events are no longer found by id; they stay counted until its readers behind are done with them (at once when
   * there are none). One never kept (deleted or ended with a TTL of 0) is counted from now, unchecked, as well.
   */
  private drop(r: BackgroundResponse): void {
    if (r.id === null) return;
    const held = r.bytes + KEPT_RESPONSE_BYTES;
    if (!this.endedKept.delete(r.id)) this.keptBytes += held;
    if (this.byId.get(r.id) === r) this.byId.delete(r.id);
    this.lingering.add(r);
    r.forget(() => {
      this.lingering.delete(r);
      this.keptBytes -= held;
    });
  }

  /**
   * Past `--max-background-kept-bytes` once the kept responses have gone as far as they may, the readers behind on the
   * events of dropped responses are dropped, oldest drop first, and those events with them: each such reader kept
   * its response's events (up to `--max-background-event-bytes`) for as long as it read, counted nowhere.
   */
  private bound(): void {
    const max = this.services.limits.maxBackgroundKeptBytes;
    for (const r of this.lingering) {
      if (this.keptBytes <= max) break;
      r.dropBehind();
    }
  }
}

/**
 * One background response: the `Transport` of its one-shot session. Keeps
 * each event's frame (at most `maxBackgroundEventBytes`, the oldest dropped
 * first, always the newest) and passes it to its followers. Never waits for
 * a reader: a follower that does not read is dropped by its own stream's
 * send limit, and can resume from its last sequence number.
 */
export class BackgroundResponse implements Transport {
  id: string | null = null;
  endedAt = 0;
  /** Bytes of the kept events. */
  bytes = 0;
  /** Deleted (`DELETE`) after the store had it, before the run ended: its events are not kept past its end. */
  deleted = false;
  /** Resolves with the Response as it started (`response.created`), or rejects with the create's refusal. */
  readonly started: Promise<Response>;
  private resolveStarted!: (r: Response) => void;
  private rejectStarted!: (err: WireError) => void;
  private readonly events: Kept[] = [];
  /** Index of the oldest kept event in `events` (dropped ones are cleared, compacted now and then). */
  private head = 0;
  /** Sequence numbers up to this one were dropped (-1: none). */
  private droppedUpTo = -1;
  /** Each follower, with the first sequence number it reads (a resume's `starting_after` + 1, which may not be sent yet). */
  private readonly followers = new Map<Follower, number>();
  /** Followers behind the live events (`FOLLOW_WINDOW`), with the next sequence number each reads from the kept events. */
  private readonly behind = new Map<Follower, number>();
  /**
   * Its events were dropped (`forget`: no longer found by id, no longer counted): the readers behind still read
   * them at their own pace, and they go once the last of those has read them or left.
   */
  private forgetting = false;
  /** Told once its dropped events are gone (`forget`). */
  private released: (() => void) | null = null;
  /** The create's own stream, until the run starts (`followFromStart`). */
  private first: Follower | null = null;
  private session: ConnectionSession | null = null;
  private over = false;
  /** The streams were dropped (an injected disconnect): the kept events end without a terminal event. */
  private dropped = false;
  /**
   * What a cancel in flight resolves with; let go once the run ends (a cancel already waiting holds its own
   * reference), so an ended response does not keep a second copy of its final Response until its events expire.
   */
  private finalResponse: Promise<Response> | null;
  private resolveFinal!: (r: Response) => void;
  /** The final Response of a run that ended failed, kept with the events when the store does not have it (a storage failure). */
  private unstored: Response | null = null;
  /** The newest Response an event carried (lifecycle events): the final one if the session fails without `ended`. */
  private lastSeen: Response | null = null;

  constructor(
    private readonly runs: BackgroundRuns,
    private readonly services: Services,
    readonly owner: string | null,
    private readonly frameOf: (e: ServerEvent) => EventPieces,
    private readonly hold: Hold,
  ) {
    this.started = new Promise<Response>((resolve, reject) => {
      this.resolveStarted = resolve;
      this.rejectStarted = reject;
    });
    // A refusal nobody awaits (the transport always does) must not be an unhandled rejection.
    this.started.catch(() => {});
    this.finalResponse = new Promise<Response>((resolve) => (this.resolveFinal = resolve));
  }

  /** Whether the run has ended. */
  get isOver(): boolean {
    return this.over;
  }

  /** Whether the final Response is kept here because the store could not keep it (retrieve answers it). */
  get unstoredFinal(): boolean {
    return this.unstored !== null;
  }

  /** The session that runs it (for cancel and the current state). */
  attach(session: ConnectionSession): void {
    this.session = session;
  }

  /** A snapshot of the run's Response while it is in flight; once it ended, its final Response if it was not stored. */
  current(): Response | undefined {
    if (this.over) return this.unstored ?? undefined;
    const run = this.session?.running;
    return run ? snapshot(run.response) : undefined;
  }

  /** Its run's own input items while it is in flight (modes/background.ts `BackgroundRuns.inputItems`). */
  inputItems(): InputItem[] | undefined {
    return this.over ? undefined : this.session?.running?.ownInput;
  }

  /**
   * End the run `cancelled` (a `response.cancel` on its session); resolves with its final Response. Once ended:
   * its final Response if the store could not keep it, else undefined (the store answers).
   */
  cancel(): Promise<Response> | undefined {
    if (this.over) return this.unstored ? Promise.resolve(this.unstored) : undefined;
    if (this.id === null || !this.session) return undefined;
    this.session.handle({ type: 'response.cancel', response_id: this.id });
    return this.finalResponse ?? undefined;
  }

  /**
   * Follow from after sequence number `after` (null: from the start): the kept events after it, then the live
   * ones, then `end`. Throws `invalid_value` (`starting_after`) before anything is written when some of those
   * events are no longer kept. Returns the way to stop following.
   */
  follow(after: number | null, f: Follower): () => void {
    const from = after === null ? 0 : after + 1;
    if (from <= this.droppedUpTo) {
      const limit = this.services.limits.maxBackgroundEventBytes;
      throw new WireError(
        'invalid_value',
        `The events of response '${this.id}' up to sequence number ${this.droppedUpTo} are no longer kept (at most ${limit} bytes of events are kept per background response, llr serve --max-background-event-bytes): resume with 'starting_after' of at least ${this.droppedUpTo}.`,
        'starting_after',
      );
    }
    f.start();
    // From the kept events as the reader takes them, then live (`catchUp`). A `starting_after` at or past the last
    // event sent: the live events up to it are skipped too.
    this.behind.set(f, from);
    this.catchUp(f);
    return () => {
      this.followers.delete(f);
      this.leftBehind(f);
    };
  }

  /** Follower `f` no longer reads the kept events; once forgotten, they go with the last such reader. */
  private leftBehind(f: Follower): void {
    this.behind.delete(f);
    if (this.forgetting && this.behind.size === 0) this.release();
  }

  /**
   * Give follower `f`, behind, the kept events from its next one while it has room (`FOLLOW_WINDOW`); then it
   * follows live, or ends if the run has. Resumed when its stream drains. Dropped when the events it has still to
   * read are no longer kept (it may resume, as a reader dropped at the send limit could).
   */
  private catchUp(f: Follower): void {
    let next = this.behind.get(f);
    if (next === undefined) return;
    if (next <= this.droppedUpTo) {
      this.leftBehind(f);
      this.toFollower(f, () => f.drop());
      return;
    }
    const events = this.events;
    // The first kept event at or past `next` (sequence numbers increase).
    let lo = this.head;
    let hi = events.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (events[mid]!.seq < next) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < events.length; i++) {
      if (f.unsent && f.whenDrained && f.unsent() >= FOLLOW_WINDOW) {
        this.behind.set(f, next);
        f.whenDrained(() => this.catchUp(f));
        return;
      }
      const k = events[i]!;
      if (!k.timing || f.timing) this.toFollower(f, () => f.frame(k.pieces));
      next = k.seq + 1;
      if (!this.behind.has(f)) return; // it failed, or went away
    }
    this.leftBehind(f);
    if (this.over) this.toFollower(f, () => (this.dropped ? f.drop() : f.end()));
    else this.followers.set(f, next);
  }

  /**
   * Follow from the run's first event, live: the create's own stream. Attached now, started (`start`) by the run's
   * `response.created`, so no event can be dropped from the kept ones before it reads it (a large echo passes the
   * per-response bound in two events), and a create refused before its run starts never starts it (its request gets
   * an HTTP status). Returns the way to stop following.
   */
  followFromStart(f: Follower): () => void {
    this.first = f;
    return () => {
      if (this.first === f) this.first = null;
      this.followers.delete(f);
      // Behind too once it held FOLLOW_WINDOW unsent (`send`): left there, its stream closed, it kept a forgotten
      // response's events for good.
      this.leftBehind(f);
    };
  }

  send(e: ServerEvent): void {
    if (this.id === null && e.type === 'response.created') {
      this.id = e.response.id;
      this.runs.registered(this);
      this.resolveStarted(e.response);
      const f = this.first;
      this.first = null;
      if (f) {
        this.followers.set(f, 0);
        this.toFollower(f, () => f.start());
      }
    }
    if ('response' in e) this.lastSeen = e.response;
    const pieces = this.frameOf(e);
    const k: Kept = { seq: e.sequence_number, pieces, bytes: piecesLength(pieces) + KEPT_EVENT_BYTES, timing: isTimingEvent(e) };
    this.events.push(k);
    this.bytes += k.bytes;
    this.trim();
    for (const [f, from] of this.followers) {
      if (k.seq < from || (k.timing && !f.timing)) continue;
      if (f.unsent && f.whenDrained && f.unsent() >= FOLLOW_WINDOW) {
        // It reads the rest from the kept events once what it holds has left.
        this.followers.delete(f);
        this.behind.set(f, k.seq);
        f.whenDrained(() => this.catchUp(f));
        continue;
      }
      this.toFollower(f, () => f.frame(pieces));
    }
  }

  flush(): void {
    for (const f of this.followers.keys()) this.toFollower(f, () => f.flush?.());
  }

  /**
   * An injected disconnect (chaos knobs): every follower's stream ends without a terminal event; the run ends
   * `cancelled`, its terminal event never sent, so a stream read later ends the same way (not with `[DONE]`, which
   * says the stream is whole: the SDK's stream helper then failed with no final Response).
   */
  drop(): void {
    this.dropped = true;
    for (const f of [...this.followers.keys()]) this.toFollower(f, () => f.drop());
    this.followers.clear();
  }

  /** The create was refused before its run started (or, should the session fail after it, the run is over). */
  refuse(err: WireError): void {
    if (this.id === null && !this.over) {
      this.over = true;
      this.first = null;
      this.hold.releaseAll();
      this.runs.released();
      this.rejectStarted(err);
      // Its session ends too: nothing else would close it (no peer of its own), and it stayed counted in
      // /health's http_in_flight, and held, for the server's life.
      void this.session?.close('completed');
      this.session = null;
      return;
    }
    this.services.log.error({ err, response_id: this.id }, 'background session failed after its run started');
    this.finish(null);
  }

  ended(response: Response): void {
    this.finish(response);
  }

  /** Once: followers end, the slot and the body's bytes are released, the session closes, the events start their TTL. */
  private finish(response: Response | null): void {
    if (this.over) return;
    this.over = true;
    this.endedAt = this.services.clock.now();
    for (const f of this.followers.keys()) this.toFollower(f, () => (this.dropped ? f.drop() : f.end()));
    this.followers.clear();
    this.hold.releaseAll();
    const last = response ?? this.lastSeen;
    this.lastSeen = null;
    if (last) this.resolveFinal(last);
    this.finalResponse = null;
    // Not stored: the store has no record of it, or only the one written as it started (`in_progress`).
    if (last && last.status === 'failed' && this.id !== null && !this.storedFinal(this.id)) this.unstored = last;
    void this.session?.close('completed');
    this.session = null;
    this.runs.ended(this);
  }

  /** Whether the store has this response's final record (not only the one stored as it started). */
  private storedFinal(id: string): boolean {
    try {
      const rec = this.services.store.get(id, this.owner);
      return rec !== undefined && !unfinished(rec);
    } catch {
      return false; // the store fails to read (its final write had failed too, most likely): kept here
    }
  }

  /**
   * @internal Its events are dropped (expired, evicted, shutdown): `released` is called once they are gone, at once
   * when no reader is behind.
   */
  forget(released: () => void): void {
    // A follower still reading them goes on at its own pace (FOLLOW_WINDOW), from these events, kept for the readers
    // behind alone (one copy, shared) until the last has read them or left (a reader that reads nothing is dropped by
    // its stream's stall timeout). They were given the rest at once, each up to the send limit unsent outside every
    // bound: 200 paused resumes of one ended response, then its DELETE, grew the RSS by ~210 MB and held the event
    // loop 1.6 s in one turn (outside attack; test/integration/background-forget-pacing.test.ts).
    this.forgetting = true;
    this.unstored = null;
    this.released = released;
    if (this.behind.size === 0) this.release();
  }

  /** @internal Its readers behind on its dropped events are dropped (`BackgroundRuns.bound`): the events go. */
  dropBehind(): void {
    for (const f of [...this.behind.keys()]) {
      this.leftBehind(f);
      this.toFollower(f, () => f.drop());
    }
  }

  private release(): void {
    this.events.length = 0;
    this.head = 0;
    this.bytes = 0;
    const released = this.released;
    this.released = null;
    released?.();
  }

  /** Keep at most `maxBackgroundEventBytes` of events, always the newest one. */
  private trim(): void {
    const max = this.services.limits.maxBackgroundEventBytes;
    const events = this.events;
    while (this.bytes > max && events.length - this.head > 1) {
      const old = events[this.head]!;
      this.bytes -= old.bytes;
      this.droppedUpTo = old.seq;
      events[this.head++] = undefined as unknown as Kept;
    }
    if (this.head > 1024 && this.head * 2 > events.length) {
      events.splice(0, this.head);
      this.head = 0;
    }
  }

  /** A follower that throws is dropped from the response, never fails the run. */
  private toFollower(f: Follower, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.followers.delete(f);
      this.leftBehind(f);
      this.services.log.warn({ err, response_id: this.id }, 'a background response follower failed; it was dropped');
    }
  }
}
