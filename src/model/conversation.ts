/**
 * Reading a conversation the way a model policy needs to: which items are
 * messages, calls and call outputs, the text they carry, where the latest
 * user turn starts, and a digest of the visible content.
 *
 * Used by the policies and the simulated model. Items arrive already
 * validated at the edge, but `InputItem` includes pass-through unknown items,
 * so the guards check the fields they rely on instead of trusting `type`.
 * Leaves out images, files and hosted-tool items: they carry no text a
 * simulated model reacts to.
 */
import type {
  FunctionCall,
  FunctionCallOutput,
  InputItem,
  InputMessage,
} from '../protocol/objects.js';
import { hashString } from './rng.js';
import { runSync, SLICE_CHARS, type Work } from '../cooperative.js';

export function isMessage(item: InputItem): item is InputMessage {
  return (item.type === undefined || item.type === 'message') && typeof (item as InputMessage).role === 'string';
}

export function isFunctionCall(item: InputItem): item is FunctionCall {
  return (
    item.type === 'function_call' &&
    typeof (item as FunctionCall).call_id === 'string' &&
    typeof (item as FunctionCall).name === 'string'
  );
}

export function isFunctionCallOutput(item: InputItem): item is FunctionCallOutput {
  return item.type === 'function_call_output' && typeof (item as FunctionCallOutput).call_id === 'string';
}

/** The text of a message's content: a string, or its text parts joined by newlines. */
export function contentText(content: InputMessage['content']): string {
  if (typeof content === 'string') return content;
  const texts: string[] = [];
  for (const part of content) {
    if ((part.type === 'input_text' || part.type === 'output_text') && typeof part.text === 'string') texts.push(part.text);
  }
  return texts.join('\n');
}

/** The text of a tool's output: a string, or its `input_text` parts joined by newlines. */
export function outputText(output: FunctionCallOutput['output']): string {
  if (typeof output === 'string') return output;
  const texts: string[] = [];
  for (const part of output) {
    if (part.type === 'input_text' && typeof part.text === 'string') texts.push(part.text);
  }
  return texts.join('\n');
}

/** A call after the latest user message and its output (the last one with its call_id), if any yet. */
export interface TurnCall {
  call: FunctionCall;
  output: FunctionCallOutput | undefined;
}

const NO_CALLS: readonly TurnCall[] = Object.freeze([]);
const NO_NAMES: ReadonlyMap<string, readonly TurnCall[]> = new Map();

/**
 * Whether `items` begins with exactly the objects of `prefix` (a kept scan's items, compared by reference). `source`:
 * the list `prefix` is known to be a prefix of (the one it was read from), if any. That same list again extends it
 * without the walk, since a list a scan is handed again only grows: a context's (pipeline/render.ts `pushItem`; a
 * model call gets it as it stands, engine/run.ts `itemsAsOf`; a compaction makes a new one). The walk cost every
 * model call of a long run a pass over the whole conversation, once per scan.
 */
export function extendsItems(items: readonly InputItem[], prefix: readonly InputItem[], source: readonly InputItem[] | null = null): boolean {
  if (prefix.length > items.length) return false;
  if (items === source) return true;
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== items[i]) return false;
  return true;
}

/**
 * The latest user message and the calls after it, with their outputs, of a
 * growing conversation (what scanning it from the start gives), kept between
 * model calls and extended by the items added since (a long-lived run's
 * context, a ws chain's), with the calls' names and the calls per name.
 * Scanning every call of the turn again at each model call made a long
 * forced tool loop's policy quadratic: each plan took longer than the one
 * before (bench:overhead's long phase shows the step). The items scanned are
 * compared by reference with the new conversation's first ones (a
 * context's items never change once added); any difference starts over.
 * What it holds is exactly what scanning the items from the start gives
 * (test/unit/turn-scan.test.ts); read it, never change it.
 */
export class TurnScan {
  /** The items scanned so far (null: none yet; a scan costs nothing until a policy uses it). */
  private seen: InputItem[] | null = null;
  /** The list they were read from (`extendsItems`). */
  private source: readonly InputItem[] | null = null;
  /** Index of the latest user message, -1 when there is none. */
  user = -1;
  /** The calls after it, in order, each with its output so far. */
  calls: readonly TurnCall[] = NO_CALLS;
  /** `calls` by name, in order (its keys: the names called). */
  byName: ReadonlyMap<string, readonly TurnCall[]> = NO_NAMES;
  /** Per call_id after the user message: its calls and its latest output. Made, like the two above, when a turn first has any. */
  private ids: Map<string, { calls: TurnCall[]; output: FunctionCallOutput | undefined }> | null = null;

  /** Bring the scan up to `items` (the conversation, grown or not). */
  update(items: readonly InputItem[]): this {
    if (this.seen === null || !extendsItems(items, this.seen, this.source)) {
      this.seen = [];
      this.startTurn(-1);
    }
    // Until the scan has read them all (`add` may throw), its items are known to come from no one list.
    this.source = null;
    for (let i = this.seen.length; i < items.length; i++) this.add(this.seen, items[i]!, i);
    this.source = items;
    return this;
  }

  private add(seen: InputItem[], item: InputItem, i: number): void {
    seen.push(item);
    if (isMessage(item)) {
      if (item.role === 'user') this.startTurn(i);
      return;
    }
    if (!isFunctionCall(item) && !isFunctionCallOutput(item)) return;
    if (this.ids === null) {
      this.ids = new Map();
      this.calls = [];
      this.byName = new Map();
    }
    const ids = this.ids;
    if (isFunctionCall(item)) {
      const id = ids.get(item.call_id);
      const c: TurnCall = { call: item, output: id?.output };
      (this.calls as TurnCall[]).push(c);
      if (id) id.calls.push(c);
      else ids.set(item.call_id, { calls: [c], output: undefined });
      const byName = this.byName as Map<string, TurnCall[]>;
      const named = byName.get(item.name);
      if (named) named.push(c);
      else byName.set(item.name, [c]);
    } else {
      const id = ids.get(item.call_id);
      if (id === undefined) ids.set(item.call_id, { calls: [], output: item });
      else {
        id.output = item;
        for (const c of id.calls) c.output = item;
      }
    }
  }

  private startTurn(user: number): void {
    this.user = user;
    this.calls = NO_CALLS;
    this.byName = NO_NAMES;
    this.ids = null;
  }
}

/**
 * A hash of what a reader of the conversation sees: roles, message text,
 * call names and arguments, tool output text. Item ids and call ids are left
 * out on purpose: they differ between modes and runs, and the model's text
 * should not.
 */
export function conversationDigest(items: readonly InputItem[], seed = 0): number {
  return runSync(conversationDigestWork(items, seed));
}

/**
 * The same digest as slices of work (src/cooperative.ts). Each piece is
 * hashed where it lies, never joined into a new string: FNV chains, so the
 * hash of the pieces in order is the hash of their concatenation.
 */
export function* conversationDigestWork(items: readonly InputItem[], seed = 0): Work<number> {
  let h = hashString(String(seed));
  for (const item of items) h = yield* itemDigestWork(item, h);
  return h;
}

/** The digest `h` extended by one item (what `conversationDigestWork` hashes of it). */
function* itemDigestWork(item: InputItem, h: number): Work<number> {
  if (isMessage(item)) {
    h = hashString(`\u0001${item.role}\u0002`, h);
    return yield* hashTexts(typeof item.content === 'string' ? [item.content] : textParts(item.content, 'output_text'), h);
  }
  if (isFunctionCall(item)) {
    h = hashString(`\u0003${item.name}\u0002`, h);
    return yield* hashTexts([item.arguments], h);
  }
  if (isFunctionCallOutput(item)) {
    h = hashString('\u0004', h);
    return yield* hashTexts(typeof item.output === 'string' ? [item.output] : textParts(item.output, null), h);
  }
  return h;
}

/**
 * A growing conversation's digest (a long-lived run's context, a ws-mode
 * chain's), kept between model calls so each call hashes only the items
 * added since the last one. Hashing the whole conversation at every call
 * made a run's cost grow with the square of its length (found by an outside
 * attack's profile of a 1,000-step long-lived run with the auto policy).
 *
 * `work` returns exactly `conversationDigestWork(items, seed)`: the items
 * hashed before are compared by reference with the new conversation's
 * first ones (a context's items are never changed once added), and any
 * difference — another seed, a compacted or rebuilt context — starts over.
 */
export class ConversationDigest {
  private seed = Number.NaN;
  /** The items hashed so far, in order, and the digest after them. */
  private items: InputItem[] = [];
  /** The list `items` is a prefix of, when one call read them all from it and no other list added to them since (`extendsItems`). */
  private source: readonly InputItem[] | null = null;
  private h = 0;
  /** Bumped at each restart: a call that yielded commits its items only onto the state it started from. */
  private generation = 0;

  *work(items: readonly InputItem[], seed = 0): Work<number> {
    if (seed !== this.seed || !extendsItems(items, this.items, this.source)) {
      this.seed = seed;
      this.items = [];
      this.source = null;
      this.h = hashString(String(seed));
      this.generation++;
    }
    const generation = this.generation;
    let h = this.h;
    // Whether this call added every item it hashed (none came from another call while it yielded).
    let all = true;
    for (let i = this.items.length; i < items.length; i++) {
      const item = items[i]!;
      h = yield* itemDigestWork(item, h);
      if (this.generation === generation && this.items.length === i) {
        if (items !== this.source) this.source = null;
        this.items.push(item);
        this.h = h;
      } else all = false;
    }
    if (all && this.generation === generation && this.items.length === items.length) this.source = items;
    return h;
  }
}

/** The texts `contentText` / `outputText` join with '\n', without joining them. */
function textParts(parts: ReadonlyArray<{ type: string; text?: unknown }>, alsoType: string | null): string[] {
  const texts: string[] = [];
  for (const part of parts) if ((part.type === 'input_text' || part.type === alsoType) && typeof part.text === 'string') texts.push(part.text);
  return texts;
}

function* hashTexts(texts: readonly string[], h: number): Work<number> {
  for (let i = 0; i < texts.length; i++) {
    if (i > 0) h = hashString('\n', h);
    const t = texts[i]!;
    if (t.length <= SLICE_CHARS) {
      h = hashString(t, h);
      continue;
    }
    for (let at = 0; at < t.length; at += SLICE_CHARS) {
      h = hashString(t.slice(at, at + SLICE_CHARS), h);
      yield;
    }
  }
  return h;
}

/**
 * Characters of text an item carries (its content, arguments or output, as a
 * string or text parts), counted without reading them: the simulated model
 * sums it to decide whether to digest a conversation cooperatively, and the
 * render stage keeps the running sum of a context (`textChars`).
 */
export function itemTextChars(item: InputItem): number {
  // Any item may carry text in these fields (hosted tool items too), so all three are read for every item.
  const it: { content?: unknown; arguments?: unknown; output?: unknown; type?: unknown } = item;
  return textChars(it.content) + textChars(it.arguments) + textChars(it.output);
}

/** One field's text length: a string, or the text of its parts (no array built per item: this runs for every item of a context). */
function textChars(v: unknown): number {
  if (typeof v === 'string') return v.length;
  let n = 0;
  if (Array.isArray(v)) for (const p of v as Array<{ text?: unknown }>) if (typeof p?.text === 'string') n += p.text.length;
  return n;
}
