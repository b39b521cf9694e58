/**
 * A raw WebSocket peer for protocol tests: sends frames exactly as given and
 * lets a test wait for the next event of a type (never a sleep).
 */
import WebSocket from 'ws';
import { afterEach } from 'vitest';
import type { ServerEvent } from '../../src/protocol/events.js';

const open = new Set<RawSocket>();
afterEach(() => {
  for (const s of open) s.ws.terminate();
  open.clear();
});

type Waiter = { pred: (e: ServerEvent) => boolean; resolve: (e: ServerEvent) => void };

export class RawSocket {
  readonly events: ServerEvent[] = [];
  private cursor = 0;
  private waiters: Waiter[] = [];
  closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const e = JSON.parse(data.toString()) as ServerEvent;
      this.events.push(e);
      this.flush();
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  static connect(url: string, opts: { query?: string; headers?: Record<string, string> } = {}): Promise<RawSocket> {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + '/v1/responses' + (opts.query ?? ''), { headers: opts.headers ?? {} });
    return new Promise((resolve, reject) => {
      ws.once('open', () => {
        const s = new RawSocket(ws);
        open.add(s);
        resolve(s);
      });
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })));
    });
  }

  static longLived(url: string): Promise<RawSocket> {
    return RawSocket.connect(url, { headers: { 'OpenAI-Beta': 'responses_websockets=2026-02-04' } });
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The next event (after those already taken) matching `type`; earlier non-matching events are skipped. */
  next<K extends ServerEvent['type']>(type: K): Promise<Extract<ServerEvent, { type: K }>> {
    return new Promise((resolve) => {
      this.waiters.push({ pred: (e) => e.type === type, resolve: resolve as (e: ServerEvent) => void });
      this.flush();
    });
  }

  private flush(): void {
    while (this.waiters.length > 0 && this.cursor < this.events.length) {
      const e = this.events[this.cursor++]!;
      const w = this.waiters[0]!;
      if (w.pred(e)) {
        this.waiters.shift();
        w.resolve(e);
      }
    }
  }

  /** Events taken so far of a type. */
  all<K extends ServerEvent['type']>(type: K): Array<Extract<ServerEvent, { type: K }>> {
    return this.events.filter((e) => e.type === type) as Array<Extract<ServerEvent, { type: K }>>;
  }
}
