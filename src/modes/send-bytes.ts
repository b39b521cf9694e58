/**
 * The server-wide bound on unsent bytes (`Limits.maxSendBufferTotalBytes`):
 * what every WebSocket and SSE reader together leaves unsent. Each reader
 * is bounded by its own send limit (`maxSendBufferBytes`; its run is paced
 * at half of it, so a reader that reads nothing holds ~2.5 MB until the
 * stall timeout drops it); this bounds their sum, so 1024 such readers
 * cannot hold gigabytes.
 *
 * The decision: over the bound, the server stops feeding, it drops nobody.
 * A run whose reader holds at least `floor` bytes unsent (64 KiB, or half
 * the send limit when that is less) waits for its reader as at the
 * per-reader pacing threshold (`Transport.backlog`): until its reader has
 * read what was sent, or the stall timeout (or heartbeat) drops a reader
 * that reads nothing, exactly as now. So a reader that reads is never
 * dropped because of others (it is only slowed while the total is over),
 * and what others hold is freed by the rules that already judge each
 * reader on its own. The bound is on what runs feed: past it the total
 * grows by at most one step (a batch of deltas) per paced reader, plus
 * what readers below the floor hold (at most `floor` each), plus events
 * that are not the model's (lifecycle events echoing a request), which
 * never wait and stay bounded per reader by the send limit: a response
 * whose request is the floor or more starts only while the total is within
 * the bound (`room`), so such echoes pass it by about one response's.
 *
 * Cheap: a transport reports its unsent bytes at each send (it already reads
 * them for its own limit); below the floor that is one comparison, past it
 * one counter update (`total`, the members' unsent bytes as of their last
 * send). Only a reader at or past the floor, deciding whether to pace, asks
 * `over()`, and only when that counter is past the bound are the members
 * measured again (their socket's own count: the counter's figures go stale
 * as sockets drain). Pure bookkeeping: the transports measure their
 * sockets and wait.
 */
import type { Logger } from 'pino';

/** What a share measures: the bytes its socket holds unsent now (`ws.bufferedAmount`, `res.writableLength`). */
export interface Unsent {
  unsentBytes(): number;
}

/** Readers below this many unsent bytes are not counted nor paced by the total (half the send limit when less). */
export const SEND_FLOOR_BYTES = 64 * 1024;

/** How often a response waiting to start while the total is past the bound (`SendBytes.room`) looks again, ms. */
export const START_RECHECK_MS = 50;

/**
 * How often the stall watches (an HTTP answer's, transport/socket-watch.ts; a WebSocket's unsent bytes,
 * transport/ws-connection.ts) look, for a stall timeout of `stallMs`: a reader that took nothing is dropped between
 * the timeout and the timeout plus twice this after its last progress (seen at the next look, judged at a later one).
 */
export function stallCheckEveryMs(stallMs: number): number {
  return Math.max(10, Math.min(1000, Math.floor(stallMs / 4)));
}

/**
 * The longest a response waits to start (`SendBytes.room`) for a stall timeout of `stallMs`: long enough that every
 * reader that had stopped reading when it began to wait has been dropped and the wait has looked again. A watch sees
 * a reader's last progress at its next look, and drops it at the first look a whole timeout after that: up to the
 * timeout plus two looks after the reader stopped. Refused at its end (`server_busy`), a wait of the bare timeout
 * lost the race with the drop that would have made room, and so did one of the timeout plus one look (a CI run).
 * 0 (no stall timeout): no wait.
 */
export function startWaitMs(stallMs: number): number {
  return stallMs > 0 ? stallMs + 2 * stallCheckEveryMs(stallMs) + 2 * START_RECHECK_MS : 0;
}

/** A response waiting to start (`SendBytes.room`): its request's bytes, its answer, its longest wait. */
interface Starter {
  bytes: number;
  go: (start: boolean) => void;
  timer: NodeJS.Timeout | undefined;
}

export class SendBytes {
  /** The members' unsent bytes as of their last send or the last recount: at most stale, never summed per event. */
  private total = 0;
  private readonly members = new Set<SendShare>();
  /** Every open share, members or not: measured whole only when a large response is about to start (`room`). */
  private readonly all = new Set<SendShare>();
  /** Responses waiting to start until the total is within the bound (`room`), in order; null while none wait. */
  private starters: Starter[] | null = null;
  private startTimer: NodeJS.Timeout | undefined;
  /** What responses let start will echo, until it is in their sockets' figures (`reserve`). */
  private reserved = 0;
  /** Bytes a reader holds unsent before it is counted, and before the total may pace it. */
  readonly floor: number;

  constructor(
    readonly max: number,
    sendBufferBytes: number,
    /** The longest a response waits to start (`room`): `startWaitMs`, by which a reader that reads nothing is gone. */
    private readonly maxWaitMs = 0,
  ) {
    this.floor = Math.max(1, Math.min(SEND_FLOOR_BYTES, Math.floor(sendBufferBytes / 2)));
  }

  /** A reader's share (one per WebSocket connection or SSE stream): closed when it is gone. */
  share(socket: Unsent, log: Logger): SendShare {
    const share = new SendShare(this, socket, log);
    this.all.add(share);
    return share;
  }

  /** Whether the members' unsent bytes, measured now, are past the bound (measured only when the counter says so). */
  over(): boolean {
    if (this.total <= this.max) return false;
    this.recount();
    return this.total > this.max;
  }

  /**
   * Null while every reader's unsent bytes, measured now, are within the bound: the response starts at once. Past
   * it, a promise of whether it may start: true once they are within it again (measured every `START_RECHECK_MS`),
   * false if they are still past it after the longest wait (the stall timeout: the create is refused `server_busy`).
   * A response with a large request (`bytes`) starts only so. Its lifecycle events echo its request (its instructions
   * and tools in `response.created`, `response.in_progress`, each pause's `response.done`) and never wait once it
   * runs, so sixty streams of a 3 MB request whose readers read nothing held 318 MB unsent past a 32 MiB bound until
   * the stall timeout dropped them (outside attack atk49 F1).
   *
   * What a starting response is about to echo is counted until it is in its socket's figure (`reserve`): the
   * responses that waited were all let go at the first look that found the total within the bound, and those whose
   * waits timed out together started together, each sending its echoes: 48 MB unsent past an 8 MiB bound (outside
   * attack atk53 F2). Now they go in order while the total and what the ones let go will echo stay within it, and one
   * still waiting when its longest wait ends is refused rather than started past the bound.
   */
  room(bytes: number): Promise<boolean> | null {
    // Every reader measured now: the counter's figures are as of each member's last send, before it, and a reader
    // whose last send found it under the floor is no member (a run's large echoes were in no figure), so the
    // counter below the bound let every stream of a burst start.
    this.measureAll();
    // Behind those already waiting, in order.
    if (this.starters === null && this.total + this.reserved <= this.max) {
      this.reserve(bytes);
      return null;
    }
    return new Promise<boolean>((resolve) => {
      const starter: Starter = { bytes, go: resolve, timer: undefined };
      // At most about the stall timeout: by then every reader that read nothing has been dropped; what still holds the
      // total past the bound reads (slowly) or is another such wait's. The response is then refused, not started
      // past the bound, so no reader can hold it for good and waits that end together do not start together.
      if (this.maxWaitMs > 0 && this.maxWaitMs <= 2 ** 31 - 1) {
        starter.timer = setTimeout(() => {
          // Out of the list at once, so creates that time out while the total stays over do not pile up in it.
          const i = this.starters?.indexOf(starter) ?? -1;
          if (i >= 0) this.starters!.splice(i, 1);
          if (this.starters?.length === 0) this.stopLooking();
          this.measureAll();
          const fits = this.total + this.reserved <= this.max;
          if (fits) this.reserve(bytes);
          resolve(fits);
        }, this.maxWaitMs);
        starter.timer.unref();
      }
      (this.starters ??= []).push(starter);
      if (this.startTimer === undefined) {
        this.startTimer = setInterval(this.recheck, START_RECHECK_MS);
        // A wait does not keep the process alive: shutdown ends the sessions that wait.
        this.startTimer.unref();
      }
    });
  }

  /** Waiting responses let go in order while the total, measured now, and what those let go will echo fit the bound. */
  private readonly recheck = (): void => {
    const w = this.starters;
    if (w === null) return;
    this.measureAll();
    while (w.length > 0 && this.total + this.reserved <= this.max) {
      const s = w.shift()!;
      clearTimeout(s.timer);
      this.reserve(s.bytes);
      s.go(true);
    }
    if (w.length === 0) this.stopLooking();
  };

  private stopLooking(): void {
    this.starters = null;
    clearInterval(this.startTimer);
    this.startTimer = undefined;
  }

  /**
   * What a response let start will echo at once (`response.created` and `response.in_progress` each carry its
   * request's instructions and tools: at most twice its request's bytes), counted until its events are in its
   * socket's figure: the next turn of the event loop (the run sends them as it starts, in the same turn).
   */
  private reserve(bytes: number): void {
    const r = 2 * bytes;
    this.reserved += r;
    setImmediate(() => {
      this.reserved -= r;
    });
  }

  /** Every reader's unsent bytes measured now (`GET /health`'s `send_bytes_unsent`; the members alone missed a run's last echoes). */
  unsent(): number {
    this.measureAll();
    return this.total;
  }

  /** The total rebuilt from every open share, members or not (each past the floor joins). */
  private measureAll(): void {
    let total = 0;
    for (const m of this.all) total += m.remeasure();
    this.total = total;
  }

  /** @internal A share is gone. */
  left(share: SendShare): void {
    this.all.delete(share);
  }

  /** @internal A share's charge moved from `from` to `to` bytes. */
  moved(share: SendShare, from: number, to: number): void {
    if (from === 0) this.members.add(share);
    this.total += to - from;
    if (to === 0) this.members.delete(share);
  }

  private recount(): void {
    let total = 0;
    for (const m of this.members) total += m.remeasure();
    this.total = total;
  }
}

/** One reader's part of the total: a class, not closures, as it is kept for the connection's life. */
export class SendShare {
  private charged = 0;
  private closed = false;
  private logged = false;

  constructor(
    private readonly ledger: SendBytes,
    private readonly socket: Unsent,
    private readonly log: Logger,
  ) {}

  /** At each send, with the bytes unsent before it: one comparison below the floor, else one counter update. */
  note(unsent: number): void {
    if (this.closed || (unsent < this.ledger.floor && this.charged === 0)) return;
    const to = unsent < this.ledger.floor ? 0 : unsent;
    if (to !== this.charged) this.ledger.moved(this, this.charged, to);
    this.charged = to;
  }

  /**
   * Whether this reader's run should wait for it because the total is past the bound: only a reader holding at
   * least the floor (`unsent`, measured now by the caller) is asked, and told once in the log.
   */
  pace(unsent: number): boolean {
    if (this.closed || unsent < this.ledger.floor) return false;
    this.note(unsent);
    if (!this.ledger.over()) return false;
    if (!this.logged) {
      this.logged = true;
      this.log.info(
        { code: 'send_total_paced', buffered: unsent, floor: this.ledger.floor, max: this.ledger.max },
        'unsent bytes to all readers are past the server-wide bound; this run waits for its reader',
      );
    }
    return true;
  }

  /**
   * `SendBytes.room` for a response whose request is `bytes` long (what its lifecycle events can echo): null while
   * all readers' unsent bytes are within the bound, else whether it may start (false: still past it after the longest
   * wait). A request under the floor starts at once whatever the total, as it did: its echoes are as small as a step's
   * deltas, and a reader sending small requests is not held up by others that read nothing (only slowed as it reads,
   * `pace`).
   */
  room(bytes: number): Promise<boolean> | null {
    if (this.closed || bytes < this.ledger.floor) return null;
    const wait = this.ledger.room(bytes);
    if (wait !== null && !this.logged) {
      this.logged = true;
      this.log.info({ code: 'send_total_paced', max: this.ledger.max }, 'unsent bytes to all readers are past the server-wide bound; this response waits to start');
    }
    return wait;
  }

  /** @internal The recount: this share's unsent bytes now (0, and no longer a member, below the floor). */
  remeasure(): number {
    const now = this.closed ? 0 : this.socket.unsentBytes();
    const to = now < this.ledger.floor ? 0 : now;
    // The recount rebuilds the total itself: only membership changes here (a reader measured past the floor joins).
    if (to !== this.charged && (to === 0 || this.charged === 0)) this.ledger.moved(this, this.charged, to);
    this.charged = to;
    return to;
  }

  /** The reader is gone: its bytes leave the total. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.ledger.left(this);
    if (this.charged !== 0) this.ledger.moved(this, this.charged, 0);
    this.charged = 0;
  }
}
