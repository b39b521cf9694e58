/**
 * The default policy, for people and real clients (Codex CLI, the Agents
 * SDK): it reads the latest user message and behaves like a small, obedient
 * agent model.
 *
 *  (a) `$ cmd` lines + a shell tool (`exec_command` or `shell`) offered:
 *      run each line once (all at once when `parallel_tool_calls`), then
 *      summarise what the commands printed.
 *  (b) a forced function (`tool_choice`), or a function tool named in the
 *      message: call it with arguments generated from its schema, then
 *      summarise its output.
 *  (c) otherwise: a deterministic reply of 20–60 tokens derived from the
 *      seeded rng and the message.
 *
 * Everything depends only on the request and the rng (seeded from the
 * conversation), so concurrent runs need no shared state. Leaves out any
 * understanding of the message beyond these rules, and `tool_choice:
 * "required"` after the tool ran: it answers in text rather than calling
 * again forever.
 */
import type { FunctionTool, InputMessage, ToolChoice } from '../protocol/objects.js';
import { callsAfter, contentText, latestUserIndex, outputText } from './conversation.js';
import type { ModelPolicy, PlannedItem, PlannedOutput } from './policies.js';
import { intBetween, type Rng, words } from './rng.js';
import { argsFromSchema } from './schema-args.js';
import { countTokens } from './tokenizer.js';
import type { ModelRequest } from './types.js';

/** Shell tools in order of preference: Codex's unified exec, then the classic `shell`. */
const SHELL_TOOLS = ['exec_command', 'shell'] as const;
/** A backstop against a client that keeps answering calls without ever getting a final answer. */
const MAX_CALLS_PER_TURN = 64;
/** Summary lines quote at most this many characters of a tool's output. */
const SUMMARY_CHARS = 80;

type Call = ReturnType<typeof callsAfter>[number];

export function autoPolicy(): ModelPolicy {
  return { name: 'auto', plan };
}

function plan(req: ModelRequest, rng: Rng): PlannedOutput {
  const u = latestUserIndex(req.items);
  if (u < 0) return say('Hello! Ready when you are.');
  const userText = contentText((req.items[u] as InputMessage).content);
  const after = callsAfter(req.items, u);
  const tools = req.tools.filter((t) => t.type === 'function');
  const forced = forcedFunction(req.tool_choice);

  if (req.tool_choice !== 'none' && after.length < MAX_CALLS_PER_TURN) {
    // (a) shell commands
    const shell = SHELL_TOOLS.map((n) => tools.find((t) => t.name === n)).find((t) => t !== undefined);
    const lines = dollarLines(userText);
    if (shell && lines.length > 0 && (forced === undefined || forced === shell.name)) {
      const done = after.filter((c) => c.call.name === shell.name);
      const pending = withoutCalled(lines, done.map((c) => commandOf(c.call.arguments)));
      if (pending.length > 0) {
        const batch = req.parallel_tool_calls ? pending : pending.slice(0, 1);
        return { items: batch.map((line) => shellCall(shell.name, line)) };
      }
      return say(summary('Ran', 'command', done, (c) => commandOf(c.call.arguments)));
    }

    // (b) a forced or named function tool
    const targets = targetTools(tools, req.tool_choice, forced, userText);
    if (targets.length > 0) {
      const calledNames = new Set(after.map((c) => c.call.name));
      const pending = targets.filter((t) => !calledNames.has(t.name));
      if (pending.length > 0) {
        const batch = req.parallel_tool_calls ? pending : pending.slice(0, 1);
        return { items: batch.map((t) => functionCall(t.name, argsFromSchema(t.parameters, rng))) };
      }
      const done = after.filter((c) => targets.some((t) => t.name === c.call.name));
      return say(summary('Called', 'tool', done, (c) => c.call.name));
    }
  }

  // (c) plain reply; tool results since the user spoke still deserve a summary.
  if (after.length > 0) return say(summary('Called', 'tool', after, (c) => c.call.name));
  return say(reply(rng, userText));
}

function say(text: string): PlannedOutput {
  return { items: [{ type: 'message', text }] };
}

function functionCall(name: string, args: unknown): PlannedItem {
  return { type: 'function_call', name, arguments: JSON.stringify(args) };
}

function shellCall(tool: string, line: string): PlannedItem {
  // Codex's exec_command takes a command line; the classic shell tool takes argv.
  return tool === 'exec_command'
    ? functionCall(tool, { cmd: line })
    : functionCall(tool, { command: ['bash', '-lc', line] });
}

function forcedFunction(choice: ToolChoice): string | undefined {
  if (typeof choice === 'object' && choice.type === 'function' && typeof choice.name === 'string') return choice.name;
  return undefined;
}

/** Lines of the message that start with `$ `, without the prompt sign. */
export function dollarLines(text: string): string[] {
  const lines: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trimStart();
    if (line.startsWith('$ ') && line.slice(2).trim() !== '') lines.push(line.slice(2).trim());
  }
  return lines;
}

/** The command line a shell call ran, read back from its arguments (either tool's shape). */
function commandOf(args: string): string {
  try {
    const parsed: unknown = JSON.parse(args);
    if (typeof parsed !== 'object' || parsed === null) return '';
    const { cmd, command } = parsed as { cmd?: unknown; command?: unknown };
    if (typeof cmd === 'string') return cmd.trim();
    if (typeof command === 'string') return command.trim();
    if (Array.isArray(command) && command.every((x) => typeof x === 'string')) {
      const argv = command as string[];
      const viaShell = argv.length === 3 && /sh$/.test(argv[0]!) && /^-l?c$/.test(argv[1]!);
      return (viaShell ? argv[2]! : argv.join(' ')).trim();
    }
  } catch {
    // Arguments the client mangled: treat as a call that ran nothing we asked for.
  }
  return '';
}

/** `lines` minus those already run, as multisets: a line written twice runs twice. */
function withoutCalled(lines: readonly string[], called: readonly string[]): string[] {
  const left = [...called];
  return lines.filter((line) => {
    const i = left.indexOf(line);
    if (i < 0) return true;
    left.splice(i, 1);
    return false;
  });
}

function targetTools(
  tools: readonly FunctionTool[],
  choice: ToolChoice,
  forced: string | undefined,
  userText: string,
): FunctionTool[] {
  if (forced !== undefined) return tools.filter((t) => t.name === forced);
  const named = tools.filter((t) => mentions(userText, t.name));
  if (named.length > 0) return named;
  const first = tools[0];
  return choice === 'required' && first ? [first] : [];
}

function mentions(text: string, name: string): boolean {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?<![\\w-])${escaped}(?![\\w-])`).test(text);
}

function summary(verb: string, noun: string, calls: readonly Call[], label: (c: Call) => string): string {
  const lines = calls.map((c) => `- \`${label(c)}\` → ${firstLine(c.output ? outputText(c.output.output) : '')}`);
  return [`${verb} ${calls.length} ${noun}${calls.length === 1 ? '' : 's'}.`, ...lines].join('\n');
}

/**
 * The first meaningful line of a tool's output. Codex wraps command output in
 * a header ending with an `Output:` line, and the classic shell tool returns
 * JSON `{"output": "...", "metadata": {...}}`; both are unwrapped first.
 */
export function firstLine(output: string): string {
  let body = output;
  try {
    const parsed: unknown = JSON.parse(output);
    if (typeof parsed === 'object' && parsed !== null && typeof (parsed as { output?: unknown }).output === 'string') {
      body = (parsed as { output: string }).output;
    }
  } catch {
    // Not JSON: plain text output.
  }
  const marker = body.match(/^Output:\r?\n/m);
  if (marker?.index !== undefined) body = body.slice(marker.index + marker[0].length);
  const line = body.split(/\r?\n/).find((l) => l.trim() !== '')?.trim() ?? '';
  if (line === '') return '(no output)';
  return line.length > SUMMARY_CHARS ? `${line.slice(0, SUMMARY_CHARS - 1)}…` : line;
}

/**
 * A reply of about 20–60 tokens: a short echo of the message, then sentences
 * of seeded words until a target drawn from 20–50 is reached (the last
 * sentence may overshoot it by up to ten words).
 */
function reply(rng: Rng, userText: string): string {
  const target = intBetween(rng, 20, 50);
  // The first six words, read lazily: splitting a 16 MiB message into words only to keep six stalled the loop.
  const first: string[] = [];
  for (const m of userText.matchAll(/\S+/g)) if (first.push(m[0]) === 6) break;
  const topic = first.join(' ').slice(0, 40);
  let text = topic === '' ? 'Understood.' : `You said: "${topic}".`;
  while (countTokens(text) < target) {
    const sentence = words(rng, intBetween(rng, 5, 10)).join(' ');
    text += ` ${sentence[0]!.toUpperCase()}${sentence.slice(1)}.`;
  }
  return text;
}
