/**
 * The HTTP transport: `POST /v1/responses` (SSE when `stream:true`, else the
 * Response as JSON), `GET`/`DELETE /v1/responses/{id}`, `GET /health`, and
 * the server's own records at `GET /llr/runs[/{id}]`, and its CPU time and
 * memory at `GET /llr/stats` (for benchmarks), and extra routes mounted under
 * a prefix (`HttpRoutes`: the teaching demo at `/demo`).
 *
 * It only moves bytes: bodies are parsed at the edge, and each create is a
 * one-shot session (modes/host.ts) of the design it names — `http`, or
 * `long-lived-http` with `?protocol=long-lived` — whose `Transport` here
 * writes each event as one SSE frame in a single write (`event:` + one-line
 * `data:`), then `data: [DONE]`, or the final Response as JSON (the
 * telemetry event `llr:timing` only to clients that opt in, see
 * `timingHeader`). Errors before a response starts are HTTP statuses.
 * Errors are an HTTP status with `{"error":{message,type,param,code}}`; in an
 * SSE stream they use the flat `error` event shape openai-node expects.
 * A `background: true` create runs in a session of its own
 * (modes/background.ts) that keeps its events as SSE frames: this request,
 * and `GET /v1/responses/{id}?stream=true&starting_after=N`, only follow it.
 *
 * At the edge (docs/reliability.md): the Host/Origin guard, the connection
 * cap (503), `Content-Type` on POST (415; a missing header is accepted),
 * the body size and JSON depth limits, the key on `/llr/*` when keys are
 * configured, and SSE back-pressure (a reader that leaves more than
 * `maxSendBufferBytes` unsent is dropped; its run ends as a disconnect),
 * the server-wide byte budget (a body is charged to a `Hold` from the
 * session host while its request lives; past it 503 `server_busy`), and
 * `/health` still answered past the connection cap. An early refusal
 * drains the unread body first (transport/body.ts), so an uploading client
 * gets the answer, not a reset. JSON shape limits and parse caps
 * (transport/json-in.ts: bodies over 1 MiB parsed in slices); large
 * answers written in slices (transport/json-out.ts) and a large
 * instructions or tools echo sent as shared bytes (protocol/event-json.ts),
 * so no request holds the event loop. Every response carries `x-request-id`;
 * every refusal is logged at `info` with it, its code and its param.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WireError, methodNotAllowed, toWireError } from '../protocol/errors.js';
import type { ServerEvent } from '../protocol/events.js';
import { newId } from '../protocol/objects.js';
import type { Response } from '../protocol/objects.js';
import type { CreateParams } from '../protocol/events.js';
import type { BackgroundResponse, Follower } from '../modes/background.js';
import { parseAppendBody, parseCompactBody, parseCreateBody, withTimingOptIn } from '../protocol/parse.js';
import { eventPieces, piecesLength, type EventPieces } from '../protocol/event-json.js';
import type { SessionHost, SessionSet } from '../modes/host.js';
import type { Hold } from '../modes/server-bytes.js';
import type { SendShare } from '../modes/send-bytes.js';
import type { ParseSpan, SessionInfo, Transport } from '../modes/transport.js';
import type { Authenticator } from './auth.js';
import { awaitContinue, closeAfterAnswer, drainBody, readBody } from './body.js';
import { batchWrites, type Batcher } from './batch.js';
import { parseCaps, parseEdgeJson } from './json-in.js';
import { drainedOrClosed, sendJsonCooperative } from './json-out.js';
import type { Guard } from './guard.js';
import { tokenizerState } from '../model/tokenizer.js';
import { checkInclude, parseInputItemsQuery } from '../store/input-items.js';
import { limitParam, orderParam, singleParam } from '../protocol/list-query.js';

/**
 * The HTTP server's `clientError` listener: a request Node's parser refuses (a bad chunk size, both
 * `Content-Length` and `Transfer-Encoding`, headers past the size limit, a bad version) or one that did not
 * arrive within the headers or request timeout. Node's own answer is a bare status line with no body; this
 * one is the same status with the JSON error body every other refusal has, `Connection: close`, logged at
 * `info` with its code. A new request refused behind answers still under way (pipelined) is answered after them;
 * one refused in its body is answered only while its own answer has not started; otherwise (a reset peer, its answer
 * under way) the socket is just destroyed.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex, log: Logger): void {
  const code = err.code ?? '';
  const wire =
    code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new WireError('request_timeout')
      : code === 'HPE_HEADER_OVERFLOW'
        ? new WireError('request_headers_too_large')
        : code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
          ? new WireError('payload_too_large', 'The chunk extensions are larger than the server accepts.')
          : new WireError('invalid_http_request', `The HTTP request is malformed (${(err.message || code).slice(0, 200)}).`);
  const answer = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (code === 'ECONNRESET' || !socket.writable) {
    log.debug({ err }, 'http client error');
    socket.destroy();
    return;
  }
  // A new request refused (its head, or its head's time) while the answers of the requests pipelined before it still
  // hold the socket: they are sent first, then this refusal. Written at once, the refusal went out before a create's
  // answer still being planned, was read as that create's answer, and the create's own answer was lost (outside attack).
  // Node calls this again for each chunk its failed parser is given meanwhile: one refusal.
  // A request refused in its body may have an answer of its own queued behind them: once it holds the socket, it is
  // replaced by the refusal if it has not started, else the socket is destroyed, as below.
  const parsed = (socket as Duplex & { parser?: { incoming?: IncomingMessage | null } | null }).parser?.incoming;
  const own = parsed && !parsed.complete ? parsed : null;
  if (answer && (answer as { req?: IncomingMessage }).req !== own) {
    if (refusing.has(socket)) return;
    refusing.add(socket);
    log.info({ status: wire.status, code: wire.code, parser: code }, 'malformed request refused');
    afterAnswers(socket, () => answerRaw(socket, wire), own);
    return;
  }
  if (answer && answer.headersSent) {
    log.debug({ err }, 'http client error');
    socket.destroy();
    return;
  }
  log.info({ status: wire.status, code: wire.code, parser: code }, 'malformed request refused');
  answerRaw(socket, wire);
}

/** Sockets whose refusal (answerClientError) waits behind the answers before it. */
const refusing = new WeakSet<Duplex>();

/**
 * The HTTP server's `connect` listener: a `CONNECT` request (this server is no proxy). Node alone closes
 * the socket without a word; this answers 405 with the JSON error body, `Connection: close`.
 */
export function answerConnect(req: IncomingMessage, socket: Duplex, log: Logger): void {
  const wire = new WireError('method_not_allowed', 'CONNECT is not supported: this server is not a proxy.');
  log.info({ status: wire.status, code: wire.code, method: 'CONNECT', path: (req.url ?? '').slice(0, 200) }, 'request refused');
  afterAnswers(socket, () => answerRaw(socket, wire));
}

/**
 * Runs `then` once every answer that still holds the socket (requests pipelined before this one, each until its
 * `finish` event) is done, one after another; never if the socket is destroyed first. An 'error' listener is on the
 * socket meanwhile: Node took its own off before the `upgrade` or `connect` event, and a reset or a failed write was an
 * 'error' with no listener, which ended the process (outside attack). Written at once, a raw answer went out before the
 * answers pipelined ahead of it (a 405 or 431 read as the answer to the create before it, whose own answer was lost).
 */
export function afterAnswers(socket: Duplex, then: () => void, own: IncomingMessage | null = null): void {
  const ignore = () => {};
  socket.on('error', ignore);
  const again = () => {
    if (socket.destroyed) return;
    const before = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
    // `own`: the request refused, whose answer (if it holds the socket now) is not waited for; one under way can no
    // longer be replaced, and the socket is destroyed.
    if (before && own && before.req === own && before.headersSent) return void socket.destroy();
    if (before && !(own && before.req === own)) return void before.once('finish', () => setImmediate(again));
    socket.off('error', ignore);
    then();
  };
  again();
}

/** Whether an `Upgrade` request asks for a WebSocket (its `Upgrade` header names `websocket`). */
export function asksForWebSocket(req: IncomingMessage): boolean {
  return (req.headers.upgrade ?? '')
    .split(',')
    .some((t) => t.trim().toLowerCase() === 'websocket');
}

/**
 * An `Upgrade` to anything but a WebSocket (`h2c`, which `curl --http2` sends with every plain-HTTP request, or
 * any other): a server may ignore the header (RFC 9110 §7.8) and must then serve the request as HTTP/1.1. Node hands
 * every `Upgrade` request to the `upgrade` listener, with no answer of its own, and the WebSocket transport answered
 * 404 "No WebSocket endpoint" on every path, `/health` included. So the request is given back to the HTTP server: its
 * head is written again without the upgrade headers, put back in front of the bytes that followed it (`head`, then
 * the socket's), and the socket goes through Node's HTTP connection handling once more, so its body, keep-alive,
 * timeouts and limits are Node's as for any request. `reparsed` marks the socket for the connection count.
 */
export function serveUpgradeAsHttp(
  server: { emit(event: 'connection', socket: Duplex): boolean; timeout?: number; maxHeadersCount?: number | null },
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  reparsed: WeakSet<Duplex>,
): void {
  // Node keeps only the first header lines of a request in `rawHeaders` (about 1,000 unless the server's
  // `maxHeadersCount` says otherwise: 2,000 names and values) and drops the rest; its parser still frames the body with
  // all of them, but the head written again would not: a `Content-Length` after the 1,000th line was lost and the body
  // read as the next request (a request smuggled past any proxy in front; outside attack). A head that may have lost
  // lines is refused, as one past the header size limit is.
  const kept = typeof server.maxHeadersCount === 'number' ? server.maxHeadersCount * 2 : 2000;
  if (kept > 0 && req.rawHeaders.length >= kept) {
    afterAnswers(socket, () => answerRaw(socket, new WireError('request_headers_too_large', `The request has more than ${kept / 2} header lines.`)));
    return;
  }
  const lines = [`${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}`];
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (lower === 'upgrade' || lower === 'http2-settings') continue;
    let value = raw[i + 1]!;
    if (lower === 'connection') {
      value = value
        .split(',')
        .map((t) => t.trim())
        .filter((t) => t !== '' && !['upgrade', 'http2-settings'].includes(t.toLowerCase()))
        .join(', ');
      if (value === '') continue;
    }
    lines.push(`${name}: ${value}`);
  }
  // Behind requests whose answers still hold the socket it waits for all of them (afterAnswers): the new connection
  // handling would queue its own answer behind one it does not know about, and never send it. Waiting for the first
  // alone hung the connection when a second answer was still under way once the first was done (outside attack).
  afterAnswers(socket, () => {
    // The keep-alive timeout the answer before it set on the socket, once it was done, is cleared as Node clears it
    // when a request arrives: the new connection handling does not know it was set, and it destroyed the socket while
    // this request's answer was being prepared (a create slower than --keep-alive-timeout-ms got no answer; outside attack).
    (socket as Duplex & { setTimeout?: (ms: number) => unknown }).setTimeout?.(server.timeout ?? 0);
    socket.unshift(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]));
    reparsed.add(socket);
    server.emit('connection', socket);
  });
}

/** A whole error answer written on a raw socket (no `ServerResponse`), then the socket closed. */
function answerRaw(socket: Duplex, wire: WireError): void {
  socket.on('error', () => {});
  // Its write side already shut (an answer before it closed the connection): whoever shut it closes it.
  if (!socket.writable) return;
  const body = JSON.stringify({ error: { message: wire.message, type: wire.type, param: null, code: wire.code } });
  const reason =
    { 400: 'Bad Request', 405: 'Method Not Allowed', 408: 'Request Timeout', 413: 'Payload Too Large', 431: 'Request Header Fields Too Large' }[wire.status] ?? 'Error';
  // Closed once the answer is flushed, even if the peer never closes its side.
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${wire.status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Whether a socket was accepted past the connection cap (it gets 503 and is closed). */
export type OverCapacity = (socket: Socket) => boolean;

/** `GET /llr/runs` page size: default and most. */
export const RUNS_PAGE_DEFAULT = 100;
export const RUNS_PAGE_MAX = 1000;

/**
 * Routes another module serves under `prefix` (the teaching demo). They get
 * the normalised path and this transport's edge (`RouteEdge`); their errors
 * are reported like every other route's.
 */
export interface HttpRoutes {
  readonly prefix: string;
  handle(req: IncomingMessage, res: ServerResponse, path: string, edge: RouteEdge): Promise<void>;
}

/** What a mounted route gets of the edge, as the /v1 routes use it. */
export interface RouteEdge {
  /** The key's owner (null without keys); throws a WireError when the key is missing or wrong. */
  authenticate(): string | null;
  /**
   * The request's body as text, at most `limit` bytes and never more than `--max-frame-bytes` (413 past either),
   * charged to the server-wide byte budget (`--max-server-bytes`) as it arrives and until the request is done,
   * as a /v1 create's: 503 `server_busy` past it.
   */
  readBody(limit: number): Promise<string>;
}

export class HttpTransport {
  /** One one-shot session per create in flight, from the end of its body until its response has ended. */
  private readonly sessions: SessionSet;
  /** Every request being handled, until its answer (or error answer) was written. */
  private readonly handlers = new Map<IncomingMessage, Promise<unknown>>();
  /** Appends whose whole body arrived: shutdown waits for their answers (their run ends with it, so they end at once). */
  private readonly appending = new WeakSet<IncomingMessage>();

  constructor(
    private readonly host: SessionHost,
    private readonly auth: Authenticator,
    private readonly guard: Guard = () => null,
    private readonly overCapacity: OverCapacity = () => false,
    private readonly extra: HttpRoutes | null = null,
  ) {
    this.sessions = host.sessions();
  }

  /** Creates in flight: being planned or streaming. */
  get inFlight(): number {
    return this.sessions.size;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.handleWith(req, res, () => this.route(req, res));
  }

  /**
   * A request with `Expect: 100-continue` (the server's `checkContinue`): routed as any other, its `100 Continue`
   * sent by the body's reader once the checks before the body passed (transport/body.ts), so a 401, 404, 405, 413,
   * 415 or 503 goes out instead, the body never asked for, and closes the connection. Node's own handling wrote
   * `100 Continue` before routing: the client uploaded a body that was then drained or dropped.
   */
  handleContinue(req: IncomingMessage, res: ServerResponse): void {
    awaitContinue(req, res);
    this.handle(req, res);
  }

  private handleWith(req: IncomingMessage, res: ServerResponse, work: () => Promise<void>): void {
    const requestId = newId('req', 16);
    res.setHeader('x-request-id', requestId);
    // Every answer, whatever its route: one nobody reads is dropped once nothing of it has left for the stall timeout
    // (a retrieve, an input_items page, a compaction or a cancel kept its socket, its answer and its share of the byte
    // budget for good: outside attack). A route with its own watch (a create's, a stream's) replaces this one's log line.
    const limits = this.host.limits;
    watchStall(res, limits.sendStallTimeoutMs, (pending) =>
      this.host.log.info(
        { request_id: requestId, code: 'send_stalled', pending, stall_ms: limits.sendStallTimeoutMs, method: req.method, path: (req.url ?? '').slice(0, 200) },
        'answer left unsent with nothing leaving; dropped the connection',
      ),
    );
    const handled = work().catch((err: unknown) => {
      const wire = toWireError(err);
      const log = this.host.log;
      if (wire.code === 'server_error') log.error({ err, request_id: requestId }, 'http handler failed');
      else {
        log.info(
          { request_id: requestId, status: wire.status, code: wire.code, param: wire.param, method: req.method, path: (req.url ?? '').slice(0, 200) },
          'request refused',
        );
      }
      if (res.destroyed || req.socket.destroyed) return;
      if (res.headersSent) return void res.end();
      // Past the connection cap the socket is not kept alive for another request.
      if (wire.code === 'too_many_connections' || wire.code === 'server_shutting_down') res.setHeader('Connection', 'close');
      return this.refuse(req, res, wire);
    });
    // An append whose body has arrived is answered before shutdown closes the connections (see `shutdown`).
    this.handlers.set(req, handled);
    void handled.finally(() => this.handlers.delete(req));
  }

  /**
   * An error answer before the body was read (or while it is still coming):
   * the body is drained first, up to the frame limit, so the client gets
   * the answer and not a reset; a larger body (or a 413) is answered at once
   * with `Connection: close` and lingers (transport/body.ts), as is a 417: a client
   * whose expectation failed may be waiting for the answer before it sends the body.
   */
  private async refuse(req: IncomingMessage, res: ServerResponse, wire: WireError): Promise<void> {
    const limit = this.host.limits.maxFrameBytes;
    if (!req.complete) {
      const whole = wire.code !== 'payload_too_large' && wire.code !== 'expectation_failed' && (await drainBody(req, limit));
      if (res.destroyed || req.socket.destroyed) return;
      if (!whole) closeAfterAnswer(req, res, limit);
    }
    sendError(res, wire);
  }

  /** A request whose `Expect` is not `100-continue` (the server's `checkExpectation`): 417, JSON body, closed. */
  refuseExpectation(req: IncomingMessage, res: ServerResponse): void {
    res.setHeader('Connection', 'close');
    this.handleWith(req, res, () => Promise.reject(new WireError('expectation_failed')));
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // HTTP/1.1 requires `Host` (RFC 9112 §3.2); Node's check is off (server.ts) so the refusal has a JSON body.
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      res.setHeader('Connection', 'close');
      throw new WireError('invalid_http_request', 'The HTTP/1.1 request has no Host header.');
    }
    const refused = this.guard(req);
    if (refused) throw refused;
    // A request on a kept-alive connection after shutdown began is not started.
    if (this.sessions.closing) throw new WireError('server_shutting_down');
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    // GET, HEAD and DELETE routes read no body. One sent anyway is read and discarded before the answer, as
    // for an early refusal (`refuse`): answering while it still uploads, then closing, reset the connection
    // over the unread bytes, and a client that writes before it reads got EPIPE, not the answer (chaos #586).
    if ((method === 'GET' || method === 'HEAD' || method === 'DELETE') && !req.complete && announcesBody(req)) {
      const limit = this.host.limits.maxFrameBytes;
      const whole = await drainBody(req, limit);
      if (res.destroyed || req.socket.destroyed) return;
      if (!whole) closeAfterAnswer(req, res, limit);
    }
    const overCap = this.overCapacity(req.socket);
    // `/health` answers even past the connection cap (server.ts keeps a small
    // reserve of sockets for it), so idle clients holding every slot cannot
    // make a live server look dead; the socket is then closed.
    // HEAD is answered as GET on every GET route (Node sends no body for it): a monitor probing with HEAD got 404, then 405.
    const get = method === 'GET' || method === 'HEAD';
    const health = path === '/health' && get;
    if (overCap && !health) throw new WireError('too_many_connections');
    // A known path with a method it does not take is 405, as on every other route (it was 404 "No route").
    if (path === '/health' && !health) throw methodNotAllowed('GET, HEAD');
    if (path === '/llr/stats' && !get) throw methodNotAllowed('GET, HEAD');
    if (health) {
      if (overCap) res.setHeader('Connection', 'close');
      const post = this.host.postWork();
      return sendJson(res, 200, {
        status: 'ok',
        http_in_flight: this.inFlight,
        background_in_flight: this.host.background.inFlight,
        background_kept_bytes: this.host.background.endedBytes,
        post_work_pending: post.pending,
        post_work_completed: post.completed,
        bytes_held: this.host.bytes.held,
        send_bytes_unsent: this.host.unsent.unsent(),
        listings_waiting: this.host.listings.held.waiting,
      });
    }
    if (path === '/llr/stats' && get) {
      // For benchmarks in another process: CPU time and memory of this one.
      // `?gc=1` collects garbage first when node runs with --expose-gc.
      this.authenticate(req);
      const gc = (globalThis as { gc?: () => void }).gc;
      if (url.searchParams.get('gc') === '1' && gc) gc();
      return sendJson(res, 200, {
        cpu_us: process.cpuUsage(),
        memory: process.memoryUsage(),
        gc_available: gc !== undefined,
        uptime_s: process.uptime(),
        http_in_flight: this.inFlight,
        // 'unloaded' until the first request that tokenizes (model/tokenizer.ts).
        tokenizer: tokenizerState(),
      });
    }
    if (path === '/llr/runs' || path.startsWith('/llr/runs/')) {
      if (!get) throw methodNotAllowed('GET, HEAD');
      const owner = this.authenticate(req);
      const id = path.slice('/llr/runs'.length).replace(/^\//, '');
      // A page of 1,000 records is ~2 MB: written in slices and charged to the byte budget while unsent, as a retrieve.
      if (!id) {
        const page = this.host.runRecords({ owner, ...pageQuery(url) });
        return this.holding((hold) => sendJsonCooperative(res, 200, page, hold));
      }
      const rec = this.host.runRecord(decodeId(id, 'id'));
      // Another key's record is reported exactly like a missing one.
      if (!rec || (owner !== null && rec.owner !== owner)) throw new WireError('not_found', `No run record for '${id.slice(0, 100)}'.`);
      return this.holding((hold) => sendJsonCooperative(res, 200, rec, hold));
    }
    const extra = this.extra;
    if (extra && (path === extra.prefix || path.startsWith(`${extra.prefix}/`))) {
      // Charged as a /v1 create's body: from its first byte until the request is done (a race's stream has ended).
      const frame = this.host.limits.maxFrameBytes;
      return this.holding((hold) =>
        extra.handle(req, res, path, {
          authenticate: () => this.authenticate(req),
          readBody: (limit) => readBody(req, Math.min(limit, frame), hold),
        }),
      );
    }
    if (path === '/v1/responses') {
      if (method !== 'POST') throw methodNotAllowed('POST');
      const authStart = this.host.now();
      const owner = this.authenticate(req);
      const info: SessionInfo = { connection: null, owner, authSpan: { start: authStart, end: this.host.now() } };
      checkJsonContentType(req);
      const protocol = createProtocol(url);
      return this.holding((hold) => this.create(req, res, info, protocol, hold));
    }
    if (path === '/v1/responses/compact') {
      if (method !== 'POST') throw methodNotAllowed('POST');
      const owner = this.authenticate(req);
      checkJsonContentType(req);
      return this.holding((hold) => this.compact(req, res, owner, hold));
    }
    if (path === '/v1/responses/input_tokens') {
      if (method !== 'POST') throw methodNotAllowed('POST');
      const owner = this.authenticate(req);
      checkJsonContentType(req);
      return this.holding((hold) => this.inputTokens(req, res, owner, hold));
    }
    const live = /^\/v1\/responses\/([^/]+)\/(append|cancel)$/.exec(path);
    if (live) {
      if (method !== 'POST') throw methodNotAllowed('POST');
      const owner = this.authenticate(req);
      const id = decodeId(live[1]!, 'response_id');
      // The final Response echoes its request (16 MiB of instructions or tools): written in slices, charged while unsent.
      if (live[2] === 'cancel') {
        const final = await this.cancel(id, owner);
        return this.holding((hold) => sendJsonCooperative(res, 200, final, hold));
      }
      checkJsonContentType(req);
      const limits = this.host.limits;
      const body = await this.holding((hold) => readBody(req, limits.maxFrameBytes, hold));
      this.appending.add(req);
      // Timed from the whole body's arrival (reading it is the network's time, not work): the append's `parse_append` span.
      const start = this.host.now();
      const json = await parseEdgeJson(body, 'body', limits);
      const input = parseAppendBody(json, parseCaps(limits));
      checkAppendResponseId(json, id);
      await this.host.live.append(id, owner, input, { start, end: this.host.now() });
      return sendJson(res, 202, {});
    }
    const items = /^\/v1\/responses\/([^/]+)\/input_items$/.exec(path);
    if (items) {
      if (!get) throw methodNotAllowed('GET, HEAD');
      const owner = this.authenticate(req);
      const id = decodeId(items[1]!, 'response_id');
      const query = parseInputItemsQuery(url.searchParams);
      // A cold listing may wait in the server's queue (modes/cold-listings.ts): it leaves it when its client goes.
      const gone = clientGone(req, res);
      const page = await this.host.storedInputItems(id, owner, query, gone.signal).finally(gone.done);
      if (!page) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`);
      return this.holding((hold) => sendJsonCooperative(res, 200, page, hold));
    }
    const m = /^\/v1\/responses\/([^/]+)$/.exec(path);
    if (m) {
      const owner = this.authenticate(req);
      const id = decodeId(m[1]!, 'response_id');
      if (get) {
        const stream = retrieveQuery(url.searchParams);
        // HEAD of a stream is not followed (its events would be discarded until the run ends): answered as a retrieve.
        if (method === 'GET' && stream) return this.resume(res, id, owner, url, timingHeader(req));
        // A background response in flight: its current state (the store has it once it ends).
        const current = this.host.background.current(id, owner);
        if (current) return this.holding((hold) => sendJsonCooperative(res, 200, current, hold));
        const stored = this.host.storedResponse(id, owner);
        if (!stored) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`);
        // A stored response echoes its request (16 MiB of instructions or tools): written in slices.
        return this.holding((hold) => sendJsonCooperative(res, 200, stored, hold));
      }
      if (method === 'DELETE') {
        const stored = this.host.deleteStoredResponse(id, owner);
        // A background response's kept events go with it (and its final Response, kept here if the store could not).
        if (!this.host.background.delete(id, owner, stored) && !stored) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`);
        return sendJson(res, 200, { id, object: 'response', deleted: true });
      }
      throw methodNotAllowed('GET, HEAD, DELETE');
    }
    throw new WireError('not_found', `No route for ${method} ${url.pathname}.`);
  }

  /**
   * Runs `fn` with a share of the server-wide byte budget for this request
   * (its body is charged as it is read), released when `fn` settles: after
   * the JSON answer, or when the SSE stream's run ends.
   */
  private async holding<T>(fn: (hold: Hold) => Promise<T>): Promise<T> {
    const hold = this.host.requestHold();
    try {
      return await fn(hold);
    } finally {
      hold.releaseAll();
    }
  }

  /**
   * `POST /v1/responses/{id}/cancel`: a background response in flight, or a live long-lived run over HTTP, ends
   * `cancelled` (answered with its final Response). A background response that has ended is answered with its stored
   * final Response, unchanged: the API says cancelling is idempotent. A stored response of this key that is neither (an
   * HTTP or WebSocket response not created in the background) is refused as the API refuses it (400), not reported
   * missing: `responses.retrieve` finds it.
   */
  private async cancel(id: string, owner: string | null): Promise<Response> {
    const background = this.host.background.cancel(id, owner);
    if (background) return background;
    try {
      return await this.host.live.cancel(id, owner);
    } catch (err) {
      const stored = this.host.storedResponse(id, owner);
      if (!(err instanceof WireError && err.code === 'response_not_found')) throw err;
      // Said as retrieve says it: a background client cancelling an unknown (or deleted) id was told that no
      // long-lived response was open over HTTP.
      if (!stored) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`, 'response_id');
      if (stored.background) return stored;
      throw new WireError(
        'invalid_value',
        `Response '${id}' cannot be cancelled: it was not created with 'background': true (the API cancels only those; here a live long-lived run over HTTP can be cancelled too).`,
        'response_id',
      );
    }
  }

  /**
   * `GET /v1/responses/{id}?stream=true[&starting_after=N]`: a background response's events after sequence number N
   * (all of them without it), then its live ones until it ends, then `data: [DONE]`. Refused (400, `param: stream`)
   * for a response not created in the background and for one whose events are no longer kept; an SDK reading a JSON
   * answer as an event stream saw a stream of no events at all.
   */
  private resume(res: ServerResponse, id: string, owner: string | null, url: URL, timing: boolean): Promise<void> {
    const after = startingAfter(url);
    let bg = this.host.background.find(id, owner);
    // Ended, its events are read only while the store has the response (or keeps its failed final Response here):
    // one evicted or expired from the store (--max-memory-store-*, --store-ttl-ms) is gone, as retrieve says, and
    // its kept events must not outlive it.
    if (bg && bg.isOver && !bg.unstoredFinal && !this.host.hasStoredResponse(id, owner)) bg = undefined;
    if (!bg) {
      const stored = this.host.storedResponse(id, owner);
      if (!stored) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`);
      const limits = this.host.limits;
      throw new WireError(
        'invalid_value',
        stored.background
          ? `The events of background response '${id}' are no longer kept (they stay ${limits.backgroundEventsTtlMs} ms after it ends, llr serve --background-events-ttl-ms, within --max-background-kept-bytes server-wide). Retrieve it without 'stream'.`
          : `Response '${id}' cannot be streamed: the API streams a retrieve only for a response created with 'background': true, and this one was not. Retrieve it without 'stream'.`,
        'stream',
      );
    }
    return this.follow(res, bg, after, this.host.log.child({ request_id: res.getHeader('x-request-id'), protocol: 'http' }), timing);
  }

  /**
   * A background create (modes/background.ts): its run is not this request's, so the client's leaving does not end
   * it. Answered once the run has started (errors before that are HTTP statuses, as for any create): without `stream`
   * its Response as JSON (`in_progress`, `background: true`); with it, the run's SSE stream from its first event.
   */
  private async createBackground(res: ServerResponse, info: SessionInfo, params: CreateParams, bytes: number, parse: ParseSpan, log: Logger, hold: Hold): Promise<void> {
    const bg = this.sessions.openBackground(params, info, log, sseFrame, bytes, parse);
    // The body's bytes are the run's now (released when it ends), not this request's.
    hold.releaseAll();
    if (params.stream) return this.follow(res, bg, 'start', log, params.llr?.timing === true);
    // Its answer echoes the request: charged to the budget again while it is unsent (released when the request is done).
    return sendJsonCooperative(res, 200, await bg.started, hold);
  }

  /**
   * Stream a background response's events after `after` on `res` until it ends (`data: [DONE]`) or the client goes
   * away; a reader that falls too far behind is dropped at the send limit (and may resume), the run never waits
   * for it. Rejects before anything is written when those events are no longer kept. `start`: the create's own
   * stream, from its run's first event (rejects with the create's refusal, before anything is written).
   */
  private follow(res: ServerResponse, bg: BackgroundResponse, after: number | null | 'start', log: Logger, timing: boolean): Promise<void> {
    if (res.destroyed) return Promise.resolve();
    const limits = this.host.limits;
    return new Promise<void>((resolve, reject) => {
      if (after === 'start') bg.started.catch(reject);
      let dropped: { buffered: number; limit: number } | null = null;
      const sse = sseTransport(res, limits.maxSendBufferBytes, (buffered, limit) => (dropped = { buffered, limit }), false, this.sseShare(res, log));
      const follower: Follower = {
        start: () => sse.start(),
        frame: (pieces) => sse.frame(pieces),
        flush: () => sse.flush(),
        end: () => {
          if (!res.destroyed && !res.writableEnded) res.end('data: [DONE]\n\n');
          resolve();
        },
        drop: () => sse.drop(),
        timing,
      };
      const unfollow = after === 'start' ? bg.followFromStart(follower) : bg.follow(after, follower);
      // A resume from at or past the last event sent has nothing to write yet: its headers go out now, not with
      // the next event (a client waiting for them would wait for the run's next token, or time out).
      if (after !== 'start' && !res.writableEnded && !res.destroyed) res.flushHeaders();
      watchStall(res, limits.sendStallTimeoutMs, (pending) =>
        log.info({ code: 'send_stalled', pending, stall_ms: limits.sendStallTimeoutMs, response_id: bg.id }, 'background stream left unsent with nothing leaving; dropped the connection (the run goes on)'),
      );
      res.on('close', () => {
        unfollow();
        if (dropped !== null) log.info({ code: 'send_buffer_full', response_id: bg.id, ...dropped }, 'SSE reader of a background response left too much unsent; dropped it (the run goes on)');
        resolve();
      });
    });
  }

  /**
   * An SSE stream's part of the server-wide bound on unsent bytes (modes/send-bytes.ts), closed with the stream or
   * with its request's socket: a pipelined request's response has no socket until the one before it is done, and
   * gets no `close` of its own when the client goes away (as in `create`), so its share, and the bytes queued on it,
   * stayed counted for good (outside attack: `send_bytes_unsent` never went back to 0, the total stayed over).
   */
  private sseShare(res: ServerResponse, log: Logger): SendShare {
    const socket = res.req.socket;
    const share = this.host.sendShare({ unsentBytes: () => (res.destroyed || socket.destroyed ? 0 : res.writableLength) }, log);
    // One listener per socket however many streams are pipelined on it (`whenSocketCloses`).
    let forget = (): void => {};
    const close = () => {
      res.off('close', close);
      forget();
      share.close();
    };
    if (socket.destroyed) close();
    else {
      res.once('close', close);
      forget = whenSocketCloses(socket, close);
    }
    return share;
  }

  private authenticate(req: IncomingMessage): string | null {
    const owner = this.auth.check(req);
    if (owner === false) throw new WireError('unauthorized');
    return owner;
  }

  /** `POST /v1/responses/compact` (modes/compact.ts): JSON in, the compacted window out. */
  private async compact(req: IncomingMessage, res: ServerResponse, owner: string | null, hold: Hold): Promise<void> {
    const limits = this.host.limits;
    const body = await readBody(req, limits.maxFrameBytes, hold);
    const json = await parseEdgeJson(body, 'body', limits);
    await sendJsonCooperative(res, 200, await this.host.compact(parseCompactBody(json, parseCaps(limits)), owner), hold);
  }

  /**
   * `POST /v1/responses/input_tokens`: a create body (`model` optional, as the API has it), its input tokens counted.
   * Answered before `/v1/responses/{id}` would take `input_tokens` for a response id (405).
   */
  private async inputTokens(req: IncomingMessage, res: ServerResponse, owner: string | null, hold: Hold): Promise<void> {
    const limits = this.host.limits;
    const body = await readBody(req, limits.maxFrameBytes, hold);
    const json = await parseEdgeJson(body, 'body', limits);
    // Absent or null (openai-node 7's `InputTokenCountParams.model` is `string | null`: a null was refused as missing).
    const unnamed = json !== null && typeof json === 'object' && !Array.isArray(json) && ((json as Record<string, unknown>)['model'] ?? null) === null;
    const withModel = unnamed ? { ...(json as Record<string, unknown>), model: 'input-tokens' } : json;
    sendJson(res, 200, await this.host.inputTokens(parseCreateBody(withModel, parseCaps(limits)), owner));
  }

  /**
   * A create: a one-shot session of the design, over this request. Resolves
   * once its answer is written (or the client is gone); an error no
   * response carries (a refused create, shutdown while it was planned)
   * rejects, and `handle` answers it with its status.
   */
  private async create(req: IncomingMessage, res: ServerResponse, info: SessionInfo, protocol: 'http' | 'long-lived-http', hold: Hold): Promise<void> {
    const limits = this.host.limits;
    const body = await readBody(req, limits.maxFrameBytes, hold);
    // Timed from the whole body's arrival (reading it is the network's time, not work): the response's `parse` span.
    const parseStart = this.host.now();
    const params = withTimingOptIn(parseCreateBody(await parseEdgeJson(body, 'body', limits), parseCaps(limits)), timingHeader(req));
    const parse = { start: parseStart, end: this.host.now() };
    const log = this.host.log.child({ request_id: res.getHeader('x-request-id'), protocol });
    // `background` is the baseline's (the long-lived protocol over HTTP refuses it in planning: its run lives on its stream).
    if (params.background && protocol === 'http') return this.createBackground(res, info, params, body.length, parse, log, hold);
    await new Promise<void>((resolve, reject) => {
      let dropped: { buffered: number; limit: number; response_id: string | null } | null = null;
      const transport = params.stream
        ? sseTransport(
            res,
            limits.maxSendBufferBytes,
            (buffered, limit, id) => (dropped = { buffered, limit, response_id: id }),
            limits.sendStallTimeoutMs > 0,
            this.sseShare(res, log),
          )
        : jsonTransport(res);
      // A pipelined request waits for the one before it: its response has no socket yet and gets no `close` of
      // its own when the client goes away, so the request's socket is watched too (found by an outside attack:
      // such creates stayed counted in http_in_flight for good).
      // (Not at once for a socket already closed: that case is below, once the session is open.)
      const socket = req.socket;
      const forgetSocket = socket.destroyed ? () => {} : whenSocketCloses(socket, () => closed());
      const done = () => {
        forgetSocket();
        resolve();
      };
      transport.ended = (response) => {
        // A large answer is written in slices that wait for the socket (transport/json-out.ts): the request is done
        // once all but its last slice (~256 KiB at most) has left, and its one-shot session ends with it; a reader
        // that reads nothing keeps it in flight until the stall timeout drops it.
        transport.end(response).then(() => {
          void session.close('completed');
          done();
        }, (err: unknown) => {
          forgetSocket();
          reject(err);
        });
      };
      transport.refuse = (err) => {
        forgetSocket();
        reject(err);
      };
      const session = this.sessions.openSession(protocol, transport, info, log);
      watchStall(res, limits.sendStallTimeoutMs, (pending) =>
        log.info({ code: 'send_stalled', pending, stall_ms: limits.sendStallTimeoutMs }, 'answer left unsent with nothing leaving; dropped the connection'),
      );
      const closed = () => {
        if (dropped !== null) {
          log.info({ code: 'send_buffer_full', ...dropped }, 'SSE reader left too much unsent; dropped it');
        }
        // A one-shot session ends with its request: the run in flight, if any, ends as a disconnect does.
        void session.close(dropped !== null ? 'send_buffer_full' : 'client_disconnected');
        done();
      };
      res.on('close', closed);
      // A client gone while the body was read: its `close` may have fired already.
      if (res.destroyed || socket.destroyed) closed();
      else session.handle({ type: 'response.create', ...params }, body.length, parse);
    });
  }

  /** Resolves once no HTTP create is in flight. */
  idle(): Promise<void> {
    return this.sessions.idle();
  }

  /** Shutdown: runs in flight end `incomplete` and their streams finish; creates being planned get 503. */
  async shutdown(): Promise<void> {
    // Background runs are sessions of this set: they end `incomplete` with the rest; then their kept events go.
    await this.sessions.shutdown();
    this.host.background.close();
    // An append still being checked when its run ended is refused (no_paused_response, or 404 once the run is gone);
    // the server closed every connection right after this, so its client got a reset and could not tell whether its
    // outputs were applied. Appends still uploading are not waited for (a slow client would hold shutdown).
    const answering = [...this.handlers].filter(([req]) => this.appending.has(req)).map(([, p]) => p);
    await Promise.allSettled(answering);
    // Cold input_items listings still queued are refused (503) before the store they read closes.
    this.host.listings.close();
    // The answer's write is corked until the next tick (node:http): let it reach the socket.
    if (answering.length > 0) await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * A reader that reads nothing keeps its answer in memory: a JSON body, or an
 * SSE stream whose events all came in one burst (the send-buffer check runs
 * only when the next event is sent). While bytes wait to be sent and none
 * leave for `ms`, the connection is dropped (`sendStallTimeoutMs`). Watches
 * until the answer is fully handed to the kernel (`finish`) or the
 * connection closes.
 */
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
    const inQueue = (socket as Socket & { _handle?: { writeQueueSize?: number } | null })._handle?.writeQueueSize ?? -1;
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
  }, Math.max(10, Math.min(1000, Math.floor(ms / 4))));
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

/** Callbacks run once a socket closes: one `close` listener per socket, however many answers are pipelined on it. */
const onSocketClose = new WeakMap<Duplex, Set<() => void>>();

/** Runs `fn` once `socket` closes (at once if it has); returns what forgets it. */
function whenSocketCloses(socket: Duplex | null | undefined, fn: () => void): () => void {
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

/** The request says it has a body: a non-zero Content-Length, or a Transfer-Encoding. */
function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** A one-shot transport with how it writes the final answer (resolves once it is handed to the socket). */
type ExchangeTransport = Transport & { end(response: Response): Promise<void> };
/** The SSE transport: also writes a frame serialised before (a background response's kept events). */
type SseTransport = ExchangeTransport & { frame(pieces: EventPieces): void; start(): void; flush(): void };

/**
 * The SSE stream of a create on `res`: the headers go out when its
 * response starts (errors before that are HTTP statuses), each event is one
 * frame, `data: [DONE]` ends it. `dropped` is told what a reader that did
 * not read left unsent when it was dropped, the limit it passed, and the
 * response's id. `share`: the stream's part of the server-wide bound on
 * unsent bytes (modes/send-bytes.ts); past that bound a paced stream's run
 * waits for its reader from the bound's floor. Exported for the unit tests
 * (a batch of deltas against one `send` per delta).
 */
export function sseTransport(
  res: ServerResponse,
  limit: number,
  dropped: (buffered: number, limit: number, responseId: string | null) => void,
  paced = true,
  share: SendShare | null = null,
): SseTransport {
  let congested = false;
  let responseId: string | null = null;
  // The largest frame of this stream: lifecycle events echo the request (tools, instructions), so
  // two of them can exceed the limit by themselves; as on a WebSocket (transport/ws.ts), the limit
  // is raised by twice that, so a client that reads gets a request it was allowed to send.
  let largestFrame = 0;
  // One socket write per event-loop turn (transport/batch.ts): the socket itself, whose corks
  // balance whatever becomes of the response (a response detaches from its socket when it ends).
  let batch: Batcher = Object.assign(() => {}, { flush: () => {}, backlog: (now: number) => now });
  return {
    start() {
      // No `Connection` header of its own: Node's says keep-alive, or close when the client asked for it (RFC 9112 §9.6); an
      // explicit `keep-alive` overrode a client's `Connection: close` and kept its connection open after the stream.
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      if (res.socket) batch = batchWrites(res.socket);
      res.on('drain', () => {
        congested = false;
      });
    },
    send(e) {
      if (res.writableEnded || res.destroyed) return;
      if (e.type === 'response.created') responseId = e.response.id;
      this.frame(sseFrame(e));
    },
    // One frame already serialised (`sseFrame`): a background response's kept events (modes/background.ts).
    frame(pieces) {
      if (res.writableEnded || res.destroyed) return;
      // Back-pressure: once write() has said the socket is full, later events
      // queue in memory only while the unsent bytes stay under the limit
      // (the same one as a WebSocket's send buffer). A reader that does not
      // read past it is dropped, and its run ends as a disconnect.
      // What this turn wrote is not counted: no reader could have read it yet (transport/batch.ts, `backlog`).
      const allowed = limit + 2 * largestFrame;
      if (congested && batch.backlog(res.writableLength) > allowed) {
        dropped(res.writableLength, allowed, responseId);
        res.destroy();
        return;
      }
      const size = piecesLength(pieces);
      if (size > largestFrame) largestFrame = size;
      const unsent = res.writableLength;
      share?.note(unsent);
      batch(unsent);
      // A large echo goes as its shared bytes (protocol/event-json.ts), in the same corked write.
      let ok = true;
      for (const p of pieces) ok = res.write(p);
      if (!ok) congested = true;
    },
    // A batch of deltas (protocol/event-json.ts): their frames joined into one write, the same bytes as `send` per event,
    // while no event of the batch could reach the send limit (then `send` per event, which drops the reader at the limit).
    sendDeltas(b) {
      const n = b.deltas.length;
      if (res.writableEnded || res.destroyed) {
        b.sent = n;
        return;
      }
      const head = sseHead(b.type);
      let text = '';
      let largest = 0;
      for (let i = 0; i < n; i++) {
        const frame = `${head}${b.json(i)}\n\n`;
        text += frame;
        const len = Buffer.byteLength(frame, 'utf8');
        if (len > largest) largest = len;
      }
      // 3 bytes per UTF-16 unit bound the frames' UTF-8 size.
      const unsent = res.writableLength;
      if (batch.backlog(unsent) + 3 * text.length <= limit + 2 * largestFrame) {
        if (largest > largestFrame) largestFrame = largest;
        share?.note(unsent);
        batch(unsent);
        if (!res.write(text)) congested = true;
        b.sent = n;
        return;
      }
      for (let i = 0; i < n; i++) {
        this.send(b.event(i));
        b.sent = i + 1;
      }
    },
    // What this turn has batched goes out now (the run's output before its post-inference work).
    flush() {
      batch.flush();
    },
    // A reader behind by half the limit: the run waits until the stream has drained (or is closed: a reader that
    // reads nothing is dropped by the stall watch, `sendStallTimeoutMs`) instead of filling the buffer up to the limit.
    // Not without the stall watch (`--send-stall-timeout-ms 0`): nothing would end the wait of a reader that reads
    // nothing (an HTTP stream has no heartbeat), so the send limit drops it instead, as before the pacing.
    // Only while a write has said the socket is full (`writableNeedDrain`): 'drain' comes only then, so below the
    // stream's own high-water mark (a --send-buffer-bytes under ~32 KiB) a reader that read everything waited for
    // a 'drain' that never came, until the stall watch dropped it.
    // While all readers together are past the server-wide bound, from the bound's floor (modes/send-bytes.ts).
    backlog() {
      if (!paced || res.writableEnded || res.destroyed || !res.writableNeedDrain) return null;
      const unsent = res.writableLength;
      if (unsent <= limit / 2 && !(share?.pace(unsent) ?? false)) return null;
      return drainedOrClosed(res);
    },
    // Chaos knobs' injected disconnect: the stream ends (no terminal event, no [DONE]) and the connection closes.
    drop() {
      const socket = res.socket;
      res.end(() => socket?.destroy());
    },
    end() {
      if (!res.destroyed && !res.writableEnded) res.end('data: [DONE]\n\n');
      return Promise.resolve();
    },
  };
}

/** A create without `stream`: the final Response as JSON (500 when the server failed it), written in slices when large. */
function jsonTransport(res: ServerResponse): ExchangeTransport {
  return {
    send() {},
    // Chaos knobs' injected disconnect: no answer, the connection is closed.
    drop: () => res.destroy(),
    async end(response) {
      if (res.destroyed) return;
      // An injected fault, too, is a server_error on the Response (protocol/errors.ts responseErrorCode).
      const fault = response.status === 'failed' && response.error?.code === 'server_error';
      await sendJsonCooperative(res, fault ? 500 : 200, response);
    },
  };
}

/** `?protocol=` of `POST /v1/responses`: absent or `http` is the baseline, `long-lived` the long-lived Response over HTTP. */
function createProtocol(url: URL): 'http' | 'long-lived-http' {
  if (url.searchParams.getAll('protocol').length > 1) {
    throw new WireError('invalid_value', "'protocol' is given more than once: give it once.", 'protocol');
  }
  const q = url.searchParams.get('protocol');
  if (q === null || q === 'http') return 'http';
  if (q === 'long-lived') return 'long-lived-http';
  throw new WireError('invalid_value', `Unknown protocol '${q.slice(0, 100)}': use 'long-lived' (or nothing for the HTTP + SSE baseline).`, 'protocol');
}

/**
 * Whether a request or WebSocket upgrade opts in to the `llr:timing`
 * extension event with `X-LLR-Timing: 1` (this project's clients and
 * benchmarks do; the create body's `llr.timing` and the upgrade query
 * `?llr_timing=1` are the other ways). Clients that did not ask get the
 * standard stream unchanged: openai-node's `responses.stream()` helper
 * throws on any event type it does not know, and the AI SDK and the Agents
 * SDK would take it for part of the next turn. The timing is in the run
 * record (`GET /llr/runs/{id}`) either way.
 */
export function timingHeader(req: IncomingMessage): boolean {
  return req.headers['x-llr-timing'] === '1';
}

/**
 * One SSE frame as pieces to write in order (`eventPieces`: one string, or a
 * large instructions or tools echo as shared bytes); JSON.stringify never emits a raw
 * CR/LF, so the framing holds.
 */
/** What an SSE frame of an event of `type` starts with (its JSON and a blank line follow). */
function sseHead(type: string): string {
  return `event: ${type}\ndata: `;
}

function sseFrame(e: ServerEvent): EventPieces {
  const data =
    e.type === 'error'
      ? { type: 'error', code: e.error.code, message: e.error.message, param: e.error.param, sequence_number: e.sequence_number }
      : e;
  const p = eventPieces(data);
  const head = sseHead(e.type);
  // The frame's end as a piece of its own when the event has shared bytes: the same corked write either way.
  return p.length === 1 ? [`${head}${p[0]}\n\n`] : [`${head}${p[0]}`, ...p.slice(1), '\n\n'];
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * An append body may carry `response_id`, as a `response.append` event does: it must then be the path's. It was
 * ignored, so a body meant for another run (`{response_id: B, input: "…"}` posted to A's path) landed in A.
 */
function checkAppendResponseId(body: unknown, id: string): void {
  const named = (body as Record<string, unknown>)['response_id'];
  if (named === undefined || named === null) return;
  if (typeof named !== 'string') throw new WireError('invalid_type', "Invalid type for 'response_id': expected a string.", 'response_id');
  if (named !== id) {
    throw new WireError(
      'invalid_value',
      `The body's response_id '${named.slice(0, 100)}' is not the response of the path ('${id.slice(0, 100)}'); leave it out or make them the same.`,
      'response_id',
    );
  }
}

function sendError(res: ServerResponse, err: WireError): void {
  if (err.allow !== undefined) res.setHeader('Allow', err.allow);
  sendJson(res, err.status, { error: { message: err.message, type: err.type, param: err.param, code: err.code } });
}

/** A path segment decoded; bad percent-encoding is the client's mistake. */
function decodeId(raw: string, param: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new WireError('invalid_value', `Invalid '${param}': '${raw.slice(0, 100)}' is not valid percent-encoding.`, param);
  }
}

/**
 * POST bodies must be JSON. `application/json` with an optional
 * `charset=utf-8` is accepted (the openai SDKs and Codex send it); any other
 * type (e.g. the `x-www-form-urlencoded` of `curl -d`, or the `text/plain` a
 * browser form may send without a CORS preflight) gets 415. A request with
 * no `Content-Type` at all is accepted as JSON (documented).
 */
export function checkJsonContentType(req: IncomingMessage): void {
  // A compressed body would be read as its compressed bytes (`invalid_json`, or worse, a body that happens to parse):
  // this server decodes none, so it says so (415), as it does for a media type it does not read.
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
    throw new WireError('unsupported_media_type', `Unsupported Content-Encoding '${encoding.slice(0, 100)}': send the body uncompressed.`, 'Content-Encoding');
  }
  // The same for a transfer coding other than `chunked` (`Transfer-Encoding: gzip, chunked`): Node removes the
  // chunking only, and the body was read as its gzip bytes, or taken as sent when it was not compressed after all.
  const codings = (req.headers['transfer-encoding'] ?? '')
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '' && t !== 'chunked');
  if (codings.length > 0) {
    throw new WireError('unsupported_media_type', `Unsupported Transfer-Encoding '${codings.join(', ').slice(0, 100)}': send the body uncompressed ('chunked' alone, or a Content-Length).`, 'Transfer-Encoding');
  }
  const ct = req.headers['content-type'];
  if (ct === undefined) return;
  const [type, ...params] = ct.split(';').map((p) => p.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/"/g, '');
  if (type === 'application/json' && (charset === undefined || charset === 'utf-8' || charset === 'utf8')) return;
  throw new WireError(
    'unsupported_media_type',
    `Unsupported Content-Type '${ct.slice(0, 100)}': send the body as 'application/json' (UTF-8).`,
    'Content-Type',
  );
}

/**
 * The query of `GET /v1/responses/{id}` (openai-node's `ResponseRetrieveParams`): whether it asks for the stream.
 * `stream` and `include_obfuscation` are `true` or `false`, each given at most once, and `include` takes the API's
 * `ResponseIncludable` values, as for `input_items` (they change nothing: the response is returned as stored); they
 * were read loosely, so `stream=1` or `stream=yes` got the JSON, `stream=true&stream=false` the stream, and an unknown
 * `include` passed. Else 400 `invalid_value` naming the parameter.
 */
function retrieveQuery(q: URLSearchParams): boolean {
  const flag = (name: string): boolean => {
    const v = singleParam(q, name);
    if (v === null || v === 'false') return false;
    if (v === 'true') return true;
    throw new WireError('invalid_value', `Invalid value for '${name}': expected 'true' or 'false', but got '${v.slice(0, 100)}' instead.`, name);
  };
  const stream = flag('stream');
  flag('include_obfuscation');
  checkInclude(q);
  return stream;
}

/** `?starting_after=N` of a streamed retrieve: a sequence number (an integer >= 0), or null when absent. */
function startingAfter(url: URL): number | null {
  // Given twice it has no one meaning (the first was taken silently), as for `protocol`.
  if (url.searchParams.getAll('starting_after').length > 1) {
    throw new WireError('invalid_value', "'starting_after' is given more than once: give it once.", 'starting_after');
  }
  const raw = url.searchParams.get('starting_after');
  if (raw === null) return null;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n)) {
    throw new WireError('invalid_value', "Invalid 'starting_after': expected a sequence number (an integer >= 0).", 'starting_after');
  }
  return n;
}

/** `?limit=` (1–1000, default 100), `?after=` (a record id), `?order=asc|desc` (default desc). */
function pageQuery(url: URL): { limit: number; after: string | null; order: 'asc' | 'desc' } {
  const q = url.searchParams;
  return { limit: limitParam(q, RUNS_PAGE_DEFAULT, RUNS_PAGE_MAX), after: singleParam(q, 'after'), order: orderParam(q) };
}

/**
 * A signal aborted when the client of `req` goes away before its answer: its response closes, or its socket does (a
 * pipelined request's response gets no `close` of its own when the client goes, as `sseShare` notes). `done`
 * removes the listeners (a kept-alive socket serves many requests).
 */
function clientGone(req: IncomingMessage, res: ServerResponse): { signal: AbortSignal; done: () => void } {
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
