/**
 * A JSON event socket over `ws` for the WebSocket clients: opens
 * `ws://…/v1/responses` with the right beta header and query, hands each
 * parsed server event to one listener, and reports the close.
 */
import WebSocket from 'ws';
import type { ServerEvent } from '../protocol/events.js';
import type { SocketProtocol } from '../protocol/designs.js';

export interface SocketOptions {
  apiKey?: string;
  /** Extra upgrade headers. */
  headers?: Record<string, string>;
  /** `?protocol=` value (what a browser would use instead of the header). */
  protocol?: SocketProtocol;
  beta?: string;
  /** Ask for the server's `llr:timing` events (`?llr_timing=1` on the upgrade). Default true. */
  timing?: boolean;
}

/** `http://host:port[/v1]` or `ws://…` → `ws://host:port/v1/responses[?protocol=…]`. */
function responsesSocketUrl(base: string, protocol?: string, timing = false): string {
  const u = new URL(base);
  u.protocol = u.protocol === 'https:' || u.protocol === 'wss:' ? 'wss:' : 'ws:';
  u.pathname = u.pathname.replace(/\/+$/, '').replace(/\/v1(\/responses)?$/, '') + '/v1/responses';
  if (protocol) u.searchParams.set('protocol', protocol);
  if (timing) u.searchParams.set('llr_timing', '1');
  return u.toString();
}

export class EventSocket {
  onEvent: (e: ServerEvent) => void = () => {};
  onClose: (code: number, reason: string) => void = () => {};
  bytesSent = 0;
  bytesReceived = 0;

  private constructor(
    readonly ws: WebSocket,
    /** Whether this connection asked for `llr:timing` events. */
    readonly timing: boolean,
  ) {
    ws.on('message', (data) => {
      const text = data.toString();
      this.bytesReceived += Buffer.byteLength(text);
      this.onEvent(JSON.parse(text) as ServerEvent);
    });
    ws.on('close', (code, reason) => this.onClose(code, reason.toString()));
  }

  static open(base: string, opts: SocketOptions = {}): Promise<EventSocket> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.apiKey) headers['Authorization'] = `Bearer ${opts.apiKey}`;
    if (opts.beta) headers['OpenAI-Beta'] = opts.beta;
    const timing = opts.timing ?? true;
    const ws = new WebSocket(responsesSocketUrl(base, opts.protocol, timing), { headers });
    return new Promise((resolve, reject) => {
      ws.once('open', () => {
        ws.off('error', reject);
        ws.on('error', () => {});
        resolve(new EventSocket(ws, timing));
      });
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => {
        reject(new Error(`WebSocket upgrade refused with HTTP ${res.statusCode}`));
        res.resume();
      });
    });
  }

  send(event: object): void {
    const text = JSON.stringify(event);
    this.bytesSent += Buffer.byteLength(text);
    this.ws.send(text);
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      this.ws.once('close', () => resolve());
      this.ws.close(1000);
    });
  }
}
