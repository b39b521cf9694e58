/**
 * A one-line progress bar on stderr for `llr bench`: steps done of the total,
 * the current step's label, elapsed time and a naive estimate of what is
 * left. On a terminal it redraws one line with `\r`; otherwise (CI, a pipe)
 * it prints one plain line per finished step.
 *
 * Used by the runner only. Leaves out weights per step: the estimate assumes
 * the remaining steps take as long as the average one so far.
 */
export class Progress {
  private done = 0;
  private readonly t0 = performance.now();
  private label = '';
  private lastWidth = 0;

  constructor(
    private total: number,
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly tty = Boolean(out.isTTY),
  ) {}

  /** Show what is running now. */
  step(label: string): void {
    this.label = label;
    if (this.tty) this.draw();
  }

  /** One step finished. */
  tick(detail = ''): void {
    this.done = Math.min(this.total, this.done + 1);
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
    return (performance.now() - this.t0) / 1000;
  }

  private draw(): void {
    const width = 24;
    const filled = Math.round((this.done / Math.max(1, this.total)) * width);
    const left = this.done > 0 ? (this.elapsed() / this.done) * (this.total - this.done) : NaN;
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.done}/${this.total} ${clock(this.elapsed())}${Number.isFinite(left) ? ` ~${clock(left)} left` : ''} · ${this.label}`;
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
