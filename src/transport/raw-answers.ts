/**
 * Answers written on a raw socket, where Node's HTTP server gives no
 * `ServerResponse`: a request its parser refused (`clientError`), a `CONNECT`,
 * and an `Upgrade` to anything but a WebSocket, handed back to the HTTP server
 * as a plain request. Each waits behind the answers pipelined before it on the
 * socket (`afterAnswers`). Used by server.ts; the routes themselves are
 * transport/http.ts. Leaves out everything past the socket's first answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WireError } from '../protocol/errors.js';
import { newId } from '../protocol/objects.js';
import { loggedPath } from './auth.js';

/**
 * The HTTP server's `clientError` listener: a request Node's parser refuses (a bad chunk size, both
 * `Content-Length` and `Transfer-Encoding`, headers past the size limit, a version past HTTP/2.0 or the HTTP/2 preface: 505) or one that did not
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
        : // The parser's one code for a version it refuses ("Invalid HTTP version": 1.2, 3.0, the h2 preface's own
          // `PAUSED_H2_UPGRADE`) and for a request line malformed after it ("Expected CRLF after version": a bare LF,
          // junk): only the first is a version this server does not speak.
          (code === 'HPE_INVALID_VERSION' && /Invalid HTTP version/i.test(err.message)) || code === 'HPE_PAUSED_H2_UPGRADE'
          ? new WireError('http_version_not_supported')
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
    const requestId = newId('req', 16);
    log.info({ request_id: requestId, status: wire.status, code: wire.code, parser: code }, 'malformed request refused');
    afterAnswers(socket, () => answerRaw(socket, wire, requestId, own?.method === 'HEAD'), own);
    return;
  }
  if (answer && answer.headersSent) {
    log.debug({ err }, 'http client error');
    socket.destroy();
    return;
  }
  const requestId = newId('req', 16);
  log.info({ request_id: requestId, status: wire.status, code: wire.code, parser: code }, 'malformed request refused');
  answerRaw(socket, wire, requestId, own?.method === 'HEAD');
}

/** Sockets whose refusal (answerClientError) waits behind the answers before it. */
const refusing = new WeakSet<Duplex>();

/**
 * The HTTP server's `connect` listener: a `CONNECT` request (this server is no proxy). Node alone closes
 * the socket without a word; this answers 405 with the JSON error body, `Connection: close`.
 */
export function answerConnect(req: IncomingMessage, socket: Duplex, log: Logger): void {
  const wire = new WireError('method_not_allowed', 'CONNECT is not supported: this server is not a proxy.');
  const requestId = newId('req', 16);
  log.info({ request_id: requestId, status: wire.status, code: wire.code, method: 'CONNECT', path: loggedPath(req.url) }, 'request refused');
  afterAnswers(socket, () => answerRaw(socket, wire, requestId));
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

/**
 * A whole error answer written on a raw socket (no `ServerResponse`), then the socket closed. `requestId`: the answer's
 * `x-request-id`, as its log line names it (a new one when nothing logs the refusal). `head`: the request refused is a
 * HEAD, whose answer carries no content (RFC 9110 §9.3.2), its `Content-Length` the one a GET's would have: the JSON
 * body was written after it, and Node's client reported a parse error beside the answer (outside fuzzer atk88 F3).
 */
function answerRaw(socket: Duplex, wire: WireError, requestId = newId('req', 16), head = false): void {
  socket.on('error', () => {});
  // Its write side already shut (an answer before it closed the connection): whoever shut it closes it.
  if (!socket.writable) return;
  const body = JSON.stringify({ error: { message: wire.message, type: wire.type, param: null, code: wire.code } });
  const reason =
    { 400: 'Bad Request', 405: 'Method Not Allowed', 408: 'Request Timeout', 413: 'Payload Too Large', 431: 'Request Header Fields Too Large', 505: 'HTTP Version Not Supported' }[wire.status] ?? 'Error';
  // Closed once the answer is flushed, even if the peer never closes its side.
  socket.once('finish', () => socket.destroy());
  // An `x-request-id` as every other answer has (a 431 had none; outside conformance tester atk58), the one its log
  // line names (a fresh one was in no log; atk59).
  socket.end(
    `HTTP/1.1 ${wire.status} ${reason}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nx-request-id: ${requestId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${head ? '' : body}`,
  );
}
