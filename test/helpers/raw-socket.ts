/**
 * A raw WebSocket peer for protocol tests: sends frames exactly as given and
 * lets a test wait for the next event of a type (never a sleep).
 *
 * A wait fails fast instead of running into the test timeout: an `error`
 * event the test did not wait for rejects it with that event's content
 * (unless the test asked for errors to be skipped), and so does the socket
 * closing before the event came.
 */
import WebSocket from 'ws';
import { afterEach } from 'vitest';
import type { ServerEvent } from '../../src/protocol/events.js';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';

const open = new Set<RawSocket>();
afterEach(() => {
  for (const s of open) s.dispose();
  open.clear();
});

type Waiter = {
  type: ServerEvent['type'];
  skipErrors: boolean;
  resolve: (e: ServerEvent) => void;
  reject: (err: Error) => void;
};

export interface NextOptions {
  /** Pass over `error` events instead of failing on them (for tests that provoke errors and wait for what follows). */
  skipErrors?: boolean;
}

/** An `error` event arrived while the test waited for something else. */
export class UnexpectedErrorEvent extends Error {
  constructor(
    readonly event: Extract<ServerEvent, { type: 'error' }>,
    readonly awaited: string,
  ) {
    super(`waiting for ${awaited}, got an error event: ${JSON.stringify(event)}`);
    this.name = new.target.name;
  }
}

export class RawSocket {
  readonly events: ServerEvent[] = [];
  private cursor = 0;
  private waiters: Waiter[] = [];
  private closedWith: { code: number; reason: string } | undefined;
  private disposed = false;
  closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const e = JSON.parse(data.toString()) as ServerEvent;
      this.events.push(e);
      this.flush();
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closedWith = { code, reason: reason.toString() };
        this.flush();
        resolve(this.closedWith);
      }),
    );
  }

  /** Test teardown: drops any waits still pending (their test is over) and kills the socket. */
  dispose(): void {
    this.disposed = true;
    this.waiters = [];
    this.ws.terminate();
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
    return RawSocket.connect(url, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } });
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /**
   * The next event (after those already taken) of `type`; earlier events of
   * other types are skipped, except an `error` event (rejects, unless
   * `skipErrors`). Rejects if the socket closes first.
   */
  next<K extends ServerEvent['type']>(type: K, opts: NextOptions = {}): Promise<Extract<ServerEvent, { type: K }>> {
    return new Promise((resolve, reject) => {
      this.waiters.push({ type, skipErrors: opts.skipErrors ?? false, resolve: resolve as (e: ServerEvent) => void, reject });
      this.flush();
    });
  }

  private flush(): void {
    while (this.waiters.length > 0 && this.cursor < this.events.length) {
      const e = this.events[this.cursor++]!;
      const w = this.waiters[0]!;
      if (e.type === w.type) {
        this.waiters.shift();
        w.resolve(e);
      } else if (e.type === 'error' && !w.skipErrors) {
        this.waiters.shift();
        w.reject(new UnexpectedErrorEvent(e, w.type));
      }
    }
    // Every event has been read: nothing more can come on a closed socket.
    if (this.closedWith && !this.disposed) {
      const { code, reason } = this.closedWith;
      for (const w of this.waiters.splice(0)) w.reject(new Error(`waiting for ${w.type}, the socket closed (${code}${reason ? ` ${reason}` : ''})`));
    }
  }

  /** Events taken so far of a type. */
  all<K extends ServerEvent['type']>(type: K): Array<Extract<ServerEvent, { type: K }>> {
    return this.events.filter((e) => e.type === type) as Array<Extract<ServerEvent, { type: K }>>;
  }
}
