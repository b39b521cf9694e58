/**
 * What the two WebSocket clients (`LongLivedClient`, `WsClient`) share: one
 * `EventSocket`, one run at a time, the conversation kept for a follow-up
 * run, `llr:timing` events routed to their run by response id, and the byte
 * counters of the socket. Each subclass keeps only its design's policy: what
 * it sends and what it does at a terminal event or a pause.
 */
import { isTimingEvent, type ServerEvent, type TimingEvent } from '../protocol/events.js';
import type { InputItem, Response } from '../protocol/objects.js';
import { AgentRun, TimingRoutes, busyRun } from './driver.js';
import type { EventSocket } from './socket.js';

export abstract class SocketClient {
  protected current: AgentRun | null = null;
  /** The conversation at the end of the last completed run. */
  protected history: InputItem[] = [];
  protected readonly timings = new TimingRoutes();

  protected constructor(readonly socket: EventSocket) {}

  get bytesSent(): number {
    return this.socket.bytesSent;
  }

  get bytesReceived(): number {
    return this.socket.bytesReceived;
  }

  /**
   * Start a run whose events go to `onEvent` (after being pushed to the
   * run; timing events are routed instead); a busy run when one is in flight.
   */
  protected begin(onEvent: (e: Exclude<ServerEvent, TimingEvent>) => void): AgentRun {
    if (this.current && !this.current.done) return busyRun();
    const run = new AgentRun(this.socket.timing);
    this.current = run;
    this.socket.onEvent = (e: ServerEvent) => {
      if (isTimingEvent(e)) {
        this.timings.deliver(e);
        return;
      }
      run.push(e);
      onEvent(e);
    };
    return run;
  }

  /** A response of `run` reached its terminal event: kept, and its timing expected. */
  protected ended(run: AgentRun, response: Response): void {
    run.responses.push(response);
    if (this.socket.timing) this.timings.expect(response.id, run);
  }

  /** Forget the conversation: the next run starts a new one. */
  newConversation(): void {
    this.history = [];
  }

  close(): Promise<void> {
    return this.socket.close();
  }
}
