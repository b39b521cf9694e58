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

export class SendBytes {
  /** The members' unsent bytes as of their last send or the last recount: at most stale, never summed per event. */
  private total = 0;
  private readonly members = new Set<SendShare>();
  /** Every open share, members or not: measured whole only when a large response is about to start (`room`). */
  private readonly all = new Set<SendShare>();
  /** Responses waiting to start until the total is within the bound (`room`); null while none wait. */
  private starters: Array<() => void> | null = null;
  private startTimer: NodeJS.Timeout | undefined;
  /** Bytes a reader holds unsent before it is counted, and before the total may pace it. */
  readonly floor: number;

  constructor(
    readonly max: number,
    sendBufferBytes: number,
    /** The longest a response waits to start (`room`): the stall timeout, by which a reader that reads nothing is gone. */
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
   * Null while every reader's unsent bytes, measured now, are within the bound; past it, a promise that resolves once they are again
   * (measured every `START_RECHECK_MS`): a response with a large request starts only then (`SendShare.room`). Its
   * lifecycle events echo its request (its instructions and tools in `response.created`, `response.in_progress`, each
   * pause's `response.done`) and never wait once it runs, so sixty streams of a 3 MB request whose readers read
   * nothing held 318 MB unsent past a 32 MiB bound until the stall timeout dropped them (outside attack atk49 F1).
   * What is over the bound goes as before: a reader that reads drains, one that does not is dropped by the stall
   * timeout, so the wait ends.
   */
  room(): Promise<void> | null {
    // Every reader measured now: the counter's figures are as of each member's last send, before it, and a reader
    // whose last send found it under the floor is no member (a run's large echoes were in no figure), so the
    // counter below the bound let every stream of a burst start.
    this.measureAll();
    if (this.total <= this.max) return null;
    return new Promise<void>((resolve) => {
      // At most the stall timeout: by then every reader that read nothing has been dropped, and what still holds the
      // total reads (slowly); the response then starts as it did before this wait, so no reader can hold it for good.
      let timer: NodeJS.Timeout | undefined;
      const go = (): void => {
        clearTimeout(timer);
        resolve();
      };
      if (this.maxWaitMs > 0 && this.maxWaitMs <= 2 ** 31 - 1) {
        timer = setTimeout(() => {
          // Out of the list at once, so creates that time out while the total stays over do not pile up in it.
          const i = this.starters?.indexOf(go) ?? -1;
          if (i >= 0) this.starters!.splice(i, 1);
          // Nobody left waiting: the looks stop too.
          if (this.starters?.length === 0) {
            this.starters = null;
            clearInterval(this.startTimer);
            this.startTimer = undefined;
          }
          resolve();
        }, this.maxWaitMs);
        timer.unref();
      }
      (this.starters ??= []).push(go);
      if (this.startTimer === undefined) {
        this.startTimer = setInterval(this.recheck, START_RECHECK_MS);
        // A wait does not keep the process alive: shutdown ends the sessions that wait.
        this.startTimer.unref();
      }
    });
  }

  private readonly recheck = (): void => {
    if (this.over()) return;
    clearInterval(this.startTimer);
    this.startTimer = undefined;
    const w = this.starters ?? [];
    this.starters = null;
    for (const f of w) f();
  };

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
   * all readers' unsent bytes are within the bound, else when they are again. A request under the floor starts at
   * once whatever the total, as it did: its echoes are as small as a step's deltas, and a reader sending small requests
   * is not held up by others that read nothing (only slowed as it reads, `pace`).
   */
  room(bytes: number): Promise<void> | null {
    if (this.closed || bytes < this.ledger.floor) return null;
    const wait = this.ledger.room();
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
