/**
 * The Workload shape: one recorded (or synthetic) agent run, cut into user
 * turns and model calls, that the benchmark replays through every design.
 *
 * Produced by the Codex rollout reader (`codex.ts`), the neutral format
 * reader (`format.ts`: the JSON `llr bench` writes, documented as
 * docs/workload.schema.json) and `synthetic.ts`; consumed by `llr serve
 * --workload`, the bench's replay driver and the report. Types and the
 * readers' error only: no parsing, no I/O.
 *
 * Replay contract: for each user turn the client sends `input`, then for each
 * model turn the model replays `output` (decoding `output_tokens` in all);
 * after every model turn but the last of a user turn, the client answers each
 * of its function calls with `toolOutputs[call_id]`, waiting `duration_ms`
 * first. A user turn's last model turn normally has no function calls; when it
 * has (the run was interrupted), the next user turn's `input` starts with
 * their outputs. A user turn with `replace_history` starts a new
 * conversation (the recorded agent compacted its context): its `input` is the
 * whole context the agent continued from.
 */
import type { ReplayTurn } from '../model/types.js';
import type { FunctionTool, InputItem } from '../protocol/objects.js';

export interface UserTurn {
  /** What the client sends to start this user turn (the first one includes the developer preamble). */
  input: InputItem[];
  /** Each model call of the user turn, in order. */
  modelTurns: ReplayTurn[];
  /** The conversation was replaced before this turn (compaction): the client starts a new one with `input`. */
  replace_history?: boolean;
}

/** Where a per-call figure comes from: the source's own usage telemetry, or a documented estimate. */
export type FigureSource = 'recorded' | 'inferred';

/** Token figures of one replayed model call (see docs/benchmarks.md, "Reading a workload"). */
export interface CallFigures {
  input_tokens: number;
  input_source: FigureSource;
  output_tokens: number;
  output_source: FigureSource;
  /** 1-based line of the source record that opened the call; 0 when there is none. */
  line: number;
}

/**
 * The largest token count one model call's figure may have (10^9: a thousand times the largest context window
 * of 2026's models). Both readers refuse a larger one at its place: a workload file holds at most 512 MiB, so a few
 * million recorded calls at most, and their sum (a long-lived run's usage adds every call's) stays below 2^53,
 * exact. Without it a `token_count` of 10^15 read, and a few such calls summed past 2^53.
 */
export const MAX_TOKEN_COUNT = 1_000_000_000;

/**
 * The longest one replayed tool call waits, ms (5 minutes): a recorded tool time past it is taken as this. A rollout
 * times a tool by its records' timestamps, and a clock that leaps forward between a call and its output (a laptop
 * asleep, an NTP step, a session resumed the next day) recorded hours or days: a bench run with `--tool-factor` then
 * slept them until its deadline (at most 2^31 - 1 ms, 24.8 days), and a demo race with tool time "as recorded" until
 * its own. Codex's tools (a command's timeout, a sub-agent wait) answer well within it.
 */
export const MAX_TOOL_MS = 300_000;

/**
 * A recorded tool time as a replay waits it: negative (a clock that went backwards) or not a number is 0, past
 * MAX_TOOL_MS (a clock that leapt forward) is MAX_TOOL_MS. The readers store durations this way (and note each one
 * they changed); the bench and the demo apply it again to whatever workload they are given.
 */
export function toolWaitMs(ms: number): number {
  if (!(ms > 0)) return 0;
  return Math.min(ms, MAX_TOOL_MS);
}

/** A record the reader did not replay, and why. */
/** Whether `s` is Unicode text: no lone surrogate (`String.prototype.isWellFormed`, Node 20; not in the ES2023 lib). */
export const isUnicodeText = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** What the readers note of model output holding a lone surrogate (atk46 F6 for Codex rollouts, atk66 F3 for this format). */
export const LONE_SURROGATE_NOTE = 'holds a lone surrogate (half of a UTF-16 pair, not Unicode text): the replay decodes U+FFFD in its place, as any UTF-8 encoder writes it';
/**
 * A call's name is streamed as read, not decoded from tokens (atk84 F4: noted as U+FFFD); it is read with U+FFFD in
 * place of the surrogate, as a client's JSON reader could not take it (well-formed.ts; atk117 F2).
 */
export const LONE_SURROGATE_NAME_NOTE = 'holds a lone surrogate (half of a UTF-16 pair, not Unicode text): the replay sends the name with U+FFFD in its place, as a client\'s JSON reader could not take it';

export interface Skipped {
  line: number;
  what: string;
  why: string;
  /** Later lines with the same note, counted, not listed (a note is kept for its first six lines). */
  more?: number;
}

export interface Workload {
  /** Short name, e.g. the file's basename. */
  name: string;
  /** Provenance to cite: the citation for a shipped file, else the path or the generator's options. */
  source: string;
  /**
   * The `instructions` the agent sent with every call (Codex: the session's
   * base instructions); null when the source records none. Whether a design
   * re-sends them per call is the replay driver's decision.
   */
  instructions: string | null;
  /** Function tools the run used; custom tools appear as function tools taking `{input}`. */
  tools: FunctionTool[];
  userTurns: UserTurn[];
  /** By call_id: what the client answered and how long the tool took. */
  toolOutputs: Record<string, { output: string; duration_ms: number }>;
  /** Per recorded model call, from the source's usage telemetry (empty when not recorded). */
  recorded: { model_calls: number; input_tokens: number[]; output_tokens: number[] };
  /** Per replayed model call (flat, in order): token figures, each recorded or inferred. Absent: none known. */
  calls?: CallFigures[];
  /** What the source is (format, agent, version, session kind); free-form strings for `llr workload inspect`. */
  origin?: Record<string, string>;
  /** Records read but not replayed, and why. */
  skipped?: Skipped[];
  stats: {
    /** Records read (non-blank lines); 0 for synthetic workloads. */
    lines: number;
    function_calls: number;
    custom_tool_calls: number;
    /** Server-side tool calls (web search, ...): dropped from replay. */
    hosted_calls: number;
    tool_output_bytes: number;
  };
}

/** A file that is not a readable workload. `line` is 1-based; 0 when the whole file is at fault. */
export class WorkloadError extends Error {
  readonly line: number;

  constructor(line: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.line = line;
  }
}
