/**
 * The replay driver: one measured run of a Workload through one design's
 * agent-loop client (`AgentClient`), against a server whose simulated model
 * replays the same workload (`llr serve --workload`).
 *
 * For each user turn it runs the turn's input through the client (in a new
 * conversation when the turn has `replace_history`); the model
 * replays the recorded calls with their recorded call_ids, and the tool
 * executor answers each with the recorded output (after sleeping the recorded
 * duration × `toolFactor` when the factor is above 0; a duration counts 0 to
 * MAX_TOOL_MS, workload/types.ts `toolWaitMs`). A call the workload
 * does not expect at that point is a divergence and fails the run: the
 * numbers of a replay that went off script would mean nothing.
 *
 * Per model call it records, on the client's clock: when the input was sent
 * (the run started, or the previous call's last tool returned), the first
 * event, the first output item, the last event, and when the client could act
 * (its tools were invoked, or the run resolved); from the server's
 * `llr:timing` events the call's prefill and decode spans. Per run: the wall
 * time, payload bytes each way, the summed stage totals and counters.
 * Leaves out the server's CPU time (the runner asks the server process) and
 * any statistics (derive.ts, summaries.ts).
 */
import { connectClient, type AgentClient, type ClientProtocol } from '../client/index.js';
import { realClock } from '../model/clock.js';
import type { ServerEvent, TimingEvent } from '../protocol/events.js';
import type { FunctionCall } from '../protocol/objects.js';
import { callsOf } from '../workload/replayable.js';
import { toolWaitMs, type Workload } from '../workload/types.js';
import { firstInputWithNonce } from './workload-prep.js';
import { ownValue } from '../protocol/fields.js';
import { jsonPreview } from '../protocol/errors.js';

export interface TurnSample {
  /** Global model call index (0-based) in the workload. */
  call: number;
  user_turn: number;
  /** When the input for this call was sent, ms since the run started. */
  sent_at_ms: number;
  /** Sent → first event of this call (ws/http: `response.created`; long-lived resume: the first output). */
  first_event_ms: number | null;
  /** Sent → first `response.output_item.added`: time to first (visible) token. */
  first_output_ms: number | null;
  /** Sent → last event of this call. */
  last_event_ms: number | null;
  /** Sent → the client can act: its tools are invoked, or the run resolved. */
  done_ms: number;
  /** Tools invoked → the last tool returned (the next input is sent then). */
  tool_ms: number;
  events: number;
  /** Payload bytes the client sent for this call (its input) and received (its events). */
  bytes_out: number;
  bytes_in: number;
  /** The server's spans for this model call. */
  prefill_ms: number;
  decode_ms: number;
  /** The server's other spans for this call (validate, render, safety, route, store, post-inference; not paused). */
  server_pipeline_ms: number;
  /** Prompt tokens of this call (ws, http: one call per response); null in a long-lived run. */
  prompt_tokens: number | null;
}

export interface RunSample {
  design: ClientProtocol;
  /** Connect (WebSocket upgrade); not part of `e2e_ms`, as an agent keeps its connection. */
  connect_ms: number;
  /** First input sent → the last user turn's run resolved. */
  e2e_ms: number;
  turns: TurnSample[];
  responses: number;
  /** Client tool time (sum over model calls of tools invoked → last returned). */
  tool_ms: number;
  /** Sum of the server's prefill and decode spans. */
  model_ms: number;
  /** Summed llr:timing counters (prompt_tokens, items_validated, tokens_tokenized, ...). */
  counters: Record<string, number>;
  /** Summed llr:timing stage totals, ms (`total` and `paused` left out). */
  stage_ms: Record<string, number>;
  bytes: { client_sent: number; server_sent: number };
  client_cpu_ms: number;
}

export interface ReplayOptions {
  design: ClientProtocol;
  url: string;
  workload: Workload;
  /** Put in front of the first user message: keeps runs from sharing prefix-cache blocks. */
  nonce: string;
  /** 0: tools answer at once; f > 0: each sleeps its recorded duration × f. */
  toolFactor: number;
  /** The whole run, connect included, fails after this long. */
  timeoutMs: number;
  model?: string;
  /** Called as each model call of the workload begins: its number (1-based) and the workload's count of them. */
  onCall?: (call: number, total: number) => void;
}

export class ReplayError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export async function replayRun(opts: ReplayOptions): Promise<RunSample> {
  const deadline = new AbortController();
  let client: AgentClient | null = null;
  const timer = setTimeout(() => deadline.abort(), opts.timeoutMs);
  const timedOut = new Promise<never>((_, reject) =>
    deadline.signal.addEventListener('abort', () => {
      reject(new ReplayError(`${opts.design}: the run did not finish within ${opts.timeoutMs} ms`));
    }),
  );
  timedOut.catch(() => {});
  try {
    const t0 = performance.now();
    client = await Promise.race([connectClient(opts.design, opts.url), timedOut]).catch((err: unknown) => {
      throw new ReplayError(`${opts.design}: cannot connect to ${opts.url}: ${(err as Error).message}`, { cause: err });
    });
    const connectMs = performance.now() - t0;
    const sample = await Promise.race([drive(client, opts, deadline.signal), timedOut]);
    return { ...sample, connect_ms: connectMs };
  } finally {
    clearTimeout(timer);
    deadline.abort();
    await client?.close().catch(() => {});
  }
}

/** Its errors count user turns and model calls from 1, as `llr workload inspect` does (they counted from 0: atk117 F5). */
async function drive(client: AgentClient, opts: ReplayOptions, signal: AbortSignal): Promise<Omit<RunSample, 'connect_ms'>> {
  const w = opts.workload;
  const callIndex = new Map<string, number>();
  const callCounts: number[] = [];
  const userTurnOf: number[] = [];
  w.userTurns.forEach((u, ui) => {
    for (const t of u.modelTurns) {
      const g = callCounts.push(callsOf(t).length) - 1;
      userTurnOf.push(ui);
      for (const c of callsOf(t)) callIndex.set(c.call_id, g);
    }
  });
  const turns: TurnSample[] = [];
  const toolStart: Array<number | null> = [];
  const returned: number[] = [];
  let current = 0;
  let divergence: string | null = null;
  let mark = bytesOf(client);
  let closed = true;
  const closeBytes = () => {
    const turn = turns[current];
    const now = bytesOf(client);
    if (turn && !closed) {
      turn.bytes_out = now.client_sent - mark.client_sent;
      turn.bytes_in = now.server_sent - mark.server_sent;
    }
    mark = now;
    closed = true;
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const since = (t: number) => t - t0;

  const open = (call: number, at: number) => {
    closeBytes();
    closed = false;
    current = call;
    if (call < callCounts.length) opts.onCall?.(call + 1, callCounts.length);
    turns[call] = {
      call,
      user_turn: userTurnOf[call] ?? -1,
      sent_at_ms: since(at),
      first_event_ms: null,
      first_output_ms: null,
      last_event_ms: null,
      done_ms: 0,
      tool_ms: 0,
      events: 0,
      bytes_out: 0,
      bytes_in: 0,
      prefill_ms: 0,
      decode_ms: 0,
      server_pipeline_ms: 0,
      prompt_tokens: null,
    };
    toolStart[call] = null;
    returned[call] = 0;
  };

  const onEvent = (e: ServerEvent, at: number) => {
    const turn = turns[current];
    if (!turn) return;
    const rel = at - t0 - turn.sent_at_ms;
    turn.events++;
    turn.first_event_ms ??= rel;
    if (e.type === 'response.output_item.added') turn.first_output_ms ??= rel;
    turn.last_event_ms = rel;
  };

  const execute = async (call: FunctionCall): Promise<string> => {
    const at = performance.now();
    const g = callIndex.get(call.call_id);
    const recorded = ownValue(opts.workload.toolOutputs, call.call_id);
    if (g === undefined || g !== current || !recorded) {
      divergence ??= `model call ${current + 1}: the server's model called ${call.name} with call_id ${call.call_id}, which the workload ${g === undefined ? 'does not have' : `has at model call ${g + 1}`}`;
      return 'error: replay diverged';
    }
    const turn = turns[g]!;
    if (toolStart[g] === null) {
      toolStart[g] = at;
      turn.done_ms = at - t0 - turn.sent_at_ms;
    }
    // As the readers take a recorded time (toolWaitMs: none below 0, none past MAX_TOOL_MS), for a workload built otherwise too.
    const toolMs = toolWaitMs(recorded.duration_ms);
    if (opts.toolFactor > 0 && toolMs > 0) await realClock.sleep(toolMs * opts.toolFactor, signal);
    returned[g] = (returned[g] ?? 0) + 1;
    if (returned[g] === callCounts[g]) {
      const end = performance.now();
      turn.tool_ms = end - toolStart[g]!;
      open(g + 1, end);
    }
    return recorded.output;
  };

  const counters: Record<string, number> = {};
  const stageMs: Record<string, number> = {};
  let responses = 0;
  let first = 0;
  for (const [ui, u] of w.userTurns.entries()) {
    // A compacted recording continues in a new conversation (its input is the whole context).
    if (u.replace_history) client.newConversation();
    open(first, performance.now());
    const input = ui === 0 || u.replace_history ? firstInputWithNonce(u.input, opts.nonce) : u.input;
    const run = client.run(
      {
        model: opts.model ?? 'sim-model',
        input,
        ...(w.instructions !== null && { instructions: w.instructions }),
        tools: w.tools,
        parallel_tool_calls: true,
      },
      execute,
    );
    // Stamp events as the client receives them, before it acts on them (it
    // invokes the tools from the same handler, right after this push).
    const push = run.push.bind(run);
    run.push = (e: ServerEvent) => {
      onEvent(e, performance.now());
      push(e);
    };
    const response = await run.then(
      (r) => r,
      (err: unknown) => {
        throw new ReplayError(`${opts.design}: user turn ${ui + 1}, model call ${current + 1}: ${(err as Error).message}`, { cause: err });
      },
    );
    const end = performance.now();
    closeBytes();
    if (divergence) throw new ReplayError(`${opts.design}: replay diverged at ${divergence}`);
    const last = first + u.modelTurns.length - 1;
    if (response.status !== 'completed') {
      const why = response.error
        ? ` (${response.error.code}: ${response.error.message})`
        : response.incomplete_details
          ? ` (${response.incomplete_details.reason})`
          : response.llr_incomplete_reason
            ? ` (${response.llr_incomplete_reason})`
            : '';
      throw new ReplayError(`${opts.design}: user turn ${ui + 1} ended ${response.status}${why} at model call ${current + 1}`);
    }
    if (current !== last) throw new ReplayError(`${opts.design}: user turn ${ui + 1} ended after model call ${current + 1}; the workload has it end at ${last + 1}`);
    // A turn that only answers is checked by its text: call ids alone passed a replay that answered every later user
    // turn with an earlier turn's text (a recorded text the client could not send back as recorded; atk117 F1).
    const said = lastText(response.output);
    const recorded = lastText(u.modelTurns.at(-1)?.output ?? []);
    if (recorded !== null && said !== recorded) {
      throw new ReplayError(`${opts.design}: replay diverged at user turn ${ui + 1}: the server's model answered ${jsonPreview(said)}, where the workload answers ${jsonPreview(recorded)}`);
    }
    turns[last]!.done_ms = end - t0 - turns[last]!.sent_at_ms;
    // The client resolves at the terminal event; the last timing event follows it.
    await run.telemetry();
    attributeSpans(run.timings, turns.slice(first, last + 1), opts.design);
    for (const t of run.timings) {
      for (const [k, v] of Object.entries(t.counters)) counters[k] = (counters[k] ?? 0) + v;
      for (const [k, v] of Object.entries(t.totals)) if (k !== 'total' && k !== 'paused') stageMs[k] = (stageMs[k] ?? 0) + v;
    }
    responses += run.responses.length;
    first = last + 1;
  }
  const e2e = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    design: opts.design,
    e2e_ms: e2e,
    turns,
    responses,
    tool_ms: turns.reduce((n, t) => n + t.tool_ms, 0),
    model_ms: turns.reduce((n, t) => n + t.prefill_ms + t.decode_ms, 0),
    counters,
    stage_ms: stageMs,
    bytes: bytesOf(client),
    client_cpu_ms: (cpu.user + cpu.system) / 1000,
  };
}

/**
 * The k-th prefill and decode spans (in event order, across responses) belong
 * to the k-th model call; the other spans of a response before a prefill
 * belong to that call (its pre-inference work), those after its last decode
 * to its last call (post-inference). `paused` is the client's time, not the
 * server's.
 */
export function attributeSpans(timings: readonly TimingEvent[], turns: TurnSample[], design: string): void {
  const prefill: number[] = [];
  const decode: number[] = [];
  const pipeline: number[] = [];
  const prompt: Array<number | null> = [];
  for (const t of timings) {
    let calls = 0;
    let pending = 0;
    for (const s of [...t.spans].sort((a, b) => a.start_ms - b.start_ms)) {
      if (s.stage === 'prefill') {
        prefill.push(s.duration_ms);
        pipeline.push(pending);
        pending = 0;
        calls++;
      } else if (s.stage === 'decode') {
        decode.push(s.duration_ms);
      } else if (s.stage !== 'paused') {
        pending += s.duration_ms;
      }
    }
    if (calls > 0) pipeline[pipeline.length - 1]! += pending;
    for (let i = 0; i < calls; i++) prompt.push(calls === 1 ? (t.counters['prompt_tokens'] ?? null) : null);
  }
  if (prefill.length !== turns.length || decode.length !== turns.length) {
    throw new ReplayError(`${design}: the server timed ${prefill.length} prefills and ${decode.length} decodes for ${turns.length} model calls`);
  }
  turns.forEach((turn, i) => {
    turn.prefill_ms = prefill[i]!;
    turn.decode_ms = decode[i]!;
    turn.prompt_tokens = prompt[i] ?? null;
    turn.server_pipeline_ms = pipeline[i] ?? 0;
  });
}

function bytesOf(client: AgentClient): { client_sent: number; server_sent: number } {
  return { client_sent: client.bytesSent, server_sent: client.bytesReceived };
}

/** The text of the last message in `output` (a Response's, or a recorded model call's); null when it holds none. */
function lastText(output: ReadonlyArray<{ type: string; text?: string; content?: unknown }>): string | null {
  for (let i = output.length - 1; i >= 0; i--) {
    const o = output[i]!;
    if (o.type !== 'message') continue;
    if (typeof o.text === 'string') return o.text;
    return Array.isArray(o.content) ? o.content.map((p: { text?: unknown }) => (typeof p.text === 'string' ? p.text : '')).join('') : '';
  }
  return null;
}
