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
import { contentText, isFunctionCall, isFunctionCallOutput, isMessage } from './conversation.js';
import type { Rng } from './rng.js';
import { tokenPieces } from './tokenizer.js';
import type { ModelRequest, ReplayTurn } from './types.js';

export type PlannedItem =
  | { type: 'message'; text: string }
  /** `arguments` is the JSON text streamed as `args.delta`s; without `call_id` the model makes one. */
  | { type: 'function_call'; name: string; arguments: string; call_id?: string };

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

export class ReplayExhaustedError extends Error {
  constructor(readonly turns: number) {
    super(`replay exhausted: the trajectory has ${turns} turn${turns === 1 ? '' : 's'} and the conversation is past the last one`);
    this.name = new.target.name;
  }
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
 */
export function replayPolicy(turns: readonly ReplayTurn[]): ModelPolicy {
  const turnOf: number[] = []; // flat output index -> turn
  const byCallId = new Map<string, number>();
  const byText = new Map<string, number[]>();
  const plans = turns.map((turn, t): PlannedOutput => {
    const items: PlannedItem[] = turn.output.map((o) => ({ ...o }));
    for (const o of turn.output) {
      const g = turnOf.push(t) - 1;
      if (o.type === 'function_call') {
        if (byCallId.has(o.call_id)) throw new TypeError(`replay: call_id ${o.call_id} appears twice in the trajectory`);
        byCallId.set(o.call_id, g);
      } else {
        const list = byText.get(o.text) ?? [];
        list.push(g);
        byText.set(o.text, list);
      }
    }
    const hidden = turn.output_tokens === undefined ? 0 : Math.max(0, turn.output_tokens - visibleTokens(items));
    return { items, hiddenTokens: hidden, pieces: items.map(() => ({})) };
  });

  return {
    name: 'replay',
    random: false,
    plan(req) {
      let cursor = -1;
      for (const item of req.items) {
        if (isFunctionCall(item) || isFunctionCallOutput(item)) {
          cursor = Math.max(cursor, byCallId.get(item.call_id) ?? -1);
        } else if (isMessage(item) && item.role === 'assistant') {
          const g = byText.get(contentText(item.content))?.find((i) => i > cursor);
          if (g !== undefined) cursor = g;
        }
      }
      const next = cursor < 0 ? 0 : turnOf[cursor]! + 1;
      const plan = plans[next];
      if (plan === undefined) throw new ReplayExhaustedError(plans.length);
      return { items: plan.items.map((item) => ({ ...item })), hiddenTokens: plan.hiddenTokens ?? 0, pieces: plan.pieces! };
    },
  };
}

// The default policy lives in its own file (it is the longest); re-exported so
// callers find all three policies in one place.
export { autoPolicy, dollarLines } from './auto-policy.js';
