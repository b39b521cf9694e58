/**
 * The chaos oracle: what every answer must look like, and the tally a
 * scenario keeps. An input is answered by a well-formed error, a response
 * (a stream that starts with `response.created` at 0, numbers every event
 * without a gap, and ends with exactly one terminal event) or a documented
 * close code. Anything else is a failure of a named kind, kept with the
 * input that caused it (abbreviated) so a person can replay it.
 */
import { TIMING_EVENT } from '../protocol/events.js';

export const FAILURE_KINDS = [
  'crash', // the server process exited
  'hang', // no answer within the bound
  'unsettled', // a run record left in progress, or HTTP requests still in flight, after clients closed
  'billing', // a response billed other than exactly once
  'sequence', // a gap, repeat or missing terminal in a response stream
  'malformed', // an answer that is not a well-formed error / response, or a 5xx for client input
  'close', // a WebSocket closed with an undocumented code
  'health', // /health slower than its deadline or not answering
  'rss', // memory over the scenario's bound
  'lost', // a stored response the client saw completed was not retrievable
  'dropped', // a client that stopped reading was not dropped
] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

export interface Failure {
  kind: FailureKind;
  input: string;
  detail: string;
}

/** WebSocket close codes the project documents (docs/protocol.md), plus RFC 6455 codes the ws library sends itself. */
export const DOCUMENTED_CLOSE = new Set([1000, 1001, 1009]);
export const RFC_CLOSE = new Set([1002, 1007]);

const MAX_EXAMPLES_PER_KIND = 5;

export class Tally {
  inputs = 0;
  errors = 0;
  responses = 0;
  closes = 0;
  readonly failures = new Map<FailureKind, number>();
  readonly examples: Failure[] = [];
  rss = { start: 0, peak: 0, end: 0 };
  healthMaxMs = 0;
  readonly closeCodes = new Map<number, number>();
  readonly errorCodes = new Map<string, number>();
  notes: string[] = [];
  /** Inputs sent to each design (a row over several designs counts each): what the suite's coverage check reads. */
  readonly exercised = new Map<string, number>();

  constructor(
    readonly scenario: string,
    readonly design: string,
  ) {}

  fail(kind: FailureKind, input: string, detail: string): void {
    this.failures.set(kind, (this.failures.get(kind) ?? 0) + 1);
    if (this.examples.filter((f) => f.kind === kind).length < MAX_EXAMPLES_PER_KIND) {
      this.examples.push({ kind, input: abbreviate(input), detail: abbreviate(detail, 400) });
    }
  }

  /** One input sent to `design`. */
  input(design: string): void {
    this.inputs++;
    this.exercise(design);
  }

  /** `n` inputs sent to `design`, counted in `inputs` elsewhere. */
  exercise(design: string, n = 1): void {
    if (n > 0) this.exercised.set(design, (this.exercised.get(design) ?? 0) + n);
  }

  count(kind: FailureKind): number {
    return this.failures.get(kind) ?? 0;
  }

  get failed(): number {
    let n = 0;
    for (const v of this.failures.values()) n += v;
    return n;
  }

  errorCode(code: string): void {
    this.errorCodes.set(code, (this.errorCodes.get(code) ?? 0) + 1);
  }

  closeCode(code: number): void {
    this.closeCodes.set(code, (this.closeCodes.get(code) ?? 0) + 1);
  }
}

function abbreviate(s: string, max = 240): string {
  const oneLine = s.replace(/[\r\n]+/g, '⏎');
  if (oneLine.length <= max) return oneLine;
  return `${oneLine.slice(0, max - 40)}… (${s.length} chars) …${oneLine.slice(-30)}`;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** An HTTP error body: `{error:{message,type,param,code}}`. Returns a complaint, or null if well-formed. */
export function checkHttpErrorBody(body: unknown): string | null {
  if (!isObj(body) || !isObj(body['error'])) return 'error body is not {error:{…}}';
  const e = body['error'];
  if (typeof e['message'] !== 'string' || e['message'] === '') return 'error.message missing';
  if (typeof e['type'] !== 'string') return 'error.type missing';
  if (typeof e['code'] !== 'string') return 'error.code missing';
  if (!('param' in e) || (e['param'] !== null && typeof e['param'] !== 'string')) return 'error.param missing';
  return null;
}

/** A WebSocket `error` event (nested shape). */
export function checkWsError(e: Obj): string | null {
  if (typeof e['status'] !== 'number') return 'error event without a numeric status';
  if (!isObj(e['error'])) return 'error event without an error object';
  const b = e['error'];
  if (typeof b['code'] !== 'string' || typeof b['message'] !== 'string' || typeof b['type'] !== 'string') return 'error event without code/message/type';
  return null;
}

const TERMINAL = new Set(['response.completed', 'response.failed', 'response.incomplete', 'response.cancelled']);

function isTerminal(type: unknown): boolean {
  return typeof type === 'string' && TERMINAL.has(type);
}

/**
 * One response's stream, event by event: response.created at 0, then every
 * event numbered +1, one terminal event, then at most `llr:timing`. On a
 * WebSocket one stream is open at a time, so events need no response id.
 */
export class StreamCheck {
  id: string | null = null;
  private next = 0;
  terminal: string | null = null;
  /** `llr:timing` seen (it follows the terminal event). */
  timing = false;
  finalResponse: Obj | null = null;
  problems: string[] = [];
  /** Set once `response.done` was the last lifecycle event (long-lived pause). */
  paused = false;
  pendingCalls: string[] = [];
  readonly calls: Array<{ call_id: string; name: string; arguments: string }> = [];
  /** Events seen, by type. */
  readonly counts = new Map<string, number>();

  feed(e: Obj): void {
    const type = e['type'];
    this.counts.set(String(type), (this.counts.get(String(type)) ?? 0) + 1);
    const seq = e['sequence_number'];
    if (this.next === 0) {
      if (type !== 'response.created') this.problems.push(`first event is ${String(type)}, not response.created`);
      const r = e['response'];
      if (isObj(r) && typeof r['id'] === 'string') this.id = r['id'];
    }
    if (typeof seq !== 'number') this.problems.push(`${String(type)} has no sequence_number`);
    else if (seq !== this.next) this.problems.push(`${String(type)} has sequence_number ${seq}, expected ${this.next}`);
    this.next = typeof seq === 'number' ? seq + 1 : this.next + 1;
    if (this.terminal && type !== TIMING_EVENT) this.problems.push(`${String(type)} after the terminal ${this.terminal}`);
    if (type === TIMING_EVENT) this.timing = true;
    if (isTerminal(type)) {
      this.terminal = type as string;
      this.paused = false;
      if (isObj(e['response'])) this.finalResponse = e['response'];
    }
    if (type === 'response.done') {
      this.paused = true;
      const r = e['response'];
      this.pendingCalls = isObj(r) && Array.isArray(r['pending_tool_calls']) ? (r['pending_tool_calls'] as string[]) : [];
    } else if (type === 'response.output_item.added') {
      this.paused = false;
    }
    if (type === 'response.output_item.done') {
      const item = e['item'];
      if (isObj(item) && item['type'] === 'function_call') {
        this.calls.push({ call_id: String(item['call_id']), name: String(item['name']), arguments: String(item['arguments']) });
      }
    }
  }

  /** Problems once the stream is over (or given up on). */
  close(): string[] {
    if (!this.terminal) this.problems.push('no terminal event');
    return this.problems;
  }
}
