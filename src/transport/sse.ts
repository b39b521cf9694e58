/**
 * How an HTTP create's events reach its client: as an SSE stream (`sseTransport`:
 * one frame per event in one write per event-loop turn, `data: [DONE]` at the
 * end, back-pressure against the send limit and the server-wide bound), or,
 * without `stream`, the final Response as JSON (`jsonTransport`). Used by
 * transport/http.ts, whose routes open the sessions these write for, and by
 * background responses' kept frames (`sseFrame`). Only moves bytes.
 */
import type { ServerResponse } from 'node:http';
import type { ServerEvent } from '../protocol/events.js';
import type { Response } from '../protocol/objects.js';
import { eventPieces, piecesLength, type EventPieces } from '../protocol/event-json.js';
import type { SendShare } from '../modes/send-bytes.js';
import type { Hold } from '../modes/server-bytes.js';
import type { Transport } from '../modes/transport.js';
import { batchWrites, type Batcher } from './batch.js';
import { drainedOrClosed, sendJsonCooperative } from './json-out.js';

/** A one-shot transport with how it writes the final answer (resolves once it is handed to the socket). */
export type ExchangeTransport = Transport & { end(response: Response): Promise<void> };
/** The SSE transport: also writes a frame serialised before (a background response's kept events). */
export type SseTransport = ExchangeTransport & { frame(pieces: EventPieces): void; start(): void; flush(): void };
/**
 * The SSE stream of a create on `res`: the headers go out when its
 * response starts (errors before that are HTTP statuses), each event is one
 * frame, `data: [DONE]` ends it. `dropped` is told what a reader that did
 * not read left unsent when it was dropped, the limit it passed, and the
 * response's id. `share`: the stream's part of the server-wide bound on
 * unsent bytes (modes/send-bytes.ts); past that bound a paced stream's run
 * waits for its reader from the bound's floor. Exported for the unit tests
 * (a batch of deltas against one `send` per delta). `heartbeatMs`: while the run is paused (after a `response.done`, a
 * long-lived run's pause, until its next event), an SSE comment `: keep-alive` this often (0: none), which SSE readers
 * skip: silent for the whole pause, the stream met clients' read timeouts while their tools ran.
 */
export function sseTransport(
  res: ServerResponse,
  limit: number,
  dropped: (buffered: number, limit: number, responseId: string | null) => void,
  paced = true,
  share: SendShare | null = null,
  heartbeatMs = 0,
): SseTransport {
  let congested = false;
  let beat: NodeJS.Timeout | null = null;
  const quiet = () => {
    if (beat === null) return;
    clearInterval(beat);
    beat = null;
  };
  const keepAlive = () => {
    if (res.writableEnded || res.destroyed) quiet();
    // Not while bytes wait unsent: a reader with something to read needs no keep-alive, and each comment the kernel took
    // was progress to the stall watch, so a client that read nothing was never dropped while paused (outside attack
    // atk113 F1). Its stream has then been quiet to the client for no longer than its unsent bytes have waited.
    else if (res.writableLength === 0) res.write(': keep-alive\n\n');
  };
  let responseId: string | null = null;
  // The largest frame of this stream: lifecycle events echo the request (tools, instructions), so
  // two of them can exceed the limit by themselves; as on a WebSocket (transport/ws-connection.ts), the limit
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
      res.once('close', quiet);
    },
    send(e) {
      if (res.writableEnded || res.destroyed) return;
      if (e.type === 'response.created') responseId = e.response.id;
      this.frame(sseFrame(e));
      // A pause: the stream is silent until the client's append resumes the run.
      if (e.type === 'response.done' && heartbeatMs > 0 && !res.destroyed) {
        beat = setInterval(keepAlive, heartbeatMs);
        beat.unref();
      }
    },
    // One frame already serialised (`sseFrame`): a background response's kept events (modes/background.ts).
    frame(pieces) {
      quiet();
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
      quiet();
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
    // Its response starts once all readers together are within the server-wide bound (modes/send-bytes.ts).
    room(bytes) {
      return paced && share !== null ? share.room(bytes) : null;
    },
    // Chaos knobs' injected disconnect: the stream ends (no terminal event, no [DONE]) and the connection closes.
    drop() {
      quiet();
      const socket = res.socket;
      res.end(() => socket?.destroy());
    },
    end() {
      quiet();
      if (!res.destroyed && !res.writableEnded) res.end('data: [DONE]\n\n');
      return Promise.resolve();
    },
  };
}

/** A create without `stream`: the final Response as JSON (500 when the server failed it), written in slices when large. */
export function jsonTransport(res: ServerResponse, hold?: Pick<Hold, 'admitted'>): ExchangeTransport {
  // The run has happened (stored, billed): its answer is charged to the byte budget unchecked, never refused for it.
  const charge = hold && { add: (k: number) => hold.admitted(k) };
  return {
    send() {},
    // Chaos knobs' injected disconnect: no answer, the connection is closed.
    drop: () => res.destroy(),
    async end(response) {
      if (res.destroyed) return;
      // An injected fault, too, is a server_error on the Response (protocol/errors.ts responseErrorCode).
      const fault = response.status === 'failed' && response.error?.code === 'server_error';
      // A 500 is read as an error body (the OpenAPI spec's ErrorResponse: `error` with `type`, `message`, `param`,
      // `code`; openai-node's APIError takes its `type` and `param` from it): the failed Response's `error` gains the
      // two fields the Response's own error object lacks, so the body is both. Before, the SDK's error had no `type`.
      const body = fault ? { ...response, error: { type: 'server_error', ...response.error, param: null } } : response;
      // The run behind a 500 has happened (stored, billed, recorded): the SDKs retry every 5xx by default
      // (openai-node twice), which ran the same create three times. `x-should-retry: false` tells them not to
      // (openai-node and the Agents SDK obey it; the AI SDK has no such header and retries a 500 all the same).
      if (fault) res.setHeader('x-should-retry', 'false');
      await sendJsonCooperative(res, fault ? 500 : 200, body, charge);
    },
  };
}

/** What an SSE frame of an event of `type` starts with (its JSON and a blank line follow). */
export function sseHead(type: string): string {
  return `event: ${type}\ndata: `;
}

/**
 * One SSE frame as pieces to write in order (`eventPieces`: one string, or a
 * large instructions or tools echo as shared bytes); JSON.stringify never emits a raw
 * CR/LF, so the framing holds.
 */
export function sseFrame(e: ServerEvent): EventPieces {
  // An `error`: the spec's flat fields, and the nested `error` the API sends, on which openai-node's stream throws
  // (LangChain and the Agents SDK read through it); flat alone, they took a failed stream for a success.
  const data =
    e.type === 'error'
      ? { type: 'error', code: e.error.code, message: e.error.message, param: e.error.param, sequence_number: e.sequence_number, error: e.error }
      : e;
  const p = eventPieces(data);
  const head = sseHead(e.type);
  // The frame's end as a piece of its own when the event has shared bytes: the same corked write either way.
  return p.length === 1 ? [`${head}${p[0]}\n\n`] : [`${head}${p[0]}`, ...p.slice(1), '\n\n'];
}
