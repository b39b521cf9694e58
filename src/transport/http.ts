/**
 * The HTTP transport: `POST /v1/responses` (SSE when `stream:true`, else the
 * Response as JSON), `GET`/`DELETE /v1/responses/{id}`, `GET /health`, and
 * the server's own records at `GET /llr/runs[/{id}]`, and its CPU time and
 * memory at `GET /llr/stats` (for benchmarks).
 *
 * It only moves bytes: bodies are parsed at the edge, the HTTP mode plans the
 * run, the engine streams it, and this file writes each event as one SSE
 * frame in a single write (`event:` + one-line `data:`), then `data: [DONE]`
 * (the telemetry event `llr:timing` only to clients that opt in, see
 * `timingHeader`).
 * Errors are an HTTP status with `{"error":{message,type,param,code}}`; in an
 * SSE stream they use the flat `error` event shape openai-node expects.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { WireError, toWireError } from '../protocol/errors.js';
import type { ServerEvent } from '../protocol/events.js';
import { parseCompactBody, parseCreateBody, withTimingOptIn } from '../protocol/parse.js';
import { RunMetrics } from '../pipeline/metrics.js';
import { ResponseRun, type RunPlan } from '../engine/run.js';
import type { Services } from '../engine/services.js';
import { httpPlan } from '../modes/http.js';
import { compactWindow } from '../modes/compact.js';
import type { Authenticator } from './auth.js';

export class HttpTransport {
  private readonly runs = new Set<ResponseRun>();
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    private readonly services: Services,
    private readonly auth: Authenticator,
  ) {}

  get inFlight(): number {
    return this.runs.size;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.route(req, res).catch((err: unknown) => {
      const wire = toWireError(err);
      if (wire.code === 'server_error') this.services.log.error({ err }, 'http handler failed');
      if (!res.headersSent) sendError(res, wire);
      else res.end();
    });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
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
    if (path.startsWith('/llr/runs')) {
      if (method !== 'GET') throw new WireError('method_not_allowed');
      const id = path.slice('/llr/runs'.length).replace(/^\//, '');
      if (!id) return sendJson(res, 200, { object: 'list', data: this.services.records.list() });
      const rec = this.services.records.get(id);
      if (!rec) throw new WireError('not_found', `No run record for '${id}'.`);
      return sendJson(res, 200, rec);
    }
    if (path === '/v1/responses') {
      if (method !== 'POST') throw new WireError('method_not_allowed');
      return this.create(req, res, this.authenticate(req));
    }
    if (path === '/v1/responses/compact') {
      if (method !== 'POST') throw new WireError('method_not_allowed');
      return this.compact(req, res, this.authenticate(req));
    }
    const m = /^\/v1\/responses\/([^/]+)$/.exec(path);
    if (m) {
      const owner = this.authenticate(req);
      const id = decodeURIComponent(m[1]!);
      if (method === 'GET') {
        const rec = this.services.store.get(id, owner);
        if (!rec) throw new WireError('response_not_found', `Response with id '${id}' not found.`);
        return sendJson(res, 200, rec.response);
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
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch (err) {
      throw new WireError('invalid_json', `The request body is not valid JSON: ${(err as Error).message}`, null, { cause: err });
    }
    const metrics = new RunMetrics(this.services.clock.now);
    sendJson(res, 200, compactWindow(parseCompactBody(json), this.services, metrics, owner));
  }

  private async create(req: IncomingMessage, res: ServerResponse, owner: string | null): Promise<void> {
    const metrics = new RunMetrics(this.services.clock.now);
    const authAt = this.services.clock.now();
    if (this.auth.enabled) metrics.count('auth_checks');
    metrics.span('auth', authAt, authAt);
    const body = await readBody(req, this.services.limits.maxFrameBytes);
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch (err) {
      throw new WireError('invalid_json', `The request body is not valid JSON: ${(err as Error).message}`, null, { cause: err });
    }
    const params = withTimingOptIn(parseCreateBody(json), timingHeader(req));
    const plan = await httpPlan(params, this.services, metrics, owner);
    if (params.stream) return this.stream(res, plan);
    const run = new ResponseRun(plan, this.services, () => {});
    this.track(run);
    res.on('close', () => {
      if (!res.writableFinished) run.stop('cancelled', 'client_disconnected');
    });
    const response = await run.done;
    sendJson(res, response.status === 'failed' && response.error?.code === 'server_error' ? 500 : 200, response);
  }

  private async stream(res: ServerResponse, plan: RunPlan): Promise<void> {
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
    const run = new ResponseRun(plan, this.services, (e) => {
      if (!res.writableEnded && !res.destroyed) res.write(sseFrame(e));
    });
    this.track(run);
    res.on('close', () => {
      if (!run.ended) {
        run.detach();
        run.stop('cancelled', 'client_disconnected');
      }
    });
    await run.done;
    if (!res.destroyed) res.end('data: [DONE]\n\n');
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
    const runs = [...this.runs];
    for (const r of runs) r.stop('incomplete', 'server_shutdown');
    await Promise.all(runs.map((r) => r.done));
  }
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
  const data =
    e.type === 'error'
      ? { type: 'error', code: e.error.code, message: e.error.message, param: e.error.param, sequence_number: e.sequence_number }
      : e;
  return `event: ${e.type}\ndata: ${JSON.stringify(data)}\n\n`;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, err: WireError): void {
  sendJson(res, err.status, { error: { message: err.message, type: err.type, param: err.param, code: err.code } });
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (declared > limit) {
      req.resume();
      reject(new WireError('payload_too_large', `The request body is larger than ${limit} bytes.`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new WireError('payload_too_large', `The request body is larger than ${limit} bytes.`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
