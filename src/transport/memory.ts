/**
 * The in-memory transport: a linked pair of a session's `Transport` and a
 * client end, with no socket between them, so the sessions, the policies
 * and the engine get unit tests without the network (the MCP SDK's
 * in-memory pair is the model). Like the WebSocket transport it only moves
 * text: what the client sends is serialised and parsed at the same edge
 * (`parseClientFrame`), and every event the session sends is copied through
 * JSON as the wire would.
 *
 * `oneShot` makes it behave like one HTTP request: the session's errors
 * with no response in flight arrive as refusals (an HTTP status and body
 * on the wire) and the final Response of each run as an answer.
 *
 * For tests and tools; the server does not use it. It keeps everything it
 * received, so it is not for long runs.
 */
import { toWireError, type WireError } from '../protocol/errors.js';
import type { ServerEvent } from '../protocol/events.js';
import type { Response } from '../protocol/objects.js';
import type { Protocol } from '../protocol/designs.js';
import { parseClientFrame } from '../protocol/parse.js';
import { eventJson } from '../protocol/event-json.js';
import type { Logger } from 'pino';
import type { SessionSet } from '../modes/host.js';
import type { ConnectionSession } from '../modes/session.js';
import type { SessionInfo, Transport } from '../modes/transport.js';

/** What the client end received, in order. */
export type Received =
  | { kind: 'event'; event: ServerEvent }
  | { kind: 'started' }
  | { kind: 'answer'; response: Response }
  | { kind: 'refused'; error: WireError }
  | { kind: 'dropped' };

export interface MemoryPairOptions {
  /** Behave like one HTTP request (see the header). Default false: a WebSocket connection. */
  oneShot?: boolean;
}

/** The client end of the pair; `transport` is the end a session is given. */
export class MemoryClient {
  readonly received: Received[] = [];
  private waiters: Array<{ match: (r: Received) => boolean; resolve: (r: Received) => void }> = [];
  private linked: ConnectionSession | null = null;
  readonly transport: Transport;

  /** A client linked to a new session of `protocol` opened in `sessions` (what a transport does on accept). */
  static connect(sessions: SessionSet, protocol: Protocol, info: SessionInfo, log: Logger, opts: MemoryPairOptions = {}): MemoryClient {
    const client = new MemoryClient(opts);
    client.attach(sessions.openSession(protocol, client.transport, info, log));
    return client;
  }

  constructor(opts: MemoryPairOptions = {}) {
    const transport: Transport = {
      send: (e) => this.receive({ kind: 'event', event: JSON.parse(eventJson(e)) as ServerEvent }),
      drop: () => this.receive({ kind: 'dropped' }),
    };
    if (opts.oneShot) {
      transport.start = () => this.receive({ kind: 'started' });
      transport.ended = (response) => this.receive({ kind: 'answer', response: JSON.parse(JSON.stringify(response)) as Response });
      transport.refuse = (error) => this.receive({ kind: 'refused', error });
    }
    this.transport = transport;
  }

  /** Link the session that was given `transport`. */
  attach(session: ConnectionSession): void {
    this.linked = session;
  }

  /** The session on the other end. */
  get session(): ConnectionSession {
    if (!this.linked) throw new Error('MemoryClient: no session attached');
    return this.linked;
  }

  /** Send a client event (or raw text) through the edge parser, as a frame would arrive. */
  send(event: object | string): void {
    const text = typeof event === 'string' ? event : JSON.stringify(event);
    try {
      this.session.handle(parseClientFrame(text), Buffer.byteLength(text));
    } catch (err) {
      this.session.error(toWireError(err));
    }
  }

  /** The peer is gone. */
  close(reason?: string): Promise<void> {
    return this.session.close(reason);
  }

  /** The server events received so far. */
  get events(): ServerEvent[] {
    return this.received.flatMap((r) => (r.kind === 'event' ? [r.event] : []));
  }

  /** The next thing received from now on that `match` accepts. */
  next(match: (r: Received) => boolean): Promise<Received> {
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }

  /** The next server event of `type` from now on. */
  async nextEvent<K extends ServerEvent['type']>(type: K): Promise<Extract<ServerEvent, { type: K }>> {
    const r = await this.next((x) => x.kind === 'event' && x.event.type === type);
    if (r.kind !== 'event') throw new Error('unreachable: matched an event');
    return r.event as Extract<ServerEvent, { type: K }>;
  }

  private receive(r: Received): void {
    this.received.push(r);
    this.waiters = this.waiters.filter((w) => {
      if (!w.match(r)) return true;
      w.resolve(r);
      return false;
    });
  }
}
