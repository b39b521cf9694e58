/**
 * The server-wide byte budget (`Limits.maxServerBytes`): request bytes the
 * whole server holds for its clients at once. Each connection has its own
 * budgets (queued creates, context, frame size); this bounds their sum over
 * every connection, so many connections that each stay within their own
 * budget cannot together grow the process without bound.
 *
 * The transports charge it at the edge (docs/reliability.md says what
 * counts: HTTP bodies while read and while their request is handled;
 * WebSocket create and append frames until the connection's work ends) and
 * release each charge exactly once. Past the budget a request is refused
 * with `server_busy` (503) before it is held. Pure bookkeeping: no I/O.
 */
import { WireError } from '../protocol/errors.js';

export class ServerBytes {
  private heldBytes = 0;
  private peakBytes = 0;

  constructor(readonly max: number) {}

  get held(): number {
    return this.heldBytes;
  }

  get peak(): number {
    return this.peakBytes;
  }

  /** Charge `n` bytes, or throw `server_busy` (nothing charged) when they would pass the budget. */
  charge(n: number): void {
    if (this.heldBytes + n > this.max) {
      throw new WireError(
        'server_busy',
        `The server holds ${this.heldBytes} bytes of requests and keeps at most ${this.max} (llr serve --max-server-bytes); try again when other requests end.`,
      );
    }
    this.heldBytes += n;
    if (this.heldBytes > this.peakBytes) this.peakBytes = this.heldBytes;
  }

  release(n: number): void {
    this.heldBytes = Math.max(0, this.heldBytes - n);
  }

  /** A charge released once, however often `release` is called (for owners with several ways to end). */
  hold(): Hold {
    let n = 0;
    return {
      add: (k: number) => {
        this.charge(k);
        n += k;
      },
      get bytes() {
        return n;
      },
      releaseAll: () => {
        this.release(n);
        n = 0;
      },
      keep: (k: number) => {
        if (n > k) {
          this.release(n - k);
          n = k;
        }
      },
    };
  }
}

/** One owner's share of the budget (a request, a connection). */
export interface Hold {
  /** Charge `k` more bytes (throws `server_busy`, nothing charged, past the budget). */
  add(k: number): void;
  readonly bytes: number;
  /** Release everything this hold has charged. */
  releaseAll(): void;
  /** Release all but `k` bytes. */
  keep(k: number): void;
}
