/**
 * The WebSocket transport on `GET /v1/responses`: it authenticates the
 * upgrade, picks the protocol (long-lived or ws mode) from the `OpenAI-Beta`
 * header or the `?protocol=` query (browsers cannot set headers), and then
 * only moves bytes: text frames are parsed at the edge into client events
 * for the connection's session; events go out as one JSON text frame each
 * (each accepted connection is a `WsConnection`, transport/ws-connection.ts).
 *
 * Limits: frames over `maxFrameBytes` close the socket with 1009 (the `ws`
 * library's `maxPayload`); frames nesting JSON deeper than `maxJsonDepth` get
 * an error event; binary frames get an error event; the connection lifetime
 * limit sends the documented error, ends the run in flight (its terminal
 * event still goes out) and closes with 1000; more than `maxSendBufferBytes`
 * unsent to a client that does not read drops it; a peer that shows no
 * sign of life for `wsIdleTimeoutMs` is dropped (transport/heartbeat.ts); a
 * create or append frame past the server-wide byte budget (the share the
 * session host gives the connection) gets an `error` event `server_busy`
 * and is not handled. The socket stays open after any error event.
 * Frames over the JSON shape limits or parse caps (transport/json-in.ts)
 * get an error event; a frame over 1 MiB is parsed in slices, and frames
 * arriving meanwhile wait behind it in order (up to `maxQueuedBytes`, past
 * it `queue_full`). A large instructions or tools echo goes out as shared
 * bytes in fragments of one message (protocol/event-json.ts). A batch of
 * deltas goes out as one write of their frames, one message each
 * (transport/ws-frames.ts).
 *
 * The upgrade is refused with an HTTP answer and a JSON error body (wrong
 * path, Host/Origin guard, connection cap 503, bad protocol, 401, 426); the
 * raw socket has an `error` listener from the first moment, so a client that
 * resets before reading the answer cannot crash the process. Refusals log at
 * `info` with their code.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { WireError } from '../protocol/errors.js';
import { timingHeader } from './http-query.js';
import { newId } from '../protocol/objects.js';
import { LONG_LIVED_BETA, type SocketProtocol } from '../protocol/designs.js';
import type { SessionHost, SessionSet } from '../modes/host.js';
import type { SessionInfo } from '../modes/transport.js';
import { apiKeyRefusal, loggedPath, type Authenticator } from './auth.js';
import { batchWrites, type Batcher } from './batch.js';
import { pathSaid, requestUrl, type Guard } from './guard.js';
import type { OverCapacity } from './http.js';
import { droppedSockets, WsConnection } from './ws-connection.js';
import { OPENAI_VERSION, processingMs } from './meta-headers.js';
import { ServerWebSocket } from './server-websocket.js';
import { announcesBody, LINGER_MS } from './body.js';

export interface WsTransportOptions {
  /** The session layer: each accepted connection is a session of the chosen design. */
  host: SessionHost;
  auth: Authenticator;
  /** Answer every upgrade with 426 (clients such as Codex then fall back to HTTP). */
  refuseUpgrades: () => boolean;
  /** Host/Origin checks (default: none). */
  guard?: Guard;
  /** Whether the socket was accepted past the connection cap (default: never). */
  overCapacity?: OverCapacity;
}

/** Which protocol an upgrade asks for, or an error message for a bad `?protocol=`. */
export function chooseProtocol(req: IncomingMessage, url: URL): SocketProtocol | { error: string } {
  if (url.searchParams.getAll('protocol').length > 1) return { error: "'protocol' is given more than once: give it once." };
  const q = url.searchParams.get('protocol');
  if (q === 'long-lived' || q === 'ws') return q;
  if (q !== null) return { error: `Unknown protocol '${q.slice(0, 100)}': use 'long-lived' or 'ws'.` };
  const beta = req.headers['openai-beta'];
  const values = (Array.isArray(beta) ? beta : [beta ?? '']).flatMap((v) => v.split(',')).map((v) => v.trim());
  return values.includes(LONG_LIVED_BETA) ? 'long-lived' : 'ws';
}

export class WsTransport {
  /** The `ws` library's server (read by tests that watch its connections' messages). */
  readonly wss: WebSocketServer;
  /** The open connections' sessions. */
  readonly sessions: SessionSet;

  constructor(private readonly opts: WsTransportOptions) {
    this.sessions = opts.host.sessions();
    // Pings are answered by the connection, at most one pong owed at a time (`WsConnection.onPing`).
    // No subprotocol is spoken, so none offered is selected (`ws` selected the first offered, whatever it was).
    this.wss = new WebSocketServer({
      noServer: true,
      // Its close for a peer's mistake waits for the connection to end its runs (transport/server-websocket.ts).
      WebSocket: ServerWebSocket,
      maxPayload: wsMaxPayload(opts.host.limits.maxFrameBytes),
      // A message's fragments (each a buffer the library holds until the message ends) and the reads of one frame
      // (`maxBufferedChunks`, the library's 262,144): past either the library closes with 1008, which the connection
      // announces as any peer's mistake (transport/server-websocket.ts). The library counts `n | 0` and reads 0 as none.
      maxFragments: wsMaxFragments(opts.host.limits.maxMessageFragments),
      autoPong: false,
      handleProtocols: () => false,
      // One message of a connection per event-loop turn: the library handled every frame of a socket chunk (and up to
      // 32 chunks) in one turn, so a peer flooding small frames the server refuses (an `error` event each) held the
      // loop for all it sent (ten peers with 2 MB of 7-byte frames: `/health` 3-10 s; outside attack). Deferred, the
      // rest of the chunk waits for the next turn and the socket is read as messages are handled (backpressure): the
      // same peers leave `/health` answered in ~20 ms. A single frame is handled in the turn it arrives (the check
      // phase right after the read), so a tool step waits for no more than that.
      allowSynchronousEvents: false,
      // How long a closing socket waits for its peer's close frame before it is destroyed (the library's default,
      // 30 s): at shutdown no shorter than the wait for readers behind (`leaving`), which would otherwise be cut there.
      ...{ closeTimeout: wsCloseTimeout(opts.host.limits.sendStallTimeoutMs, opts.host.limits.wsCloseTimeoutMs) },
    });
    // The meta headers every HTTP answer has, on the 101 too (only a refused upgrade had them: outside conformance
    // tester atk115 F1); its request id is named by the connection's log lines.
    this.wss.on('headers', (headers: string[], req: IncomingMessage) => {
      const requestId = newId('req', 16);
      this.upgradeIds.set(req, requestId);
      headers.push(`x-request-id: ${requestId}`, `openai-version: ${OPENAI_VERSION}`, `openai-processing-ms: ${processingMs(this.upgradeStarts.get(req) ?? performance.now())}`);
    });
    // A handshake the `ws` library refuses (bad method, key, version …) is
    // answered here like every other refusal: a JSON body, logged at info.
    this.wss.on('wsClientError', (err: Error, socket: Duplex, req: IncomingMessage) => {
      const status = /method/i.test(err.message) ? 405 : 400;
      const headers: Record<string, string> = /version/i.test(err.message) ? { 'Sec-WebSocket-Version': '13, 8' } : {};
      this.refuseLogged(req, socket, status, new WireError('invalid_websocket_handshake', err.message).body(), headers);
    });
  }

  private refuseLogged(req: IncomingMessage, socket: Duplex, status: number, error: RefusalBody, headers: Record<string, string> = {}): void {
    const remote = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
    // The meta headers every HTTP answer has (transport/meta-headers.ts), its request id the one its log line names: a
    // refused upgrade had none of them (outside attack atk65 F5).
    const requestId = newId('req', 16);
    this.opts.host.log.info(
      { request_id: requestId, status, code: error.code, param: error.param ?? null, path: loggedPath(req.url), remote },
      'websocket upgrade refused',
    );
    const since = this.upgradeStarts.get(req) ?? performance.now();
    refuse(socket, status, error, {
      ...headers,
      'x-request-id': requestId,
      'X-Content-Type-Options': 'nosniff',
      'openai-version': OPENAI_VERSION,
      'openai-processing-ms': processingMs(since),
    });
  }

  /** When each upgrade request was taken up (`handleUpgrade`), for its answer's `openai-processing-ms`. */
  private readonly upgradeStarts = new WeakMap<IncomingMessage, number>();
  /** The `x-request-id` each accepted upgrade's 101 carries, for the connection's log lines. */
  private readonly upgradeIds = new WeakMap<IncomingMessage, string>();

  /**
   * The raw socket's `error` listener, one for the transport: it stays on the socket for the
   * connection's life, and a closure made inside `handleUpgrade` would share that function's
   * context and so keep the upgrade request and its URL for as long as the socket is open.
   */
  private readonly onUpgradeSocketError = (err: Error): void => this.opts.host.log.debug({ err }, 'upgrade socket error');

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // Node removes its own error listener from an upgraded socket: without
    // this one a peer that resets before reading a refusal (ECONNRESET,
    // EPIPE) would be an unhandled 'error' event that ends the process.
    socket.on('error', this.onUpgradeSocketError);
    this.upgradeStarts.set(req, performance.now());
    const no = (status: number, error: RefusalBody) => this.refuseLogged(req, socket, status, error);
    // As every other HTTP/1.1 request (RFC 9112 §3.2; RFC 6455 §4.1 asks for it too): one without `Host` was upgraded,
    // past the Host guard, which reads only a Host that is there (outside fuzzer atk61 F1).
    if (req.headers.host === undefined) return no(400, { code: 'invalid_http_request', message: 'The HTTP/1.1 request has no Host header.' });
    // A handshake has no body: one announced was read as the first WebSocket frames (`{` has RSV bits set: 1002), the
    // request's own framing calling those bytes its content (outside fuzzer atk61 F4).
    if (announcesBody(req)) {
      return no(400, { code: 'invalid_websocket_handshake', message: 'A WebSocket upgrade request has no body: Content-Length or Transfer-Encoding announced one.' });
    }
    const url = requestUrl(req.url);
    // `/v1/responses/` is the same endpoint, as it is over HTTP.
    const path = url.pathname.replace(/\/+$/, '');
    if (path !== '/v1/responses') return no(404, { code: 'not_found', message: `No WebSocket endpoint at ${pathSaid(req.url, url)}.` });
    const guarded = this.opts.guard?.(req);
    if (guarded) return no(guarded.status, guarded.body());
    if (this.opts.overCapacity?.(socket as Socket)) {
      const e = new WireError('too_many_connections');
      return no(e.status, e.body());
    }
    if (this.opts.refuseUpgrades()) {
      const e = new WireError('upgrade_required');
      return no(e.status, e.body());
    }
    const protocol = chooseProtocol(req, url);
    if (typeof protocol === 'object') return no(400, { code: 'invalid_value', message: protocol.error, param: 'protocol' });
    const authStart = this.opts.host.now();
    const owner = this.opts.auth.check(req, url);
    const authEnd = this.opts.host.now();
    if (owner === false) {
      const e = apiKeyRefusal(req, url);
      return no(e.status, e.body());
    }
    // RFC 9110 §7.8: with `Expect: 100-continue` beside the Upgrade, a 100 goes out before the 101 (the 101 came alone).
    if (/(^|,)\s*100-continue\s*($|,)/i.test(String(req.headers.expect ?? ''))) socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      // Opt in to `llr:timing` for every response of the connection (header, or query for browsers).
      const timing = timingHeader(req) || url.searchParams.get('llr_timing') === '1';
      this.accept(ws, protocol, { connection: newId('conn', 16), owner, authSpan: { start: authStart, end: authEnd } }, timing, batchWrites(socket as Socket), socket, this.upgradeIds.get(req));
    });
  }

  private accept(ws: WebSocket, protocol: SocketProtocol, info: SessionInfo, timing: boolean, batch: Batcher, socket: Duplex, requestId: string | undefined): void {
    const { host } = this.opts;
    const log = host.log.child({ conn: info.connection, protocol });
    const conn = new WsConnection(ws, host, log, batch, socket);
    if (this.sessions.closing) {
      // Shutdown began while the handshake completed: nothing starts on this connection.
      ws.close(1001, 'server shutting down');
      return;
    }
    // A stored chain a create loads (a ws-mode cache miss) is charged to the connection's share while its work lasts.
    const session = this.sessions.openSession(protocol, conn, { ...info, charge: (n) => conn.chargeLoaded(n), kept: () => conn.keptChanged(), keptShrank: () => conn.keptShrank() }, log);
    log.info({ request_id: requestId }, 'websocket connected');
    conn.open(session, timing);
  }

  /** Resolves once no connection is open and every closed one is fully wound down. */
  idle(): Promise<void> {
    return this.sessions.idle();
  }

  /**
   * Shutdown: every session's run in flight ends `incomplete`, then sockets close (1001), once what they were sent
   * has left (`leaving`).
   */
  async shutdown(): Promise<void> {
    await this.sessions.shutdown();
    const closing = [...this.wss.clients];
    for (const ws of closing) ws.close(1001, 'server shutting down');
    this.wss.close();
    await this.leaving(closing);
  }

  /**
   * Each socket's close frame waits behind what it was sent and its reader has not yet taken (a run's terminal event
   * behind megabytes of an echoed request): shutdown waits for each to close (its reader has read up to the close
   * frame and answered it, or it is gone), for at most `--send-stall-timeout-ms` in all (none with 0, as before);
   * those still open then are dropped (a reader that took nothing since shutdown began: `send_stalled`; one still
   * taking bytes or that never answers the close: `close_timeout`). Not waited for, the process exited with the bytes
   * in its buffers: a long-lived reader a few megabytes behind (10 MB of instructions echoed) lost its terminal event
   * and got 1006 instead of 1001 at SIGTERM (outside attack), though shutdown promises every run in flight its
   * terminal event. The `ws` library's own close timeout (`closeTimeout`, set from the same flag) is no shorter.
   */
  private async leaving(sockets: WebSocket[]): Promise<void> {
    const ms = this.opts.host.limits.sendStallTimeoutMs;
    const open = sockets.filter((ws) => ws.readyState !== ws.CLOSED);
    if (!(ms > 0) || open.length === 0) return;
    const log = this.opts.host.log;
    const before = open.map((ws) => ws.bufferedAmount);
    log.info({ connections: open.length, wait_ms: ms }, 'shutdown waits for websocket connections to take what they were sent and close');
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(ms, 2 ** 31 - 1))));
    const closed = open.map((ws) => new Promise<void>((resolve) => (ws.readyState === ws.CLOSED ? resolve() : ws.once('close', () => resolve()))));
    // Once all a socket was sent has left this process (the close frame included), its peer gets at most `LINGER_MS`
    // to answer the close: the kernel still delivers what it holds after the socket is dropped, and a peer reading
    // answers at once. A peer that never answers (frozen by Ctrl-Z, asleep, gone without a FIN) while idle held the
    // exit for the whole flag, 30 s by default, past a supervisor's grace period (docker stop's 10 s), where SIGKILL
    // ended it instead (outside attack).
    const leftAt: (number | undefined)[] = open.map(() => undefined);
    const lingered = setInterval(() => {
      const now = performance.now();
      open.forEach((ws, i) => {
        if (ws.readyState === ws.CLOSED || droppedSockets.has(ws)) return;
        if (ws.bufferedAmount > 0) return void (leftAt[i] = undefined);
        const since = (leftAt[i] ??= now);
        if (now - since < LINGER_MS) return;
        log.info({ code: 'close_timeout', buffered: 0, linger_ms: LINGER_MS }, 'websocket took what it was sent but did not answer the close; dropping the connection');
        droppedSockets.add(ws);
        ws.terminate();
      });
    }, Math.min(100, LINGER_MS / 4));
    await Promise.race([Promise.all(closed), deadline]);
    clearTimeout(timer);
    clearInterval(lingered);
    open.forEach((ws, i) => {
      if (ws.readyState === ws.CLOSED || droppedSockets.has(ws)) return;
      const buffered = ws.bufferedAmount;
      const code = buffered > 0 && buffered >= before[i]! ? 'send_stalled' : 'close_timeout';
      log.info({ code, buffered, wait_ms: ms }, 'websocket not closed when shutdown stopped waiting; dropping the connection');
      droppedSockets.add(ws);
      ws.terminate();
    });
  }
}

interface RefusalBody {
  code: string;
  message: string;
  param?: string | null;
  /** A WireError's own type; else one by the status. */
  type?: string;
}

function refuse(socket: Duplex, status: number, error: RefusalBody, headers: Record<string, string> = {}): void {
  const type = error.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
  const body = JSON.stringify({ error: { message: error.message, type, param: error.param ?? null, code: error.code } });
  const reason =
    { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 426: 'Upgrade Required', 503: 'Service Unavailable' }[
      status
    ] ?? 'Error';
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  // Closed once the answer is flushed, even if the peer never closes its side.
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\n${extra}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * `maxFrameBytes` as the `ws` library's `maxPayload`, which it takes as a
 * 32-bit integer (`maxPayload | 0`) and reads 0 or less as no limit: 2^32 +
 * 100 became 100 (WebSocket frames over 100 bytes closed 1009 while HTTP
 * took 4 GB), 3e9 and Infinity no limit, and 0 no limit where HTTP refuses
 * every body. Past 2^31-1 (2 GiB, more than a string can hold) that is the
 * bound; below 1, 1 byte, as close as `ws` gets to refusing every message.
 */
export function wsMaxPayload(maxFrameBytes: number): number {
  if (!(maxFrameBytes >= 1)) return 1;
  return Math.min(Math.floor(maxFrameBytes), 2 ** 31 - 1);
}

/**
 * The `ws` library's `closeTimeout` (not in its type definitions): `--ws-close-timeout-ms` (30 s, the library's own
 * default), or `--send-stall-timeout-ms` when that is longer (shutdown's wait for readers behind,
 * `WsTransport.leaving`), at most what a timer holds.
 */
export function wsCloseTimeout(sendStallTimeoutMs: number, closeTimeoutMs = 30_000): number {
  return Math.min(Math.max(closeTimeoutMs, sendStallTimeoutMs > 0 ? sendStallTimeoutMs : 0), 2 ** 31 - 1);
}

/** `maxMessageFragments` as the `ws` library's `maxFragments` (`n | 0`, 0 is none): Infinity and values past 2^31 - 1 are none. */
export function wsMaxFragments(n: number): number {
  return Number.isFinite(n) && n >= 1 && n <= 2 ** 31 - 1 ? Math.floor(n) : 0;
}
