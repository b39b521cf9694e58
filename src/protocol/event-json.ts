/**
 * Server events as the JSON text a transport sends. Every event is
 * `JSON.stringify`-ed, except the two delta events, which make up almost
 * every event of a stream: the engine builds them as `TextDelta` /
 * `ArgsDelta` instances whose JSON is a pre-serialised head, shared by all
 * the deltas of one item (type, item_id, output_index, content_index), then
 * the escaped delta and the sequence number. The text is byte-identical to
 * `JSON.stringify` of the same event (the class fields are declared in the
 * wire order, and a unit test compares the two over many random strings);
 * only the work differs.
 *
 * Used by the WebSocket and SSE transports (serialising) and engine/segment.ts
 * (building deltas). Leaves out every other event: they are a few per model
 * call and keep the general path.
 */
import type { ArgsDeltaEvent, ServerEvent, TextDeltaEvent } from './events.js';

/** What the deltas of one item share; built once per item. */
export class DeltaHead {
  /** `{"type":…,"item_id":…,"output_index":…[,"content_index":…],"delta":` */
  readonly json: string;

  constructor(
    readonly type: 'response.output_text.delta' | 'response.function_call_arguments.delta',
    readonly itemId: string,
    readonly outputIndex: number,
    /** The text part's index; null for function call arguments (their delta has no content_index). */
    readonly contentIndex: number | null,
  ) {
    const idx = contentIndex === null ? '' : `,"content_index":${JSON.stringify(contentIndex)}`;
    this.json = `{"type":${JSON.stringify(type)},"item_id":${JSON.stringify(itemId)},"output_index":${JSON.stringify(outputIndex)}${idx},"delta":`;
  }
}

/** `response.output_text.delta`; the fields in wire order (the order JSON.stringify writes them). */
export class TextDelta implements TextDeltaEvent {
  readonly type = 'response.output_text.delta' as const;
  readonly item_id: string;
  readonly output_index: number;
  readonly content_index: number;
  readonly delta: string;
  readonly logprobs: unknown[] = [];
  /** Set by the run when it numbers the event (-1 until then). */
  sequence_number = -1;
  readonly #head: DeltaHead;

  constructor(head: DeltaHead, delta: string) {
    this.item_id = head.itemId;
    this.output_index = head.outputIndex;
    this.content_index = head.contentIndex ?? 0;
    this.delta = delta;
    this.#head = head;
  }

  toWire(): string {
    if (this.logprobs.length !== 0 || !Number.isSafeInteger(this.sequence_number)) return JSON.stringify(this);
    return `${this.#head.json}${JSON.stringify(this.delta)},"logprobs":[],"sequence_number":${this.sequence_number}}`;
  }
}

/** `response.function_call_arguments.delta`; the fields in wire order. */
export class ArgsDelta implements ArgsDeltaEvent {
  readonly type = 'response.function_call_arguments.delta' as const;
  readonly item_id: string;
  readonly output_index: number;
  readonly delta: string;
  sequence_number = -1;
  readonly #head: DeltaHead;

  constructor(head: DeltaHead, delta: string) {
    this.item_id = head.itemId;
    this.output_index = head.outputIndex;
    this.delta = delta;
    this.#head = head;
  }

  toWire(): string {
    if (!Number.isSafeInteger(this.sequence_number)) return JSON.stringify(this);
    return `${this.#head.json}${JSON.stringify(this.delta)},"sequence_number":${this.sequence_number}}`;
  }
}

/** Events the run numbers in place instead of copying (they are built fresh for one emission). */
export function numberedInPlace(e: object): e is TextDelta | ArgsDelta {
  return e instanceof TextDelta || e instanceof ArgsDelta;
}

/** The JSON text of `e`: exactly `JSON.stringify(e)`. */
export function eventJson(e: ServerEvent): string {
  if (e instanceof TextDelta || e instanceof ArgsDelta) return e.toWire();
  return JSON.stringify(e);
}
