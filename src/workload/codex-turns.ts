/**
 * Building one replayed user turn from the model calls the Codex reader
 * (`codex.ts`) collected: a call with nothing visible (only reasoning, or
 * only a hosted search) is merged into the next call of its user turn, its
 * output tokens with it (the user turn's last calls, when they show nothing,
 * end the turn as one call replayed with a marker text); so is a call
 * before the user turn's last that shows only text (no tool call: replayed
 * alone it would end the run), so replay
 * decodes as many tokens while inventing no output; each replayed call gets
 * its figures, recorded when every merged call had a `token_count`,
 * inferred otherwise (input figures are resolved by the reader afterwards,
 * from the context mark).
 *
 * Pure: no record order, no I/O.
 */
import type { ReplayTurn } from '../model/types.js';
import type { InputItem } from '../protocol/objects.js';
import { inferOutputTokens } from './infer.js';
import type { CallFigures, UserTurn } from './types.js';

export type Visible = ReplayTurn['output'][number];

/** One model call as recorded, before calls with nothing visible are merged. */
export interface RawCall {
  line: number;
  visible: Visible[];
  /** Estimated tokens of its reasoning items. */
  reasoning: number;
  usage: { input: number; output: number } | null;
  /** Context ops applied when the call started. */
  mark: number;
}

/** A user turn as the reader builds it. */
export interface TurnBuild {
  input: InputItem[];
  calls: RawCall[];
  replace: boolean;
  /** Input messages taken from `user_message` events, not yet matched by a response_item. */
  fromEvents: Array<{ index: number; text: string }>;
  /** Texts of response_item user messages in `input`, for matching a later event. */
  userTexts: string[];
  /** How many calls the turn had when a `turn_aborted` ended it (the user interrupted), if one did. */
  abortedAt?: number;
}

/** A replayed call's figures before input inference (the mark is resolved by the reader). */
export interface PendingFigures extends Omit<CallFigures, 'input_tokens'> {
  input_tokens: number | null;
  mark: number;
}

/** What replays a user turn's last model call when it showed nothing (only reasoning, or an empty message). */
export const NOTHING_SHOWN_TEXT = '(the recorded answer showed nothing: only reasoning, or an empty message)';

/** The replayed user turn and its calls' figures; null when no call has visible output. */
export function buildUserTurn(turn: TurnBuild): { turn: UserTurn; figures: PendingFigures[] } | null {
  // A replayed call ends at a function call: a call before it that called no tool (only text) would end the
  // replayed run there, so its text joins the next call's output, as calls with nothing visible do.
  const groups: RawCall[][] = [];
  let pending: RawCall[] = [];
  for (const c of turn.calls) {
    pending.push(c);
    if (c.visible.some((v) => v.type === 'function_call')) {
      groups.push(pending);
      pending = [];
    }
  }
  // Calls after the last tool call that show nothing (only reasoning, an empty message) end the user turn: the model
  // was called again, so the tool outputs were sent. Merged into the call before, they made the turn end in its tool
  // calls, which the replay reads as an interrupted turn and drops, call, output and all, for a false "never got an
  // answer" marker (outside attack atk57 F1). They are replayed as one call ending the turn, its output a marker.
  let nothingShown = false;
  if (pending.some((c) => c.visible.length > 0)) groups.push(pending);
  else if (pending.length > 0 && groups.length > 0) {
    groups.push(pending);
    nothingShown = true;
  }
  if (groups.length === 0) return null;
  const modelTurns: ReplayTurn[] = [];
  const figures: PendingFigures[] = [];
  for (const [gi, group] of groups.entries()) {
    const shown = group.find((c) => c.visible.length > 0) ?? group[0]!;
    let output = 0;
    for (const c of group) output += c.usage?.output ?? inferOutputTokens(c.visible, c.reasoning);
    const visible = nothingShown && gi === groups.length - 1 ? [{ type: 'message' as const, text: NOTHING_SHOWN_TEXT }] : group.flatMap((c) => c.visible);
    modelTurns.push({ output: visible, output_tokens: output });
    figures.push({
      input_tokens: shown.usage?.input ?? null,
      input_source: shown.usage ? 'recorded' : 'inferred',
      output_tokens: output,
      output_source: group.every((c) => c.usage !== null) ? 'recorded' : 'inferred',
      line: shown.line,
      mark: shown.mark,
    });
  }
  return { turn: { input: turn.input, modelTurns, ...(turn.replace && { replace_history: true }) }, figures };
}

/** Codex may wrap the user's text in the response item (older versions prefix a heading). */
export function sameUserText(itemText: string, eventText: string): boolean {
  const a = itemText.trim();
  const b = eventText.trim();
  return a === b || (b !== '' && a.includes(b));
}
