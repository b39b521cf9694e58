/**
 * The context budget: how much one live context may hold — a long-lived run
 * across all its appends, or a ws-mode response extending its connection's
 * cached context — in items and in bytes (each item's JSON, UTF-8).
 * Without it a client that keeps appending items that answer nothing (or a
 * ws chain that never ends) grows one context, and the server, without
 * bound.
 *
 * Measured incrementally: each context has a meter that counts each item
 * once, the first time it is asked about it, so a run pays for an item's
 * JSON once however often the budget is checked. Breaching the budget is
 * `context_length_exceeded` (400): a create is refused, an append is refused
 * and the run stays paused. The HTTP baseline's context lives only for its
 * request, but the stored chain it loads has no other bound than the
 * store's: it is checked too, once loaded, before it is rendered
 * (modes/prepare.ts).
 */
import { WireError } from '../protocol/errors.js';
import type { InputItem } from '../protocol/objects.js';
import type { RenderedContext } from '../pipeline/render.js';
import type { Limits } from './services.js';

export type ContextLimits = Pick<Limits, 'maxContextBytes' | 'maxContextItems'>;

const itemSizes = new WeakMap<object, number>();

/**
 * The heap an item of a kept context takes besides its bytes (`itemBytes`): its parsed object's header and slots,
 * and its place in the context's lists and the model's scans of it. An outside attack's 49,000 one-letter messages
 * took ~137 bytes of heap each against ~47 counted; what keeps a context across client time charges this per item
 * to the server-wide byte budget (a paused long-lived run, a ws-mode cache: modes/server-bytes.ts).
 */
export const ITEM_HELD_BYTES = 96;

/**
 * An item's size in bytes, measured once per item object: the UTF-8 bytes
 * of its strings (keys included) plus one byte per value and per container
 * for the JSON punctuation. It is within a few per cent of the item's JSON
 * (escapes are not counted) and, unlike `JSON.stringify`, costs no copy:
 * 16 MiB measures in a few ms instead of ~0.5 s of one loop turn.
 */
export function itemBytes(item: InputItem): number {
  let n = itemSizes.get(item);
  if (n === undefined) {
    n = jsonishBytes(item);
    itemSizes.set(item, n);
  }
  return n;
}

function jsonishBytes(root: unknown): number {
  let bytes = 0;
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') bytes += Buffer.byteLength(v) + 2;
    else if (typeof v === 'number' || typeof v === 'boolean') bytes += String(v).length + 1;
    else if (v === null || v === undefined) bytes += 4;
    else if (Array.isArray(v)) {
      bytes += 2 + v.length;
      for (const x of v) stack.push(x);
    } else if (typeof v === 'object') {
      bytes += 2;
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        bytes += Buffer.byteLength(k) + 4;
        stack.push(x);
      }
    }
  }
  return bytes;
}

interface Meter {
  counted: number;
  bytes: number;
}

const meters = new WeakMap<RenderedContext, Meter>();

/** What a context holds now: its item count and their bytes. */
function contextSize(ctx: RenderedContext): { items: number; bytes: number } {
  let m = meters.get(ctx);
  const items = ctx.items;
  // Contexts only grow; a shorter one was rebuilt, so it is measured afresh.
  if (!m || m.counted > items.length) {
    m = { counted: 0, bytes: 0 };
    meters.set(ctx, m);
  }
  for (; m.counted < items.length; m.counted++) m.bytes += itemBytes(items[m.counted]!);
  return { items: items.length, bytes: m.bytes };
}

/** The bytes of a context's items (`itemBytes` each), measured incrementally as `checkContext` measures them. */
export function contextBytes(ctx: RenderedContext): number {
  return contextSize(ctx).bytes;
}

/**
 * Throws `context_length_exceeded` when `ctx` (null: an empty context) plus
 * `incoming` would pass the limits; applies nothing, so a refused append
 * leaves the run as it was.
 */
export function checkContext(ctx: RenderedContext | null, incoming: readonly InputItem[], limits: ContextLimits): void {
  const now = ctx ? contextSize(ctx) : { items: 0, bytes: 0 };
  const items = now.items + incoming.length;
  if (items > limits.maxContextItems) {
    throw new WireError(
      'context_length_exceeded',
      `The context would hold ${items} items; this server keeps at most ${limits.maxContextItems} per response (llr serve --max-context-items).`,
      'input',
    );
  }
  let bytes = now.bytes;
  for (const item of incoming) bytes += itemBytes(item);
  if (bytes > limits.maxContextBytes) {
    throw new WireError(
      'context_length_exceeded',
      `The context would hold ${bytes} bytes; this server keeps at most ${limits.maxContextBytes} per response (llr serve --max-context-bytes).`,
      'input',
    );
  }
}

/**
 * What a long-lived run keeps for its whole life besides its context: the
 * items appended to it (stored with the response, listed by `input_items`)
 * and its output (the Response's `output`, sent whole in its terminal
 * event). Without compaction both are part of the context, so its budget
 * bounds them. Server-side compaction (`context_management`) replaces the
 * context by a smaller window but keeps both, and adds a compaction item to
 * the output each time, sealing the whole turn in progress: a run of 3,000
 * steps with 100 KB tool outputs kept 300 MB of appended items, and one of
 * 1,000 small steps compacting at every model call an output of 187 MB
 * (its terminal event, then the store), while its context stayed small
 * (outside attack). So they are held to the context's budget too: an append
 * that would pass it is refused (`context_length_exceeded`, the run stays
 * paused), as when the context itself is full.
 */
export class RunKeep {
  private appendedItems = 0;
  private appendedBytes = 0;
  /** Output items measured so far (the output only grows) and their bytes. */
  private outputCounted = 0;
  private outputBytes = 0;

  constructor(private readonly output: readonly object[]) {}

  /** The bytes of the output so far (`itemBytes` each; its items done: an item is measured once). */
  outputSize(): number {
    for (; this.outputCounted < this.output.length; this.outputCounted++) this.outputBytes += itemBytes(this.output[this.outputCounted] as InputItem);
    return this.outputBytes;
  }

  /** Throws `context_length_exceeded` when `incoming` would pass the limits; applies nothing. */
  check(incoming: readonly InputItem[], limits: ContextLimits): void {
    this.outputSize();
    const items = this.appendedItems + this.output.length + incoming.length;
    const why = 'its output and the items appended to it, kept for its whole life: server-side compaction shrinks the context, not them';
    if (items > limits.maxContextItems) {
      throw new WireError('context_length_exceeded', `The response would keep ${items} items (${why}); this server keeps at most ${limits.maxContextItems} per response (llr serve --max-context-items).`, 'input');
    }
    let bytes = this.appendedBytes + this.outputBytes;
    for (const item of incoming) bytes += itemBytes(item);
    if (bytes > limits.maxContextBytes) {
      throw new WireError('context_length_exceeded', `The response would keep ${bytes} bytes (${why}); this server keeps at most ${limits.maxContextBytes} per response (llr serve --max-context-bytes).`, 'input');
    }
  }

  /** Count items appended (after `check` passed for them). */
  add(appended: readonly InputItem[]): void {
    this.appendedItems += appended.length;
    for (const item of appended) this.appendedBytes += itemBytes(item);
  }
}
