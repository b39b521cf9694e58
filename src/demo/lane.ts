/**
 * One lane of a demo race: the project's own client for one design
 * (src/client/*, the `AgentClient` driver) runs the race's workload against
 * this server over loopback, as any agent would. The lane answers tool calls
 * from the workload (never by running anything), waits at the step gate
 * between model calls, and reports to the page what its client saw on the
 * wire and what the server recorded for each of its responses.
 *
 * Used by race.ts, one per design. Leaves out the designs themselves (the
 * server's modes do the work; this only drives a client and reads records).
 */
import { connectClient, type AgentClient, type AgentEvent } from '../client/index.js';
import type { RunRecords, RunRecord } from '../engine/records.js';
import { realClock } from '../model/clock.js';
import type { FunctionCall } from '../protocol/objects.js';
import type { DemoDesign } from './designs.js';
import type { DemoMessage, LaneDoneMessage } from './messages.js';
import type { DemoWorkload } from './workloads.js';

/** Wire entries one lane sends to the page at most; later events are counted, not listed. */
export const MAX_WIRE_ENTRIES = 2000;
/**
 * Records of responses in progress go to the page at most this often, ms:
 * copying a long-lived run's growing record at every event would put the
 * demo's own work into the lane it measures.
 */
export const RECORD_EVERY_MS = 100;

export interface StepGate {
  /** Whether model call `index` (0-based) has to wait for a step. */
  blocks(index: number): boolean;
  /** null when model call `index` may start now; else resolves once it may, rejects when `signal` aborts. */
  wait(design: string, index: number, signal: AbortSignal): Promise<void> | null;
}

export interface LaneOptions {
  design: DemoDesign;
  /** The lane's own model name (src/demo/models.ts). */
  model: string;
  url: string;
  apiKey: string | undefined;
  workload: DemoWorkload;
  toolTime: 'none' | 'recorded';
  gate: StepGate;
  records: RunRecords;
  signal: AbortSignal;
  emit: (m: DemoMessage) => void;
}

interface Batch {
  index: number;
  ready: Promise<void>;
  pending: number;
  toolStart: number;
}

export class Lane {
  private client: AgentClient | null = null;
  private t0 = 0;
  private batch: Batch | null = null;
  private calls = 0;
  private answered = 0;
  private gateMs = 0;
  private toolMs = 0;
  private wireEntries = 0;
  private nextSendAt = 0;
  private pendingOut: { at: number; event: string; detail: string } | null = null;
  private bytesMark = 0;
  /** The client's byte counts after the warm-up: the race counts from there. */
  private bytesBase = { bytes_sent: 0, bytes_received: 0 };
  private delta: { event: string; t: number; count: number } | null = null;
  private lastResponseId: string | null = null;
  private readonly dirty = new Set<string>();
  private flushTimer: NodeJS.Timeout | null = null;
  /** Response ids in creation order, with when their request was sent. */
  readonly responses = new Map<string, number>();
  /**
   * The latest record of each of the lane's responses (those of its model), followed from the lane's run until the
   * race ends (`forget`): the server's ring keeps the newest `--max-run-records` of every client's, and a lane's
   * figures read from it at the race's end skipped records other traffic had pushed out (a lane shown done with
   * "model 0.0 ms" and the whole run as API overhead; outside attack atk50 F1).
   */
  private readonly kept = new Map<string, RunRecord>();
  private following = false;
  divergence: string | null = null;

  constructor(private readonly o: LaneOptions) {}

  get id(): string {
    return this.o.design.id;
  }

  get model(): string {
    return this.o.model;
  }

  /**
   * Connect, then run a small agent loop (`w`, two tool calls) with `warmUpModel`
   * and forget it, so no lane pays the process's cold start (tokenizer
   * tables, the design's code paths still unoptimised) inside the race. Its
   * records carry that model's name, not the lane's.
   */
  async connect(warmUpModel: string, w: DemoWorkload): Promise<void> {
    const client = await connectClient(this.o.design.client, this.o.url, { apiKey: this.o.apiKey });
    this.client = client;
    // Stopping the race closes the connection: the server cancels the run in flight.
    this.o.signal.addEventListener('abort', () => void this.close(), { once: true });
    const warm = await client.run(
      { model: warmUpModel, input: w.userTurns[0]?.input ?? 'Warm-up.', tools: w.tools, parallel_tool_calls: w.parallel_tool_calls },
      (call) => w.toolResult(call.call_id, call.arguments)?.output ?? 'warm',
    );
    if (warm.status !== 'completed') throw new Error(`the warm-up request ended ${warm.status}`);
    client.newConversation();
    this.bytesBase = this.clientBytes();
  }

  /** Run every user turn; resolves with the lane's figures, rejects if the run fails. */
  async run(t0: number): Promise<LaneDoneMessage> {
    const client = this.client;
    if (!client) throw new Error('lane not connected');
    this.t0 = t0;
    const w = this.o.workload;
    // Every record of the lane's model from now on (`kept`), until the race forgets them. Bounded: a record the lane
    // has not seen start yet takes one of a few more places than the workload has model calls (anyone who knows the
    // lane's model name can make records of it).
    this.following = true;
    const places = (w.model_calls ?? 1) + 8;
    this.o.records.watch(this.o.model, (rec) => {
      const id = rec.response_id;
      if (this.kept.has(id) || this.responses.has(id) || this.kept.size < places) this.kept.set(id, rec);
    });
    for (const [ui, { input, replace_history }] of w.userTurns.entries()) {
      // A compacted recording continues in a new conversation, its input the whole context.
      if (ui > 0 && replace_history) client.newConversation();
      this.markSend(performance.now(), ui === 0 ? 'start' : replace_history ? 'new conversation (compacted)' : 'next user turn');
      const run = client.run(
        { model: this.o.model, input, ...(w.instructions !== null && { instructions: w.instructions }), tools: w.tools, parallel_tool_calls: w.parallel_tool_calls },
        (call) => this.execute(call),
      );
      // Stamp each event as the client receives it, before it acts on it.
      const push = run.push.bind(run);
      run.push = (e: AgentEvent) => {
        this.onEvent(e, performance.now());
        push(e);
      };
      const response = await run;
      this.flushDelta();
      this.flush();
      if (this.divergence) throw new Error(this.divergence);
      if (response.status !== 'completed') {
        throw new Error(`the run ended ${response.status}${response.error ? ` (${response.error.code}: ${response.error.message})` : ''}`);
      }
    }
    const end = performance.now();
    return {
      type: 'lane.done',
      design: this.id,
      e2e_ms: round(end - t0 - this.gateMs),
      gate_ms: round(this.gateMs),
      tool_ms: round(this.toolMs),
      model_ms: 0,
      api_overhead_ms: 0,
      stage_ms: {},
      responses: this.responses.size,
      ...this.bytes(),
    };
  }

  /** The server's records of this lane's responses, in creation order. */
  records(): RunRecord[] {
    return [...this.responses.keys()].flatMap((id) => this.kept.get(id) ?? []);
  }

  /** The race has ended: its records are no longer followed. */
  forget(): void {
    if (this.following) this.o.records.unwatch(this.o.model);
    this.following = false;
    this.kept.clear();
  }

  /** Emit every response's current record (`final` after post-inference work is flushed). */
  emitRecords(final: boolean): void {
    for (const [id, sentAt] of this.responses) this.emitRecord(id, sentAt, final);
  }

  async close(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    await this.client?.close().catch(() => {});
  }

  /** Payload bytes the client counted since the warm-up. */
  bytes(): { bytes_sent: number; bytes_received: number } {
    const now = this.clientBytes();
    return { bytes_sent: now.bytes_sent - this.bytesBase.bytes_sent, bytes_received: now.bytes_received - this.bytesBase.bytes_received };
  }

  private clientBytes(): { bytes_sent: number; bytes_received: number } {
    return { bytes_sent: this.client?.bytesSent ?? 0, bytes_received: this.client?.bytesReceived ?? 0 };
  }

  private ms(at: number): number {
    return round(at - this.t0);
  }

  private markSend(at: number, why: string): void {
    this.nextSendAt = this.ms(at);
    const d = this.o.design;
    const first = why !== 'tools answered';
    const event = first ? d.starts_with : d.continues_with;
    const prev = !first && d.continues_by_id && this.lastResponseId ? `previous_response_id=${this.lastResponseId}` : why;
    this.pendingOut = { at: this.nextSendAt, event, detail: prev };
  }

  private execute(call: FunctionCall): Promise<string> {
    if (this.o.signal.aborted) return Promise.resolve('error: the demo race was stopped');
    const batch = (this.batch ??= this.startBatch());
    batch.pending++;
    return this.answer(call, batch);
  }

  private startBatch(): Batch {
    const index = this.calls++;
    const waitFrom = performance.now();
    const batch: Batch = { index, pending: 0, toolStart: waitFrom, ready: Promise.resolve() };
    // A lane about to wait for the presenter shows its latest records first.
    if (this.o.gate.blocks(index + 1)) this.flush();
    const waiting = this.o.gate.wait(this.id, index + 1, this.o.signal);
    if (waiting) {
      batch.ready = waiting.then(() => {
        const now = performance.now();
        batch.toolStart = now;
        this.gateMs += now - waitFrom;
        this.o.emit({ type: 'gate', design: this.id, from_ms: this.ms(waitFrom), to_ms: this.ms(now) });
      });
    }
    return batch;
  }

  private async answer(call: FunctionCall, batch: Batch): Promise<string> {
    try {
      await batch.ready;
      const r = this.o.workload.toolResult(call.call_id, call.arguments);
      if (!r) {
        this.divergence ??= `the model called ${call.name} with call_id ${call.call_id}, which the workload does not have`;
        return 'error: the demo replay diverged';
      }
      if (this.o.toolTime === 'recorded' && r.duration_ms > 0) await realClock.sleep(r.duration_ms, this.o.signal);
      this.answered++;
      return r.output;
    } catch {
      return 'error: the demo race was stopped';
    } finally {
      if (--batch.pending === 0 && this.batch === batch) {
        const now = performance.now();
        this.toolMs += now - batch.toolStart;
        this.batch = null;
        this.markSend(now, 'tools answered');
      }
    }
  }

  private onEvent(e: AgentEvent, at: number): void {
    const t = this.ms(at);
    if (this.pendingOut) {
      const bytes = this.bytes().bytes_sent - this.bytesMark;
      this.bytesMark += bytes;
      const out = this.pendingOut;
      this.pendingOut = null;
      this.wire(out.at, 'out', out.event, `${out.detail} · ${bytes.toLocaleString('en')} bytes`, 1);
    }
    if (e.type.endsWith('.delta')) {
      if (this.delta?.event !== e.type) {
        this.flushDelta();
        this.delta = { event: e.type, t, count: 0 };
      }
      this.delta.count++;
      return;
    }
    this.flushDelta();
    switch (e.type) {
      case 'response.created':
        this.responses.set(e.response.id, this.nextSendAt);
        this.wire(t, 'in', e.type, e.response.previous_response_id ? `${e.response.id} ← previous_response_id=${e.response.previous_response_id}` : e.response.id, 1);
        this.markDirty(e.response.id);
        break;
      case 'response.done':
        this.wire(t, 'in', e.type, `paused: ${e.response.pending_tool_calls?.length ?? 0} tool call(s) pending`, 1);
        this.markDirty(e.response.id);
        break;
      case 'response.completed':
      case 'response.failed':
      case 'response.incomplete':
      case 'response.cancelled':
        this.lastResponseId = e.response.id;
        this.wire(t, 'in', e.type, `${e.response.status} · ${e.response.usage?.input_tokens ?? 0} input tokens`, 1);
        break;
      case 'llr:timing':
        this.wire(t, 'in', e.type, `server total ${e.totals['total'] ?? 0} ms`, 1);
        this.markDirty(e.response_id);
        break;
      case 'response.output_item.added':
      case 'response.output_item.done':
        this.wire(t, 'in', e.type, e.item.type === 'function_call' ? `function_call ${e.item.name}` : e.item.type, 1);
        break;
      case 'error': {
        // Nested on a WebSocket, flat on an SSE stream.
        const err = 'error' in e ? e.error : e;
        this.wire(t, 'in', e.type, `${err.code}: ${err.message}`, 1);
        break;
      }
      default:
        this.wire(t, 'in', e.type, '', 1);
    }
  }

  private flushDelta(): void {
    const d = this.delta;
    if (!d) return;
    this.delta = null;
    this.wire(d.t, 'in', d.event, `${d.count} token${d.count === 1 ? '' : 's'}`, d.count);
  }

  private wire(t: number, dir: 'in' | 'out', event: string, detail: string, count: number): void {
    this.wireEntries++;
    if (this.wireEntries > MAX_WIRE_ENTRIES) return;
    if (this.wireEntries === MAX_WIRE_ENTRIES) {
      this.o.emit({ type: 'wire', design: this.id, t_ms: t, dir: 'in', event: '…', detail: `the page lists the first ${MAX_WIRE_ENTRIES} wire entries`, count: 0 });
      return;
    }
    this.o.emit({ type: 'wire', design: this.id, t_ms: t, dir, event, detail, count });
  }

  private markDirty(id: string): void {
    this.dirty.add(id);
    this.flushTimer ??= setTimeout(() => this.flush(), RECORD_EVERY_MS);
  }

  /** Send the records that changed since the last flush, and the client's byte counts. */
  flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    for (const id of this.dirty) this.emitRecord(id, this.responses.get(id) ?? 0, false);
    this.dirty.clear();
    this.o.emit({ type: 'progress', design: this.id, t_ms: this.ms(performance.now()), ...this.bytes(), tool_calls_answered: this.answered });
  }

  private emitRecord(id: string, sentAt: number, final: boolean): void {
    const record = this.kept.get(id);
    if (record) this.o.emit({ type: 'response', design: this.id, sent_at_ms: sentAt, final, record });
  }
}

export function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
