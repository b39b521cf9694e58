/**
 * Preparing a Workload for one bench: cutting it to its first N model calls
 * (the `--quick` subset) and giving each run a nonce so runs do not share
 * prompt-prefix cache blocks beyond the common preamble. The result travels
 * to the server process as one neutral-format JSON file (workload/format.ts),
 * the single source of truth both replay.
 *
 * Used by the bench runner and replay driver. Leaves out reading workloads
 * and making them replayable (src/workload/).
 */
import type { InputItem } from '../protocol/objects.js';
import { callsOf, modelCallCount, replayable } from '../workload/replayable.js';
import type { Workload } from '../workload/types.js';

export const TRUNCATED_TEXT = '(replay cut here by llr bench)';

/**
 * The first `maxCalls` model calls. The last one kept becomes the end of the
 * run: its function calls are dropped (its text, if any, is kept; otherwise a
 * marker message stands in) and its recorded output tokens are kept, so the
 * cut run decodes what the recording did.
 */
export function truncateWorkload(w: Workload, maxCalls: number): Workload {
  if (!Number.isSafeInteger(maxCalls) || maxCalls < 1) throw new RangeError(`maxCalls must be an integer >= 1, got ${maxCalls}`);
  if (maxCalls >= modelCallCount(w)) return replayable(w);
  const userTurns: Workload['userTurns'] = [];
  let left = maxCalls;
  for (const u of w.userTurns) {
    if (left === 0) break;
    const modelTurns = u.modelTurns.slice(0, left).map((t) => ({ ...t, output: t.output.map((o) => ({ ...o })) }));
    left -= modelTurns.length;
    userTurns.push({ ...u, input: u.input.slice(), modelTurns });
  }
  const last = userTurns.at(-1)!.modelTurns.at(-1)!;
  if (callsOf(last).length > 0) {
    last.output = last.output.filter((o) => o.type !== 'function_call');
    if (last.output.length === 0) last.output.push({ type: 'message', text: TRUNCATED_TEXT });
  }
  const kept = new Set(userTurns.flatMap((u) => u.modelTurns.flatMap((t) => callsOf(t).map((c) => c.call_id))));
  const cut: Workload = {
    ...w,
    name: `${w.name} (first ${maxCalls} model calls)`,
    userTurns,
    toolOutputs: Object.fromEntries(Object.entries(w.toolOutputs).filter(([id]) => kept.has(id))),
    recorded: {
      model_calls: Math.min(w.recorded.model_calls, maxCalls),
      input_tokens: w.recorded.input_tokens.slice(0, maxCalls),
      output_tokens: w.recorded.output_tokens.slice(0, maxCalls),
    },
    ...(w.calls !== undefined && { calls: w.calls.slice(0, maxCalls) }),
  };
  return replayable(cut);
}

/**
 * The first user message of the run with `nonce` in front of its text, so
 * this run's prompts share prefix-cache blocks with other runs only up to
 * that message (the instructions, tools and developer preamble: what a real
 * deployment caches across sessions too). The replay policy ignores user
 * text, so the model replays the same turns.
 */
export function firstInputWithNonce(input: readonly InputItem[], nonce: string): InputItem[] {
  const out = input.slice();
  const i = out.findIndex((item) => (item.type === undefined || item.type === 'message') && (item as { role?: string }).role === 'user');
  if (i < 0) return [{ type: 'message', role: 'user', content: nonce }, ...out];
  const msg = out[i] as Extract<InputItem, { role: string }>;
  const content = msg.content;
  if (typeof content === 'string') {
    out[i] = { ...msg, content: `${nonce}\n${content}` };
  } else {
    out[i] = { ...msg, content: [{ type: 'input_text', text: nonce }, ...content] };
  }
  return out;
}
