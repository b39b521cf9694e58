/**
 * `LongLivedHttpClient`: the agent-loop driver over the long-lived protocol
 * on plain HTTP (`long-lived-http`). One `POST /v1/responses?protocol=long-lived`
 * with `stream:true` per run, read as one SSE stream; at every
 * `response.done` it runs the pending tool calls and sends their outputs with
 * `POST /v1/responses/{id}/append` (202), and reads on in the same stream
 * without waiting for the 202 (as a `response.append` frame is not
 * acknowledged either): the resumed run's events are not held behind it.
 * The run resolves at the terminal event; the stream is read to its end so
 * an `llr:timing` event (asked for by default with `X-LLR-Timing: 1`) lands
 * in the run's timings, and timing is optional (a server that sends none
 * only ends the run's telemetry when the stream ends).
 *
 * An append the server refuses fails the run, and the client closes the
 * stream (the server then ends the run as a disconnect). One run at a time
 * per client. Imports only `protocol/` (and the shared driver and SSE reader).
 *
 * The stream is read with `node:http`, not `fetch`: while the run is paused
 * nothing is sent on it, and `fetch` gives up on a body silent for 300 s
 * (undici's body timeout), so a tool call that took five minutes failed the
 * run (`UND_ERR_BODY_TIMEOUT`), though the server waits for outputs for
 * `--pause-timeout-ms` (10 minutes by default). The appends stay on `fetch`.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isTerminalEvent, type SseErrorEvent } from '../protocol/events.js';
import type { FunctionCall, InputItem, Response } from '../protocol/objects.js';
import { AgentRun, ServerError, appendRefused, busyRun, fetchOrSay, serverError, createBody, pausedCalls, runTools, toInputItems, type AgentClient, type AgentRequest, type ToolExecutor } from './driver.js';
import { sseEvents } from './http.js';

export interface LongLivedHttpClientOptions {
  apiKey?: string;
  /** Ask for the server's `llr:timing` events (`X-LLR-Timing: 1`). Default true. */
  timing?: boolean;
}

export class LongLivedHttpClient implements AgentClient {
  readonly protocol = 'long-lived-http' as const;
  bytesSent = 0;
  bytesReceived = 0;
  private current: AgentRun | null = null;
  /** The id of the response in flight (known from `response.created`), for `cancel()`. */
  private currentId: string | null = null;
  private stream: AbortController | null = null;
  /** `cancel()` was called for the run in flight: its tools are not run, nor their outputs appended. */
  private cancelling = false;
  /**
   * `cancel()` calls made before the run had an id (its create still being planned): the cancel is posted at its
   * `response.created`, and they settle with that post (or when the run ends without one).
   */
  private cancelWaiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  /** The conversation so far: a follow-up run re-sends it in full (the protocol has no previous_response_id). */
  private history: InputItem[] = [];
  private readonly base: string;

  constructor(baseUrl: string, private readonly opts: LongLivedHttpClientOptions = {}) {
    const u = new URL(baseUrl);
    u.pathname = u.pathname.replace(/\/+$/, '').replace(/\/v1(\/responses)?$/, '') + '/v1/responses';
    u.search = '';
    this.base = u.toString();
  }

  run(request: AgentRequest, executeTool: ToolExecutor): AgentRun {
    if (this.current && !this.current.done) return busyRun();
    const timing = this.opts.timing ?? true;
    const run = new AgentRun(timing);
    this.current = run;
    this.cancelling = false;
    const input = [...this.history, ...toInputItems(request.input)];
    run.record(input);
    const abort = new AbortController();
    this.stream = abort;
    const fail = (err: unknown) => {
      // The first failure is the run's; closing the stream then ends the run on the server as a disconnect does.
      run.reject(err);
      abort.abort();
      run.endTelemetry();
    };
    this.loop(request, input, executeTool, run, abort, fail)
      .then(() => run.endTelemetry(), fail)
      // A cancel still waiting for an id: the run ended without one (refused, or its stream failed), nothing to cancel.
      .finally(() => this.settleCancels());
    return run;
  }

  private async loop(
    request: AgentRequest,
    input: InputItem[],
    exec: ToolExecutor,
    run: AgentRun,
    abort: AbortController,
    fail: (err: unknown) => void,
  ): Promise<void> {
    const body = JSON.stringify({ ...createBody(request, input, null, request.store ?? false), stream: true });
    const res = await this.openStream(`${this.base}?protocol=long-lived`, body, abort.signal);
    let calls: FunctionCall[] = [];
    let final: Response | null = null;
    let lastError: ServerError | null = null;
    for await (const e of sseEvents(res, (n) => (this.bytesReceived += n))) {
      run.push(e);
      if (isTerminalEvent(e)) {
        final = e.response;
        run.responses.push(final);
        if (final.status === 'completed') this.history = run.transcript.slice();
        this.currentId = null;
        run.resolve(final);
        continue;
      }
      switch (e.type) {
        case 'response.created':
          this.currentId = e.response.id;
          // Cancelled while its create was planned: cancelled now that it has an id.
          if (this.cancelWaiters.length > 0) {
            const posted = this.postCancel(e.response.id);
            void posted.then(() => this.settleCancels(), (err: unknown) => this.settleCancels(err));
          }
          break;
        case 'response.done': {
          // Being cancelled: its next event is `response.cancelled`; its tools are not run.
          if (this.cancelling) {
            calls = [];
            break;
          }
          const due = pausedCalls(e.response, calls);
          calls = [];
          const id = e.response.id;
          void runTools(due, exec)
            .then(async (outputs) => {
              run.record(outputs);
              // Cancelled while the tools ran: the stream's next event is `response.cancelled`. Closed (`close()`) or
              // failed meanwhile: this run's stream is aborted and the run over, so its outputs go nowhere. The
              // run's own signal, not client state: a later run on this client resets `cancelling`. Ended meanwhile
              // (`run.done`: its terminal event came, e.g. `response.cancelled` after a cancel()): the response is over,
              // and `cancelling` may already be a later run's (reset by its run()), so it no longer says so.
              if (this.cancelling || abort.signal.aborted || run.done) return;
              await this.post(`${this.base}/${encodeURIComponent(id)}/append`, JSON.stringify({ input: outputs })).catch((err: unknown) => {
                throw appendRefused(err);
              });
            })
            .catch(fail);
          break;
        }
        case 'response.output_item.done':
          // An output item goes back as input as it is.
          run.transcript.push(e.item);
          if (e.item.type === 'function_call') calls.push(e.item);
          break;
        case 'error':
          // Within a run an error precedes its terminal event; it only fails the run if none follows.
          lastError = errorOf(e);
          break;
        default:
          break;
      }
    }
    if (!final) throw lastError ?? new Error('the SSE stream ended without a terminal event');
  }

  private headers(): Record<string, string> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'text/event-stream' };
    if (this.opts.timing ?? true) headers['X-LLR-Timing'] = '1';
    if (this.opts.apiKey) headers['Authorization'] = `Bearer ${this.opts.apiKey}`;
    return headers;
  }

  /** POST the create and open its SSE stream, with no read timeout (see the file's comment); a non-2xx answer becomes the server's error. */
  private openStream(url: string, body: string, signal: AbortSignal): Promise<IncomingMessage> {
    this.bytesSent += Buffer.byteLength(body);
    const request = new URL(url).protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<IncomingMessage>((resolve, reject) => {
      // Not `request`'s own `signal` option, nor a destroy with an error: the abort (`close()`) comes right after the
      // run's terminal event, when the stream may have just ended, and the error was then emitted on a socket nobody
      // listened to any more: an uncaught AbortError ended the process (`llr run` closes its client after each run).
      // An abort ends a stream still open; the reader then sees it end early.
      let response: IncomingMessage | null = null;
      const req = request(url, { method: 'POST', headers: { ...this.headers(), 'Content-Length': Buffer.byteLength(body) } }, (res) => {
        response = res;
        res.once('close', stopWatching);
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) return resolve(res);
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('error', reject);
        res.on('end', () => {
          this.bytesReceived += Buffer.byteLength(text);
          reject(serverError(status, text));
        });
      });
      const abort = () => {
        stopWatching();
        if (!response?.complete) req.destroy();
      };
      const stopWatching = () => signal.removeEventListener('abort', abort);
      if (signal.aborted) abort();
      else signal.addEventListener('abort', abort, { once: true });
      req.once('close', stopWatching);
      req.on('error', reject);
      req.end(body);
    });
  }

  /** POST JSON; a non-2xx answer becomes the server's error. */
  private async post(url: string, body: string): Promise<globalThis.Response> {
    this.bytesSent += Buffer.byteLength(body);
    const res = await fetchOrSay(url, { method: 'POST', headers: this.headers(), body });
    if (res.ok && res.body) {
      if (res.headers.get('content-type')?.startsWith('text/event-stream')) return res;
      // A JSON answer (an append's `{}`): read it all so the connection is reused.
      this.bytesReceived += Buffer.byteLength(await res.text());
      return res;
    }
    const text = await res.text();
    this.bytesReceived += Buffer.byteLength(text);
    throw serverError(res.status, text);
  }

  /** Cancel the run in flight (`POST /v1/responses/{id}/cancel`); its stream then ends with `response.cancelled`. */
  async cancel(): Promise<void> {
    if (this.currentId) {
      this.cancelling = true;
      await this.postCancel(this.currentId);
      return;
    }
    // A run whose create is still being planned has no id yet: its cancel is posted at its `response.created`.
    if (!this.current || this.current.done) return;
    this.cancelling = true;
    await new Promise<void>((resolve, reject) => this.cancelWaiters.push({ resolve, reject }));
  }

  private async postCancel(id: string): Promise<void> {
    await this.post(`${this.base}/${encodeURIComponent(id)}/cancel`, '{}');
  }

  /** Settle the `cancel()` calls waiting for the run's id: with the post's error, if it failed. */
  private settleCancels(err?: unknown): void {
    for (const w of this.cancelWaiters.splice(0)) {
      if (err === undefined) w.resolve();
      else w.reject(err);
    }
  }

  /** Forget the conversation: the next run starts a new one. */
  newConversation(): void {
    this.history = [];
  }

  /** Close the stream of a run still in flight (the server ends it as a disconnect). */
  async close(): Promise<void> {
    this.stream?.abort();
    this.stream = null;
  }
}

function errorOf(e: SseErrorEvent): ServerError {
  // Another server may leave a field out: read each as it came.
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return new ServerError(text(e.code) ?? 'server_error', text(e.message) ?? 'The server sent an error event.', text(e.param));
}
