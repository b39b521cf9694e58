/**
 * A JSON syntax check (RFC 8259) that works in slices: it walks the text with
 * an explicit stack instead of recursion and yields every `SLICE_CHARS`, so
 * the validate stage can check a 16 MiB `arguments` string without holding
 * the event loop (`JSON.parse` of that much structure takes ~0.1–1 s) and
 * without a stack overflow on deep nesting.
 *
 * Used by the validate stage for large function-call arguments; small ones
 * use `JSON.parse`. Leaves out building the value: only validity matters.
 */
import { SLICE_CHARS, type Work } from '../model/cooperative.js';

const OBJECT = 1;
const ARRAY = 0;

class Checker {
  private i = 0;
  private nextYield = SLICE_CHARS;
  private readonly stack: number[] = [];

  constructor(private readonly s: string) {}

  *run(): Work<boolean> {
    const s = this.s;
    for (;;) {
      // A value is expected.
      this.ws();
      const c = s.charCodeAt(this.i);
      if (c === 0x7b || c === 0x5b) {
        this.i++;
        this.ws();
        if (s.charCodeAt(this.i) === (c === 0x7b ? 0x7d : 0x5d)) {
          this.i++;
        } else {
          this.stack.push(c === 0x7b ? OBJECT : ARRAY);
          if (c === 0x7b && !(yield* this.key())) return false;
          continue;
        }
      } else if (c === 0x22) {
        if (!(yield* this.string())) return false;
      } else if (!this.scalar()) {
        return false;
      }
      // After a value: the end, a comma, or a closing bracket.
      for (;;) {
        if (this.i >= this.nextYield) {
          yield;
          this.nextYield = this.i + SLICE_CHARS;
        }
        this.ws();
        const top = this.stack.at(-1);
        if (top === undefined) return this.i === s.length;
        const d = s.charCodeAt(this.i);
        if (d === 0x2c) {
          this.i++;
          if (top === OBJECT) {
            this.ws();
            if (!(yield* this.key())) return false;
          }
          break;
        }
        if (d !== (top === OBJECT ? 0x7d : 0x5d)) return false;
        this.i++;
        this.stack.pop();
      }
    }
  }

  private ws(): void {
    const s = this.s;
    for (let c = s.charCodeAt(this.i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = s.charCodeAt(this.i)) this.i++;
  }

  /** `"name"` then `:`; leaves the cursor at the value. */
  private *key(): Work<boolean> {
    if (this.s.charCodeAt(this.i) !== 0x22 || !(yield* this.string())) return false;
    this.ws();
    if (this.s.charCodeAt(this.i) !== 0x3a) return false;
    this.i++;
    return true;
  }

  private *string(): Work<boolean> {
    const s = this.s;
    this.i++;
    for (;;) {
      if (this.i >= this.nextYield) {
        yield;
        this.nextYield = this.i + SLICE_CHARS;
      }
      if (this.i >= s.length) return false;
      const c = s.charCodeAt(this.i++);
      if (c === 0x22) return true;
      if (c < 0x20) return false;
      if (c === 0x5c) {
        const e = s.charCodeAt(this.i++);
        if (e === 0x75) {
          if (!/^[0-9a-fA-F]{4}$/.test(s.slice(this.i, this.i + 4))) return false;
          this.i += 4;
        } else if (!(e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74)) {
          return false;
        }
      }
    }
  }

  private scalar(): boolean {
    const rest = SCALAR;
    rest.lastIndex = this.i;
    const m = rest.exec(this.s);
    if (!m) return false;
    this.i += m[0].length;
    return true;
  }
}

const SCALAR = /true|false|null|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/** Whether `text` is one valid JSON value (with surrounding whitespace), checked in slices. */
export function jsonValidWork(text: string): Work<boolean> {
  return new Checker(text).run();
}
