/**
 * A workload's strings the replay sends or places a conversation by, as Unicode text. JSON can spell half a UTF-16
 * pair (`"\ud83d"`); what a client reads back cannot hold one: a model's text is decoded from UTF-8 tokens, which
 * write U+FFFD in its place, and Codex's JSON reader (serde_json) refuses an event that escapes one. So a recorded
 * text holding one was replayed as U+FFFD, came back so in the client's history, matched no recorded text, and the
 * replay played the same call again at every later user turn; a call id or name holding one was streamed escaped,
 * and Codex dropped every event naming it until its idle timeout (outside attack atk117 F1, F2). Each such string is
 * taken with U+FFFD in place of each lone surrogate, as read, so the replay sends what it indexes; a call's id or name
 * changed so is noted.
 */
import { wellFormed } from '../protocol/errors.js';
import { isUnicodeText, WorkloadError, type Skipped, type Workload } from './types.js';

/** What the readers note of a call id holding a lone surrogate. */
export const LONE_SURROGATE_ID_NOTE =
  "holds a lone surrogate (half of a UTF-16 pair, not Unicode text): the replay sends it with U+FFFD in its place, as a client's JSON reader could not take it, and its outputs are matched under that id";

/** `w` with its call ids, call names, arguments and model texts as Unicode text (in place); the notes of ids changed. */
export function wellFormedWorkload(w: Workload, name: string): Workload {
  const ids = new Map<string, string>();
  const notes: Skipped[] = [];
  const id = (raw: string): string => {
    if (isUnicodeText(raw)) return raw;
    let made = ids.get(raw);
    if (made === undefined) {
      made = wellFormed(raw);
      ids.set(raw, made);
      notes.push({ line: 0, what: `call_id ${JSON.stringify(raw)}`, why: LONE_SURROGATE_ID_NOTE });
    }
    return made;
  };
  for (const u of w.userTurns) {
    for (const item of u.input) {
      const c = item as { call_id?: unknown };
      if (typeof c.call_id === 'string') c.call_id = id(c.call_id);
    }
    for (const t of u.modelTurns) {
      for (const o of t.output) {
        if (o.type === 'message') {
          if (!isUnicodeText(o.text)) o.text = wellFormed(o.text);
          continue;
        }
        if (!isUnicodeText(o.arguments)) o.arguments = wellFormed(o.arguments);
        if (!isUnicodeText(o.name)) o.name = wellFormed(o.name);
        o.call_id = id(o.call_id);
      }
    }
  }
  if (ids.size === 0) return w;
  // Two ids that differ only in their lone surrogates (or one that becomes another's) are one id as sent: refused as
  // any id used twice is.
  const seen = new Map<string, string>();
  const sentAs = new Map([...ids].map(([raw, as]) => [as, raw]));
  for (const u of w.userTurns) {
    for (const t of u.modelTurns) {
      for (const o of t.output) {
        if (o.type !== 'function_call') continue;
        const before = seen.get(o.call_id);
        if (before !== undefined) {
          throw new WorkloadError(0, `${name}: call_id ${JSON.stringify(before)} and another are one id once a lone surrogate is sent as U+FFFD (as a client reads it): give each call an id of its own`);
        }
        seen.set(o.call_id, sentAs.get(o.call_id) ?? o.call_id);
      }
    }
  }
  w.toolOutputs = Object.fromEntries(Object.entries(w.toolOutputs).map(([k, v]) => [ids.get(k) ?? k, v]));
  w.skipped = [...(w.skipped ?? []), ...notes];
  return w;
}
