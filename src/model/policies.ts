/**
 * Model policies: what the simulated model says. A policy turns a request
 * into a planned output (messages and function calls, plus hidden reasoning
 * tokens); the simulated model then paces and streams it.
 *
 * `scriptPolicy` is for tests and examples (fixed steps, consumed in order,
 * failing loudly), `replayPolicy` for benchmarks that replay recorded agent
 * trajectories, and `autoPolicy` (in auto-policy.ts) for people and real
 * clients. Leaves out timing: policies decide *what*, never *when*.
 */
import { contentText, extendsItems, isMessage } from './conversation.js';
import type { Rng } from './rng.js';
import { tokenPieces } from './tokenizer.js';
import { WireError } from '../protocol/errors.js';
import type { InputItem } from '../protocol/objects.js';
import type { ModelRequest, ReplayTurn } from './types.js';

export type PlannedItem =
  | { type: 'message'; text: string }
  /**
   * `arguments` is the JSON text streamed as `args.delta`s; without `call_id` the model makes one. `custom`: a call of
   * a custom tool the request declares, `arguments` its input text (`replayPolicy`).
   */
  | { type: 'function_call'; name: string; arguments: string; call_id?: string; custom?: true };

/**
 * A planned item's text split into its token pieces, filled by the model the
 * first time it streams the item and shared by every plan of it: a replayed
 * turn is played to many runs, and splitting its text again for each (the
 * tokenizer's encode and decode) was a tenth of the server's CPU per
 * streamed delta. Held as long as the policy holds the item (the workload),
 * for the items actually streamed; `text` says which text the memo is of.
 */
export interface PiecesMemo {
  text?: string;
  pieces?: readonly string[];
  tokens?: readonly number[] | null;
}

export interface PlannedOutput {
  items: PlannedItem[];
  /** Reasoning tokens decoded before the visible output; counted, never streamed. */
  hiddenTokens?: number;
  /** Per item, a memo of its text's token pieces shared with every other plan of the same item (replay). */
  pieces?: readonly PiecesMemo[];
}

export interface ModelPolicy {
  readonly name: string;
  /**
   * false: `plan` never draws from `rng` (script, replay), so the model skips
   * digesting the conversation that seeds it. Absent: it may draw.
   */
  readonly random?: boolean;
  /**
   * Plan one model call. `rng` is seeded from the model's seed and the
   * conversation's visible content, so the same conversation gets the same
   * plan however many calls the model served before. May throw (a script that
   * ran out): the model call then fails.
   */
  plan(req: ModelRequest, rng: Rng): PlannedOutput;
}

/** Visible output tokens of a plan, counted the way the model streams them (one per piece). */
export function visibleTokens(items: readonly PlannedItem[]): number {
  let n = 0;
  for (const item of items) n += tokenPieces(item.type === 'message' ? item.text : item.arguments).length;
  return n;
}

// ---------------------------------------------------------------- script

export interface ScriptCall {
  name: string;
  /** An object is sent as its JSON text; a string is sent as it is. */
  arguments: string | Record<string, unknown>;
  call_id?: string;
}

/** One model call's output: text, calls, or text followed by calls. */
export interface ScriptStep {
  text?: string;
  calls?: ScriptCall[];
  hiddenTokens?: number;
}

export interface ScriptPolicy extends ModelPolicy {
  /** Steps not yet played; tests assert it is 0 at the end. */
  remaining(): number;
}

export class ScriptExhaustedError extends Error {
  constructor(readonly steps: number) {
    super(`script exhausted: it has ${steps} step${steps === 1 ? '' : 's'} and model call ${steps + 1} asked for another`);
    this.name = new.target.name;
  }
}

export function scriptPolicy(steps: readonly ScriptStep[]): ScriptPolicy {
  const plans = steps.map((step, i): PlannedOutput => {
    const items: PlannedItem[] = [];
    if (step.text !== undefined) items.push({ type: 'message', text: step.text });
    for (const c of step.calls ?? []) {
      const args = typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments);
      items.push({ type: 'function_call', name: c.name, arguments: args, ...(c.call_id !== undefined && { call_id: c.call_id }) });
    }
    // An empty step is almost always a typo in a test; refuse it up front.
    if (items.length === 0) throw new TypeError(`script step ${i} has neither text nor calls`);
    return { items, hiddenTokens: step.hiddenTokens ?? 0 };
  });
  let next = 0;
  return {
    name: 'script',
    random: false,
    plan() {
      const plan = plans[next];
      if (plan === undefined) throw new ScriptExhaustedError(plans.length);
      next++;
      // Copies, so a consumer mutating a plan cannot change a later replay of the same script.
      return { items: plan.items.map((item) => ({ ...item })), hiddenTokens: plan.hiddenTokens ?? 0, pieces: plan.pieces! };
    },
    remaining: () => plans.length - next,
  };
}

// ---------------------------------------------------------------- replay

/**
 * A conversation past the recorded run's last model call. A wire error so that the client reads why (a `server_error`
 * whose message says it): a bare "The server had an error while processing the request." told a client nothing of a
 * replay that was simply over.
 */
export class ReplayExhaustedError extends WireError {
  constructor(readonly turns: number) {
    super(
      'server_error',
      `The replayed run has ${turns} model call${turns === 1 ? '' : 's'} and this conversation is past its last one ` +
        '(llr serve --workload replays one recorded run: start a new conversation to replay it again).',
    );
    // A client's to ask, any number of times: logged as a warning without its stack (WireError.foreseen).
    this.foreseen = true;
  }
}

/** The note the replay model adds to an answer it has no recording for; `n` is the recorded call that follows. */
export function replayPositionNote(n: number, of: number): string {
  return `[llr replay: position ${n} of ${of}] The recorded run has no answer to a user message sent between a tool call's output and the next model call; it goes on with its model call ${n}.`;
}

const POSITION_NOTE = /\[llr replay: position (\d+) of (\d+)\]/g;

/**
 * Where a conversation stands in the trajectory: what scanning its items from
 * the start gives, kept between model calls and extended by the items added
 * since (as `TurnScan` is, compared by reference with the items scanned
 * before; any difference starts over). Scanning the whole context at every
 * call made a replay quadratic: a 10,000-call run spent most of a minute in
 * `plan` (an outside attack's profile).
 */
class ReplayScan {
  private seen: InputItem[] | null = null;
  /** The list `seen` was read from (`extendsItems`). */
  private source: readonly InputItem[] | null = null;
  /** The flat output index the conversation has reached, -1 for none. */
  cursor = -1;
  /** The model call (turn) the conversation has reached, -1 for none: the next one plays. */
  turn = -1;
  /** A user message came after the calls of the cursor's model call, before anything the trajectory places. */
  offScript = false;

  update(items: readonly InputItem[], at: ReplayIndex): this {
    if (this.seen === null || !extendsItems(items, this.seen, this.source)) {
      this.seen = [];
      this.cursor = this.turn = -1;
      this.offScript = false;
    }
    // Until the scan has read them all (`add` may throw), its items are known to come from no one list.
    this.source = null;
    for (let i = this.seen.length; i < items.length; i++) this.add(items[i]!, at);
    this.source = items;
    return this;
  }

  private add(item: InputItem, at: ReplayIndex): void {
    this.seen!.push(item);
    // Any call or call output by its call_id, not only a function's: Codex sends its apply_patch calls back as
    // custom_tool_call items, and a recorded call the replay did not place by one was played again, under the id the
    // context already held (a run failed duplicate_call_id; outside attack).
    const callId = (item as { call_id?: unknown }).call_id;
    if (typeof callId === 'string') {
      const g = at.byCallId.get(callId);
      if (g !== undefined) this.place(g, at.turnOf[g]!);
      return;
    }
    if (!isMessage(item)) return;
    let placed = false;
    if (item.role === 'assistant') {
      const list = at.byText.get(contentText(item.content));
      const g = list === undefined ? undefined : firstAfter(list, this.cursor);
      if (g !== undefined) (this.place(g, at.turnOf[g]!), (placed = true));
    }
    // Each text part on its own (a note is one text): joining a long message's parts at every request cost a copy.
    if (typeof item.content === 'string') placed = this.notes(item.content, at) || placed;
    else for (const part of item.content) if (typeof part.text === 'string') placed = this.notes(part.text, at) || placed;
    if (!placed && item.role === 'user' && this.turn >= 0 && at.hasCalls[this.turn]) this.offScript = true;
  }

  /** Place the conversation by the position notes in `text`; whether it held one of this trajectory's. */
  private notes(text: string, at: ReplayIndex): boolean {
    if (!text.includes('[llr replay: position ')) return false;
    let placed = false;
    for (const m of text.matchAll(POSITION_NOTE)) {
      const n = Number(m[1]);
      if (Number(m[2]) !== at.turns || !(n >= 1 && n <= at.turns)) continue;
      // The call the note names comes next: the conversation has reached the end of the call before it.
      this.place(n === 1 ? -1 : at.lastOf[n - 2]!, n - 2);
      placed = true;
    }
    return placed;
  }

  /** The conversation reached flat output `g` of model call `t` (never moving back). */
  private place(g: number, t: number): void {
    this.cursor = Math.max(this.cursor, g);
    this.turn = Math.max(this.turn, t);
    this.offScript = false;
  }
}

/** The trajectory's lookups a scan reads. */
interface ReplayIndex {
  turns: number;
  turnOf: number[];
  lastOf: number[];
  hasCalls: boolean[];
  byCallId: Map<string, number>;
  byText: Map<string, number[]>;
}

/**
 * The first of `list` (ascending) past `cursor`, by bisection: a text the run recorded at many calls ("Done." at each
 * of 10,000) was searched from its start for every assistant message, and a request of 100,000 such messages held
 * the event loop 0.7 s.
 */
function firstAfter(list: readonly number[], cursor: number): number | undefined {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]! > cursor) hi = mid;
    else lo = mid + 1;
  }
  return list[lo];
}

/**
 * Replay a recorded trajectory. Stateless: the turn to play is found from the
 * conversation itself, so any number of runs can replay the same trajectory
 * concurrently through one model. The recorded call ids are kept (so they
 * repeat across concurrent runs: pending calls must be scoped per run).
 *
 * The conversation is scanned from the start with a cursor over the
 * trajectory's output items (all turns, flattened in order). A call or call
 * output moves the cursor to that call; an assistant message moves it to the
 * first output item after the cursor with that text. Scanning forward rather
 * than looking up only the last item means a text that occurs in two turns
 * ("Done.") is still attributed to the right one. The next turn is the one
 * after the cursor's.
 *
 * A request the recording has no answer for (a user message after a model
 * call's tool outputs: in a replayable trajectory the next model call always
 * follows them directly) is answered with the next recorded call, as any
 * other, plus a note of its position (`replayPositionNote`) as its last
 * message. A client that compacts its history on its own side keeps the
 * model's last text as its summary, and with it the position: a message of
 * any role holding the note places the conversation there (the note's call
 * comes next), so the replay goes on from where it was rather than from its
 * first call. A conversation with nothing to place it starts at the first
 * call (docs/protocol.md, "The replay model").
 */
/** The trajectory's lookups for placing a conversation in it (no tokenizing). */
function replayIndex(turns: readonly ReplayTurn[]): ReplayIndex {
  const at: ReplayIndex = { turns: turns.length, turnOf: [], lastOf: [], hasCalls: [], byCallId: new Map(), byText: new Map() };
  turns.forEach((turn, t) => {
    for (const o of turn.output) {
      const g = at.turnOf.push(t) - 1;
      if (o.type === 'function_call') {
        if (at.byCallId.has(o.call_id)) throw new TypeError(`replay: call_id ${o.call_id} appears twice in the trajectory`);
        at.byCallId.set(o.call_id, g);
      } else {
        const list = at.byText.get(o.text) ?? [];
        list.push(g);
        at.byText.set(o.text, list);
      }
    }
    // A turn with no output still ends somewhere: at the end of the one before.
    at.lastOf.push(at.turnOf.length - 1);
    at.hasCalls.push(turn.output.some((o) => o.type === 'function_call'));
  });
  return at;
}

/**
 * Where `replayPolicy(turns)` places a conversation of `items`: the recorded model call (0-based) it plays next
 * (`turns.length` when past the last), and the flat output index it has reached (-1 for none; outputs of all calls
 * in order), from which it places the texts that follow. For checking a workload's replay before any server runs it
 * (replayable.ts). Returns a function, so the trajectory is indexed once for many conversations.
 */
export function replayPlacement(turns: readonly ReplayTurn[]): (items: readonly InputItem[]) => { call: number; at: number } {
  const at = replayIndex(turns);
  return (items) => {
    const scan = new ReplayScan().update(items, at);
    return { call: scan.turn + 1, at: scan.cursor };
  };
}

export function replayPolicy(turns: readonly ReplayTurn[]): ModelPolicy {
  const at = replayIndex(turns);
  const plans = turns.map((turn): PlannedOutput => {
    const items: PlannedItem[] = turn.output.map((o) => ({ ...o }));
    const hidden = turn.output_tokens === undefined ? 0 : Math.max(0, turn.output_tokens - visibleTokens(items));
    return { items, hiddenTokens: hidden, pieces: items.map(() => ({})) };
  });
  // Each recorded call's input as a custom tool's call, read once (null for an item that is not a call): the text it
  // wraps, or its arguments as they are when they wrap none.
  const customInputs = plans.map((plan) => plan.items.map((item) => (item.type === 'function_call' ? (wrappedInput(item) ?? item.arguments) : null)));
  // One scan per growing context, kept on its turn scan (which lives as long as the rendered context does).
  const scans = new WeakMap<object, ReplayScan>();

  return {
    name: 'replay',
    random: false,
    plan(req) {
      let scan = req.turns === undefined ? undefined : scans.get(req.turns);
      if (scan === undefined) {
        scan = new ReplayScan();
        if (req.turns !== undefined) scans.set(req.turns, scan);
      }
      scan.update(req.items, at);
      const next = scan.turn + 1;
      const plan = plans[next];
      if (plan === undefined) throw new ReplayExhaustedError(plans.length);
      const declared = req.customTools;
      const inputs = customInputs[next]!;
      // A recorded call is played as a custom tool's when the request declares a custom tool of its name (asCustom): a
      // custom tool gets no function call from the API. A recorded call whose arguments wrap no input (another agent's
      // `apply_patch_call`, read as a function call taking its operation) went out as a function call, which Codex
      // takes as a fatal tool error, answering `aborted` (outside attack atk103 F3); its arguments are now the input.
      const custom = declared === undefined ? null : plan.items.map((item, i) => inputs[i] !== null && item.type === 'function_call' && declared.has(item.name));
      const own = custom !== null && custom.includes(true);
      const items = plan.items.map((item, i) => (own && custom[i] ? asCustom(item, inputs[i]!) : { ...item }));
      // A call played as a custom tool's streams other text than the recording's wrapped input: a memo of its own.
      const memos = own ? plan.pieces!.map((memo, i) => (custom[i] ? {} : memo)) : plan.pieces!;
      // Its hidden tokens are the recorded count less what the call now shows (the input, not its wrapping): the
      // wrapped form's left a custom call's response short of the recorded output (outside attack atk101 F2).
      const recorded = turns[next]!.output_tokens;
      const hiddenTokens = own && recorded !== undefined ? Math.max(0, recorded - visibleTokens(items)) : (plan.hiddenTokens ?? 0);
      if (!scan.offScript) return { items, hiddenTokens, pieces: memos };
      // After the recorded messages, before the calls: the note is the answer's last text.
      const pieces = [...memos];
      const k = items.findLastIndex((i) => i.type === 'message') + 1;
      items.splice(k, 0, { type: 'message', text: replayPositionNote(next + 1, plans.length) });
      pieces.splice(k, 0, {});
      return { items, hiddenTokens, pieces };
    },
  };
}

/**
 * A recorded call of a custom (freeform) tool, which the workload reader keeps as a function call taking exactly
 * `{"input": text}` (workload/codex.ts): its text, or null for any other item. A recorded call is played as the custom
 * tool's call when the request declares a custom tool of that name (`ModelRequest.customTools`), with this text as its
 * input (its arguments when they wrap none): played as a function call, Codex, which declares `apply_patch` custom,
 * answered every recorded edit `unsupported call: apply_patch`, and no edit reached its workspace (outside attack
 * atk99 F1). A request that declares no such tool (the bench's clients) gets the function call as recorded.
 */
function wrappedInput(item: PlannedItem): string | null {
  if (item.type !== 'function_call') return null;
  let args: unknown;
  try {
    args = JSON.parse(item.arguments);
  } catch {
    return null;
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return null;
  const keys = Object.keys(args);
  const input = (args as { input?: unknown }).input;
  return keys.length === 1 && keys[0] === 'input' && typeof input === 'string' ? input : null;
}

/** The recorded function call `item` as the custom tool's call taking `input` (its wrapped text, wrappedInput). */
function asCustom(item: PlannedItem, input: string): PlannedItem {
  return { ...item, arguments: input, custom: true } as PlannedItem;
}

// The default policy lives in its own file (it is the longest); re-exported so
// callers find all three policies in one place.
export { autoPolicy, dollarLines, MAX_CALLS_PER_TURN, summaryText } from './auto-policy.js';
