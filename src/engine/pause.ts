/**
 * The pause registry: one p-defer per pending `call_id` of a paused run. It
 * owns every deferred it creates and always settles them: resolved by an
 * append with the call's output, rejected by cancel, timeout, disconnect or
 * shutdown. After `close()` nothing can register, so a late callback cannot
 * leave a promise pending.
 *
 * A `call_id` is the only thing an output can name, so two pending calls may
 * never share one: `wait()` refuses a duplicate (within the batch or against
 * a call still pending) before registering anything, and `close()` settles
 * every deferred it ever made, not only those its map still indexes.
 */
import pDefer, { type DeferredPromise } from 'p-defer';
import { WireError } from '../protocol/errors.js';

/**
 * Why a run's waits end (its pause, the model's stream). A signal between
 * parts of the engine, never shown to a client: it carries no stack trace,
 * whose capture was most of its cost (every run makes one or two).
 */
export class RunClosedError extends Error {
  readonly reason: string;

  constructor(reason: string) {
    // Nothing before super() may touch `this` (a parameter property would).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`run closed: ${reason}`);
    Error.stackTraceLimit = limit;
    this.reason = reason;
    this.name = new.target.name;
  }
}

export class PauseRegistry {
  private readonly deferreds = new Map<string, DeferredPromise<void>>();
  /** Every deferred made and not yet settled: what close() must reject whatever the map says. */
  private readonly unsettled = new Set<DeferredPromise<void>>();
  private closedReason: string | null = null;

  constructor(private readonly maxPending: number) {}

  /** Register calls and get one promise that settles when all are answered (or the run closes). */
  wait(callIds: readonly string[]): Promise<void> {
    if (this.closedReason !== null) return Promise.reject(new RunClosedError(this.closedReason));
    if (this.deferreds.size + callIds.length > this.maxPending) {
      throw new WireError('too_many_pending_calls', `The model made more tool calls than one pause may wait for (limit ${this.maxPending}).`);
    }
    const seen = new Set<string>();
    for (const id of callIds) {
      if (seen.has(id) || this.deferreds.has(id)) throw duplicateCallId(id);
      seen.add(id);
    }
    const promises = callIds.map((id) => {
      const d = pDefer<void>();
      this.deferreds.set(id, d);
      this.unsettled.add(d);
      return d.promise;
    });
    return Promise.all(promises).then(() => undefined);
  }

  has(callId: string): boolean {
    return this.deferreds.has(callId);
  }

  pending(): string[] {
    return [...this.deferreds.keys()];
  }

  get size(): number {
    return this.deferreds.size;
  }

  resolve(callId: string): void {
    const d = this.deferreds.get(callId);
    if (!d) return;
    this.deferreds.delete(callId);
    this.unsettled.delete(d);
    d.resolve();
  }

  /** Reject everything pending and refuse new registrations. Idempotent. */
  close(reason: string): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    if (this.unsettled.size === 0) return;
    const err = new RunClosedError(reason);
    for (const d of this.unsettled) d.reject(err);
    this.unsettled.clear();
    this.deferreds.clear();
  }
}

/** The model's fault, not the client's: an output could not say which of the calls it answers. */
export function duplicateCallId(id: string): WireError {
  return new WireError('duplicate_call_id', `The model made two tool calls with call_id '${id}'; an output could not say which one it answers, so the response failed.`);
}
