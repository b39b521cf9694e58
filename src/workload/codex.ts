/**
 * The Codex rollout reader: turns a Codex session log (JSONL, one
 * `{timestamp, type, payload}` record per line) into a Workload, for every
 * Codex front end (CLI, `codex exec`, IDE extension, desktop app) and version
 * that writes that format. Used through `readWorkload` (load.ts); item
 * helpers are in codex-items.ts, turn building in codex-turns.ts, token
 * inference in infer.ts. Leaves out
 * the legacy format whose lines have no `payload`, images (text only), and
 * rollbacks (`thread_rolled_back`: noted, history kept).
 *
 * Record types (codex-rs/protocol RolloutItem): `session_meta` (first; its
 * `base_instructions.text` is the `instructions` of every call; `source` is
 * cli / exec / vscode / mcp or `{subagent: …}`), `response_item` (a Responses
 * API item of the conversation), `event_msg` (telemetry), `turn_context`
 * (per-turn settings: not needed) and `compacted` (the history was replaced).
 * Within one model call: reasoning; maybe a hosted `web_search_call` and more
 * reasoning; the assistant `message`; the `function_call` /
 * `custom_tool_call` items; one `token_count` event; only then the client's
 * `*_output` items (or some of them before it). Codex versions of 2025 wrote
 * a response's items only once it had completed: its `token_count` first,
 * then its items, each call followed by its output; a file whose usage
 * events stand so (OrderEvidence) is read in that order, each `token_count`
 * the usage of the calls after it up to the next one (a repeated total
 * still ends a response, one the API sent no usage for).
 * `exec_command_end` / `patch_apply_end` interleave anywhere. Any of these may be missing: no `turn_context`, no developer
 * message, no `token_count` at all, a user turn recorded only as an
 * `event_msg` `user_message`.
 *
 * Grouping decisions:
 * - A model call is the assistant-side items since the last boundary; its
 *   `token_count` closes it; a client-side item (tool output, message), a
 *   compaction or the end of the file also closes it, and a `token_count`
 *   right after such a close is still its own, even after the next user
 *   message (the user steered while the model finished: the user turn it
 *   ended is built again with it). A `token_count` repeating the
 *   previous `total_token_usage`, or with no model call to belong to (e.g. a
 *   compaction request's), is skipped.
 * - Reasoning is not replayed; its tokens are in the call's output tokens. A
 *   hosted call (`web_search_call`, any `*_call` the client does not run) is
 *   dropped and counted. A `tool_search_call` is the client's when its
 *   `execution` is `"client"` (Codex's field; `"server"`: hosted): replayed
 *   as a function call `tool_search` taking its `arguments`, answered by its
 *   `tool_search_output` (the `tools` found, as JSON). A model call with no
 *   visible output gives its output tokens to the next call of its user turn
 *   (the previous one if it was the last): replay decodes as many tokens,
 *   inventing no output. A call that
 *   shows only text before its user turn's last joins the next call too
 *   (replayed alone, a call without a tool call would end the run).
 * - What the replay server would refuse is refused here, at its line: a call
 *   name that is empty or past 256 characters, an empty call_id, a token count that is
 *   negative, not whole or past 10^9 (MAX_TOKEN_COUNT: sums stay exact),
 *   message content nested past 32 levels.
 * - An output item of a kind not known here (`mcp_tool_call_output`, ...)
 *   answering a client call is that call's output, its text (`output`, else
 *   its other fields as JSON), and noted.
 * - Missing figures are inferred (infer.ts) and every call's figures are
 *   marked recorded or inferred in `Workload.calls`.
 * - `custom_tool_call` becomes a function call taking `{"input": text}`;
 *   `local_shell_call` becomes `local_shell` with its action as arguments;
 *   the API's built-in client tools `shell_call`, `apply_patch_call` and
 *   `computer_call` become `shell`, `apply_patch` and `computer` taking their
 *   `action` or `operation`, each answered by its `*_output`'s text (a
 *   shell call's list of results as JSON, a screenshot as a marker).
 *   Outputs are kept byte for byte; an output that is an array of content
 *   items is its text parts, each image or file part a marker (noted).
 * - A user turn starts with the messages (developer, user, system) that
 *   follow visible model output; messages before it join the same turn. An
 *   `event_msg` `user_message` is the user's message when no `response_item`
 *   user message with the same text is in the turn's input (in either order).
 *   Model output before any input gets a placeholder user message (noted). A
 *   trailing user turn with no answer is dropped (noted).
 * - Tool durations: the time between the call's and the output's records
 *   (`exec_command_end.duration` is a unified-exec process's whole life,
 *   spanning later calls), falling back to `exec_command_end`, then 0. A
 *   clock that went backwards between them counts 0; one that leapt forward
 *   past MAX_TOOL_MS (5 minutes) counts MAX_TOOL_MS; each is noted.
 * - A call without output followed by a new user turn, or by `turn_aborted`,
 *   was interrupted: Codex answers it `"aborted"` in the next request, so the
 *   next user turn's input starts with that output. One without output
 *   though the model called again in its user turn is answered "aborted"
 *   (Codex's `ensure_call_outputs_present`), noted, decided when the user
 *   turn ends (an output recorded late is still the call's). A call without output at
 *   the end of the file with no `turn_aborted` after it means the file is
 *   truncated: an error naming its line.
 * - Compaction (`compacted` records, `compaction` items): Codex continues
 *   from the replacement history (`replacement_history`, else the user
 *   messages so far and the summary). Between user turns, the next user turn
 *   gets `replace_history` and that context as its input; inside a user turn
 *   the replay keeps the full history (noted), while the inferred input
 *   tokens follow the recording.
 * - A second `session_meta` with another id (files concatenated) starts a
 *   new conversation, as a compaction with an empty replacement does; with
 *   the same id (resumed) the session goes on. History a resumed session
 *   wrote again, item for item, is skipped (repeats.ts).
 * - A call whose name no tool may have (`multi_tool_use.parallel`) is
 *   replayed as recorded and declares no tool. An output for a call the file
 *   does not hold, or a second output for a call, is skipped (noted).
 * - Sub-agent sessions are separate files (`session_meta.source.subagent`):
 *   each reads as its own workload (its origin says whose sub-agent it is);
 *   the parent's spawn call is an ordinary client tool call whose duration
 *   covers the sub-agent's run.
 */
import { validateContent } from '../pipeline/validate.js';
import { CALL_ID_MAX_CHARS } from '../protocol/parse-input.js';
import { ARGUMENTS_MAX_CHARS, codePoints, longerThan, TEXT_MAX_CHARS } from '../protocol/fields.js';
import { WireError } from '../protocol/errors.js';
import type { InputItem, InputMessage } from '../protocol/objects.js';
import {
  compactionStandIn,
  describe,
  isJson,
  messageText,
  nonTextParts,
  outputText,
  reasoningText,
  replacementItems,
  replayCallId,
  sessionInstructions,
  sessionOrigin,
  ToolSchemas,
  builtinOutputText,
  CLIENT_BUILTIN_OUTPUTS,
  CLIENT_BUILTINS,
  type Json,
} from './codex-items.js';
import { buildUserTurn, NOTHING_SHOWN_TEXT, sameUserText, type PendingFigures, type RawCall, type TurnBuild, type Visible } from './codex-turns.js';
import { inferInputTokens, reasoningTokens, type ContextOp } from './infer.js';
import { HistoryRepeats } from './repeats.js';
import { isUnicodeText, LONE_SURROGATE_NAME_NOTE, LONE_SURROGATE_NOTE, MAX_TOKEN_COUNT, MAX_TOOL_MS, toolWaitMs, WorkloadError, type Skipped, type UserTurn, type Workload } from './types.js';


const CLIENT_OUTPUTS = new Set(['function_call_output', 'custom_tool_call_output', 'local_shell_call_output']);
/** A `tool_search_call` the client ran (`execution: "client"`) is replayed as a function call of this name. */
const TOOL_SEARCH = 'tool_search';
const INPUT_ROLES = new Set(['user', 'developer', 'system']);
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** The longest name a call may have (a tool's is at most 64 characters; a model's invented name is replayed up to this). */
const MAX_CALL_NAME = 256;
/** Nesting a message's content may have: the request around it adds a few levels below the server's 64. */
const MAX_CONTENT_DEPTH = 32;
/**
 * Nesting a whole record may have: far past any Codex record (a tool's arguments or results included), far short of
 * what blows the stack. Deeper, a call's arguments, a tool_search's tools or an unknown output replayed as JSON
 * (`JSON.stringify`) threw "Maximum call stack size exceeded" from the reader, with no line ("llr: Maximum call stack
 * size exceeded").
 */
const MAX_RECORD_DEPTH = 256;

/** Does `v` nest arrays and objects more than `max` levels deep? Stops at the first level past it. */
function nestsDeeper(v: unknown, max: number): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (max === 0) return true;
  return Object.values(v).some((x) => nestsDeeper(x, max - 1));
}
/** User messages that are context Codex injected, not the user's words (its `InputMessageKind` other than plain). */
const SESSION_PREFIX = /^\s*(<user_instructions>|<environment_context>|# AGENTS\.md instructions)/i;
/** How many entries of one repeated skipped note are kept (as many as `llr workload inspect` shows); the rest are counted. */
const SKIPPED_KEPT = 6;
/**
 * How many entries of one reason (`why`) are kept whatever their `what`; the rest are counted in the last one kept.
 * A note naming what it skipped (a record's own type, a line number) differs at every line: a rollout of a million
 * records each of its own unknown type kept a million notes (32 MB read to a 94 MB neutral file, 850 MB resident).
 */
const SKIPPED_KEPT_PER_WHY = 100;
/** What Codex sends as the output of a call the history holds none for. */
const ABORTED = 'aborted';
const PLACEHOLDER_INPUT = '(the rollout records no user input before this model output)';

/**
 * What a record without `payload` says the file is instead, as a hint after the refusal. `codex exec --json` prints
 * its events (`thread.started`, `turn.*`, `item.*`), not the session's rollout, and people pass that output; other
 * agents' logs (Claude Code's `user` / `assistant` / `summary` lines) are not read at all, nor is early Codex's
 * legacy format (bare items). A Codex record type missing its payload gets no hint: the file is a broken rollout.
 */
function notRollout(type: string): string {
  if (['session_meta', 'response_item', 'event_msg', 'turn_context', 'compacted'].includes(type)) return '';
  if (/^(message|reasoning|function_call|function_call_output|custom_tool_call|custom_tool_call_output|local_shell_call)$/.test(type)) {
    return ' (a Responses API item not wrapped in {timestamp, type, payload}: the legacy rollout format of early Codex versions, not read)';
  }
  if (/^(thread|turn|item)\./.test(type) || type === 'error') {
    return ": this looks like `codex exec --json` output (its events), not the session's rollout; pass the rollout Codex wrote for the session ($CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl)";
  }
  return " (another agent's log? convert it to the neutral format: docs/workload.schema.json)";
}

export function parseRollout(text: string, name: string, source: string): Workload {
  return new RolloutParser(name).parse(text, source);
}

class RolloutParser {
  private line = 0;
  private instructions: string | null = null;
  private sessionId: string | null = null;
  /** Each session id the file's `session_meta` records name, and the line of its first. */
  private readonly sessionLines = new Map<string, number>();
  /** The line of the first session_meta forked from each session id (its `forked_from_id`): a parent after its fork is named. */
  private readonly forkLines = new Map<string, number>();
  /** Where the part being read began (its `session_meta`), and what may repeat an earlier part's call_ids in it. */
  private partLine = 0;
  private partHint: string | null = null;
  private readonly origin: Record<string, string> = { format: 'codex-rollout' };
  private readonly turns: UserTurn[] = [];
  private readonly figures: PendingFigures[] = [];
  private turn: TurnBuild | null = null;
  private open: RawCall | null = null;
  /** The call last closed without usage: a token_count right after still belongs to it. */
  private last: RawCall | null = null;
  private lastTotal: string | undefined;
  /** The last `total_token_usage`'s input and output figures, for an event that has only a total (`tokenCount`). */
  /** The running total as of the last usage event (its own total, or the one before plus its usage), from 0 at the file's start. */
  private lastTotalUsage: { input: number; output: number } = { input: 0, output: 0 };
  private totalsNoted = false;
  /** Replacement history waiting for the next user turn (compaction after visible output). */
  private pendingReplace: { items: InputItem[]; line: number; note?: Skipped } | null = null;
  private readonly ctx: ContextOp[] = [];
  private readonly userMessages: string[] = [];
  private readonly pending = new Map<string, { line: number; name: string; ts: number | undefined; aborted: boolean; raw: RawCall }>();
  private readonly answered = new Map<string, { output: string; callTs: number | undefined; ts: number | undefined; callLine: number; line: number }>();
  /** Calls answered "aborted" at the start of a new user turn: the line of each call. */
  private readonly abortedIds = new Map<string, number>();
  private readonly execEndMs = new Map<string, number>();
  /** Recorded call ids past `CALL_ID_MAX_CHARS`, each noted once (`wireCallId`); bounded by the file's calls. */
  private readonly longCallIds = new Set<string>();
  private readonly schemas = new ToolSchemas();
  /** The filter the file's records go through (repeats.ts): set while a file is parsed. */
  private repeats: HistoryRepeats | null = null;
  private readonly skipped: Skipped[] = [];
  /** Per note (what and why), how many entries are kept and the last one (skip). */
  private readonly folds = new Map<string, { kept: number; last: Skipped }>();
  /** Per reason (why), how many entries are kept and the last one (skip). */
  private readonly whys = new Map<string, { kept: number; past?: Skipped }>();
  /** The note of a turn_aborted whose calls wait for the next user turn to answer them "aborted". */
  private abortNote: { note: Skipped; n: number; why: string; late?: number } | null = null;
  private readonly recorded: Workload['recorded'] = { model_calls: 0, input_tokens: [], output_tokens: [] };
  private readonly stats: Workload['stats'] = { lines: 0, function_calls: 0, custom_tool_calls: 0, hosted_calls: 0, tool_output_bytes: 0 };

  /**
   * Where a model call's `token_count` stands: after its items (`after`, what Codex writes today, as each item is
   * recorded when it arrives) or before them (`first`: Codex versions of 2025 recorded a response's items only once it
   * had completed, after the usage event its completion sent, and each call's output right after the call). Read
   * `after` first; a file whose usage events read as `first` (OrderEvidence) is read again so.
   */
  constructor(
    private readonly name: string,
    /** The order of each part of the file (a part starts at each `session_meta`: a resumed session may be another version's); none: `after`. */
    private readonly orders: readonly UsageOrder[] = [],
  ) {
    this.order = orders[0] ?? 'after';
  }

  /** The order of the part of the file being read (`orders`). */
  private order: UsageOrder;
  /** Which part of the file is being read: the `session_meta` records so far, less one. */
  private part = -1;

  private readonly evidence = new OrderEvidence();
  /** `first` order: the usage read, waiting for the model call whose items follow it. */
  private ahead: { input: number; output: number; line: number } | null = null;
  private announcedPart: number | null = null;
  /** The user turn last ended and where its figures are: a usage event recorded after the next user message is still its last call's. */
  private ended: { build: TurnBuild; index: number; figuresFrom: number } | null = null;

  parse(text: string, source: string): Workload {
    const lines = text.replace(/^\uFEFF/, '').split('\n');
    let last = lines.length;
    while (last > 0 && lines[last - 1]!.trim() === '') last--;
    if (last === 0) this.fail('the file is empty: not a Codex rollout', 0);
    // History a resumed session wrote again is held while it repeats earlier records, and skipped once proven a copy.
    // One reason for every such note, so many of them fold into a counted one (a file of 100,000 copies kept 100,000).
    const repeats = (this.repeats = new HistoryRepeats(
      (r) => {
        this.line = r.line;
        this.record(r.rec);
      },
      (run) =>
        this.skip(
          `lines ${run.from}–${run.to} (${run.items} items${run.records > run.items ? `, ${run.records - run.items} other records` : ''}), a copy of lines ${run.copyOf.from}–${run.copyOf.to}`,
          'repeat earlier history item for item: the history a resumed session wrote again (openai/codex#29531), not replayed twice',
          true,
          run.from,
        ),
    ));
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
        // A CR left inside the line (trim took a CRLF's) ended a line in a file whose other lines end in LF.
        const cr = raw.includes('\r') ? ' (the line holds a CR not followed by LF: lines end in LF or CRLF, or all in CR)' : '';
        // The likely cause of the common hand-made shapes, as for gzip or UTF-16 (atk68 I2): a pretty-printed file
        // (`jq .`, `jq -s .`: a record spans lines) or two records on one line (files joined with no newline between).
        const pretty = /^[[{]$|^"[^"]*":|^[\]}],?$/.test(raw) ? ' (it looks pretty-printed, a record over several lines: write it one record a line, `jq -c`)' : '';
        const joined = pretty === '' && /after JSON at position/.test((err as Error).message) ? ' (two JSON values on one line: files joined without a line break between them?)' : '';
        this.fail(
          truncated && cr === '' && pretty === '' && joined === '' ? 'the last line is cut off mid-JSON: the file is truncated' : `not valid JSON: a Codex rollout has one JSON object per line${cr}${pretty}${joined}`,
          this.line,
          err,
        );
      }
      if (nestsDeeper(rec, MAX_RECORD_DEPTH)) this.fail(`the record nests deeper than ${MAX_RECORD_DEPTH} levels (no Codex record does): not read`);
      repeats.push(this.line, rec, raw);
    }
    repeats.finish();
    // Usage events before their calls' items in some part of the file: read again so, rather than each call there
    // given the next one's figures.
    const orders = this.evidence.orders();
    if (this.orders.length === 0 && orders.includes('first')) return new RolloutParser(this.name, orders).parse(text, source);
    return this.finish(source);
  }

  private record(rec: unknown): void {
    if (!isJson(rec)) this.fail(`expected a record {timestamp, type, payload}, got ${describe(rec)}: not a Codex rollout`);
    const { type, payload } = rec;
    if (typeof type !== 'string') {
      // Early Codex versions began their rollout with a header {id, timestamp, instructions, git?} and wrote bare items.
      const legacy = 'id' in rec && 'timestamp' in rec && !('payload' in rec) ? ' (a session header {id, timestamp, …}: the legacy rollout format of early Codex versions, not read)' : '';
      this.fail(`the record has no string \`type\`: not a Codex rollout record {timestamp, type, payload}${legacy}`);
    }
    if (!isJson(payload)) this.fail(`the "${type}" record has no \`payload\` object: not a Codex rollout record${notRollout(type)}`);
    const ms = typeof rec.timestamp === 'string' ? Date.parse(rec.timestamp) : NaN;
    const ts = Number.isFinite(ms) ? ms : undefined;
    // One that is there but no date (`"not-a-date"`, a number) was taken silently as none: the tool times it bounds
    // counted 0 ms with nothing said (outside attack atk57 F5).
    if (ts === undefined && rec.timestamp !== undefined) {
      const shownTs = typeof rec.timestamp === 'string' ? JSON.stringify(rec.timestamp.slice(0, 40)) : `(${describe(rec.timestamp)})`;
      this.skip(`the timestamp ${shownTs} of a "${type}" record`, 'not a date (Codex writes ISO 8601): the record has no time, so a tool time it bounds counts its exec_command_end duration, or 0 ms');
    }
    if (type === 'session_meta') this.sessionMeta(payload);
    else if (type === 'response_item') this.responseItem(payload, ts);
    else if (type === 'event_msg') this.event(payload);
    else if (type === 'compacted') this.compacted(payload);
    else if (type !== 'turn_context') this.skip(`a "${type}" record`, 'a record type this reader does not know');
  }

  private sessionMeta(p: Json): void {
    this.evidence.newPart();
    this.part++;
    const order = this.orders[Math.max(0, this.part)] ?? 'after';
    if (order !== this.order) {
      // Another part, in the other order: what the last one left open ends here.
      this.closeCall();
      this.last = null;
      this.dropAhead('the file\'s next part (a session_meta) follows it before any model call\'s items');
      this.order = order;
    }
    const id = typeof p.id === 'string' ? p.id : null;
    const forked = typeof p.forked_from_id === 'string' ? p.forked_from_id : null;
    // Why a call_id of the parts before may come again in this one (`clientCall`'s refusal says so: it named no cause).
    this.partLine = this.line;
    this.partHint =
      forked !== null && this.sessionLines.has(forked)
        ? `the session at line ${this.line} is a fork of session ${forked} (line ${this.sessionLines.get(forked)}), which this file also holds, and a fork begins with a copy of its parent's history: read the fork's file alone`
        : id !== null && this.forkLines.has(id)
          ? `the session at line ${this.line} is the parent of the fork at line ${this.forkLines.get(id)} (its forked_from_id), which this file holds before it, and a fork begins with a copy of its parent's history: read each session's file alone`
          : this.sessionId !== null && id === this.sessionId
          ? `the session is resumed at line ${this.line}, and a copy of its history written again other than byte for byte (another Codex version's) is read as new records: read the file up to line ${this.line}, or from it, alone`
          : null;
    if (id !== null && !this.sessionLines.has(id)) this.sessionLines.set(id, this.line);
    if (forked !== null && !this.forkLines.has(forked)) this.forkLines.set(forked, this.line);
    if (this.sessionId !== null) {
      if (id === this.sessionId) return; // the same session resumed: its history goes on
      // Another session (files concatenated): it began from an empty context, so its first user turn starts a new
      // conversation. Read as a continuation before, its calls were replayed (and inferred) over the whole history
      // of the sessions before it, which the recorded agent never sent.
      const other = sessionInstructions(p);
      const same = other === null || other === this.instructions ? '' : '; its instructions differ, the first session\'s are kept';
      this.skip(`session_meta ${id ?? '(no id)'}`, `a second session in the file: its first user turn starts a new conversation (replace_history), as the session began from an empty context${same}`);
      this.newConversation([]);
      // Its records (a fork's copied history among them) are its own, not a copy of the first session's.
      this.repeats?.reset();
      return;
    }
    this.sessionId = id ?? '';
    Object.assign(this.origin, sessionOrigin(p));
    this.instructions = sessionInstructions(p);
  }

  private responseItem(p: Json, ts: number | undefined): void {
    const type = this.str(p, 'type', 'response_item');
    switch (type) {
      case 'message': {
        const role = this.str(p, 'role', 'message');
        if (role === 'assistant') {
          // A refusal part is what the model said (its tokens decoded, the call shown): replayed as the message's text,
          // noted. Read as no text, the call was taken as one that showed nothing and merged into the next.
          const parts = Array.isArray(p.content) ? p.content.filter((c) => isJson(c) && c.type === 'refusal' && typeof c.text !== 'string') : [];
          const replayed = parts.filter((c) => typeof c.refusal === 'string' && c.refusal !== '').length;
          if (replayed > 0) this.skip(`${replayed} refusal part(s) of an assistant message`, 'replayed as the message\'s text (the server streams no refusal parts); the model call stays its own');
          if (parts.length > replayed) this.skip(`${parts.length - replayed} refusal part(s) of an assistant message`, 'no text to replay (its `refusal` is not a non-empty string): the part is dropped');
          const text = messageText(p.content, true);
          this.modelItem(text === '' ? null : { type: 'message', text }, { type: 'message', role: 'assistant', content: text });
          return;
        }
        if (!INPUT_ROLES.has(role)) this.fail(`message with unknown role "${role}"`);
        const content = p.content;
        if (typeof content !== 'string' && !Array.isArray(content)) this.fail(`${role} message without \`content\``);
        // Replayed as recorded; the server refuses a request nesting deeper than 64 levels (--max-json-depth).
        if (nestsDeeper(content, MAX_CONTENT_DEPTH)) this.fail(`${role} message content nests deeper than ${MAX_CONTENT_DEPTH} levels (no Codex message part does; the server would refuse it)`);
        // Parts the server refuses (not an object, an unknown type, text that is not a string) are refused here, at their
        // line: read as recorded, they crashed the token inference with a TypeError naming no line.
        try {
          validateContent(role, content, 'message');
        } catch (err) {
          if (!(err instanceof WireError)) throw err;
          this.fail(`${role} message content: ${err.message} (the server would refuse it)`);
        }
        this.clientMessage({ type: 'message', role: role as InputMessage['role'], content }, false);
        return;
      }
      case 'reasoning': {
        const enc = typeof p.encrypted_content === 'string' ? p.encrypted_content.length : 0;
        const summary = Array.isArray(p.summary) ? p.summary : [];
        this.modelItem(null, { type: 'reasoning', summary }, reasoningTokens(reasoningText(p), enc));
        return;
      }
      case 'function_call':
        this.namespaced(p);
        this.clientCall(this.str(p, 'call_id', type), this.str(p, 'name', type), this.str(p, 'arguments', type), ts, false);
        return;
      case 'custom_tool_call':
        this.namespaced(p);
        this.clientCall(this.str(p, 'call_id', type), this.str(p, 'name', type), JSON.stringify({ input: this.str(p, 'input', type) }), ts, true);
        return;
      case 'local_shell_call': {
        const id = typeof p.call_id === 'string' ? p.call_id : this.str(p, 'id', type);
        this.clientCall(id, 'local_shell', JSON.stringify(p.action ?? {}), ts, false);
        return;
      }
      case 'tool_search_call':
        if (p.execution !== 'client') break; // run by the API (execution "server"): a hosted call, below
        this.clientCall(this.str(p, 'call_id', type), TOOL_SEARCH, JSON.stringify(p.arguments ?? {}), ts, false);
        return;
      case 'tool_search_output': {
        if (p.execution !== 'client') {
          // The API's own search result: said by the model with its call, as a hosted call's result is.
          const { id: _id, ...rest } = p;
          if (typeof rest.call_id === 'string') rest.call_id = this.wireCallId(rest.call_id);
          this.modelItem(null, rest as InputItem);
          return;
        }
        if (!Array.isArray(p.tools)) this.fail(`${type} without \`tools\``);
        this.clientOutput(this.str(p, 'call_id', type), JSON.stringify(p.tools), ts);
        return;
      }
      case 'compaction':
      case 'compaction_summary':
        this.evidence.see('compaction');
        this.compaction(typeof p.encrypted_content === 'string' ? [compactionStandIn(p.encrypted_content)] : [], 'a compaction item');
        return;
    }
    const builtin = CLIENT_BUILTINS[type];
    if (builtin !== undefined) {
      this.clientCall(this.str(p, 'call_id', type), builtin.name, JSON.stringify(p[builtin.field] ?? {}), ts, false);
      return;
    }
    if (CLIENT_BUILTIN_OUTPUTS.has(type)) {
      this.clientOutput(this.str(p, 'call_id', type), this.builtinOutput(type, p), ts);
      return;
    }
    if (CLIENT_OUTPUTS.has(type)) {
      const out = outputText(p.output);
      if (out === null) this.fail(`${type} without \`output\``);
      const markers = nonTextParts(p.output);
      if (markers > 0) this.skip(`${markers} part(s) of ${type} ${String(p.call_id)}`, 'not text (an image or file): replayed as a marker naming the part\'s type, its data not sent (tool outputs in the neutral format are text)');
      this.clientOutput(this.str(p, 'call_id', type), out, ts);
    } else if (type.endsWith('_call')) {
      this.stats.hosted_calls++;
      const { id: _id, ...rest } = p;
      // Sent back as input by the http designs, where a call_id is bounded as every call's (a tool search's).
      if (typeof rest.call_id === 'string') rest.call_id = this.wireCallId(rest.call_id);
      // A generated image (base64 in `result`, hundreds of KB) is an image, not text: kept in the inferred context as
      // its JSON, it counted ~1 token per byte (a 600 KB image: 600,000 input tokens, past any context window).
      if (type === 'image_generation_call' && typeof rest.result === 'string' && rest.result.length > 0) {
        rest.result = `(image, ${rest.result.length} base64 characters in the recording)`;
        this.skip(`the result of ${type} ${typeof p.id === 'string' ? p.id : ''}`.trimEnd(), 'a generated image: counted in the inferred input as a short marker, not as its base64 text');
      }
      this.modelItem(null, rest as InputItem);
    } else {
      const call = typeof p.call_id === 'string' ? this.pending.get(this.wireCallId(p.call_id)) : undefined;
      if (call !== undefined) {
        // An output of a kind this reader does not know (mcp_tool_call_output, ...) answering a client call: skipped,
        // it left the call without output (the file read as truncated, or the call as interrupted, or the replay
        // failed for want of a tool output), so it answers the call, as a function_call_output of its own text.
        const { type: _type, id: _id, call_id: callId, ...rest } = p;
        this.skip(`a ${type} item`, `answers ${call.name} call ${String(callId)} (line ${call.line}): replayed as its function_call_output, the item's text (its \`output\`, as text or JSON; without one, its other fields as JSON)`);
        this.clientOutput(String(callId), rest.output === undefined ? JSON.stringify(rest) : (outputText(rest.output) ?? JSON.stringify(rest.output)), ts);
        return;
      }
      this.skip(`a ${type} item`, 'not part of what the model is sent or says (not replayed)');
    }
  }

  private event(p: Json): void {
    const type = this.str(p, 'type', 'event_msg');
    if (type === 'token_count') this.tokenCount(p);
    else if (type === 'user_message' && typeof p.message === 'string') this.userEvent(p.message, Array.isArray(p.images) ? p.images.filter((i): i is string => typeof i === 'string') : []);
    else if (type === 'turn_aborted') this.turnAborted(typeof p.reason === 'string' ? p.reason : 'unknown');
    // The note said "the history before it is kept", the reverse of what happens (outside attack atk84 I1).
    else if (type === 'thread_rolled_back') this.skip('thread_rolled_back', 'rollbacks are not replayed: the turns it rolled back stay in the replayed history, so later calls are presented a longer context than the recording\'s (its token figures are kept as recorded)');
    else if (type === 'exec_command_end' && typeof p.call_id === 'string' && isJson(p.duration)) {
      const { secs, nanos } = p.duration;
      if (typeof secs === 'number' && typeof nanos === 'number') this.execEndMs.set(this.wireCallId(p.call_id), secs * 1000 + nanos / 1e6);
    }
  }

  private tokenCount(p: Json): void {
    let usage: unknown;
    let total: string | undefined;
    let totalUsage: { input: number; output: number } | null = null;
    if (isJson(p.info)) {
      usage = p.info.last_token_usage;
      const t = p.info.total_token_usage;
      if (isJson(t)) {
        total = JSON.stringify(t);
        // Only whole, non-negative figures: anything else is left alone, as before totals were read (atk51 F4).
        const whole = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
        if (whole(t.input_tokens) && whole(t.output_tokens)) totalUsage = { input: t.input_tokens, output: t.output_tokens };
      }
    } else if (typeof p.input_tokens === 'number') {
      usage = p; // older Codex: the usage fields sit on the payload itself
    }
    if (!isJson(usage)) {
      // A total without the call's own usage: the call's is the difference from the previous total (the total is
      // the sum of each call's usage), exact when both are recorded. Otherwise a rate-limit-only update.
      if (totalUsage === null) return;
      const derived = this.usageFromTotal(totalUsage, total);
      if (derived === null) return;
      usage = derived;
    }
    const { input_tokens: input, output_tokens: output } = usage as Json;
    if (typeof input !== 'number' || typeof output !== 'number') this.fail('token_count without numeric input_tokens / output_tokens');
    const fits = (n: number) => Number.isSafeInteger(n) && n >= 0 && n <= MAX_TOKEN_COUNT;
    if (!fits(input) || !fits(output)) {
      this.fail(`token_count with input_tokens ${input} / output_tokens ${output}: token counts are whole numbers from 0 to ${MAX_TOKEN_COUNT} (10^9, far past any model's context: a sum of larger ones can pass 2^53 and lose exactness)`);
    }
    // The running total as of this event: its own, or the last one plus this usage (an event with no total; left
    // out, the next total-only event's difference spanned two calls, atk51 F3).
    const prevTotal = this.lastTotalUsage;
    this.lastTotalUsage = totalUsage ?? { input: prevTotal.input + input, output: prevTotal.output + output };
    if (total !== undefined && total === this.lastTotal) {
      // `first` order: still the end of a response, one the API sent no usage for (Codex sent its running total
      // again): the calls after it are the next model call's, without figures.
      if (this.order === 'first') {
        this.closeCall();
        this.dropAhead('no model call\'s items follow it before the next usage event (a call whose items were not recorded)');
      }
      return this.skip('token_count', 'repeats the previous total_token_usage');
    }
    this.lastTotal = total;
    this.evidence.see('usage');
    if (this.order === 'first') {
      // The usage of the model call whose items come next; the call under way (its items and outputs) is over.
      this.closeCall();
      this.dropAhead('no model call\'s items follow it before the next usage event (a call whose items were not recorded)');
      if (this.announcedPart !== this.part) {
        this.announcedPart = this.part;
        this.skip(
          'token_count events',
          "come before their model call's items, as Codex versions that recorded a response's items once it completed wrote them: each is read as the usage of the model call after it, and the calls and outputs up to the next one as that call's (parallel) calls",
          false,
        );
      }
      this.ahead = { input, output, line: this.line };
      return;
    }
    const target = this.open ?? this.last;
    if (target === null || target.usage !== null) return this.skip('token_count', 'no model call to attribute it to (e.g. a compaction request)');
    this.attribute(target, { input, output });
    this.closeCall();
    this.last = null;
    // Recorded after the next user message (the user steered while the model finished): the user turn that call
    // ended is built again with it, rather than its figures left inferred with the usage counted as recorded.
    const ended = this.ended;
    if (ended !== null && ended.build.calls.includes(target)) {
      const built = buildUserTurn(ended.build)!;
      this.turns[ended.index] = built.turn;
      built.figures.forEach((f, i) => (this.figures[ended.figuresFrom + i] = f));
    }
  }

  /**
   * The usage of an event that has `total_token_usage` but no `last_token_usage`: its total less the running total
   * before it (`lastTotalUsage`, from 0: the file's first total is its call's own); null (noted) when a total went
   * down (a reset: nothing to subtract).
   */
  private usageFromTotal(t: { input: number; output: number }, total: string | undefined): Json | null {
    const prev = this.lastTotalUsage;
    // The same total again is a repeat (`tokenCount` skips it, and in the 2025 order it still ends a response).
    if (total !== undefined && total === this.lastTotal) return { input_tokens: 0, output_tokens: 0 };
    if (t.input < prev.input || t.output < prev.output) {
      this.lastTotalUsage = t;
      // The same total again after it is still a repeat (atk51 F2: it was read as a call of 0 / 0, recorded).
      this.lastTotal = total;
      this.skip('token_count', 'has no last_token_usage and its total_token_usage is below the previous one: no usage derived', true);
      return null;
    }
    if (!this.totalsNoted) {
      this.totalsNoted = true;
      this.skip('token_count events', "have no last_token_usage: each call's usage is its total_token_usage less the previous one", false);
    }
    return { input_tokens: t.input - prev.input, output_tokens: t.output - prev.output };
  }

  private attribute(call: RawCall, usage: { input: number; output: number }): void {
    call.usage = usage;
    this.recorded.model_calls++;
    this.recorded.input_tokens.push(usage.input);
    this.recorded.output_tokens.push(usage.output);
  }

  /** `first` order: a usage event no model call's items followed, noted at its line. */
  private dropAhead(why: string): void {
    if (this.ahead === null) return;
    this.skip('token_count', why, true, this.ahead.line);
    this.ahead = null;
  }

  /** An assistant-side item: `visible` is replayed, `ctxItem` joins the context, `reasoning` its tokens. */
  private modelItem(visible: Visible | null, ctxItem: InputItem, reasoning = 0): void {
    if (this.turn === null) {
      this.skip('model output', 'comes before any user input: the replay sends a placeholder user message');
      this.clientMessage({ type: 'message', role: 'user', content: PLACEHOLDER_INPUT }, false);
    }
    if (this.pendingReplace !== null) {
      // The compaction's own note said the replay continues from the replacement: not so inside a user turn.
      if (this.pendingReplace.note) this.pendingReplace.note.why = 'the history is replaced inside a user turn: the replay keeps the full history (inferred input tokens follow the compaction)';
      this.skip(`compaction at line ${this.pendingReplace.line}`, 'inside a user turn: the replay keeps the full history (inferred input tokens follow the compaction)');
      this.pendingReplace = null;
    }
    this.evidence.see('model');
    if (this.open === null) {
      this.open = { line: this.line, visible: [], reasoning: 0, usage: null, mark: this.ctx.length };
      this.turn!.calls.push(this.open);
      this.last = null; // a usage event from now on belongs to this call
      if (this.ahead !== null) {
        this.attribute(this.open, this.ahead);
        this.ahead = null;
      }
    }
    if (visible) {
      this.open.visible.push(visible);
      // JSON can spell half a UTF-16 pair (`\ud83d`); a model speaks tokens of UTF-8 bytes, which cannot (atk46 F6).
      if (!isUnicodeText(visible.type === 'message' ? visible.text : visible.arguments)) this.skip('model output', LONE_SURROGATE_NOTE);
      if (visible.type !== 'message' && !isUnicodeText(visible.name)) this.skip("a call's name", LONE_SURROGATE_NAME_NOTE);
    }
    this.open.reasoning += reasoning;
    this.ctx.push({ kind: 'add', item: ctxItem });
  }

  /**
   * Calls of the user turn under way that never got an output, though the model called again after them in the same
   * user turn (a stream that failed after the call and was retried, a tool that never answered, a turn_aborted the
   * model went on after without a new user message): Codex sends each such call the output "aborted" right after it
   * (normalize.rs `ensure_call_outputs_present`), so the replay answers it so, noted. Decided when the user turn (or
   * the file) ends, not when the next call begins: an output recorded late is still the call's. Before, the file was
   * refused at the call as truncated ("the file ends before it") though it went on; after a turn_aborted it was read,
   * and the bench's server refused the copy it was handed (workload-grid.json: "call c1 has no entry in toolOutputs").
   */
  private answerLeftOpen(): void {
    const calls = this.turn?.calls;
    if (calls === undefined || this.pending.size === 0) return;
    const lastShown = calls.findLastIndex((c) => c.visible.length > 0);
    let aborted = 0;
    for (const [callId, call] of this.pending) {
      const at = calls.indexOf(call.raw);
      if (at < 0 || at >= lastShown) continue; // its model call is the user turn's last: interrupted, as before
      const next = calls.slice(at + 1).find((c) => c.visible.length > 0)!;
      this.pending.delete(callId);
      this.answered.set(callId, { output: ABORTED, callTs: undefined, ts: undefined, callLine: call.line, line: next.line });
      this.ctx.push({ kind: 'add', item: { type: 'function_call_output', call_id: callId, output: ABORTED } });
      if (call.aborted) aborted++;
      else this.skip(`${call.name} call ${callId} (line ${call.line}; the model called again at line ${next.line})`, `has no output, yet the model called again in its user turn: answered "${ABORTED}", as Codex sends a call without output`, true, next.line);
    }
    // A turn_aborted whose calls are answered so, not by a next user turn: the model called again without one.
    if (aborted > 0 && this.abortNote !== null) {
      this.abortNote.note.why = `${this.abortNote.why} with ${this.abortNote.n} call(s) left without output: the model called again with no new user message, and Codex sent them "${ABORTED}" there`;
      this.abortNote = null;
    }
  }

  /**
   * The id a recorded call is replayed under: as recorded, or, past the API's 64 characters (`CALL_ID_MAX_CHARS`: the
   * server refuses a longer one when the client sends the call or its output back, as the API does), a deterministic
   * `call_` and 43 characters of its SHA-256, the same for the call and its outputs (noted). Empty stays empty (refused
   * at the call).
   */
  private wireCallId(raw: string): string {
    const id = replayCallId(raw);
    if (id === raw) return raw;
    if (!this.longCallIds.has(raw)) {
      this.longCallIds.add(raw);
      this.skip(`call_id ${raw.slice(0, 80)}…`, `longer than the API's ${CALL_ID_MAX_CHARS} characters (it refuses such an id sent back): replayed as ${id}, for the call and its output`);
    }
    return id;
  }

  /**
   * A call of a tool the agent declared inside a `namespace` tool (Codex's sub-agent tools, `multi_agent_v2`: the API
   * names it on the call, openai-node's `ResponseFunctionToolCall.namespace`) is replayed as a plain call of that name:
   * a client that declares the tool in its namespace answers it "unsupported call", and the run goes on past the
   * delegation it recorded. It was read without a word (outside attack atk117 F6): noted.
   */
  private namespaced(p: Json): void {
    if (typeof p.namespace !== 'string' || p.namespace === '') return;
    this.skip(
      `a call in the namespace ${JSON.stringify(p.namespace.slice(0, 100))}`,
      "replayed without its namespace, as a plain call of its name: a client that declares the tool inside that namespace (Codex's sub-agent tools, multi_agent_v2) answers it \"unsupported call\", so what the call did (a sub-agent's run) is not replayed",
    );
  }

  private clientCall(recordedId: string, name: string, args: string, ts: number | undefined, custom: boolean): void {
    // What the replay server accepts (docs/workload.schema.json): refused here, at its line, not in the bench's server.
    if (recordedId === '') this.fail('a call with an empty call_id');
    const callId = this.wireCallId(recordedId);
    // A name no tool may have (a model's own invention, such as `multi_tool_use.parallel`, which Codex answers
    // "unsupported call") is replayed as recorded: the API streams the call and takes it back as input; only a tool
    // definition needs the pattern, so the call's name is left out of the inferred tools (noted).
    // Characters as the neutral format's schema counts them (code points).
    const chars = [...name].length;
    if (chars === 0 || chars > MAX_CALL_NAME) this.fail(`a call whose name is ${chars === 0 ? 'empty' : `${chars} characters long`}: names are 1 to ${MAX_CALL_NAME} characters`);
    if (!TOOL_NAME.test(name)) {
      this.skip(`the tool name ${JSON.stringify(name)}`, `no tool may have it (${TOOL_NAME.source}): its calls are replayed as recorded, and it is left out of the tools the replay declares (Codex answers such a call "unsupported call")`);
    }
    // The first use's line. A copy of the history (openai/codex#29531) never reaches here (repeats.ts): this is another
    // call under a used id.
    const first = this.pending.get(callId)?.line ?? this.answered.get(callId)?.callLine ?? this.abortedIds.get(callId);
    // Named as recorded: a long one's replayed id is nowhere in the file (outside attack atk59).
    if (first !== undefined) {
      const why = this.partHint !== null && first < this.partLine ? `: ${this.partHint}` : '';
      this.fail(`call_id ${recordedId}${callId === recordedId ? '' : ` (replayed as ${callId})`} is used twice (first by the call at line ${first})${why}`);
    }
    // Arguments that are not JSON (models do emit them) are replayed as recorded: the server takes them back as the API
    // does. They were rewritten as a JSON string of the recorded text, when the server refused them (atk65 F2).
    this.schemas.note(name, args, custom);
    // Past the API's bound the http designs' next request is refused: said at the call's line (it was said only of the
    // converted workload, whose pointer no file holds: outside attack atk66 F5).
    if (longerThan(args, ARGUMENTS_MAX_CHARS)) {
      this.fail(
        `${name} call ${recordedId}: its arguments${custom ? ' (its input as the replay sends it, {"input": …})' : ''} are ${codePoints(args)} characters, past the ${ARGUMENTS_MAX_CHARS} the API takes back as input (the http designs send every call back): not replayable`,
      );
    }
    this.modelItem({ type: 'function_call', name, arguments: args, call_id: callId }, { type: 'function_call', name, arguments: args, call_id: callId });
    this.pending.set(callId, { line: this.line, name, ts, aborted: false, raw: this.open! });
    if (custom) this.stats.custom_tool_calls++;
    else this.stats.function_calls++;
  }

  /** A built-in client tool's output's text (`builtinOutputText`), a screenshot noted as the marker it becomes. */
  private builtinOutput(type: string, p: Json): string {
    const { text, image } = builtinOutputText(p);
    if (image !== null) this.skip(`the ${image} of ${type} ${String(p.call_id)}`, 'an image: replayed as a marker naming it, its data not sent (tool outputs in the neutral format are text)');
    return text;
  }

  private clientOutput(recordedId: string, output: string, ts: number | undefined): void {
    this.evidence.see('output');
    const callId = this.wireCallId(recordedId);
    const call = this.pending.get(callId);
    if (!call) {
      // Not replayed, and it changes nothing read so far (the model call under way stays open): the API refuses an
      // output for a call the conversation does not hold, and a call takes one output. Refused before, the whole
      // file was lost to one stray record (a history that begins mid-conversation, a tool that answered twice).
      const aborted = this.abortedIds.get(callId);
      const had = this.answered.get(callId);
      this.skip(
        `an output for call_id ${callId}`,
        aborted !== undefined
          ? `comes after a new user turn began, which answered the call (line ${aborted}) "${ABORTED}" as Codex does: not replayed`
          : had !== undefined
            ? `the call (line ${had.callLine}) already has its output (line ${had.line}): this second one is not replayed`
            : 'answers no call recorded before it (the API refuses an output for a call the conversation does not hold): not replayed',
      );
      return;
    }
    if (longerThan(output, TEXT_MAX_CHARS)) {
      this.fail(`the output for call_id ${recordedId} is ${codePoints(output)} characters, past the ${TEXT_MAX_CHARS} the API takes as a tool's output: not replayable`);
    }
    // `first` order: a call's output was recorded right after it, before the same response's next call.
    if (this.order === 'after') this.closeCall();
    this.pending.delete(callId);
    // A call the abort left without output got it after all, later in the file (replayed with it): the abort's note
    // counts it no more. It said "the file ends there, so no user turn answers them" of such a call (atk68 F5).
    if (call.aborted && this.abortNote !== null) {
      const note = this.abortNote;
      note.n--;
      note.late = (note.late ?? 0) + 1;
      if (note.n === 0) {
        note.note.why = `${note.why}: its ${note.late} call(s) left without output got it later in the file (the last at line ${this.line}), replayed with it`;
        this.abortNote = null;
      } else {
        note.note.why = `${note.why} with ${note.n} call(s) left without output (${note.late} more got theirs later in the file): Codex answers them "${ABORTED}" at the start of the next user turn`;
      }
    }
    this.answered.set(callId, { output, callTs: call.ts, ts, callLine: call.line, line: this.line });
    this.stats.tool_output_bytes += Buffer.byteLength(output, 'utf8');
    this.ctx.push({ kind: 'add', item: { type: 'function_call_output', call_id: callId, output } });
  }

  private clientMessage(msg: InputMessage, fromEvent: boolean): void {
    this.evidence.see('input');
    this.closeCall();
    this.dropAhead('a user turn starts before any model call\'s items follow it (a call whose items were not recorded)');
    if (this.turn === null || this.turn.calls.some((c) => c.visible.length > 0)) this.startTurn();
    const turn = this.turn!;
    const text = messageText(msg.content);
    if (msg.role === 'user') {
      this.userMessages.push(text);
      if (!fromEvent) {
        // The event for this message may have come first: the response item replaces it.
        const i = turn.fromEvents.findIndex((e) => sameUserText(text, e.text));
        if (i >= 0) {
          const [ev] = turn.fromEvents.splice(i, 1);
          turn.input[ev!.index] = msg;
          this.userMessages.pop();
          this.replaceCtxMessage(ev!.text, msg);
          return;
        }
        turn.userTexts.push(text);
      } else {
        turn.fromEvents.push({ index: turn.input.length, text });
      }
    }
    turn.input.push(msg);
    this.ctx.push({ kind: 'add', item: msg });
  }

  /**
   * `event_msg` `user_message`: the user's message unless the turn already has it as a response item. Its `images`
   * (data URLs or URLs the user attached) are its `input_image` parts: a rollout holding the turn only as this event
   * (the desktop app) lost them before, so the replay sent the text alone and inferred no tokens for the images.
   */
  private userEvent(message: string, images: string[] = []): void {
    const turn = this.turn;
    const fresh = turn === null || turn.calls.some((c) => c.visible.length > 0) || this.open !== null;
    if (!fresh) {
      const i = turn.userTexts.findIndex((t) => sameUserText(t, message));
      if (i >= 0) {
        turn.userTexts.splice(i, 1);
        return;
      }
    }
    const parts: InputMessage['content'] = [{ type: 'input_text', text: message }];
    for (const url of images) parts.push({ type: 'input_image', image_url: url });
    this.clientMessage({ type: 'message', role: 'user', content: parts }, true);
  }

  private replaceCtxMessage(text: string, msg: InputMessage): void {
    for (let i = this.ctx.length - 1; i >= 0; i--) {
      const op = this.ctx[i]!;
      if (op.kind === 'add' && op.item.type === 'message' && messageText((op.item as InputMessage).content) === text) {
        this.ctx[i] = { kind: 'add', item: msg };
        return;
      }
    }
  }

  private turnAborted(reason: string): void {
    this.evidence.see('other');
    this.closeCall();
    this.dropAhead('the user turn was aborted before the model call\'s items were recorded');
    this.last = null;
    let n = 0;
    for (const call of this.pending.values()) {
      if (!call.aborted) n++;
      call.aborted = true;
    }
    if (this.turn !== null) this.turn.abortedAt = this.turn.calls.length;
    // Worded as the note on the calls ending the user turn is (endTurn): both say the calls were left without output.
    const why = `the user turn was aborted (${reason})`;
    this.skip('turn_aborted', n ? `${why} with ${n} call(s) left without output: Codex answers them "aborted" at the start of the next user turn` : why, n === 0);
    if (n) this.abortNote = { note: this.skipped.at(-1)!, n, why };
  }

  private compacted(p: Json): void {
    this.evidence.see('compaction');
    // Codex's CompactedItem: `message` text, `replacement_history` a list of items or none. Another shape was read as a
    // compaction without a replacement history: the replay went on from another history than the recorded one.
    const history = p.replacement_history;
    if (history !== undefined && history !== null && !Array.isArray(history)) this.fail(`compacted record whose \`replacement_history\` is ${describe(history)}, not a list of items`);
    if (p.message !== undefined && typeof p.message !== 'string') this.fail(`compacted record whose \`message\` is ${describe(p.message)}, not text`);
    if (Array.isArray(p.replacement_history)) {
      const { items, dropped, aborted } = replacementItems(p.replacement_history);
      if (dropped > 0) this.skip(`${dropped} item(s) of the replacement history`, 'reasoning, hosted calls, outputs of calls the history does not hold, or unknown items: not sent as input text');
      if (aborted > 0) this.skip(`${aborted} call(s) of the replacement history`, 'without an output in it: answered "aborted" right after, as Codex does');
      this.compaction(items, 'a compacted record');
      return;
    }
    const summary = typeof p.message === 'string' ? p.message : '';
    // As Codex builds it (compact.rs collect_user_messages): the user's messages, not the context Codex injected as
    // user messages (`<user_instructions>`, `<environment_context>`, AGENTS.md), which it sends again on its own.
    const items: InputItem[] = this.userMessages.filter((t) => !SESSION_PREFIX.test(t)).map((t) => ({ type: 'message', role: 'user', content: t }));
    items.push({ type: 'message', role: 'user', content: summary });
    this.compaction(items, 'a compacted record without replacement_history');
  }

  /** The recorded agent's history is now `items`. */
  private compaction(items: InputItem[], what: string): void {
    this.newConversation(items);
    this.skip(what, 'the history is replaced: the replay continues from the replacement', this.pendingReplace === null);
    if (this.pendingReplace !== null) this.pendingReplace.note = this.skipped.at(-1)!;
  }

  /** The context is now `items`: the user turn under way, if it has no model call yet, or else the next, starts from it. */
  private newConversation(items: InputItem[]): void {
    this.evidence.see('other');
    this.closeCall();
    this.dropAhead('the history is replaced next, with no model call\'s items after it (e.g. a compaction request\'s usage)');
    this.last = null;
    this.ctx.push({ kind: 'replace', items });
    const turn = this.turn;
    if (turn === null || turn.calls.length === 0) {
      if (turn === null) this.startTurn();
      this.turn!.replace = true;
      this.turn!.input = items.slice();
      this.turn!.fromEvents = [];
      this.turn!.userTexts = [];
    } else {
      this.pendingReplace = { items, line: this.line };
    }
  }

  private startTurn(): void {
    this.answerLeftOpen();
    if (this.turn !== null) this.endTurn(this.turn, false);
    const input: InputItem[] = [];
    const replace = this.pendingReplace !== null;
    if (this.pendingReplace !== null) {
      // A new conversation: the interrupted calls are not in it, so neither are their answers.
      for (const item of this.pendingReplace.items) input.push(item); // not push(...): a spread of 130k+ items overflows the stack
      this.pendingReplace = null;
    }
    for (const [callId, call] of this.pending) {
      const answer: InputItem = { type: 'function_call_output', call_id: callId, output: 'aborted' };
      if (!replace) {
        input.push(answer);
        this.ctx.push({ kind: 'add', item: answer });
      }
      this.abortedIds.set(callId, call.line);
    }
    this.pending.clear();
    if (replace && this.abortNote !== null) this.abortNote.note.why = `${this.abortNote.why} with ${this.abortNote.n} call(s) left without output: the next user turn starts a new conversation (compaction) without them`;
    this.abortNote = null;
    this.turn = { input, calls: [], replace, fromEvents: [], userTexts: [] };
  }

  /** Emit the user turn, calls with nothing visible merged into their neighbours. */
  private endTurn(turn: TurnBuild, last: boolean): void {
    const built = buildUserTurn(turn);
    if (built === null) {
      this.skip(`a user turn at line ${turn.calls[0]?.line ?? this.line}`, 'no model call with visible output answers it: not replayed');
      return;
    }
    this.turns.push(built.turn);
    const final = built.turn.modelTurns.at(-1)!.output;
    if (final.length === 1 && final[0]!.type === 'message' && final[0]!.text === NOTHING_SHOWN_TEXT) {
      this.skip(
        `the model call ending user turn ${this.turns.length} (line ${built.figures.at(-1)!.line})`,
        `showed nothing after its tool calls were answered (only reasoning, or an empty message): replayed as a call whose text is "${NOTHING_SHOWN_TEXT}", which ends the turn, its tokens decoded as recorded`,
        false,
      );
    }
    this.ended = { build: turn, index: this.turns.length - 1, figuresFrom: this.figures.length };
    for (const f of built.figures) this.figures.push(f); // not push(...): a user turn of 130k+ calls would overflow the stack
    // A user turn ending in tool calls is replayed ending at that call's text (or a marker), without the calls and
    // their outputs (replayable.ts): said here, so inspect and the bench's report show it. Answered calls end a turn
    // when a user message came before the model's next call (Codex lets the user steer a turn under way).
    const open = built.turn.modelTurns.at(-1)!.output.flatMap((o) => (o.type === 'function_call' ? [o.call_id] : []));
    if (open.length > 0) {
      const answered = open.filter((id) => this.answered.has(id)).length;
      this.skipped.push({
        line: built.figures.at(-1)!.line,
        what: `${open.length} call(s) ending user turn ${this.turns.length}`,
        why:
          answered > 0
            ? // Aborted with no call since (the user interrupted the model's next call), else a user message steered the turn.
              `${answered} answered, but ${turn.abortedAt === turn.calls.length ? "the user turn was aborted (turn_aborted) before the model's next call" : "a message (the user's, or a developer or system message) came before the model's next call"}: the replay ends the user turn there, with the call's text or a marker instead of the calls and their outputs`
            : // Interrupted: as the turn_aborted note says, left without output (Codex answers them "aborted" next turn).
              `left without output: ${turn.abortedAt === turn.calls.length ? 'the user turn was aborted (turn_aborted)' : 'a user message came first (interrupted)'}; the replay ends the user turn with the call's text or a marker instead of the calls${last ? '' : ' and their "aborted" answers'}`,
      });
    }
  }

  private closeCall(): void {
    if (this.open === null) return;
    this.last = this.open.usage === null ? this.open : null;
    this.open = null;
  }

  private finish(source: string): Workload {
    this.closeCall();
    this.dropAhead('the file ends before any model call\'s items follow it');
    this.answerLeftOpen();
    for (const [callId, call] of this.pending) {
      if (!call.aborted) this.fail(`${call.name} call ${callId} has no output: the file ends before it (truncated)`, call.line);
    }
    // The file ends after the abort: no user turn answers its calls.
    if (this.abortNote !== null) this.abortNote.note.why = `${this.abortNote.why} with ${this.abortNote.n} call(s) left without output: the file ends there, so no user turn answers them`;
    if (this.turn !== null) {
      if (this.turn.calls.length > 0) this.endTurn(this.turn, true);
      else this.skip('the last user turn', 'the file ends before any model output answers it: not replayed');
    }
    if (this.turns.length === 0) this.fail('no model call with visible output: not a replayable Codex rollout', 0);
    const tools = this.schemas.tools();
    const need = this.figures.filter((f) => f.input_tokens === null);
    const inferred = need.length ? inferInputTokens(this.instructions, tools, this.ctx, need.map((f) => f.mark)) : [];
    need.forEach((f, i) => (f.input_tokens = inferred[i]!));
    // Each token_count is at most MAX_TOKEN_COUNT, but a call with nothing visible gives its output tokens to the next
    // one: the sum is checked too, here at its line, not by the bench's server process reading the neutral copy.
    for (const f of this.figures) {
      if (f.output_tokens > MAX_TOKEN_COUNT || f.input_tokens! > MAX_TOKEN_COUNT) {
        this.fail(`this model call decodes ${f.output_tokens} output tokens from ${f.input_tokens} input tokens (with the calls before it that showed nothing, merged into it): token figures are at most ${MAX_TOKEN_COUNT} (10^9)`, f.line);
      }
    }
    // Built as own properties: an assignment to toolOutputs['__proto__'] would set the prototype instead.
    const toolOutputs: Workload['toolOutputs'] = Object.fromEntries([...this.answered].map(([callId, a]) => [callId, { output: a.output, duration_ms: this.toolMs(callId, a) }]));
    return {
      name: this.name,
      source,
      instructions: this.instructions,
      tools,
      userTurns: this.turns,
      toolOutputs,
      recorded: this.recorded,
      calls: this.figures.map(({ mark: _mark, ...f }) => ({ ...f, input_tokens: f.input_tokens! })),
      origin: this.origin,
      skipped: this.skipped,
      stats: this.stats,
    };
  }

  /**
   * A call's tool time: from its record's timestamp to its output's, else `exec_command_end`'s duration, else 0; as
   * replays wait it (types.ts `toolWaitMs`): a clock that went backwards between the two records counts 0, one that
   * leapt forward past MAX_TOOL_MS counts MAX_TOOL_MS, each noted at the output's line.
   */
  private toolMs(callId: string, a: { callTs: number | undefined; ts: number | undefined; callLine: number; line: number }): number {
    const gap = a.callTs !== undefined && a.ts !== undefined ? a.ts - a.callTs : undefined;
    const ms = gap ?? this.execEndMs.get(callId) ?? 0;
    // The specifics in `what`, one `why` per rule: a rollout whose clock jumps at every call folds into one note per rule.
    const what = `the tool time of call ${callId}: ${Math.round(ms)} ms ${gap !== undefined ? `from its call's record (line ${a.callLine}) to its output's` : 'by its exec_command_end duration'}`;
    if (ms < 0 || Number.isNaN(ms)) this.skip(what, 'negative: the clock went backwards between the records; the tool counts 0 ms', true, a.line);
    else if (ms > MAX_TOOL_MS) this.skip(what, `past MAX_TOOL_MS (${MAX_TOOL_MS} ms): the clock leapt forward between the records, or the agent sat idle; the tool counts ${MAX_TOOL_MS} ms`, true, a.line);
    return Math.round(toolWaitMs(ms));
  }

  /**
   * Note a record read but not replayed as recorded. A note that repeats (the same what and why) is kept
   * SKIPPED_KEPT times and counted after, in its last kept entry's `more`: 19 million unknown records held 4.2 GB
   * while read, and their notes made a neutral file (`llr workload convert`, the bench's) larger than the reader takes.
   * Notes of one reason are kept SKIPPED_KEPT_PER_WHY times whatever they name; the later ones of new names go into
   * one note saying so, counted in its `more`.
   * `fold: false` for a note changed later (it must stay its own).
   */
  private skip(what: string, why: string, fold = true, line = this.line): void {
    const entry: Skipped = { line, what, why };
    if (fold) {
      const key = `${what}\u0000${why}`;
      const seen = this.folds.get(key);
      if (seen !== undefined && seen.kept >= SKIPPED_KEPT) {
        seen.last.more = (seen.last.more ?? 0) + 1;
        return;
      }
      // Past the reason's cap, a note of a new `what` goes into one note of its own saying so, counted there (its key
      // not kept: the map stays bounded as well).
      const reason = this.whys.get(why);
      if (seen === undefined && reason !== undefined && reason.kept >= SKIPPED_KEPT_PER_WHY) {
        if (reason.past !== undefined) reason.past.more = (reason.past.more ?? 0) + 1;
        else this.skipped.push((reason.past = { line: this.line, what: `notes of this reason past its first ${SKIPPED_KEPT_PER_WHY}, each naming its own record`, why }));
        return;
      }
      if (seen === undefined) this.folds.set(key, { kept: 1, last: entry });
      else (seen.kept++, (seen.last = entry));
      if (reason === undefined) this.whys.set(why, { kept: 1 });
      else reason.kept++;
    }
    this.skipped.push(entry);
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


type UsageOrder = 'after' | 'first';

/**
 * Where a rollout's usage events stand, counted as the records go by, for each part of the file (a part starts at
 * each `session_meta`: a session resumed by another Codex version may write the other order). `after` (Codex today):
 * a model call's `token_count` follows its items, sometimes its tool outputs too. `first` (Codex versions of 2025,
 * which recorded a response's items once it had completed): each response's `token_count` comes before its items.
 * The sign that tells them apart is the part's first usage event: in `first` order it stands between the user's
 * input and the model's first items (no model item before it in the part); in today's order the first model call's
 * items come before it. A usage event recorded late, after the next user message (the user steered while the model
 * finished), looks the same but never comes first: the turn before it had model items. A compaction's usage (no
 * items of its own) is no sign. Read `first` when that first sign says so and the part has no more usage events
 * right after a model call's items (which `first` order writes only where a call's output was never recorded) than
 * usage events between the user's input and the model's items; or when the part has none right after a model
 * call's items and some between input and items (a 2025 file whose first response had no usage event: its first
 * usage event follows that response's tool output, which says neither).
 */
class OrderEvidence {
  private parts: Array<{ start: boolean | null; after: number; first: number }> = [];
  private prev: 'model' | 'input' | 'output' | 'usage' | 'compaction' | 'other' | null = null;
  /** The usage event just seen came right after the user's input: it is a sign of `first` if the model's items come next. */
  private waiting = false;
  /** The part has had a model item. */
  private modelSeen = false;

  /** A `session_meta` has been read: the next one starts a part (records before the first belong to the first part). */
  private metaSeen = false;

  newPart(): void {
    if (!this.metaSeen) {
      this.metaSeen = true;
      if (this.parts.length > 0) return;
    }
    this.parts.push({ start: null, after: 0, first: 0 });
    this.prev = null;
    this.waiting = false;
    this.modelSeen = false;
  }

  see(kind: 'model' | 'input' | 'output' | 'usage' | 'compaction' | 'other'): void {
    if (this.parts.length === 0) this.parts.push({ start: null, after: 0, first: 0 });
    const part = this.parts[this.parts.length - 1]!;
    if (kind === 'usage') {
      if (this.prev === 'model') part.after++;
      // The part's first usage event after model items: today's order.
      if (part.start === null && this.modelSeen) part.start = false;
      this.waiting = this.prev === 'input';
    } else {
      if (kind === 'model') {
        if (this.waiting) {
          part.first++;
          if (part.start === null) part.start = true;
        }
        this.modelSeen = true;
      }
      this.waiting = false;
    }
    this.prev = kind;
  }

  /** Each part's order, in file order. */
  orders(): UsageOrder[] {
    // Or no usage event right after a model call's items at all, and some between input and items: the 2025 order
    // whose first response had no usage event (its first usage event then follows that response's output).
    return this.parts.map((p) => ((p.start === true && p.first >= p.after) || (p.after === 0 && p.first > 0) ? 'first' : 'after'));
  }
}
