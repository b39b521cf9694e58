/**
 * The server-wide byte budget (`Limits.maxServerBytes`): request bytes the
 * whole server holds for its clients at once. Each connection has its own
 * budgets (queued creates, context, frame size); this bounds their sum over
 * every connection, so many connections that each stay within their own
 * budget cannot together grow the process without bound.
 *
 * The session layer owns it (one per `SessionHost`) and hands the
 * transports their shares: a `Hold` per HTTP request (its body, charged as
 * it is read) and a `ConnectionBytes` per WebSocket connection (its create
 * and append frames, held while the session has work). Transports charge at
 * the edge and never see run state; what "the session has work" means is
 * decided here, from the session. Each charge is released exactly once
 * (docs/reliability.md says what counts). Past the budget a request is
 * refused with `server_busy` (503) before it is held, once idle ws-mode
 * connections' cached contexts have been let go if that alone makes room
 * (`reclaim`). Pure bookkeeping: no I/O.
 */
import { WireError } from '../protocol/errors.js';
import type { Limits } from '../engine/services.js';
import type { ConnectionSession } from './session.js';
import type { SpanBudget } from '../pipeline/metrics.js';

export class ServerBytes {
  private heldBytes = 0;
  private peakBytes = 0;
  /**
   * WebSocket connections idle with a context cached for a continuation (ws mode), least recently used first: a
   * cache, let go before anything is refused (`reclaim`). Kept by `ConnectionHold` at each idle step and close.
   */
  private readonly cached = new Set<CachedShare>();
  private letGoCount = 0;

  constructor(readonly max: number) {}

  /**
   * What runs paused for their clients hold of the budget, which nothing but their clients' next appends can free
   * (`SessionHost.heldForPeers`, set by the host that owns this budget; 0 without one).
   */
  peersHeld: () => number = () => 0;

  /**
   * End messages judged unable to fit beside the runs paused for their clients, but `except`'s session's, to give back
   * `need` bytes for a paused run's append: what they gave back, 0 (none ended) when together they could not
   * (`SessionHost.endStuckMessages`, set by the host that owns this budget).
   */
  endStuck: (except: ConnectionSession, need: number) => number = () => 0;

  get held(): number {
    return this.heldBytes;
  }

  get peak(): number {
    return this.peakBytes;
  }

  /** Idle connections' cached contexts let go so far to make room (`reclaim`; `GET /health` `cached_contexts_let_go`). */
  get cachesLetGo(): number {
    return this.letGoCount;
  }

  /** A cached context was let go to make room (`ConnectionHold.letGo`, `WsConnection.cannotFit`): counted. */
  letGoCounted(): void {
    this.letGoCount++;
  }

  /** `share`'s connection is idle keeping `bytes` (its cached context), or 0 (nothing, busy again, closed). */
  idleCache(share: CachedShare, bytes: number): void {
    this.cached.delete(share);
    if (bytes > 0) this.cached.add(share);
  }

  /**
   * Make room for `need` more bytes by letting idle connections' cached contexts go, least recently used first, but
   * only when that makes enough room: a cache let go for a charge still refused would be lost for nothing. True when
   * it did. An idle cache is not a request that ends: held until its connection continues or closes, a paused run's
   * append refused beside one was told to try again for as long as that connection stayed idle (outside attack atk80
   * F2), as was any other request. Only reached past the budget: no cost below it.
   */
  private reclaim(need: number): boolean {
    this.guardedSeen = 0;
    if (this.cached.size === 0) return false;
    let free = 0;
    for (const c of this.cached) {
      free += c.evictable();
      if (free >= need) break;
    }
    if (free < need) {
      // What the grace keeps (`--cache-reclaim-grace-ms`): said in the refusal when it would have made the room.
      let guarded = 0;
      for (const c of this.cached) guarded += c.guarded();
      if (free + guarded >= need) this.guardedSeen = guarded;
      return false;
    }
    let freed = 0;
    for (const c of this.cached) {
      if (freed >= need) break;
      freed += c.letGo();
    }
    return freed >= need;
  }

  /**
   * Bytes of cached contexts the last `reclaim` passed by for the grace, when letting them go would have made the room
   * (else 0): the refusal says when room may come back (it said only "when other requests end", and the room came back
   * when the grace ended; outside attack atk102 I2).
   */
  private guardedSeen = 0;

  /** Charge `n` bytes, or throw `server_busy` (nothing charged) when they would pass the budget. */
  charge(n: number): void {
    if (this.heldBytes + n > this.max && !(this.reclaim(this.heldBytes + n - this.max) && this.heldBytes + n <= this.max)) {
      const grace =
        this.guardedSeen > 0
          ? ` ${this.guardedSeen} bytes of them are cached contexts of agents running their tools, kept for --cache-reclaim-grace-ms after their responses: room may come back then.`
          : '';
      const err = new WireError(
        'server_busy',
        `The server holds ${this.heldBytes} bytes of requests and keeps at most ${this.max} (llr serve --max-server-bytes); try again when other requests end.${grace}`,
      );
      err.budgetAsk = n;
      err.budgetHeld = this.heldBytes;
      err.budgetNote = grace;
      throw err;
    }
    this.heldBytes += n;
    if (this.heldBytes > this.peakBytes) this.peakBytes = this.heldBytes;
  }

  /** Charge `n` bytes if they fit the budget: true when charged, false (nothing charged) when not. No error built. */
  tryCharge(n: number): boolean {
    if (this.heldBytes + n > this.max) return false;
    this.heldBytes += n;
    if (this.heldBytes > this.peakBytes) this.peakBytes = this.heldBytes;
    return true;
  }

  /** Charge `n` bytes whatever the budget says: for bytes already admitted under another charge a moment ago. */
  chargeAdmitted(n: number): void {
    this.heldBytes += n;
    if (this.heldBytes > this.peakBytes) this.peakBytes = this.heldBytes;
  }

  release(n: number): void {
    this.heldBytes = Math.max(0, this.heldBytes - n);
  }

  /** A charge released once, however often `release` is called (for owners with several ways to end). */
  hold(): Hold {
    return new BudgetHold(this);
  }
}

/**
 * A `Hold` as a small class, not an object literal of closures: a literal
 * with a getter is a dictionary-mode object (a property table of its own),
 * and its five closures and their context were kept for the connection's
 * life (bench:overhead's paused phase reports the heap per paused run).
 */
class BudgetHold implements Hold {
  private n = 0;

  constructor(private readonly budget: ServerBytes) {}

  add(k: number): void {
    this.budget.charge(k);
    this.n += k;
  }

  admitted(k: number): void {
    this.budget.chargeAdmitted(k);
    this.n += k;
  }

  get bytes(): number {
    return this.n;
  }

  get max(): number {
    return this.budget.max;
  }

  releaseAll(): void {
    this.budget.release(this.n);
    this.n = 0;
  }

  keep(k: number): void {
    if (this.n > k) {
      this.budget.release(this.n - k);
      this.n = k;
    }
  }
}

/**
 * What a run keeps for its life that no frame or body stands for, as the budget counts it: its timeline
 * (`RunMetrics`' spans, pipeline/metrics.ts), charged a chunk at a time and checked (a span past the budget is not
 * listed), and what the run keeps at each model call and pause that no frame stands for (engine/run.ts
 * `chargeKept`: its output so far, its items' overhead and its prompt's token ids), charged unchecked (held already;
 * the next frames are refused past the budget instead). Given back once by `close` when the run ends
 * (modes/session.ts, whatever the end: completed, failed, cancelled, the client gone, a pause timeout, shutdown, a
 * create refused while planned). Charges after `close` (the post-inference work's few spans, after the terminal
 * event) are not taken: they would never be given back.
 */
export class RunCharge implements SpanBudget {
  private spans = 0;
  private kept = 0;
  /** Token ids a render or an append made, charged checked as they were made (`make`), until `keptHeld` or `madeDone`. */
  private made = 0;
  private closed = false;

  /**
   * Called when `make` is refused: make room from what the run's own connection keeps that the run does not use (a
   * ws-mode connection's cached contexts, `ConnectionSession.spareKept`), true when it let something go; the charge is
   * then tried once more. A create on a connection whose own cache held the budget was told to try again for good,
   * however idle the server (outside attack atk92 F2).
   */
  spare: ((k: number) => boolean) | null = null;

  constructor(private readonly budget: ServerBytes) {}

  get bytes(): number {
    return this.spans + this.kept + this.made;
  }

  make(k: number): void {
    if (this.closed) return;
    try {
      this.budget.charge(k);
    } catch (err) {
      if (this.spare === null || !this.spare(k)) throw err;
      this.budget.charge(k);
    }
    this.made += k;
  }

  madeDone(bytes = this.made): void {
    const n = Math.min(bytes, this.made);
    if (n <= 0) return;
    this.budget.release(n);
    this.made -= n;
  }

  tryAdd(k: number): boolean {
    if (this.closed) return true;
    if (!this.budget.tryCharge(k)) return false;
    this.spans += k;
    return true;
  }

  /** What the run keeps besides its spans (its output, its prompt's token ids) now holds `bytes`: charged unchecked, or released down to it. */
  keptHeld(bytes: number): void {
    if (this.closed) return;
    // The ids made since are in `bytes` now (the prompt's token ids): given back first, so they are never counted twice.
    this.madeDone();
    if (bytes > this.kept) this.budget.chargeAdmitted(bytes - this.kept);
    else this.budget.release(this.kept - bytes);
    this.kept = bytes;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.budget.release(this.spans + this.kept + this.made);
    this.spans = 0;
    this.kept = 0;
    this.made = 0;
  }
}

/** One owner's share of the budget (a request, a connection). */
export interface Hold {
  /** Charge `k` more bytes (throws `server_busy`, nothing charged, past the budget). */
  add(k: number): void;
  /** Charge `k` more bytes without the check (bytes admitted under another charge). */
  admitted(k: number): void;
  readonly bytes: number;
  /** The whole budget it is a share of (`--max-server-bytes`). */
  readonly max: number;
  /** Release everything this hold has charged. */
  releaseAll(): void;
  /** Release all but `k` bytes. */
  keep(k: number): void;
}

/** A connection's share whose session keeps a cached context while idle, as `ServerBytes.reclaim` sees it. */
interface CachedShare {
  /** What letting its cache go now would give back: 0 unless its session is idle with nothing arriving. */
  evictable(): number;
  /** Let its cache go now and give back its charge at once; what it gave back (0 when it was not idle). */
  letGo(own?: boolean): number;
  /** What `evictable` leaves out for the grace alone (`ConnectionSession.reclaimableBytes`): 0 when not idle. */
  guarded(): number;
}

/** A WebSocket connection's share, as its transport uses it. */
export interface ConnectionBytes {
  /**
   * A create or append frame of `bytes` arrived: charge it (throws `server_busy`: the frame is not handled).
   * `parsed`: its parse charge (`parsing`), moved over unchecked (the frame was admitted then).
   */
  frame(bytes: number, create: boolean, parsed?: number): number;
  /**
   * The session kept nothing of a frame `frame` charged (a refused append, a create refused `queue_full`): give its
   * `bytes` back now. `epoch`: what `frame` returned; a frame whose charge was already settled by the session's
   * idle step (or the close) gives nothing back.
   */
  refund(bytes: number, epoch: number): void;
  /** After the frame was handled: release when the session's work has ended. */
  watch(): void;
  /**
   * Bytes of a message still arriving (its frames received so far): charged while they arrive, so many
   * connections each uploading a large frame cannot together pass the budget before any frame is whole.
   * Sets the charge to `n`; false (the charge left as it was) when `n` would pass the budget: the transport
   * stops reading until `receiving` succeeds again. `declared`: what the message declares so far (its frames'
   * lengths from their headers), which it needs charged whole to be read (`roomWanted`).
   */
  receiving(n: number, declared?: number): boolean;
  /**
   * This connection's own share besides the message arriving: its frames, what its session keeps, its run's charge.
   * When that and a message do not fit the whole budget, waiting for other connections to give budget back cannot help.
   */
  own(): number;
  /** Whether a whole frame waits for or is in a sliced parse (`parsing` charged it and `parsed` not yet given it back). */
  peerMessagePending(): boolean;
  /** Whether a message is arriving (some of it received and charged, `receiving`). */
  messageArriving(): boolean;
  /** What is charged of the message arriving (`receiving`); 0 once closed. */
  arriving(): number;
  /**
   * For this connection's own message arriving, which cannot fit beside them: its idle session's cached contexts go
   * (`ConnectionSession.shed`) and their charge is given back at once, not at the idle step; false when it kept none.
   */
  letGoCache(): boolean;
  /**
   * When the last `receiving` could not charge the message arriving: the bytes more it needs charged to be read whole
   * (what it declares, or received, past its charge); else 0.
   */
  roomWanted(): number;
  /**
   * The transport judged the message arriving unable to fit beside the runs paused for their clients, and it waits
   * (`WsConnection.cannotFit`): until the next `receiving`, what ending it would give back counts (`stuckBytes`), and
   * `end` ends it (`endStuck`).
   */
  stuck(end: () => void): void;
  /** While `stuck`: this connection's share and its message's charge, what ending the message gives back; else 0. */
  stuckBytes(): number;
  /**
   * What ending the message judged stuck gives back (`endStuck`): its session's cached contexts when it keeps any
   * (the transport lets them go, and the message waits on), else `stuckBytes`; 0 when not stuck.
   */
  stuckGives(): number;
  /**
   * While `stuck` with anything to give back: end the message (the `end` given to `stuck`), for a paused run's append
   * that needs what the stuck messages hold together (`SessionHost.endStuckMessages`); what it gave back (`stuckGives`).
   */
  endStuck(): number;
  /**
   * A whole frame of `n` bytes waits or is parsed in slices: charged until `parsed(n)`. A frame charged while
   * it arrived (`receiving`) was admitted then: its charge moves over, with its last socket read unchecked;
   * a frame that arrived in one read is checked now (throws `server_busy`: the frame is not handled). Call it
   * before `receiving` is set for the next message.
   */
  parsing(n: number): void;
  parsed(n: number): void;
  /**
   * A create loaded `n` bytes of request data (a stored chain): charged while the session's work lasts, like its
   * frame, up to the connection's cap (throws `server_busy`, nothing charged, past the budget).
   */
  loaded(n: number): void;
  /** What the session keeps shrank outside a response's end (a DELETE of a cached response): charge it once idle. */
  kept(): void;
  /**
   * The session let go of some of what it keeps while it works, for its own create's charge (ws mode: cached contexts,
   * `ModePolicy.spare`): its charge for them goes now, down to what it keeps, not at the idle step.
   */
  keptShrank(): void;
  /** The connection closed: release everything. */
  close(): void;
}

/**
 * A connection's share of the budget: each create and append frame is
 * charged when it arrives and held while the session has work — queued,
 * running or paused, so a long-lived run's creates and appends stand for
 * its context. When the work ends the charge is set to what the session
 * keeps (`ConnectionSession.keptBytes`): nothing, or in ws mode the context
 * cached for a continuation (its items and header), until the next work
 * ends or the close. That charge is taken unchecked: the memory is held
 * already, and the budget then refuses the next frames instead. Before, ws
 * mode kept only its last create's frame charged, and a chain of 1 MB
 * continuations cached a 29 MB context per connection counted as 1 MB: eight
 * connections held 250 MB of heap under a 64 MB budget, `bytes_held` 8 MB
 * (outside attack). A connection's frames never hold more than its own budgets
 * allow (queued bytes + context bytes + one frame): refused frames past that
 * are not memory it keeps. What it keeps once idle is charged whole: a cached
 * context's token ids can be several times its items' bytes.
 */
export function connectionBytes(bytes: ServerBytes, limits: Readonly<Limits>, session: ConnectionSession): ConnectionBytes {
  return new ConnectionHold(bytes, bytes.hold(), limits.maxQueuedBytes + limits.maxContextBytes + limits.maxFrameBytes, session, bytes.hold(), bytes.hold());
}

/** `connectionBytes`' share: a class rather than closures over one context (kept for the connection's life). */
class ConnectionHold implements ConnectionBytes, CachedShare {
  private waiting = false;
  private closed = false;
  /** Bumped at each idle step: frames charged before it were settled then (`refund`). */
  private epoch = 0;
  /** Bytes of frames since the last idle step left uncharged at the connection's cap (`refund` takes from these first). */
  private over = 0;
  /**
   * While this connection's own charge is made: its cache is not let go for it (`letGo`). Most likely its message
   * continues from that cache: a continuation's own frame let its cache go, and with `store: false` it was then told
   * its previous response was not found, although another idle connection's cache would have made room (outside attack
   * atk83 F1).
   */
  private charging = false;
  /** The bytes more the message arriving needs when the last `receiving` could not charge it (`roomWanted`); else 0. */
  private wanted = 0;
  /** Its message was judged unable to fit beside the runs paused for their clients since the last `receiving` (`stuck`). */
  private blocked = false;
  /** What ends the message judged stuck (`stuck`, `endStuck`). */
  private ender: (() => void) | null = null;
  /** What the last idle step charged for what the session keeps (its cached contexts), less what `keptShrank` gave back. */
  private keptCharged = 0;

  constructor(
    private readonly budget: ServerBytes,
    private readonly hold: Hold,
    private readonly cap: number,
    private readonly session: ConnectionSession,
    /** The message still arriving (`receiving`). */
    private readonly rx: Hold,
    /** Whole frames waiting for or in a sliced parse (`parsing`). */
    private readonly px: Hold,
  ) {}

  own(): number {
    return this.hold.bytes + this.px.bytes + this.session.heldByRun();
  }

  peerMessagePending(): boolean {
    return this.px.bytes > 0;
  }

  messageArriving(): boolean {
    return !this.closed && this.rx.bytes > 0;
  }

  arriving(): number {
    return this.closed ? 0 : this.rx.bytes;
  }

  letGoCache(): boolean {
    if (this.closed || !this.session.shed()) return false;
    const kept = this.session.keptBytes();
    this.hold.keep(Math.min(this.hold.bytes, kept));
    this.keptCharged = Math.min(this.keptCharged, kept);
    this.budget.idleCache(this, kept);
    return true;
  }

  receiving(n: number, declared = 0): boolean {
    this.wanted = 0;
    this.blocked = false;
    if (this.closed) return true;
    const now = this.rx.bytes;
    if (n <= now) {
      this.rx.keep(n);
      return true;
    }
    this.charging = true;
    try {
      this.rx.add(n - now);
      return true;
    } catch {
      this.wanted = Math.max(n, declared) - now;
      return false;
    } finally {
      this.charging = false;
    }
  }

  roomWanted(): number {
    return this.closed ? 0 : this.wanted;
  }

  stuck(end: () => void): void {
    this.blocked = true;
    this.ender = end;
  }

  stuckBytes(): number {
    return this.blocked && !this.closed ? this.own() + this.rx.bytes : 0;
  }

  stuckGives(): number {
    const stuck = this.stuckBytes();
    if (stuck === 0) return 0;
    const kept = this.session.isIdle() ? Math.min(this.hold.bytes, this.session.keptBytes()) : 0;
    return kept > 0 ? kept : stuck;
  }

  endStuck(): number {
    const gives = this.stuckGives();
    if (gives === 0 || this.ender === null) return 0;
    const end = this.ender;
    this.ender = null;
    this.blocked = false;
    end();
    return gives;
  }

  parsing(n: number): void {
    if (this.closed) return;
    const carried = Math.min(n, this.rx.bytes);
    if (carried === 0) {
      this.charging = true;
      try {
        this.px.add(n);
      } finally {
        this.charging = false;
      }
      return;
    }
    this.rx.keep(this.rx.bytes - carried);
    this.px.admitted(n);
  }

  parsed(n: number): void {
    this.px.keep(Math.max(0, this.px.bytes - n));
  }

  frame(n: number, _create: boolean, parsed = 0): number {
    // A frame whose parse finished after the connection closed is memory nobody keeps: charging it would hold
    // budget for a connection that no longer exists (found by an outside attack: ~17 such closes filled 256 MiB).
    if (this.closed) return this.epoch;
    const charge = Math.max(0, Math.min(n, this.cap - this.hold.bytes));
    const carried = Math.min(parsed, this.px.bytes);
    if (carried > 0) {
      this.px.keep(this.px.bytes - carried);
      this.hold.admitted(charge);
    } else this.ownCharge(charge);
    this.over += n - charge;
    return this.epoch;
  }

  refund(n: number, epoch: number): void {
    // Refused frames were held until the session's work ended: a paused run sent 100,000 refused appends of 100
    // bytes held 10 MB of budget for nothing, up to the connection's cap (80 MiB at the defaults; outside attack).
    if (this.closed || epoch !== this.epoch) return;
    const fromOver = Math.min(this.over, n);
    this.over -= fromOver;
    this.hold.keep(Math.max(0, this.hold.bytes - (n - fromOver)));
  }

  loaded(n: number): void {
    if (this.closed) return;
    this.ownCharge(Math.max(0, Math.min(n, this.cap - this.hold.bytes)), true);
  }

  /**
   * Charge `n` to `hold` (throws `server_busy` past the budget), this connection's own cache kept (`charging`), unless
   * it alone leaves no room for them: a frame that cannot fit beside its own idle cache whatever others give back lets
   * that cache go, as a message arriving does (`WsConnection.cannotFit`). Kept, such a continuation was told to try
   * again for good (outside attack atk85 F3). `planned`: a stored chain the create being planned loads, for which its
   * session is busy and does not shed: the cached contexts it does not continue go instead (`spareKept`; kept, a
   * continuation whose chain could not fit beside its connection's other lanes was told to try again for good on an
   * idle server, outside attack atk93 F3).
   */
  private ownCharge(n: number, planned = false): void {
    this.charging = true;
    try {
      this.hold.add(n);
    } catch (err) {
      if (this.hold.bytes + n <= this.budget.max || this.session.keptBytes() === 0) throw err;
      if (planned ? !this.session.spareKept(n) : this.letGo(true) === 0) throw err;
      this.hold.add(n);
    } finally {
      this.charging = false;
    }
  }

  keptShrank(): void {
    // Down to what it keeps now, never by more than the idle step charged: an entry cached since (a create queued behind
    // the one that cached it) is charged at the next idle step, and giving back its bytes here would give back other
    // lanes' or frames' charges instead (outside attack atk95 I2).
    const kept = Math.min(this.keptCharged, this.session.keptBytes());
    const freed = Math.min(this.keptCharged - kept, this.hold.bytes);
    if (this.closed || freed <= 0) return;
    this.keptCharged = kept;
    this.hold.keep(this.hold.bytes - freed);
    this.budget.letGoCounted();
  }


  kept(): void {
    // Once the session is idle (in a microtask if it is now): the same step a response's end takes.
    this.watch();
  }

  watch(): void {
    if (this.waiting) return;
    this.waiting = true;
    this.session.whenIdle(this.idle);
  }

  /** The session's work ended: charge what it keeps (the ws cache), release the rest. */
  private readonly idle = (): void => {
    if (this.closed) {
      this.waiting = false;
      return;
    }
    // Work began again before this step ran (a frame charged in the same turn as a cache let go, `letGo`): its frame
    // is held until that work ends, not set to what the session keeps.
    if (!this.session.isIdle()) {
      this.session.whenIdle(this.idle);
      return;
    }
    this.waiting = false;
    this.epoch++;
    this.over = 0;
    // Whole, not capped at `cap` (which bounds what frames hold): a cached context's token ids are 4 to 8 times its
    // items' bytes for text of a token a byte, and capped here most of them went uncounted (outside attack).
    const kept = this.session.keptBytes();
    if (kept > this.hold.bytes) this.hold.admitted(kept - this.hold.bytes);
    else this.hold.keep(kept);
    this.keptCharged = kept;
    this.budget.idleCache(this, kept);
  };

  evictable(): number {
    if (this.closed || this.charging || this.rx.bytes > 0 || this.px.bytes > 0 || !this.session.isIdle()) return 0;
    return Math.min(this.hold.bytes, this.session.reclaimableBytes());
  }

  guarded(): number {
    if (this.closed || this.charging || this.rx.bytes > 0 || this.px.bytes > 0 || !this.session.isIdle()) return 0;
    return Math.max(0, Math.min(this.hold.bytes, this.session.keptBytes()) - this.evictable());
  }

  letGo(own = false): number {
    // A message arriving or being parsed is most likely a continuation of this very cache: kept for it (`own`: for
    // this connection's own frame, which cannot fit beside it, `ownCharge`). Another's request passes by the lanes still
    // guarded (`ConnectionSession.reclaimableBytes`).
    if (this.closed || (!own && (this.charging || this.rx.bytes > 0 || this.px.bytes > 0)) || !this.session.letGo(!own)) return 0;
    const before = this.hold.bytes;
    const kept = this.session.keptBytes();
    this.hold.keep(kept);
    this.keptCharged = kept;
    this.budget.idleCache(this, kept);
    this.budget.letGoCounted();
    return before - this.hold.bytes;
  }

  close(): void {
    this.budget.idleCache(this, 0);
    this.closed = true;
    this.hold.releaseAll();
    this.rx.releaseAll();
    this.px.releaseAll();
  }
}

/**
 * The least room an append needs for a run paused for its client to go on: a tool output of a few KB, with its token
 * ids. Past the budget, with less than this left beside what runs paused for their clients hold, no append can fit.
 */
export const PAUSED_RUN_ROOM_BYTES = 64 * 1024;

/**
 * An append (or inject) for a paused run, refused `server_busy` by the server-wide budget (`max`): what to tell its
 * client, from what runs paused for their clients hold besides this append (`stuck`; only their clients' next appends
 * can free it, and the budget refuses those alike) and what the append needed at least (`need`: its body, and the
 * token ids made before the refusal). Null: the usual refusal, "try again when other requests end" (other requests
 * hold budget that may come back: it fits beside the paused runs). Otherwise a `server_busy` whose `endsRun` says
 * what follows:
 * - less than `PAUSED_RUN_ROOM_BYTES` left beside the paused runs: no append can fit however long anyone waits, so
 *   the run ends `incomplete` (four long runs at the default limits, or one past the budget alone, waited for each
 *   other until their pause timeouts, every append told to try again; outside attack atk76 F1);
 * - room for a smaller append but not for this one: the run stays paused and the client is told to send less, not to
 *   retry (atk78 F1: an append whose token ids could never fit was told to try again for as long as the pause). It
 *   said it could not fit "however long it waits", which was false when another paused run's client appended and that
 *   run ended (outside attack atk88 F2): it cannot fit while they stay paused, which only their clients can change,
 *   and runs that each wait for the others' room would wait until their pause timeouts (atk76 F1), so it is still not
 *   told to retry.
 */
export function pausedAppendRefusal(max: number, stuck: number, need: number): (WireError & { endsRun: boolean }) | null {
  const room = Math.max(0, max - stuck);
  // It fits beside the paused runs: what else holds budget (an upload, a run streaming, frames of a burst) comes back.
  if (need <= room) return null;
  const held = `runs paused for their clients' tool outputs hold ${stuck} bytes of the server's byte budget of ${max} (llr serve --max-server-bytes), and none can give any back before its client's next append`;
  if (room < PAUSED_RUN_ROOM_BYTES) {
    const err = new WireError(
      'server_busy',
      `No append can fit: ${held}, which leaves ${room} bytes, less than a tool output with its token ids needs (${PAUSED_RUN_ROOM_BYTES}), so waiting cannot help. The run ends incomplete, its output so far kept; start a new response, or raise --max-server-bytes (or lower --max-context-bytes).`,
    );
    // Final: over HTTP a client told to retry it (the SDK retries a 503) found the run gone, 404 (outside attack atk82 F4).
    err.noRetry = true;
    return Object.assign(err, { endsRun: true });
  }
  const err = new WireError(
    'server_busy',
    `This append needs at least ${need} bytes (its body and its token ids) and ${room} are left: ${held}, so it cannot fit while they stay paused (this run among them). Send a smaller one; the run stays paused.`,
  );
  err.noRetry = true;
  return Object.assign(err, { endsRun: false });
}


/**
 * `err`, a request's charge refused by the budget (`server_busy`, with what it asked for: `WireError.budgetAsk`): when
 * what the request needs at least (`need`: its body or frame, the token ids made from it, the charge refused) is more
 * than the whole budget (`max`), it cannot fit however long it waits, with nothing else held: 413 `payload_too_large`,
 * not to be retried (over HTTP `x-should-retry: false` too). It was told "The server holds N bytes … try again when other
 * requests end", on an idle server whose bytes held were its own, with Retry-After, and openai-node sent it three times
 * (outside attack atk88 F1; a token count and a compaction alike, atk91 F7); a 413, not a 503, since Codex retries every
 * 5xx whatever `x-should-retry` says (atk90 F2). `body`: a body refused as it was read (`readBody`; `need`: what was read
 * with the piece refused, or its declared length), which was told "The server holds 0 bytes of requests … try again"
 * (atk89 F7). `continuation`: `need` counts the context it continues as well (a stored chain it loaded, a ws-mode
 * connection's cached context), which the message names. Otherwise `err`.
 */
export function pastWholeBudget(
  err: unknown,
  max: number,
  need: number,
  what: 'request' | 'body' | 'continuation' = 'request',
  own?: number,
): unknown {
  if (!(err instanceof WireError) || err.code !== 'server_busy' || err.budgetAsk === undefined || err.noRetry) return err;
  const holds =
    what === 'body'
      ? 'its body read so far'
      : what === 'continuation'
        ? 'its body, the context it continues and the token ids made from them'
        : 'its body and the token ids made from it';
  if (need <= max) return ownShareSaid(err, max, need, what, holds, own);
  const said = new WireError(
    'payload_too_large',
    what === 'body'
      ? `This request's body needs at least ${need} bytes, and the server's whole byte budget is ${max} (llr serve --max-server-bytes): it cannot fit however long it waits; send a smaller one.`
      : `This request needs at least ${need} bytes of the server's byte budget of ${max} (llr serve --max-server-bytes): ${holds}, with nothing else held. It cannot fit however long it waits; send a smaller one.`,
    err.param,
    { cause: err },
  );
  said.budgetAsk = err.budgetAsk;
  said.noRetry = true;
  return said;
}

/**
 * A `server_busy` of the budget whose request fits it alone (`pastWholeBudget`), told how much of the server's bytes
 * held are the request's own (`own`: what it had charged before the charge refused): the figure counted them, and
 * `/health` right after showed half as much held, the refused resend's own share given back (outside attacks atk102 I2,
 * atk103 I3). It is told what it needs at least and how little the others must hold before it can fit: a bound, not a
 * promise, since its token ids not yet made are not counted (worded as "it fits once", a retry within it was refused
 * again with a lower bound; outside attack atk112 F1).
 */
function ownShareSaid(err: WireError, max: number, need: number, what: string, holds: string, own: number | undefined): WireError {
  const held = err.budgetHeld;
  if (held === undefined || own === undefined || own <= 0 || own > held) return err;
  const others = held - own;
  const body = what === 'body';
  const more = body ? 'more for the rest of its body and its token ids' : 'more if its token ids not yet made need it';
  err.message =
    `The server holds ${held} bytes of requests and keeps at most ${max} (llr serve --max-server-bytes). ${own} of them ` +
    `are this ${body ? 'request' : what}'s own (${holds}); it needs at least ${need} (${more}), so it ` +
    `cannot fit before the others hold at most ${max - need} (they hold ${others}): try again when other requests end.${err.budgetNote ?? ''}`;
  return err;
}
