/**
 * Making a Workload replayable, and walking its model calls. Every user turn
 * must end in a model call with no function calls (so each design's agent
 * loop stops where the recording did), and a user turn that starts a new
 * conversation (`replace_history`) must let the replaying model find its
 * place: the simulated model's replay policy locates itself by the call_ids
 * and assistant texts in the context, which a compacted context no longer
 * holds, so such a turn's input starts with the previous user turn's final
 * answer (an assistant message: the anchor).
 *
 * Used by `llr serve --workload` (load.ts) and the bench. Leaves out cutting a
 * workload short and per-run nonces (bench/workload-prep.ts).
 */
import { replayPlacement, visibleTokens } from '../model/policies.js';
import type { ReplayTurn } from '../model/types.js';
import type { InputItem } from '../protocol/objects.js';
import type { Footprint } from './fit.js';
import { WorkloadError, type Skipped, type Workload } from './types.js';

/**
 * What a user turn that ends in tool calls answers in their place. Said of every such turn: its calls got no answer
 * (the run stopped), or got one the model never read, a user message coming first (a steer). It said "never got an
 * answer" of both, and a real client showed that as the model's answer after a steer (outside attack atk114 F1).
 */
const INTERRUPTED_TEXT = '(interrupted: the recorded turn ended in tool calls that the model did not go on from)';

/** Every model call of the workload, in replay order. */
export function flatModelTurns(w: Workload): ReplayTurn[] {
  return w.userTurns.flatMap((u) => u.modelTurns);
}

export function modelCallCount(w: Workload): number {
  return w.userTurns.reduce((n, u) => n + u.modelTurns.length, 0);
}

/** The function calls of one model call, in order. */
export function callsOf(turn: ReplayTurn): Array<{ name: string; arguments: string; call_id: string }> {
  return turn.output.flatMap((o) => (o.type === 'function_call' ? [o] : []));
}

/**
 * Make every user turn end with a model call that has no function calls.
 * A recorded turn that ended in calls (the user interrupted the agent) keeps
 * its visible text; its unanswered calls are dropped, and so are the
 * `"aborted"` outputs the next user turn started with for them. A
 * `replace_history` turn gets its anchor. Returns a copy; a workload that is
 * already replayable comes back deep-equal.
 */
export function replayable(w: Workload): Workload {
  const dropped = new Set<string>();
  const ended = w.userTurns.map((u) => {
    const input = u.input.filter((item) => !(item.type === 'function_call_output' && dropped.has(callIdOf(item))));
    const modelTurns = u.modelTurns.map((t) => ({ ...t, output: t.output.map((o) => ({ ...o })) }));
    const last = modelTurns.at(-1);
    if (last && callsOf(last).length > 0) {
      for (const c of callsOf(last)) dropped.add(c.call_id);
      last.output = last.output.filter((o) => o.type !== 'function_call');
      if (last.output.length === 0) last.output.push({ type: 'message', text: INTERRUPTED_TEXT });
    }
    return { ...u, input, modelTurns };
  });
  // Where the replay model places each new conversation (as the server will): its anchor must place it at its
  // user turn's first model call.
  const flat = ended.flatMap((u) => u.modelTurns);
  const placement = replayPlacement(flat);
  // Each call's first flat output index: a conversation is placed right when it has reached the last output of the
  // call before its first (texts that follow are placed from there: "Done." said twice in one call is not skipped).
  const starts: number[] = [0];
  for (const t of flat) starts.push(starts.at(-1)! + t.output.length);
  const place = (items: readonly InputItem[]): number => {
    const { call, at } = placement(items);
    return at === starts[call]! - 1 ? call : -1;
  };
  const total = flat.length;
  refuseRecordedNotes(ended, total, w.calls);
  let previous: string | null = null;
  let first = 0;
  const skipped = w.skipped ? [...w.skipped] : [];
  const userTurns = ended.map((u, ui) => {
    let input = u.input;
    if (u.replace_history && previous !== null) input = anchored(withoutAnchor(input, previous), previous, first, total, place);
    if (u.replace_history && place(input) !== first) {
      // Assistant texts the replacement kept that the model says again later (a file that begins from a compacted
      // history: a resumed or forked session's) place the conversation past its first call, and the model never moves
      // back: they are left out of the replayed input, the anchor (if any) kept.
      const own = (i: InputItem) => i.type === 'message' && 'role' in i && i.role === 'assistant' && !(previous !== null && isAnchor(i, previous, true));
      const kept = input.filter((i) => !own(i));
      if (place(kept) === first) {
        skipped.push({ line: 0, what: `${input.length - kept.length} assistant message(s) of user turn ${ui + 1}'s input`, why: "their text is the model's at a later call, where the replay model would place the new conversation (it never moves back): left out of the replayed input" });
        input = kept;
      }
    }
    first += u.modelTurns.length;
    const answer = u.modelTurns.at(-1)?.output.findLast((o) => o.type === 'message');
    previous = answer?.type === 'message' ? answer.text : null;
    return { ...u, input };
  });
  noteRaisedOutputs(flat, w.calls, skipped);
  const toolOutputs = Object.fromEntries(Object.entries(w.toolOutputs).filter(([id]) => !dropped.has(id)));
  return { ...w, userTurns, toolOutputs, ...(skipped.length > 0 && { skipped }) };
}

/** Of a note that repeats, the entries kept (each naming its line); later ones are counted in the last one's `more`. */
const RAISED_KEPT = 6;

/**
 * A note for each model call whose recorded `output_tokens` is below what its output shows (its texts and arguments,
 * tokenized as the model decodes them): the replay decodes at least those, so the call decodes more than recorded. It
 * was raised without a word, and `llr workload inspect` showed the recorded figure as what would be decoded (outside
 * attack atk99 F2). The bundled session's `apply_patch` call is one (its input, wrapped as a function call's
 * arguments, takes 119 tokens where 113 were recorded).
 */
function noteRaisedOutputs(flat: readonly ReplayTurn[], calls: Workload['calls'], skipped: Skipped[]): void {
  let past: Skipped | null = null;
  let n = 0;
  for (const [g, t] of flat.entries()) {
    if (t.output_tokens === undefined) continue;
    const shown = visibleTokens(t.output);
    if (shown <= t.output_tokens) continue;
    // Past the first few, counted in one note of their own: counted in the last kept call's note, they were read as
    // repeats of that call, its line and figures (outside attacks atk114 F2, atk117 F4).
    if (n++ >= RAISED_KEPT) {
      if (past !== null) past.more = (past.more ?? 0) + 1;
      else {
        skipped.push(
          (past = { line: 0, what: `model calls past the first ${RAISED_KEPT} whose output_tokens are below what their output shows`, why: 'each decodes what its output shows, as the ones above' }),
        );
      }
      continue;
    }
    const note: Skipped = { line: calls?.[g]?.line ?? 0, what: `model call ${g + 1}'s output_tokens ${t.output_tokens}`, why: `below the ${shown} tokens its output shows: the replay decodes ${shown}` };
    // A workload made replayable already (a converted file read back) has its notes: `replayable` leaves it as it is.
    if (n === 1 && skipped.some((s) => s.what === note.what && s.why === note.why)) return;
    skipped.push(note);
  }
}

/**
 * A new conversation's input with its anchor: the previous user turn's final answer (`text`), an assistant message
 * the replay model places at the first recorded output with that text (the conversation holds no earlier call ids).
 * First in the input, as it always was, when that places the conversation at its user turn's first model call
 * (`call`). Else the anchor holds a position note naming that call (policies.ts `replayPositionNote`): when the text
 * first appears at an earlier call ("Done." ending several user turns), first in the input; when the input's own
 * assistant texts or calls place it further on (a replacement history holding "Done." that a later call repeats;
 * the model never moves back), after the last of them. Without these, the model placed the conversation at another
 * call and every design's replay diverged (outside attack).
 */
function anchored(input: InputItem[], text: string, call: number, total: number, place: (items: readonly InputItem[]) => number): InputItem[] {
  const anchor = (content: string): InputItem => ({ type: 'message', role: 'assistant', content });
  const plain = [anchor(text), ...input];
  if (place(plain) === call) return plain;
  const noted = anchor(`${text}\n\n[llr replay: position ${call + 1} of ${total}]`);
  const first = [noted, ...input];
  if (place(first) === call) return first;
  const k = input.findLastIndex((i) => (i.type === 'message' && 'role' in i && i.role === 'assistant') || i.type === 'function_call' || i.type === 'function_call_output') + 1;
  return [...input.slice(0, k), noted, ...input.slice(k)];
}

/**
 * Refuse a workload whose recorded texts (a user's words, the model's, any message of a turn's input) hold a replay
 * position note naming this run's length (policies.ts `replayPositionNote`): the replay model places a conversation by
 * such a note in any message, so it skipped the recorded calls before the one named, in every design, and the run
 * still ended `completed` (outside attack: a session recorded against an llr replay server, a note pasted into a
 * prompt). A note another length names places nothing and is kept; an anchor this module added (at the end of an
 * assistant message of a `replace_history` turn, `anchored`) is its own and is left out.
 */
function refuseRecordedNotes(turns: Workload['userTurns'], total: number, calls: Workload['calls']): void {
  const named = (text: string): string | null => {
    if (!text.includes('[llr replay: position ')) return null;
    for (const m of text.matchAll(/\[llr replay: position (\d+) of (\d+)\]/g)) {
      const n = Number(m[1]);
      if (Number(m[2]) === total && n >= 1 && n <= total) return m[0];
    }
    return null;
  };
  const refuse = (note: string, where: string, line: number): never => {
    throw new WorkloadError(
      line,
      `${line ? `line ${line}: ` : ''}${where} holds '${note}', a replay position note naming this run's ${total} model calls: the replay model would act on it and skip recorded calls (llr's replay server writes such notes; a session recorded against one, or a note pasted into a prompt, carries them). Remove or alter the note in the file to replay it`,
    );
  };
  let call = 0;
  turns.forEach((u, ui) => {
    for (const item of u.input) {
      if (item.type !== 'message' || !('content' in item)) continue;
      const content: unknown = item.content;
      const own = u.replace_history && 'role' in item && item.role === 'assistant';
      let texts: string[] = [];
      if (typeof content === 'string') texts = [own ? content.replace(/\n\n\[llr replay: position \d+ of \d+\]$/, '') : content];
      else if (Array.isArray(content)) for (const part of content) if (typeof (part as { text?: unknown }).text === 'string') texts.push((part as { text: string }).text);
      for (const t of texts) {
        const note = named(t);
        const next = calls?.[call]?.line;
        if (note) refuse(note, `a message of user turn ${ui + 1}'s input${next ? ` (before the model call at line ${next})` : ''}`, 0);
      }
    }
    for (const t of u.modelTurns) {
      for (const o of t.output) {
        const note = o.type === 'message' ? named(o.text) : null;
        if (note) refuse(note, `the model's text at model call ${call + 1}`, calls?.[call]?.line ?? 0);
      }
      call++;
    }
  });
}

/** `input` without an anchor of `text` that `anchored` put there (a workload cut shorter changes a note's total). */
function withoutAnchor(input: InputItem[], text: string): InputItem[] {
  if (isAnchor(input[0], text, true)) return input.slice(1);
  const k = input.findIndex((i) => isAnchor(i, text, false));
  return k < 0 ? input : [...input.slice(0, k), ...input.slice(k + 1)];
}

function isAnchor(item: InputItem | undefined, text: string, plain: boolean): boolean {
  if (item === undefined || item.type !== 'message' || !('role' in item) || item.role !== 'assistant' || typeof item.content !== 'string') return false;
  return (plain && item.content === text) || (item.content.startsWith(`${text}\n\n[llr replay: position `) && ANCHOR_NOTE.test(item.content.slice(text.length)));
}

const ANCHOR_NOTE = /^\n\n\[llr replay: position \d+ of \d+\]$/;

function callIdOf(item: InputItem): string {
  return String((item as { call_id?: unknown }).call_id);
}

/**
 * The most a replay of `w` asks of a server at once: the widest model call (function calls one pause waits for), and
 * the largest context a conversation reaches, in bytes of JSON (about what the http design sends as one request
 * body, the whole context every call; what a long-lived run or ws response holds), in items and content parts, and in
 * objects and arrays of a request's JSON; the most keys one object of its tools or items has; and the objects and
 * arrays of its tools' schemas. A compaction inside a user turn does not shrink the replayed context (the replay keeps
 * the full history), so a long `codex exec` run that the recorded agent kept small by compacting can pass the
 * server's defaults (16 MiB body, 32 MiB and 50,000 items of context), and a compaction's replacement history or a
 * neutral file's prefilled history can hold more items, a generated tool more keys or schema nodes, than the
 * defaults take: `llr serve --workload` raises those limits to fit, as it does `--max-pending-calls` (outside attack
 * atk84 F1, F2: refused at the first call, or by the reader with the default, whatever flag was given).
 */
export function replayFootprint(w: Workload): Footprint {
  let widestCall = 0;
  let contextBytes = 0;
  let contextItems = 0;
  let contextContainers = 0;
  let jsonKeys = 0;
  const header = walkContexts(w, (bytes, items, t, containers, keys) => {
    contextBytes = Math.max(contextBytes, bytes);
    contextItems = Math.max(contextItems, items);
    contextContainers = Math.max(contextContainers, containers);
    jsonKeys = Math.max(jsonKeys, keys);
    widestCall = Math.max(widestCall, callsOf(t).length);
  });
  const tools = jsonShape(w.tools);
  let schemaNodes = 0;
  for (const t of w.tools) schemaNodes += jsonShape((t as { parameters?: unknown }).parameters).containers;
  return {
    widestCall,
    contextBytes: contextBytes + header,
    contextItems,
    tools: w.tools.length,
    // The request around them: the body, its `input`, `tools`, `text` and `reasoning` objects.
    jsonContainers: contextContainers + tools.containers + 8,
    jsonKeys: Math.max(jsonKeys, tools.keys),
    schemaNodes,
  };
}

/** The objects and arrays in `v`, and the most keys one of its objects has (an explicit stack: no recursion). */
function jsonShape(v: unknown): { containers: number; keys: number } {
  let containers = 0;
  let keys = 0;
  const stack: unknown[] = [v];
  while (stack.length > 0) {
    const x = stack.pop();
    if (typeof x !== 'object' || x === null) continue;
    containers++;
    if (Array.isArray(x)) {
      for (const y of x) if (typeof y === 'object' && y !== null) stack.push(y);
      continue;
    }
    let k = 0;
    for (const key in x) {
      k++;
      const y = (x as Record<string, unknown>)[key];
      if (typeof y === 'object' && y !== null) stack.push(y);
    }
    if (k > keys) keys = k;
  }
  return { containers, keys };
}

/**
 * An input item's content parts, which the server counts with the items (`--max-context-items`): a message's
 * `content`, and a tool output's `output` when it is a list of parts (left out, such a file was refused at its first
 * call; outside attack atk86 F2).
 */
function partsOf(item: unknown): number {
  const { content, output } = (item ?? {}) as { content?: unknown; output?: unknown };
  return (Array.isArray(content) ? content.length : 0) + (Array.isArray(output) ? output.length : 0);
}

/**
 * The bytes of context (as JSON) every model call of a replay of `w` presents, added up: what the http design sends
 * and the server re-processes over the run, whatever the recording counted (a run the recorded agent kept small by
 * compacting inside a user turn presents its full history; bench/session.ts `apiWorkMs`).
 */
export function presentedContextBytes(w: Workload): number {
  let sum = 0;
  let calls = 0;
  const header = walkContexts(w, (bytes) => {
    sum += bytes;
    calls++;
  });
  return sum + calls * header;
}

/**
 * Walk the replay's model calls in order, each with the bytes and items of the context it is presented (its user
 * turn's input and the conversation before it; a `replace_history` turn starts afresh). Returns the bytes of the
 * instructions and tools every call presents besides.
 */
function walkContexts(w: Workload, onCall: (bytes: number, items: number, turn: ReplayTurn, containers: number, keys: number) => void): number {
  const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');
  let accBytes = 0;
  // Items and their content parts (the server counts both against --max-context-items).
  let accItems = 0;
  // Objects and arrays of the items as a request carries them (--max-json-containers), and the most keys of one.
  let accContainers = 0;
  let keys = 0;
  const add = (item: unknown, extraKeys = 0): void => {
    const shape = jsonShape(item);
    accContainers += shape.containers;
    keys = Math.max(keys, shape.keys + extraKeys);
  };
  for (const u of w.userTurns) {
    if (u.replace_history) accBytes = accItems = accContainers = 0;
    for (const item of u.input) {
      accBytes += bytes(item);
      accItems += 1 + partsOf(item);
      add(item);
    }
    u.modelTurns.forEach((t, i) => {
      onCall(accBytes, accItems, t, accContainers, keys);
      for (const o of t.output) {
        accBytes += bytes(o) + 64; // as an output item: type, id, status, role
        // As a client sends it back: a message is an item with its text as a content part, the item, its `content`,
        // the part and its `annotations` (counted as one item and one object, an http replay of many messages was
        // refused part-way; atk86 F1).
        if (o.type === 'message') {
          accItems += 2;
          accContainers += 4;
          keys = Math.max(keys, 6);
        } else {
          accItems += 1 + partsOf(o);
          add(o, 4);
        }
      }
      if (i === u.modelTurns.length - 1) return;
      for (const c of callsOf(t)) accBytes += bytes(w.toolOutputs[c.call_id]?.output ?? '') + c.call_id.length + 64;
      // Each a function_call_output object.
      accItems += callsOf(t).length;
      accContainers += callsOf(t).length;
    });
  }
  return bytes(w.instructions ?? '') + bytes(w.tools);
}
