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
import { gcStats } from '../gc-stats.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { WireError, isServerFault, methodNotAllowed, retryHeaders, toWireError } from '../protocol/errors.js';
import { newId } from '../protocol/objects.js';
import type { Response } from '../protocol/objects.js';
import type { CreateParams } from '../protocol/events.js';
import type { BackgroundResponse, Follower } from '../modes/background.js';
import { checkCompactParameters, checkCreateParameters, checkInputTokenParameters, parseAppendBody, parseCompactBody, parseCreateBody, withTimingOptIn } from '../protocol/parse.js';
import type { SessionHost, SessionSet } from '../modes/host.js';
import type { Hold } from '../modes/server-bytes.js';
import type { SendShare } from '../modes/send-bytes.js';
import type { ParseSpan, SessionInfo } from '../modes/transport.js';
import { apiKeyRefusal, loggedPath, type Authenticator } from './auth.js';
import { announcesBody, awaitContinue, closeAfterAnswer, drainBody, readBody } from './body.js';
import { parseCaps, parseEdgeJson } from './json-in.js';
import { sendJsonBytes, sendJsonCooperative } from './json-out.js';
import { RunPages } from './run-pages.js';
import { pathSaid, requestUrl, type Guard } from './guard.js';
import { tokenizerState } from '../model/tokenizer.js';
import { parseInputItemsQuery } from '../store/input-items.js';
import { checkAppendResponseId, checkJsonContentType, createProtocol, decodeId, pageQuery, retrieveQuery, startingAfter, timingHeader } from './http-query.js';
import { clientGone, ownsSocket, watchStall, whenSocketCloses } from './socket-watch.js';
import { jsonTransport, sseFrame, sseTransport } from './sse.js';
import { OPENAI_VERSION, stampProcessingTime } from './meta-headers.js';
import { cancelledOverHttp, type HttpProtocol } from '../protocol/designs.js';

/** Whether a socket was accepted past the connection cap (it gets 503 and is closed). */
export type OverCapacity = (socket: Socket) => boolean;

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
  /** `GET /llr/runs` pages, made one at a time (`--max-queued-listings` waiting at most). */
  private readonly runPages: RunPages;
  /** Every request being handled, until its answer (or error answer) was written. */
  private readonly handlers = new Map<IncomingMessage, Promise<unknown>>();
  /** Appends whose whole body arrived: shutdown waits for their answers (their run ends with it, so they end at once). */
  private readonly appending = new WeakSet<IncomingMessage>();
  /** Every answer not yet closed: at shutdown those written but still leaving are waited for (`leaving`). */
  private readonly answers = new Set<ServerResponse>();
  /** Creates pipelined behind another answer on their connection, waiting for it (`create`): each one's wake-up. */
  private readonly waiting = new Map<IncomingMessage, () => void>();
  /** How many creates wait so on each connection, and their bodies' bytes (bounded as a WebSocket's queue). */
  private readonly queuedOn = new WeakMap<Socket, { count: number; bytes: number }>();

  constructor(
    private readonly host: SessionHost,
    private readonly auth: Authenticator,
    private readonly guard: Guard = () => null,
    private readonly overCapacity: OverCapacity = () => false,
    private readonly extra: HttpRoutes | null = null,
  ) {
    this.sessions = host.sessions();
    this.runPages = new RunPages(host.listings.maxWaiting);
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
    // The API's own meta headers (its "Debugging requests" guide): the REST version, and the time the request took
    // before its answer's headers (a stream's: its pre-inference work; a JSON answer's: all of it).
    res.setHeader('openai-version', OPENAI_VERSION);
    stampProcessingTime(res, performance.now());
    // Every answer, not only the demo page's files: JSON errors quote what the client sent (a 404 its path), and no
    // answer here is anything but what its Content-Type says.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // Forgotten when it closes, or when its request's socket does: an answer pipelined behind another gets no `close`
    // of its own when the client goes away first.
    this.answers.add(res);
    const forget = whenSocketCloses(req.socket, () => this.answers.delete(res));
    res.once('close', () => {
      forget();
      this.answers.delete(res);
    });
    // Every answer, whatever its route: one nobody reads is dropped once nothing of it has left for the stall timeout
    // (a retrieve, an input_items page, a compaction or a cancel kept its socket, its answer and its share of the byte
    // budget for good: outside attack). A route with its own watch (a create's, a stream's) replaces this one's log line.
    const limits = this.host.limits;
    watchStall(res, limits.sendStallTimeoutMs, (pending) =>
      this.host.log.info(
        { request_id: requestId, code: 'send_stalled', pending, stall_ms: limits.sendStallTimeoutMs, method: req.method, path: loggedPath(req.url) },
        'answer left unsent with nothing leaving; dropped the connection',
      ),
    );
    const handled = work().catch((err: unknown) => {
      const wire = toWireError(err);
      const log = this.host.log;
      if (isServerFault(wire)) log.error({ err, request_id: requestId }, 'http handler failed');
      else if (this.host.clientErrorLogged()) {
        log.info(
          { request_id: requestId, status: wire.status, code: wire.code, param: wire.param, method: req.method, path: loggedPath(req.url) },
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
    // HTTP/1.x only. Node's parser also takes `HTTP/2.0` (a text request line is not HTTP/2, whose frames are binary)
    // and `HTTP/0.9` or no version at all, and each was served as HTTP/1.1: 505, as Go's net/http and nginx answer.
    if (req.httpVersionMajor !== 1) {
      res.setHeader('Connection', 'close');
      throw new WireError('http_version_not_supported', `HTTP/${req.httpVersion} is not supported: this server speaks HTTP/1.1 and HTTP/1.0 only.`);
    }
    // HTTP/1.0 has no Transfer-Encoding: a 1.0 request with one has faulty framing, answered and then its connection
    // closed (RFC 9112 §6.1 MUST). Kept alive, what followed its chunked body was read as the next request, where a
    // 1.0 intermediary in front, framing it by its Content-Length or by the close, saw a body (request smuggling).
    if (req.httpVersionMinor === 0 && req.headers['transfer-encoding'] !== undefined) res.setHeader('Connection', 'close');
    // HTTP/1.1 requires `Host` (RFC 9112 §3.2); Node's check is off (server.ts) so the refusal has a JSON body.
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      res.setHeader('Connection', 'close');
      throw new WireError('invalid_http_request', 'The HTTP/1.1 request has no Host header.');
    }
    const refused = this.guard(req);
    if (refused) throw refused;
    // A request on a kept-alive connection after shutdown began is not started.
    if (this.sessions.closing) throw new WireError('server_shutting_down');
    const url = requestUrl(req.url);
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
        cached_contexts_let_go: this.host.bytes.cachesLetGo,
        send_bytes_unsent: this.host.unsent.unsent(),
        listings_waiting: this.host.listings.held.waiting + this.runPages.waiting,
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
        // The process's GC pauses by kind since the first server in it listened: count, total and longest (ms).
        gc_pauses: gcStats(),
        uptime_s: process.uptime(),
        http_in_flight: this.inFlight,
        // 'unloaded' until the first request that tokenizes (model/tokenizer.ts).
        tokenizer: tokenizerState(),
        held: this.host.held(),
      });
    }
    if (path === '/llr/runs' || path.startsWith('/llr/runs/')) {
      if (!get) throw methodNotAllowed('GET, HEAD');
      const owner = this.authenticate(req);
      const id = path.slice('/llr/runs'.length).replace(/^\//, '');
      // A page of 1,000 records is ~2 MB: made one page at a time server-wide (transport/run-pages.ts), then written
      // as the reader takes it and charged to the byte budget while unsent, as a retrieve.
      if (!id) {
        const query = { owner, ...pageQuery(url) };
        return this.holding(async (hold) => {
          const gone = clientGone(req, res);
          const bytes = await this.runPages.make(() => this.host.runRecords(query), gone.signal).finally(gone.done);
          hold.add(bytes.length);
          await sendJsonBytes(res, 200, bytes);
        });
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
      // The body stays charged while it is parsed, waits behind other appends and is checked; a run that takes it
      // keeps that charge for its life (LiveRuns.append).
      return this.holding(async (hold) => {
        // Counted while it is read, parsed and applied (`LiveRuns.arriving`): other appends for the run meanwhile may
        // resume it or give their body back, so none of them ends it (`endStuckLiveRun`; a valid append still
        // uploading was answered 404 once a larger one had ended the run, outside attack atk82 F5), and the run is not
        // among those only their clients can free meanwhile (`peerMessagePending` below, `LiveRuns.heldForPeers`).
        const arrived = this.host.live.arriving(id, owner);
        // Refused: no longer on its way (the run it was for is judged without it), and the others for its run.
        const others = (): number => {
          arrived();
          return this.host.live.appendsArriving(id, owner);
        };
        try {
          // Refused past the budget: when runs paused for their clients hold it, this one's run ends and says why. What
          // it needed at least: its declared length, or what was read and the piece refused (`WireError.budgetAsk`; a
          // chunked body's need was what was read and one byte, which always fitted, and it was told to try again).
          const body = await readBody(req, limits.maxFrameBytes, hold).catch((err: unknown) => {
            const bytes = Math.max(hold.bytes + ((err as WireError).budgetAsk ?? 1), Number(req.headers['content-length']) || 0);
            throw this.host.endStuckLiveRun(err, id, owner, bytes, others());
          });
          this.appending.add(req);
          // Timed from the whole body's arrival (reading it is the network's time, not work): the append's `parse_append` span.
          const start = this.host.now();
          const json = await parseEdgeJson(body, 'body', limits);
          const input = parseAppendBody(json, parseCaps(limits, this.host.allowUnknownParameters));
          checkAppendResponseId(json, id);
          // Its token ids past the budget: as for its body, above (what it needed at least: `WireError.budgetAsk`).
          const duplicate = await this.host.live.append(id, owner, input, { start, end: this.host.now() }, hold).catch((err: unknown) => {
            throw this.host.endStuckLiveRun(err, id, owner, hold.bytes + ((err as WireError).budgetAsk ?? 0), others());
          });
          // A duplicate (every output already held: a retry of an append whose 202 was lost) did nothing: said so.
          if (duplicate !== null) sendJson(res, 200, { duplicate: true, call_ids: duplicate });
          else sendJson(res, 202, {});
        } finally {
          arrived();
        }
      });
    }
    const items = /^\/v1\/responses\/([^/]+)\/input_items$/.exec(path);
    if (items) {
      if (!get) throw methodNotAllowed('GET, HEAD');
      const owner = this.authenticate(req);
      const id = decodeId(items[1]!, 'response_id');
      const query = parseInputItemsQuery(url.searchParams);
      // A cold listing may wait in the server's queue (modes/cold-listings.ts): it leaves it when its client goes.
      const gone = clientGone(req, res);
      const listing = async () =>
        (await this.host.storedInputItems(id, owner, query, gone.signal)) ?? (await this.host.backgroundInputItems(id, owner, query, gone.signal));
      const page = await listing().finally(gone.done);
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
        // A response in flight (background, or a `store: true` one of any design): its current state (the store has
        // it once it ends). A foreground one was 404 while it streamed, its id already on the wire.
        const current = this.host.background.current(id, owner) ?? this.host.inFlightResponse(id, owner);
        if (current) return this.holding((hold) => sendJsonCooperative(res, 200, current, hold));
        const stored = this.host.storedResponse(id, owner);
        if (!stored) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`);
        // A stored response echoes its request (16 MiB of instructions or tools): written in slices.
        return this.holding((hold) => sendJsonCooperative(res, 200, stored, hold));
      }
      if (method === 'DELETE') {
        if ((await this.host.deleteRunningBackground(id, owner)) || (await this.host.deleteRunningForeground(id, owner))) {
          return sendJson(res, 200, { id, object: 'response', deleted: true });
        }
        this.host.refuseIfRunningElsewhere(id, owner);
        const stored = this.host.deleteStoredResponse(id, owner);
        // A background response's kept events go with it (and its final Response, kept here if the store could not).
        if (!this.host.background.delete(id, owner, stored) && !stored) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`);
        return sendJson(res, 200, { id, object: 'response', deleted: true });
      }
      throw methodNotAllowed('GET, HEAD, DELETE');
    }
    throw new WireError('not_found', `No route for ${method} ${pathSaid(req.url, url)}.`);
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
      if (!(err instanceof WireError && err.code === 'response_not_found')) throw err;
      this.host.refuseIfRunningElsewhere(id, owner);
      // Ended, its store write still to come (`overlap_persist`): answered as it will be once stored.
      const found = this.host.storedWithProtocol(id, owner) ?? this.host.unwrittenWithProtocol(id, owner);
      // Said as retrieve says it: a background client cancelling an unknown (or deleted) id was told that no
      // long-lived response was open over HTTP. A `store: true` response still being made (not a background one, not a
      // long-lived run over HTTP) is one retrieve answers `in_progress`: refused below as it will be once stored, not 404.
      if (!found && !this.host.isInFlight(id, owner)) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`, 'response_id');
      if (!found) throw notCancellable(id);
      const stored = found.response;
      if (stored.background) return stored;
      // A run of a design cancelled by this route (a live long-lived run over HTTP) that has ended: its final
      // Response, as for a background response. It was 400, so a client retrying a cancel whose answer it lost was
      // told its run could not be cancelled.
      if (found.protocol !== undefined && cancelledOverHttp(found.protocol)) return stored;
      throw notCancellable(id);
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
      // Its events are another server process's (it runs it): said so, not that they are no longer kept after its end.
      this.host.refuseIfRunningElsewhere(id, owner, 'stream');
      // A `store: true` response still being made (any design but background: those are found above) is one retrieve
      // answers `in_progress`: refused as it will be once it has ended, not 404 (outside attack: a paused long-lived run
      // was "not found" here and found by retrieve).
      // Asked without copying it (`isInFlight`).
      const stored = this.host.storedResponse(id, owner);
      if (!stored && !this.host.isInFlight(id, owner)) throw new WireError('response_not_found', `Response with id '${id.slice(0, 100)}' not found.`);
      const limits = this.host.limits;
      throw new WireError(
        'invalid_value',
        stored?.background
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
    // Its answer echoes the request: charged to the budget again while it is unsent (released when the request is done),
    // unchecked, as a non-stream create's (sse.ts jsonTransport): its run has started, so a refusal now would hide a run
    // in flight. Checked, a create with 900 K characters of instructions under a 2 MiB budget was answered 503
    // server_busy while its run went on, its id never given (the SDKs retry a 503: a second run).
    const started = await bg.started;
    return sendJsonCooperative(res, 200, started, { add: (k) => hold.admitted(k) });
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
        unsent: () => (res.destroyed ? 0 : res.writableLength),
        // Only asked once a write has found the socket full (`unsent` is past the window, above the stream's high-water
        // mark), so `drain` comes once those bytes leave; a stream that closes first is unfollowed (below).
        whenDrained: (resume) => void res.once('drain', resume),
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
    if (owner === false) throw apiKeyRefusal(req);
    return owner;
  }

  /** `POST /v1/responses/compact` (modes/compact.ts): JSON in, the compacted window out. */
  private async compact(req: IncomingMessage, res: ServerResponse, owner: string | null, hold: Hold): Promise<void> {
    const limits = this.host.limits;
    const body = await readBody(req, limits.maxFrameBytes, hold);
    const json = await parseEdgeJson(body, 'body', limits);
    // A stored chain it loads is charged with its body while it is compacted (`server_busy` past the budget); the
    // window is dropped once the answer is made, and the answer is charged as it is written.
    const bodyBytes = hold.bytes;
    if (!this.host.allowUnknownParameters && json !== null && typeof json === 'object' && !Array.isArray(json)) checkCompactParameters(json as Record<string, unknown>);
    const params = parseCompactBody(json, parseCaps(limits, this.host.allowUnknownParameters));
    // A client gone while its window is read: a chain read still queued or under way stops (modes/hydrate.ts).
    const gone = clientGone(req, res);
    const compacted = await this.host.compact(params, owner, (n) => hold.add(n), gone.signal, () => hold.bytes).finally(gone.done);
    hold.keep(bodyBytes);
    await sendJsonCooperative(res, 200, compacted, hold);
  }

  /**
   * `POST /v1/responses/input_tokens`: a create body (`model` optional, as the API has it), its input tokens counted.
   * Answered before `/v1/responses/{id}` would take `input_tokens` for a response id (405).
   */
  private async inputTokens(req: IncomingMessage, res: ServerResponse, owner: string | null, hold: Hold): Promise<void> {
    const limits = this.host.limits;
    const body = await readBody(req, limits.maxFrameBytes, hold);
    const json = await parseEdgeJson(body, 'body', limits);
    if (json !== null && typeof json === 'object' && !Array.isArray(json)) checkInputTokenParameters(json as Record<string, unknown>, this.host.allowUnknownParameters);
    // Absent or null (openai-node 7's `InputTokenCountParams.model` is `string | null`: a null was refused as missing).
    const unnamed = json !== null && typeof json === 'object' && !Array.isArray(json) && ((json as Record<string, unknown>)['model'] ?? null) === null;
    const withModel = unnamed ? { ...(json as Record<string, unknown>), model: 'input-tokens' } : json;
    // A stored chain it loads is charged with its body while it is counted (`server_busy` past the budget).
    const params = parseCreateBody(withModel, parseCaps(limits, this.host.allowUnknownParameters));
    const gone = clientGone(req, res);
    sendJson(res, 200, await this.host.inputTokens(params, owner, (n) => hold.add(n), gone.signal, () => hold.bytes).finally(gone.done));
  }

  /**
   * A create: a one-shot session of the design, over this request. Resolves
   * once its answer is written (or the client is gone); an error no
   * response carries (a refused create, shutdown while it was planned)
   * rejects, and `handle` answers it with its status.
   */
  private async create(req: IncomingMessage, res: ServerResponse, info: SessionInfo, protocol: HttpProtocol, hold: Hold): Promise<void> {
    const limits = this.host.limits;
    const body = await readBody(req, limits.maxFrameBytes, hold);
    // Timed from the whole body's arrival (reading it is the network's time, not work): the response's `parse` span.
    const parseStart = this.host.now();
    const json = await parseEdgeJson(body, 'body', limits);
    if (!this.host.allowUnknownParameters && json !== null && typeof json === 'object' && !Array.isArray(json)) checkCreateParameters(json as Record<string, unknown>);
    const params = withTimingOptIn(parseCreateBody(json, parseCaps(limits, this.host.allowUnknownParameters)), timingHeader(req));
    const parse = { start: parseStart, end: this.host.now() };
    const log = this.host.log.child({ request_id: res.getHeader('x-request-id'), protocol });
    // A create pipelined behind another answer on its connection starts once that answer is done, as a queued
    // WebSocket create starts once the response before it was sent: its body stays charged meanwhile, nothing else
    // is held. Started at once, every pipelined create ran together, each buffering its stream for a socket it did not
    // have yet (outside attack: one connection reading nothing, 50 streaming creates pipelined in one write, 50 runs
    // and ~68 MB unsent; four such connections, 1.1 GB of RSS).
    // At shutdown it waits no more: it is answered 503 `server_shutting_down`, queued behind the answers before it.
    // The creates waiting on one connection are bounded as a WebSocket's queue is (`--max-queued-creates`, and
    // `--max-queued-bytes` of their bodies, the first always admitted): past it `queue_full` (429), answered in turn.
    // Unbounded, a peer pipelining small creates behind one slow answer had every one wait, each writing nothing, so
    // Node's own pause of a connection whose answers pile up never came: one connection, 200,000 creates of 60 bytes
    // in one stream, 930 MB of RSS within seconds, with `bytes_held` at 2.5 MB (outside attack). A refusal is written,
    // so a flood of them fills the connection's unsent answers and Node stops reading it.
    if (!res.socket) {
      const socket = req.socket;
      const queued = this.queuedOn.get(socket) ?? { count: 0, bytes: 0 };
      if (queued.count >= limits.maxQueuedCreates) {
        throw new WireError('queue_full', `At most ${limits.maxQueuedCreates} creates may wait behind the answer in progress on a connection.`);
      }
      if (queued.count > 0 && queued.bytes + body.length > limits.maxQueuedBytes) {
        throw new WireError('queue_full', `At most ${limits.maxQueuedBytes} bytes of creates may wait behind the answer in progress on a connection.`);
      }
      queued.count++;
      queued.bytes += body.length;
      this.queuedOn.set(socket, queued);
      log.info('create waits for the answer before it on its connection (pipelined)');
      const owns = await new Promise<boolean>((resolve) => {
        this.waiting.set(req, () => resolve(true));
        void ownsSocket(res).then(resolve);
      }).finally(() => {
        this.waiting.delete(req);
        queued.count--;
        queued.bytes -= body.length;
        if (queued.count === 0) this.queuedOn.delete(socket);
      });
      if (!owns) return;
      if (this.sessions.closing) throw new WireError('server_shutting_down');
    }
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
            // A long-lived run's pauses: kept alive for clients' read timeouts (`--sse-heartbeat-ms`).
            protocol === 'long-lived-http' ? limits.sseHeartbeatMs : 0,
          )
        : jsonTransport(res, hold);
      // A pipelined request waits for the one before it: its response has no socket yet and gets no `close` of
      // its own when the client goes away, so the request's socket is watched too (found by an outside attack:
      // such creates stayed counted in http_in_flight for good).
      // (Not at once for a socket already closed: that case is below, once the session is open.)
      const socket = req.socket;
      const forgetSocket = socket.destroyed ? () => {} : whenSocketCloses(socket, () => closed());
      // Once the request is done its hold is released (`holding`), though a create still being planned goes on until
      // its plan returns: a chain it loads then is not charged (a charge on the released hold was never released:
      // an HTTP continuation whose client went away while it was planned kept its chain's bytes held for good).
      let over = false;
      const done = () => {
        over = true;
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
          over = true;
          forgetSocket();
          reject(err);
        });
      };
      transport.refuse = (err) => {
        over = true;
        forgetSocket();
        reject(err);
      };
      // A stored chain its create loads is charged with its body, for the request's life (modes/hydrate.ts).
      const charge = (n: number) => {
        if (!over) hold.add(n);
      };
      const session = this.sessions.openSession(protocol, transport, { ...info, charge }, log);
      // Its share of the budget: the request's body (and a chain it loaded) besides its run's charge. A long-lived run
      // paused for its client holds it all until the client's next append (`SessionHost.heldForPeers`): left out, its
      // create's body was room that did not exist, and an append no room could take was told to try again (atk79 F1).
      session.share = {
        own: () => hold.bytes + session.heldByRun(),
        // This request's own bytes: its body and the chain it loaded (`ConnectionSession.cannotFitAlone`).
        request: () => hold.bytes,
        // An append for its run arriving or being applied may resume it: not held for good meanwhile (as a WebSocket
        // connection's frame in its sliced parse).
        peerMessagePending: () => {
          const run = session.running;
          return run !== null && this.host.live.appendsArriving(run.id, info.owner) > 0;
        },
      };
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
    // Creates waiting behind another answer on their connection are answered 503 (queued behind it) and not started.
    const answering = [...this.handlers].filter(([req]) => this.appending.has(req) || this.waiting.has(req)).map(([, p]) => p);
    for (const wake of [...this.waiting.values()]) wake();
    await Promise.allSettled(answering);
    // Cold input_items listings still queued are refused (503) before the store they read closes.
    this.host.listings.close();
    // One wait for the answers still being made and those still leaving: `--send-stall-timeout-ms` in all.
    const ms = this.host.limits.sendStallTimeoutMs;
    if (ms <= 0) {
      // The answer's write is corked until the next tick (node:http): let it reach the socket.
      if (answering.length > 0) await new Promise((resolve) => setImmediate(resolve));
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(ms, 2 ** 31 - 1))));
    await this.made(deadline);
    // The answer's write is corked until the next tick (node:http): let it reach the socket.
    await new Promise((resolve) => setImmediate(resolve));
    await this.leaving(deadline);
    clearTimeout(timer);
  }

  /**
   * Answers still being made for requests whose whole body arrived (a cancel's final Response serialised in slices,
   * a retrieve, a page of input items), for at most `--send-stall-timeout-ms` (none with 0): by now every run has
   * ended, so each is bounded work. Only answers whose head was sent were waited for (`leaving`), so a cancel whose
   * answer had not begun to be written when shutdown came, as on a loaded machine, was closed with nothing sent:
   * the run was cancelled and its client never told. Requests still uploading are not waited for.
   */
  private async made(deadline: Promise<void>): Promise<void> {
    const making = [...this.handlers].filter(([req]) => req.complete).map(([, p]) => p);
    if (making.length > 0) await Promise.race([Promise.allSettled(making), deadline]);
  }

  /**
   * Answers begun and not yet all handed to the kernel (an SSE stream's terminal event and `[DONE]` behind megabytes
   * a reader has still to take; a large JSON answer written in slices, such as a cancel's final Response) leave
   * before the server closes the connections, for at most `--send-stall-timeout-ms` in all (none with 0); a reader
   * that takes nothing is dropped sooner by its stall watch. Closed at once, a stream whose reader was a few
   * megabytes behind lost its terminal event and `[DONE]` at SIGTERM, and a cancel's 10 MB answer was cut at 4 MB
   * (outside attack), though shutdown promises every run in flight its terminal event. By now every run has ended,
   * so every stream has ended too.
   */
  private async leaving(deadline: Promise<void>): Promise<void> {
    const leaving = [...this.answers].filter((res) => res.headersSent && !res.writableFinished && !res.destroyed);
    if (leaving.length === 0) return;
    const left = leaving.map(
      (res) =>
        new Promise<void>((resolve) => {
          res.once('finish', resolve);
          res.once('close', resolve);
          whenSocketCloses(res.req.socket, resolve);
        }),
    );
    await Promise.race([Promise.all(left), deadline]);
  }
}


function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, err: WireError): void {
  if (err.allow !== undefined) res.setHeader('Allow', err.allow);
  for (const [name, value] of Object.entries(retryHeaders(err))) res.setHeader(name, value);
  sendJson(res, err.status, { error: { message: err.message, type: err.type, param: err.param, code: err.code } });
}

/** A cancel of a response of this key's that is neither a background response nor a long-lived run over HTTP. */
function notCancellable(id: string): WireError {
  return new WireError(
    'invalid_value',
    `Response '${id}' cannot be cancelled: it was not created with 'background': true (the API cancels only those; here a live long-lived run over HTTP can be cancelled too).`,
    'response_id',
  );
}
