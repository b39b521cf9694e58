/**
 * The neutral workload format: the JSON `llr bench` writes for its server
 * processes and anyone can write from another agent's trace. Its contract is
 * docs/workload.schema.json (JSON Schema draft-07), which this module
 * validates against, plus the checks a schema cannot state (call_ids unique,
 * every call answered but those of a user turn's last model call, every
 * model call but a user turn's last one calling a tool).
 *
 * Used by load.ts (reading, detected by content) and by the bench (writing).
 * Leaves out converting other agents' logs: convert to this format first.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { RunMetrics } from '../pipeline/metrics.js';
import { validateItems, validateTools } from '../pipeline/validate.js';
import { WireError } from '../protocol/errors.js';
import { ARGUMENTS_MAX_CHARS, checkLength, TEXT_MAX_CHARS } from '../protocol/fields.js';
import { DEFAULT_PARSE_CAPS, parseCreateBody } from '../protocol/parse.js';
import { checkJsonDepth, DEFAULT_MAX_JSON_DEPTH } from '../protocol/json-text.js';
import { ToolSchemas } from './codex-items.js';
import { isUnicodeText, LONE_SURROGATE_NAME_NOTE, LONE_SURROGATE_NOTE, MAX_TOOL_MS, toolWaitMs, WorkloadError, type Skipped, type Workload } from './types.js';

/** The schema, shipped beside the docs that explain it (the package includes it). */
export const SCHEMA_PATH = new URL('../../docs/workload.schema.json', import.meta.url);

let validator: ValidateFunction | null = null;

function validate(v: unknown): ErrorObject[] {
  if (validator === null) {
    const schema = JSON.parse(readFileSync(SCHEMA_PATH, 'utf8')) as object;
    validator = new Ajv({ allErrors: true, strict: false }).compile(schema);
  }
  return validator(v) ? [] : (validator.errors ?? []);
}

/**
 * Is this text the neutral format rather than a JSONL rollout? A first line
 * that is a whole JSON object decides by its keys (`llr_workload` or
 * `userTurns`: neutral; anything else, such as a rollout record: not); a
 * document spread over lines decides by whether it has an `llr_workload` key.
 */
export function looksNeutral(text: string): boolean {
  if (!/^\s*\{/.test(text)) return false;
  const nl = text.indexOf('\n');
  try {
    const first = JSON.parse(nl < 0 ? text : text.slice(0, nl)) as unknown;
    if (typeof first === 'object' && first !== null) return 'llr_workload' in first || 'userTurns' in first;
  } catch {
    // not one object on the first line: a pretty-printed or broken document, or a broken rollout
  }
  return /"llr_workload"\s*:/.test(text);
}

/** The deepest a neutral document may nest (as a Codex record: codex.ts): past it, its checks would recurse too deep. */
const MAX_DOCUMENT_DEPTH = 256;

/** Parse and check a neutral workload; `name` prefixes errors and is the default name. */
export function parseNeutral(text: string, name: string, source: string): Workload {
  // Before the schema and the server's checks, each of which recurses into the document (a tool schema 3,000 levels
  // deep ended `llr` with "Maximum call stack size exceeded", exit 1). As the Codex reader bounds a record.
  try {
    checkJsonDepth(text, MAX_DOCUMENT_DEPTH);
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
    const where = err.param ? ` (in '${err.param}')` : '';
    throw new WorkloadError(0, `${name}: the document nests deeper than ${MAX_DOCUMENT_DEPTH} levels${where}; no part of a workload the server takes does (it accepts ${DEFAULT_MAX_JSON_DEPTH}): not read`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    const pos = /position (\d+)/.exec((err as Error).message);
    const line = pos ? text.slice(0, Number(pos[1])).split('\n').length : 0;
    throw new WorkloadError(line, `${name}${line ? `:${line}` : ''}: not valid JSON (${(err as Error).message}): an llr workload is one JSON object`, { cause: err });
  }
  // The deepest first: under a `oneOf` (an output item is a message or a call) the branch that fits best fails
  // deepest (a call's `/name`), while the others fail at the item itself ("must have required property 'text'").
  const errors = validate(raw)
    .map((e, i) => ({ e, i, depth: e.instancePath.split('/').length }))
    .sort((a, b) => b.depth - a.depth || a.i - b.i)
    .map(({ e }) => e);
  if (errors.length > 0) {
    const list = errors.slice(0, 5).map((e) => `${e.instancePath || '(top level)'} ${e.message ?? 'is invalid'}${e.keyword === 'const' ? ` ${JSON.stringify((e.params as { allowedValue?: unknown }).allowedValue)}` : ''}`);
    throw new WorkloadError(0, `${name}: not an llr workload (docs/workload.schema.json): ${list.join('; ')}${errors.length > 5 ? `; and ${errors.length - 5} more` : ''}`);
  }
  const w = raw as Partial<Workload> & { llr_workload?: number; userTurns: Workload['userTurns'] };
  delete w.llr_workload;
  const toolOutputs = w.toolOutputs ?? {};
  const seen = new Set<string>();
  const schemas = new ToolSchemas();
  const surrogates: Skipped[] = [];
  w.userTurns.forEach((u, ui) =>
    u.modelTurns.forEach((t, ti) => {
      if (ti < u.modelTurns.length - 1 && !t.output.some((o) => o.type === 'function_call')) {
        // A model call without a tool call ends the response: no design would make the next call of this user turn.
        throw new WorkloadError(0, `${name}: /userTurns/${ui}/modelTurns/${ti}: this model call has no function_call, so the run would end here; only a user turn's last model call may answer without calling a tool (start a new user turn instead)`);
      }
      for (const [oi, o] of t.output.entries()) {
        const at = `/userTurns/${ui}/modelTurns/${ti}/output/${oi}`;
        // JSON can spell half a UTF-16 pair; the model speaks UTF-8 bytes, which cannot: noted as the Codex reader
        // notes it (before, this format's reader replayed U+FFFD silently, outside attack atk66 F3).
        if (!isUnicodeText(o.type === 'function_call' ? o.arguments : o.text)) surrogates.push({ line: 0, what: `${at}: model output`, why: LONE_SURROGATE_NOTE });
        if (o.type === 'function_call' && !isUnicodeText(o.name)) surrogates.push({ line: 0, what: `${at}: a call's name`, why: LONE_SURROGATE_NAME_NOTE });
        if (o.type !== 'function_call') continue;
        if (seen.has(o.call_id)) throw new WorkloadError(0, `${name}: ${at}: call_id ${o.call_id} is used twice`);
        seen.add(o.call_id);
        // Arguments that are not JSON are replayed as recorded (the server takes them back as the API does); they
        // widen no tool's schema.
        schemas.note(o.name, o.arguments, false);
        if (ti < u.modelTurns.length - 1 && !Object.hasOwn(toolOutputs, o.call_id)) {
          throw new WorkloadError(0, `${name}: ${at}: call ${o.call_id} has no entry in toolOutputs (only a user turn's last model call may leave calls unanswered)`);
        }
      }
    }),
  );
  checkRequests(w, name);
  const calls = w.userTurns.reduce((n, u) => n + u.modelTurns.length, 0);
  if (w.calls !== undefined && w.calls.length !== calls) {
    throw new WorkloadError(0, `${name}: /calls has ${w.calls.length} entries for ${calls} model calls`);
  }
  // Durations as replays wait them (types.ts `toolWaitMs`): the schema keeps them at 0 or more, and one past MAX_TOOL_MS
  // (a converter that took a clock's leap for a tool's time; 1e400 reads as Infinity) is MAX_TOOL_MS, noted.
  const skipped = [...(w.skipped ?? []), ...surrogates];
  // A call's figure that the replay does not use, noted: `inspect` listed it, and the replay decoded the model turn's
  // (outside attack atk99 F3).
  if (w.calls !== undefined) {
    let k = 0;
    w.userTurns.forEach((u, ui) =>
      u.modelTurns.forEach((t, ti) => {
        const c = w.calls![k++]!;
        if (t.output_tokens !== undefined && c.output_tokens !== t.output_tokens) {
          skipped.push({ line: 0, what: `/calls/${k - 1}/output_tokens: ${c.output_tokens}`, why: `differs from /userTurns/${ui}/modelTurns/${ti}/output_tokens (${t.output_tokens}), which the replay decodes` });
        }
      }),
    );
  }
  const durations = Object.entries(toolOutputs).flatMap(([id, o]): Array<[string, { output: string; duration_ms: number }]> => {
    // An output no call of the file has (a call_id a converter changed on one side) is never replayed: noted, as the
    // Codex reader notes one (it was dropped silently; outside attack atk99 F4).
    if (!seen.has(id)) {
      skipped.push({ line: 0, what: `/toolOutputs/${id.replace(/~/g, '~0').replace(/\//g, '~1')}`, why: 'answers no function_call of userTurns (a call_id that differs between the call and its output?): not replayed' });
      return [];
    }
    const ms = o.duration_ms ?? 0;
    if (ms > MAX_TOOL_MS) skipped.push({ line: 0, what: `/toolOutputs/${id}/duration_ms: ${ms} ms`, why: `past MAX_TOOL_MS (${MAX_TOOL_MS} ms): the tool counts ${MAX_TOOL_MS} ms` });
    return [[id, { output: o.output, duration_ms: toolWaitMs(ms) }]];
  });
  return {
    name: w.name ?? name,
    source: w.source ?? source,
    instructions: w.instructions ?? null,
    tools: w.tools ?? schemas.tools(),
    userTurns: w.userTurns,
    toolOutputs: Object.fromEntries(durations),
    recorded: {
      model_calls: w.recorded?.model_calls ?? w.recorded?.input_tokens?.length ?? 0,
      input_tokens: w.recorded?.input_tokens ?? [],
      output_tokens: w.recorded?.output_tokens ?? [],
    },
    ...(w.calls !== undefined && { calls: w.calls }),
    ...(w.origin !== undefined && { origin: w.origin }),
    ...((w.skipped !== undefined || skipped.length > 0) && { skipped }),
    stats: {
      lines: w.stats?.lines ?? 0,
      function_calls: w.stats?.function_calls ?? seen.size,
      custom_tool_calls: w.stats?.custom_tool_calls ?? 0,
      hosted_calls: w.stats?.hosted_calls ?? 0,
      tool_output_bytes: w.stats?.tool_output_bytes ?? Object.values(toolOutputs).reduce((n, o) => n + Buffer.byteLength(o.output, 'utf8'), 0),
    },
  };
}

/** The parse's caps that `llr serve --workload` fits to the workload (workload/fit.ts): none here. */
const FITTED_CAPS = { ...DEFAULT_PARSE_CAPS, maxTools: Infinity, maxInputParts: Infinity, maxSchemaNodes: Infinity };

/**
 * What the schema cannot say about `tools` and each user turn's `input`: that the server takes them. Each is put
 * through the server's own parse and validate stages (an item it refuses, a part of the wrong shape, a
 * function_call_output for a call the conversation does not hold, a tool schema it refuses, nesting past
 * --max-json-depth), and a refusal names the file's JSON pointer. Before, such a file read, then failed
 * in the middle of a bench run with the server's words for a request ('input[1].type'), naming no place in the file.
 */
export function checkRequests(
  w: {
    tools?: unknown;
    userTurns: Array<{ input: unknown[]; modelTurns: Array<{ output: Array<{ type: string; call_id?: string; arguments?: string; text?: string }> }>; replace_history?: boolean }>;
    toolOutputs?: Record<string, { output: string }>;
  },
  name: string,
  where = '',
): void {
  const metrics = new RunMetrics();
  const refuse = (err: unknown, at: (param: string) => string): never => {
    if (!(err instanceof WireError)) throw err;
    throw new WorkloadError(0, `${name}: ${at(err.param ?? '')}${where}: ${err.message} (the server refuses it)`);
  };
  if (w.tools !== undefined) {
    try {
      // As deep as a request may nest: the server checks a body's depth before it parses it.
      checkJsonDepth(JSON.stringify({ tools: w.tools }), DEFAULT_MAX_JSON_DEPTH);
      // Any number of tools and schema nodes: `llr serve --workload` raises --max-tools and --max-schema-nodes to fit
      // (workload/fit.ts); checked here with the default, a file past it could be neither read nor served whatever
      // flag was given (outside attack atk84 F2).
      validateTools(parseCreateBody({ model: 'llr-workload', tools: w.tools }, FITTED_CAPS).tools, metrics);
    } catch (err) {
      refuse(err, (param) => pointer(param, '/tools', 'tools'));
    }
  }
  let known = new Set<string>();
  // The conversation's item ids (each user turn's input is checked alone by the server's stages; these are what the
  // conversation as a whole holds): a duplicate id or an `item_reference` to none read, then failed every design at
  // its first use, some only at the second user turn (outside attack atk68 F6).
  let itemIds = new Set<string>();
  const callIdsFromInput = new Map<string, string>();
  w.userTurns.forEach((u, ui) => {
    if (u.replace_history) {
      known = new Set();
      itemIds = new Set();
    }
    try {
      // The request around the input adds a level ({"input": [...]}); the server's default depth is the bench's.
      checkJsonDepth(JSON.stringify({ input: u.input }), DEFAULT_MAX_JSON_DEPTH);
      // Any number of items and parts: `--max-context-items` is raised to fit, as above.
      const { input } = parseCreateBody({ model: 'llr-workload', input: u.input }, FITTED_CAPS);
      // Not a copy of `known` per turn to tell the new ones: quadratic over a file of thousands of user turns.
      for (const id of validateItems(input, { callIds: known }, metrics)) {
        if (!known.has(id)) callIdsFromInput.set(id, `/userTurns/${ui}/input`);
        known.add(id);
      }
    } catch (err) {
      refuse(err, (param) => pointer(param, `/userTurns/${ui}/input`, 'input'));
    }
    u.input.forEach((item, k) => {
      const { id, type } = (item ?? {}) as { id?: unknown; type?: unknown };
      if (typeof id !== 'string') return;
      const at = `/userTurns/${ui}/input/${k}`;
      // No design can replay one: every request of a replay carries the conversation's items itself, so a reference
      // to an item of the same input is item_not_found (not stored yet) and one to an earlier turn's duplicates the
      // item it names (duplicate_item, or item_not_found when it names none; atk68 F6, atk72 F1).
      if (type === 'item_reference') {
        throw new WorkloadError(0, `${name}: ${at}${where}: an item_reference cannot be replayed (the replay sends the conversation's items themselves: the server answers ${itemIds.has(id) ? 'duplicate_item or item_not_found' : 'item_not_found'}); put the item it names there instead`);
      }
      // A local shell output's `id` is its call's (the server's rule too).
      if (type === 'local_shell_call_output') return;
      if (itemIds.has(id)) throw new WorkloadError(0, `${name}: ${at}/id${where}: Duplicate item found with id ${id}: an item before it in the conversation has it (the server refuses it: duplicate_item)`);
      itemIds.add(id);
    });
    u.modelTurns.forEach((t, ti) =>
      t.output.forEach((o, oi) => {
        if (o.type === 'function_call' && o.call_id !== undefined) {
          // A call_id the input already holds: the replay model places itself by call ids, so it took the model's
          // call for the input's and the run went off the recording (atk68 F6).
          const from = callIdsFromInput.get(o.call_id);
          if (from !== undefined && known.has(o.call_id)) {
            throw new WorkloadError(0, `${name}: /userTurns/${ui}/modelTurns/${ti}/output/${oi}/call_id${where}: call_id ${o.call_id} is already in the conversation, from ${from}: a model's call needs an id of its own`);
          }
          known.add(o.call_id);
        }
        // What the replay sends back as input (the http designs, every call and message; a tool's output, every
        // design), held to the API's bounds there: a workload past them read, then failed its replay (atk65 F1).
        const at = `/userTurns/${ui}/modelTurns/${ti}/output/${oi}`;
        try {
          if (o.type === 'function_call' && typeof o.arguments === 'string') checkLength(o.arguments, ARGUMENTS_MAX_CHARS, 'arguments');
          if (o.type === 'message' && typeof o.text === 'string') checkLength(o.text, TEXT_MAX_CHARS, 'text');
        } catch (err) {
          refuse(err, (param) => `${at}/${param}`);
        }
      }),
    );
  });
  for (const [callId, { output }] of Object.entries(w.toolOutputs ?? {})) {
    try {
      checkLength(output, TEXT_MAX_CHARS, 'output');
    } catch (err) {
      // A JSON pointer's escapes (RFC 6901): a call_id with `/` or `~` pointed elsewhere (outside attack atk66 F1).
      refuse(err, () => `/toolOutputs/${callId.replace(/~/g, '~0').replace(/\//g, '~1')}/output`);
    }
  }
}

/** A server error's param ('input[1].content[0].type') as a JSON pointer under `base` ('/userTurns/0/input/1/content/0/type'). */
function pointer(param: string, base: string, root: string): string {
  if (!param.startsWith(root)) return base;
  return base + param.slice(root.length).replace(/\[(\d+)\]/g, '/$1').replace(/\./g, '/');
}

/** Write the exact workload a bench replays (the server process loads it). */
export function writeWorkloadJson(path: string, w: Workload): void {
  writeFileSync(path, JSON.stringify({ llr_workload: 1, ...w }));
}
