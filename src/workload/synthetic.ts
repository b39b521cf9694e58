/**
 * Synthetic workloads for scaling curves: one user turn of `turns` model
 * calls, each but the last running one `exec_command` whose output is exactly
 * `toolOutputBytes` bytes of plausible shell output (grep hits, source lines,
 * listings, test runs, diffs), the last one answering with a message.
 *
 * Used by `llr serve --synthetic` and by `llr bench` to sweep the run length
 * (10 to 200 calls) and the tool output size independently of any recorded
 * run. Deterministic for a seed:
 * the same options give a deep-equal Workload. Leaves out everything a real
 * run varies that the sweep holds fixed: output sizes and token counts do not
 * vary per call, there is no reasoning, parallel calls, hosted tools, or
 * second user turn, and no input tokens are "recorded" (the server counts
 * them when it renders the prompt).
 */
import { hexString, intBetween, mulberry32, pick, type Rng } from '../model/rng.js';
import { quoted } from '../terminal-text.js';
import { visibleTokens } from '../model/policies.js';
import type { ReplayTurn } from '../model/types.js';
import type { FunctionTool } from '../protocol/objects.js';
import { MAX_TOKEN_COUNT, type Workload } from './types.js';

export interface SyntheticOptions {
  /** Model calls in the run, the final message included (>= 1). */
  turns: number;
  /** Size of every tool output, in bytes (ASCII, so also characters). */
  toolOutputBytes: number;
  /**
   * Output tokens each model call decodes (visible ones first, the rest as reasoning); a call whose command or answer
   * takes more is given what it takes, which the replay decodes anyway (the workload said the smaller figure, and was
   * noted for it: replayable.ts `noteRaisedOutputs`).
   */
  outputTokensPerTurn: number;
  seed: number;
  /** How long every tool call takes; default 0 (measure the API, not the tools). */
  toolDurationMs?: number;
}

const EXEC_COMMAND: FunctionTool = {
  type: 'function',
  name: 'exec_command',
  description: 'Runs a shell command in the workspace and returns its output.',
  parameters: {
    type: 'object',
    properties: { cmd: { type: 'string', description: 'The shell command to run.' } },
    required: ['cmd'],
    additionalProperties: false,
  },
  strict: true,
};

const DIRS = ['engine', 'model', 'pipeline', 'modes', 'transport', 'store', 'client', 'protocol'] as const;
const FILES = ['loop', 'registry', 'render', 'tokenize', 'session', 'cache', 'events', 'parse', 'usage', 'stream'] as const;
const IDENTS = ['pending', 'callId', 'response', 'items', 'tokens', 'usage', 'state', 'conn', 'signal', 'output'] as const;
const VERBS = ['append', 'settle', 'render', 'resolve', 'cancel', 'flush', 'take', 'record'] as const;
const TYPES = ['string', 'number', 'InputItem[]', 'Response', 'Usage', 'Promise<void>'] as const;
const TASKS = [
  'Find where pending tool calls are settled on disconnect and summarise the flow.',
  'Check how usage is computed for a continued response and fix any double counting.',
  'Trace how a cancelled response releases its pending calls and report what is missing.',
] as const;
const SENTENCE_WORDS = [...IDENTS, ...VERBS, 'the', 'a', 'is', 'when', 'then', 'each'] as const;

type Kind = 'rg' | 'sed' | 'ls' | 'test' | 'diff';
const KINDS: readonly Kind[] = ['rg', 'sed', 'ls', 'test', 'diff'];

/**
 * Bounds of what a synthetic workload holds in memory, built whole before
 * the server listens: its calls, and the text of all its tool outputs.
 * `--synthetic 100000,1000000,1` (100 GB) grew without end at start-up.
 */
export const SYNTHETIC_MAX_TURNS = 100_000;
export const SYNTHETIC_MAX_OUTPUT_BYTES = 256 * 1024 * 1024;

export function syntheticWorkload(opts: SyntheticOptions): Workload {
  const { turns, toolOutputBytes, outputTokensPerTurn, seed, toolDurationMs = 0 } = opts;
  checkInt('turns', turns, 1);
  checkInt('toolOutputBytes', toolOutputBytes, 0);
  if (turns > SYNTHETIC_MAX_TURNS) throw new RangeError(`syntheticWorkload: turns must be at most ${SYNTHETIC_MAX_TURNS}, got ${turns}`);
  if ((turns - 1) * toolOutputBytes > SYNTHETIC_MAX_OUTPUT_BYTES) {
    throw new RangeError(
      `syntheticWorkload: the tool outputs ((turns - 1) x toolOutputBytes) must total at most ${SYNTHETIC_MAX_OUTPUT_BYTES} bytes, got ${(turns - 1) * toolOutputBytes}`,
    );
  }
  checkInt('outputTokensPerTurn', outputTokensPerTurn, 1);
  // The bench hands its server processes the workload as a neutral file, whose schema takes no token figure past it.
  if (outputTokensPerTurn > MAX_TOKEN_COUNT) throw new RangeError(`syntheticWorkload: outputTokensPerTurn must be at most ${MAX_TOKEN_COUNT} (10^9, as every token figure of a workload), got ${outputTokensPerTurn}`);
  checkInt('seed', seed, Number.MIN_SAFE_INTEGER);
  if (!Number.isFinite(toolDurationMs) || toolDurationMs < 0) {
    throw new RangeError(`syntheticWorkload: toolDurationMs must be a finite number >= 0, got ${toolDurationMs}`);
  }

  const rng = mulberry32(seed);
  const modelTurns: ReplayTurn[] = [];
  const toolOutputs: Workload['toolOutputs'] = {};
  for (let i = 0; i < turns - 1; i++) {
    const kind = pick(rng, KINDS);
    const dir = pick(rng, DIRS);
    const file = pick(rng, FILES);
    const call_id = `call_syn${String(i).padStart(4, '0')}${hexString(rng, 16)}`;
    const cmd = command(rng, kind, dir, file);
    const output: ReplayTurn['output'] = [{ type: 'function_call', name: 'exec_command', arguments: JSON.stringify({ cmd }), call_id }];
    modelTurns.push({ output, output_tokens: Math.max(outputTokensPerTurn, visibleTokens(output)) });
    toolOutputs[call_id] = { output: shellOutput(rng, kind, dir, file, toolOutputBytes), duration_ms: toolDurationMs };
  }
  const summary = `I ran ${turns - 1} commands. ${sentence(rng, 16)} ${sentence(rng, 12)}`;
  const answer: ReplayTurn['output'] = [{ type: 'message', text: summary }];
  modelTurns.push({ output: answer, output_tokens: Math.max(outputTokensPerTurn, visibleTokens(answer)) });

  return {
    name: `synthetic-t${turns}-b${toolOutputBytes}-s${seed}`,
    source:
      `synthetic: turns=${turns}, toolOutputBytes=${toolOutputBytes}, ` +
      `outputTokensPerTurn=${outputTokensPerTurn}, seed=${seed}, toolDurationMs=${toolDurationMs}`,
    instructions: null,
    tools: [EXEC_COMMAND],
    userTurns: [
      {
        input: [
          {
            type: 'message',
            role: 'developer',
            content: [
              {
                type: 'input_text',
                text: 'You are a coding agent in a sandboxed TypeScript repository. Use exec_command to inspect and test the code; answer briefly when done.',
              },
            ],
          },
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: pick(rng, TASKS) }] },
        ],
        modelTurns,
      },
    ],
    toolOutputs,
    recorded: {
      model_calls: turns,
      input_tokens: [],
      output_tokens: modelTurns.map((t) => t.output_tokens!),
    },
    stats: {
      lines: 0,
      function_calls: turns - 1,
      custom_tool_calls: 0,
      hosted_calls: 0,
      tool_output_bytes: (turns - 1) * toolOutputBytes,
    },
  };
}

function checkInt(name: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) {
    throw new RangeError(`syntheticWorkload: ${name} must be an integer >= ${min}, got ${v}`);
  }
}

function command(rng: Rng, kind: Kind, dir: string, file: string): string {
  switch (kind) {
    case 'rg':
      return `rg -n "${pick(rng, IDENTS)}" src/${dir}`;
    case 'sed':
      return `sed -n '1,${intBetween(rng, 4, 40) * 10}p' src/${dir}/${file}.ts`;
    case 'ls':
      return `ls -la src/${dir}`;
    case 'test':
      return `npx vitest run test/unit/${file}.test.ts`;
    case 'diff':
      return `git diff -- src/${dir}/${file}.ts`;
  }
}

/** Lines of the kind `kind` prints, cut to exactly `bytes` (everything is ASCII). */
function shellOutput(rng: Rng, kind: Kind, dir: string, file: string, bytes: number): string {
  let out = '';
  let n = intBetween(rng, 1, 200);
  while (out.length < bytes) {
    n += intBetween(rng, 1, 9);
    out += outputLine(rng, kind, dir, file, n) + '\n';
  }
  return out.slice(0, bytes);
}

function outputLine(rng: Rng, kind: Kind, dir: string, file: string, n: number): string {
  switch (kind) {
    case 'rg':
      return `src/${dir}/${pick(rng, FILES)}.ts:${n}:${codeLine(rng)}`;
    case 'sed':
      return codeLine(rng);
    case 'ls':
      return `-rw-r--r--  1 dev  dev  ${intBetween(rng, 200, 24000)} May 11 11:${String(n % 60).padStart(2, '0')} ${pick(rng, FILES)}.ts`;
    case 'test':
      return ` PASS  test/unit/${file}.test.ts > ${sentence(rng, 5).slice(0, -1)} (${intBetween(rng, 1, 90)} ms)`;
    case 'diff':
      return `${pick(rng, ['+', '-', ' ', ' '])} ${codeLine(rng)}`;
  }
}

function codeLine(rng: Rng): string {
  const a = pick(rng, IDENTS);
  const b = pick(rng, IDENTS);
  const verb = pick(rng, VERBS);
  switch (intBetween(rng, 0, 5)) {
    case 0:
      return `  const ${a} = ${b}.${verb}(${pick(rng, IDENTS)});`;
    case 1:
      return `  if (${a} === undefined) return ${b};`;
    case 2:
      return `export function ${verb}${a[0]!.toUpperCase()}${a.slice(1)}(${b}: ${pick(rng, TYPES)}): ${pick(rng, TYPES)} {`;
    case 3:
      return `  // ${sentence(rng, 8).slice(0, -1).toLowerCase()}`;
    case 4:
      return `  await ${a}.${verb}(${b}, { signal });`;
    default:
      return '}';
  }
}

function sentence(rng: Rng, words: number): string {
  const ws: string[] = [];
  for (let i = 0; i < words; i++) ws.push(pick(rng, SENTENCE_WORDS));
  const s = ws.join(' ');
  return `${s[0]!.toUpperCase()}${s.slice(1)}.`;
}


/** `T,B,K` → synthetic options (turns, tool output bytes, output tokens per turn). */
export function parseSyntheticSpec(spec: string, seed = 1): SyntheticOptions {
  const parts = spec.split(',').map((s) => Number(s.trim()));
  const [turns, toolOutputBytes, outputTokensPerTurn] = parts;
  if (parts.length !== 3 || parts.some((n) => !Number.isSafeInteger(n) || n < 0)) {
    throw new RangeError(`--synthetic needs TURNS,TOOL_OUTPUT_BYTES,OUTPUT_TOKENS (three integers), got ${quoted(spec)}`);
  }
  return { turns: turns!, toolOutputBytes: toolOutputBytes!, outputTokensPerTurn: outputTokensPerTurn!, seed };
}

export function syntheticFromSpec(spec: string, seed = 1): Workload {
  return syntheticWorkload(parseSyntheticSpec(spec, seed));
}
