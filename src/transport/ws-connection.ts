/**
 * One accepted WebSocket connection (`WsConnection`): the session's
 * transport on its socket. Events go out as one JSON text frame each (a
 * batch of deltas in one write; a large echo as shared bytes in fragments),
 * paced by what the client leaves unsent and the server-wide bound; frames
 * in are parsed at the edge (in slices past 1 MiB, in order, up to the queue
 * bound) and handed to the session; the heartbeat, the send-stall watch and
 * the lifetime limit end a connection that must end. Opened by
 * transport/ws.ts once the upgrade is accepted; leaves the upgrade out.
 */
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import { WireError, toWireError } from '../protocol/errors.js';
import { parseClientEvent, withTimingOptIn } from '../protocol/parse.js';
import { COOPERATIVE_PARSE_CHARS } from '../protocol/json-text.js';
import { parseCaps, parseEdgeJson, parseEdgeJsonNow } from './json-in.js';
import type { ServerEvent } from '../protocol/events.js';
import { eventPieces, piecesLength, type DeltaBatch } from '../protocol/event-json.js';
import { batchFrames, directSocket } from './ws-frames.js';
import type { SessionHost } from '../modes/host.js';
import { pausedAppendRefusal } from '../modes/server-bytes.js';
import type { ConnectionSession } from '../modes/session.js';
import type { ConnectionBytes, Hold } from '../modes/server-bytes.js';
import { SEND_FLOOR_BYTES, stallCheckEveryMs, type SendShare, type Unsent } from '../modes/send-bytes.js';
import type { Logger } from 'pino';
import type { Transport } from '../modes/transport.js';
import type { Batcher } from './batch.js';
import { startHeartbeat } from './heartbeat.js';
import { ServerWebSocket } from './server-websocket.js';
import { writeQueueSize } from './socket-watch.js';

/**
 * Sockets a watch of this file dropped (`terminate`, its reason logged): shutdown's wait (`WsTransport.leaving`) does
 * not log them a second time. A stall watch and shutdown's deadline falling in one turn logged `send_stalled` twice.
 */
export const droppedSockets = new WeakSet<object>();

/**
 * One accepted connection: the session's transport and the socket's
 * listeners. A class rather than closures over one function's context: a
 * paused run's connection keeps all of it, and a dozen closures with their
 * shared context cost more than one object whose methods live on its
 * prototype (only the functions handed to `ws` or a timer are bound).
 */
export class WsConnection implements Transport, Unsent {
  /**
   * The largest event sent on this connection: lifecycle events echo the request (instructions, tools), so one
   * can exceed the limit by itself; the allowance below lets a client that reads receive a request it was allowed to send.
   */
  private largestEvent = 0;
  /** `,"stream_id":"…"}`: the end of every event while a lane's response is served (`lane`), else null. */
  private laneEnd: string | null = null;
  /**
   * `room` for the session: a queued create starts once everything sent before it has been flushed to the
   * socket (checked as each send completes), so each response starts with the whole send allowance; a client
   * that reads is never dropped for pipelining, one that does not read holds only its queue. Null while none wait.
   */
  private roomWaiters: Array<() => void> | null = null;
  private session!: ConnectionSession;
  private held!: ConnectionBytes;
  private timing = false;
  /** A frame over COOPERATIVE_PARSE_CHARS being parsed in slices (transport/json-in.ts); frames that arrive meanwhile wait behind it. */
  private parsing: Promise<void> | null = null;
  private waitingBytes = 0;
  private lifetimeMs = 0;
  private lifetime: ReturnType<typeof setTimeout> | undefined = undefined;
  private heartbeat: ReturnType<typeof setInterval> | undefined = undefined;
  /** The stall watch while a run waits for the peer to read (`watchStall`). */
  private stallTimer: ReturnType<typeof setInterval> | undefined = undefined;
  /** While bytes wait to be sent with no run waiting for them (`watchUnsent`). */
  private unsentWatch: ReturnType<typeof setInterval> | undefined = undefined;
  /** Whether `onDrain` waits on the socket's next 'drain' (one listener at a time, however many waits). */
  private drainHooked = false;
  /** Sends completed (`roomCheck`), and as many at the heartbeat's last period (`sending`). */
  private sendsDone = 0;
  private sendsSeen = 0;
  /** Sends handed to the socket with a completion (`roomCheck`): they complete in this order. */
  private sendsIssued = 0;
  /**
   * `response.steer.failed` echoes, and those of injects refused at once (`response.inject.failed`), (their input,
   * up to a frame's size each) not yet handed to the kernel, charged
   * to the server-wide byte budget until the send that carried each completes (`echoesSent`): a peer
   * that sends steers and reads nothing held two or three frames' worth per connection, uncharged (outside attack:
   * 8 connections, 256 MiB unsent, `bytes_held` 0). Both null until the first steer (every paused run holds its
   * connection's transport: no allocation for connections that never steer).
   */
  private echoes: Hold | null = null;
  /** Each echo not yet sent, in order: the `sendsIssued` count once it was handed over, then its bytes (pairs, flat). */
  private echoPending: number[] | null = null;
  private echoHead = 0;
  /** A pong sent and not yet flushed (`onPing`), and the latest ping asked meanwhile, answered once it has gone. */
  private pongOwed = false;
  private pingNext: Buffer | null = null;
  /** Socket reads (`onData`), and as many at the heartbeat's last period (`receiving`). */
  private readsDone = 0;
  private readsSeen = 0;
  /** Set while reading is paused because the message still arriving would pass the server-wide byte budget. */
  private rxRetry: ReturnType<typeof setInterval> | undefined = undefined;
  private rxPausedAt = 0;
  /** When reading paused for the budget last pinged the peer (`probePeer`). */
  private rxProbedAt = 0;
  /** The message arriving, stuck beside the paused runs, was spared one tick for other stuck messages (`cannotFit`). */
  private heldOver = false;
  /** Set while a message is arriving (its first bytes came, it is not whole yet): when it is overdue (`messageOverdue`). */
  private rxDeadline: ReturnType<typeof setTimeout> | undefined = undefined;
  /** This connection's part of the server-wide bound on unsent bytes (modes/send-bytes.ts). */
  private readonly share: SendShare;

  constructor(
    private readonly ws: WebSocket,
    private readonly host: SessionHost,
    private readonly log: Logger,
    private readonly batch: Batcher,
    private readonly socket: Duplex,
  ) {
    this.share = host.sendShare(this, log);
  }

  /** Request data a create loaded (a stored chain): charged to this connection's share of the budget (`server_busy` past it). */
  chargeLoaded(bytes: number): void {
    this.held.loaded(bytes);
  }

  /** What the session keeps shrank (a DELETE evicted a cached response): the connection's charge follows once it is idle. */
  keptChanged(): void {
    this.held.kept();
  }

  /** The session let go of some of what it keeps while it works, to make room for its create: their charge goes now. */
  keptShrank(): void {
    this.held.keptShrank();
  }

  /**
   * For the server-wide bound (`Unsent`): what the socket holds unsent now, while it is open and while the server
   * closes it (its close frame waits behind what a peer that reads nothing left unsent; `GET /health` counted 0
   * for such sockets, outside attack). The share is closed, and counts nothing, once the socket has closed.
   */
  unsentBytes(): number {
    const state = this.ws.readyState;
    return state === this.ws.OPEN || state === this.ws.CLOSING ? this.ws.bufferedAmount : 0;
  }

  send(e: ServerEvent): void {
    const { ws, host, batch } = this;
    if (ws.readyState !== ws.OPEN) return;
    // A client that stops reading must not make the server hold its stream
    // in memory without bound: past the limit (plus two of the largest
    // events, bounded by the frame limit) the connection is dropped (a
    // close frame could not reach a peer that does not read), which
    // cancels its run like a disconnect.
    // What this turn wrote is not counted: no reader could have read it yet (transport/batch.ts, `backlog`). It is
    // capped all the same: a turn's own writes that a reader must be able to take are at most three echoes of the
    // request, what a paced run writes before it waits (half the limit) and a few small events, under twice the limit
    // plus three of the largest events. Uncapped, a peer flooding small frames the server refuses (an `error` event
    // each) and reading nothing had one turn's answers to 32 socket reads queued, 44 MB from 2 MB of frames, before
    // the next turn dropped it (outside attack).
    const limit = host.limits.maxSendBufferBytes + 2 * this.largestEvent;
    const unsent = ws.bufferedAmount;
    if (batch.backlog(unsent) > limit || unsent > limit + host.limits.maxSendBufferBytes + this.largestEvent) {
      this.log.info({ code: 'send_buffer_full', buffered: unsent, limit }, 'send buffer limit reached; dropping the connection');
      droppedSockets.add(ws);
      ws.terminate();
      return;
    }
    this.share.note(unsent);
    const pieces = eventPieces(e);
    // The lane goes in as the event's last field: its JSON text's last piece is always text ending in '}'.
    if (this.laneEnd !== null) pieces[pieces.length - 1] = (pieces[pieces.length - 1] as string).slice(0, -1) + this.laneEnd;
    const size = piecesLength(pieces);
    if (size > this.largestEvent) this.largestEvent = size;
    if (unsent + size >= SEND_FLOOR_BYTES && this.unsentWatch === undefined) this.watchUnsent();
    batch(unsent); // one socket write per event-loop turn (transport/batch.ts)
    // A large instructions or tools echo arrives as its shared UTF-8 bytes (protocol/event-json.ts): one copy, no re-encoding,
    // sent as fragments of one text message (copying 16 MiB into one buffer costs 0.1–0.4 s where fresh memory is slow).
    this.sendsIssued++;
    if (pieces.length === 1) ws.send(pieces[0], this.roomCheck);
    else pieces.forEach((p, i) => ws.send(p, { binary: false, fin: i === pieces.length - 1 }, i === pieces.length - 1 ? this.roomCheck : undefined));
  }

  /**
   * A batch of deltas (protocol/event-json.ts): its frames built into one buffer and written once when that is
   * byte-for-byte what `send` per event would write (transport/ws-frames.ts); else `send` per event.
   */
  sendDeltas(b: DeltaBatch): void {
    const { ws, host } = this;
    const n = b.deltas.length;
    if (ws.readyState !== ws.OPEN) {
      b.sent = n;
      return;
    }
    // A lane's deltas go one by one through `send`, which adds the lane (the batched frames are built without it).
    const socket = this.laneEnd === null ? directSocket(ws) : null;
    if (socket !== null) {
      const { frames, largest } = batchFrames(b);
      const unsent = ws.bufferedAmount;
      // Only while no event of the batch could reach the send limit: then each is sent as `send` would.
      if (this.batch.backlog(unsent) + frames.length <= host.limits.maxSendBufferBytes + 2 * this.largestEvent) {
        this.share.note(unsent);
        if (largest > this.largestEvent) this.largestEvent = largest;
        // One write already: it needs no cork (behind one this turn's earlier sends set, it keeps its place).
        this.sendsIssued++;
        socket.write(frames, this.roomCheck);
        b.sent = n;
        return;
      }
    }
    for (let i = b.sent; i < n; i++) {
      this.send(b.event(i));
      b.sent = i + 1;
    }
  }

  lane(id: string | null): void {
    // Validated at parse (STREAM_ID): nothing in it needs escaping.
    this.laneEnd = id === null ? null : `,"stream_id":"${id}"}`;
  }

  /** Chaos knobs' injected disconnect: a close frame with 1011, as a server fault would send (docs/reliability.md). */
  drop(): void {
    this.ws.close(1011, 'injected disconnect');
  }

  flush(): void {
    this.batch.flush();
  }

  room(bytes: number): Promise<boolean> | null {
    if (this.hasRoom()) return this.totalRoom(bytes);
    this.log.info({ code: 'send_buffer_wait', buffered: this.ws.bufferedAmount }, 'next queued response waits for the client to read');
    // Then for all readers together to be within the server-wide bound.
    return this.whenRead().then(() => (this.ws.readyState === this.ws.OPEN ? this.totalRoom(bytes) : null) ?? true);
  }

  /**
   * `SendShare.room`, as an SSE stream asks it: only while the stall timeout drops readers that read nothing (with
   * it off such readers may hold the total past the bound for good, and a large create would wait for good).
   */
  private totalRoom(bytes: number): Promise<boolean> | null {
    return this.host.limits.sendStallTimeoutMs > 0 ? this.share.room(bytes) : null;
  }

  /**
   * The run's wait for a reader that fell behind by half the send limit (modes/transport.ts), or by the floor of
   * the server-wide bound while all readers together are past it (modes/send-bytes.ts).
   */
  backlog(): Promise<void> | null {
    const { ws } = this;
    if (ws.readyState !== ws.OPEN) return null;
    // Only while something drops a reader that reads nothing (the stall watch, or the heartbeat: its pong never
    // comes, nor do bytes leave): with neither the run waited for it for ever; the send limit drops it instead.
    if (this.host.limits.sendStallTimeoutMs <= 0 && this.heartbeat === undefined) return null;
    const unsent = ws.bufferedAmount;
    if (unsent <= this.host.limits.maxSendBufferBytes / 2 && !this.share.pace(unsent)) return null;
    this.watchStall();
    // Send completions wake the wait (`roomCheck`); so does the socket draining, for when a ping or pong, written
    // without a completion, is the last thing left unsent as the last data write completes.
    if (!this.drainHooked) {
      this.drainHooked = true;
      this.socket.once('drain', this.onDrain);
    }
    return this.whenRead();
  }

  private readonly onDrain = (): void => {
    this.drainHooked = false;
    this.roomCheck();
  };

  private whenRead(): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.roomWaiters === null) this.roomWaiters = [resolve];
      else this.roomWaiters.push(resolve);
    });
  }

  /**
   * While a run waits for this peer to read (`backlog`): if nothing of what is unsent leaves for
   * `sendStallTimeoutMs`, the peer reads nothing, and is dropped (`send_stalled`) as an SSE reader is
   * (transport/socket-watch.ts); its run ends as a disconnect. Without it a reader that stopped would hold the run
   * until the heartbeat noticed. One watch at a time; it ends when the waiters are woken.
   * With the stall timeout off (0) the window is the heartbeat's idle timeout: the heartbeat itself ends the
   * wait only for a peer silent both ways, and one that read nothing but sent a frame or a pong now and then
   * held its run in_progress for the connection's whole lifetime (outside attack).
   */
  private watchStall(): void {
    const limits = this.host.limits;
    const ms = limits.sendStallTimeoutMs > 0 ? limits.sendStallTimeoutMs : this.heartbeat !== undefined ? limits.wsIdleTimeoutMs : 0;
    if (ms <= 0 || this.stallTimer !== undefined) return;
    const left = this.leaving();
    let since = performance.now();
    // Looked at as often as the other stall watches (`stallCheckEveryMs`), so a reader that stopped is dropped within
    // the timeout and a quarter of it: looked at once per timeout, it went anywhere up to twice the timeout, past the
    // longest wait of a create waiting for the send total to have room (modes/send-bytes.ts `startWaitMs`).
    const timer = setInterval(() => {
      const { ws } = this;
      if (this.roomWaiters === null || ws.readyState !== ws.OPEN) {
        clearInterval(timer);
        if (this.stallTimer === timer) this.stallTimer = undefined;
        return;
      }
      // Everything was read after all (what went last had no completion to wake the wait): not a stall.
      if (this.hasRoom()) {
        this.wakeRoomWaiters();
        return;
      }
      if (left()) {
        since = performance.now();
        return;
      }
      if (performance.now() - since < ms) return;
      clearInterval(timer);
      this.stallTimer = undefined;
      this.log.info({ code: 'send_stalled', buffered: ws.bufferedAmount, stall_ms: ms }, 'client read nothing of what was unsent; dropping the connection');
      droppedSockets.add(ws);
      ws.terminate();
    }, stallCheckEveryMs(ms));
    timer.unref();
    this.stallTimer = timer;
  }

  /**
   * A connection holding bytes unsent that no run waits on (its response ended with its echoes unread) was dropped by
   * nothing but the heartbeat, which a peer that pings and reads nothing satisfies: it held its bytes, and the total
   * of all readers past `--send-buffer-total-bytes`, for as long as it stayed, and every large create on the server
   * waited for it (outside attack atk51 F1). As an HTTP answer is watched (transport/socket-watch.ts): while bytes wait
   * and none leave for the stall timeout, it is dropped (`send_stalled`). Progress is what the kernel takes, read as
   * that watch reads it, so a large echo read steadily is not taken for a stall. A run's own wait keeps its watch.
   */
  private watchUnsent(): void {
    const ms = this.host.limits.sendStallTimeoutMs;
    if (ms <= 0) return;
    const left = this.leaving();
    let since = performance.now();
    const timer = setInterval(() => {
      const { ws } = this;
      const b = ws.bufferedAmount;
      // Watched while the connection closes too: a close the server began (the lifetime limit, a peer's bad frame)
      // waits for its close frame, queued behind what is unsent, and a peer that read nothing held those bytes (and a
      // refused frame's charge) for the ws library's fixed 30 s close timeout, not the stall timeout (outside attack
      // atk53 F4).
      if (ws.readyState === ws.CLOSED || b === 0 || droppedSockets.has(ws)) {
        clearInterval(timer);
        this.unsentWatch = undefined;
        return;
      }
      // A run waiting for the peer has its own watch (`watchStall`), while the connection is open.
      // Asked at every look, so that the next compares with this one.
      const moved = left();
      if ((this.roomWaiters !== null && ws.readyState === ws.OPEN) || moved) {
        since = performance.now();
        return;
      }
      if (performance.now() - since < ms) return;
      clearInterval(timer);
      this.unsentWatch = undefined;
      this.log.info({ code: 'send_stalled', buffered: ws.bufferedAmount, stall_ms: ms }, 'client read nothing of what was unsent, no run waiting for it; dropping the connection');
      droppedSockets.add(ws);
      ws.terminate();
    }, stallCheckEveryMs(ms));
    timer.unref();
    this.unsentWatch = timer;
  }

  /**
   * Whether bytes left for the peer since the last call (the first compares with when it was made), as both stall
   * watches read it. Progress is bytes leaving: what is unsent, or libuv's queue for the write under way (the kernel
   * taking part of a large one), went down, or a send completed (the kernel took all of one). The server's own writes
   * (the heartbeat's pings, pongs) only add, and complete no send: counted as progress, as `bytesWritten` counts
   * them, a peer that read nothing was never dropped (outside attack atk52 F1). The completions count because what is
   * unsent may not go down between looks for a peer that reads everything: creates back to back, each answer the same
   * size and written in the same timers phase as the look (corked until the turn's end), found as much unsent at each
   * look, and a reading peer was dropped at the stall timeout, its last event lost (atk55 F1). A look that finds the
   * turn's writes still corked is judged all the same: skipping it let a peer that read nothing, flooding small bad
   * frames whose `error` answers kept the socket corked at every look, hold its bytes many times the stall timeout
   * (atk56 F1); a reader's own completed sends already tell it apart.
   */
  private leaving(): () => boolean {
    const { socket, ws } = this;
    let buffered = ws.bufferedAmount;
    let queued = writeQueueSize(socket);
    let done = this.sendsDone;
    return () => {
      const b = ws.bufferedAmount;
      const q = writeQueueSize(socket);
      const left = b < buffered || (q >= 0 && q < queued) || this.sendsDone !== done;
      buffered = b;
      queued = q;
      done = this.sendsDone;
      return left;
    };
  }

  private hasRoom(): boolean {
    return this.ws.readyState !== this.ws.OPEN || this.ws.bufferedAmount === 0;
  }

  private wakeRoomWaiters(): void {
    clearInterval(this.stallTimer);
    this.stallTimer = undefined;
    const w = this.roomWaiters;
    if (w === null) return;
    this.roomWaiters = null;
    for (const f of w) f();
  }

  /** Each send's completion callback: wakes the room waiters once everything sent has been flushed. */
  /** Release the charge of each echo whose send has completed (sends complete in order), or all once closed. */
  private echoesSent(): void {
    const q = this.echoPending!;
    const open = this.ws.readyState === this.ws.OPEN;
    let n = this.echoHead;
    let freed = 0;
    while (n < q.length && (!open || q[n]! <= this.sendsDone)) {
      freed += q[n + 1]!;
      n += 2;
    }
    if (n === this.echoHead) return;
    // Consumed from the head (a flood of small steers leaves thousands pending): compacted now and then, not per send.
    if (n === q.length) {
      q.length = 0;
      n = 0;
    } else if (n > 4096 && n * 2 > q.length) {
      q.splice(0, n);
      n = 0;
    }
    this.echoHead = n;
    this.echoes!.keep(Math.max(0, this.echoes!.bytes - freed));
  }

  private readonly roomCheck = (): void => {
    this.sendsDone++;
    if (this.echoPending !== null && this.echoHead < this.echoPending.length) this.echoesSent();
    if (this.roomWaiters !== null && this.hasRoom()) this.wakeRoomWaiters();
  };

  /**
   * For the heartbeat, once a period: whether the peer took bytes since the last one, so a late pong is not
   * silence. A slow reader's pong waits behind everything sent before the ping, megabytes of it in the
   * kernel's socket buffers where no byte count sees it (a paced run keeps them full): a reader the pacing
   * kept was dropped as silent (`ws_idle_timeout`) once those took longer than the idle timeout to read.
   * A send that completed (the kernel took its bytes) says the peer reads: one that reads nothing stops
   * that once its buffers are full, and is dropped a whole timeout later (transport/heartbeat.ts).
   */
  private sending(): boolean {
    const progressed = this.sendsDone !== this.sendsSeen;
    this.sendsSeen = this.sendsDone;
    return progressed;
  }

  /**
   * For the heartbeat, once a period: whether bytes arrived since the last one. A message says so only once
   * it is whole, and the peer's pong waits behind it: a client sending a frame that takes longer than the
   * idle timeout to arrive (a multi-MB create on a slow uplink: 4 MB at 500 KB/s with a 3 s timeout) was
   * dropped as silent (`ws_idle_timeout`) while its bytes were still coming.
   */
  private receiving(): boolean {
    const progressed = this.readsDone !== this.readsSeen;
    this.readsSeen = this.readsDone;
    return progressed;
  }

  /** The session is open: the heartbeat, the byte share, the socket's listeners and the lifetime limit. */
  open(session: ConnectionSession, timing: boolean): void {
    const { ws, host, log } = this;
    this.session = session;
    this.timing = timing;
    const idleMs = host.limits.wsIdleTimeoutMs;
    this.heartbeat = startHeartbeat(
      ws,
      idleMs,
      () => log.info({ code: 'ws_idle_timeout', idle_ms: idleMs }, "websocket peer showed no sign of life for the idle timeout (no frame, no pong, no bytes taken: a slow reader's pong waits behind what it has not read); dropping the connection"),
      // Not reading (the byte budget is full) is the server's stall, not the peer's silence; a peer taking bytes reads (its pong waits
      // behind them), and one whose bytes arrive is sending (its pong waits behind its message). Both asked every period: each
      // tracks what changed since it was last asked.
      () => {
        const took = this.sending();
        const sent = this.receiving();
        return took || sent || this.rxRetry !== undefined;
      },
    );
    // This connection's share of the server-wide byte budget (modes/server-bytes.ts): past it a frame gets `server_busy`.
    this.held = host.connectionBytes(session);
    // A message is charged while it arrives (after the `ws` library took each chunk: its listener came first).
    this.socket.on('data', this.onData);
    ws.on('message', this.onMessage);
    // A lifetime past what a Node timer can hold (2^31-1 ms) means no limit, not an immediate close.
    const lifetimeMs = host.limits.connectionLifetimeMs;
    this.lifetimeMs = lifetimeMs;
    this.lifetime = lifetimeMs > 2 ** 31 - 1 ? undefined : setTimeout(this.endOfLife, lifetimeMs);
    // The `ws` library's errors are the peer's protocol mistakes (a frame over
    // the size limit: close 1009, bad UTF-8, a bad opcode …): info, with their code.
    ws.on('error', this.onError);
    ws.on('close', this.onClose);
    if (ws instanceof ServerWebSocket) ws.peerFault = this.onPeerFault;
    ws.on('ping', this.onPing);
    ws.on('pong', this.controlRead);
  }

  /**
   * A control frame was read: what is still arriving may have shrunk with no socket read to say so. The `ws` receiver
   * emits a message and reads on in a later turn; a pong (the answer to `probePeer`) that came in the same read as
   * the message was charged with it and stayed charged, 262 bytes, until the peer's next message or the close.
   */
  private readonly controlRead = (): void => {
    if (this.ws.readyState === this.ws.OPEN && this.rxRetry === undefined) this.held.receiving(inFlightBytes(this.ws));
  };

  /**
   * A ping is answered with a pong, but at most one pong is owed at a time: one asked while the last is still
   * unsent waits, and only the latest such ping is answered once it has gone (RFC 6455 5.5.3 allows it). A
   * reader's pongs wait behind the bytes a paced run keeps unsent, and the `ws` library's own answer, a pong per
   * ping and the connection terminated at 60 unsent (its guard against ping floods), dropped a client that pinged
   * often while it read slowly, unlogged (a 300 KB/s reader pinging every 100 ms, after 6.7 s; outside attack).
   * One pong owed bounds a flood as well.
   */
  private readonly onPing = (data: Buffer): void => {
    const { ws } = this;
    if (ws.readyState !== ws.OPEN) return;
    this.controlRead();
    if (this.pongOwed) {
      this.pingNext = data;
      return;
    }
    this.pongOwed = true;
    ws.pong(data, false, this.onPongSent);
  };

  private readonly onPongSent = (): void => {
    this.pongOwed = false;
    const next = this.pingNext;
    if (next === null) return;
    this.pingNext = null;
    this.onPing(next);
  };

  /**
   * `parseStart`: when the frame's parse began; the create or append it carries is charged with the parse
   * (`parse` / `parse_append` spans). `owed`: the frame's parse charge (`ConnectionBytes.parsing`), moved to
   * the create or append it carries, else released here.
   */
  private deliver(value: unknown, bytes: number, parseStart: number, owed = 0): void {
    try {
      // A large frame parsed after the peer left: nobody to answer, nothing to charge or start.
      if (this.ws.readyState !== this.ws.OPEN) return;
      const event = parseClientEvent(value, parseCaps(this.host.limits, this.host.allowUnknownParameters, this.session.appendable ? undefined : this.session.protocol));
      const parse = { start: parseStart, end: this.host.now() };
      const charged = event.type === 'response.create' || event.type === 'response.append' || event.type === 'response.inject';
      let refused: (() => void) | undefined;
      if (charged) {
        let epoch: number;
        try {
          epoch = this.held.frame(bytes, event.type === 'response.create', owed);
        } catch (err) {
          // A create refused server_busy is its own lane's (none for none): left unset it went in the stream of the
          // response in flight, another lane's (its stream_id and sequence), taken by its client for that run's error.
          if (event.type !== 'response.create') {
            const said = this.pausedRefusal(err, bytes);
            if (said === null) return;
            throw said;
          }
          const said = this.session.refusedOnArrival(event, err);
          if (said instanceof WireError) said.lane = event.stream_id ?? null;
          throw said;
        }
        owed = 0;
        let once = false;
        refused = () => {
          if (once) return;
          once = true;
          this.held.refund(bytes, epoch);
        };
      }
      // A steer's input comes back in its refusal (modes/session.ts): charged until that echo has left.
      const echo = event.type === 'response.steer';
      if (echo) {
        const echoes = (this.echoes ??= this.host.bytes.hold());
        // A frame parsed in slices was admitted under its parse charge: that moves over, unchecked.
        if (owed > 0) {
          this.held.parsed(owed);
          owed = 0;
          echoes.admitted(bytes);
        } else echoes.add(bytes);
      }
      const issued = this.sendsIssued;
      this.session.handle(event.type === 'response.create' ? withTimingOptIn(event, this.timing) : event, bytes, parse, refused);
      if (charged) this.held.watch();
      // An inject refused at once (naming no response in flight here) comes back as `response.inject.failed` with
      // its input, like a steer's echo: charged until that send completes. Its frame's charge lasts only while the
      // session has work, so on an idle connection the echo was left unsent and uncounted (outside attack).
      if (event.type === 'response.inject' && this.sendsIssued !== issued && this.ws.readyState === this.ws.OPEN) {
        (this.echoes ??= this.host.bytes.hold()).admitted(bytes);
        (this.echoPending ??= []).push(this.sendsIssued, bytes);
        this.echoesSent();
      }
      if (echo) {
        (this.echoPending ??= []).push(this.sendsIssued, bytes);
        this.echoesSent();
      }
    } finally {
      if (owed > 0) this.held.parsed(owed);
    }
  }

  /** `charged`: bytes of this frame charged by `onMessage` (`ConnectionBytes.parsing`), released once it is parsed or refused. */
  private onFrame(data: WebSocket.RawData, isBinary: boolean, charged = 0): Promise<void> | undefined {
    const { session } = this;
    const limits = this.host.limits;
    let owed = charged;
    const release = (): void => {
      if (owed > 0) this.held.parsed(owed);
      owed = 0;
    };
    if (isBinary) {
      release();
      session.error(new WireError('binary_frame'));
      return undefined;
    }
    const parseStart = this.host.now();
    // The ws library hands each message over in a buffer of its own: no copy needed (16 MiB copies are slow).
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (buf.length > COOPERATIVE_PARSE_CHARS) {
      // Either step may throw a WireError (bad JSON, a cap): it becomes an `error` event, never a rejection.
      // `deliver` takes the charge over (moved to the create or append, or released).
      return parseEdgeJson(buf, 'frame', limits)
        .then((value) => {
          const o = owed;
          owed = 0;
          this.deliver(value, buf.length, parseStart, o);
        })
        .catch((err: unknown) => {
          release();
          session.error(toWireError(err));
        });
    }
    try {
      const value = parseEdgeJsonNow(buf.toString('utf8'), 'frame', limits);
      const o = owed;
      owed = 0;
      this.deliver(value, buf.length, parseStart, o);
    } catch (err) {
      release();
      session.error(toWireError(err));
    }
    return undefined;
  }

  private track(p: Promise<void>): void {
    this.parsing = p;
    void p.finally(() => {
      if (this.parsing === p) this.parsing = null;
    });
  }

  /**
   * After each chunk the `ws` library took: the message still arriving (fragments and the frame being
   * received) is charged to the server-wide budget; past it the connection stops reading (TCP pushes back
   * on the peer) and tries again every 50 ms, so no frame is lost. Connections that each hold part of the
   * budget and all wait for more would wait for each other for good: one still waiting after the request
   * timeout (`--request-timeout-ms`, the time HTTP gives a whole request; 60 s when that is 0) is closed with
   * 1013 (try again later), which releases its share.
   */
  private readonly onData = (): void => {
    this.readsDone++;
    // A whole message waiting to be emitted (next turn) keeps its charge: the receiver no longer counts its bytes.
    if (this.rxRetry !== undefined || this.ws.readyState !== this.ws.OPEN || deferring(this.ws)) return;
    const arriving = inFlightBytes(this.ws);
    if (arriving > 0 && this.rxDeadline === undefined) this.armMessageDeadline();
    const declared = declaredBytes(this.ws);
    // Its first reads yield too (`yields`; they took the room a paused run's append waited for: outside attack atk96
    // I1). Looked at only near a full budget: what this connection and the paused runs hold is part of what is held.
    const bytes = this.host.bytes;
    const yielding = bytes.held + Math.max(arriving, declared) > bytes.max && this.yields(arriving);
    if (!yielding && this.held.receiving(arriving, declared)) return;
    this.log.info({ code: 'server_busy', held: this.host.bytes.held }, 'server byte budget full; reading paused');
    this.ws.pause();
    this.rxPausedAt = this.host.now();
    this.rxRetry = setInterval(this.retryReceive, 50);
  };

  /**
   * A message has as long to arrive whole as an HTTP request has (`--request-timeout-ms`; 0: no limit), from its first
   * bytes. Without it a message still arriving had no deadline at all: its fragments kept the connection alive
   * (each read is a sign of life for the heartbeat) and its bytes stayed charged to the server-wide budget, so a few
   * connections sending a large first fragment and then a byte every few seconds held 95 % of the budget for as long
   * as they stayed (outside attack atk45 F2; over HTTP the same body is cut at the request timeout).
   */
  private armMessageDeadline(): void {
    const ms = this.host.limits.requestTimeoutMs;
    if (ms > 0 && ms <= 2 ** 31 - 1) this.rxDeadline = setTimeout(this.messageOverdue, ms);
  }

  /** The message arriving is whole (`onMessage`): its deadline is over; the next one's starts if its bytes came already. */
  private messageArrived(): void {
    if (this.rxDeadline !== undefined) {
      clearTimeout(this.rxDeadline);
      this.rxDeadline = undefined;
    }
    // What came in the same read after this message (the receiver reads on once the message is emitted) starts the next.
    if (inFlightBytes(this.ws) > 0) this.armMessageDeadline();
  }

  private readonly messageOverdue = (): void => {
    this.rxDeadline = undefined;
    // Whole meanwhile (its emit waits for the next turn), or not the peer's delay: reading is paused for the server's
    // byte budget (`retryReceive` closes 1013 after its own wait, and the next read starts a new deadline).
    if (this.ws.readyState !== this.ws.OPEN || deferring(this.ws) || this.rxRetry !== undefined || inFlightBytes(this.ws) === 0) return;
    const ms = this.host.limits.requestTimeoutMs;
    this.log.info({ code: 'request_timeout', timeout_ms: ms }, 'a message did not arrive whole in time; closing 1008');
    const err = new WireError('request_timeout', `A message did not arrive whole within ${ms} ms of its first bytes (llr serve --request-timeout-ms); the connection closes (1008).`);
    this.endForMessage(err, 1008, 'message did not arrive in time');
  };

  /**
   * The message arriving cannot be taken: nothing more is read, the run in flight ends with its terminal event after
   * `err`, each create not yet started gets it, then the close `code` (ours; as a peer's protocol fault ends,
   * `onPeerFault`).
   */
  private endForMessage(err: WireError, code: number, reason: string): void {
    const { ws } = this;
    ws.pause();
    this.held.receiving(0);
    if (ws instanceof ServerWebSocket) ws.peerFault = undefined;
    this.session.announceEnd(err);
    const close = () => {
      ws.close(code, reason);
      // The close handshake reads on; what still arrives of the message is dropped (the socket is no longer open).
      ws.resume();
    };
    void this.session.finish(err.code, err).then(close, close);
  }

  /**
   * Reading is paused for the budget, and no other connection giving budget back would make room: this connection's
   * own share (a ws-mode cache, a paused run's context) with the message passes the whole budget, and nothing here
   * changes before the message does. It waited the whole request timeout for nothing, then closed 1013 (outside attack
   * atk47). Now a ws-mode cache is let go at once (the continuation then reads its chain from the store, as on a
   * cache miss, and the socket stays open); with nothing to let go the message can never be taken, and the connection
   * ends at once with an `error` event saying so (close 1013: a new connection holds nothing yet). True when handled.
   */
  private cannotFit(received: number): boolean {
    const max = this.host.bytes.max;
    if (this.parsing !== null || !this.session.waitsOnPeer()) return false;
    // What the message needs at least: its frames' declared lengths, known from their headers, not only the bytes
    // received so far (reading stops at the room left, so those always fit it, and a message larger than the room
    // beside paused runs waited the whole request timeout; outside attack atk82 F1).
    const arriving = Math.max(received, declaredBytes(this.ws));
    // Budget held by runs paused for their clients (this one's among them when it is paused) comes back only once their
    // clients' appends are taken. A message that cannot fit beside them is not waited for when one of them has an
    // append arriving that waits for room that this message, with the others in its place, holds: each would wait for
    // the other (on a connection with no run, a 1 MB create under a budget paused runs held but 305 KB of kept every
    // paused run's appends unread for the whole request timeout; outside attack atk82 F7). Otherwise it waits: a run
    // paused for a moment goes on when its client's append fits, and ended at once such a message would have fitted
    // (atk85 F1); so would one holding no room while the append waited for a third connection's upload (atk87 F3).
    const own = this.held.own();
    const others = this.othersPaused();
    if (own + arriving <= max) {
      if (own + others + arriving <= max) return false;
      this.held.stuck(this.endStuck);
      const mine = this.held.stuckGives();
      const lacking = mine === 0 ? 0 : this.host.stuckMessagesHoldPausedRun(this.session);
      if (lacking === 0) {
        this.heldOver = false;
        return false;
      }
      // Other stuck connections' cached contexts go first when they cover what the append lacks and this connection
      // keeps none: letting them go closes nobody, and the message judged waits on (it was closed 1013 where another
      // connection's idle cache would have made the room: outside attack atk96 F1). The room they give back is the
      // append's: the messages that would take it yield (`yields`, `SessionHost.appendsWant`). Another message waiting
      // for room may not have been judged yet (each is looked at on its own 50 ms tick; judged, one whose connection
      // keeps a cache lets it go): this one waits one tick more for them before it is ended.
      if (this.session.keptBytes() === 0) {
        if (this.host.endStuckMessages(this.session, lacking, true) >= lacking) return true;
        if (!this.heldOver) {
          this.heldOver = true;
          return true;
        }
      }
      this.heldOver = false;
      // Other messages judged stuck end with it when the append lacks more than it gives back.
      if (lacking > mine) this.host.endStuckMessages(this.session, lacking - mine);
      return this.endStuckMessage(arriving, true);
    }
    return this.endStuckMessage(arriving, false);
  }

  /**
   * Whether the message arriving, unable to fit beside the runs paused for their clients (as `cannotFit` judges), takes no
   * more room while a paused run's append is on its way in (waiting for room, parsed or applied:
   * its token ids are charged as it is applied): it cannot fit beside them anyway, and the room that comes back
   * (another stuck message ended for that append) is the append's. Reading on, the stuck
   * messages took the room each other's ending gave back, the append still could not be read, and they were ended one
   * after another, where one was enough (outside attack atk95 F2). It is still judged (`cannotFit`), and still has its
   * deadline.
   */
  private yields(arriving: number): boolean {
    if (this.parsing !== null || !this.session.waitsOnPeer()) return false;
    const others = this.othersPaused();
    const need = Math.max(arriving, declaredBytes(this.ws));
    const { bytes } = this.host;
    if (this.held.own() + others + need <= bytes.max) {
      // It fits beside the paused runs, but the room it would take is what a paused run's append waits for: it waits
      // until the append has it (letting a stuck connection's cache go for that append, the message of the connection
      // let go took the room before the append, which still could not be read: outside attack atk96 F1). Not a paused
      // run's own append, which is what is waited for: yielding to another paused run's append that could never fit,
      // it was never seen to wait, that one was not ended for it, and its run stalled for that one's request timeout
      // (outside attack atk100 F2).
      if (this.session.paused) return false;
      const want = this.host.appendsWant(this.session);
      return want > 0 && bytes.held + Math.max(0, need - this.held.arriving()) + want > bytes.max;
    }
    return this.host.pausedAppendComing(this.session);
  }

  /** What runs paused for their clients other than this connection's hold of the budget (`SessionHost.heldForPeers`). */
  private othersPaused(): number {
    return this.host.heldForPeers() - this.session.heldForPeer();
  }

  /** This connection's message, judged stuck, ends for a paused run's append (`SessionHost.endStuckMessages`). */
  private readonly endStuck = (): void => {
    if (this.rxRetry === undefined || this.ws.readyState !== this.ws.OPEN) return;
    this.endStuckMessage(Math.max(inFlightBytes(this.ws), declaredBytes(this.ws)), true);
  };

  /**
   * The message arriving (`arriving` bytes at least) cannot be waited for: what the session keeps is let go if it has
   * any (the message then waits on), else the message ends (1009 past the whole budget, else 1013). `forPausedRun`: it is
   * ended for a paused run's append that needs the room it holds, which its error says (it was told it could not fit
   * beside the 0 bytes its connection held; outside attack atk96 F2). True.
   */
  private endStuckMessage(arriving: number, forPausedRun: boolean): true {
    const max = this.host.bytes.max;
    const own = this.held.own();
    const others = this.othersPaused();
    if (this.held.letGoCache()) {
      this.host.bytes.letGoCounted();
      this.log.info({ code: 'server_busy', arriving }, 'cached context let go: with it the message arriving could not fit the byte budget');
      return true;
    }
    clearInterval(this.rxRetry);
    this.rxRetry = undefined;
    if (arriving > max) {
      // Larger than the whole budget: no connection could take it. 1013 (try again later) had clients reconnect and send
      // it again (Codex 35 times, then over HTTP; outside attack atk90 F2): 1009, message too big, as for the frame limit.
      this.log.info({ code: 'payload_too_large', arriving, max }, 'the message arriving is larger than the whole byte budget; closing 1009');
      const err = new WireError(
        'payload_too_large',
        `A message of at least ${arriving} bytes cannot fit in the server's whole byte budget of ${max} (llr serve --max-server-bytes), however long it waits; the connection closes (1009). Send a smaller one.`,
      );
      this.endForMessage(err, 1009, 'message larger than the server byte budget');
      return true;
    }
    this.log.info({ code: 'server_busy', arriving, own, paused_runs: others, max, for_paused_run: forPausedRun }, 'the message arriving cannot fit the byte budget beside what this connection holds; closing 1013');
    const err = new WireError(
      'server_busy',
      forPausedRun
        ? `A message of at least ${arriving} bytes cannot fit in the server's byte budget of ${max} (llr serve --max-server-bytes) beside the runs paused for their clients, and a paused run's tool output needs the room it holds; the connection closes (1013). Try again later.`
        : `A message of at least ${arriving} bytes cannot fit in the server's byte budget of ${max} (llr serve --max-server-bytes) beside the ${own} bytes this connection holds${others > 0 ? ` and the ${others} bytes other runs paused for their clients hold` : ''}; the connection closes (1013).`,
    );
    this.endForMessage(err, 1013, 'message too large for the server byte budget');
    return true;
  }

  private readonly retryReceive = (): void => {
    const open = this.ws.readyState === this.ws.OPEN;
    // A whole message is waiting to be emitted: its charge moves to its parse then (`onMessage`); look again after.
    if (open && deferring(this.ws)) return;
    const waited = this.host.now() - this.rxPausedAt;
    const limit = this.host.limits.requestTimeoutMs > 0 ? this.host.limits.requestTimeoutMs : 60_000;
    const arriving = inFlightBytes(this.ws);
    if (open && (this.yields(arriving) || !this.held.receiving(arriving, declaredBytes(this.ws)))) {
      if (this.cannotFit(arriving)) return;
      if (waited < limit) {
        this.probePeer();
        return;
      }
      // Its connection's cached contexts go before it does (the close would let them go anyway): with them gone it may
      // fit at once (a create beside a paused run and its own idle cache waited the timeout, then was closed with the
      // cache; outside attack atk93 F4). It waits one more look.
      if (this.held.letGoCache()) {
        this.host.bytes.letGoCounted();
        this.log.info({ code: 'server_busy', arriving, waited_ms: Math.round(waited) }, 'cached context let go: the message arriving waited its whole time for room');
        return;
      }
      this.log.info({ code: 'server_busy', waited_ms: Math.round(waited) }, 'message could not be received within the byte budget; closing 1013');
      // Said, and the run in flight ended with its terminal event, as when it cannot fit at all (the socket was closed
      // bare: a paused run's client never learnt how its run ended; outside attack atk82 F1). Its share is released
      // at once; what still arrives until the close handshake ends is bounded by the frame limit.
      const err = new WireError(
        'server_busy',
        `A message of at least ${Math.max(arriving, declaredBytes(this.ws))} bytes waited ${Math.round(waited)} ms (llr serve --request-timeout-ms) for room in the server's byte budget of ${this.host.bytes.max} (llr serve --max-server-bytes) and got none; the connection closes (1013). Try again later.`,
      );
      clearInterval(this.rxRetry);
      this.rxRetry = undefined;
      this.endForMessage(err, 1013, 'server busy: try again later');
      return;
    }
    clearInterval(this.rxRetry);
    this.rxRetry = undefined;
    this.heldOver = false;
    this.ws.resume();
  };

  /**
   * While reading is paused the peer's leaving goes unseen (its FIN waits unread), and its message kept its share of
   * the budget until the request timeout (20 MB held ~40 s after the client had gone, every other request refused
   * `server_busy` meanwhile; outside attack atk47). A ping a second while paused: a peer that has closed answers the
   * write with a reset, the next write fails, and the connection ends, releasing its share.
   */
  private probePeer(): void {
    const now = this.host.now();
    if (now - this.rxProbedAt < RX_PROBE_MS) return;
    this.rxProbedAt = now;
    this.ws.ping();
  }

  private readonly onMessage = (data: WebSocket.RawData, isBinary: boolean): void => {
    this.messageArrived();
    const limits = this.host.limits;
    const bytes = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
    if (this.parsing === null && bytes <= COOPERATIVE_PARSE_CHARS) {
      // This message left the receiver: what is still arriving (charged) is the next one's.
      this.held.receiving(inFlightBytes(this.ws));
      const p = this.onFrame(data, isBinary);
      if (p) this.track(p);
      return;
    }
    if (this.parsing !== null && this.waitingBytes + bytes > limits.maxQueuedBytes) {
      this.held.receiving(inFlightBytes(this.ws));
      this.session.error(new WireError('queue_full', `Frames waiting behind a large frame being parsed would exceed ${limits.maxQueuedBytes} bytes.`));
      return;
    }
    // A frame parsed in slices, or waiting behind one, is held for turns: charged to the server-wide budget
    // (its charge while it arrived moves over; one that came in one read is checked: past it `server_busy`,
    // the frame is not handled), so many connections parsing at once stay bounded.
    try {
      this.held.parsing(bytes);
    } catch (err) {
      this.held.receiving(inFlightBytes(this.ws));
      this.session.error(toWireError(err));
      return;
    }
    this.held.receiving(inFlightBytes(this.ws));
    if (this.parsing === null) {
      const p = this.onFrame(data, isBinary, bytes);
      if (p) this.track(p);
      return;
    }
    this.waitingBytes += bytes;
    this.track(
      this.parsing.then(() => {
        this.waitingBytes -= bytes;
        return this.onFrame(data, isBinary, bytes);
      }),
    );
  };

  private readonly endOfLife = (): void => {
    // The client first gets the documented error (in the stream of the run in flight; with none, once on the
    // connection if no create waits for its answer), then the run in flight ends `incomplete` with its terminal
    // event, each create that never started gets the error (one answer each), then the close.
    const limit = new WireError('websocket_connection_limit_reached', limitMessage(this.lifetimeMs));
    this.session.announceEnd(limit);
    void this.session.finish('connection_limit_reached', limit).then(() => this.ws.close(1000, 'connection limit reached'));
  };

  /**
   * An append (or inject) frame of `bytes` for the run paused here, refused `server_busy` (`err`) at its charge: what
   * its client is told when runs paused for their clients, this one among them, hold the budget
   * (`SessionHost.heldForPeers`, `pausedAppendRefusal`): that no append can fit, and its run ends `incomplete`
   * (`llr_incomplete_reason: server_busy`, the error in its stream, the connection going on; null returned), or that
   * this one cannot and a smaller one may (the run stays paused). Otherwise `err` as it is.
   */
  private pausedRefusal(err: unknown, bytes: number): unknown {
    // Only once nothing else on the connection could give budget back (no other append being applied, nothing
    // queued): frames of a burst are charged as they arrive and refunded as each is refused, room that comes back.
    if (!(err instanceof WireError) || err.code !== 'server_busy' || !this.session.paused || !this.session.waitsOnPeer()) return err;
    const max = this.host.bytes.max;
    const stuck = this.host.heldForPeers();
    const said = pausedAppendRefusal(max, stuck, bytes);
    if (said === null) return err;
    const own = this.session.heldForPeer();
    this.log.info({ code: 'server_busy', bytes, own, stuck, max, ends_run: said.endsRun }, 'append cannot fit the byte budget that paused runs hold');
    if (said.endsRun && this.session.endPaused(said, 'server_busy')) return null;
    return said;
  }

  /**
   * The peer broke the protocol and the `ws` library is closing (transport/server-websocket.ts; no frame after the
   * fault is read): said in the stream of the run in flight, which ends `incomplete` with its terminal event, or once
   * on the connection; each create not yet started gets the same error; then the close, with the library's code.
   */
  private readonly onPeerFault = (code: number, close: () => void): void => {
    const err = peerFaultError(code, this.host.limits.maxFrameBytes, this.host.limits.maxMessageFragments);
    this.session.announceEnd(err);
    void this.session.finish(err.code, err).then(close, close);
  };

  private readonly onError = (err: Error & { code?: string }): void => {
    this.log.info({ code: err.code ?? 'websocket_error', message: err.message }, 'websocket protocol error');
  };

  private readonly onClose = (code: number): void => {
    this.wakeRoomWaiters();
    clearInterval(this.unsentWatch);
    this.unsentWatch = undefined;
    clearInterval(this.rxRetry);
    this.rxRetry = undefined;
    clearTimeout(this.rxDeadline);
    this.rxDeadline = undefined;
    this.socket.off('data', this.onData);
    clearTimeout(this.lifetime);
    clearInterval(this.heartbeat);
    this.held.close();
    this.echoes?.releaseAll();
    this.echoPending = null;
    this.echoHead = 0;
    this.share.close();
    this.log.info({ code }, 'websocket closed');
    void this.session.close();
  };
}

/**
 * Bytes the `ws` library holds of the message still arriving: its earlier fragments and what arrived of
 * the frame being received (not its declared length: a header alone costs nothing). Read from the
 * receiver's private state defensively, as transport/ws-frames.ts reads the sender's: any field missing or
 * of another shape (another version of `ws`) counts as nothing.
 */
/**
 * Whether the `ws` receiver holds a whole message it emits at the next turn (its `DEFER_EVENT` state, with
 * `allowSynchronousEvents: false`, transport/ws.ts): its bytes are in no count `inFlightBytes` reads, so the charge
 * it had while it arrived must stay until `onMessage` moves it to the message's parse. Lowering it then let another
 * connection take the budget, and the message was refused `server_busy` at its parse (server-bytes test, under load).
 */
function deferring(ws: WebSocket): boolean {
  const r: unknown = Reflect.get(ws, '_receiver');
  return typeof r === 'object' && r !== null && Reflect.get(r, '_state') === 6;
}

export function inFlightBytes(ws: WebSocket): number {
  const r: unknown = Reflect.get(ws, '_receiver');
  if (typeof r !== 'object' || r === null) return 0;
  const total: unknown = Reflect.get(r, '_totalPayloadLength');
  const buffered: unknown = Reflect.get(r, '_bufferedBytes');
  if (typeof total !== 'number' || typeof buffered !== 'number') return 0;
  // A data frame's declared length joins the total once its header is read (states GET_MASK 3 and GET_DATA 4);
  // its bytes received so far are the buffered ones.
  const state: unknown = Reflect.get(r, '_state');
  const opcode: unknown = Reflect.get(r, '_opcode');
  const len: unknown = Reflect.get(r, '_payloadLength');
  const current = (state === 3 || state === 4) && typeof opcode === 'number' && opcode < 8 && typeof len === 'number' ? len : 0;
  // Each socket read the frame being received is still held in, and each fragment of the message, is a buffer of its
  // own: counted at CHUNK_HELD_BYTES whatever its length, as a peer that drips a frame a byte per read makes them cost.
  const chunks = lengthOf(Reflect.get(r, '_buffers')) + lengthOf(Reflect.get(r, '_fragments'));
  return Math.max(0, total - current) + buffered + chunks * CHUNK_HELD_BYTES;
}

/**
 * What the message still arriving on `ws` declares so far: its earlier fragments and the frame being received at its
 * declared length (known from its header), with the buffers held for it (`inFlightBytes` counts that frame's bytes
 * received so far instead). 0 between messages. Fragments yet to come are not known.
 */
export function declaredBytes(ws: WebSocket): number {
  const r: unknown = Reflect.get(ws, '_receiver');
  if (typeof r !== 'object' || r === null) return 0;
  const total: unknown = Reflect.get(r, '_totalPayloadLength');
  if (typeof total !== 'number') return 0;
  const chunks = lengthOf(Reflect.get(r, '_buffers')) + lengthOf(Reflect.get(r, '_fragments'));
  return total + chunks * CHUNK_HELD_BYTES;
}

/**
 * What one buffer the `ws` receiver holds costs besides its bytes (a `Buffer` object, its backing store's header, its
 * place in the array). Measured: four connections each sending a 1 MiB frame's payload one byte per TCP write grew the
 * server's RSS ~280 MB for 1.2 MB of payload, ~230 bytes a read, which `bytes_held` counted as 1.2 MB (outside attack).
 */
export const CHUNK_HELD_BYTES = 256;

/** How often a connection whose reading is paused for the byte budget pings its peer to learn it has gone (`probePeer`). */
const RX_PROBE_MS = 1000;

function lengthOf(a: unknown): number {
  return Array.isArray(a) ? a.length : 0;
}

/** What a client is told before the close the `ws` library makes for its mistake (`code`, RFC 6455 §7.4.1). */
function peerFaultError(code: number, maxFrameBytes: number, maxFragments: number): WireError {
  if (code === 1008) {
    return new WireError(
      'invalid_websocket_frame',
      `A WebSocket message came in more pieces than this server accepts (more than ${maxFragments} frames, llr serve --max-message-fragments, or one frame in more than 262144 reads); the connection closes (1008).`,
    );
  }
  if (code === 1009) return new WireError('payload_too_large', `A WebSocket message is larger than this server accepts (${maxFrameBytes} bytes, llr serve --max-frame-bytes); the connection closes (1009).`);
  // The library says the same of a close frame's reason: a peer that sent no text message was told it had (outside
  // attack atk109 F2).
  if (code === 1007) return new WireError('invalid_websocket_frame', 'A WebSocket text message or close reason is not valid UTF-8; the connection closes (1007).');
  return new WireError('invalid_websocket_frame', 'A WebSocket frame breaks the protocol (RFC 6455); the connection closes (1002).');
}

/** The API's message for its 60 minutes; a lifetime that is not a whole number of minutes (`--lifetime-ms 1500`) is said in ms, not rounded to "0 minutes". */
function limitMessage(ms: number): string {
  const minutes = ms / 60_000;
  const span = Number.isInteger(minutes) && minutes > 0 ? `${minutes} minutes` : `${ms} ms`;
  return `Responses websocket connection limit reached (${span}). Create a new websocket connection to continue.`;
}
