/**
 * The WebSocket heartbeat (`wsIdleTimeoutMs`): every half of the timeout the
 * peer is pinged, and a peer that showed no sign of life for two periods in
 * a row (a whole timeout) is dropped, so a vanished peer goes between the
 * timeout and one and a half of it after its last sign of life.
 *
 * A sign of life is anything arriving (a frame, a pong, a ping) or, through
 * `busy`, bytes of a frame still arriving (the peer's pong waits behind it),
 * the peer taking bytes (a send of the server's completed) or the server not
 * reading (its byte budget is full: the server's stall, not the peer's
 * silence). Clients answer pings on their own, so a client silent
 * while its tool runs stays.
 *
 * Why two periods and not one: a slow reader's pong waits behind megabytes
 * in the kernel's socket buffers, and the kernel takes more of the server's
 * bytes (the only sign such a reader gives) only once about a third of its
 * send buffer has drained: for the 1 MB/s reader of
 * `test/integration/reader-pacing.test.ts`, about as far apart as a period
 * of its 3 s timeout is long. With
 * one period, a reader that read steadily was dropped as silent whenever
 * such a gap spanned a period (that test, at a 3 s timeout, failed two runs
 * of four). A server's own
 * stall (its event loop blocked past a period) also counts as one period
 * only: the signs that came meanwhile are read after the late tick.
 */

/** What the heartbeat needs of a `ws` WebSocket (a small shape, so the rule is testable without timers). */
export interface HeartbeatPeer {
  readonly readyState: number;
  readonly OPEN: number;
  readonly CLOSING: number;
  ping(): void;
  terminate(): void;
  on(event: 'pong' | 'ping' | 'message', listener: () => void): unknown;
}

/** Periods in a row without a sign of life after which the peer is dropped (the period is half the timeout). */
export const SILENT_PERIODS = 2;

export class Heartbeat {
  private heard = true;
  private silent = 0;

  constructor(
    private readonly peer: HeartbeatPeer,
    private readonly onDrop: () => void,
    private readonly busy: () => boolean,
  ) {
    const seen = (): void => {
      this.heard = true;
    };
    peer.on('pong', seen);
    peer.on('ping', seen);
    peer.on('message', seen);
  }

  /**
   * A period ended: judge it, then ping (or drop the peer, once). Also while the connection closes (the
   * server's close frame sent, the peer's awaited: the lifetime limit, 1013, an injected disconnect), without
   * pinging: a peer gone by then never answers the close, and was held by the `ws` library's fixed 30 s close
   * timeout whatever the idle timeout; one that reads (its close frame may wait behind megabytes) still takes bytes.
   */
  tick(): void {
    const { peer } = this;
    const open = peer.readyState === peer.OPEN;
    if (!open && peer.readyState !== peer.CLOSING) return;
    // `busy` is asked every period: it also tracks what changed since it was last asked.
    const busy = this.busy();
    this.silent = this.heard || busy ? 0 : this.silent + 1;
    this.heard = false;
    if (this.silent >= SILENT_PERIODS) {
      this.onDrop();
      peer.terminate();
      return;
    }
    if (open) peer.ping();
  }
}

/** Starts the heartbeat: a tick every half of `idleMs`. 0 (or more than a timer holds): no heartbeat. */
export function startHeartbeat(peer: HeartbeatPeer, idleMs: number, onDrop: () => void, busy: () => boolean): ReturnType<typeof setInterval> | undefined {
  if (!(idleMs > 0) || idleMs > 2 ** 31 - 1) return undefined;
  const hb = new Heartbeat(peer, onDrop, busy);
  return setInterval(() => hb.tick(), Math.max(1, Math.floor(idleMs / 2)));
}
