/**
 * The WebSocket transport on `GET /v1/responses`: it authenticates the
 * upgrade, picks the protocol (long-lived or ws mode) from the `OpenAI-Beta`
 * header or the `?protocol=` query (browsers cannot set headers), and then
 * only moves bytes: text frames are parsed at the edge into client events
 * for the connection's session; events go out as one JSON text frame each.
 *
 * Limits: frames over `maxFrameBytes` close the socket with 1009 (the `ws`
 * library's `maxPayload`); binary frames get an error event; the connection
 * lifetime limit sends the documented error and closes; more than
 * `maxSendBufferBytes` unsent to a client that does not read drops it. The socket stays
 * open after any error event.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { WireError, toWireError } from '../protocol/errors.js';
import { parseClientFrame, withTimingOptIn } from '../protocol/parse.js';
import { timingHeader } from './http.js';
import { newId } from '../protocol/objects.js';
import type { ServerEvent } from '../protocol/events.js';
import type { Services } from '../engine/services.js';
import type { Protocol } from '../engine/run.js';
import { ConnectionSession, type ModePolicy, type SessionInfo } from '../modes/session.js';
import type { Authenticator } from './auth.js';

export const LONG_LIVED_BETA = 'responses_websockets=2026-02-04';
export const WS_MODE_BETA = 'responses_websockets=2026-02-06';

export type PolicyFactory = (protocol: Exclude<Protocol, 'http'>, info: SessionInfo) => ModePolicy;

export interface WsTransportOptions {
  services: Services;
  auth: Authenticator;
  policies: PolicyFactory;
  /** Answer every upgrade with 426 (clients such as Codex then fall back to HTTP). */
  refuseUpgrades: () => boolean;
}

/** Which protocol an upgrade asks for, or an error message for a bad `?protocol=`. */
export function chooseProtocol(req: IncomingMessage, url: URL): Exclude<Protocol, 'http'> | { error: string } {
  const q = url.searchParams.get('protocol');
  if (q === 'long-lived' || q === 'ws') return q;
  if (q !== null) return { error: `Unknown protocol '${q}': use 'long-lived' or 'ws'.` };
  const beta = req.headers['openai-beta'];
  const values = (Array.isArray(beta) ? beta : [beta ?? '']).flatMap((v) => v.split(',')).map((v) => v.trim());
  return values.includes(LONG_LIVED_BETA) ? 'long-lived' : 'ws';
}

export class WsTransport {
  private readonly wss: WebSocketServer;
  readonly sessions = new Set<ConnectionSession>();
  private readonly idleWaiters: Array<() => void> = [];

  constructor(private readonly opts: WsTransportOptions) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: opts.services.limits.maxFrameBytes });
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== '/v1/responses') return refuse(socket, 404, { code: 'not_found', message: `No WebSocket endpoint at ${url.pathname}.` });
    if (this.opts.refuseUpgrades()) return refuse(socket, 426, { code: 'upgrade_required', message: 'WebSockets are switched off on this server; use HTTP.' });
    const protocol = chooseProtocol(req, url);
    if (typeof protocol === 'object') return refuse(socket, 400, { code: 'invalid_value', message: protocol.error });
    const authStart = this.opts.services.clock.now();
    const owner = this.opts.auth.check(req, url);
    const authEnd = this.opts.services.clock.now();
    if (owner === false) return refuse(socket, 401, { code: 'unauthorized', message: 'Missing or invalid API key.' });
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      // Opt in to `llr:timing` for every response of the connection (header, or query for browsers).
      const timing = timingHeader(req) || url.searchParams.get('llr_timing') === '1';
      this.accept(ws, protocol, { connection: newId('conn', 16), owner, authSpan: { start: authStart, end: authEnd } }, timing);
    });
  }

  private accept(ws: WebSocket, protocol: Exclude<Protocol, 'http'>, info: SessionInfo, timing: boolean): void {
    const { services } = this.opts;
    const log = services.log.child({ conn: info.connection, protocol });
    const send = (e: ServerEvent) => {
      if (ws.readyState !== ws.OPEN) return;
      // A client that stops reading must not make the server hold its stream
      // in memory without bound: past the limit the connection is dropped
      // (a close frame could not reach a peer that does not read), which
      // cancels its run like a disconnect.
      if (ws.bufferedAmount > services.limits.maxSendBufferBytes) {
        log.warn({ buffered: ws.bufferedAmount }, 'send buffer limit reached; dropping the connection');
        ws.terminate();
        return;
      }
      ws.send(JSON.stringify(e));
    };
    const session = new ConnectionSession(this.opts.policies(protocol, info), services, info, send, log);
    this.sessions.add(session);
    log.info('websocket connected');

    ws.on('message', (data, isBinary) => {
      if (isBinary) return session.error(new WireError('binary_frame'));
      let text: string;
      try {
        text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as Buffer).toString('utf8');
        const event = parseClientFrame(text);
        session.handle(event.type === 'response.create' ? withTimingOptIn(event, timing) : event);
      } catch (err) {
        session.error(toWireError(err));
      }
    });
    const lifetime = setTimeout(() => {
      session.error(new WireError('websocket_connection_limit_reached', limitMessage(services.limits.connectionLifetimeMs)));
      ws.close(1000, 'connection limit reached');
    }, services.limits.connectionLifetimeMs);
    ws.on('error', (err) => log.debug({ err }, 'websocket error'));
    ws.on('close', (code) => {
      clearTimeout(lifetime);
      log.info({ code }, 'websocket closed');
      void session.close().finally(() => {
        this.sessions.delete(session);
        if (this.sessions.size === 0) for (const w of this.idleWaiters.splice(0)) w();
      });
    });
  }

  /** Resolves once no connection is open and every closed one is fully wound down. */
  idle(): Promise<void> {
    if (this.sessions.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Shutdown: every session's run in flight ends `incomplete`, then sockets close. */
  async shutdown(): Promise<void> {
    await Promise.all([...this.sessions].map((s) => s.shutdown()));
    for (const ws of this.wss.clients) ws.close(1001, 'server shutting down');
    this.wss.close();
  }
}

function limitMessage(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  return `Responses websocket connection limit reached (${minutes} minutes). Create a new websocket connection to continue.`;
}

function refuse(socket: Duplex, status: number, error: { code: string; message: string }): void {
  const body = JSON.stringify({ error: { ...error, type: status === 401 ? 'authentication_error' : 'invalid_request_error', param: null } });
  const reason = { 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 426: 'Upgrade Required' }[status] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
