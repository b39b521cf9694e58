/**
 * The pause registry: one waiter per `wait()` of a paused run — the deferred
 * promise (p-defer) the run's sampling loop awaits, and a count of the
 * `call_id`s it still waits for. It owns every waiter it creates and always
 * settles them: resolved once an append has answered each of its calls,
 * rejected by cancel, timeout, disconnect or shutdown. After `close()`
 * nothing can register, so a late callback cannot leave a promise pending.
 *
 * A `call_id` is the only thing an output can name, so two pending calls may
 * never share one: `wait()` refuses a duplicate (within the batch or against
 * a call still pending) before registering anything. A waiter is unsettled
 * exactly while one of its calls is still indexed (answering a call removes
 * it and counts the waiter down; the last one resolves it), so `close()`
 * settles every waiter it ever made by going through the index.
 *
 * One deferred per wait, not one per call joined by `Promise.all`: a paused
 * run holds its registry for as long as it waits.
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

/** One `wait()`: the deferred promise its run awaits (p-defer), and how many of its calls are unanswered. */
interface Waiter {
  left: number;
  deferred: DeferredPromise<void>;
}

export class PauseRegistry {
  /** Each pending call's waiter. */
  private readonly waiters = new Map<string, Waiter>();
  private closedReason: string | null = null;

  constructor(private readonly maxPending: number) {}

  /** Register calls and get one promise that settles when all are answered (or the run closes). */
  wait(callIds: readonly string[]): Promise<void> {
    if (this.closedReason !== null) return Promise.reject(new RunClosedError(this.closedReason));
    if (this.waiters.size + callIds.length > this.maxPending) {
      throw new WireError('too_many_pending_calls', `The model made more tool calls than one pause may wait for (limit ${this.maxPending}).`);
    }
    const seen = new Set<string>();
    for (const id of callIds) {
      if (seen.has(id) || this.waiters.has(id)) throw duplicateCallId(id);
      seen.add(id);
    }
    if (callIds.length === 0) return Promise.resolve();
    const w: Waiter = { left: callIds.length, deferred: pDefer<void>() };
    for (const id of callIds) this.waiters.set(id, w);
    return w.deferred.promise;
  }

  has(callId: string): boolean {
    return this.waiters.has(callId);
  }

  pending(): string[] {
    return [...this.waiters.keys()];
  }

  get size(): number {
    return this.waiters.size;
  }

  resolve(callId: string): void {
    const w = this.waiters.get(callId);
    if (!w) return;
    this.waiters.delete(callId);
    if (--w.left === 0) w.deferred.resolve();
  }

  /** Reject everything pending and refuse new registrations. Idempotent. */
  close(reason: string): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    if (this.waiters.size === 0) return;
    const err = new RunClosedError(reason);
    // A waiter of several calls is rejected once per call still pending: a settled promise ignores the rest.
    for (const w of this.waiters.values()) w.deferred.reject(err);
    this.waiters.clear();
  }
}

/** The model's fault, not the client's: an output could not say which of the calls it answers. */
export function duplicateCallId(id: string): WireError {
  return new WireError('duplicate_call_id', `The model made two tool calls with call_id '${id}'; an output could not say which one it answers, so the response failed.`);
}
