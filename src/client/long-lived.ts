/**
 * `LongLivedClient`: the agent-loop driver over the long-lived protocol
 * (`OpenAI-Beta: responses_websockets=2026-02-04`). One `response.create`
 * per run; at every `response.done` it runs the pending tool calls and sends
 * their outputs with `response.append`; the run ends at the terminal event
 * (the `llr:timing` event that may follow is routed to it by response id).
 * One run at a time per client (the protocol allows one per connection).
 *
 * An append the server refuses (an `error` event while the run is paused:
 * `content_flagged`, `context_length_exceeded`, `queue_full`, … — the run
 * stays paused on the server) fails the run with that error: the client
 * cancels the run and rejects once its terminal event (`response.cancelled`)
 * has arrived, so no event of the old run reaches the next one. As
 * `LongLivedHttpClient` does by closing its stream.
 */
import { isTerminalEvent } from '../protocol/events.js';
import type { FunctionCall } from '../protocol/objects.js';
import { ServerError, appendRefused, createBody, pausedCalls, runTools, toInputItems, type AgentClient, type AgentRequest, type AgentRun, type ToolExecutor } from './driver.js';
import { EventSocket, type SocketOptions } from './socket.js';
import { SocketClient } from './socket-client.js';
import { LONG_LIVED_BETA } from '../protocol/designs.js';

export class LongLivedClient extends SocketClient implements AgentClient {
  readonly protocol = 'long-lived' as const;
  /** The error that refused the run's last append (the run is being cancelled): the run fails with it. */
  private refused: ServerError | null = null;

  private constructor(socket: EventSocket) {
    super(socket);
    socket.onClose = (code, reason) => {
      this.timings.close();
      const run = this.current;
      if (!run) return;
      if (this.refused) run.reject(this.refused);
      const last = run.responses.at(-1);
      if (last) run.resolve(last);
      else run.reject(new Error(`connection closed (${code}${reason ? `: ${reason}` : ''})`));
    };
  }

  static async connect(baseUrl: string, opts: Omit<SocketOptions, 'beta'> = {}): Promise<LongLivedClient> {
    return new LongLivedClient(await EventSocket.open(baseUrl, { ...opts, beta: LONG_LIVED_BETA }));
  }

  /** One `response.create`; the follow-up run re-sends the whole conversation (the protocol has no previous_response_id). */
  run(request: AgentRequest, executeTool: ToolExecutor): AgentRun {
    const input = [...this.history, ...toInputItems(request.input)];
    let calls: FunctionCall[] = [];
    let started = false;
    /** The run is paused on the server: `response.done` came and nothing of the run since. */
    let paused = false;
    this.refused = null;
    const run = this.begin((e) => {
      if (isTerminalEvent(e)) {
        this.ended(run, e.response);
        if (e.response.status === 'completed') this.history = run.transcript.slice();
        // Ended after its append was refused (cancelled by this client, or ended `incomplete` by the server): the refusal
        // says why, not only the status.
        if (this.refused && e.response.status !== 'completed') run.reject(appendRefused(this.refused));
        else run.resolve(e.response);
        return;
      }
      if (e.type !== 'error') paused = e.type === 'response.done';
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
              run.record(outputs);
              // Ended meanwhile (cancelled, failed): an append names no response, so the connection's next run, if
              // paused, would take these outputs (and refuse them, unknown_call_id: the client then cancels it).
              if (run.done) return;
              if (this.socket.open) this.socket.send({ type: 'response.append', input: outputs });
            },
            (err: unknown) => run.reject(err),
          );
          break;
        }
        case 'error': {
          const err = new ServerError(e.error.code, e.error.message, e.error.param, e.status);
          if (!started || run.done) run.reject(err);
          else if (paused && e.status !== 500 && this.refused === null) {
            // The append was refused and the run waits on: nothing this client sends can
            // answer its calls now, so end it (a 500 fails the run itself, response.failed follows).
            this.refused = err;
            if (this.socket.open) this.socket.send({ type: 'response.cancel' });
          }
          break;
        }
        default:
          break;
      }
    });
    if (run.done) return run;
    run.record(input);
    this.socket.send({ type: 'response.create', ...createBody(request, input, null, request.store ?? false) });
    return run;
  }

  /** Cancel the run in flight (`response.cancel`). */
  cancel(): void {
    this.socket.send({ type: 'response.cancel' });
  }
}
