/**
 * Starting the bench's server processes ahead of need. Starting `llr serve`
 * costs about a second of CPU (module loading, the tokenizer's tables), and
 * `llr bench` starts about a dozen of them one after another; started while
 * the bench is busy with work it does not measure (a warm-up run), that
 * second overlaps with the warm-up instead of adding to the wall time.
 *
 * The rule that keeps measurements clean: every spawn `prepare`d is awaited
 * by `settle()` before the next measured run starts (the runner settles at
 * the end of each warm-up and before the stream and paused phases), so a
 * measured run never shares the CPU with a starting server; a prepared
 * server then waits idle (an event loop with nothing to do) until `take`n.
 *
 * Used by the runner only. A spawn that fails is reported by `take` (to the
 * phase that needed the server), never as an unhandled rejection; `drain`
 * waits for spawns still in flight so the runner can stop every process it
 * started, whatever happened.
 */
export class SpawnAhead<S> {
  private readonly pending = new Map<string, Promise<S>>();

  constructor(private readonly spawn: (key: string) => Promise<S>) {}

  /** Start the server for `key` now, unless it is started already. */
  prepare(key: string): void {
    if (this.pending.has(key)) return;
    const p = this.spawn(key);
    p.catch(() => {}); // reported by take(); settle() must not throw for it
    this.pending.set(key, p);
  }

  /** The server for `key`: the prepared one, or one started now. */
  take(key: string): Promise<S> {
    this.prepare(key);
    const p = this.pending.get(key)!;
    this.pending.delete(key);
    return p;
  }

  /** Keys prepared and not yet taken. */
  get waiting(): string[] {
    return [...this.pending.keys()];
  }

  /** Wait until no spawn is in flight (failures included: they wait for their `take`). */
  async settle(): Promise<void> {
    await Promise.allSettled(this.pending.values());
  }

  /** Settle, then forget every prepared server; the caller stops them (its own registry holds them). */
  async drain(): Promise<void> {
    await this.settle();
    this.pending.clear();
  }
}
