/**
 * `WsClient`: the agent-loop driver over WebSocket mode (the shipped design,
 * `OpenAI-Beta: responses_websockets=2026-02-06`). Each model call is its own
 * response; after one that ends with tool calls the client runs them and
 * sends a new `response.create` with `previous_response_id` and only the tool
 * outputs, as Codex does. Tools and instructions are re-sent every time (they
 * are not inherited). It continues on the terminal event; the `llr:timing`
 * event that may follow is routed to its run by response id.
 */
import { isTerminalEvent } from '../protocol/events.js';
import type { FunctionCall, InputItem } from '../protocol/objects.js';
import { ServerError, createBody, runTools, toInputItems, type AgentClient, type AgentRequest, type AgentRun, type ToolExecutor } from './driver.js';
import { EventSocket, type SocketOptions } from './socket.js';
import { SocketClient } from './socket-client.js';
import { WS_MODE_BETA } from '../protocol/designs.js';

export class WsClient extends SocketClient implements AgentClient {
  readonly protocol = 'ws' as const;
  /** The last response of the previous run, so a follow-up run continues the conversation. */
  lastResponseId: string | null = null;

  private constructor(socket: EventSocket) {
    super(socket);
    socket.onClose = (code) => {
      this.current?.reject(new Error(`connection closed (${code})`));
      this.timings.close();
    };
  }

  static async connect(baseUrl: string, opts: Omit<SocketOptions, 'beta'> = {}): Promise<WsClient> {
    return new WsClient(await EventSocket.open(baseUrl, { ...opts, beta: WS_MODE_BETA }));
  }

  run(request: AgentRequest, executeTool: ToolExecutor): AgentRun {
    const first = toInputItems(request.input);
    let calls: FunctionCall[] = [];

    const create = (input: InputItem[], previous: string | null) => {
      calls = [];
      this.socket.send({ type: 'response.create', ...createBody(request, input, previous, request.store ?? false) });
    };

    const run = this.begin((e) => {
      if (isTerminalEvent(e)) {
        const done = e.response;
        this.ended(run, done);
        if (done.status !== 'completed' || calls.length === 0) {
          this.lastResponseId = done.status === 'completed' ? done.id : null;
          if (done.status === 'completed') this.history = run.transcript.slice();
          run.resolve(done);
          return;
        }
        void runTools(calls, executeTool).then((outputs) => {
          run.record(outputs);
          if (this.socket.open) create(outputs, done.id);
        }, (err: unknown) => run.reject(err));
        return;
      }
      switch (e.type) {
        case 'response.output_item.done':
          run.transcript.push(e.item);
          if (e.item.type === 'function_call') calls.push(e.item);
          break;
        case 'error':
          run.reject(new ServerError(e.error.code, e.error.message, e.error.param, e.status));
          break;
        default:
          break;
      }
    });
    if (run.done) return run;
    run.record(this.history, first);
    create(first, this.lastResponseId);
    return run;
  }

  /** Forget the conversation: the next run starts a new one. */
  override newConversation(): void {
    super.newConversation();
    this.lastResponseId = null;
  }
}
