/**
 * Edge parsing: turns a WebSocket frame or an HTTP body into a typed client
 * event or `CreateParams`, or throws a precise `WireError` naming the param.
 *
 * This (with parse-input.ts, fields.ts and json-text.ts) is the only place
 * that looks at `unknown` input. It checks the
 * envelope and the shape of each item (enough for the engine to trust the
 * types); the deeper per-item checks are the pipeline's `validate` stage,
 * which is timed and has an incremental form. Pure: no I/O.
 */
import { clipText, jsonPreview, WireError } from './errors.js';
import { CLIENT_EVENT_TYPES, type ClientEvent, type ClientEventType, type CreateParams } from './events.js';
import { isFunctionTool, type InputItem, type TextFormat, type Tool, type ToolChoice } from './objects.js';
import { assertObj, checkLength, isObj, longerThan, ownValue, optBool, optEnum, optInteger, optIntegerRange, optRange, optString, hasType, requireString, requireStringType, KIND_WORDS, ofKind, type Obj } from './fields.js';
import { DEFAULT_MAX_JSON_DEPTH, parseJsonText } from './json-text.js';
import { COMPACTION_TRIGGER, FORMAT_NAME, parseInput, REASONING_EFFORTS } from './parse-input.js';

/**
 * `service_tier` (openai-node 7's `ServiceTier`, echoed on the Response): 6.49's union and the OpenAPI spec's
 * `fast` and `ultrafast`, which a client on openai-node 7 may send (they were refused).
 */
const SERVICE_TIERS = ['auto', 'default', 'flex', 'scale', 'priority', 'fast', 'ultrafast'] as const;
/**
 * `service_tier` of `POST /v1/responses/compact`: its own enum, narrower than a create's (the OpenAPI spec's
 * `ServiceTierEnum` for `CompactResponseMethodPublicBody`, openai-node 7's `ResponseCompactParams.service_tier`;
 * 6.49's lacks `fast`). No `scale`.
 */
const COMPACT_SERVICE_TIERS = ['auto', 'default', 'fast', 'flex', 'priority'] as const;
/** `prompt_cache_retention` (openai-node 6.49 and 7's `ResponseCreateParams.prompt_cache_retention`, echoed on the Response). */
const PROMPT_CACHE_RETENTIONS = ['in_memory', '24h'] as const;
/** `reasoning.summary` (openai-node's `Reasoning.summary`); Codex leaves it out for its own `none`. */
const REASONING_SUMMARIES = ['auto', 'concise', 'detailed'] as const;
/** `reasoning.context` (openai-node 7's `Reasoning.context`). */
const REASONING_CONTEXTS = ['auto', 'current_turn', 'all_turns'] as const;
/** `tool_choice: {type: "allowed_tools", mode}` (openai-node's `ToolChoiceAllowed`). */
const ALLOWED_TOOLS_MODES = ['auto', 'required'] as const;

/** The API's floor for `max_output_tokens` ("Expected a value >= 16"). */
export const MIN_OUTPUT_TOKENS = 16;

/**
 * Caps on the size of one request's parts (`Limits`: `maxTools`,
 * `maxContextItems`): checked here, before any per-item work, so a request
 * over them costs the server no more than its parse.
 */
export interface ParseCaps {
  /** Most entries in `tools` (the API's 128). */
  maxTools: number;
  /** Most input items plus content parts in one request's `input`. */
  maxInputParts: number;
  /** Most objects and arrays in all tools' `parameters` and `text.format.schema` together. */
  maxSchemaNodes: number;
  /** A `response.create`'s unknown top-level fields are ignored, not refused (`checkCreateParameters`). Default: refused. */
  allowUnknownParameters?: boolean;
  /**
   * The protocol of a WebSocket session that takes no `response.append` (ws mode): such a frame is refused
   * `unknown_event_type` before its fields are read. Read after them, a frame without `input` was refused for the
   * missing `input`, and once given one, as not part of the protocol (outside conformance tester atk58 F5). The session
   * refuses it too (modes/session.ts), for a transport that does not say.
   */
  notAppendable?: string | undefined;
}

export const DEFAULT_PARSE_CAPS: ParseCaps = { maxTools: 128, maxInputParts: 50_000, maxSchemaNodes: 20_000 };

/**
 * The schemas of one request (each tool's `parameters`, then
 * `text.format.schema`) hold at most `max` objects and arrays together: the
 * schema checks and the argument generator walk them, so their work per
 * request is bounded here, before any of it. A walk with an explicit stack
 * that stops at the cap.
 */
function checkSchemaNodes(tools: Tool[], format: TextFormat | undefined, max: number): void {
  let nodes = 0;
  const count = (root: unknown, code: 'invalid_tool_schema' | 'invalid_json_schema', param: string) => {
    const stack: unknown[] = [root];
    while (stack.length > 0) {
      const v = stack.pop();
      if (typeof v !== 'object' || v === null) continue;
      if (++nodes > max) {
        throw new WireError(
          code,
          `Invalid '${param}': this request's schemas (tools' parameters and text.format.schema together) hold more than ${max} objects and arrays; this server accepts at most ${max} (llr serve --max-schema-nodes).`,
          param,
        );
      }
      // Only objects and arrays are counted, so only they are stacked: a `required` of 3 million names was pushed
      // and popped name by name, ~0.19 s of one loop turn (outside attack).
      if (Array.isArray(v)) {
        for (const x of v) if (typeof x === 'object' && x !== null) stack.push(x);
      } else {
        for (const k in v) {
          const x = (v as Obj)[k];
          if (typeof x === 'object' && x !== null) stack.push(x);
        }
      }
    }
  };
  tools.forEach((t, i) => {
    const p: unknown = t.parameters;
    if (p !== undefined) count(p, 'invalid_tool_schema', `tools[${i}].parameters`);
  });
  if (format?.type === 'json_schema') count(format.schema, 'invalid_json_schema', 'text.format.schema');
}

/** Parse one text frame of a WebSocket connection. */
export function parseClientFrame(text: string, maxDepth = DEFAULT_MAX_JSON_DEPTH, caps: ParseCaps = DEFAULT_PARSE_CAPS): ClientEvent {
  return parseClientEvent(parseJsonText(text, 'frame', maxDepth), caps);
}

/**
 * A WebSocket `response.create`'s lane (OpenAI's spec,
 * `ResponsesClientEventResponseCreate.stream_id`): 1–256 characters of
 * `[A-Za-z0-9_.-]`, so it goes into every event of its response as it is,
 * with no escaping.
 */
export const STREAM_ID = /^[A-Za-z0-9_.-]{1,256}$/;

function parseStreamId(o: Obj): string | null {
  const v = optString(o, 'stream_id');
  if (v !== null && !STREAM_ID.test(v)) {
    throw new WireError('invalid_value', `Invalid 'stream_id': must be 1 to 256 characters of A-Z, a-z, 0-9, '_', '.' or '-'.`, 'stream_id');
  }
  return v;
}

/** The refusal of a client event its session's protocol does not have (the session's own words, modes/session.ts). */
export function notPartOf(type: string, protocol: string): WireError {
  return new WireError('unknown_event_type', `'${type}' is not part of the ${protocol} protocol.`, 'type');
}

/** A parsed frame → a typed client event. */
export function parseClientEvent(value: unknown, caps: ParseCaps = DEFAULT_PARSE_CAPS): ClientEvent {
  if (!isObj(value)) throw new WireError('invalid_type', 'A client event must be a JSON object.', null);
  const type = value['type'];
  if (type === undefined || type === null) throw new WireError('missing_required_parameter', "Missing required parameter: 'type'.", 'type');
  // Sent, of another type (`5`): the wrong type, not a missing one (outside conformance tester atk58 F5).
  if (typeof type !== 'string') throw new WireError('invalid_type', "Invalid type for 'type': expected a string.", 'type');
  if (!(CLIENT_EVENT_TYPES as readonly string[]).includes(type)) {
    throw new WireError('unknown_event_type', `Unknown event type '${type.slice(0, 100)}'.`, 'type');
  }
  switch (type as ClientEventType) {
    case 'response.create': {
      let lane: string | null;
      try {
        lane = parseStreamId(value);
      } catch (err) {
        // A bad stream_id names no lane: refused as a create without one is, never in the stream of another lane's
        // response in flight (a client routing by stream_id took it for that response's error).
        if (err instanceof WireError) err.lane = null;
        throw err;
      }
      let create;
      try {
        if (caps.allowUnknownParameters !== true) checkCreateParameters(value);
        create = { type: 'response.create' as const, ...parseCreateBody(value, caps) };
        // The API: "background is not supported over WebSocket". Refused, not ignored: a client that asked for a run
        // that outlives its connection must not get one that a disconnect cancels.
        if (create.background) {
          throw new WireError(
            'invalid_value',
            "'background' is not supported over WebSocket: the response streams on this connection and ends with it. Create a background response with POST /v1/responses.",
            'background',
          );
        }
      } catch (err) {
        // A create refused for its body is still its lane's: the client waits there for its answer.
        if (err instanceof WireError) err.lane = lane;
        throw err;
      }
      return lane === null ? create : { ...create, stream_id: lane };
    }
    case 'response.append':
      if (caps.notAppendable !== undefined) throw notPartOf('response.append', caps.notAppendable);
      return {
        type: 'response.append',
        input: parseAppendInput(value['input'], caps),
        response_id: optString(value, 'response_id'),
      };
    case 'response.inject': {
      const responseId = optString(value, 'response_id');
      if (responseId === null) throw new WireError('missing_required_parameter', "Missing required parameter: 'response_id'.", 'response_id');
      return { type: 'response.inject', input: parseAppendInput(value['input'], caps), response_id: responseId };
    }
    case 'response.cancel':
      return { type: 'response.cancel', response_id: optString(value, 'response_id') };
    case 'response.processed':
      return { type: 'response.processed' };
    case 'response.steer': {
      const previous = optString(value, 'previous_response_id');
      // An empty id names nothing: missing, as a create's `response_id`-less inject is (it was looked up, not found).
      if (previous === null || previous === '') throw new WireError('missing_required_parameter', "Missing required parameter: 'previous_response_id'.", 'previous_response_id');
      if (value['input'] === undefined) throw new WireError('missing_required_parameter', "Missing required parameter: 'input'.", 'input');
      // Checked as an inject's input is (`null`, `5`, `{}`, an unknown item were echoed back as if steerable); the
      // failed event hands back the input as sent.
      parseInput(value['input'], 'input', true, caps);
      const invalid = unsteerable(value);
      return { type: 'response.steer', input: value['input'], previous_response_id: previous, ...(invalid !== null && { invalid }) };
    }
    default: {
      const never: never = type as never;
      throw new WireError('unknown_event_type', `Unknown event type '${String(never)}'.`, 'type');
    }
  }
}

/** The fields a `response.steer` takes (openai-node 7: "This event accepts only `type`, `previous_response_id`, and `input`"). */
const STEER_FIELDS = new Set(['type', 'previous_response_id', 'input']);
/** The content parts a steering message may hold. */
const STEER_PARTS = new Set(['input_text', 'input_image', 'input_file']);

/**
 * Why a `response.steer` that parses as an input is not steering input, or null: the API's rule (openai-node 7's
 * `ResponseSteerEvent`) takes a string, or a non-empty array of messages of the `user` role holding only `type`
 * (`message`), `role` and `content` (a string, or `input_text` / `input_image` / `input_file` parts), and no field
 * but `type`, `previous_response_id` and `input` (`stream_id` is named: the target chooses the lane). Such a steer
 * fails `invalid_input`, "corrected before retrying", not `steering_not_supported` (outside attack atk67 F1).
 */
function unsteerable(frame: Record<string, unknown>): string | null {
  for (const key of Object.keys(frame)) {
    if (!STEER_FIELDS.has(key)) return `Unknown field '${clipText(key, 64)}' in response.steer: it takes only 'type', 'previous_response_id' and 'input'${key === 'stream_id' ? ' (the target response chooses the lane)' : ''}.`;
  }
  const input = frame['input'];
  if (typeof input === 'string') return null;
  if (!Array.isArray(input) || input.length === 0) return "Invalid 'input': steering input is a string or a non-empty array of user messages.";
  for (let i = 0; i < input.length; i++) {
    const item = input[i] as Record<string, unknown>;
    const at = `input[${i}]`;
    if (item['type'] !== undefined && item['type'] !== 'message') return `Invalid '${at}.type': steering accepts only messages, not '${clipText(String(item['type']), 64)}'.`;
    if (item['role'] !== 'user') return `Invalid '${at}.role': steering accepts only messages with the 'user' role.`;
    for (const key of Object.keys(item)) {
      if (key !== 'type' && key !== 'role' && key !== 'content') return `Unknown field '${at}.${clipText(key, 64)}': a steering message holds only 'type', 'role' and 'content'.`;
    }
    const content = item['content'];
    if (Array.isArray(content)) {
      for (let j = 0; j < content.length; j++) {
        const type = (content[j] as Record<string, unknown>)['type'];
        if (!STEER_PARTS.has(type as string)) return `Invalid '${at}.content[${j}].type': steering content is 'input_text', 'input_image' or 'input_file'.`;
      }
    }
  }
  return null;
}

/**
 * The longest `model` accepted. The API's model ids are a few dozen
 * characters and an unknown one is refused; this server takes any name (the
 * simulated model answers to all), so the length is what it bounds: the name
 * is echoed in every lifecycle event, and a 6 MB name of lone surrogates (an
 * outside fuzzer's, chaos seed 11) cost ~0.5 s of serialising per response.
 */
export const MAX_MODEL_CHARS = 256;

/** `model` is required by every body that samples or compacts: a non-empty string of at most `MAX_MODEL_CHARS`. */
function requireModel(body: Obj): string {
  const model = body['model'];
  if (model === undefined || model === null) {
    throw new WireError('missing_required_parameter', "Missing required parameter: 'model'.", 'model');
  }
  if (typeof model !== 'string' || model.length === 0) {
    throw new WireError('invalid_type', "Invalid type for 'model': expected a non-empty string.", 'model');
  }
  checkLength(model, MAX_MODEL_CHARS, 'model');
  return model;
}

/**
 * A create's `input` ending with `{"type": "compaction_trigger"}` (Codex 0.169+ "remote compaction v2", with the
 * built-in OpenAI provider): the response compacts the context instead of sampling, its output one compaction item.
 * The trigger is the last item only (`parseItem` refuses one anywhere else); nothing else of it is read.
 */
function endsWithCompactionTrigger(input: unknown): boolean {
  if (!Array.isArray(input) || input.length === 0) return false;
  const last: unknown = input[input.length - 1];
  return isObj(last) && last['type'] === COMPACTION_TRIGGER;
}

/**
 * Every top-level field a create may carry; any other is refused `400 unknown_parameter` naming it, as the API
 * refuses it ("Unknown parameter: 'temprature'.", `param` the field: public client reports quote it). Before,
 * unknown fields were ignored, so a typo passed here and failed against the API. The list is the union of the
 * OpenAPI spec's `CreateResponse` (openai/openai-openapi `f85dbe2`), openai-node 7.59's `ResponseCreateParams`
 * and its WebSocket `response.create` (`type`, `stream_id`, `generate`; the multi-agent beta's `multi_agent`),
 * what real clients send beyond those (Codex 0.107–0.171 send `client_metadata` on every create, HTTP and
 * WebSocket alike), the penalties this server echoes, and its own `llr`. A field a newer client sends that is not
 * here is refused until it is added: the API knows its own newer fields, this list only what it was taken from.
 */
export const CREATE_PARAMETERS: ReadonlySet<string> = new Set([
  // CreateResponse (spec) and ResponseCreateParams (openai-node 7.59)
  'model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'previous_response_id', 'store',
  'stream', 'stream_options', 'background', 'background_options', 'include', 'max_output_tokens', 'max_tool_calls',
  'metadata', 'temperature', 'top_p', 'top_logprobs', 'user', 'safety_identifier', 'reasoning', 'text', 'truncation',
  'service_tier', 'prompt', 'prompt_cache_key', 'prompt_cache_options', 'prompt_cache_retention', 'conversation',
  'context_management', 'moderation', 'image', 'access_programs',
  // the WebSocket response.create (openai-node 7.59 ResponsesClientEvent; the beta's ResponseCreate)
  'type', 'stream_id', 'generate', 'multi_agent',
  // Codex
  'client_metadata',
  // echoed by this server; this server's extension
  'presence_penalty', 'frequency_penalty', 'llr',
]);

/** A create's fields are all in `CREATE_PARAMETERS`; the first that is not is refused, as the API names one. */
export function checkCreateParameters(body: Obj): void {
  checkParameters(body, CREATE_PARAMETERS);
}

/** `body`'s own fields are all in `known`; the first that is not is refused `400 unknown_parameter` naming it. */
export function checkParameters(body: Obj, known: ReadonlySet<string>): void {
  for (const key in body) {
    if (!Object.hasOwn(body, key) || known.has(key)) continue;
    const shown = key.length > 100 ? `${key.slice(0, 100)}…` : key;
    throw new WireError('unknown_parameter', `Unknown parameter: '${shown}'.`, shown);
  }
}

/**
 * The fields of `POST /v1/responses/input_tokens`: openai-node's `InputTokenCountParams` (6.49 and 7.5 alike), not a
 * create's. Any other (a create-only `stream`, `metadata`, `temperature`; a typo) is refused `400 unknown_parameter`,
 * as the API refuses it; it was taken, so a count that worked here failed there.
 */
export const INPUT_TOKEN_PARAMETERS: ReadonlySet<string> = new Set([
  'conversation', 'input', 'instructions', 'model', 'parallel_tool_calls', 'personality', 'previous_response_id',
  'reasoning', 'text', 'tool_choice', 'tools', 'truncation',
]);

/**
 * An `input_tokens` body's own fields: all in `INPUT_TOKEN_PARAMETERS` (the first that is not is refused, unless
 * `allowUnknown`), and its `personality` a string of at most 64 characters (openai-node 7.60: "Values must be at most 64
 * characters"; it was taken of any type or length). The rest is a create's (`parseCreateBody`).
 */
export function checkInputTokenParameters(body: Obj, allowUnknown = false): void {
  if (!allowUnknown) checkParameters(body, INPUT_TOKEN_PARAMETERS);
  optBoundedString(body, 'personality', PERSONALITY_MAX_CHARS);
}

/** `personality`'s maxLength (openai-node 7.60's `InputTokenCountParams.personality`). */
export const PERSONALITY_MAX_CHARS = 64;

/**
 * The fields of `POST /v1/responses/compact`: openai-node 7's `ResponseCompactParams`. Any other (a create's
 * `stream`, `tools`, `store`; a typo) is refused `400 unknown_parameter`, as a create's and a token count's are:
 * it was taken silently, so a compaction that worked here failed against the API.
 */
export const COMPACT_PARAMETERS: ReadonlySet<string> = new Set([
  'model', 'input', 'instructions', 'previous_response_id', 'prompt_cache_key', 'prompt_cache_options', 'prompt_cache_retention', 'service_tier',
  'image',
]);

/**
 * `previous_response_id`, when sent: a non-empty string. `""` was taken as no chain and echoed as `""`, where a client
 * reads a continuation from a non-null id; the API refuses empty strings so (`empty_string`).
 */
function optPreviousId(body: Obj): string | null {
  const id = optString(body, 'previous_response_id');
  if (id === '') {
    throw new WireError('empty_string', "Invalid 'previous_response_id': empty string. Expected a string with minimum length 1, but got an empty string instead.", 'previous_response_id');
  }
  return id;
}

/** `image.context_compression` (openai-node 7.59's `ResponseCreateParams.Image` and `ResponseCompactParams.Image`). */
const IMAGE_CONTEXT_COMPRESSION = ['auto', 'enabled', 'disabled'] as const;

/**
 * A create's or a compaction's `image` (request-level image options), when sent: an object whose `context_compression`
 * is one of the API's values. Nothing is echoed, and the simulated model has no image context to compress.
 */
function checkImageOptions(body: Obj): void {
  const image = body['image'];
  if (image === undefined || image === null) return;
  assertObj(image, 'image');
  optEnum(image, 'context_compression', IMAGE_CONTEXT_COMPRESSION, 'image.');
}

/** A compaction body's fields are all in `COMPACT_PARAMETERS`; the first that is not is refused. */
export function checkCompactParameters(body: Obj): void {
  checkParameters(body, COMPACT_PARAMETERS);
}

/** Parse the body of a create request (HTTP POST or `response.create`). */
export function parseCreateBody(body: unknown, caps: ParseCaps = DEFAULT_PARSE_CAPS): CreateParams {
  assertObj(body, 'body');
  const model = requireModel(body);
  checkImageOptions(body);
  const trigger = endsWithCompactionTrigger(body['input']);
  const rawInput = trigger ? (body['input'] as unknown[]).slice(0, -1) : body['input'];
  const input = rawInput === undefined ? [] : parseInput(rawInput, 'input', false, caps);
  const tools = parseTools(body['tools'], caps);
  const toolChoice = parseToolChoice(body['tool_choice']);
  checkToolChoice(toolChoice, tools);
  const text = parseText(body['text']);
  checkSchemaNodes(tools, text.text?.format, caps.maxSchemaNodes);
  return {
    model,
    input,
    instructions: optString(body, 'instructions'),
    tools,
    tool_choice: toolChoice,
    parallel_tool_calls: optBool(body, 'parallel_tool_calls', true),
    previous_response_id: optPreviousId(body),
    store: optBool(body, 'store', true),
    stream: optBool(body, 'stream', false),
    ...(optBool(body, 'background', false) && { background: true as const }),
    // `prompt_cache_options.prewarm: true` "prepares the prompt cache without generating output … overrides the
    // generate field to false" (openai-node 7, openai-python 3): it was checked and then ignored, and a prewarm got a
    // whole model turn, billed, stored and possibly tool calls (outside attack atk111 F1). Its type is checked below.
    generate: optBool(body, 'generate', true) && !prewarms(body['prompt_cache_options']),
    ...(prewarms(body['prompt_cache_options']) && { prewarm: true as const }),
    max_output_tokens: optInteger(body, 'max_output_tokens', MIN_OUTPUT_TOKENS),
    metadata: parseMetadata(body['metadata']),
    temperature: optRange(body, 'temperature', 0, 2),
    top_p: optRange(body, 'top_p', 0, 1),
    user: optString(body, 'user'),
    reasoning: parseReasoning(body['reasoning']),
    prompt_cache_key: optBoundedString(body, 'prompt_cache_key', PROMPT_CACHE_KEY_MAX_CHARS),
    safety_identifier: optBoundedString(body, 'safety_identifier', SAFETY_IDENTIFIER_MAX_CHARS),
    service_tier: optEnum(body, 'service_tier', SERVICE_TIERS),
    prompt_cache_retention: optEnum(body, 'prompt_cache_retention', PROMPT_CACHE_RETENTIONS),
    ...parseEchoedLimits(body),
    ...parsePromptCacheOptions(body['prompt_cache_options'], PROMPT_CACHE_TTLS),
    ...checkBackgroundOptions(body),
    ...refuseUnserved(body),
    ...checkCreateInclude(body['include']),
    ...parseLlr(body['llr']),
    ...parseContextManagement(body['context_management']),
    ...(trigger && { compaction_trigger: true as const }),
    ...parseEchoed(body),
    ...text,
  };
}

const VERBOSITY = ['low', 'medium', 'high'];

/** `text: {format, verbosity}`: the output format the model must follow. */
function parseText(v: unknown): Pick<CreateParams, 'text'> {
  if (v === undefined || v === null) return {};
  assertObj(v, 'text');
  // A value of another type (`5`) is `invalid_type`, as every field's (`optString`); a string outside the enum `invalid_value`.
  const verbosity = optString(v, 'verbosity', 'text.');
  if (verbosity !== null && !VERBOSITY.includes(verbosity)) {
    throw new WireError('invalid_value', "Invalid value for 'text.verbosity': expected 'low', 'medium' or 'high'.", 'text.verbosity');
  }
  const f = v['format'];
  let format: TextFormat = { type: 'text' };
  if (f !== undefined && f !== null) {
    assertObj(f, 'text.format');
    const type = optString(f, 'type', 'text.format.');
    if (type === 'json_schema') {
      requireString(f, 'name', 'text.format');
      if (!FORMAT_NAME.test(f.name)) {
        throw new WireError('invalid_value', "Invalid 'text.format.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$' with at most 64 characters.", 'text.format.name');
      }
      const schema = f['schema'];
      // Absent or null: missing, not the wrong type (outside attack atk112 F3).
      if (schema === undefined || schema === null) throw new WireError('missing_required_parameter', "Missing required parameter: 'text.format.schema'.", 'text.format.schema');
      assertObj(schema, 'text.format.schema');
      optString(f, 'description', 'text.format.');
      if (f['strict'] !== undefined && f['strict'] !== null && typeof f['strict'] !== 'boolean') {
        throw new WireError('invalid_type', "Invalid type for 'text.format.strict': expected a boolean.", 'text.format.strict');
      }
      // Echoed on the Response: the fields of openai-node's ResponseFormatTextJSONSchemaConfig only, each of its type
      // (a `strict: "yes"` or a `description: 5` was echoed as sent, which a typed client fails to decode).
      const echoed: Obj = {};
      for (const key of ['description', 'strict'] as const) if (key in f) echoed[key] = f[key];
      format = { type, name: f.name, schema, ...echoed };
    } else if (type === 'text' || type === 'json_object') {
      format = { type };
    } else if (type === null) {
      throw new WireError('missing_required_parameter', "Missing required parameter: 'text.format.type'.", 'text.format.type');
    } else {
      throw new WireError('invalid_value', "Invalid value for 'text.format.type': expected 'text', 'json_object' or 'json_schema'.", 'text.format.type');
    }
  }
  return { text: { format, ...(typeof verbosity === 'string' && { verbosity: verbosity as 'low' | 'medium' | 'high' }) } };
}

/** Settings the Response echoes; absent ones keep the API defaults. */
function parseEchoed(body: Obj): Pick<CreateParams, 'truncation' | 'presence_penalty' | 'frequency_penalty'> {
  const out: Pick<CreateParams, 'truncation' | 'presence_penalty' | 'frequency_penalty'> = {};
  const t = body['truncation'];
  if (t !== undefined && t !== null) {
    if (t !== 'auto' && t !== 'disabled') throw new WireError('invalid_value', "Invalid value for 'truncation': expected 'auto' or 'disabled'.", 'truncation');
    out.truncation = t;
  }
  // The codes and messages of every other range (`temperature`, `top_p`): `invalid_value` here set these two apart
  // (outside conformance tester atk98 F3).
  for (const key of ['presence_penalty', 'frequency_penalty'] as const) {
    const v = optRange(body, key, -2, 2);
    if (v !== null) out[key] = v;
  }
  return out;
}

/**
 * `max_tool_calls` and `top_logprobs`, echoed on the Response (openai-node 6.49 and 7's `ResponseCreateParams`,
 * `Response.max_tool_calls` / `top_logprobs`): the Response said `null` and `0` whatever was sent. The bounds are the
 * API's: `max_tool_calls` at least 1 (its "Expected a value >= 1"; it limits built-in tool calls, which this server
 * never makes, so it changes nothing else), `top_logprobs` 0 to 20 (the OpenAPI spec's `ModelResponseProperties`;
 * the alternatives listed with each text token's logprob, when `include` asks for logprobs).
 */
function parseEchoedLimits(body: Obj): Pick<CreateParams, 'max_tool_calls' | 'top_logprobs'> {
  const maxToolCalls = optInteger(body, 'max_tool_calls', 1);
  const topLogprobs = optIntegerRange(body, 'top_logprobs', 0, 20);
  return { ...(maxToolCalls !== null && { max_tool_calls: maxToolCalls }), ...(topLogprobs !== null && { top_logprobs: topLogprobs }) };
}

/** `prompt_cache_options.mode` (openai-node 7's `ResponseCreateParams.PromptCacheOptions`, the spec's `PromptCacheModeEnum`). */
const PROMPT_CACHE_MODES = ['implicit', 'explicit'] as const;
/** `prompt_cache_options.ttl` of a create (openai-node 7: `30m` or `12h`); the API's default is `30m`. */
const PROMPT_CACHE_TTLS = ['30m', '12h'] as const;
/** `prompt_cache_options.ttl` of `POST /v1/responses/compact` (openai-node 7's `ResponseCompactParams.PromptCacheOptions`): `30m` only. */
const COMPACT_PROMPT_CACHE_TTLS = ['30m'] as const;

/**
 * `prompt_cache_options` (openai-node 7, the successor of the deprecated `prompt_cache_retention`): `{mode, ttl,
 * prewarm, comparison_response_id}`, each optional. Checked against openai-node 7's types (the simulated model's
 * prefix cache has no lifetimes or breakpoint modes, so it changes nothing) and echoed on the Response as the
 * options applied (`Response.prompt_cache_options`: `mode` and `ttl` with the API's defaults, `implicit` and
 * `30m`, filled in, and `comparison_response_id` when sent). A create without it has none on its Response.
 * It was taken unchecked and not echoed.
 */
function parsePromptCacheOptions(v: unknown, ttls: readonly string[]): Pick<CreateParams, 'prompt_cache_options'> {
  if (v === undefined || v === null) return {};
  assertObj(v, 'prompt_cache_options');
  const p = 'prompt_cache_options.';
  const mode = optEnum(v, 'mode', PROMPT_CACHE_MODES, p) ?? 'implicit';
  const ttl = optEnum(v, 'ttl', ttls, p) ?? '30m';
  const prewarm = v['prewarm'];
  if (prewarm !== undefined && prewarm !== null && typeof prewarm !== 'boolean') {
    throw new WireError('invalid_type', `Invalid type for '${p}prewarm': expected a boolean.`, `${p}prewarm`);
  }
  const comparison = optString(v, 'comparison_response_id', p);
  return { prompt_cache_options: { mode, ttl, ...('comparison_response_id' in v && { comparison_response_id: comparison }) } };
}

/** A create's `prompt_cache_options` asks to prewarm (`prewarm: true`; `parsePromptCacheOptions` checks its type). */
function prewarms(v: unknown): boolean {
  return typeof v === 'object' && v !== null && (v as Record<string, unknown>)['prewarm'] === true;
}

/** `background_options.completion_window` (openai-node 7's `ResponseCreateParams.BackgroundOptions`). */
const COMPLETION_WINDOWS = ['soonest', '2h', '8h'] as const;

/**
 * `background_options: {completion_window, continuation_id}` (openai-node 7): checked and otherwise ignored (a
 * background run here starts at once, whatever window it was given; no Response field carries it). As openai-node
 * 7 documents it, the `2h` and `8h` windows need `background: true`, Standard processing (`service_tier` absent,
 * `auto` or `default`) and no `stream: true`: else `400 invalid_value` naming the field. It was taken unchecked.
 */
function checkBackgroundOptions(body: Obj): Record<string, never> {
  const v = body['background_options'];
  if (v === undefined || v === null) return {};
  assertObj(v, 'background_options');
  const p = 'background_options.';
  const window = optEnum(v, 'completion_window', COMPLETION_WINDOWS, p);
  optString(v, 'continuation_id', p);
  if (window === '2h' || window === '8h') {
    const tier = body['service_tier'];
    const why =
      body['background'] !== true
        ? "needs 'background': true"
        : body['stream'] === true
          ? "cannot be streamed ('stream': true)"
          : tier !== undefined && tier !== null && tier !== 'auto' && tier !== 'default'
            ? `needs Standard processing ('service_tier' 'auto' or 'default', not '${String(tier).slice(0, 100)}')`
            : null;
    if (why !== null) {
      throw new WireError('invalid_value', `Invalid value for '${p}completion_window': the '${window}' completion window ${why}.`, `${p}completion_window`);
    }
  }
  return {};
}

/**
 * What `include` may name: the API's `ResponseIncludable` (openai-node 6.49 and 7.59 alike). A create, a listing
 * and a retrieve return what they would anyway, so a valid one changes nothing here; an unknown one is refused as
 * the API refuses it (`store/input-items.ts` checks the query of a listing or a retrieve against the same list).
 */
export const RESPONSE_INCLUDABLE = [
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
  'message.output_text.logprobs',
] as const;

/**
 * A create's `include` (openai-node's `ResponseCreateParams.include`, an array of `ResponseIncludable`; `null` is
 * absent): checked; `message.output_text.logprobs` makes the text list logprobs (`logprobs`), the others change
 * nothing here (what they name is returned anyway, or never made). It was taken unread, so a value the API refuses
 * (a typo, a value of another endpoint) passed here and failed against the API, while
 * `GET .../input_items?include=` refused the same value.
 */
function checkCreateInclude(v: unknown): Pick<CreateParams, 'logprobs'> {
  if (v === undefined || v === null) return {};
  if (!Array.isArray(v)) throw new WireError('invalid_type', "Invalid type for 'include': expected an array of strings.", 'include');
  v.forEach((x, i) => {
    if (typeof x !== 'string') throw new WireError('invalid_type', `Invalid type for 'include[${i}]': expected a string.`, `include[${i}]`);
    if (!(RESPONSE_INCLUDABLE as readonly string[]).includes(x)) {
      throw new WireError('invalid_value', `Invalid value for 'include[${i}]': '${x.slice(0, 100)}'. Supported values are: ${RESPONSE_INCLUDABLE.map((y) => `'${y}'`).join(', ')}.`, `include[${i}]`);
    }
  });
  return v.includes('message.output_text.logprobs') ? { logprobs: true } : {};
}

/**
 * openai-node's `conversation` (history the API keeps and prepends) and `prompt` (a stored template's
 * instructions): neither is served here, so a create that sends one is refused, `400 unsupported_parameter`
 * naming it; `null` is absent. Taken and ignored, the run went on without the history or the instructions the
 * client asked for, and nothing told it.
 */
function refuseUnserved(body: Obj): Record<string, never> {
  const unserved = {
    conversation: "no conversations are served here: send the conversation's items in 'input', or chain with 'previous_response_id'",
    prompt: "no prompt templates are served here: send the template's text in 'instructions'",
  };
  const shapes = { conversation: 'a string or an object', prompt: 'an object' };
  for (const [key, why] of Object.entries(unserved)) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    // The shape openai-node types it with; another is a bad value, not a feature asked for.
    const shaped = typeof v === 'object' && !Array.isArray(v) ? true : key === 'conversation' && typeof v === 'string';
    if (!shaped) throw new WireError('invalid_type', `Invalid type for '${key}': expected ${shapes[key as keyof typeof shapes]}.`, key);
    throw new WireError('unsupported_parameter', `Unsupported parameter: '${key}': ${why}.`, key);
  }
  return {};
}

function parseContextManagement(v: unknown): Pick<CreateParams, 'context_management'> {
  if (v === undefined || v === null) return {};
  if (!Array.isArray(v)) throw new WireError('invalid_type', "Invalid type for 'context_management': expected an array.", 'context_management');
  return {
    context_management: v.map((entry, i) => {
      const p = `context_management[${i}]`;
      assertObj(entry, p);
      requireStringType(entry, p);
      if (entry['type'] !== 'compaction') {
        throw new WireError('invalid_value', `Invalid value for '${p}.type': only 'compaction' is supported.`, `${p}.type`);
      }
      const t = entry['compact_threshold'];
      if (t !== undefined && t !== null && (typeof t !== 'number' || !Number.isInteger(t) || t < 1)) {
        throw new WireError('invalid_value', `Invalid value for '${p}.compact_threshold': expected a positive integer.`, `${p}.compact_threshold`);
      }
      return { type: 'compaction' as const, compact_threshold: typeof t === 'number' ? t : null };
    }),
  };
}

/** The `llr` extension options of a create body (see `LlrOptions`). */
function parseLlr(v: unknown): Pick<CreateParams, 'llr'> {
  if (v === undefined || v === null) return {};
  assertObj(v, 'llr');
  const timing = v['timing'];
  if (timing !== undefined && typeof timing !== 'boolean') {
    throw new WireError('invalid_type', "Invalid type for 'llr.timing': expected a boolean.", 'llr.timing');
  }
  return { llr: { timing: timing === true } };
}

/** The body of `POST /v1/responses/compact`: `model` required, a window from `input` and/or `previous_response_id`. */
export interface CompactParams {
  /** Null when the client sent `model: null` (the compaction names no model). */
  model: string | null;
  input: InputItem[];
  previous_response_id: string | null;
  instructions: string | null;
  prompt_cache_key: string | null;
}

export function parseCompactBody(body: unknown, caps: ParseCaps = DEFAULT_PARSE_CAPS): CompactParams {
  assertObj(body, 'body');
  // Required, and nullable: openai-node 7's `ResponseCompactParams.model` is `… | null` (a null was refused as missing).
  const model = body['model'] === null ? null : requireModel(body);
  checkImageOptions(body);
  // Nothing is echoed (a compaction object has no such field), but a value outside the API's enum is refused as
  // a create's is (openai-node 6.49's `ResponseCompactParams.prompt_cache_retention`): it was taken silently.
  optEnum(body, 'prompt_cache_retention', PROMPT_CACHE_RETENTIONS);
  // The same for `service_tier`, which every create path checks: compact took any value (`'bogus'`, `5`) silently.
  optEnum(body, 'service_tier', COMPACT_SERVICE_TIERS);
  // And `prompt_cache_options` (openai-node 7's `ResponseCompactParams.prompt_cache_options`, its `ttl` `30m` only).
  parsePromptCacheOptions(body['prompt_cache_options'], COMPACT_PROMPT_CACHE_TTLS);
  return {
    model,
    input: parseInput(body['input'], 'input', false, caps),
    previous_response_id: optPreviousId(body),
    instructions: optString(body, 'instructions'),
    prompt_cache_key: optBoundedString(body, 'prompt_cache_key', PROMPT_CACHE_KEY_MAX_CHARS),
  };
}

/**
 * The body of `POST /v1/responses/{id}/append` (the long-lived protocol over
 * HTTP): `{"input": [...]}`, the same items a `response.append` frame carries.
 */
export function parseAppendBody(body: unknown, caps: ParseCaps = DEFAULT_PARSE_CAPS): InputItem[] {
  if (!isObj(body)) throw new WireError('invalid_type', 'The request body must be a JSON object.', null);
  if (caps.allowUnknownParameters !== true) checkParameters(body, APPEND_BODY_FIELDS);
  return parseAppendInput(body['input'], caps);
}

/**
 * The fields of an append's body (`POST /v1/responses/{id}/append`: `input`, the optional `response_id` checked against
 * the path, and `client_metadata`, which Codex sends on its appends and creates). Any other is refused
 * `400 unknown_parameter`, as a create's is (unless `llr serve --allow-unknown-parameters`): it was dropped without a
 * word, so a typo such as `response_Id` beside the path's id, or `inputs`, went unnoticed (outside attack atk89 F1).
 * Not so a `response.append` or `response.inject` frame, whose other fields are ignored, as documented: the WebSocket
 * prototype's real client, Codex 0.107, sends `client_metadata` on every append, and refused, every long-lived run of it
 * failed at its first tool output (outside attack atk90 F1).
 */
const APPEND_BODY_FIELDS: ReadonlySet<string> = new Set(['input', 'response_id', 'client_metadata']);

/**
 * An append's or inject's `input`: an input, and not an empty array. An empty one was taken (`202 {}` over HTTP, no
 * event over a WebSocket) and did nothing, the run left paused until its timeout (outside attack atk69 F1); the API
 * words the refusal as for any array below its minimum length.
 */
function parseAppendInput(v: unknown, caps: ParseCaps): InputItem[] {
  if (Array.isArray(v) && v.length === 0) {
    throw new WireError('empty_array', "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'input');
  }
  return parseInput(v, 'input', true, caps);
}

/** A create opted in to timing by its connection or request headers. */
export function withTimingOptIn<T extends CreateParams>(params: T, optIn: boolean): T {
  return optIn ? { ...params, llr: { ...params.llr, timing: true } } : params;
}

/**
 * The tool types the API has: openai-node's `Tool` union (6.49 and 7.5 alike) and the OpenAPI spec's `Tool`
 * (openai/openai-openapi `f85dbe2`). A tool of another type was taken and echoed in the Response's `tools`, which
 * typed clients decode as that union; the API refuses it. With `llr serve --allow-unknown-parameters` it is taken.
 */
const TOOL_TYPES: ReadonlySet<string> = new Set([
  'function', 'file_search', 'computer', 'computer_use_preview', 'web_search', 'web_search_2025_08_26', 'mcp',
  'code_interpreter', 'programmatic_tool_calling', 'image_generation', 'local_shell', 'shell', 'custom', 'namespace',
  'tool_search', 'web_search_preview', 'web_search_preview_2025_03_11', 'apply_patch',
]);

function parseTools(v: unknown, caps: ParseCaps): Tool[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new WireError('invalid_type', "Invalid type for 'tools': expected an array.", 'tools');
  if (v.length > caps.maxTools) {
    // The API's words and code (its cap is 128).
    throw new WireError(
      'array_above_max_length',
      `Invalid 'tools': array too long. Expected an array with maximum length ${caps.maxTools}, but got an array with length ${v.length} instead.`,
      'tools',
    );
  }
  return v.map((t, i) => {
    assertObj(t, `tools[${i}]`);
    requireStringType(t, `tools[${i}]`);
    if (caps.allowUnknownParameters !== true && !TOOL_TYPES.has(t['type'])) {
      const shown = t['type'].length > 100 ? `${t['type'].slice(0, 100)}…` : t['type'];
      throw new WireError('invalid_value', `Invalid value for 'tools[${i}].type': '${shown}' is not a tool type.`, `tools[${i}].type`);
    }
    if (hasType(t, 'function')) {
      requireString(t, 'name', `tools[${i}]`);
      // The router reads it as text (model/tool-match.ts): a number or object is refused here, not a 500 later.
      optString(t, 'description', `tools[${i}].`);
      // Echoed on the Response, where openai-node's FunctionTool types it `boolean | null`: `"yes"` was echoed as sent.
      if (t['strict'] !== undefined && t['strict'] !== null && typeof t['strict'] !== 'boolean') {
        throw new WireError('invalid_type', `Invalid type for 'tools[${i}].strict': expected a boolean.`, `tools[${i}].strict`);
      }
      // `parameters` is checked by the validate stage (pipeline/validate.ts), which is timed.
    }
    // Echoed on the Response, where openai-node's CustomTool requires its name and Tool.Mcp its server_label (a
    // `tool_choice` names them by these too): `{"type": "custom"}` was taken and echoed without one.
    if (hasType(t, 'custom')) {
      requireString(t, 'name', `tools[${i}]`);
      optString(t, 'description', `tools[${i}].`);
    }
    if (hasType(t, 'mcp')) requireString(t, 'server_label', `tools[${i}]`);
    checkToolFields(t, `tools[${i}]`);
    return t;
  });
}

/** What a tool's field must be: present (`required`), and of a kind, or one of a closed set of strings. */
type FieldRule = { field: string; required?: true } & (
  | { kind: 'string' | 'number' | 'boolean' | 'array' | 'strings' | 'string_or_object' | 'object' }
  | { oneOf: readonly string[]; orObject?: true }
);

const SEARCH_CONTEXT: FieldRule = { field: 'search_context_size', oneOf: ['low', 'medium', 'high'] };
const DEFER_LOADING: FieldRule = { field: 'defer_loading', kind: 'boolean' };

/**
 * The fields of the hosted and custom tools that openai-node (6.49) requires or types with a closed set of values, by
 * tool type. Each tool is echoed in the Response's `tools`, which typed clients decode as that union: a `file_search`
 * without `vector_store_ids`, a `web_search` with `search_context_size: "huge"` or an `image_generation` with
 * `quality: "ultra"` were taken and echoed so (outside conformance tester), and the API refuses them. Fields not listed
 * are carried as sent; `null` counts as not sent for optional fields, as openai-node's `?: … | null` reads it.
 */
const TOOL_FIELDS: Readonly<Record<string, readonly FieldRule[]>> = {
  function: [DEFER_LOADING],
  custom: [DEFER_LOADING, { field: 'format', kind: 'object' }],
  file_search: [{ field: 'vector_store_ids', required: true, kind: 'strings' }, { field: 'max_num_results', kind: 'number' }],
  computer_use_preview: [
    { field: 'display_height', required: true, kind: 'number' },
    { field: 'display_width', required: true, kind: 'number' },
    { field: 'environment', required: true, oneOf: ['windows', 'mac', 'linux', 'ubuntu', 'browser'] },
  ],
  code_interpreter: [{ field: 'container', required: true, kind: 'string_or_object' }],
  namespace: [
    { field: 'name', required: true, kind: 'string' },
    { field: 'description', required: true, kind: 'string' },
    { field: 'tools', required: true, kind: 'array' },
  ],
  web_search: [SEARCH_CONTEXT],
  web_search_2025_08_26: [SEARCH_CONTEXT],
  web_search_preview: [SEARCH_CONTEXT],
  web_search_preview_2025_03_11: [SEARCH_CONTEXT],
  mcp: [{ field: 'require_approval', oneOf: ['always', 'never'], orObject: true }],
  image_generation: [
    { field: 'action', oneOf: ['generate', 'edit', 'auto'] },
    { field: 'background', oneOf: ['transparent', 'opaque', 'auto'] },
    { field: 'input_fidelity', oneOf: ['high', 'low'] },
    { field: 'moderation', oneOf: ['auto', 'low'] },
    { field: 'output_format', oneOf: ['png', 'webp', 'jpeg'] },
    { field: 'quality', oneOf: ['low', 'medium', 'high', 'auto'] },
    { field: 'output_compression', kind: 'number' },
    { field: 'partial_images', kind: 'number' },
  ],
};

/** `t`'s fields against `TOOL_FIELDS`, and a custom tool's `format` (openai-node's `CustomToolInputFormat`). */
function checkToolFields(t: Obj & { type: string }, param: string): void {
  // A tool typed `constructor` or `__proto__` (taken with --allow-unknown-parameters) found Object's
  // own members here, and the request failed with a 500 (outside attack).
  for (const rule of ownValue(TOOL_FIELDS, t.type) ?? []) {
    const x = t[rule.field];
    const p = `${param}.${rule.field}`;
    if (x === undefined || (x === null && rule.required !== true)) {
      if (rule.required === true) throw new WireError('missing_required_parameter', `Missing required parameter: '${p}'.`, p);
      continue;
    }
    if ('kind' in rule) {
      if (!ofKind(x, rule.kind)) throw new WireError('invalid_type', `Invalid type for '${p}': expected ${KIND_WORDS[rule.kind]}, but got ${jsonPreview(x)} instead.`, p);
      continue;
    }
    if (rule.orObject === true && isObj(x)) continue;
    if (typeof x !== 'string' || !rule.oneOf.includes(x)) {
      throw new WireError(
        typeof x === 'string' || (rule.orObject !== true && typeof x !== 'object') ? 'invalid_value' : 'invalid_type',
        `Invalid value for '${p}': ${typeof x === 'string' ? `'${clipText(x, 100)}'` : jsonPreview(x)}. Supported values are: ${listWords(rule.oneOf)}${rule.orObject === true ? ', or an object' : ''}.`,
        p,
      );
    }
  }
  const format = t.type === 'custom' ? t['format'] : undefined;
  if (isObj(format)) {
    requireStringType(format, `${param}.format`);
    const kind = format['type'];
    if (kind !== 'text' && kind !== 'grammar') {
      throw new WireError('invalid_value', `Invalid value for '${param}.format.type': ${jsonPreview(kind ?? null)}. Supported values are: 'text' and 'grammar'.`, `${param}.format.type`);
    }
    if (kind === 'grammar') {
      requireString(format, 'definition', `${param}.format`);
      const syntax = format['syntax'];
      if (syntax !== 'lark' && syntax !== 'regex') {
        throw new WireError(
          syntax === undefined ? 'missing_required_parameter' : 'invalid_value',
          syntax === undefined ? `Missing required parameter: '${param}.format.syntax'.` : `Invalid value for '${param}.format.syntax': ${jsonPreview(syntax)}. Supported values are: 'lark' and 'regex'.`,
          `${param}.format.syntax`,
        );
      }
    }
  }
}

/** `'a', 'b', and 'c'` (two: `'a' and 'b'`), as the API lists supported values. */
function listWords(values: readonly string[]): string {
  const q = values.map((v) => `'${v}'`);
  return q.length <= 2 ? q.join(' and ') : `${q.slice(0, -1).join(', ')}, and ${q.at(-1)}`;
}

function parseToolChoice(v: unknown): ToolChoice {
  if (v === undefined || v === null) return 'auto';
  if (v === 'auto' || v === 'none' || v === 'required') return v;
  // Neither a string nor an object (`5`, `true`), or an object whose `type` is not a string: the wrong type, as every
  // other field's, not a wrong value (outside conformance tester atk58 F5).
  if (typeof v !== 'string' && !isObj(v)) {
    throw new WireError('invalid_type', `Invalid type for 'tool_choice': expected a string or an object, but got ${jsonPreview(v)} instead.`, 'tool_choice');
  }
  if (isObj(v) && v['type'] !== undefined && typeof v['type'] !== 'string') {
    throw new WireError('invalid_type', `Invalid type for 'tool_choice.type': expected a string, but got ${jsonPreview(v['type'])} instead.`, 'tool_choice.type');
  }
  if (isObj(v) && typeof v['type'] === 'string') {
    if (v['type'] === 'function') {
      const name = v['name'];
      if (name === undefined || name === null) {
        throw new WireError('missing_required_parameter', "Missing required parameter: 'tool_choice.name'.", 'tool_choice.name');
      }
      // Sent, of another type (`5`): the wrong type, as every other field's, not a missing one.
      if (typeof name !== 'string') {
        throw new WireError('invalid_type', `Invalid type for 'tool_choice.name': expected a string, but got ${jsonPreview(name)} instead.`, 'tool_choice.name');
      }
    }
    if (v['type'] === 'allowed_tools') {
      // Echoed on the Response: its mode is openai-node's `ToolChoiceAllowed.mode`, its tools a list.
      if (v['mode'] === undefined) throw new WireError('missing_required_parameter', "Missing required parameter: 'tool_choice.mode'.", 'tool_choice.mode');
      optEnum(v, 'mode', ALLOWED_TOOLS_MODES, 'tool_choice.');
      if (!Array.isArray(v['tools'])) {
        throw new WireError(v['tools'] === undefined ? 'missing_required_parameter' : 'invalid_type', "Invalid 'tool_choice.tools': expected an array of tools.", 'tool_choice.tools');
      }
      // Each a tool definition (openai-node: `Array<{[key: string]: unknown}>`), as it is echoed: `[5]` was echoed too.
      v['tools'].forEach((t: unknown, i: number) => {
        if (!isObj(t)) {
          throw new WireError('invalid_type', `Invalid type for 'tool_choice.tools[${i}]': expected a tool definition (an object with a 'type').`, `tool_choice.tools[${i}]`);
        }
        // A tool without its type is missing it, as in `tools` (outside attack atk112 F3).
        requireStringType(t, `tool_choice.tools[${i}]`);
      });
    }
    return v as ToolChoice;
  }
  // An object without its type (`{name: "lookup"}`): missing it, not a bad value (outside attack atk112 F3).
  if (isObj(v) && (v['type'] === undefined || v['type'] === null)) {
    throw new WireError('missing_required_parameter', "Missing required parameter: 'tool_choice.type'.", 'tool_choice.type');
  }
  throw new WireError('invalid_value', "Invalid value for 'tool_choice'.", 'tool_choice');
}

/**
 * Hosted tool types a `tool_choice` names (openai-node's `ToolChoiceTypes`, `ToolChoiceShell`, …) and the `tools`
 * types that declare them: a preview alias names the same tool.
 */
const CHOICE_TOOL_TYPES: Readonly<Record<string, readonly string[]>> = {
  web_search_preview: ['web_search_preview', 'web_search_preview_2025_03_11'],
  web_search_preview_2025_03_11: ['web_search_preview', 'web_search_preview_2025_03_11'],
  computer: ['computer', 'computer_use_preview'],
  computer_use: ['computer', 'computer_use_preview'],
  computer_use_preview: ['computer', 'computer_use_preview'],
};

/** A forced tool the simulated model never calls: the API would make that call, so taking the request would answer it wrongly. */
function neverCalled(what: string): WireError {
  return new WireError(
    'unsupported_value',
    `Unsupported value: 'tool_choice' forces ${what}, and this server's simulated model calls function tools only (a run replayed with --workload calls a custom tool only where its recording did): it would answer with a message where the API makes the call. Force a function tool, or use 'auto'.`,
    'tool_choice',
  );
}

/**
 * What an `allowed_tools` entry, or a forced tool, names when `tools` declares no such tool (null when it does): a function or custom
 * tool by its type and name, an MCP tool by its `server_label` (any MCP tool without one), a hosted tool by its type
 * (a preview alias naming the same tool). A function's or custom tool's `name` left out or of another type is refused
 * as a forced one's is.
 */
function undeclaredEntry(entry: Record<string, unknown>, i: number, tools: Tool[]): string | null {
  const type = entry['type'] as string;
  if (type === 'function' || type === 'custom') {
    const name = entry['name'];
    if (name === undefined || name === null) {
      throw new WireError('missing_required_parameter', `Missing required parameter: 'tool_choice.tools[${i}].name'.`, `tool_choice.tools[${i}].name`);
    }
    if (typeof name !== 'string') {
      throw new WireError('invalid_type', `Invalid type for 'tool_choice.tools[${i}].name': expected a string, but got ${jsonPreview(name)} instead.`, `tool_choice.tools[${i}].name`);
    }
    return tools.some((t) => t.type === type && (t as Record<string, unknown>)['name'] === name) ? null : name;
  }
  if (type === 'mcp') {
    const label = entry['server_label'];
    if (typeof label === 'string') return tools.some((t) => t.type === 'mcp' && (t as Record<string, unknown>)['server_label'] === label) ? null : label;
    return tools.some((t) => t.type === 'mcp') ? null : 'mcp';
  }
  const declaring = ownValue(CHOICE_TOOL_TYPES, type) ?? [type];
  return tools.some((t) => declaring.includes(t.type)) ? null : type;
}

/**
 * A forced tool must exist (the API refuses it otherwise, "Tool choice '…' not found in 'tools' parameter.") and
 * be one the simulated model calls: function tools only (model/auto-policy.ts). A forced custom, MCP or hosted
 * tool, or `required` (or `allowed_tools` in `required` mode) with no function tool to call, is refused
 * `unsupported_value`: it was taken and the response completed with a message, the call the API guarantees missing.
 */
function checkToolChoice(choice: ToolChoice, tools: Tool[]): void {
  const functions = new Set(tools.filter(isFunctionTool).map((t) => t.name));
  if (typeof choice === 'object' && choice.type === 'function' && !functions.has(choice['name'] as string)) {
    throw new WireError('invalid_value', `Tool choice '${String(choice['name']).slice(0, 100)}' not found in 'tools' parameter.`, 'tool_choice');
  }
  // A custom tool by its name, an MCP server by its label (openai-node's ToolChoiceCustom, ToolChoiceMcp): forcing
  // one the request does not declare was taken, and the model went on calling the request's functions instead.
  if (typeof choice === 'object' && (choice.type === 'custom' || choice.type === 'mcp')) {
    const key = choice.type === 'custom' ? 'name' : 'server_label';
    const named = (choice as Record<string, unknown>)[key];
    // `{type: "mcp"}` alone is also one of openai-node's ToolChoiceTypes (any MCP tool): an MCP tool must be declared.
    if (named === undefined && choice.type === 'mcp') {
      if (!tools.some((t) => t.type === 'mcp')) throw new WireError('invalid_value', "Tool choice 'mcp' not found in 'tools' parameter.", 'tool_choice');
      throw neverCalled('an MCP tool call');
    }
    if (named === undefined || named === null) {
      throw new WireError('missing_required_parameter', `Missing required parameter: 'tool_choice.${key}'.`, `tool_choice.${key}`);
    }
    if (typeof named !== 'string') {
      throw new WireError('invalid_type', `Invalid type for 'tool_choice.${key}': expected a string, but got ${jsonPreview(named)} instead.`, `tool_choice.${key}`);
    }
    if (undeclaredEntry(choice as Record<string, unknown>, 0, tools) !== null) {
      throw new WireError('invalid_value', `Tool choice '${named.slice(0, 100)}' not found in 'tools' parameter.`, 'tool_choice');
    }
    throw neverCalled(`a call of the ${choice.type === 'custom' ? 'custom' : 'MCP'} tool '${named.slice(0, 100)}'`);
  }
  if (typeof choice === 'object' && choice.type === 'allowed_tools') {
    const listed = choice['tools'] as Array<Record<string, unknown>>;
    // Each entry must name a tool of `tools`, as a forced one must: the API refuses one it does not declare ("Tool
    // choice 'web_search' not found in 'tools' parameter.", quoted by vercel/ai#18997); it was taken, in either mode
    // (outside conformance tester atk118 F1).
    listed.forEach((entry, i) => {
      const missing = undeclaredEntry(entry, i, tools);
      if (missing !== null) throw new WireError('invalid_value', `Tool choice '${missing.slice(0, 100)}' not found in 'tools' parameter.`, 'tool_choice');
    });
    if (choice['mode'] !== 'required') return;
    if (!listed.some((t) => t['type'] === 'function' && typeof t['name'] === 'string' && functions.has(t['name']))) {
      throw neverCalled("a tool call ('allowed_tools' in 'required' mode) and lists no function tool of 'tools'");
    }
    return;
  }
  // A hosted tool by its type (file_search, web_search_preview, computer_use_preview, code_interpreter, shell, …).
  if (typeof choice === 'object' && choice.type !== 'function') {
    const type = choice.type;
    // Declared by its type or a preview alias (`undeclaredEntry`, which looks the alias up as an own member: a choice
    // typed `constructor` found Object's here once, and the request failed with a 500).
    if (undeclaredEntry(choice as Record<string, unknown>, 0, tools) !== null) {
      throw new WireError('invalid_value', `Tool choice '${type.slice(0, 100)}' not found in 'tools' parameter.`, 'tool_choice');
    }
    throw neverCalled(`a call of the hosted tool '${type.slice(0, 100)}'`);
  }
  if (choice === 'required' && tools.length === 0) {
    throw new WireError('invalid_value', "Tool choice 'required' must be specified with 'tools' parameter.", 'tool_choice');
  }
  if (choice === 'required' && functions.size === 0) throw neverCalled("a tool call ('required') and 'tools' has no function tool");
}

/**
 * `safety_identifier`'s maxLength: openai-node 7.60's `ResponseCreateParams.safety_identifier` says "a maximum length of
 * 128 characters" (the spec of the fixture, test/fixtures/openai-responses-schemas.json, an older commit, said 64, and
 * so refused what clients following the current SDK send; outside conformance tester atk58 F3).
 */
export const SAFETY_IDENTIFIER_MAX_CHARS = 128;

/**
 * `prompt_cache_key`'s maxLength: the API refuses a longer key with `string_above_max_length` (its body quoted in
 * public reports, e.g. theopenco/llmgateway#3110, "Expected a string with maximum length 64, but got a string with length
 * 72 instead."), though the spec's schema gives none; a 100,000-character key was taken and echoed (atk58 F1).
 */
export const PROMPT_CACHE_KEY_MAX_CHARS = 64;

/** An optional string of at most `max` characters (code points, as `metadata`'s), else `400 string_above_max_length`, as the API refuses it. */
function optBoundedString(body: Obj, key: string, max: number): string | null {
  const v = optString(body, key);
  if (v !== null) checkLength(v, max, key);
  return v;
}

/** The API's bounds on `metadata`: 16 pairs, keys up to 64 characters, values up to 512. */
export const METADATA_LIMITS = { pairs: 16, keyChars: 64, valueChars: 512 } as const;

function parseMetadata(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  assertObj(v, 'metadata');
  let n = 0;
  for (const k in v) {
    if (++n > METADATA_LIMITS.pairs) {
      throw new WireError(
        'object_above_max_properties',
        `Invalid 'metadata': too many properties. Expected an object with at most ${METADATA_LIMITS.pairs} properties.`,
        'metadata',
      );
    }
    const x = v[k];
    const p = `metadata.${k.slice(0, 100)}`;
    if (longerThan(k, METADATA_LIMITS.keyChars)) {
      throw new WireError('string_above_max_length', `Invalid 'metadata': a key is longer than ${METADATA_LIMITS.keyChars} characters.`, 'metadata');
    }
    if (typeof x !== 'string') throw new WireError('invalid_type', `Invalid type for '${p}': expected a string.`, p);
    checkLength(x, METADATA_LIMITS.valueChars, p);
  }
  return v as Record<string, string>;
}

function parseReasoning(v: unknown): CreateParams['reasoning'] {
  if (v === undefined || v === null) return null;
  assertObj(v, 'reasoning');
  const p = 'reasoning.';
  // `generate_summary`: the deprecated name of `summary` (openai-node's `Reasoning.generate_summary`), which wins.
  const deprecated = optEnum(v, 'generate_summary', REASONING_SUMMARIES, p);
  const summary = optEnum(v, 'summary', REASONING_SUMMARIES, p) ?? deprecated;
  // `context` and `mode` (openai-node 7's `Reasoning`): echoed when sent, as the Response reports the effective ones;
  // the simulated model's reasoning has neither, so they change nothing else. They were dropped from the echo.
  const context = optEnum(v, 'context', REASONING_CONTEXTS, p);
  const mode = optString(v, 'mode', p);
  if (mode !== null && (mode.length === 0 || mode.length > MAX_MODEL_CHARS)) {
    throw new WireError('invalid_value', `Invalid value for '${p}mode': expected a mode name such as 'standard' or 'pro'.`, `${p}mode`);
  }
  return { effort: optEnum(v, 'effort', REASONING_EFFORTS, p), summary, ...(context !== null && { context }), ...(mode !== null && { mode }) };
}
