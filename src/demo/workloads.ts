/**
 * The teaching demo's workloads: what one race runs through every lane, and
 * what its tools answer. Three kinds, chosen on the page:
 *
 *  - `codex`: the bundled Codex CLI rollout, replayed call for call (the
 *    model replays the recorded outputs, the tools answer with the recorded
 *    outputs after the recorded durations);
 *  - `synthetic`: a run of N shell tool calls with plausible outputs
 *    (src/bench/synthetic.ts), each "taking" SYNTHETIC_TOOL_MS;
 *  - `prompt`: the user's own prompt, answered by the simulated model's
 *    default policy, which runs each `$ ` line as an `exec_command` call.
 *    The demo never runs a command on this machine: every `$ ` line gets a
 *    fixed stand-in output (the page says so).
 *
 * Each lane gets a fresh policy from `policy()`. Imports of the workload
 * readers are all in this file (they are moving from src/bench/ to
 * src/workload/). Leaves out running anything (race.ts).
 */
import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { autoPolicy, dollarLines, MAX_CALLS_PER_TURN, replayPolicy, summaryText, visibleTokens, type ModelPolicy, type PlannedItem } from '../model/policies.js';
import type { FunctionTool, InputItem } from '../protocol/objects.js';
import { WireError } from '../protocol/errors.js';
import { callsOf, flatModelTurns } from '../workload/replayable.js';
import { loadWorkloadFile } from '../workload/load.js';
import { syntheticWorkload } from '../workload/synthetic.js';
import { toolWaitMs, type Workload } from '../workload/types.js';
import { ownValue } from '../protocol/fields.js';

/** Where the bundled Codex rollout lives in the package (override: `llr serve --demo-workload FILE`). */
export const DEFAULT_DEMO_WORKLOAD = fileURLToPath(new URL('../../workloads/codex-rollout-a.jsonl', import.meta.url));
/** Each synthetic tool call's duration when tool time is "as recorded", ms. */
export const SYNTHETIC_TOOL_MS = 300;
/** Each `$ ` line's stand-in duration when tool time is "as recorded", ms. */
export const PROMPT_TOOL_MS = 200;
const SYNTHETIC_OUTPUT_BYTES = 1500;
const SYNTHETIC_OUTPUT_TOKENS = 60;

export type WorkloadChoice =
  | { kind: 'codex' }
  | { kind: 'synthetic'; tool_calls: number }
  | { kind: 'prompt'; text: string };

export interface DemoWorkload {
  label: string;
  /** One sentence for the page: where the tool outputs come from. */
  tools_note: string;
  instructions: string | null;
  tools: FunctionTool[];
  /**
   * One input per user turn; each lane's client continues its own conversation, except at a turn that
   * `replace_history` (a recorded compaction: its input is the whole context), which starts a new one, as the bench's
   * replay does.
   */
  userTurns: Array<{ input: InputItem[]; replace_history?: true }>;
  parallel_tool_calls: boolean;
  /** Model calls the run makes, when known in advance (replays). */
  model_calls: number | null;
  /** Output tokens the model decodes in the whole run, at least (replays: the recorded figures; 0 when unknown). */
  min_output_tokens: number;
  /** A lane's tool time when tool time is "as recorded", at least (each model call's calls run at once: their longest). */
  min_tool_ms: number;
  policy(): ModelPolicy;
  /** The output of one tool call and how long it takes when tool time is "as recorded". */
  toolResult(callId: string, args: string): { output: string; duration_ms: number } | null;
}

export interface WorkloadLimits {
  maxToolCalls: number;
  maxPromptBytes: number;
}

export const EXEC_COMMAND: FunctionTool = {
  type: 'function',
  name: 'exec_command',
  description: 'Run a shell command and return its output.',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'], additionalProperties: false },
};

export function codexAvailable(path: string): boolean {
  return existsSync(path);
}

let loaded: { path: string; workload: Workload } | null = null;

/**
 * The demo's Codex workload, read once per path (`llr serve` reads an explicit --demo-workload at start-up, so a
 * file the reader refuses exits 2 there). It was read on every race: a file the reader refused failed each race
 * with a 500 server_error, and a large one held the event loop for seconds per race.
 */
export function demoCodexWorkload(path: string): Workload {
  if (loaded?.path !== path) loaded = { path, workload: loadWorkloadFile(path) };
  return loaded.workload;
}

/**
 * What the page calls the Codex workload: the bundled run, or the file `llr serve --demo-workload` gave (by its name:
 * it was called the bundled run whatever file it was; outside attack atk89 F5). `start`: capitalised, for a label.
 */
export function codexLabel(codexPath: string, start: boolean): string {
  const label = codexPath === DEFAULT_DEMO_WORKLOAD ? 'the bundled Codex CLI run' : `the run of ${basename(codexPath).slice(0, 80)}`;
  return start ? label.charAt(0).toUpperCase() + label.slice(1) : label;
}

/** Build the chosen workload; a bad choice is a WireError naming the field. */
export function buildWorkload(choice: WorkloadChoice, limits: WorkloadLimits, codexPath: string): DemoWorkload {
  switch (choice.kind) {
    case 'codex': {
      if (!codexAvailable(codexPath)) throw new WireError('invalid_value', `The bundled Codex run is not installed (${codexPath}).`, 'workload');
      return fromReplay(demoCodexWorkload(codexPath), codexLabel(codexPath, false), `Tools answer with the outputs the ${codexPath === DEFAULT_DEMO_WORKLOAD ? 'Codex ' : ''}run recorded.`);
    }
    case 'synthetic': {
      const n = choice.tool_calls;
      if (!Number.isSafeInteger(n) || n < 1 || n > limits.maxToolCalls) {
        throw new WireError('invalid_value', `tool_calls must be an integer from 1 to ${limits.maxToolCalls}.`, 'tool_calls');
      }
      const w = syntheticWorkload({ turns: n + 1, toolOutputBytes: SYNTHETIC_OUTPUT_BYTES, outputTokensPerTurn: SYNTHETIC_OUTPUT_TOKENS, seed: 1, toolDurationMs: SYNTHETIC_TOOL_MS });
      return fromReplay(w, `a synthetic run of ${n} tool call${n === 1 ? '' : 's'}`, `Tools answer with generated shell output (${SYNTHETIC_OUTPUT_BYTES} bytes each; ${SYNTHETIC_TOOL_MS} ms each "as recorded").`);
    }
    case 'prompt':
      return fromPrompt(choice.text, limits);
    default: {
      const never: never = choice;
      throw new WireError('invalid_value', `Unknown workload ${JSON.stringify(never)}.`, 'workload');
    }
  }
}

/**
 * What each lane runs once before the race, with a model of its own: a
 * synthetic replay of two tool calls, so the paths the race takes (replay,
 * pause and append, previous_response_id, re-sent history) are warm.
 */
export function warmUpWorkload(): DemoWorkload {
  const w = syntheticWorkload({ turns: 3, toolOutputBytes: 200, outputTokensPerTurn: 20, seed: 2 });
  return fromReplay(w, 'warm-up', '');
}

function fromReplay(w: Workload, label: string, note: string): DemoWorkload {
  const turns = flatModelTurns(w);
  let tokens = 0;
  let toolMs = 0;
  for (const t of turns) {
    tokens += t.output_tokens ?? 0;
    toolMs += Math.max(0, ...callsOf(t).map((c) => toolWaitMs(w.toolOutputs[c.call_id]?.duration_ms ?? 0)));
  }
  return {
    label,
    tools_note: note,
    instructions: w.instructions,
    tools: w.tools,
    // A compaction's turn kept: dropped, every lane re-sent the history from before it (outside attack atk106 F3).
    userTurns: w.userTurns.map((u) => ({ input: u.input, ...(u.replace_history && { replace_history: true as const }) })),
    parallel_tool_calls: true,
    model_calls: turns.length,
    min_output_tokens: tokens,
    min_tool_ms: toolMs,
    policy: () => replayPolicy(turns),
    // Own properties only, each waited as the readers take a recorded time (toolWaitMs: 0 to MAX_TOOL_MS).
    toolResult: (callId) => {
      const r = ownValue(w.toolOutputs, callId);
      return r ? { output: r.output, duration_ms: toolWaitMs(r.duration_ms) } : null;
    },
  };
}

function fromPrompt(text: string, limits: WorkloadLimits): DemoWorkload {
  if (typeof text !== 'string' || text.trim() === '') throw new WireError('invalid_value', 'The prompt is empty.', 'prompt');
  if (Buffer.byteLength(text) > limits.maxPromptBytes) throw new WireError('payload_too_large', `The prompt is longer than ${limits.maxPromptBytes} bytes.`, 'prompt');
  // Counted as the model finds them (auto-policy.ts): a count of its own (`/^\s*\$ \S/`) missed `$  ls` (two spaces),
  // which the model runs, so a prompt of such lines ran up to the policy's own 64 calls past --demo-max-tool-calls, and
  // the page announced one model call.
  const commands = dollarLines(text);
  const lines = commands.length;
  const most = promptMaxLines(limits.maxToolCalls);
  if (lines > most) {
    const why = most < limits.maxToolCalls ? ` (the simulated model runs at most ${MAX_CALLS_PER_TURN} commands for one message)` : '';
    throw new WireError('invalid_value', `The prompt has ${lines} "$ " lines; at most ${most}${why}.`, 'prompt');
  }
  const standIn = (cmd: string) => `(llr demo: \`${cmd}\` was not run; this is a fixed stand-in output)`;
  // At its call cap the model sums its calls up by tool name (auto-policy.ts `plan`, (c)), else by command.
  const capped = lines >= MAX_CALLS_PER_TURN;
  const summary = summaryText(capped ? 'Called' : 'Ran', capped ? 'tool' : 'command', commands.map((cmd) => ({ label: capped ? EXEC_COMMAND.name : cmd, output: standIn(cmd) })));
  return {
    label: lines > 0 ? `your prompt (${lines} "$ " line${lines === 1 ? '' : 's'})` : 'your prompt',
    tools_note: `No command runs on the server: every "$ " line gets a fixed stand-in output (${PROMPT_TOOL_MS} ms each "as recorded").`,
    instructions: null,
    tools: [EXEC_COMMAND],
    userTurns: [{ input: [{ type: 'message', role: 'user', content: text }] }],
    // One command per model call, so each line is a step on the timeline.
    parallel_tool_calls: false,
    model_calls: lines > 0 ? lines + 1 : 1,
    // Each call decodes its command's arguments, as the model writes them (auto-policy.ts `shellCall`), and the last
    // its summary, a line for each command and its output: counted as 0, a prompt of 100 long commands at 65 tokens/s
    // was estimated at 15 s, accepted under a 60 s limit, and every lane failed at the deadline after 32 calls (outside
    // attack atk106 F2); the summary left out, 100 lines of `$ echo a` were 2.5 times short (atk108 F1).
    min_output_tokens: visibleTokens([
      ...commands.map((cmd): PlannedItem => ({ type: 'function_call', name: EXEC_COMMAND.name, arguments: JSON.stringify({ cmd }) })),
      ...(lines > 0 ? [{ type: 'message' as const, text: summary }] : []),
    ]),
    min_tool_ms: lines * PROMPT_TOOL_MS,
    policy: () => autoPolicy(),
    toolResult: (_id, args) => ({ output: standIn(commandOf(args)), duration_ms: PROMPT_TOOL_MS }),
  };
}

/**
 * The most `$ ` lines a prompt may have: `--demo-max-tool-calls`, and what the simulated model runs for one message
 * (past it, it summarised after 64 while the race was labelled with every line; outside attack atk108 F2).
 */
export function promptMaxLines(maxToolCalls: number): number {
  return Math.min(maxToolCalls, MAX_CALLS_PER_TURN);
}

function commandOf(args: string): string {
  try {
    const v = JSON.parse(args) as { cmd?: unknown };
    return typeof v.cmd === 'string' ? v.cmd : args;
  } catch {
    return args;
  }
}
