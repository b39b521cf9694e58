/**
 * The validate stage: the per-item semantic checks a Responses API server
 * makes beyond the edge parser's shape checks — content part types, the
 * API's length bounds on texts and call arguments, tool outputs that answer a call the
 * context holds (and, for a ws or http create, every client call answered:
 * `trackCall`), tool definitions with sane names and object schemas that
 * bounded arguments can satisfy (`checkToolSchema`).
 *
 * Full form walks every item and tool; incremental form walks only new items
 * against what the context already knows. Errors are `WireError`s naming the
 * param. Leaves out JSON Schema validation of call arguments (the API does
 * not do it either unless `strict`).
 */
import { clipText, WireError, jsonPreview } from '../protocol/errors.js';
import { isKnownItem, type InputItem, type TextFormat, type Tool } from '../protocol/objects.js';
import type { RunMetrics } from './metrics.js';
import { CHECKED_KEY_CHARS, checkToolSchema } from '../model/schema-args.js';
import { runCooperative, runSync, type Work } from '../cooperative.js';
import { ARGUMENTS_MAX_CHARS, checkLength, requireStringType, TEXT_MAX_CHARS } from '../protocol/fields.js';
import { jsonTextIfShortWork } from '../protocol/json-chunked.js';
import { checkImageUrl, webUrl } from '../protocol/urls.js';

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/**
 * The content parts a message may hold: openai-node's `ResponseInputContent` (`input_text`, `input_image`, `input_file`:
 * the OpenAPI spec's `InputContent` has the same three) and, in an assistant message, `ResponseOutputMessage`'s
 * `output_text` and `refusal`. `input_audio` is in neither (openai-node declares `ResponseInputAudio` but no input union
 * holds it): it was taken, even as `{"type": "input_audio"}` with no audio, and listed back by input_items as a part no
 * typed reader decodes.
 */
const INPUT_PART_TYPES = new Set(['input_text', 'input_image', 'input_file', 'output_text', 'refusal']);

/**
 * The parts a tool's output list may hold: openai-node's `ResponseFunctionCallOutputItem` (`input_text`, `input_image`,
 * `input_file`) and `ResponseCustomToolCallOutput.output`'s list, the same three. `output_text` and `refusal` are what a
 * model says; in a tool output they were taken and listed back by input_items to readers that decode those three only.
 */
const TOOL_OUTPUT_PART_TYPES: ReadonlySet<string> = new Set(['input_text', 'input_image', 'input_file']);

export interface KnownCalls {
  /** call_ids of function calls already in the context. */
  callIds: ReadonlySet<string>;
  /**
   * The context's client calls still waiting for an output, when the request must answer them
   * (`requireToolOutputs`): the walk adds each call and removes each answered one, in place.
   */
  pending?: PendingCalls;
}

/**
 * Item types of calls the client runs: the Responses API refuses a request whose context (the
 * `previous_response_id` chain, then `input`) holds one with no output item for its call_id after it.
 */
export const CLIENT_CALL_TYPES: ReadonlySet<string> = new Set(['function_call', 'custom_tool_call', 'local_shell_call', 'computer_call', 'shell_call', 'apply_patch_call']);
/** The output items that answer them. Any of them answers a call by call_id, whatever the call's type (the API's pairing across types is unknown: not refused here). */
const CALL_OUTPUT_TYPES: ReadonlySet<string> = new Set([
  'function_call_output',
  'custom_tool_call_output',
  'local_shell_call_output',
  'computer_call_output',
  'shell_call_output',
  'apply_patch_call_output',
]);

/**
 * The call_id an output item answers by (`function_call_output`, `custom_tool_call_output`, `computer_call_output`,
 * `shell_call_output`, `apply_patch_call_output`), or undefined for any other item (a `local_shell_call_output` names
 * its call by `id`). Any of them answers a call of any type, as the missing-output check pairs them (below).
 */
export function answeredCallId(item: InputItem): string | undefined {
  const type = item.type;
  if (type === undefined || type === 'local_shell_call_output' || !CALL_OUTPUT_TYPES.has(type)) return undefined;
  const callId = (item as { call_id?: unknown }).call_id;
  return typeof callId === 'string' ? callId : undefined;
}

/**
 * The call_id a client call item declares (a `function_call`, `custom_tool_call`, `local_shell_call`, …), or
 * undefined for any other item. A `function_call_output` may answer any of them: Codex (codex-rs) has no
 * `local_shell_call_output` and answers its local shell calls, and every call it aborted, with one.
 */
export function clientCallId(item: InputItem): string | undefined {
  if (item.type === undefined || !CLIENT_CALL_TYPES.has(item.type)) return undefined;
  const callId = (item as { call_id?: unknown }).call_id;
  return typeof callId === 'string' ? callId : undefined;
}

/**
 * Client calls without an output yet, by call_id, in context order: the call's item type, and its
 * item id (a `local_shell_call_output` names its call by `id`). The calls are also indexed by item
 * id, so such an output finds its call at once: scanning every pending call for it made an input of
 * n calls and n such outputs O(n^2) (20,000 of each, a 2.7 MB body, held a core ~14 s).
 */
export class PendingCalls {
  readonly #calls = new Map<string, { type: string; id: string | undefined }>();
  /** Item id → the call_ids of the pending calls with it, oldest first (item ids are the client's: not unique). */
  readonly #byItemId = new Map<string, Set<string>>();

  /** A copy of `from` (a ws continuation starts from the cached response's calls and must not change them). */
  constructor(from?: PendingCalls) {
    if (!from) return;
    for (const [callId, call] of from.#calls) this.#calls.set(callId, call);
    for (const [itemId, callIds] of from.#byItemId) this.#byItemId.set(itemId, new Set(callIds));
  }

  get size(): number {
    return this.#calls.size;
  }

  /** call_ids pending, in context order. */
  keys(): IterableIterator<string> {
    return this.#calls.keys();
  }

  /** The first call still pending, or undefined. */
  first(): [string, { type: string; id: string | undefined }] | undefined {
    for (const entry of this.#calls) return entry;
    return undefined;
  }

  /** A call now waits (again, if its call_id was already pending: its type and item id are the latest). */
  add(callId: string, type: string, id: string | undefined): void {
    this.#unindex(callId);
    this.#calls.set(callId, { type, id });
    if (id === undefined) return;
    const holders = this.#byItemId.get(id);
    if (holders) holders.add(callId);
    else this.#byItemId.set(id, new Set([callId]));
  }

  /** An output for `callId`: true when a call was waiting for it. */
  answer(callId: string): boolean {
    if (!this.#unindex(callId)) return false;
    this.#calls.delete(callId);
    return true;
  }

  /** An output naming its call by item id (or by a call_id given as `id`): the first pending call it names. */
  answerItem(id: string): void {
    if (this.answer(id)) return;
    const oldest = this.#byItemId.get(id)?.values().next();
    if (oldest && !oldest.done) this.answer(oldest.value);
  }

  /** Drop `callId` from the item id index; false when it is not pending. */
  #unindex(callId: string): boolean {
    const call = this.#calls.get(callId);
    if (!call) return false;
    if (call.id !== undefined) {
      const holders = this.#byItemId.get(call.id);
      if (holders?.delete(callId) && holders.size === 0) this.#byItemId.delete(call.id);
    }
    return true;
  }
}

/**
 * Follow one item of a context in `pending`: a client call starts waiting, an output ends its
 * call's wait. A call cut short (`status: incomplete`, a `max_output_tokens` cut or a cancel)
 * does not wait: the model never finished it, the server never asks for its output
 * (`readyToRun`), though a client saw it closed `incomplete` in `output_item.done`, and the
 * server accepts it back as it is (see `validateItemsWork`). Sent back without its status (Codex
 * 0.107 keeps none), it is a call like any other, and waits for the output such a client sends.
 */
export function trackCall(item: InputItem, pending: PendingCalls): void {
  const type = item.type;
  if (type === undefined || type === 'message') return;
  const fields = item as { call_id?: unknown; id?: unknown; status?: unknown };
  if (CLIENT_CALL_TYPES.has(type)) {
    if (typeof fields.call_id === 'string' && fields.status !== 'incomplete') {
      pending.add(fields.call_id, type, typeof fields.id === 'string' ? fields.id : undefined);
    }
  } else if (CALL_OUTPUT_TYPES.has(type)) {
    if (typeof fields.call_id === 'string') pending.answer(fields.call_id);
    else if (type === 'local_shell_call_output' && typeof fields.id === 'string') pending.answerItem(fields.id);
  }
}

/** The context's client calls pending after `items`, from an empty start (a response's output: few items). */
export function pendingCallsOf(items: readonly InputItem[]): PendingCalls {
  const pending = new PendingCalls();
  for (const item of items) trackCall(item, pending);
  return pending;
}

/**
 * The API's refusal of a context that leaves a client call unanswered, naming the first such call
 * (its wording: "No tool output found for function call call_…." / "… for custom tool call …";
 * `param: input`). Null when every call has its output.
 */
export function missingToolOutput(pending: PendingCalls): WireError | null {
  const first = pending.first();
  if (!first) return null;
  const [callId, call] = first;
  return new WireError('missing_tool_output', `No tool output found for ${call.type.replaceAll('_', ' ')} ${callId}.`, 'input');
}

/**
 * The API's refusal of a create whose input holds an item with an `id` that the context already holds: an earlier
 * item of the input, or an item of the `previous_response_id` chain (an `item_reference`, resolved, carries its
 * item's id). Its words, `param: input` (its code is null; here `duplicate_item`), as public client reports quote
 * them (continuedev/continue#10723, vercel/ai#15492, earendil-works/pi#5151): "Duplicate item found with id
 * rs_…. Remove duplicate items from your input and try again." `history` is only read when an input item has an
 * id (most continuations send outputs and messages without one), and is not checked against itself: a stored chain
 * is continued as it was stored. Null when every id is new.
 */
export function duplicateItemId(history: readonly InputItem[], input: readonly InputItem[]): WireError | null {
  let known: ReadonlySet<string> | undefined;
  let seen: Set<string> | undefined;
  for (const item of input) {
    const id = ownItemId(item);
    if (id === undefined) continue;
    known ??= historyIds(history);
    seen ??= new Set();
    if (known.has(id) || seen.has(id)) {
      const shown = id.length > 100 ? `${id.slice(0, 100)}…` : id;
      return new WireError('duplicate_item', `Duplicate item found with id ${shown}. Remove duplicate items from your input and try again.`, 'input');
    }
    seen.add(id);
  }
  return null;
}

/**
 * The item's own id, if it has one. A `local_shell_call_output`'s `id` is not its own: openai-node and the OpenAPI spec
 * type it as "the unique ID of the local shell tool call generated by the model", the call's, so it repeats the call's
 * id by design (the conformance suite sends one so; it was refused as a duplicate).
 */
function ownItemId(item: InputItem): string | undefined {
  const { id, type } = item as { id?: unknown; type?: unknown };
  return typeof id === 'string' && type !== 'local_shell_call_output' ? id : undefined;
}

/** A history's item ids, kept per items array for as long as it lives and extended as it grows (`historyIds`). */
const historyIdSets = new WeakMap<readonly InputItem[], { counted: number; last: InputItem | undefined; ids: Set<string> }>();

/**
 * The ids of `history`'s items. A ws-mode connection's cached context is one array extended in place by each
 * continuation (pipeline/render.ts pushes, nothing else changes it): its ids are read once each, not again at every
 * continuation that carries an id. Walking the whole cached context each time held the loop ~10 ms per continuation at
 * 49,000 items (outside attack). An array that is not the one last seen grown (shorter, or another item where the
 * last one counted was) is read afresh. The set holds the items' own id strings, ~30 bytes an item, only for
 * contexts a continuation carrying an id was checked against.
 */
function historyIds(history: readonly InputItem[]): ReadonlySet<string> {
  let memo = historyIdSets.get(history);
  if (memo === undefined || memo.counted > history.length || (memo.counted > 0 && history[memo.counted - 1] !== memo.last)) {
    memo = { counted: 0, last: undefined, ids: new Set() };
    historyIdSets.set(history, memo);
  }
  for (; memo.counted < history.length; memo.counted++) {
    const id = ownItemId(history[memo.counted]!);
    if (id !== undefined) memo.ids.add(id);
  }
  memo.last = history[memo.counted - 1];
  return memo.ids;
}

/** Where a strict schema's subschemas are: a property, the items of an array, a branch of `anyOf`, a definition. */
const STRICT_CHILDREN = ['properties', '$defs', 'definitions'] as const;

/**
 * A `text.format` JSON schema sent with `strict: true` follows the API's strict Structured Outputs subset: the root
 * is an object schema, and every object schema sets `additionalProperties: false` and lists every property in
 * `required` (optional fields are spelled as a union with `null`). Else `400 invalid_json_schema`, `param:
 * text.format.schema`, the message in the API's words and with its `context=(…)` path. It was taken, so a schema the
 * API refuses worked here and failed at the first call to the API. Only these structural rules are checked (the
 * keyword subset the API accepts changes over time). The walk is bounded: the request's schemas hold at most
 * `--max-schema-nodes` objects and arrays (protocol/parse.ts checkSchemaNodes), and it uses an explicit stack.
 */
function checkStrictSchema(root: Record<string, unknown>, subject: StrictSubject): void {
  const { what: label, param, code } = subject;
  const refuse = (path: string[], what: string): never => {
    const context = `(${path.map((p) => `'${p.slice(0, 100)}'`).join(', ')}${path.length === 1 ? ',' : ''})`;
    throw new WireError(code, `Invalid schema for ${label}: In context=${context}, ${what}`, param);
  };
  if (!isObjectSchema(root)) {
    const type = jsonPreview(root['type'] ?? null);
    throw new WireError(code, `Invalid schema for ${label}: schema must be a JSON Schema of 'type: "object"', got 'type: ${type}'.`, param);
  }
  const stack: Array<{ schema: unknown; path: string[] }> = [{ schema: root, path: [] }];
  while (stack.length > 0) {
    const { schema, path } = stack.pop()!;
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) continue;
    const s = schema as Record<string, unknown>;
    if (isObjectSchema(s)) {
      if (s['additionalProperties'] !== false) refuse(path, "'additionalProperties' is required to be supplied and to be false.");
      const props = typeof s['properties'] === 'object' && s['properties'] !== null ? Object.keys(s['properties']) : [];
      // A set: 10,000 properties against a `required` of 10,000 was 10^8 comparisons in one turn of the loop.
      const required = Array.isArray(s['required']) ? new Set(s['required'] as unknown[]) : null;
      const missing = props.find((k) => !required?.has(k));
      if (required === null || missing !== undefined) {
        refuse(path, `'required' is required to be supplied and to be an array including every key in properties.${missing === undefined ? '' : ` Missing '${missing.slice(0, 100)}'.`}`);
      }
    }
    for (const key of STRICT_CHILDREN) {
      const group = s[key];
      if (typeof group !== 'object' || group === null || Array.isArray(group)) continue;
      for (const k of Object.keys(group)) stack.push({ schema: (group as Record<string, unknown>)[k], path: [...path, key, k] });
    }
    if (typeof s['items'] === 'object') stack.push({ schema: s['items'], path: [...path, 'items'] });
    for (const key of ['anyOf', 'oneOf'] as const) {
      const branches = s[key];
      if (Array.isArray(branches)) branches.forEach((b, i) => stack.push({ schema: b, path: [...path, key, String(i)] }));
    }
  }
}

/**
 * What a strict schema belongs to, as the API's refusal names it: a `text.format` schema (`response_format 'NAME'`,
 * `invalid_json_schema`, `param: text.format.schema`) or a function tool's parameters sent with `strict: true`
 * (`function 'NAME'`, `invalid_function_parameters`, `param: tools[i].parameters`, as the API answers it).
 */
interface StrictSubject {
  what: string;
  param: string;
  code: 'invalid_json_schema' | 'invalid_function_parameters';
}

/** An object schema: `type: "object"` (alone or in a list), or no `type` and `properties`. */
function isObjectSchema(s: Record<string, unknown>): boolean {
  const t = s['type'];
  if (t === 'object') return true;
  if (Array.isArray(t)) return t.includes('object');
  return t === undefined && typeof s['properties'] === 'object' && s['properties'] !== null;
}

/**
 * Tools' names and schemas, and the `text.format` schema of structured
 * outputs: one no bounded output satisfies is `invalid_json_schema` (400,
 * `param: text.format.schema`) before the run, not a failed response after.
 */
export function validateTools(tools: readonly Tool[], metrics: RunMetrics, format?: TextFormat): void {
  runSync(validateToolsWork(tools, metrics, format));
}

/** The same checks, yielding to the event loop between tools (their schemas together can fill 16 MiB). */
export function validateToolsAsync(tools: readonly Tool[], metrics: RunMetrics, format?: TextFormat): Promise<void> {
  return runCooperative(validateToolsWork(tools, metrics, format));
}

function* validateToolsWork(tools: readonly Tool[], metrics: RunMetrics, format?: TextFormat): Work<void> {
  if (format?.type === 'json_schema') {
    // In slices when its strings are long, as a tool's schema is: one JSON.stringify of a schema of 2.4 million lone
    // surrogates (six-character escapes) held the loop ~0.1-0.3 s.
    checkToolSchema(format.schema, 'text.format.schema', yield* jsonTextIfShortWork(format.schema, CHECKED_KEY_CHARS), 'invalid_json_schema');
    if (format.strict === true) checkStrictSchema(format.schema, { what: `response_format '${format.name.slice(0, 100)}'`, param: 'text.format.schema', code: 'invalid_json_schema' });
    yield;
  }
  const seen = new Set<string>();
  for (let i = 0; i < tools.length; i++) {
    const t = tools[i]!;
    yield;
    if (t.type !== 'function') continue;
    const ft = t as { name: string; parameters?: unknown; strict?: unknown };
    if (!TOOL_NAME.test(ft.name)) {
      throw new WireError('invalid_value', `Invalid 'tools[${i}].name': must match ${TOOL_NAME.source}.`, `tools[${i}].name`);
    }
    if (seen.has(ft.name)) throw new WireError('invalid_value', `Duplicate tool name '${ft.name}'.`, `tools[${i}].name`);
    seen.add(ft.name);
    const p = ft.parameters;
    if (p !== undefined && p !== null) {
      if (typeof p !== 'object' || Array.isArray(p)) {
        throw new WireError('invalid_type', `Invalid 'tools[${i}].parameters': expected a JSON Schema object.`, `tools[${i}].parameters`);
      }
      const type = (p as Record<string, unknown>)['type'];
      if (type !== undefined && type !== 'object') {
        // The API's refusal (its code, param and words, as public client reports quote them).
        throw new WireError(
          'invalid_function_parameters',
          `Invalid schema for function '${ft.name}': schema must be a JSON Schema of 'type: "object"', got 'type: ${jsonPreview(type)}'.`,
          `tools[${i}].parameters`,
        );
      }
      // Sent with `strict: true`, the parameters follow the strict subset as a strict text.format schema does, and the
      // API refuses them otherwise ("Invalid schema for function 'f': In context=(), 'required' is required to be
      // supplied and to be an array including every key in properties. Missing 'x'."). Only an explicit `true`: the
      // echo's default (`strict: true` when not sent) is not checked (docs/protocol.md).
      if (ft.strict === true) {
        checkStrictSchema(p as Record<string, unknown>, { what: `function '${ft.name}'`, param: `tools[${i}].parameters`, code: 'invalid_function_parameters' });
      }
      // Round-trips the schema: the API stores it, and a schema that cannot be serialised is rejected.
      const serialized = yield* jsonTextIfShortWork(p, CHECKED_KEY_CHARS);
      // The auto policy may generate arguments from it: refuse, before any run, a schema no bounded arguments satisfy.
      checkToolSchema(p, `tools[${i}].parameters`, serialized);
    }
  }
  metrics.count('items_validated', tools.length);
}


/**
 * Validate `items`, whose function_call_outputs must answer a call either in
 * `known` or earlier in `items`. `param` prefixes error params (`input`).
 * Returns the call ids these items declare (`known`'s are not copied in:
 * with an empty `known`, as for a whole history, that is every call id).
 */
export function validateItems(items: readonly InputItem[], known: KnownCalls, metrics: RunMetrics, param = 'input'): Set<string> {
  return runSync(validateItemsWork(items, known, metrics, param));
}

/** The same checks, yielding to the event loop on large inputs. */
export function validateItemsAsync(items: readonly InputItem[], known: KnownCalls, metrics: RunMetrics, param = 'input'): Promise<Set<string>> {
  return runCooperative(validateItemsWork(items, known, metrics, param));
}

function* validateItemsWork(items: readonly InputItem[], known: KnownCalls, metrics: RunMetrics, param: string): Work<Set<string>> {
  // Only the ids these items declare: copying `known` (a long-lived run's every call id, up to tens of
  // thousands) made each append's validation grow with the run (an outside attack's 2,000-step run).
  const local = new Set<string>();
  const { callIds, pending } = known;
  // A stored chain's items (checks.ts names them `previous_response_id`) were checked when sent, or are the server's
  // own output: only what the client sends now is held to the API's length bounds.
  const sent = param !== 'previous_response_id';
  for (let i = 0; i < items.length; i++) {
    yield;
    const item = items[i]!;
    const p = `${param}[${i}]`;
    if (pending) trackCall(item, pending);
    // Any client call's id, not only a function_call's: a function_call_output answers a call of any type.
    const declared = clientCallId(item);
    if (declared !== undefined) local.add(declared);
    if (!isKnownItem(item)) {
      // Another tool's output (custom, computer, shell, apply_patch) for a call the context does not hold is refused as a
      // function_call_output's is: they were taken, so an orphaned output that worked here failed against the API, and
      // docs/protocol.md said any output for a call not in the context is unknown_call_id. A local_shell_call_output
      // names its call by `id`, not `call_id` (not checked here).
      const answers = answeredCallId(item);
      if (answers !== undefined && !local.has(answers) && !callIds.has(answers)) {
        const words = String(item.type).replace(/_output$/, '').replace(/_/g, ' ');
        throw new WireError('unknown_call_id', `No tool call found for ${words} output with call_id '${clipText(answers, 101)}'.`, `${p}.call_id`);
      }
      // A custom tool's output may be a list of input parts too (the API's ResponseCustomToolCallOutput): checked as a
      // function_call_output's, else an input_image detail outside the enum was taken and listed back by input_items.
      const out = (item as { type?: unknown; output?: unknown }).type === 'custom_tool_call_output' ? (item as { output?: unknown }).output : undefined;
      if (Array.isArray(out)) validateParts(out, `${p}.output`, undefined, sent);
      else if (typeof out === 'string') {
        if (sent) checkLength(out, TEXT_MAX_CHARS, `${p}.output`);
      } else if (out !== undefined) {
        // Nor anything else (7, an object, null): kept and listed back by input_items to readers that decode a string or a list.
        throw new WireError('invalid_type', `Invalid '${p}.output': expected a string or an array of content parts.`, `${p}.output`);
      }
      continue; // hosted tool items: carried through, not checked
    }
    switch (item.type) {
      case 'message':
      case undefined:
        validateContent(item.role, item.content, p, sent);
        break;
      case 'function_call':
        // Any string, JSON or not, as the API takes it: a call a response was cut in (max_output_tokens, a cancel, a
        // failure, a shutdown) keeps the arguments it had streamed, and Codex 0.107 sends such a call back without its
        // `incomplete` status (its item type has none), with an output of its own. Refusing arguments that are not JSON
        // left that Codex session refused on every later request (outside attack atk63 F1); the API's only refusal
        // public reports quote for input arguments is their length (inspect_ai#4682: a malformed call sent back was
        // refused as too long, and taken once cut to length).
        if (sent) checkLength(item.arguments, ARGUMENTS_MAX_CHARS, `${p}.arguments`);
        break;
      case 'function_call_output': {
        const id = item.call_id;
        if (!local.has(id) && !callIds.has(id)) {
          throw new WireError('unknown_call_id', `No tool call found for function call output with call_id '${id}'.`, `${p}.call_id`);
        }
        const out = item.output;
        if (Array.isArray(out)) validateParts(out, `${p}.output`, undefined, sent);
        else if (sent) checkLength(out, TEXT_MAX_CHARS, `${p}.output`);
        break;
      }
      case 'compaction':
        // Full pre-inference work expands compactions before validating (pipeline/compaction.ts);
        // one left here was sent where history cannot be replaced (a long-lived append), or was carried by the
        // compaction item expanded (a forged one: this server never seals one inside another).
        throw new WireError('invalid_value', `Invalid '${p}': a compaction item can only start a new response, not be appended to one or carried by another.`, p);
      default:
        break;
    }
  }
  metrics.count('items_validated', items.length);
  return local;
}

/**
 * A message's content as the validate stage checks it (also the workload readers', so they refuse what this would).
 * `sent`: the items came from the client, so their texts are held to the API's length bounds (not a stored chain's
 * items, which were, or are the server's own output: the API bounds what it is sent, not what its model wrote).
 */
export function validateContent(role: string, content: unknown, p: string, sent = true): void {
  if (typeof content === 'string') {
    if (sent) checkLength(content, TEXT_MAX_CHARS, `${p}.content`);
    return;
  }
  validateParts(content as unknown[], `${p}.content`, role, sent);
}

function validateParts(parts: unknown[], p: string, role?: string, sent = true): void {
  parts.forEach((raw, j) => {
    // A part that is not an object (`null`, a string, an array) names its param like any other bad part.
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new WireError('invalid_type', `Invalid '${p}[${j}]': expected a content part object, got ${raw === null ? 'null' : Array.isArray(raw) ? 'an array' : typeof raw}.`, `${p}[${j}]`);
    }
    const part = raw as Record<string, unknown>;
    // Absent or null: missing; not a string: the wrong type (it was "'undefined' is not a supported content type";
    // outside attack atk112 F3).
    requireStringType(part, `${p}[${j}]`);
    const type = part['type'];
    if (!INPUT_PART_TYPES.has(type)) {
      throw new WireError('invalid_value', `Invalid '${p}[${j}].type': '${clipText(type, 100)}' is not a supported content type.`, `${p}[${j}].type`);
    }
    // A tool output (no role) lists input parts only (TOOL_OUTPUT_PART_TYPES).
    if (role === undefined && !TOOL_OUTPUT_PART_TYPES.has(type)) {
      throw new WireError(
        'invalid_value',
        `Invalid value for '${p}[${j}].type': '${type}'. Supported values are: 'input_text', 'input_image', and 'input_file'.`,
        `${p}[${j}].type`,
      );
    }
    // Sent but not a string (`5`, `null`) is the wrong type, not a missing field, as for an image's `image_url` below.
    if ((type === 'input_text' || type === 'output_text') && typeof part['text'] !== 'string') {
      if (part['text'] === undefined) throw new WireError('missing_required_parameter', `Missing required parameter: '${p}[${j}].text'.`, `${p}[${j}].text`);
      throw new WireError('invalid_type', `Invalid type for '${p}[${j}].text': expected a string, but got ${jsonPreview(part['text'])} instead.`, `${p}[${j}].text`);
    }
    if (sent && typeof part['text'] === 'string') checkLength(part['text'], TEXT_MAX_CHARS, `${p}[${j}].text`);
    // openai-node's ResponseOutputRefusal: `{type: "refusal", refusal}`; without it, listed back to readers that decode it.
    if (type === 'refusal' && part['refusal'] == null) {
      throw new WireError('missing_required_parameter', `Missing required parameter: '${p}[${j}].refusal'.`, `${p}[${j}].refusal`);
    }
    if (type === 'refusal' && typeof part['refusal'] !== 'string') {
      throw new WireError('invalid_type', `Invalid type for '${p}[${j}].refusal': expected a string, but got ${jsonPreview(part['refusal'])} instead.`, `${p}[${j}].refusal`);
    }
    if ((type === 'output_text' || type === 'refusal') && role !== undefined && role !== 'assistant') {
      throw new WireError('invalid_value', `Invalid '${p}[${j}].type': '${type}' is only valid in assistant messages.`, `${p}[${j}].type`);
    }
    // The other way round, the API's own refusal (its code, param and words, as public client reports quote them): an
    // assistant message's parts are what the model said. `input_text` there was taken and listed back by input_items as
    // an assistant message no openai-node type describes (ResponseOutputMessage holds output_text and refusal only).
    if (role === 'assistant' && type !== 'output_text' && type !== 'refusal') {
      throw new WireError('invalid_value', `Invalid value: '${type}'. Supported values are: 'output_text' and 'refusal'.`, `${p}[${j}]`);
    }
    if (type === 'output_text' && part['logprobs'] != null) validateLogprobs(part['logprobs'], `${p}[${j}].logprobs`);
    // A file's or an image's string fields (openai-node's ResponseInputFile, ResponseInputImage): `file_data: 5` was taken
    // and listed back by input_items, to typed readers that decode a string (null counts as not sent). Checked before
    // an image's missing source: `image_url: 5` was "Missing required parameter", though it was sent, of the wrong type.
    for (const key of type === 'input_file' ? FILE_STRING_FIELDS : type === 'input_image' ? IMAGE_STRING_FIELDS : NO_FIELDS) {
      const x = part[key];
      if (x != null && typeof x !== 'string') {
        throw new WireError('invalid_type', `Invalid type for '${p}[${j}].${key}': expected a string, but got ${jsonPreview(x)} instead.`, `${p}[${j}].${key}`);
      }
    }
    if (type === 'input_image' && typeof part['image_url'] !== 'string' && typeof part['file_id'] !== 'string') {
      throw new WireError('missing_required_parameter', `Missing required parameter: '${p}[${j}].image_url'.`, `${p}[${j}].image_url`);
    }
    // A file part names its file (openai-node's ResponseInputFile: `file_id`, `file_data` or `file_url`), as an image
    // part names its image: `{type: "input_file"}` was taken and listed back naming no file (outside attack atk44 F2).
    if (type === 'input_file' && !FILE_SOURCES.some((key) => typeof part[key] === 'string')) {
      throw new WireError('missing_required_parameter', `Missing required parameter: '${p}[${j}].file_id' (an input_file part names its file by 'file_id', 'file_data' or 'file_url').`, `${p}[${j}].file_id`);
    }
    // "A fully qualified URL or a base64 encoded image in a data URL" (ResponseInputImage.image_url; a file's `file_url`
    // the same, an http or https URL): any text was taken, where the API refuses it (atk44 F1). Fetched by nothing here.
    if (type === 'input_image' && typeof part['image_url'] === 'string') checkImageUrl(part['image_url'], `${p}[${j}].image_url`);
    if (type === 'input_file' && typeof part['file_url'] === 'string' && !webUrl(part['file_url'])) {
      throw new WireError('invalid_value', `Invalid '${p}[${j}].file_url': expected a fully qualified http or https URL, but got ${jsonPreview(part['file_url'].slice(0, 100))}.`, `${p}[${j}].file_url`);
    }
    // openai-node's ResponseInputFile.detail, a closed enum like the image's (below).
    const fileDetail = part['detail'];
    if (type === 'input_file' && fileDetail != null && !FILE_DETAILS.includes(fileDetail as string)) {
      throw new WireError(
        typeof fileDetail === 'string' ? 'invalid_value' : 'invalid_type',
        `Invalid value for '${p}[${j}].detail': ${typeof fileDetail === 'string' ? `'${fileDetail.slice(0, 100)}'` : jsonPreview(fileDetail)}. Supported values are: 'auto', 'low', and 'high'.`,
        `${p}[${j}].detail`,
      );
    }
    // The API's ImageDetail enum: another value was taken and listed back by input_items to typed readers that decode it.
    const detail = part['detail'];
    if (type === 'input_image' && detail != null && !IMAGE_DETAILS.includes(detail as string)) {
      throw new WireError(
        typeof detail === 'string' ? 'invalid_value' : 'invalid_type',
        `Invalid value for '${p}[${j}].detail': ${typeof detail === 'string' ? `'${detail.slice(0, 100)}'` : jsonPreview(detail)}. Supported values are: 'low', 'high', 'auto', and 'original'.`,
        `${p}[${j}].detail`,
      );
    }
  });
}

/**
 * An `output_text` part's `logprobs` sent back as input (a client passing a Response's output on): openai-node's
 * `ResponseOutputText.Logprob[]` and the OpenAPI spec's `LogProb`, `{token, logprob, bytes, top_logprobs: [{token,
 * logprob, bytes}]}`. `[1, 2]` or `{"token": 5}` was taken and listed back by `input_items` as sent, to typed readers
 * that decode these fields. `token` and `logprob` are required (every event and part that lists logprobs has them);
 * `bytes` and `top_logprobs` may be left out (a delta's logprobs have no `bytes`, and a client may pass those on), and
 * are checked when sent. `null` counts as not sent, as for the part's other optional fields. Bounded by the body.
 */
function validateLogprobs(v: unknown, p: string): void {
  if (!Array.isArray(v)) throw new WireError('invalid_type', `Invalid type for '${p}': expected an array, but got ${jsonPreview(v)} instead.`, p);
  v.forEach((entry, i) => {
    const q = `${p}[${i}]`;
    checkLogprob(entry, q);
    const top = (entry as Record<string, unknown>)['top_logprobs'];
    if (top == null) return;
    if (!Array.isArray(top)) throw new WireError('invalid_type', `Invalid type for '${q}.top_logprobs': expected an array, but got ${jsonPreview(top)} instead.`, `${q}.top_logprobs`);
    top.forEach((t, k) => checkLogprob(t, `${q}.top_logprobs[${k}]`));
  });
}

/** One listed token: `token` a string, `logprob` a number not above 0, `bytes` (when sent) integers 0–255. */
function checkLogprob(entry: unknown, q: string): void {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new WireError('invalid_type', `Invalid type for '${q}': expected an object, but got ${jsonPreview(entry)} instead.`, q);
  }
  const e = entry as Record<string, unknown>;
  if (e['token'] === undefined || e['token'] === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${q}.token'.`, `${q}.token`);
  if (typeof e['token'] !== 'string') throw new WireError('invalid_type', `Invalid type for '${q}.token': expected a string, but got ${jsonPreview(e['token'])} instead.`, `${q}.token`);
  const lp = e['logprob'];
  if (lp === undefined || lp === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${q}.logprob'.`, `${q}.logprob`);
  // JSON's -1e999 parses to -Infinity, which input_items lists back as null: refused as not a number.
  if (typeof lp !== 'number' || !Number.isFinite(lp)) throw new WireError('invalid_type', `Invalid type for '${q}.logprob': expected a number, but got ${jsonPreview(lp)} instead.`, `${q}.logprob`);
  if (lp > 0) throw new WireError('invalid_value', `Invalid '${q}.logprob': a log probability is at most 0, got ${lp}.`, `${q}.logprob`);
  const bytes = e['bytes'];
  if (bytes == null) return;
  if (!Array.isArray(bytes) || !bytes.every((b) => Number.isInteger(b) && (b as number) >= 0 && (b as number) <= 255)) {
    throw new WireError('invalid_type', `Invalid type for '${q}.bytes': expected an array of integers from 0 to 255, but got ${jsonPreview(bytes)} instead.`, `${q}.bytes`);
  }
}

/** openai-node's `ImageDetail` (and the OpenAPI spec's). */
const IMAGE_DETAILS: readonly string[] = ['low', 'high', 'auto', 'original'];
/** openai-node's `ResponseInputFile.detail`. */
const FILE_DETAILS: readonly string[] = ['auto', 'low', 'high'];
const FILE_STRING_FIELDS = ['file_data', 'file_id', 'file_url', 'filename'] as const;
const FILE_SOURCES = ['file_id', 'file_data', 'file_url'] as const;

const IMAGE_STRING_FIELDS = ['image_url', 'file_id'] as const;
const NO_FIELDS = [] as const;

const JSON_WORD = /json/i;

/**
 * JSON mode (`text.format: {type: "json_object"}`) needs the word "json" in the conversation, as the API
 * requires ("Response input messages must contain the word 'json' in some form to use 'text.format' of type
 * 'json_object'.", as public client reports quote it): it was taken without, so a request that worked here
 * failed there. Counted where it may be: the text of any message of the context (`lists`: the input, the
 * chain or a ws connection's context, scanned in that order until found) and the instructions. Whether the API
 * counts the instructions was not found in a public source; counting them refuses nothing the API may take.
 */
export function checkJsonMode(format: TextFormat | undefined, instructions: string | null, ...lists: ReadonlyArray<readonly InputItem[]>): void {
  if (format?.type !== 'json_object') return;
  if (instructions !== null && JSON_WORD.test(instructions)) return;
  for (const items of lists) {
    for (const item of items) if (messageMentionsJson(item)) return;
  }
  throw new WireError('invalid_value', "Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.", 'input');
}

function messageMentionsJson(item: InputItem): boolean {
  const content = (item as { content?: unknown }).content;
  if (!('role' in item) || content === undefined) return false;
  if (typeof content === 'string') return JSON_WORD.test(content);
  if (!Array.isArray(content)) return false;
  return content.some((part: unknown) => typeof (part as { text?: unknown })?.text === 'string' && JSON_WORD.test((part as { text: string }).text));
}
