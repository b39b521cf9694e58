/**
 * The HTTP transport: `POST /v1/responses` (SSE when `stream:true`, else the
 * Response as JSON), `GET`/`DELETE /v1/responses/{id}`, `GET /health`, and
 * the server's own records at `GET /llr/runs[/{id}]`, and its CPU time and
 * memory at `GET /llr/stats` (for benchmarks), and extra routes mounted under
 * a prefix (`HttpRoutes`: the teaching demo at `/demo`).
 *
 * It only moves bytes: bodies are parsed at the edge, the HTTP mode plans the
 * run, the engine streams it, and this file writes each event as one SSE
 * frame in a single write (`event:` + one-line `data:`), then `data: [DONE]`
 * (the telemetry event `llr:timing` only to clients that opt in, see
 * `timingHeader`).
 * Errors are an HTTP status with `{"error":{message,type,param,code}}`; in an
 * SSE stream they use the flat `error` event shape openai-node expects.
 *
 * At the edge (docs/reliability.md): the Host/Origin guard, the connection
 * cap (503), `Content-Type` on POST (415; a missing header is accepted),
 * the body size and JSON depth limits, the key on `/llr/*` when keys are
 * configured, and SSE back-pressure (a reader that leaves more than
 * `maxSendBufferBytes` unsent is dropped; its run ends as a disconnect).
 * Every response carries `x-request-id`; every refusal is logged at `info`
 * with it, its code and its param.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { WireError, toWireError } from '../protocol/errors.js';
import type { ServerEvent } from '../protocol/events.js';
import { newId } from '../protocol/objects.js';
import { parseAppendBody, parseCompactBody, parseCreateBody, withTimingOptIn } from '../protocol/parse.js';
import { RunMetrics } from '../pipeline/metrics.js';
import { ResponseRun, type EventSink, type RunHooks } from '../engine/run.js';
import type { Services } from '../engine/services.js';
import { httpPlan } from '../modes/http.js';
import { compactWindow } from '../modes/compact.js';
import { LiveRuns } from '../modes/long-lived-http.js';
import type { Authenticator } from './auth.js';
import { readBody } from './body.js';
import { parseCaps, parseEdgeJson } from './json-in.js';
import { sendJsonCooperative } from './json-out.js';
import { eventPieces, piecesLength } from './event-json.js';
import type { Guard } from './guard.js';

/** Whether a socket was accepted past the connection cap (it gets 503 and is closed). */
export type OverCapacity = (socket: Socket) => boolean;

/** `GET /llr/runs` page size: default and most. */
export const RUNS_PAGE_DEFAULT = 100;
export const RUNS_PAGE_MAX = 1000;

/**
 * Routes another module serves under `prefix` (the teaching demo). They get
 * the normalised path and this transport's authentication (throws a
 * WireError when the key is missing or wrong); their errors are reported
 * like every other route's.
 */
export interface HttpRoutes {
  readonly prefix: string;
  handle(req: IncomingMessage, res: ServerResponse, path: string, authenticate: () => string | null): Promise<void>;
}

export class HttpTransport {
  private readonly runs = new Set<ResponseRun>();
  /** Long-lived runs open over HTTP (`?protocol=long-lived`), found again by id to append and cancel. */
  private readonly live: LiveRuns;
  private readonly idleWaiters: Array<() => void> = [];
  private closing = false;

  constructor(
    private readonly services: Services,
    private readonly auth: Authenticator,
    private readonly guard: Guard = () => null,
    private readonly overCapacity: OverCapacity = () => false,
    private readonly extra: HttpRoutes | null = null,
  ) {
    this.live = new LiveRuns(services);
  }

  get inFlight(): number {
    return this.runs.size;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const requestId = newId('req', 16);
    res.setHeader('x-request-id', requestId);
    this.route(req, res).catch((err: unknown) => {
      const wire = toWireError(err);
      const log = this.services.log;
      if (wire.code === 'server_error') log.error({ err, request_id: requestId }, 'http handler failed');
      else {
        log.info(
          { request_id: requestId, status: wire.status, code: wire.code, param: wire.param, method: req.method, path: (req.url ?? '').slice(0, 200) },
          'request refused',
        );
      }
      if (res.destroyed || req.socket.destroyed) return;
      if (!res.headersSent) {
        // Past the connection cap the socket is not kept alive for another request.
        if (wire.code === 'too_many_connections' || wire.code === 'server_shutting_down') res.setHeader('Connection', 'close');
        sendError(res, wire);
      } else res.end();
    });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refused = this.guard(req);
    if (refused) throw refused;
    if (this.overCapacity(req.socket)) throw new WireError('too_many_connections');
    // A request on a kept-alive connection after shutdown began is not started.
    if (this.closing) throw new WireError('server_shutting_down');
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    if (path === '/health' && method === 'GET') {
      return sendJson(res, 200, {
        status: 'ok',
        http_in_flight: this.runs.size,
        post_work_pending: this.services.postWork.inFlight,
        post_work_completed: this.services.postWork.completed,
      });
    }
    if (path === '/llr/stats' && method === 'GET') {
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
        http_in_flight: this.runs.size,
      });
    }
    if (path === '/llr/runs' || path.startsWith('/llr/runs/')) {
      if (method !== 'GET') throw new WireError('method_not_allowed');
      const owner = this.authenticate(req);
      const id = path.slice('/llr/runs'.length).replace(/^\//, '');
      if (!id) return sendJson(res, 200, this.services.records.page({ owner, ...pageQuery(url) }));
      const rec = this.services.records.get(decodeId(id, 'id'));
      // Another key's record is reported exactly like a missing one.
      if (!rec || (owner !== null && rec.owner !== owner)) throw new WireError('not_found', `No run record for '${id.slice(0, 100)}'.`);
      return sendJson(res, 200, rec);
    }
    const extra = this.extra;
    if (extra && (path === extra.prefix || path.startsWith(`${extra.prefix}/`))) {
      return extra.handle(req, res, path, () => this.authenticate(req));
    }
    if (path === '/v1/responses') {
      if (method !== 'POST') throw new WireError('method_not_allowed');
      const owner = this.authenticate(req);
      checkJsonContentType(req);
      return this.create(req, res, owner, createProtocol(url));
    }
    if (path === '/v1/responses/compact') {
      if (method !== 'POST') throw new WireError('method_not_allowed');
      return this.compact(req, res, this.authenticate(req));
    }
    const live = /^\/v1\/responses\/([^/]+)\/(append|cancel)$/.exec(path);
    if (live) {
      if (method !== 'POST') throw new WireError('method_not_allowed');
      const owner = this.authenticate(req);
      const id = decodeId(live[1]!, 'response_id');
      if (live[2] === 'cancel') return sendJson(res, 200, await this.live.cancel(id, owner));
      checkJsonContentType(req);
      const body = await readBody(req, this.services.limits.maxFrameBytes);
      await this.live.append(id, owner, parseAppendBody(await parseEdgeJson(body, 'body', this.services.limits), parseCaps(this.services.limits)));
      return sendJson(res, 202, {});
    }
    const m = /^\/v1\/responses\/([^/]+)$/.exec(path);
    if (m) {
      const owner = this.authenticate(req);
      const id = decodeId(m[1]!, 'response_id');
      if (method === 'GET') {
        const rec = this.services.store.get(id, owner);
        if (!rec) throw new WireError('response_not_found', `Response with id '${id}' not found.`);
        return sendJsonCooperative(res, 200, rec.response);
      }
      if (method === 'DELETE') {
        if (!this.services.store.delete(id, owner)) throw new WireError('response_not_found', `Response with id '${id}' not found.`);
        return sendJson(res, 200, { id, object: 'response', deleted: true });
      }
      throw new WireError('method_not_allowed');
    }
    throw new WireError('not_found', `No route for ${method} ${url.pathname}.`);
  }

  private authenticate(req: IncomingMessage): string | null {
    const owner = this.auth.check(req);
    if (owner === false) throw new WireError('unauthorized');
    return owner;
  }

  /** `POST /v1/responses/compact` (modes/compact.ts): JSON in, the compacted window out. */
  private async compact(req: IncomingMessage, res: ServerResponse, owner: string | null): Promise<void> {
    const body = await readBody(req, this.services.limits.maxFrameBytes);
    const json = await parseEdgeJson(body, 'body', this.services.limits);
    const metrics = new RunMetrics(this.services.clock.now);
    await sendJsonCooperative(res, 200, await compactWindow(parseCompactBody(json, parseCaps(this.services.limits)), this.services, metrics, owner));
  }

  private async create(req: IncomingMessage, res: ServerResponse, owner: string | null, protocol: 'http' | 'long-lived'): Promise<void> {
    const metrics = new RunMetrics(this.services.clock.now);
    const authAt = this.services.clock.now();
    if (this.auth.enabled) metrics.count('auth_checks');
    metrics.span('auth', authAt, authAt);
    const body = await readBody(req, this.services.limits.maxFrameBytes);
    const params = withTimingOptIn(parseCreateBody(await parseEdgeJson(body, 'body', this.services.limits), parseCaps(this.services.limits)), timingHeader(req));
    if (protocol === 'long-lived') {
      // One SSE stream for the whole run; appends and cancels find it by id (modes/long-lived-http.ts).
      const run = await this.live.start(params, owner, metrics, () => this.sseSink(res), sseHooks(res));
      return this.stream(res, run);
    }
    const plan = await httpPlan(params, this.services, metrics, owner);
    if (params.stream) return this.stream(res, new ResponseRun(plan, this.services, this.sseSink(res), sseHooks(res)));
    // Chaos knobs' injected disconnect: no answer, the connection is closed.
    const run = new ResponseRun(plan, this.services, () => {}, { drop: () => res.destroy() });
    this.track(run);
    res.on('close', () => {
      if (!res.writableFinished) run.stop('cancelled', 'client_disconnected');
    });
    const response = await run.done;
    if (res.destroyed) return;
    const fault = response.status === 'failed' && (response.error?.code === 'server_error' || response.error?.code === 'injected_fault');
    await sendJsonCooperative(res, fault ? 500 : 200, response);
  }

  /**
   * The SSE stream of a run on `res`: the headers go out now (the run's
   * first events follow at once), each event is one frame. `stream` ends it.
   */
  private sseSink(res: ServerResponse): EventSink {
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
    let congested = false;
    // The largest frame of this stream: lifecycle events echo the request (tools, instructions), so
    // two of them can exceed the limit by themselves; as on a WebSocket (transport/ws.ts), the limit
    // is raised by twice that, so a client that reads gets a request it was allowed to send.
    let largestFrame = 0;
    res.on('drain', () => {
      congested = false;
    });
    return (e) => {
      if (res.writableEnded || res.destroyed) return;
      // Back-pressure: once write() has said the socket is full, later events
      // queue in memory only while the unsent bytes stay under the limit
      // (the same one as a WebSocket's send buffer). A reader that does not
      // read past it is dropped, and its run ends as a disconnect (below).
      const limit = this.services.limits.maxSendBufferBytes + 2 * largestFrame;
      if (congested && res.writableLength > limit) {
        droppedStreams.set(res, res.writableLength);
        res.destroy();
        return;
      }
      const pieces = ssePieces(e);
      const size = piecesLength(pieces);
      if (size > largestFrame) largestFrame = size;
      // One frame in one write when it is one string; a large tools echo goes as its shared bytes (transport/event-json.ts).
      let ok = true;
      if (pieces.length > 1) res.cork();
      for (const p of pieces) ok = res.write(p);
      if (pieces.length > 1) res.uncork();
      if (!ok) congested = true;
    };
  }

  /** Track a run streaming on `res` (see `sseSink`); closing the stream ends it as a disconnect does. */
  private async stream(res: ServerResponse, run: ResponseRun): Promise<void> {
    const limit = this.services.limits.maxSendBufferBytes;
    this.track(run);
    const closed = () => {
      const dropped = droppedStreams.get(res) ?? null;
      if (dropped !== null) {
        this.services.log.info({ response_id: run.id, code: 'send_buffer_full', buffered: dropped, limit }, 'SSE reader left too much unsent; dropped it');
      }
      if (!run.ended) {
        run.detach();
        run.stop('cancelled', dropped !== null ? 'send_buffer_full' : 'client_disconnected');
      }
    };
    res.on('close', closed);
    // A client gone while the run was being planned: its `close` has fired already, and a
    // long-lived run would otherwise wait paused for nobody until the pause timeout.
    if (res.destroyed || res.socket?.destroyed === true) closed();
    await run.done;
    if (!res.destroyed && !res.writableEnded) res.end('data: [DONE]\n\n');
  }

  private track(run: ResponseRun): void {
    this.runs.add(run);
    void run.done.finally(() => {
      this.runs.delete(run);
      if (this.runs.size === 0) for (const w of this.idleWaiters.splice(0)) w();
    });
  }

  /** Resolves once no HTTP response is in flight. */
  idle(): Promise<void> {
    if (this.runs.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Shutdown: runs in flight end `incomplete` and their streams finish. */
  async shutdown(): Promise<void> {
    this.closing = true;
    this.live.close();
    const runs = [...this.runs];
    for (const r of runs) r.stop('incomplete', 'server_shutdown');
    await Promise.all(runs.map((r) => r.done));
  }
}

/** Streams dropped for not reading, with what they left unsent (for the log line when they close). */
const droppedStreams = new WeakMap<ServerResponse, number>();

/** `?protocol=` of `POST /v1/responses`: absent or `http` is the baseline, `long-lived` the long-lived Response over HTTP. */
function createProtocol(url: URL): 'http' | 'long-lived' {
  const q = url.searchParams.get('protocol');
  if (q === null || q === 'http') return 'http';
  if (q === 'long-lived') return 'long-lived';
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

/** One SSE frame; JSON.stringify never emits a raw CR/LF, so the framing holds. */
export function sseFrame(e: ServerEvent): string {
  return ssePieces(e)
    .map((p) => (typeof p === 'string' ? p : p.toString('utf8')))
    .join('');
}

/** The frame as pieces to write in order (`eventPieces`). */
function ssePieces(e: ServerEvent): Array<string | Buffer> {
  const data =
    e.type === 'error'
      ? { type: 'error', code: e.error.code, message: e.error.message, param: e.error.param, sequence_number: e.sequence_number }
      : e;
  const pieces = eventPieces(data);
  // The first and last pieces are always strings (eventPieces).
  pieces[0] = `event: ${e.type}\ndata: ${pieces[0] as string}`;
  pieces[pieces.length - 1] = `${pieces[pieces.length - 1] as string}\n\n`;
  return pieces;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, err: WireError): void {
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

/** `?limit=` (1–1000, default 100), `?after=` (a record id), `?order=asc|desc` (default desc). */
function pageQuery(url: URL): { limit: number; after: string | null; order: 'asc' | 'desc' } {
  const q = url.searchParams;
  const rawLimit = q.get('limit');
  const limit = rawLimit === null ? RUNS_PAGE_DEFAULT : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > RUNS_PAGE_MAX) {
    throw new WireError('invalid_value', `Invalid 'limit': expected an integer from 1 to ${RUNS_PAGE_MAX}.`, 'limit');
  }
  const order = q.get('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw new WireError('invalid_value', "Invalid 'order': expected 'asc' or 'desc'.", 'order');
  return { limit, after: q.get('after'), order };
}

/** Chaos knobs' injected disconnect on an SSE stream: it ends (no terminal event, no [DONE]) and the connection closes. */
function sseHooks(res: ServerResponse): RunHooks {
  return {
    drop: () => {
      const socket = res.socket;
      res.end(() => socket?.destroy());
    },
  };
}
