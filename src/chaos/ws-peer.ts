/**
 * A chaos WebSocket peer: sends any frame (text, invalid UTF-8, binary),
 * checks every server event as it arrives (one response stream open at a
 * time: `response.created` opens it, the terminal event ends it), and lets
 * the scenario wait for a condition with a bound, so a silent server is a
 * hang, not a stuck harness.
 */
import WebSocket from 'ws';
import type { SocketProtocol } from '../protocol/designs.js';
import { StreamCheck, checkWsError } from './oracle.js';

type Obj = Record<string, unknown>;
export type WsProtocol = SocketProtocol;

export class WsPeer {
  readonly events: Obj[] = [];
  readonly streams: StreamCheck[] = [];
  current: StreamCheck | null = null;
  /** Complaints about events outside any stream or of a bad shape. */
  readonly problems: string[] = [];
  /** Errors with no response in flight: numbered by the connection's own counter (docs/protocol.md), not in a stream. */
  readonly connErrors = new Set<Obj>();
  private nextConnErrorSeq = 0;
  closeInfo: { code: number; reason: string } | null = null;
  /** Called synchronously with every event (after the checks), e.g. to kill the server at a precise moment. */
  onEvent: ((e: Obj) => void) | null = null;
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters = new Set<() => void>();

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    ws.on('error', () => {});
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        resolve(this.closeInfo);
        this.wake();
      });
    });
  }

  /** Events of a type seen so far. */
  count(type: string): number {
    return this.events.filter((e) => e['type'] === type).length;
  }

  /** Opts in to the server's `llr:timing` event (`?llr_timing=1`), so the oracle also checks where it comes in the stream. */
  static connect(url: string, protocol: WsProtocol, timeoutMs = 10_000): Promise<WsPeer> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/responses?protocol=${protocol}&llr_timing=1`, { handshakeTimeout: timeoutMs });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new WsPeer(ws)));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => {
        res.resume();
        reject(new Error(`upgrade refused with HTTP ${res.statusCode}`));
      });
    });
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send(frame: object): void {
    this.sendText(JSON.stringify(frame));
  }

  sendText(text: string | Buffer): void {
    if (this.open) this.ws.send(text, { binary: false });
  }

  sendBinary(bytes: Buffer): void {
    if (this.open) this.ws.send(bytes, { binary: true });
  }

  terminate(): void {
    this.ws.terminate();
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.close(1000);
    await Promise.race([this.closed, new Promise((r) => setTimeout(r, 2_000).unref())]);
    this.ws.terminate();
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.problems.push('binary frame from the server');
      return this.wake();
    }
    let e: Obj;
    try {
      e = JSON.parse(data.toString('utf8')) as Obj;
    } catch {
      this.problems.push(`non-JSON frame from the server: ${data.toString('utf8').slice(0, 80)}`);
      return this.wake();
    }
    this.events.push(e);
    const type = e['type'];
    const numbered = typeof e['sequence_number'] === 'number';
    if (type === 'error') {
      const bad = checkWsError(e);
      if (bad) this.problems.push(bad);
    }
    if (type === 'response.created') {
      if (this.current && !this.current.terminal) this.current.problems.push('a new response.created before this stream ended');
      this.current = new StreamCheck();
      this.streams.push(this.current);
      this.current.feed(e);
    } else if (type === 'error' && numbered && (!this.current || this.current.terminal)) {
      // No response in flight: the connection's own error counter, +1 per such error.
      const seq = e['sequence_number'] as number;
      if (seq !== this.nextConnErrorSeq) this.problems.push(`an error outside any response has sequence_number ${seq}, expected ${this.nextConnErrorSeq} (the connection's error counter)`);
      this.nextConnErrorSeq = seq + 1;
      this.connErrors.add(e);
    } else if (numbered) {
      if (!this.current) this.problems.push(`${String(type)} numbered but no response stream is open`);
      else this.current.feed(e);
    } else {
      this.problems.push(`${String(type)} without a sequence_number`);
    }
    this.onEvent?.(e);
    this.wake();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Resolves true once `cond()` holds (checked on every event and at close), false after `timeoutMs`. */
  until(cond: () => boolean, timeoutMs: number): Promise<boolean> {
    if (cond()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = () => {
        if (cond() || this.closeInfo) {
          this.waiters.delete(check);
          clearTimeout(timer);
          resolve(cond());
        }
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        resolve(cond());
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }
}
