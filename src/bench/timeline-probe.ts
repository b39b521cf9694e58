/**
 * Loaded into `llr serve` by `npm run bench:timeline` (`node --import`), and
 * nowhere else: it stamps, on the monotonic clock every process of the
 * machine shares (`process.hrtime`, CLOCK_MONOTONIC on Linux), each chunk a
 * TCP socket receives (before the `data` listeners run) and each write a
 * TCP socket makes (`_write`/`_writev`: the system call, its start and its
 * length, and whether it carries a `response.output_item.done` event, so the
 * driver can tell a call's write from the writes after it). On SIGUSR2 it writes what it holds to `LLR_TIMELINE_OUT` (JSON,
 * through a temporary file renamed into place, so a reader never sees half)
 * and starts again empty. The server's code is untouched: the cost is two
 * clock reads and a byte search per write, one clock read per chunk.
 *
 * Bounded: at most `LLR_TIMELINE_MAX` events (default 1,000,000) are held;
 * later ones are counted as dropped, not kept.
 */
import { renameSync, writeFileSync } from 'node:fs';
import net from 'node:net';

/** An event: [kind, start µs, duration µs, bytes, item done]; kind 0 a received chunk, 1 a write. */
type Event = [number, number, number, number, number];

const ITEM_DONE = Buffer.from('"type":"response.output_item.done"');

const out = process.env['LLR_TIMELINE_OUT'];
const max = Number(process.env['LLR_TIMELINE_MAX'] ?? 1_000_000);
let events: Event[] = [];
let dropped = 0;

const nowUs = (): number => Number(process.hrtime.bigint()) / 1000;

/** A TCP connection (not a pipe such as the log's stdout): it has a peer port. */
const isTcp = (s: net.Socket): boolean => typeof s.remotePort === 'number';

function keep(e: Event): void {
  if (events.length < max) events.push(e);
  else dropped++;
}

/** The write's chunks: `_write`'s one, or `_writev`'s list of `{chunk}`. */
function chunksOf(data: unknown): unknown[] {
  return Array.isArray(data) ? data.map((c: { chunk?: unknown }) => c.chunk ?? c) : [data];
}

function bytesOf(data: unknown): number {
  return chunksOf(data).reduce((n: number, c) => n + (Buffer.isBuffer(c) || typeof c === 'string' ? Buffer.byteLength(c) : 0), 0);
}

/** 1 when a chunk holds an `output_item.done` event (an event is never split over two chunks: each frame's payload is one). */
function itemDone(data: unknown): number {
  return chunksOf(data).some((c) => (Buffer.isBuffer(c) ? c.includes(ITEM_DONE) : typeof c === 'string' && c.includes('"type":"response.output_item.done"'))) ? 1 : 0;
}

if (out !== undefined && Number.isInteger(max) && max > 0) {
  const proto = net.Socket.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  const emit = proto['emit']!;
  proto['emit'] = function (this: net.Socket, name: unknown, ...args: unknown[]) {
    if (name === 'data' && isTcp(this)) keep([0, nowUs(), 0, bytesOf(args[0]), 0]);
    return emit.call(this, name, ...args);
  };
  for (const method of ['_write', '_writev']) {
    const original = proto[method]!;
    proto[method] = function (this: net.Socket, ...args: unknown[]) {
      if (!isTcp(this)) return original.apply(this, args);
      const start = nowUs();
      const result = original.apply(this, args);
      keep([1, start, nowUs() - start, bytesOf(args[0]), itemDone(args[0])]);
      return result;
    };
  }
  process.on('SIGUSR2', () => {
    const taken = events;
    const lost = dropped;
    events = [];
    dropped = 0;
    try {
      writeFileSync(`${out}.tmp`, JSON.stringify({ events: taken, dropped: lost }));
      renameSync(`${out}.tmp`, out);
    } catch (err) {
      // Never the server's end: the driver, finding no file, says it got no timeline.
      process.stderr.write(`timeline probe: could not write ${out}: ${(err as Error).message}\n`);
    }
  });
}
