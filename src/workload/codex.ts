/**
 * The Codex CLI rollout reader: turns a session log (JSONL) into a Workload.
 *
 * Used through `readWorkload` / `parseWorkload` in `workload.ts`. Accepts any
 * rollout in the `{timestamp, type, payload}` format; leaves out compaction
 * (the replay keeps the whole history), tool definitions as Codex sent them
 * (rollouts do not record them, so tools are rebuilt from the calls with
 * permissive schemas), images (kept as JSON text), and the legacy format
 * whose lines have no `payload`.
 *
 * What a rollout looks like (learned from codex-rollout-a.jsonl, Codex CLI
 * 0.125.0). `session_meta` comes first; its `base_instructions.text` is the
 * `instructions` Codex sends on every call. `turn_context` opens each user
 * turn (model, effort, cwd). `response_item` payloads are the conversation's
 * Responses API items in order; `event_msg` payloads are telemetry. Within one
 * model call the order is: reasoning; possibly a hosted `web_search_call` and
 * more reasoning (the search runs inside the call: no `token_count` between);
 * the assistant `message` (Codex records commentary before the calls); the
 * `function_call` / `custom_tool_call` items; one `token_count` event; only
 * then the client's `*_output` items. `exec_command_end` / `patch_apply_end`
 * events interleave anywhere, even before the `token_count`. `token_count
 * .info` is null on rate-limit-only updates; `last_token_usage.output_tokens`
 * includes `reasoning_output_tokens`.
 *
 * Grouping decisions:
 * - A model call is the assistant-side items since the last boundary; its
 *   `token_count` closes it. A client-side item (tool output, message) or the
 *   end of the file also closes it, for rollouts without usage events; a
 *   `token_count` right after such a close is still attributed to it. A
 *   `token_count` repeating the previous `total_token_usage` is ignored.
 * - Reasoning is not replayed; its tokens are in `output_tokens`. Hosted calls
 *   (`web_search_call`, any other `*_call` the client does not run) are
 *   dropped and counted. A model call left with no visible output gives its
 *   `output_tokens` to the next model call of the user turn (the previous one
 *   if it was the last): replay decodes as many tokens, inventing no output.
 * - `custom_tool_call` (apply_patch) becomes a function call with arguments
 *   `{"input": <the freeform text>}`; `local_shell_call` becomes `local_shell`
 *   with its action as arguments. Outputs are kept byte for byte.
 * - A user turn starts with the messages (developer, user, system) that follow
 *   model output; messages before any visible model output join the same turn.
 *   A trailing user turn that got no answer is dropped.
 * - Tool durations: `exec_command_end.duration` is the lifetime of a unified
 *   exec process (`exec_command` yields after ~1 s with a session id, then
 *   `write_stdin` polls it), so it spans later model calls (median 8.3 s, and
 *   only `exec_command` has one). `duration_ms` is the time between the call's
 *   and the output's records instead (median 1.26 s, every call), falling back
 *   to `exec_command_end`, then 0, when timestamps are missing.
 * - A call without output followed by a new user turn was interrupted: Codex
 *   answers it `"aborted"` in the next request, so that user turn's input
 *   starts with this `function_call_output`. A call without output at the end
 *   of the file means the file is truncated: an error.
 */
import type { ReplayTurn } from '../model/types.js';
import type { FunctionTool, InputItem, InputMessage } from '../protocol/objects.js';
import { WorkloadError, type UserTurn, type Workload } from './types.js';

type Json = Record<string, unknown>;
type Visible = ReplayTurn['output'][number];
type JsonType = 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'object' | 'null';

const CLIENT_OUTPUTS = new Set(['function_call_output', 'custom_tool_call_output', 'local_shell_call_output']);
const INPUT_ROLES = new Set(['user', 'developer', 'system']);
const CUSTOM_TOOL_DESCRIPTION =
  'A Codex custom (freeform) tool replayed as a function tool: the recorded text is in `input`.';

export function parseRollout(text: string, name: string, source: string): Workload {
  return new RolloutParser(name).parse(text, source);
}

class RolloutParser {
  private line = 0;
  private instructions: string | null = null;
  private readonly turns: UserTurn[] = [];
  private turn: UserTurn | null = null;
  /** Visible output of the model call in progress; null between calls. */
  private call: Visible[] | null = null;
  /** A call closed by a client-side item, still waiting for its token_count (turn null: nothing visible). */
  private awaiting: { turn: ReplayTurn | null } | null = null;
  /** Output tokens of calls with nothing visible, owed to the next model turn. */
  private carry = 0;
  private lastTotal: string | undefined;
  private readonly pending = new Map<string, { line: number; name: string; ts: number | undefined }>();
  private readonly answered = new Map<string, { output: string; callTs: number | undefined; ts: number | undefined }>();
  private readonly aborted = new Set<string>();
  private readonly execEndMs = new Map<string, number>();
  private readonly schemas = new Map<string, { custom: boolean; props: Map<string, JsonType | null> }>();
  private readonly recorded: Workload['recorded'] = { model_calls: 0, input_tokens: [], output_tokens: [] };
  private readonly stats: Workload['stats'] = {
    lines: 0,
    function_calls: 0,
    custom_tool_calls: 0,
    hosted_calls: 0,
    tool_output_bytes: 0,
  };

  constructor(private readonly name: string) {}

  parse(text: string, source: string): Workload {
    const lines = text.replace(/^\uFEFF/, '').split('\n');
    let last = lines.length;
    while (last > 0 && lines[last - 1]!.trim() === '') last--;
    if (last === 0) this.fail('the file is empty: not a Codex rollout', 0);
    for (let i = 0; i < last; i++) {
      const raw = lines[i]!.trim();
      if (raw === '') continue;
      this.line = i + 1;
      this.stats.lines++;
      let rec: unknown;
      try {
        rec = JSON.parse(raw);
      } catch (err) {
        const truncated = i + 1 === last && this.stats.lines > 1;
        this.fail(
          truncated
            ? 'the last line is cut off mid-JSON: the file is truncated'
            : 'not valid JSON: a Codex rollout has one JSON object per line',
          this.line,
          err,
        );
      }
      this.record(rec);
    }
    return this.finish(source);
  }

  private record(rec: unknown): void {
    if (!isJson(rec)) this.fail(`expected a record {timestamp, type, payload}, got ${describe(rec)}: not a Codex rollout`);
    const { type, payload } = rec;
    if (typeof type !== 'string') this.fail('the record has no string `type`: not a Codex rollout record {timestamp, type, payload}');
    if (!isJson(payload)) this.fail(`the "${type}" record has no \`payload\` object: not a Codex rollout record`);
    const ms = typeof rec.timestamp === 'string' ? Date.parse(rec.timestamp) : NaN;
    const ts = Number.isFinite(ms) ? ms : undefined;
    if (type === 'session_meta') this.sessionMeta(payload);
    else if (type === 'response_item') this.responseItem(payload, ts);
    else if (type === 'event_msg') this.event(payload);
    // turn_context, compacted and newer record types carry nothing the replay needs.
  }

  private sessionMeta(p: Json): void {
    if (this.instructions !== null) return; // a resumed session repeats it
    const base = p.base_instructions;
    if (typeof base === 'string') this.instructions = base;
    else if (isJson(base) && typeof base.text === 'string') this.instructions = base.text;
    else if (typeof p.instructions === 'string') this.instructions = p.instructions;
  }

  private responseItem(p: Json, ts: number | undefined): void {
    const type = this.str(p, 'type', 'response_item');
    switch (type) {
      case 'message': {
        const role = this.str(p, 'role', 'message');
        if (role === 'assistant') {
          const text = messageText(p.content);
          this.modelItem(text === '' ? null : { type: 'message', text });
          return;
        }
        if (!INPUT_ROLES.has(role)) this.fail(`message with unknown role "${role}"`);
        const content = p.content;
        if (typeof content !== 'string' && !Array.isArray(content)) this.fail(`${role} message without \`content\``);
        this.clientMessage({ type: 'message', role: role as InputMessage['role'], content });
        return;
      }
      case 'reasoning':
        this.modelItem(null);
        return;
      case 'function_call':
        this.clientCall(this.str(p, 'call_id', type), this.str(p, 'name', type), this.str(p, 'arguments', type), ts, false);
        return;
      case 'custom_tool_call': {
        const args = JSON.stringify({ input: this.str(p, 'input', type) });
        this.clientCall(this.str(p, 'call_id', type), this.str(p, 'name', type), args, ts, true);
        return;
      }
      case 'local_shell_call': {
        const id = typeof p.call_id === 'string' ? p.call_id : this.str(p, 'id', type);
        this.clientCall(id, 'local_shell', JSON.stringify(p.action ?? {}), ts, false);
        return;
      }
      default:
        if (CLIENT_OUTPUTS.has(type)) this.clientOutput(this.str(p, 'call_id', type), this.outputText(p.output, type), ts);
        else if (type.endsWith('_call')) {
          this.stats.hosted_calls++;
          this.modelItem(null);
        }
      // Other items (ghost snapshots, compaction, hosted tools' outputs) are not replayed.
    }
  }

  private event(p: Json): void {
    const type = this.str(p, 'type', 'event_msg');
    if (type === 'token_count') this.tokenCount(p);
    else if (type === 'exec_command_end' && typeof p.call_id === 'string' && isJson(p.duration)) {
      const { secs, nanos } = p.duration;
      if (typeof secs === 'number' && typeof nanos === 'number') this.execEndMs.set(p.call_id, secs * 1000 + nanos / 1e6);
    }
  }

  private tokenCount(p: Json): void {
    let usage: unknown;
    let total: string | undefined;
    if (isJson(p.info)) {
      usage = p.info.last_token_usage;
      if (isJson(p.info.total_token_usage)) total = JSON.stringify(p.info.total_token_usage);
    } else if (typeof p.input_tokens === 'number') {
      usage = p; // older Codex: the usage fields sit on the payload itself
    }
    if (!isJson(usage)) return; // rate-limit-only update
    const { input_tokens: input, output_tokens: output } = usage;
    if (typeof input !== 'number' || typeof output !== 'number') {
      this.fail('token_count without numeric input_tokens / output_tokens');
    }
    if (total !== undefined && total === this.lastTotal) return;
    this.lastTotal = total;
    this.recorded.model_calls++;
    this.recorded.input_tokens.push(input);
    this.recorded.output_tokens.push(output);
    this.closeCall();
    const target = this.awaiting;
    this.awaiting = null;
    if (target?.turn) target.turn.output_tokens = (target.turn.output_tokens ?? 0) + output;
    else this.carry += output;
  }

  private modelItem(visible: Visible | null): void {
    if (this.turn === null) this.fail('model output before any user or developer message');
    if (this.call === null) {
      this.call = [];
      this.awaiting = null; // a usage event from now on belongs to this call
    }
    if (visible) this.call.push(visible);
  }

  private clientCall(callId: string, name: string, args: string, ts: number | undefined, custom: boolean): void {
    if (this.pending.has(callId) || this.answered.has(callId) || this.aborted.has(callId)) {
      this.fail(`call_id ${callId} is used twice`);
    }
    this.modelItem({ type: 'function_call', name, arguments: args, call_id: callId });
    this.pending.set(callId, { line: this.line, name, ts });
    this.noteTool(name, args, custom);
    if (custom) this.stats.custom_tool_calls++;
    else this.stats.function_calls++;
  }

  private clientOutput(callId: string, output: string, ts: number | undefined): void {
    this.closeCall();
    const call = this.pending.get(callId);
    if (!call) {
      if (this.aborted.has(callId)) this.fail(`output for call_id ${callId} comes after a new user turn began`);
      this.fail(`output for call_id ${callId}, which ${this.answered.has(callId) ? 'already has one' : 'no earlier call has'}`);
    }
    this.pending.delete(callId);
    this.answered.set(callId, { output, callTs: call.ts, ts });
    this.stats.tool_output_bytes += Buffer.byteLength(output, 'utf8');
  }

  private clientMessage(msg: InputMessage): void {
    this.closeCall();
    if (this.turn === null || this.turn.modelTurns.length > 0) this.startTurn();
    this.turn!.input.push(msg);
  }

  private startTurn(): void {
    if (this.turn !== null) {
      this.endTurn();
      this.turns.push(this.turn);
    }
    const input: InputItem[] = [];
    for (const callId of this.pending.keys()) {
      input.push({ type: 'function_call_output', call_id: callId, output: 'aborted' });
      this.aborted.add(callId);
    }
    this.pending.clear();
    this.turn = { input, modelTurns: [] };
  }

  /** Output tokens still owed go to the user turn's last model call. */
  private endTurn(): void {
    const last = this.turn?.modelTurns.at(-1);
    if (last && this.carry > 0) {
      last.output_tokens = (last.output_tokens ?? 0) + this.carry;
      this.carry = 0;
    }
  }

  private closeCall(): void {
    if (this.call === null) return;
    const output = this.call;
    this.call = null;
    if (output.length === 0) {
      this.awaiting = { turn: null };
      return;
    }
    const turn: ReplayTurn = { output };
    if (this.carry > 0) turn.output_tokens = this.carry;
    this.carry = 0;
    this.turn!.modelTurns.push(turn);
    this.awaiting = { turn };
  }

  private finish(source: string): Workload {
    this.closeCall();
    const [open] = this.pending;
    if (open) {
      const [callId, call] = open;
      this.fail(`${call.name} call ${callId} has no output: the file ends before it (truncated)`, call.line);
    }
    if (this.turn !== null) {
      this.endTurn();
      if (this.turn.modelTurns.length > 0) this.turns.push(this.turn);
    }
    if (this.turns.length === 0) this.fail('no model call with visible output: not a replayable Codex rollout', 0);
    const toolOutputs: Workload['toolOutputs'] = {};
    for (const [callId, a] of this.answered) {
      const gap = a.callTs !== undefined && a.ts !== undefined ? Math.max(0, a.ts - a.callTs) : undefined;
      toolOutputs[callId] = { output: a.output, duration_ms: Math.round(gap ?? this.execEndMs.get(callId) ?? 0) };
    }
    return {
      name: this.name,
      source,
      instructions: this.instructions,
      tools: this.tools(),
      userTurns: this.turns,
      toolOutputs,
      recorded: this.recorded,
      stats: this.stats,
    };
  }

  /** Widens a permissive object schema per tool from the arguments seen. */
  private noteTool(name: string, args: string, custom: boolean): void {
    let tool = this.schemas.get(name);
    if (!tool) this.schemas.set(name, (tool = { custom, props: new Map() }));
    let parsed: unknown;
    try {
      parsed = JSON.parse(args);
    } catch {
      return; // models do emit malformed arguments; the call is replayed as recorded
    }
    if (!isJson(parsed)) return;
    for (const [key, value] of Object.entries(parsed)) {
      const t = jsonType(value);
      const seen = tool.props.get(key);
      if (seen === undefined) tool.props.set(key, t);
      else if (seen !== t) tool.props.set(key, (seen === 'integer' || seen === 'number') && (t === 'integer' || t === 'number') ? 'number' : null);
    }
  }

  private tools(): FunctionTool[] {
    return [...this.schemas].map(([name, { custom, props }]) => ({
      type: 'function',
      name,
      description: custom ? CUSTOM_TOOL_DESCRIPTION : null,
      parameters: {
        type: 'object',
        properties: Object.fromEntries([...props].map(([k, t]) => [k, t === null ? {} : { type: t }])),
        additionalProperties: true,
      },
      strict: false,
    }));
  }

  private outputText(output: unknown, type: string): string {
    if (typeof output === 'string') return output;
    if (Array.isArray(output)) {
      const texts = output.map((part) => (isJson(part) && typeof part.text === 'string' ? part.text : null));
      return texts.every((t) => t !== null) ? texts.join('') : JSON.stringify(output);
    }
    if (isJson(output) && typeof output.content === 'string') return output.content;
    this.fail(`${type} without \`output\``);
  }

  private str(o: Json, key: string, what: string): string {
    const v = o[key];
    if (typeof v !== 'string') this.fail(`${what} without a string \`${key}\``);
    return v;
  }

  private fail(message: string, line = this.line, cause?: unknown): never {
    const where = line > 0 ? `${this.name}:${line}` : this.name;
    throw new WorkloadError(line, `${where}: ${message}`, cause === undefined ? undefined : { cause });
  }
}

function isJson(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  return Array.isArray(v) ? 'an array' : v === null ? 'null' : `a ${typeof v}`;
}

function jsonType(v: unknown): JsonType {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  if (typeof v === 'string' || typeof v === 'boolean') return typeof v as 'string' | 'boolean';
  return 'object';
}

function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part) => (isJson(part) && typeof part.text === 'string' ? part.text : '')).join('');
}
