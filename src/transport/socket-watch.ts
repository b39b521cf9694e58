/**
 * Watches on an HTTP answer's socket, for transport/http.ts and the demo's
 * routes: a reader that stops reading is dropped after the send-stall timeout
 * (`watchStall`), and a client that goes away before its answer aborts the
 * work done for it (`clientGone`), and a create pipelined behind another
 * answer waits for its socket (`ownsSocket`). One `close`
 * listener per socket however many answers are pipelined on it. Leaves out the
 * answers themselves.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WireError } from '../protocol/errors.js';
import { stallCheckEveryMs } from '../modes/send-bytes.js';

/**
 * A reader that reads nothing keeps its answer in memory: a JSON body, or an
 * SSE stream whose events all came in one burst (the send-buffer check runs
 * only when the next event is sent). While bytes wait to be sent and none
 * leave for `ms`, the connection is dropped (`sendStallTimeoutMs`). Watches
 * until the answer is fully handed to the kernel (`finish`) or the
 * connection closes.
 */
/**
 * The peer's FIN (a half-close): it can send nothing more, and every socket of this server takes it for the peer
 * gone (Node ends an HTTP connection's side and aborts its request; the `ws` library ends its side, and no close
 * handshake can complete). Ending a side waits for what was written to be flushed, which a peer that reads nothing
 * never lets happen: an SSE stream's run stayed `in_progress` until the stall timeout, a WebSocket's paced run until
 * the heartbeat, and for ever with the heartbeat off (outside attack). What was written gets at most `lingerMs` to
 * leave, as a refused upload's answer does (transport/body.ts); then the socket is destroyed, and its run ends as
 * a disconnect (`dropped` is told the bytes left unsent).
 */
export function lingerAfterPeerEnd(socket: Socket, lingerMs: number, dropped: (unsent: number) => void): void {
  socket.once('end', () => {
    if (socket.destroyed) return;
    const timer = setTimeout(() => {
      if (socket.destroyed) return;
      dropped(socket.writableLength);
      socket.destroy();
    }, lingerMs);
    socket.once('close', () => clearTimeout(timer));
  });
}

export function watchStall(res: ServerResponse, ms: number, stalled: (pending: number) => void): void {
  if (ms <= 0) return;
  // One watch per answer: a second call (a route's own, after the one every request gets) only says what to log.
  const existing = stallWatches.get(res);
  if (existing) {
    existing.stalled = stalled;
    return;
  }
  const watch = { stalled };
  stallWatches.set(res, watch);
  let written = -1;
  let queued = -1;
  let since = performance.now();
  const timer = setInterval(() => {
    const socket = res.socket;
    if (!socket) return;
    const pending = res.writableLength + socket.writableLength;
    // Progress is what the kernel takes, not what this process hands the socket: `bytesWritten` counts bytes still
    // queued here, and a write leaves `writableLength` only once all of it is in the kernel. A large write (an SSE
    // backlog of megabytes, a JSON slice) read steadily looked stalled until all of it had gone: a reader taking
    // 1 MB/s of a stream echoing 5 MB of instructions was dropped at a 2 s stall timeout (outside attack). libuv's
    // queue (`writeQueueSize`) shrinks as the kernel accepts each part of the write under way.
    const inQueue = writeQueueSize(socket);
    if (pending === 0 || socket.bytesWritten !== written || inQueue !== queued) {
      written = socket.bytesWritten;
      queued = inQueue;
      since = performance.now();
      return;
    }
    if (performance.now() - since >= ms) {
      clearInterval(timer);
      watch.stalled(pending);
      socket.destroy();
    }
  }, stallCheckEveryMs(ms));
  timer.unref();
  // Also stopped when the request's socket closes: an answer pipelined behind another has no socket until that one is
  // done, and gets neither `finish` nor `close` when the client goes away first, so its timer ran for good (outside
  // attack: five clients that each pipelined 40 GETs behind a slow create and left kept 200 timers ticking, and their
  // requests and answers, after the server had closed).
  const forget = whenSocketCloses(res.req.socket, () => clearInterval(timer));
  const stop = () => {
    clearInterval(timer);
    forget();
  };
  res.once('finish', stop);
  res.once('close', stop);
}

const stallWatches = new WeakMap<ServerResponse, { stalled: (pending: number) => void }>();

/** libuv's queue of bytes handed to the socket and not yet taken by the kernel (-1 when the stream does not say). */
export function writeQueueSize(socket: Duplex): number {
  return (socket as Duplex & { _handle?: { writeQueueSize?: number } | null })._handle?.writeQueueSize ?? -1;
}

/** Callbacks run once a socket closes: one `close` listener per socket, however many answers are pipelined on it. */
const onSocketClose = new WeakMap<Duplex, Set<() => void>>();

/** Runs `fn` once `socket` closes (at once if it has); returns what forgets it. */
export function whenSocketCloses(socket: Duplex | null | undefined, fn: () => void): () => void {
  if (!socket || socket.destroyed) {
    fn();
    return () => {};
  }
  let callbacks = onSocketClose.get(socket);
  if (!callbacks) {
    const set = new Set<() => void>();
    callbacks = set;
    onSocketClose.set(socket, set);
    socket.once('close', () => {
      onSocketClose.delete(socket);
      for (const f of set) f();
      set.clear();
    });
  }
  const set = callbacks;
  set.add(fn);
  return () => set.delete(fn);
}

/**
 * Resolves true once `res` holds its request's socket: at once, unless it is pipelined behind another answer on that
 * socket (Node queues it until the answers before it are done, then hands it the socket); false if the socket closes
 * first (the client went away while it waited).
 */
export function ownsSocket(res: ServerResponse): Promise<boolean> {
  if (res.socket) return Promise.resolve(true);
  const socket = res.req.socket;
  return new Promise((resolve) => {
    const assigned = () => {
      forget();
      resolve(!socket.destroyed);
    };
    res.once('socket', assigned);
    const forget = whenSocketCloses(socket, () => {
      res.off('socket', assigned);
      resolve(false);
    });
  });
}

/**
 * A signal aborted when the client of `req` goes away before its answer: its response closes, or its socket does (a
 * pipelined request's response gets no `close` of its own when the client goes, as `sseShare` notes). `done`
 * removes the listeners (a kept-alive socket serves many requests).
 */
export function clientGone(req: IncomingMessage, res: ServerResponse): { signal: AbortSignal; done: () => void } {
  const ac = new AbortController();
  const socket = req.socket;
  const abort = () => ac.abort(new WireError('request_aborted', 'The client closed the connection before its answer.'));
  let forget = (): void => {};
  const done = () => {
    res.off('close', abort);
    forget();
  };
  if (res.destroyed || socket.destroyed) abort();
  else {
    res.once('close', abort);
    forget = whenSocketCloses(socket, abort);
  }
  return { signal: ac.signal, done };
}
