/**
 * A server-wide budget for the log lines of clients' mistakes (`maxClientErrorLogsPerSecond`): each refused
 * WebSocket frame and each refused HTTP request was one `info` line, so a client flooding 7-byte frames the
 * server refuses wrote ~165 bytes of log per frame, 3 MB/s from one connection at the default level (outside
 * attack), and reconnecting defeats any count per connection. Up to `perSecond` lines in each second are logged;
 * past it they are counted, and the count is logged once that second is over (`client_errors_unlogged`). The
 * refusals themselves are unchanged: only their log lines are counted instead of written.
 */
export class LogBudget {
  private windowStart = -Infinity;
  private used = 0;
  private dropped = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly perSecond: number,
    private readonly now: () => number,
    private readonly report: (unlogged: number, perSecond: number) => void,
  ) {}

  /** Whether this line may be written; if not, it is counted. */
  take(): boolean {
    if (this.perSecond === Infinity) return true;
    const t = this.now();
    if (t - this.windowStart >= 1000) {
      this.flush();
      this.windowStart = t;
      this.used = 0;
    }
    if (this.used < this.perSecond) {
      this.used++;
      return true;
    }
    this.dropped++;
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), Math.max(1, Math.ceil(this.windowStart + 1000 - t)));
      this.timer.unref?.();
    }
    return false;
  }

  /** Logs the count of lines not written (if any), now. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.dropped === 0) return;
    const n = this.dropped;
    this.dropped = 0;
    this.report(n, this.perSecond);
  }
}
