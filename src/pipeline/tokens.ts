/**
 * An append-only buffer of token ids with zero-copy snapshots. The rendered
 * prompt of a long-lived run or a ws connection grows by the new items'
 * tokens only; `view()` hands the model the prompt as it is now, and because
 * the buffer never rewrites a token (it reallocates into a new array when it
 * grows), an earlier view stays true forever without a copy.
 *
 * `reserveWork` makes room ahead of a large push in slices (copying the old
 * prompt and first-touching the new pages a slice at a time), so the push
 * itself — the atomic commit of an append — is a quick write.
 */
import type { Work } from '../cooperative.js';
import { PromptKeys } from '../model/prefix-cache.js';
import { TOKEN_HELD_BYTES } from './metrics.js';

/** Tokens copied or first-touched per slice by `reserveWork`. */
const RESERVE_SLICE = 256 * 1024;
export class TokenBuffer {
  private buf: Uint32Array;
  private len = 0;
  /** The prefix cache's block keys of this prompt, extended as it grows (model/prefix-cache.ts). */
  readonly keys: PromptKeys;

  constructor(initial: ArrayLike<number> = [], capacity = 1024, keys = new PromptKeys()) {
    this.keys = keys;
    this.buf = new Uint32Array(Math.max(capacity, initial.length * 2, 16));
    this.pushAll(initial);
  }

  get length(): number {
    return this.len;
  }

  /**
   * What its token ids hold: 4 bytes a token. The array's spare room (up to as much again, as it doubles) is left
   * out: zeroed pages nobody wrote are not resident. Text of a token a byte holds 4 times its size here, so what
   * keeps a context across client time charges this to the server-wide byte budget besides the items' bytes
   * (modes/server-bytes.ts).
   */
  get bytes(): number {
    return TOKEN_HELD_BYTES * this.len;
  }

  pushAll(ts: ArrayLike<number>): void {
    if (this.len + ts.length > this.buf.length) this.grow(this.len + ts.length);
    for (let i = 0; i < ts.length; i++) this.buf[this.len + i] = ts[i]!;
    this.len += ts.length;
  }

  /** Whether `extra` more tokens can be pushed without the buffer growing (a copy of every token so far). */
  fits(extra: number): boolean {
    return this.len + extra <= this.buf.length;
  }

  /** The tokens so far, without copying; later pushes never change it. */
  view(): Uint32Array {
    return this.buf.subarray(0, this.len);
  }

  /**
   * Make room for `extra` more tokens, yielding between slices. The buffer
   * has one writer (the run or the connection that owns the context), which
   * does not push while this runs; earlier views keep the old array.
   */
  *reserveWork(extra: number): Work<void> {
    const need = this.len + extra;
    let target = this.buf;
    if (need > this.buf.length) {
      target = new Uint32Array(Math.max(need, this.buf.length * 2));
      for (let at = 0; at < this.len; at += RESERVE_SLICE) {
        target.set(this.buf.subarray(at, Math.min(this.len, at + RESERVE_SLICE)), at);
        yield;
      }
    }
    // First touch of the pages the push will write (zeros are what they already hold).
    for (let at = this.len; at < need; at += RESERVE_SLICE) {
      target.fill(0, at, Math.min(need, at + RESERVE_SLICE));
      yield;
    }
    this.buf = target;
  }

  private grow(min: number): void {
    const next = new Uint32Array(Math.max(min, this.buf.length * 2));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }
}
