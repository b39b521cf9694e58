/**
 * A chaos HTTP client: any method, path, headers and body bytes, one fresh
 * connection per request, a bound on the whole answer; and the checks of
 * what came back: a JSON error body for a 4xx, never a 5xx for client input,
 * a Response object, or an SSE stream whose events number without a gap,
 * end with one terminal event and then `data: [DONE]`; and a long-lived run's
 * SSE stream opened and read as it arrives (`openRun`, `LiveStream`).
 */
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { StreamCheck, checkHttpErrorBody } from './oracle.js';

export interface HttpInput {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  label: string;
}

export type HttpOutcome =
  | { kind: 'answer'; status: number; contentType: string; body: Buffer }
  | { kind: 'hang' }
  | { kind: 'reset'; message: string }
  | { kind: 'unsendable'; message: string };

export function send(url: string, input: HttpInput, timeoutMs: number): Promise<HttpOutcome> {
  return open(url, input, timeoutMs, () => null) as Promise<HttpOutcome>;
}

/**
 * `send`, where `take` may keep an answer as a stream instead (it reads the response itself, e.g. an SSE stream
 * that stays open): then `{kind: 'stream', stream}`, as soon as its head arrives. The bound is on the head then.
 */
export function open<T>(url: string, input: HttpInput, timeoutMs: number, take: (res: IncomingMessage, req: ClientRequest) => T | null): Promise<HttpOutcome | { kind: 'stream'; stream: T }> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (o: HttpOutcome | { kind: 'stream'; stream: T }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(o);
    };
    let req: ClientRequest;
    try {
      const headers = { ...input.headers, ...(input.body ? { 'Content-Length': String(input.body.length) } : {}) };
      req = request(`${url}${input.path}`, { method: input.method, headers, agent: false }, (res) => {
        const stream = take(res, req);
        if (stream !== null) return finish({ kind: 'stream', stream });
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => finish({ kind: 'answer', status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks) }));
        res.on('error', (err) => finish({ kind: 'reset', message: `response aborted: ${err.message}` }));
        res.on('aborted', () => finish({ kind: 'reset', message: 'response aborted' }));
      });
    } catch (err) {
      // node refuses to send it (e.g. a character not allowed in a path or header): not an input.
      resolve({ kind: 'unsendable', message: (err as Error).message });
      return;
    }
    const timer = setTimeout(() => {
      req.destroy();
      finish({ kind: 'hang' });
    }, timeoutMs);
    req.on('error', (err) => finish({ kind: 'reset', message: err.message }));
    req.end(input.body);
  });
}

/** A run's SSE stream as it arrives: checked frame by frame, with a bounded wait on what it has shown. */
export class LiveStream {
  readonly sse = new SseCheck();
  /** The body ended (`end`), or the connection broke (`broken` says how). */
  over = false;
  broken: string | null = null;
  private readonly decoder = new StringDecoder('utf8');
  private readonly waiters = new Set<() => void>();

  constructor(readonly req: ClientRequest) {}

  feed(chunk: Buffer): void {
    this.sse.push(this.decoder.write(chunk));
    this.wake();
  }

  finish(broken: string | null): void {
    if (this.over) return;
    this.over = true;
    this.broken = broken;
    if (!broken) this.sse.push(this.decoder.end());
    this.wake();
  }

  /** Resolves true once `pred` holds (checked at each chunk and at the end), false after `ms`. */
  until(pred: () => boolean, ms: number): Promise<boolean> {
    if (pred()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = () => {
        if (!pred() && !this.over) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(pred());
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        resolve(pred());
      }, ms);
      this.waiters.add(check);
    });
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}

/** Open a run: its SSE stream when the server starts one, else the whole answer (an error), bounded by `ms`. */
export function openRun(url: string, input: HttpInput, ms: number): ReturnType<typeof open<LiveStream>> {
  return open(url, input, ms, (res, req) => {
    if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) return null;
    const live = new LiveStream(req);
    res.on('data', (c: Buffer) => live.feed(c));
    res.on('end', () => live.finish(null));
    res.on('aborted', () => live.finish('the stream was cut'));
    res.on('error', (err) => live.finish(err.message));
    return live;
  });
}

export interface SseResult {
  stream: StreamCheck;
  done: boolean;
  problems: string[];
}

/**
 * An SSE body checked as it arrives (`push` each chunk's text, `end` once the
 * body is over): each frame one `event:` line naming its data's `type` and
 * one `data:` line of JSON, the events numbered without a gap and ending with
 * one terminal event (`StreamCheck`), nothing after `data: [DONE]`, which must
 * come. This server frames every event with LF line ends and a blank line,
 * and the check holds it to that.
 */
export class SseCheck {
  readonly stream = new StreamCheck();
  readonly problems: string[] = [];
  done = false;
  private rest = '';

  push(text: string): void {
    const frames = (this.rest + text).split('\n\n');
    this.rest = frames.pop()!;
    for (const frame of frames) this.frame(frame);
  }

  /** The body is over: its problems, the stream's included. */
  end(): SseResult {
    if (this.rest.trim()) this.problems.push(`the body ends inside an SSE frame: ${this.rest.slice(0, 80)}`);
    this.rest = '';
    if (!this.done) this.problems.push('no data: [DONE]');
    return { stream: this.stream, done: this.done, problems: this.problems };
  }

  private frame(frame: string): void {
    if (!frame.trim()) return;
    const lines = frame.split('\n');
    const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
    const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
    if (data.length !== 1) {
      this.problems.push(`SSE frame with ${data.length} data lines`);
      return;
    }
    if (data[0] === '[DONE]') {
      this.done = true;
      return;
    }
    if (this.done) this.problems.push('an event after [DONE]');
    let e: Record<string, unknown>;
    try {
      e = JSON.parse(data[0]!) as Record<string, unknown>;
    } catch {
      this.problems.push(`SSE data is not JSON: ${data[0]!.slice(0, 80)}`);
      return;
    }
    if (event !== e['type']) this.problems.push(`event: ${event} but data.type ${String(e['type'])}`);
    if (e['type'] === 'error' && (typeof e['code'] !== 'string' || typeof e['message'] !== 'string')) this.problems.push('SSE error without code/message');
    this.stream.feed(e);
  }
}

/** Parse and check a whole SSE body. */
export function checkSse(body: string): SseResult {
  const check = new SseCheck();
  check.push(body);
  return check.end();
}

/** A non-2xx answer must be a JSON error body with a 4xx status. Returns a complaint or null. */
export function checkErrorAnswer(status: number, contentType: string, body: Buffer, method: string): string | null {
  if (status >= 500) {
    let code = '';
    try {
      code = String((JSON.parse(body.toString('utf8')) as { error?: { code?: string } }).error?.code ?? '');
    } catch {
      code = body.toString('utf8').slice(0, 60);
    }
    return `HTTP ${status} ${code} for client input`;
  }
  if (method === 'HEAD') return null;
  if (!contentType.startsWith('application/json')) return `HTTP ${status} with content-type '${contentType}'`;
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return `HTTP ${status} body is not JSON`;
  }
  return checkHttpErrorBody(json);
}
