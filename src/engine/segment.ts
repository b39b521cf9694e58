/**
 * One model call's stream, translated: each `ModelEvent` becomes the wire
 * events of the Responses API (item added, content part, one delta per
 * token, done events) and the finished items are collected — every item for
 * the context, the function calls for the caller to run or pause on.
 *
 * Used by `ResponseRun` for every segment of every design. Knows nothing of
 * prefill, budgets or pausing; it reports how many output tokens each event
 * carried. A batch of deltas (`text.deltas`, `args.deltas`) goes out through
 * one `DeltaEmitter` call, each delta still its own wire event.
 */
import { eventLogprob, type TokenLogprob } from '../model/logprobs.js';
import type { ModelEvent } from '../model/types.js';
import type { UnnumberedEvent } from '../protocol/events.js';
import { ArgsDelta, DeltaHead, TextDelta, type EventLogprob } from '../protocol/event-json.js';
import { newId, withoutLogprobs, type AssistantMessage, type CustomToolCall, type FunctionCall, type InputItem, type OutputItem } from '../protocol/objects.js';

/** A call the client runs: a function call, or a custom tool's (the replay model's, for a tool the request declares custom). */
export type ClientToolCall = FunctionCall | CustomToolCall;

/** Model events that carry output tokens (the ones a budget can refuse). */
export function carriesTokens(ev: ModelEvent): boolean {
  return ev.type === 'text.delta' || ev.type === 'args.delta' || ev.type === 'reasoning' || ev.type === 'text.deltas' || ev.type === 'args.deltas';
}

/**
 * Emits consecutive deltas of one item (each its own numbered event) and
 * returns how many of them the stream took: all of them, or fewer when it
 * ended part-way (a failed send counts the delta it failed on, as a single
 * delta's failure does).
 */
export type DeltaEmitter = (head: DeltaHead, deltas: readonly string[], logprobs?: readonly EventLogprob[][]) => number;

/** What a response may still list logprobs for (`Limits.maxLogprobTokens`), shared by its segments. */
export interface LogprobAllowance {
  left: number;
}

export class Segment {
  /** Finished items, in order, as the context holds them. */
  readonly items: InputItem[] = [];
  /** Per item of `items`, the token ids the model reported for its text (`message.end` / `call.end`), if any. */
  readonly itemTokens: Array<readonly number[] | undefined> = [];
  /** Finished calls, function and custom. */
  readonly calls: ClientToolCall[] = [];
  private msg: AssistantMessage | null = null;
  private call: ClientToolCall | null = null;
  private index = -1;
  /** The open item's pre-serialised delta head (protocol/event-json.ts). */
  private head: DeltaHead | null = null;

  constructor(
    private readonly emit: (e: UnnumberedEvent) => void,
    /** The response's output list: items are added as they start. */
    private readonly output: OutputItem[],
    /** How a batch of deltas goes out; absent: one `emit` per delta. */
    private readonly emitDeltas: DeltaEmitter = (head, deltas, logprobs) => {
      deltas.forEach((d, i) => emit(head.event(d, logprobs?.[i])));
      return deltas.length;
    },
    /** Pieces past it get no logprobs (`logprobs: []` in their delta, none in the text part); absent: no limit. */
    private readonly allowance: LogprobAllowance = { left: Infinity },
  ) {}

  /** Apply one event (not `prefill`); returns the output tokens it carried. */
  apply(ev: Exclude<ModelEvent, { type: 'prefill' }>): number {
    switch (ev.type) {
      case 'reasoning':
        return ev.tokens;
      case 'message.start': {
        const msg: AssistantMessage = { id: newId('msg'), type: 'message', role: 'assistant', status: 'in_progress', content: [] };
        this.msg = msg;
        this.index = this.output.push(msg) - 1;
        this.head = new DeltaHead('response.output_text.delta', msg.id, this.index, 0);
        this.emit({ type: 'response.output_item.added', output_index: this.index, item: { ...msg, content: [] } });
        this.emit({ type: 'response.content_part.added', item_id: msg.id, output_index: this.index, content_index: 0, part: emptyText() });
        msg.content.push(emptyText());
        return 0;
      }
      case 'text.delta': {
        const msg = this.need(this.msg, 'text outside a message');
        const part = msg.content[0]!;
        part.text += ev.delta;
        const lp = ev.logprobs && this.allowed([ev.logprobs]);
        this.emit(new TextDelta(this.head!, ev.delta, lp?.[0]));
        if (lp?.[0]?.length) part.logprobs.push(ev.logprobs!);
        return 1;
      }
      case 'text.deltas': {
        const msg = this.need(this.msg, 'text outside a message');
        const part = msg.content[0]!;
        const lp = ev.logprobs && this.allowed(ev.logprobs);
        const n = this.emitDeltas(this.head!, ev.deltas, lp);
        part.text += (n === ev.deltas.length ? ev.deltas : ev.deltas.slice(0, n)).join('');
        // The pieces sent keep their logprobs in the text part (those within the allowance).
        if (ev.logprobs) for (let i = 0; i < n && i < lp!.length; i++) if (lp![i]!.length > 0) part.logprobs.push(ev.logprobs[i]!);
        return n;
      }
      case 'message.end':
        this.closeMessage(this.need(this.msg, 'the end of a message it did not start'), 'completed', ev.tokens);
        return 0;
      case 'call.start': {
        // A custom tool's call streams its input (`response.custom_tool_call_input.delta`), a function's its arguments.
        const call: ClientToolCall = ev.custom
          ? { id: newId('ctc'), type: 'custom_tool_call', call_id: ev.call_id, name: ev.name, input: '', status: 'in_progress' }
          : { id: newId('fc'), type: 'function_call', call_id: ev.call_id, name: ev.name, arguments: '', status: 'in_progress' };
        this.call = call;
        this.index = this.output.push(call) - 1;
        this.head = new DeltaHead(ev.custom ? 'response.custom_tool_call_input.delta' : 'response.function_call_arguments.delta', call.id, this.index, null);
        this.emit({ type: 'response.output_item.added', output_index: this.index, item: { ...call } });
        return 0;
      }
      case 'args.delta': {
        const call = this.need(this.call, 'arguments outside a call');
        addText(call, ev.delta);
        this.emit(new ArgsDelta(this.head!, ev.delta));
        return 1;
      }
      case 'args.deltas': {
        const call = this.need(this.call, 'arguments outside a call');
        const n = this.emitDeltas(this.head!, ev.deltas);
        addText(call, (n === ev.deltas.length ? ev.deltas : ev.deltas.slice(0, n)).join(''));
        return n;
      }
      case 'call.end': {
        const call = this.closeCall(this.need(this.call, 'the end of a call it did not start'), 'completed');
        this.items.push(call);
        this.itemTokens.push(ev.tokens);
        this.calls.push(call);
        return 0;
      }
      default: {
        const never: never = ev;
        throw new Error(`unknown model event ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * The response stopped mid-item (its output budget ran out): close the open
   * item as the API does, its done events with status `incomplete`, before
   * the terminal event. A cut message stays in the context; a cut call is
   * never run, so it does not.
   */
  truncate(): void {
    if (this.msg) this.closeMessage(this.msg, 'incomplete');
    if (this.call) this.closeCall(this.call, 'incomplete');
  }

  private closeMessage(msg: AssistantMessage, status: 'completed' | 'incomplete', tokens?: readonly number[]): void {
    const part = msg.content[0]!;
    msg.status = status;
    this.emit({ type: 'response.output_text.done', item_id: msg.id, output_index: this.index, content_index: 0, text: part.text, logprobs: (part.logprobs as TokenLogprob[]).map(eventLogprob) });
    this.emit({ type: 'response.content_part.done', item_id: msg.id, output_index: this.index, content_index: 0, part: { ...part } });
    this.emit({ type: 'response.output_item.done', output_index: this.index, item: { ...msg, content: [{ ...part }] } });
    // The context (what the model reads next, a ws-mode cache, --max-context-bytes) holds the text, not its logprobs.
    this.items.push(withoutLogprobs(msg));
    this.itemTokens.push(status === 'completed' ? tokens : undefined);
    this.msg = null;
  }

  private closeCall(call: ClientToolCall, status: 'completed' | 'incomplete'): ClientToolCall {
    call.status = status;
    if (call.type === 'custom_tool_call') this.emit({ type: 'response.custom_tool_call_input.done', item_id: call.id, output_index: this.index, input: call.input });
    else this.emit({ type: 'response.function_call_arguments.done', item_id: call.id, output_index: this.index, name: call.name, arguments: call.arguments });
    this.emit({ type: 'response.output_item.done', output_index: this.index, item: { ...call } });
    this.call = null;
    return call;
  }

  /** Each piece's event logprobs (one entry, or none past the response's allowance), taking from the allowance. */
  private allowed(lps: readonly TokenLogprob[]): EventLogprob[][] {
    return lps.map((l) => (this.allowance.left > 0 ? (this.allowance.left--, [eventLogprob(l)]) : []));
  }

  private need<T>(x: T | null, what: string): T {
    if (x === null) throw new Error(`the model sent ${what}`);
    return x;
  }
}

/** A call's streamed text: a custom call's input, a function call's arguments. */
function addText(call: ClientToolCall, text: string): void {
  if (call.type === 'custom_tool_call') call.input += text;
  else call.arguments += text;
}

function emptyText() {
  return { type: 'output_text' as const, text: '', annotations: [], logprobs: [] };
}
