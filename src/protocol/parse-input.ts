/**
 * A request's `input` (or an append's): a string, or an array of items each
 * checked for its shape (messages and their content parts, tool calls and
 * outputs, reasoning, compaction and `item_reference` items), so the engine
 * can trust the types; the deeper checks are the pipeline's `validate`
 * stage. The count of items and parts is capped before any per-item work.
 * Used by protocol/parse.ts. Pure.
 */
import { clipText, jsonPreview, WireError } from './errors.js';
import type { InputItem, InputRole, InputText, ItemStatus, OtherContentPart } from './objects.js';
import { assertObj, checkLength, requireStringType, TEXT_MAX_CHARS, hasType, isObj, KIND_WORDS, ofKind, ownValue, requireString, supported, type Obj } from './fields.js';
import type { ParseCaps } from './parse.js';
import { checkImageUrl } from './urls.js';

/** The input item that asks a create to compact the context instead of sampling (see `parseCreateBody`). */
export const COMPACTION_TRIGGER = 'compaction_trigger';

export function parseInput(v: unknown, param: string, required: boolean, caps: ParseCaps): InputItem[] {
  if (v === undefined || v === null) {
    if (required) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}'.`, param);
    return [];
  }
  if (typeof v === 'string') {
    // Named as sent: a string over the bound was refused naming `input[0].content`, a place the client never wrote.
    checkLength(v, TEXT_MAX_CHARS, param);
    return [{ type: 'message', role: 'user', content: v }];
  }
  if (!Array.isArray(v)) {
    throw new WireError('invalid_type', `Invalid type for '${param}': expected a string or an array of items.`, param);
  }
  checkInputParts(v, param, caps.maxInputParts);
  const anyType = caps.allowUnknownParameters === true;
  return v.map((item, i) => parseItem(item, `${param}[${i}]`, anyType));
}

/**
 * The input item types the API has: openai-node's `ResponseInputItem` union (6.49 and 7.5 alike) and the OpenAPI
 * spec's `InputItem` (openai/openai-openapi `f85dbe2`). An item of another type (`{"type": "bogus_item"}`) was
 * taken, rendered to the model as its JSON and listed back by `input_items`; the API refuses it. With `llr serve
 * --allow-unknown-parameters`, for a client newer than this list, it is carried as before.
 */
export const INPUT_ITEM_TYPES: ReadonlySet<string> = new Set([
  'message', 'file_search_call', 'computer_call', 'computer_call_output', 'web_search_call', 'function_call',
  'function_call_output', 'tool_search_call', 'tool_search_output', 'additional_tools', 'reasoning', 'compaction',
  'image_generation_call', 'code_interpreter_call', 'local_shell_call', 'local_shell_call_output', 'shell_call',
  'shell_call_output', 'apply_patch_call', 'apply_patch_call_output', 'mcp_list_tools', 'mcp_approval_request',
  'mcp_approval_response', 'mcp_call', 'custom_tool_call_output', 'custom_tool_call', COMPACTION_TRIGGER,
  'item_reference', 'program', 'program_output', 'configuration_update',
]);

/** `reasoning.effort` (openai-node 6.49's `ReasoningEffort`), on a create and in a `configuration_update` item. */
export const REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'] as const;

/** `text.format.name` (openai-node's `ResponseFormatTextJSONSchemaConfig.name`: a-z, A-Z, 0-9, `_`, `-`, at most 64). */
export const FORMAT_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * Items plus the content parts of messages and tool outputs: every stage
 * after the parse (validate, render, the model, the store) does work per
 * part, so their number is capped before any of it (`--max-context-items`,
 * the same bound a long-lived run's context has).
 */
export function checkInputParts(items: unknown[], param: string, max: number): void {
  let parts = items.length;
  if (parts <= max) {
    for (const it of items) {
      if (!isObj(it)) continue;
      const c = Array.isArray(it['content']) ? it['content'] : Array.isArray(it['output']) ? it['output'] : null;
      if (c !== null && (parts += c.length) > max) break;
    }
  }
  if (parts > max) {
    throw new WireError(
      'array_above_max_length',
      `Invalid '${param}': too many items and content parts. Expected at most ${max}, but got ${parts > items.length ? 'more' : items.length} (llr serve --max-context-items).`,
      param,
    );
  }
}

const ROLES: readonly InputRole[] = ['user', 'system', 'developer', 'assistant'];

function isRole(v: unknown): v is InputRole {
  return ROLES.includes(v as InputRole);
}

/** An item's `status` as the API's item types have it (messages, function calls and outputs, reasoning). */
const ITEM_STATUSES: readonly ItemStatus[] = ['in_progress', 'completed', 'incomplete'];

/**
 * `status`, when given (null counts as not given), is one of the API's item statuses: an item keeps what
 * it was sent with, and `GET /v1/responses/{id}/input_items` lists it so, where a typed client decodes the
 * closed enum (openai-node's `ResponseInputMessageItem.status` and the others).
 */
function checkItemStatus(v: Obj, param: string): void {
  checkStatus(v, param, ITEM_STATUSES);
}

/** `status`, when given (null counts as not given), is one of `values`: an item type's own enum, or the item statuses. */
function checkStatus(v: Obj, param: string, values: readonly string[]): void {
  const status = v['status'];
  if (status === undefined || status === null || values.includes(status as string)) return;
  const shown = typeof status === 'string' ? `'${status.slice(0, 100)}'` : JSON.stringify(status)?.slice(0, 100);
  throw new WireError(
    typeof status === 'string' ? 'invalid_value' : 'invalid_type',
    `Invalid value for '${param}.status': ${shown}. Supported values are: ${supported(values)}.`,
    `${param}.status`,
  );
}

export function parseItem(v: unknown, param: string, anyType = false): InputItem {
  assertObj(v, param);
  if (v['type'] === undefined && 'role' in v) return parseMessage(v, param);
  // An item reference may leave out its type (openai-node's `ItemReference.type?: 'item_reference' | null`, the
  // spec's `ItemReferenceParam` requires only `id`): it was refused for a missing `type`.
  if ((v['type'] === undefined || v['type'] === null) && !('role' in v) && typeof v['id'] === 'string') return { ...v, type: 'item_reference' } as InputItem;
  requireStringType(v, param);
  if (!anyType && !INPUT_ITEM_TYPES.has(v['type'])) {
    const shown = v['type'].length > 100 ? `${v['type'].slice(0, 100)}…` : v['type'];
    throw new WireError('invalid_value', `Invalid value for '${param}.type': '${shown}' is not an input item type.`, `${param}.type`);
  }
  if (hasType(v, 'message')) return parseMessage(v, param);
  checkItemId(v, v['type'], param);
  if (hasType(v, 'function_call')) return clientCall(v, 'arguments', param);
  if (hasType(v, 'function_call_output')) {
    requireCallId(v, param);
    requireTextOrParts(v, 'output', param);
    checkItemStatus(v, param);
    return v;
  }
  if (hasType(v, 'reasoning')) {
    // Otherwise carried through untouched.
    checkItemStatus(v, param);
    checkReasoning(v, param);
    return v;
  }
  if (hasType(v, 'configuration_update')) {
    checkConfigurationUpdate(v, param);
    return v;
  }
  if (hasType(v, 'item_reference')) {
    requireString(v, 'id', param);
    return v;
  }
  if (hasType(v, 'compaction')) {
    requireString(v, 'encrypted_content', param);
    return v;
  }
  if (CLIENT_OUTPUT_CHECKS.has(v['type'])) {
    checkClientOutput(v, v['type'], param);
    return v;
  }
  if (CLIENT_CALL_CHECKS.has(v['type'])) {
    checkClientCall(v, v['type'], param);
    return v;
  }
  // openai-node's ResponseCustomToolCall: `call_id`, `name` and `input` are strings. `{type: "custom_tool_call"}` alone
  // was taken and listed back so by input_items, and with no call_id the missing-output check passed it by.
  if (hasType(v, 'custom_tool_call')) return clientCall(v, 'input', param);
  if (hasType(v, COMPACTION_TRIGGER)) {
    // A create's last input item is taken off before this (parse.ts); anywhere else it would be carried as an unknown
    // item, and the response would sample instead of compacting: the client expects a compaction item back.
    throw new WireError(
      'invalid_value',
      `Invalid '${param}': a compaction_trigger item can only be the last input item of a create, not anywhere else or in an append.`,
      param,
    );
  }
  const hosted = ownValue(HOSTED_FIELDS, v['type']);
  if (hosted !== undefined) checkHostedCall(v, hosted, param);
  if (v['type'] === 'tool_search_call' || v['type'] === 'tool_search_output') checkToolSearch(v, v['type'], param);
  // A tool search's or a program's call and output name their call too: bounded as every call_id, when sent (the spec's
  // `ToolSearchCallItemParam` etc.: 1 to 64 characters, or null). A 65-character or empty one was taken (outside
  // attack atk59).
  if (OPTIONAL_CALL_ID.has(v['type']) && v['call_id'] !== undefined && v['call_id'] !== null) requireCallId(v, param);
  // Any other item (a web search call, tool search items, additional tools, a program's): carried through untouched.
  return v;
}

/**
 * A tool search's call and output as the spec's `ToolSearchCallItemParam` / `ToolSearchOutputItemParam` type them:
 * `arguments` (an object) or `tools` (a list of tool definitions) required, `execution` `server` or `client` and
 * `status` one of a call's when sent (null: not sent). They were taken as sent, and `execution: "bogus"`, `tools: 5` or
 * `arguments: 7` listed back so by input_items, whose resources openai-python validates strictly (outside attack
 * atk112 F4); listed without `execution` or `call_id`, they get `server` and null (store/input-items.ts).
 */
function checkToolSearch(v: Obj, type: 'tool_search_call' | 'tool_search_output', param: string): void {
  const key = type === 'tool_search_call' ? 'arguments' : 'tools';
  const x = v[key];
  if (x === undefined || x === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.${key}'.`, `${param}.${key}`);
  if (key === 'arguments' && !isObj(x)) {
    throw new WireError('invalid_type', `Invalid type for '${param}.arguments': expected an object, but got ${jsonPreview(x)} instead.`, `${param}.arguments`);
  }
  if (key === 'tools') {
    if (!Array.isArray(x)) throw new WireError('invalid_type', `Invalid type for '${param}.tools': expected an array of tools, but got ${jsonPreview(x)} instead.`, `${param}.tools`);
    x.forEach((t: unknown, i: number) => {
      assertObj(t, `${param}.tools[${i}]`);
      requireStringType(t, `${param}.tools[${i}]`);
    });
  }
  const execution = v['execution'];
  if (execution !== undefined && execution !== null && execution !== 'server' && execution !== 'client') {
    throw new WireError(
      typeof execution === 'string' ? 'invalid_value' : 'invalid_type',
      `Invalid value for '${param}.execution': ${jsonPreview(execution)}. Supported values are: 'server' and 'client'.`,
      `${param}.execution`,
    );
  }
  checkStatus(v, param, ['in_progress', 'completed', 'incomplete']);
}

/** Items whose `call_id` is checked only when sent (`requireCallId`): the rest of them is carried through untouched. */
const OPTIONAL_CALL_ID: ReadonlySet<string> = new Set(['tool_search_call', 'tool_search_output', 'program', 'program_output']);

/** What a hosted item's field must be (`ofKind`): a string, a list of strings, a list, a list of `{name}` objects, an object. */
type HostedKind = 'string' | 'strings' | 'array' | 'named' | 'object';

interface HostedSpec {
  /** Required (missing or null: `missing_required_parameter`). */
  required: ReadonlyArray<readonly [string, HostedKind]>;
  /** Checked when sent and not null. */
  optional: ReadonlyArray<readonly [string, HostedKind]>;
  /** The type's own status enum, checked when sent (listed `completed` when left out). */
  status: readonly string[];
}

/**
 * The fields of a hosted tool's item sent back in a history, by type, as openai-node's `ResponseInputItem` types
 * them. The server runs no hosted tool, so it has nothing to fill what says what the item was from; `{"type":
 * "mcp_call"}` alone was taken and listed back so by input_items (outside conformance tester atk54 F3), and so were
 * an `mcp_call`'s `status: "weird"` and `output: 5`, or `mcp_list_tools`' `tools: [1]` (atk55 F3). Not their `id`
 * (the API's own output always has one; nothing here needs it) nor their `status` (listed `completed` when left out,
 * store/input-items.ts), nor the fields the types allow `null` (an image's `result`, the interpreter's `code` and
 * `outputs`: listed `null`). A `web_search_call` needs nothing: Codex sends its web searches back without `id`, and
 * at times without `status` or `action` (codex-rs `ResponseItem::WebSearchCall`), and the API takes them.
 */
const HOSTED_FIELDS: Readonly<Record<string, HostedSpec>> = {
  web_search_call: { required: [], optional: [['action', 'object']], status: ['in_progress', 'searching', 'completed', 'failed', 'incomplete'] },
  file_search_call: { required: [['queries', 'strings']], optional: [['results', 'array']], status: ['in_progress', 'searching', 'completed', 'incomplete', 'failed'] },
  code_interpreter_call: {
    required: [['container_id', 'string']],
    optional: [['code', 'string'], ['outputs', 'array']],
    status: ['in_progress', 'completed', 'incomplete', 'interpreting', 'failed'],
  },
  image_generation_call: { required: [], optional: [['result', 'string']], status: ['in_progress', 'completed', 'generating', 'failed'] },
  mcp_call: {
    required: [['server_label', 'string'], ['name', 'string'], ['arguments', 'string']],
    optional: [['output', 'string'], ['approval_request_id', 'string']],
    status: ['in_progress', 'completed', 'incomplete', 'calling', 'failed'],
  },
  mcp_approval_request: { required: [['server_label', 'string'], ['name', 'string'], ['arguments', 'string']], optional: [], status: [] },
  mcp_list_tools: { required: [['server_label', 'string'], ['tools', 'named']], optional: [['error', 'string']], status: [] },
};

function checkHostedCall(v: Obj, spec: HostedSpec, param: string): void {
  for (const [key] of spec.required) {
    const x = v[key];
    if (x === undefined || x === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.${key}'.`, `${param}.${key}`);
  }
  for (const [key, kind] of [...spec.required, ...spec.optional]) {
    const x = v[key];
    if (x === undefined || x === null || ofKind(x, kind)) continue;
    throw new WireError('invalid_type', `Invalid type for '${param}.${key}': expected ${KIND_WORDS[kind]}, but got ${jsonPreview(x)} instead.`, `${param}.${key}`);
  }
  if (spec.status.length > 0) checkStatus(v, param, spec.status);
}

/** The output items a client sends for its tool calls, besides `function_call_output`, whose fields are checked here. */
const CLIENT_OUTPUT_CHECKS: ReadonlySet<unknown> = new Set([
  'custom_tool_call_output', 'computer_call_output', 'shell_call_output', 'apply_patch_call_output', 'local_shell_call_output', 'mcp_approval_response',
]);

/** The calls of the client's tools besides `function_call` and `custom_tool_call` (`clientCall`), whose fields are checked here. */
const CLIENT_CALL_CHECKS: ReadonlySet<unknown> = new Set(['computer_call', 'shell_call', 'apply_patch_call', 'local_shell_call']);

/** The operations of an `apply_patch_call` (openai-node's `ApplyPatchCall.CreateFile`, `DeleteFile`, `UpdateFile`), and whether each carries a `diff`. */
const PATCH_OPERATIONS: Readonly<Record<string, boolean>> = { create_file: true, delete_file: false, update_file: true };

/**
 * A call of one of the client's tools, sent back in a history (openai-node's `ResponseComputerToolCall`,
 * `ResponseInputItem.ShellCall`, `ApplyPatchCall`, `LocalShellCall`): the fields that say what was called, which
 * nothing can stand in for, are required, of their types. `{"type": "shell_call", "call_id": "c"}` or an
 * `apply_patch_call` with no `operation` was taken, and input_items listed it back without them to typed readers that
 * decode those types (outside conformance tester). `id` is not required (Codex sends its calls without one) and a
 * missing `status` (or a computer call's `pending_safety_checks`) is listed as the API lists it (store/input-items.ts).
 */
function checkClientCall(v: Obj, type: string, param: string): void {
  const missing = (key: string): WireError => new WireError('missing_required_parameter', `Missing required parameter: '${param}.${key}'.`, `${param}.${key}`);
  const wrong = (key: string, expected: string): WireError =>
    new WireError('invalid_type', `Invalid type for '${param}.${key}': expected ${expected}, but got ${jsonPreview(v[key] ?? null)} instead.`, `${param}.${key}`);
  const object = (key: string): Obj => {
    const x = v[key];
    if (x === undefined || x === null) throw missing(key);
    if (!isObj(x)) throw wrong(key, 'an object');
    return x;
  };
  const strings = (o: Obj, key: string, at: string): void => {
    const x = o[key];
    if (x === undefined || x === null) throw missing(`${at}.${key}`);
    if (!Array.isArray(x) || !x.every((s) => typeof s === 'string')) {
      throw new WireError('invalid_type', `Invalid type for '${param}.${at}.${key}': expected an array of strings.`, `${param}.${at}.${key}`);
    }
  };
  requireCallId(v, param);
  if (type === 'apply_patch_call') {
    // Its own enum: `in_progress` or `completed` (openai-node's ApplyPatchCall.status).
    checkStatus(v, param, ['in_progress', 'completed']);
    const operation = object('operation');
    requireStringType(operation, `${param}.operation`);
    const op = operation['type'];
    const diff = ownValue(PATCH_OPERATIONS, op);
    if (diff === undefined) {
      throw new WireError(
        'invalid_value',
        `Invalid value for '${param}.operation.type': ${jsonPreview(op ?? null)}. Supported values are: 'create_file', 'delete_file', and 'update_file'.`,
        `${param}.operation.type`,
      );
    }
    for (const key of diff ? ['path', 'diff'] : ['path']) {
      if (typeof operation[key] !== 'string') {
        throw new WireError(
          operation[key] === undefined ? 'missing_required_parameter' : 'invalid_type',
          `Invalid type for '${param}.operation.${key}': expected a string.`,
          `${param}.operation.${key}`,
        );
      }
    }
    return;
  }
  checkItemStatus(v, param);
  if (type === 'computer_call') {
    if (v['action'] != null && !isObj(v['action'])) throw wrong('action', 'an object');
    if (v['actions'] != null && !Array.isArray(v['actions'])) throw wrong('actions', 'an array of actions');
    if (v['pending_safety_checks'] != null && !Array.isArray(v['pending_safety_checks'])) throw wrong('pending_safety_checks', 'an array');
  } else if (type === 'shell_call') {
    strings(object('action'), 'commands', 'action');
    // A local environment or a container reference (openai-node's ShellCall.environment), or null.
    if (v['environment'] != null && !isObj(v['environment'])) throw wrong('environment', 'an object');
  } else {
    strings(object('action'), 'command', 'action');
  }
}

/**
 * An output item the client makes for a call (openai-node's `ResponseInputItem.ComputerCallOutput`, `ShellCallOutput`,
 * `ApplyPatchCallOutput`, `McpApprovalResponse`, `ResponseCustomToolCallOutput`): the fields those types require, of
 * their types, and their closed enums. `{"type": "computer_call_output", "call_id": "c", "output": 5}` or an
 * `mcp_approval_response` whose `approve` was `"yes"` was taken and listed back so by input_items, to typed readers
 * that decode these types (outside conformance tester). A field the type leaves optional may be left out or `null`.
 */
function checkClientOutput(v: Obj, type: string, param: string): void {
  const wrong = (key: string, expected: string): WireError =>
    new WireError('invalid_type', `Invalid type for '${param}.${key}': expected ${expected}, but got ${jsonPreview(v[key])} instead.`, `${param}.${key}`);
  if (type === 'mcp_approval_response') {
    requireString(v, 'approval_request_id', param);
    if (v['approve'] === undefined || v['approve'] === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.approve'.`, `${param}.approve`);
    if (typeof v['approve'] !== 'boolean') throw wrong('approve', 'a boolean');
    if (v['reason'] != null && typeof v['reason'] !== 'string') throw wrong('reason', 'a string');
    return;
  }
  if (type === 'local_shell_call_output') {
    // Names its call by `id` (openai-node's LocalShellCallOutput), not `call_id`; its `output` is the command's text.
    requireString(v, 'output', param);
    checkItemStatus(v, param);
    return;
  }
  requireCallId(v, param);
  if (type !== 'apply_patch_call_output') checkItemStatus(v, param);
  // Its value's type (text or a list of input parts) is the validate stage's check, as a function_call_output's is.
  if (type === 'custom_tool_call_output' && v['output'] === undefined) {
    throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.output'.`, `${param}.output`);
  }
  if (type === 'computer_call_output') {
    const out = v['output'];
    if (out === undefined || out === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.output'.`, `${param}.output`);
    if (!isObj(out)) throw wrong('output', "a computer screenshot object ({type: 'computer_screenshot', image_url or file_id})");
    requireStringType(out, `${param}.output`);
    // `input_image` too: OpenAI's own computer-use sample (openai/openai-cua-sample-app, agent/agent.py) and LangChain
    // (@langchain/openai's converters/responses.js, for a ToolMessage whose content is the screenshot's URL) send the
    // screenshot as `{type: "input_image", image_url}`, and the API takes it; it was refused here (invalid_value).
    if (out['type'] !== 'computer_screenshot' && out['type'] !== 'input_image') {
      throw new WireError(
        'invalid_value',
        `Invalid value for '${param}.output.type': ${jsonPreview(out['type'] ?? null)}. Supported values are: 'computer_screenshot' and 'input_image'.`,
        `${param}.output.type`,
      );
    }
    for (const key of ['image_url', 'file_id']) {
      if (out[key] != null && typeof out[key] !== 'string') {
        throw new WireError('invalid_type', `Invalid type for '${param}.output.${key}': expected a string, but got ${jsonPreview(out[key])} instead.`, `${param}.output.${key}`);
      }
    }
    if (typeof out['image_url'] === 'string') checkImageUrl(out['image_url'], `${param}.output.image_url`);
  } else if (type === 'shell_call_output') {
    const out = v['output'];
    if (out === undefined || out === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.output'.`, `${param}.output`);
    if (!Array.isArray(out)) throw wrong('output', 'an array of {stdout, stderr, outcome}');
    out.forEach((chunk: unknown, j: number) => {
      const p = `${param}.output[${j}]`;
      assertObj(chunk, p);
      for (const key of ['stdout', 'stderr']) {
        if (typeof chunk[key] !== 'string') {
          throw new WireError(chunk[key] === undefined ? 'missing_required_parameter' : 'invalid_type', `Invalid type for '${p}.${key}': expected a string.`, `${p}.${key}`);
        }
      }
      if (!isObj(chunk['outcome'])) {
        throw new WireError(chunk['outcome'] === undefined ? 'missing_required_parameter' : 'invalid_type', `Invalid type for '${p}.outcome': expected an object.`, `${p}.outcome`);
      }
    });
  } else if (type === 'apply_patch_call_output') {
    // `status` is this type's own enum (`completed`, `failed`), not an item status: the listing fills `completed`
    // when it is left out (store/input-items.ts STATUS_REQUIRED; it did not, though this said it did).
    checkStatus(v, param, ['completed', 'failed']);
    if (v['output'] != null && typeof v['output'] !== 'string') throw wrong('output', 'a string');
  }
}

/**
 * The prefix the API requires of an input item's `id`, by type: a message's `msg`, a function call's `fc`, a reasoning
 * item's `rs`, a custom tool call's `ctc` (public client reports quote its refusals, e.g. openai/codex#33176: "Invalid
 * 'input[371].id': '019f…'. Expected an ID that begins with 'msg'."). An id of another shape was taken here, so a
 * client that rebuilt its history with ids of its own worked against this server and failed against the API. Other
 * item types' prefixes are not checked (none found in a public source).
 */
const ITEM_ID_PREFIX: Readonly<Record<string, string>> = { message: 'msg', function_call: 'fc', reasoning: 'rs', custom_tool_call: 'ctc' };

/** An item's `id`, when sent (null counts as not sent): a string, beginning with its type's prefix (`ITEM_ID_PREFIX`). */
function checkItemId(v: Obj, type: string, param: string): void {
  // An item typed `constructor` was told its id must begin with Object's source text (outside attack).
  const prefix = ownValue(ITEM_ID_PREFIX, type);
  const id = v['id'];
  if (prefix === undefined || id === undefined || id === null) return;
  if (typeof id !== 'string') throw new WireError('invalid_type', `Invalid type for '${param}.id': expected a string, but got ${jsonPreview(id)} instead.`, `${param}.id`);
  if (!id.startsWith(prefix)) {
    // Cut whole: a surrogate pair split at the cut left a lone surrogate in the body, which strict JSON readers refuse.
    const shown = clipText(id, 101);
    throw new WireError('invalid_id_prefix', `Invalid '${param}.id': '${shown}'. Expected an ID that begins with '${prefix}'.`, `${param}.id`);
  }
}

/**
 * A call's or an output's `call_id`: a string of 1 to 64 characters, as the spec bounds every input item's (its
 * `*ItemParam` schemas: `maxLength: 64, minLength: 1`), and the API refuses a longer one with `string_above_max_length`
 * naming `input[i].call_id` (public reports quote it, e.g. AnswerDotAI/fastllm#45: "Expected a string with maximum length
 * 64, but got a string with length 116 instead."). A 116-character id was taken (outside conformance tester atk58 F2).
 * The server's own call ids are 29 characters.
 */
export const CALL_ID_MAX_CHARS = 64;

function requireCallId(v: Obj, param: string): void {
  requireString(v, 'call_id', param);
  checkLength(v['call_id'], CALL_ID_MAX_CHARS, `${param}.call_id`, true);
}

/** A function or custom tool call: its `call_id`, `name` and `body` (`arguments`, `input`) strings, and its status. */
function clientCall(v: Obj, body: 'arguments' | 'input', param: string): InputItem {
  requireCallId(v, param);
  requireString(v, 'name', param);
  requireString(v, body, param);
  checkItemStatus(v, param);
  return v as unknown as InputItem;
}

type ContentPart = InputText | OtherContentPart;

/**
 * `v[key]` is text or a list of content parts (a message's content, a tool's
 * output). The parts' shapes are the validate stage's to check (timed there);
 * a message's are checked for a `type` below.
 */
function requireTextOrParts<K extends string>(v: Obj, key: K, param: string): asserts v is Obj & { [P in K]: string | ContentPart[] } {
  const x = v[key];
  if (x === undefined) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.${key}'.`, `${param}.${key}`);
  if (typeof x !== 'string' && !Array.isArray(x)) {
    throw new WireError('invalid_type', `Invalid '${param}.${key}': expected a string or an array of content parts.`, `${param}.${key}`);
  }
}

/** openai-node's `ResponseOutputMessage.phase`. */
const PHASES: readonly string[] = ['commentary', 'final_answer'];

/**
 * A reasoning item's `summary` (a list of `{type: "summary_text", text}`, required) and `encrypted_content` (a
 * string, when sent: null counts as not sent), as openai-node's `ResponseReasoningItem` types them: `summary: 5` was taken and
 * listed back so by `input_items`, to typed readers that decode the list.
 */
/**
 * openai-node 7.59's `ResponseConfigurationUpdateItemParam`: `reasoning` (`{effort}`, an effort or null) and `text`
 * (`{format}`: a `text` or `json_schema` format), each when sent (null counts as not sent). Carried in the context and
 * listed back as sent; the simulated model applies neither (docs/protocol.md).
 */
function checkConfigurationUpdate(v: Obj, param: string): void {
  const reasoning = v['reasoning'];
  if (reasoning != null) {
    assertObj(reasoning, `${param}.reasoning`);
    const effort = reasoning['effort'];
    if (effort != null && !(REASONING_EFFORTS as readonly unknown[]).includes(effort)) {
      throw new WireError(
        typeof effort === 'string' ? 'invalid_value' : 'invalid_type',
        `Invalid value for '${param}.reasoning.effort': ${jsonPreview(effort)}. Supported values are: ${REASONING_EFFORTS.map((e) => `'${e}'`).join(', ')}.`,
        `${param}.reasoning.effort`,
      );
    }
  }
  const text = v['text'];
  if (text == null) return;
  assertObj(text, `${param}.text`);
  const format = text['format'];
  const p = `${param}.text.format`;
  if (format == null) throw new WireError('missing_required_parameter', `Missing required parameter: '${p}'.`, p);
  assertObj(format, p);
  if (format['type'] === 'text') return;
  if (format['type'] !== 'json_schema') {
    throw new WireError('invalid_value', `Invalid value for '${p}.type': ${jsonPreview(format['type'] ?? null)}. Supported values are: 'text' and 'json_schema'.`, `${p}.type`);
  }
  requireString(format, 'name', p);
  if (!FORMAT_NAME.test(format['name'] as string)) {
    throw new WireError('invalid_value', `Invalid '${p}.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$' with at most 64 characters.`, `${p}.name`);
  }
  assertObj(format['schema'], `${p}.schema`);
  if (format['strict'] != null && typeof format['strict'] !== 'boolean') {
    throw new WireError('invalid_type', `Invalid type for '${p}.strict': expected a boolean, but got ${jsonPreview(format['strict'])} instead.`, `${p}.strict`);
  }
  if (format['description'] != null && typeof format['description'] !== 'string') {
    throw new WireError('invalid_type', `Invalid type for '${p}.description': expected a string, but got ${jsonPreview(format['description'])} instead.`, `${p}.description`);
  }
}

function checkReasoning(v: Obj, param: string): void {
  const summary = v['summary'];
  // Required (openai-node's ResponseReasoningItem, the OpenAPI spec's ReasoningItem): `{type: "reasoning"}` alone was
  // taken and listed back without it (outside conformance tester). Every client sends it, `[]` when there is none.
  if (summary === undefined || summary === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.summary'.`, `${param}.summary`);
  if (!Array.isArray(summary)) throw new WireError('invalid_type', `Invalid type for '${param}.summary': expected an array of summary parts.`, `${param}.summary`);
  summary.forEach((part: unknown, j: number) => {
    const p = `${param}.summary[${j}]`;
    assertObj(part, p);
    requireStringType(part, p);
    if (part['type'] !== 'summary_text') {
      throw new WireError('invalid_value', `Invalid value for '${p}.type': expected 'summary_text'.`, `${p}.type`);
    }
    if (typeof part['text'] !== 'string') {
      throw new WireError(part['text'] === undefined ? 'missing_required_parameter' : 'invalid_type', `Invalid type for '${p}.text': expected a string.`, `${p}.text`);
    }
  });
  // `content` (openai-node's `ResponseReasoningItem.content?: Array<{type: "reasoning_text", text}>`), when sent (null
  // counts as not sent): `5`, `[5]` or an `output_text` part was taken and listed back so by input_items. A `text` part
  // is taken too: Codex (codex-rs `ReasoningItemContent::Text`) sends reasoning content back only when it holds such
  // parts and no `reasoning_text` (`should_serialize_reasoning_content`).
  const content = v['content'];
  if (content != null) {
    if (!Array.isArray(content)) throw new WireError('invalid_type', `Invalid type for '${param}.content': expected an array of reasoning text parts, but got ${jsonPreview(content)} instead.`, `${param}.content`);
    content.forEach((part: unknown, j: number) => {
      const p = `${param}.content[${j}]`;
      assertObj(part, p);
      requireStringType(part, p);
      if (part['type'] !== 'reasoning_text' && part['type'] !== 'text') {
        throw new WireError('invalid_value', `Invalid value for '${p}.type': expected 'reasoning_text' or 'text'.`, `${p}.type`);
      }
      if (typeof part['text'] !== 'string') {
        throw new WireError(part['text'] === undefined ? 'missing_required_parameter' : 'invalid_type', `Invalid type for '${p}.text': expected a string.`, `${p}.text`);
      }
    });
  }
  const sealed = v['encrypted_content'];
  if (sealed != null && typeof sealed !== 'string') {
    throw new WireError('invalid_type', `Invalid type for '${param}.encrypted_content': expected a string.`, `${param}.encrypted_content`);
  }
}

function parseMessage(v: Obj, param: string): InputItem {
  const role = v['role'];
  // `{"type": "message", "content": …}` with no role was told its role had an invalid value.
  if (role === undefined || role === null) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}.role'.`, `${param}.role`);
  if (!isRole(role)) {
    throw new WireError(typeof role === 'string' ? 'invalid_value' : 'invalid_type', `Invalid ${typeof role === 'string' ? 'value' : 'type'} for '${param}.role': expected one of ${ROLES.join(', ')}.`, `${param}.role`);
  }
  requireTextOrParts(v, 'content', param);
  checkItemStatus(v, param);
  checkItemId(v, 'message', param);
  // An assistant message's phase (openai-node's ResponseOutputMessage.phase), listed back as sent by input_items.
  const phase = v['phase'];
  if (phase != null && !PHASES.includes(phase as string)) {
    throw new WireError(
      typeof phase === 'string' ? 'invalid_value' : 'invalid_type',
      `Invalid value for '${param}.phase': ${typeof phase === 'string' ? `'${phase.slice(0, 100)}'` : JSON.stringify(phase)?.slice(0, 100)}. Supported values are: 'commentary' and 'final_answer'.`,
      `${param}.phase`,
    );
  }
  const content = v.content;
  if (Array.isArray(content)) {
    content.forEach((part, j) => {
      assertObj(part, `${param}.content[${j}]`);
      requireStringType(part, `${param}.content[${j}]`);
    });
  }
  return { ...v, type: 'message', role, content };
}
