/**
 * A one-line progress bar on stderr for `llr bench`: steps done of the total,
 * the current step's label, elapsed time and a naive estimate of what is
 * left. On a terminal it redraws one line with `\r`; otherwise (CI, a pipe)
 * it prints one plain line per finished step.
 *
 * Used by the runner only. Leaves out weights per step: the estimate assumes
 * the remaining steps take as long as the average one so far.
 *
 * Within a step, `note` tells how far it has got (a replay's model call of
 * its total): a workload of thousands of user turns can keep one step busy
 * for minutes, and with no line the bench looked hung (outside attack atk99
 * I1). On a terminal the bar is redrawn with it at most every
 * `NOTE_REDRAW_MS`; otherwise a plain line is printed at most every
 * `NOTE_LINE_MS`, so a log stays short.
 */
export const NOTE_REDRAW_MS = 200;
export const NOTE_LINE_MS = 10_000;

export class Progress {
  private done = 0;
  private readonly t0: number;
  private label = '';
  private detail = '';
  private lastWidth = 0;
  /** When the current step began, and when its progress was last shown (ms, `now`'s clock). */
  private stepAt: number;
  private notedAt: number;

  constructor(
    private total: number,
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly tty = Boolean(out.isTTY),
    private readonly now: () => number = () => performance.now(),
  ) {
    this.t0 = this.stepAt = this.notedAt = now();
  }

  /** Show what is running now. */
  step(label: string): void {
    this.label = label;
    this.detail = '';
    this.stepAt = this.notedAt = this.now();
    if (this.tty) this.draw();
  }

  /** How far the current step has got (`detail`, e.g. "model call 520 of 2000"), shown as the class comment says. */
  note(detail: string): void {
    const at = this.now();
    this.detail = detail;
    if (at - this.notedAt < (this.tty ? NOTE_REDRAW_MS : NOTE_LINE_MS)) return;
    this.notedAt = at;
    if (this.tty) this.draw();
    else this.out.write(`[${this.done}/${this.total}] ${this.label} · ${detail} (${clock((at - this.stepAt) / 1000)} in this step)\n`);
  }

  /** One step finished. */
  tick(detail = ''): void {
    this.done = Math.min(this.total, this.done + 1);
    this.detail = '';
    if (this.tty) this.draw();
    else this.out.write(`[${this.done}/${this.total}] ${this.label}${detail ? ` · ${detail}` : ''} (${clock(this.elapsed())})\n`);
  }

  /** Write a message above the bar. */
  log(line: string): void {
    if (this.tty) this.out.write(`\r${' '.repeat(this.lastWidth)}\r`);
    this.out.write(`${line}\n`);
    if (this.tty) this.draw();
  }

  finish(): void {
    if (this.tty) this.out.write('\n');
  }

  elapsed(): number {
    return (this.now() - this.t0) / 1000;
  }

  private draw(): void {
    const width = 24;
    const filled = Math.round((this.done / Math.max(1, this.total)) * width);
    const left = this.done > 0 ? (this.elapsed() / this.done) * (this.total - this.done) : NaN;
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.done}/${this.total} ${clock(this.elapsed())}${Number.isFinite(left) ? ` ~${clock(left)} left` : ''} · ${this.label}${this.detail ? ` · ${this.detail}` : ''}`;
    const cols = this.out.columns || 120;
    const shown = line.length > cols - 1 ? line.slice(0, cols - 1) : line;
    this.out.write(`\r${shown}${' '.repeat(Math.max(0, this.lastWidth - shown.length))}`);
    this.lastWidth = shown.length;
  }
}

function clock(s: number): string {
  const m = Math.floor(s / 60);
  return `${m}:${String(Math.floor(s % 60)).padStart(2, '0')}`;
}
