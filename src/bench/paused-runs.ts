/**
 * The client side of the paused phase (target 4): many long-lived runs held
 * open at a tool call over raw `ws` connections, then answered one at a time
 * while the others stay paused.
 *
 * Deliberately not the library client (`LongLivedClient`): a bench client
 * holding 10,000 runs must cost the measurement as little as it can. The
 * library client keeps every event of every run, parses each one, and asks
 * for `llr:timing` telemetry; with 10,000 runs in one process its own
 * garbage collection (its scavenges, seen with `--trace-gc`)
 * landed inside the measured append → resume windows and set the p99. This
 * client parses only the frames it needs (a call's `output_item.done`, to
 * learn the call ids), stamps the first frame after each append, and keeps
 * nothing else. The wire is the same: `response.create` with the long-lived
 * beta header, `response.append` with the tool outputs.
 *
 * Leaves out the server's memory figures and percentiles (phases.ts).
 */
import WebSocket from 'ws';
import { eventType, openLongLived } from './overhead-loop.js';
import type { Workload } from '../workload/types.js';

/** One held run: its connection, the calls it paused on, and the first-frame stamp after the append. */
interface Held {
  ws: WebSocket;
  calls: string[];
  responseId: string | null;
  paused: boolean;
  appendedAt: number;
  firstAfter: number | null;
  ended: ((frame: string) => void) | null;
  /** A frame that ended the run or the connection before it was expected (an error, a close). */
  failure: string | null;
}

export interface HeldRuns {
  /** Resolves when every run has paused at its tool call; rejects on the first run that failed instead. */
  allPaused: Promise<void>;
  paused(): number;
  /** Answers run `i`'s calls and resolves when it completes: ms from the append to its first frame back. */
  resume(i: number): Promise<{ firstMs: number; responseId: string | null }>;
  close(): void;
}

/** Opens `runs` connections (100 at a time) and starts a long-lived run on each, which pauses at `w`'s first tool call. */
export async function holdPausedRuns(url: string, w: Workload, runs: number): Promise<HeldRuns> {
  const [{ input }] = w.userTurns as [Workload['userTurns'][number]];
  const create = JSON.stringify({
    type: 'response.create',
    model: 'sim-model',
    input,
    ...(w.instructions !== null && { instructions: w.instructions }),
    tools: w.tools,
  });
  const held: Held[] = [];
  let paused = 0;
  let settle!: { resolve: () => void; reject: (e: Error) => void };
  const allPaused = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  allPaused.catch(() => {});
  const fail = (h: Held, why: string) => {
    if (h.failure !== null) return;
    h.failure = why;
    if (h.ended) h.ended(why);
    else if (!h.paused) settle.reject(new Error(`a run did not pause: ${why.slice(0, 300)}`));
  };
  try {
    for (let i = 0; i < runs; i += 100) {
      // Settled, not Promise.all: when some opens are refused (a connection cap), the ones that opened
      // in the same batch are closed too, not left open (the server pings them) to keep the process alive.
      const opened = await Promise.allSettled(Array.from({ length: Math.min(100, runs - i) }, () => openLongLived(url)));
      const refused = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected');
      if (refused) {
        for (const o of opened) if (o.status === 'fulfilled') o.value.terminate();
        throw refused.reason;
      }
      const batch = opened.map((o) => (o as PromiseFulfilledResult<WebSocket>).value);
      for (const ws of batch) {
        const h: Held = { ws, calls: [], responseId: null, paused: false, appendedAt: 0, firstAfter: null, ended: null, failure: null };
        ws.on('message', (data: Buffer) => {
          if (h.appendedAt > 0 && h.firstAfter === null) h.firstAfter = performance.now() - h.appendedAt;
          // Only the frames this client acts on are decoded; the type is read from the frame's head.
          const type = eventType(data);
          if (type === 'response.output_item.done') {
            const e = JSON.parse(data.toString()) as { item: { type: string; call_id?: string } };
            if (e.item.type === 'function_call' && e.item.call_id) h.calls.push(e.item.call_id);
          } else if (type === 'response.created') {
            h.responseId = (JSON.parse(data.toString()) as { response: { id: string } }).response.id;
          } else if (type === 'response.done' && !h.paused) {
            h.paused = true;
            if (++paused === runs) settle.resolve();
          } else if (type === 'response.completed') {
            h.ended?.('');
          } else if (type === 'error' || type === 'response.failed' || type === 'response.incomplete') {
            fail(h, endedWhy(type, data));
          }
        });
        ws.on('close', (code) => fail(h, `connection closed (${code})`));
        ws.on('error', () => {});
        ws.send(create);
        held.push(h);
      }
    }
  } catch (err) {
    for (const h of held) h.ws.terminate();
    throw err;
  }
  return {
    allPaused,
    paused: () => paused,
    resume(i) {
      const h = held[i]!;
      if (h.failure !== null) return Promise.reject(new Error(`run ${i} failed before its resume: ${h.failure.slice(0, 300)}`));
      const done = new Promise<string>((resolve) => (h.ended = resolve));
      const outputs = h.calls.map((id) => ({ type: 'function_call_output', call_id: id, output: w.toolOutputs[id]?.output ?? 'ok' }));
      const frame = JSON.stringify({ type: 'response.append', input: outputs });
      h.appendedAt = performance.now();
      h.ws.send(frame);
      return done.then((why) => {
        if (why !== '') throw new Error(`run ${i} did not complete after its append: ${why.slice(0, 300)}`);
        return { firstMs: h.firstAfter ?? NaN, responseId: h.responseId };
      });
    },
    close() {
      for (const h of held) {
        h.ended = null;
        h.failure = 'closed by the bench';
        h.ws.terminate();
      }
    },
  };
}

/** What a run's `error` or terminal event says went wrong, in a line: its type and code or reason, then the frame's head. */
function endedWhy(type: string, data: Buffer): string {
  const text = data.toString();
  try {
    type Ended = { error?: { code?: unknown } | null; incomplete_details?: { reason?: unknown } | null; llr_incomplete_reason?: unknown };
    const e = JSON.parse(text) as { error?: { code?: unknown }; response?: Ended };
    const why = e.error?.code ?? e.response?.error?.code ?? e.response?.incomplete_details?.reason ?? e.response?.llr_incomplete_reason;
    if (typeof why === 'string') return `${type} (${why}): ${text.slice(0, 200)}`;
  } catch {
    // Not JSON: the frame as it came.
  }
  return `${type}: ${text.slice(0, 200)}`;
}
