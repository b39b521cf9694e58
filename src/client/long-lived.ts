/**
 * `LongLivedClient`: the agent-loop driver over the long-lived protocol
 * (`OpenAI-Beta: responses_websockets=2026-02-04`). One `response.create`
 * per run; at every `response.done` it runs the pending tool calls and sends
 * their outputs with `response.append`; the run ends at the terminal event
 * (the `llr:timing` event that may follow is routed to it by response id).
 * One run at a time per client (the protocol allows one per connection).
 */
import { isTerminalEvent, isTimingEvent, type ServerEvent } from '../protocol/events.js';
import type { FunctionCall, InputItem } from '../protocol/objects.js';
import { AgentRun, ServerError, TimingRoutes, busyRun, createBody, pausedCalls, runTools, toInputItems, type AgentClient, type AgentRequest, type ToolExecutor } from './driver.js';
import { EventSocket, type SocketOptions } from './socket.js';
import { LONG_LIVED_BETA } from '../protocol/designs.js';

export class LongLivedClient implements AgentClient {
  readonly protocol = 'long-lived' as const;
  private current: AgentRun | null = null;
  /** The conversation so far: a follow-up run re-sends it in full (the protocol has no previous_response_id). */
  private history: InputItem[] = [];
  private readonly timings = new TimingRoutes();

  private constructor(readonly socket: EventSocket) {
    socket.onClose = (code, reason) => {
      this.timings.close();
      const run = this.current;
      if (!run) return;
      const last = run.responses.at(-1);
      if (last) run.resolve(last);
      else run.reject(new Error(`connection closed (${code}${reason ? `: ${reason}` : ''})`));
    };
  }

  static async connect(baseUrl: string, opts: Omit<SocketOptions, 'beta'> = {}): Promise<LongLivedClient> {
    return new LongLivedClient(await EventSocket.open(baseUrl, { ...opts, beta: LONG_LIVED_BETA }));
  }

  run(request: AgentRequest, executeTool: ToolExecutor): AgentRun {
    if (this.current && !this.current.done) return busyRun();
    const run = new AgentRun(this.socket.timing);
    this.current = run;
    const input = [...this.history, ...toInputItems(request.input)];
    run.transcript.push(...input);
    let calls: FunctionCall[] = [];
    let started = false;

    this.socket.onEvent = (e: ServerEvent) => {
      if (isTimingEvent(e)) {
        this.timings.deliver(e);
        return;
      }
      run.push(e);
      if (isTerminalEvent(e)) {
        run.responses.push(e.response);
        if (this.socket.timing) this.timings.expect(e.response.id, run);
        if (e.response.status === 'completed') this.history = run.transcript.slice();
        run.resolve(e.response);
        return;
      }
      switch (e.type) {
        case 'response.created':
          started = true;
          break;
        case 'response.output_item.done':
          run.transcript.push(e.item);
          if (e.item.type === 'function_call') calls.push(e.item);
          break;
        case 'response.done': {
          const due = pausedCalls(e.response, calls);
          calls = [];
          void runTools(due, executeTool).then(
            (outputs) => {
              run.transcript.push(...outputs);
              if (this.socket.open) this.socket.send({ type: 'response.append', input: outputs });
            },
            (err: unknown) => run.reject(err),
          );
          break;
        }
        case 'error':
          if (!started || run.done) run.reject(new ServerError(e.error.code, e.error.message, e.error.param, e.status));
          break;
        default:
          break;
      }
    };
    this.socket.send({ type: 'response.create', ...createBody(request, input, null, request.store ?? false) });
    return run;
  }

  /** Forget the conversation: the next run starts a new one. */
  newConversation(): void {
    this.history = [];
  }

  /** Cancel the run in flight (`response.cancel`). */
  cancel(): void {
    this.socket.send({ type: 'response.cancel' });
  }

  close(): Promise<void> {
    return this.socket.close();
  }
}
