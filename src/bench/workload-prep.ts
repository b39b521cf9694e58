/**
 * Preparing a Workload for replay by `llr bench`: cutting it to its first N
 * model calls (the `--quick` subset), making every user turn end in a plain
 * answer (so each design's agent loop stops where the recording did), giving
 * each run a nonce so runs do not share prompt-prefix cache blocks beyond the
 * common preamble, and moving the result between the bench process and the
 * server process as one JSON file (the single source of truth both replay).
 *
 * Used by the bench runner and by `llr serve --workload FILE` (which reads
 * either a Codex rollout or the JSON written here). Leaves out parsing
 * rollouts (workload-codex.ts) and generating synthetic runs (synthetic.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { ReplayTurn } from '../model/types.js';
import type { InputItem } from '../protocol/objects.js';
import { syntheticWorkload, type SyntheticOptions } from '../workload/synthetic.js';
import { readWorkload, WorkloadError, type Workload } from '../workload/load.js';

export const TRUNCATED_TEXT = '(replay cut here by llr bench)';
const INTERRUPTED_TEXT = '(interrupted: the recorded turn ended in tool calls that never got an answer)';

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
 * `"aborted"` outputs the next user turn started with for them. Returns a
 * copy; a workload that is already replayable comes back deep-equal.
 */
export function replayable(w: Workload): Workload {
  const dropped = new Set<string>();
  const userTurns = w.userTurns.map((u) => {
    const input = u.input.filter((item) => !(item.type === 'function_call_output' && dropped.has(callIdOf(item))));
    const modelTurns = u.modelTurns.map((t) => ({ ...t, output: t.output.map((o) => ({ ...o })) }));
    const last = modelTurns.at(-1);
    if (last && callsOf(last).length > 0) {
      for (const c of callsOf(last)) dropped.add(c.call_id);
      last.output = last.output.filter((o) => o.type !== 'function_call');
      if (last.output.length === 0) last.output.push({ type: 'message', text: INTERRUPTED_TEXT });
    }
    return { input, modelTurns };
  });
  const toolOutputs = Object.fromEntries(Object.entries(w.toolOutputs).filter(([id]) => !dropped.has(id)));
  return { ...w, userTurns, toolOutputs };
}

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
    userTurns.push({ input: u.input.slice(), modelTurns });
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

/** `T,B,K` → synthetic options (turns, tool output bytes, output tokens per turn). */
export function parseSyntheticSpec(spec: string, seed = 1): SyntheticOptions {
  const parts = spec.split(',').map((s) => Number(s.trim()));
  const [turns, toolOutputBytes, outputTokensPerTurn] = parts;
  if (parts.length !== 3 || parts.some((n) => !Number.isSafeInteger(n) || n < 0)) {
    throw new RangeError(`--synthetic needs TURNS,TOOL_OUTPUT_BYTES,OUTPUT_TOKENS (three integers), got '${spec}'`);
  }
  return { turns: turns!, toolOutputBytes: toolOutputBytes!, outputTokensPerTurn: outputTokensPerTurn!, seed };
}

export function syntheticFromSpec(spec: string, seed = 1): Workload {
  return syntheticWorkload(parseSyntheticSpec(spec, seed));
}

/** Write the exact workload a bench replays, for the server process to load. */
export function writeWorkloadJson(path: string, w: Workload): void {
  writeFileSync(path, JSON.stringify({ llr_workload: 1, ...w }));
}

/**
 * Load a workload for the server: the JSON written by `writeWorkloadJson`, or
 * else a Codex rollout (JSONL). A rollout is made replayable as it is read.
 */
export function loadWorkloadFile(path: string): Workload {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new WorkloadError(0, `${path}: cannot read the file`, { cause: err });
  }
  if (text.startsWith('{"llr_workload":')) {
    const w = JSON.parse(text) as Workload & { llr_workload?: number };
    delete w.llr_workload;
    if (!Array.isArray(w.userTurns) || typeof w.toolOutputs !== 'object') {
      throw new WorkloadError(0, `${path}: an llr workload file without userTurns / toolOutputs`);
    }
    return w;
  }
  return replayable(readWorkload(path));
}

function callIdOf(item: InputItem): string {
  return String((item as { call_id?: unknown }).call_id);
}
