/**
 * `HttpClient`: the agent-loop driver over HTTP + SSE (the baseline). Every
 * model call is a `POST /v1/responses` with `stream:true`. Two styles, as
 * real clients use them: `full` re-sends the whole conversation every time
 * with `store:false` (Codex), `stored` sends `previous_response_id` and only
 * the new items with `store:true` (the server loads the rest from its
 * database). A response ends at its terminal event; the stream is read to
 * its end, so an `llr:timing` event (asked for by default) is in the run's
 * timings when the run resolves.
 */
import { isTerminalEvent, type SseEvent } from '../protocol/events.js';
import type { FunctionCall, InputItem, Response } from '../protocol/objects.js';
import { AgentRun, ServerError, createBody, fetchOrSay, serverError, runTools, toInputItems, type AgentClient, type AgentRequest, type ToolExecutor } from './driver.js';

export interface HttpClientOptions {
  apiKey?: string;
  style?: 'full' | 'stored';
  /** Ask for the server's `llr:timing` events (`X-LLR-Timing: 1`). Default true. */
  timing?: boolean;
}

export class HttpClient implements AgentClient {
  readonly protocol = 'http' as const;
  private history: InputItem[] = [];
  private lastResponseId: string | null = null;
  bytesSent = 0;
  bytesReceived = 0;
  private readonly endpoint: string;
  /** The runs in flight: `close()` ends their requests. */
  private readonly inFlight = new Set<AbortController>();

  constructor(baseUrl: string, private readonly opts: HttpClientOptions = {}) {
    const u = new URL(baseUrl);
    u.pathname = u.pathname.replace(/\/+$/, '').replace(/\/v1(\/responses)?$/, '') + '/v1/responses';
    this.endpoint = u.toString();
  }

  /** Forget the conversation: the next run starts a new one. */
  newConversation(): void {
    this.history = [];
    this.lastResponseId = null;
  }

  run(request: AgentRequest, executeTool: ToolExecutor): AgentRun {
    const run = new AgentRun();
    const stop = new AbortController();
    this.inFlight.add(stop);
    const stored = this.opts.style === 'stored';
    const input = toInputItems(request.input);
    run.record(this.history, input);
    const loop = async () => {
      let send = stored && this.lastResponseId ? input : run.transcript.slice();
      let previous = stored ? this.lastResponseId : null;
      for (;;) {
        const { response, calls } = await this.post(request, send, previous, stored, run, stop.signal);
        run.responses.push(response);
        if (response.status !== 'completed' || calls.length === 0) {
          this.history = run.transcript.slice();
          this.lastResponseId = response.status === 'completed' ? response.id : null;
          return response;
        }
        const outputs = await runTools(calls, executeTool);
        run.record(outputs);
        send = stored ? outputs : run.transcript.slice();
        previous = stored ? response.id : null;
      }
    };
    loop()
      .finally(() => this.inFlight.delete(stop))
      .then((r) => run.resolve(r), (err: unknown) => run.reject(err));
    return run;
  }

  private async post(request: AgentRequest, input: InputItem[], previous: string | null, store: boolean, run: AgentRun, signal: AbortSignal) {
    const body = JSON.stringify({ ...createBody(request, input, previous, store), stream: true });
    this.bytesSent += Buffer.byteLength(body);
    const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'text/event-stream' };
    if (this.opts.timing ?? true) headers['X-LLR-Timing'] = '1';
    if (this.opts.apiKey) headers['Authorization'] = `Bearer ${this.opts.apiKey}`;
    const res = await fetchOrSay(this.endpoint, { method: 'POST', headers, body, signal });
    if (!res.ok || !res.body) {
      // Not JSON (a proxy's HTML error page) said as the status and the page's start; it was JSON.parse's
      // `Unexpected token '<'`.
      const text = await res.text();
      this.bytesReceived += Buffer.byteLength(text);
      throw serverError(res.status, text);
    }
    const calls: FunctionCall[] = [];
    let final: Response | null = null;
    for await (const e of sseEvents(res.body, (n) => (this.bytesReceived += n))) {
      run.push(e);
      if (e.type === 'response.output_item.done') {
        run.transcript.push(e.item);
        if (e.item.type === 'function_call') calls.push(e.item);
      } else if (isTerminalEvent(e)) {
        final = e.response;
      } else if (e.type === 'error') {
        if (!final) throw new ServerError(e.code, e.message, e.param);
      }
    }
    if (!final) throw new Error('the SSE stream ended without a terminal event');
    return { response: final, calls };
  }

  /**
   * End the runs in flight: a request being answered is dropped (the server ends its response as a disconnect),
   * and none of them sends another. It did nothing, so a run whose caller gave up (the demo's stopped race) went
   * on decoding its call at the model's pace for nobody.
   */
  async close(): Promise<void> {
    for (const stop of this.inFlight) stop.abort(new Error('the client was closed'));
    this.inFlight.clear();
  }
}

/**
 * Parse an SSE body into events (one JSON `data:` payload per event, `[DONE]` ends it), by the WHATWG
 * event-stream rules: a line ends at CRLF, CR or LF (a CRLF split across chunks is one line end), a blank
 * line ends the event, a `data` field's value drops one leading space, its lines are joined by LF; other
 * fields and comments are skipped, and an event left unfinished when the body ends is dropped. An event (its
 * lines so far) longer than `maxEventChars` ends the stream with an error: a body that never ends its line
 * grew the client's memory without bound.
 */
/**
 * The longest SSE event the clients read (`sseEvents`), in characters: 256 Mi, past the largest event this
 * server sends (a Response echoing a 16 MiB request and its output) and half of V8's longest string, so a
 * longer one is a clear error rather than a RangeError or an exhausted heap.
 */
export const MAX_SSE_EVENT_CHARS = 256 * 1024 * 1024;

export async function* sseEvents(body: AsyncIterable<Uint8Array>, onBytes: (n: number) => void = () => {}, maxEventChars = MAX_SSE_EVENT_CHARS): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  // The line being read, in pieces (no line end in them yet; joined once its end comes, so a long line sent
  // in many chunks is copied once, not once per chunk), and the data lines of the event being read.
  let pending: string[] = [];
  let data: string[] = [];
  // Characters held in `pending` and in `data`: the event being read.
  let pendingChars = 0;
  let dataChars = 0;
  const tooLong = () => new Error(`the server sent an SSE event longer than ${maxEventChars} characters; the stream is not read further`);
  // The last chunk ended in CR: a LF opening the next one ends the same line.
  let skipLf = false;
  const eol = /\r\n?|\n/g;
  for await (const chunk of body) {
    onBytes(chunk.byteLength);
    let text = decoder.decode(chunk, { stream: true });
    if (skipLf && text) {
      skipLf = false;
      if (text.charCodeAt(0) === 10) text = text.slice(1);
    }
    // Only the new text can hold a line end: the pending pieces were searched already.
    eol.lastIndex = 0;
    let start = 0;
    let m: RegExpExecArray | null;
    while ((m = eol.exec(text))) {
      let line = text.slice(start, m.index);
      if (pending.length > 0) {
        pending.push(line);
        line = pending.join('');
        pending = [];
        pendingChars = 0;
      }
      start = eol.lastIndex;
      if (m[0] === '\r' && start === text.length) skipLf = true;
      if (line === '') {
        if (data.length === 0) continue;
        const payload = data.join('\n');
        data = [];
        dataChars = 0;
        if (payload === '[DONE]') return;
        if (payload) yield JSON.parse(payload) as SseEvent;
        continue;
      }
      // The field name runs to the first colon (a line with none is a field with an empty value).
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      if (field !== 'data') continue;
      const value = colon < 0 ? '' : line.slice(line.charCodeAt(colon + 1) === 32 ? colon + 2 : colon + 1);
      dataChars += value.length + 1;
      if (dataChars > maxEventChars) throw tooLong();
      data.push(value);
    }
    if (start < text.length) {
      const rest = text.slice(start);
      pendingChars += rest.length;
      if (pendingChars + dataChars > maxEventChars) throw tooLong();
      pending.push(rest);
    }
  }
}
