/**
 * Token figures a recording does not have, inferred by documented rules
 * (docs/benchmarks.md, "Reading a workload"):
 *
 * - Input tokens of a model call: the context the agent had sent so far
 *   (instructions, the tools as rebuilt, every item in order, with a
 *   compaction's replacement standing in for what it replaced), rendered
 *   exactly as the server renders a prompt (pipeline/render.ts, o200k). The
 *   rollout does not record Codex's real tool definitions or encrypted
 *   reasoning carried in the request, so this is a lower bound.
 * - Output tokens: the visible output counted as the simulated model streams
 *   it (model/policies.ts `visibleTokens`), plus the framing the API bills
 *   around each output item (below), plus each reasoning item's tokens: its
 *   summary or raw text counted with o200k, or, when larger, the size
 *   estimated from `encrypted_content` (below).
 *
 * Used by the Codex reader. Leaves out any per-model calibration beyond the
 * one fit below.
 */
import { visibleTokens, type PlannedItem } from '../model/policies.js';
import { countTokens } from '../model/tokenizer.js';
import { RunMetrics } from '../pipeline/metrics.js';
import { renderAppend, renderFull, type RenderedContext } from '../pipeline/render.js';
import type { FunctionTool, InputItem } from '../protocol/objects.js';

/**
 * `encrypted_content` length ≈ ENCRYPTED_OVERHEAD_CHARS + CHARS_PER_ENCRYPTED_TOKEN
 * × reasoning tokens: a least-squares fit over the 22 model calls of
 * codex-rollout-a.jsonl that carry reasoning (recorded
 * `reasoning_output_tokens` 9–267, length 996–3056 chars; fit 852.7 + 7.97 t).
 */
export const ENCRYPTED_OVERHEAD_CHARS = 850;
export const CHARS_PER_ENCRYPTED_TOKEN = 8;

/** Tokens an encrypted blob of `chars` characters is estimated to hold (0 for an empty or tiny blob). */
export function estimateEncryptedTokens(chars: number): number {
  return Math.max(0, Math.round((chars - ENCRYPTED_OVERHEAD_CHARS) / CHARS_PER_ENCRYPTED_TOKEN));
}

/**
 * Output tokens billed around visible items, beyond their text or arguments:
 * per function call, one more for a model call with parallel calls, per
 * message. The median of (recorded − visible) over the calls of
 * codex-rollout-a.jsonl without reasoning: 14 for one call (38 calls), 50 for
 * three (13), 24 for a call and a message (6). Calibrated on that one file.
 */
export const FRAMING_TOKENS_PER_CALL = 14;
export const FRAMING_TOKENS_PARALLEL = 8;
export const FRAMING_TOKENS_PER_MESSAGE = 10;

/** A model call's output tokens when the recording has none: visible + framing + reasoning. */
export function inferOutputTokens(visible: readonly PlannedItem[], reasoning: number): number {
  const calls = visible.filter((v) => v.type === 'function_call').length;
  const messages = visible.length - calls;
  const framing = calls * FRAMING_TOKENS_PER_CALL + (calls > 1 ? FRAMING_TOKENS_PARALLEL : 0) + messages * FRAMING_TOKENS_PER_MESSAGE;
  return visibleTokens(visible) + framing + reasoning;
}

/** A reasoning item's output tokens: its readable text, or its encrypted size's estimate when larger. */
export function reasoningTokens(text: string, encryptedChars: number): number {
  return Math.max(text === '' ? 0 : countTokens(text), estimateEncryptedTokens(encryptedChars));
}

/** How the recorded agent's context changed, in record order. */
export type ContextOp = { kind: 'add'; item: InputItem } | { kind: 'replace'; items: InputItem[] };

/**
 * The rendered prompt size at each mark: `marks[i]` is a count of `ops`
 * applied (non-decreasing), the context a model call started from. One pass,
 * incremental, so a long rollout costs one render of its history.
 */
export function inferInputTokens(
  instructions: string | null,
  tools: FunctionTool[],
  ops: readonly ContextOp[],
  marks: readonly number[],
): number[] {
  const metrics = new RunMetrics();
  let ctx: RenderedContext = renderFull(instructions, tools, [], metrics);
  const out: number[] = [];
  let applied = 0;
  for (const mark of marks) {
    if (mark < applied) throw new RangeError(`inferInputTokens: marks must not decrease (${mark} after ${applied})`);
    const adds: InputItem[] = [];
    for (; applied < mark; applied++) {
      const op = ops[applied]!;
      if (op.kind === 'add') {
        adds.push(op.item);
      } else {
        adds.length = 0;
        ctx = renderFull(instructions, tools, op.items, metrics);
      }
    }
    if (adds.length > 0) renderAppend(ctx, adds, metrics);
    out.push(ctx.tokens.length);
  }
  return out;
}
