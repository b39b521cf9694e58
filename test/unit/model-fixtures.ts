/**
 * Shared fixtures for the model unit tests: a fake clock that records the
 * sleeps it is asked for and advances its own time, request and item
 * builders, a stream collector, and a validator for the JSON Schema subset
 * the argument generator covers. No sockets, no real timers.
 */
import type { Clock } from '../../src/model/clock.js';
import type { JsonSchema } from '../../src/model/schema-args.js';
import type { Model, ModelEvent, ModelRequest, ModelSettings } from '../../src/model/types.js';
import type { FunctionCall, FunctionCallOutput, FunctionTool, InputMessage } from '../../src/protocol/objects.js';

/**
 * Time only moves when the model sleeps (or a test calls `advance`). With
 * `granularityMs`, each sleep rounds up to a multiple of it, like a real
 * timer that cannot fire sooner than 1 ms.
 */
export class FakeClock implements Clock {
  t = 0;
  readonly sleeps: number[] = [];
  constructor(private readonly granularityMs = 0) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    this.sleeps.push(ms);
    if (ms <= 0) return;
    this.t += this.granularityMs > 0 ? Math.ceil(ms / this.granularityMs) * this.granularityMs : ms;
  }
}

/** A clock whose sleeps never end on their own: only an abort settles them. */
export class StuckClock implements Clock {
  now(): number {
    return 0;
  }
  sleep(_ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((_resolve, reject) => {
      if (signal?.aborted) reject(signal.reason);
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }
}

export const SETTINGS: ModelSettings = { tokensPerSecond: 100, ttftBaseMs: 0, prefillTokensPerSecond: Infinity };

export function request(over: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: 'sim',
    settings: SETTINGS,
    instructions: null,
    items: [user('Hello there')],
    tools: [],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    promptTokens: [],
    maxOutputTokens: null,
    ...over,
  };
}

export function user(content: InputMessage['content']): InputMessage {
  return { type: 'message', role: 'user', content };
}

export function assistant(text: string): InputMessage {
  return { type: 'message', role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] };
}

export function call(call_id: string, name: string, args: string): FunctionCall {
  return { id: `fc_${call_id}`, type: 'function_call', call_id, name, arguments: args, status: 'completed' };
}

export function output(call_id: string, out: FunctionCallOutput['output']): FunctionCallOutput {
  return { type: 'function_call_output', call_id, output: out };
}

export function fnTool(name: string, parameters: Record<string, unknown> | null = null): FunctionTool {
  return { type: 'function', name, parameters, strict: false };
}

/** Codex's unified-exec tool, as Codex CLI declares it (trimmed to what matters). */
export const EXEC_COMMAND = fnTool('exec_command', {
  type: 'object',
  properties: { cmd: { type: 'string' }, workdir: { type: 'string' }, yield_time_ms: { type: 'number' } },
  required: ['cmd'],
  additionalProperties: false,
});

export const SHELL = fnTool('shell', {
  type: 'object',
  properties: { command: { type: 'array', items: { type: 'string' } }, workdir: { type: 'string' } },
  required: ['command'],
  additionalProperties: false,
});

export async function collect(model: Model, req: ModelRequest, signal = new AbortController().signal): Promise<ModelEvent[]> {
  const events: ModelEvent[] = [];
  for await (const e of model.sample(req, signal)) events.push(e);
  return events;
}

/** The visible output of a stream, reassembled: messages' text and calls with their arguments. */
export function outputOf(events: readonly ModelEvent[]) {
  const items: Array<{ type: 'message'; text: string } | { type: 'function_call'; name: string; call_id: string; arguments: string }> = [];
  for (const e of events) {
    const last = items[items.length - 1];
    if (e.type === 'message.start') items.push({ type: 'message', text: '' });
    else if (e.type === 'call.start') items.push({ type: 'function_call', name: e.name, call_id: e.call_id, arguments: '' });
    else if (e.type === 'text.delta' && last?.type === 'message') last.text += e.delta;
    else if (e.type === 'args.delta' && last?.type === 'function_call') last.arguments += e.delta;
  }
  return items;
}

export function deltaCount(events: readonly ModelEvent[]): number {
  return events.filter((e) => e.type === 'text.delta' || e.type === 'args.delta').length;
}

/** A validator for the JSON Schema subset the generator claims to cover; returns the errors found. */
export function validate(schema: JsonSchema, value: unknown, root: JsonSchema = schema, path = '$'): string[] {
  if (typeof schema.$ref === 'string') {
    const target = schema.$ref.slice(2).split('/').reduce<unknown>((n, k) => (n as Record<string, unknown>)[k], root) as JsonSchema;
    return validate(target, value, root, path);
  }
  const errors: string[] = [];
  const err = (m: string) => errors.push(`${path}: ${m}`);
  if ('const' in schema && value !== schema.const) err('const');
  if (Array.isArray(schema.enum) && !schema.enum.includes(value)) err('enum');
  if (Array.isArray(schema.anyOf) && !schema.anyOf.some((s) => validate(s as JsonSchema, value, root, path).length === 0)) err('anyOf');
  if (Array.isArray(schema.allOf)) for (const s of schema.allOf) errors.push(...validate(s as JsonSchema, value, root, path));
  const types = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type];
  const typeOk = (t: unknown) =>
    (t === 'string' && typeof value === 'string') ||
    (t === 'number' && typeof value === 'number') ||
    (t === 'integer' && Number.isInteger(value)) ||
    (t === 'boolean' && typeof value === 'boolean') ||
    (t === 'null' && value === null) ||
    (t === 'array' && Array.isArray(value)) ||
    (t === 'object' && typeof value === 'object' && value !== null && !Array.isArray(value));
  if (types.length > 0 && !types.some(typeOk)) err(`type ${JSON.stringify(schema.type)}`);
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && value.length < schema.minLength) err('minLength');
    if (typeof schema.maxLength === 'number' && value.length > schema.maxLength) err('maxLength');
    if (schema.format === 'date-time' && Number.isNaN(Date.parse(value))) err('format');
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) err('minimum');
    if (typeof schema.maximum === 'number' && value > schema.maximum) err('maximum');
    if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum) err('exclusiveMinimum');
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) err('minItems');
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) err('maxItems');
    if (schema.items && typeof schema.items === 'object') value.forEach((v, i) => errors.push(...validate(schema.items as JsonSchema, v, root, `${path}[${i}]`)));
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
    for (const r of (schema.required ?? []) as string[]) if (!(r in obj)) err(`missing ${r}`);
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) errors.push(...validate(props[k], v, root, `${path}.${k}`));
      else if (schema.additionalProperties === false) err(`extra ${k}`);
    }
  }
  return errors;
}
