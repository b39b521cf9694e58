/**
 * An append-only buffer of token ids with zero-copy snapshots. The rendered
 * prompt of a long-lived run or a ws connection grows by the new items'
 * tokens only; `view()` hands the model the prompt as it is now, and because
 * the buffer never rewrites a token (it reallocates into a new array when it
 * grows), an earlier view stays true forever without a copy.
 */
export class TokenBuffer {
  private buf: Uint32Array;
  private len = 0;

  constructor(initial: ArrayLike<number> = [], capacity = 1024) {
    this.buf = new Uint32Array(Math.max(capacity, initial.length * 2, 16));
    this.pushAll(initial);
  }

  get length(): number {
    return this.len;
  }

  push(t: number): void {
    if (this.len === this.buf.length) this.grow(this.len + 1);
    this.buf[this.len++] = t;
  }

  pushAll(ts: ArrayLike<number>): void {
    if (this.len + ts.length > this.buf.length) this.grow(this.len + ts.length);
    for (let i = 0; i < ts.length; i++) this.buf[this.len + i] = ts[i]!;
    this.len += ts.length;
  }

  /** The tokens so far, without copying; later pushes never change it. */
  view(): Uint32Array {
    return this.buf.subarray(0, this.len);
  }

  /** A copy that can grow independently (for a context that forks). */
  clone(): TokenBuffer {
    return new TokenBuffer(this.view());
  }

  private grow(min: number): void {
    const next = new Uint32Array(Math.max(min, this.buf.length * 2));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }
}
