/**
 * The default policy, for people and real clients (Codex CLI, the Agents
 * SDK, the AI SDK, LangChain): it reads the latest user message and behaves
 * like a small, obedient agent model.
 *
 *  (a) `$ cmd` lines + a shell tool (`exec_command` or `shell`) offered:
 *      run each line once (all at once when `parallel_tool_calls`), then
 *      summarise what the commands printed.
 *  (b) function tools the message asks for (see tool-match.ts: its exact
 *      name, a content word of its name, or two words of its description),
 *      or the forced one: call each once with arguments generated from its
 *      schema, string slots (location, query, path, url) filled from the
 *      message, then summarise the outputs.
 *  (c) otherwise: a deterministic reply of 20–60 tokens derived from the
 *      seeded rng and the message.
 *
 * Text answers follow `text.format`: JSON that fits the schema (structured
 * outputs) or a JSON object, see `asJson`.
 *
 * `tool_choice` is obeyed as the API does: `"none"` never calls; a named
 * function or `"required"` (also `allowed_tools` in `required` mode) calls a
 * tool on *every* model call, even after the tool has run (the API does,
 * and the AI SDK fails the step otherwise); the client ends such a loop.
 * `allowed_tools` restricts the tools considered. Everything depends only on
 * the request and the rng (seeded from the conversation), so concurrent runs
 * need no shared state.
 */
import type { FunctionCall, FunctionTool, InputMessage, TextFormat, ToolChoice } from '../protocol/objects.js';
import { contentText, outputText, TurnScan, type TurnCall } from './conversation.js';
import type { ModelPolicy, PlannedItem, PlannedOutput } from './policies.js';
import { intBetween, type Rng, words } from './rng.js';
import { argsFromSchema, fitsSchema, setOwn, valueFromSchema } from './schema-args.js';
import { fitString } from './schema-strings.js';
import { fillFromMessage, messageIndex, relevance } from './tool-match.js';
import { countTokens } from './tokenizer.js';
import type { ModelRequest } from './types.js';

/** Shell tools in order of preference: Codex's unified exec, then the classic `shell`. */
const SHELL_TOOLS = ['exec_command', 'shell'] as const;
/** Unforced, a backstop against a client that keeps answering calls without ever getting a final answer. */
export const MAX_CALLS_PER_TURN = 64;
/** Summary lines quote at most this many characters of a tool's output. */
const SUMMARY_CHARS = 80;

type Call = TurnCall;

/** The request's turn: its context's kept scan brought up to date, or a scan of its items. */
function turnOf(req: ModelRequest): TurnScan {
  return (req.turns ?? new TurnScan()).update(req.items);
}

export function autoPolicy(): ModelPolicy {
  return { name: 'auto', plan };
}

/** What `tool_choice` asks of the model. */
interface Choice {
  mode: 'none' | 'auto' | 'required';
  /** A named function the model must call. */
  name?: string;
  /** `allowed_tools`: the only tools the model may call. */
  allowed?: ReadonlySet<string>;
}

function readChoice(choice: ToolChoice): Choice {
  if (choice === 'none' || choice === 'auto' || choice === 'required') return { mode: choice };
  if (typeof choice === 'object' && choice !== null) {
    if (choice.type === 'function' && typeof choice.name === 'string') return { mode: 'required', name: choice.name };
    if (choice.type === 'allowed_tools') {
      const listed = Array.isArray(choice['tools']) ? (choice['tools'] as Array<{ type?: unknown; name?: unknown }>) : [];
      // A listed tool is a tool definition, its type included: `{type: "custom", name: "f"}` allows the custom tool f,
      // not a function f (it did, and the model called the function the list left out; `required` mode already
      // counted only the listed functions: protocol/parse.ts).
      const allowed = new Set(listed.filter((t) => t.type === 'function').map((t) => t.name).filter((n): n is string => typeof n === 'string'));
      return { mode: choice['mode'] === 'required' ? 'required' : 'auto', allowed };
    }
  }
  // Forcing a hosted tool we do not serve: the model may still use its functions.
  return { mode: 'auto' };
}

function plan(req: ModelRequest, rng: Rng): PlannedOutput {
  const turn = turnOf(req);
  const out = decide(req, rng, turn);
  const format = req.textFormat;
  if (format === undefined || format.type === 'text') return out;
  const u = turn.user;
  const userText = u < 0 ? '' : contentText((req.items[u] as InputMessage).content);
  return { ...out, items: out.items.map((item) => (item.type === 'message' ? { type: 'message', text: asJson(format, item.text, userText, rng) } : item)) };
}

/** Words naming a property that holds the answer itself. */
const ANSWER_PROPS = /^(answer|summary|response|reply|text|content|message|result|explanation|output)$/i;

/**
 * A text answer as the JSON `text.format` asks for: `json_object` wraps it as
 * `{"answer": …}`; `json_schema` generates a value that follows the schema
 * (schema-args.ts), string slots filled from the user's message
 * (tool-match.ts) and answer-like string properties holding the text.
 */
function asJson(format: Exclude<TextFormat, { type: 'text' }>, text: string, userText: string, rng: Rng): string {
  if (format.type === 'json_object') return JSON.stringify({ answer: text });
  const generated = valueFromSchema(format.schema, rng);
  if (typeof generated !== 'object' || generated === null || Array.isArray(generated)) return JSON.stringify(generated);
  const value = fillFromMessage(generated as Record<string, unknown>, format.schema, userText);
  const props = (format.schema['properties'] ?? {}) as Record<string, { type?: unknown }>;
  for (const [name, schema] of Object.entries(props)) {
    if (!ANSWER_PROPS.test(name) || schema.type !== 'string' || 'enum' in schema || 'const' in schema) continue;
    // The text where the property's bounds, format and pattern take it (cut to its maxLength); else the generated string.
    const fitted = fitString(schema as Record<string, unknown>, text);
    if (fitted !== undefined) setOwn(value, name, fitted);
  }
  // Filled slots the whole schema refuses (a `not`, a `propertyNames`, an `allOf` elsewhere): the generated value.
  return JSON.stringify(value === generated || fitsSchema(value, format.schema) ? value : generated);
}

/** A tool's arguments with slots filled from the user's message, where the whole schema still takes them. */
function filledArgs(parameters: FunctionTool['parameters'], rng: Rng, userText: string): Record<string, unknown> {
  const generated = argsFromSchema(parameters, rng);
  const filled = fillFromMessage(generated, parameters, userText);
  return filled === generated || fitsSchema(filled, parameters) ? filled : generated;
}

function decide(req: ModelRequest, rng: Rng, turn: TurnScan): PlannedOutput {
  const choice = readChoice(req.tool_choice);
  const tools = req.tools.filter((t) => t.type === 'function' && (choice.allowed?.has(t.name) ?? true));
  const forced = choice.mode === 'required' && tools.length > 0;
  const u = turn.user;
  if (u < 0 && !forced) return say('Hello! Ready when you are.');
  const userText = u < 0 ? '' : contentText((req.items[u] as InputMessage).content);
  const after = turn.calls;
  const batchOf = <T>(xs: T[]) => (req.parallel_tool_calls ? xs : xs.slice(0, 1));

  if (choice.mode !== 'none' && (forced || after.length < MAX_CALLS_PER_TURN)) {
    // (a) shell commands
    const shell = SHELL_TOOLS.map((n) => tools.find((t) => t.name === n)).find((t) => t !== undefined);
    const lines = u < 0 ? dollarLines(userText) : userLines(req.items[u] as InputMessage, userText);
    if (shell && lines.length > 0 && (choice.name === undefined || choice.name === shell.name)) {
      const done = turn.byName.get(shell.name) ?? [];
      const pending = withoutCalled(lines, commandCounts(turn, shell.name));
      if (pending.length > 0) return { items: batchOf(pending).map((line) => shellCall(shell, line, rng)) };
      if (forced) return { items: [shellCall(shell, lines[0]!, rng)] };
      return say(summary('Ran', 'command', done, (c) => callCommand(c.call)));
    }

    // (b) function tools the message asks for, or the forced one
    const targets = targetTools(tools, choice, userText);
    if (targets.length > 0) {
      const calledNames = turn.byName;
      const pending = targets.filter((t) => !calledNames.has(t.name));
      const call = (t: FunctionTool) => functionCall(t.name, filledArgs(t.parameters, rng, userText));
      if (pending.length > 0) return { items: batchOf(pending).map(call) };
      if (forced) return { items: [call(targets[0]!)] };
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

function shellCall(tool: FunctionTool, line: string, rng: Rng): PlannedItem {
  // Codex's exec_command takes a command line; the classic shell tool takes argv. A tool of that name whose schema
  // takes neither gets arguments generated from its schema, as any other tool.
  const args = tool.name === 'exec_command' ? { cmd: line } : { command: ['bash', '-lc', line] };
  return functionCall(tool.name, fitsSchema(args, tool.parameters) ? args : argsFromSchema(tool.parameters, rng));
}

/**
 * Longest `$ ` line run as a command (UTF-16 units). The model streams a
 * command back as the call's arguments, tokenizing them in one go: a
 * megabyte line held the event loop for seconds (outside attack). A longer
 * line is not a command, just text.
 */
export const MAX_COMMAND_CHARS = 16 * 1024;

/**
 * Lines of the message that start with `$ `, without the prompt sign (at most `MAX_COMMAND_CHARS` each): the
 * commands this policy runs. The demo counts a prompt's commands with it (src/demo/workloads.ts).
 */
export function dollarLines(text: string): string[] {
  const lines: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    if (raw.length > MAX_COMMAND_CHARS + 64) continue;
    const line = raw.trimStart();
    const cmd = line.startsWith('$ ') ? line.slice(2).trim() : '';
    if (cmd !== '' && cmd.length <= MAX_COMMAND_CHARS) lines.push(cmd);
  }
  return lines;
}

/**
 * What a model call reads again on every call of a tool loop, kept per item
 * (the context hands the same item objects to each call; items are not
 * changed once in it): a user message's `$ ` lines and a shell call's
 * command. Parsing every earlier call's arguments again made each call of a
 * loop slower than the one before. Weak, so they go with their items.
 */
const linesOf = new WeakMap<InputMessage, string[]>();
const commandOfCall = new WeakMap<FunctionCall, string>();

function userLines(message: InputMessage, text: string): string[] {
  let lines = linesOf.get(message);
  if (lines === undefined) linesOf.set(message, (lines = dollarLines(text)));
  return lines;
}

function callCommand(call: FunctionCall): string {
  let cmd = commandOfCall.get(call);
  if (cmd === undefined) commandOfCall.set(call, (cmd = commandOf(call.arguments)));
  return cmd;
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

/** `lines` minus those already run (`called`: how many times each command ran), as multisets: a line written twice runs twice. */
function withoutCalled(lines: readonly string[], called: ReadonlyMap<string, number>): string[] {
  const used = new Map<string, number>();
  return lines.filter((line) => {
    const n = used.get(line) ?? 0;
    if (n >= (called.get(line) ?? 0)) return true;
    used.set(line, n + 1);
    return false;
  });
}

/**
 * How many times each command ran in the turn's calls of shell tool `tool`,
 * counted as calls are added: per list of `TurnScan.byName` (a turn's list
 * for one name only grows; a new turn has a new list).
 */
const commandCountsOf = new WeakMap<readonly Call[], { n: number; counts: Map<string, number> }>();

function commandCounts(turn: TurnScan, tool: string): ReadonlyMap<string, number> {
  const done = turn.byName.get(tool);
  if (done === undefined) return new Map();
  let memo = commandCountsOf.get(done);
  if (memo === undefined) commandCountsOf.set(done, (memo = { n: 0, counts: new Map() }));
  for (; memo.n < done.length; memo.n++) {
    const cmd = callCommand(done[memo.n]!.call);
    memo.counts.set(cmd, (memo.counts.get(cmd) ?? 0) + 1);
  }
  return memo.counts;
}

/**
 * The tools to call: the forced one; else those the message asks for (in
 * declared order, shell tools left to rule (a)); else, when a call is
 * required, the first tool.
 */
function targetTools(tools: readonly FunctionTool[], choice: Choice, userText: string): FunctionTool[] {
  if (choice.name !== undefined) return tools.filter((t) => t.name === choice.name);
  const candidates = tools.filter((t) => !(SHELL_TOOLS as readonly string[]).includes(t.name));
  // Read the message once (and only when there is a tool to match), not once per tool.
  const msg = candidates.length > 0 ? messageIndex(userText) : null;
  const asked = msg ? candidates.filter((t) => relevance(t, msg) > 0) : [];
  if (asked.length > 0) return asked;
  const first = tools[0];
  return choice.mode === 'required' && first ? [first] : [];
}

function summary(verb: string, noun: string, calls: readonly Call[], label: (c: Call) => string): string {
  return summaryText(verb, noun, calls.map((c) => ({ label: label(c), output: c.output ? outputText(c.output.output) : '' })));
}

/**
 * The message the model ends a turn of calls with: `verb` so many `noun`s, then a line for each call, its label and its
 * output's first line (the demo counts it in a prompt race's least duration: src/demo/workloads.ts).
 */
export function summaryText(verb: string, noun: string, calls: ReadonlyArray<{ label: string; output: string }>): string {
  // Each label clipped as the output's line is: a client's history may name a call with 8 M characters, which this
  // text (the model's output, tokenised in one go) repeated, holding the loop ~0.9 s.
  const lines = calls.map((c) => `- \`${clip(c.label)}\` → ${firstLine(c.output)}`);
  return [`${verb} ${calls.length} ${noun}${calls.length === 1 ? '' : 's'}.`, ...lines].join('\n');
}

/**
 * The first meaningful line of a tool's output. Codex wraps command output in
 * a header ending with an `Output:` line, and the classic shell tool returns
 * JSON `{"output": "...", "metadata": {...}}`; both are unwrapped first.
 */
export function firstLine(output: string): string {
  let body = unwrapJsonOutput(output);
  const marker = body.match(/^Output:\r?\n/m);
  if (marker?.index !== undefined) body = body.slice(marker.index + marker[0].length);
  // Line by line, not split: the summary reads one line of an output that may be megabytes.
  let line = '';
  for (let at = 0; at < body.length && line === ''; ) {
    const nl = body.indexOf('\n', at);
    const end = nl < 0 ? body.length : nl;
    line = body.slice(at, end).trim();
    at = end + 1;
  }
  if (line === '') return '(no output)';
  return clip(line);
}

/** At most `SUMMARY_CHARS` characters, the last an ellipsis when cut. */
function clip(line: string): string {
  return line.length > SUMMARY_CHARS ? `${line.slice(0, SUMMARY_CHARS - 1)}…` : line;
}

/**
 * The `output` of the classic shell tool's JSON, or `output` itself. Only
 * text that can be a JSON object is parsed: a failed parse throws, and a
 * throw per tool output cost a summary more than all the rest of it.
 */
function unwrapJsonOutput(output: string): string {
  if (!/^\s*\{/.test(output)) return output;
  try {
    const parsed: unknown = JSON.parse(output);
    if (typeof parsed === 'object' && parsed !== null && typeof (parsed as { output?: unknown }).output === 'string') {
      return (parsed as { output: string }).output;
    }
  } catch {
    // Not JSON after all: plain text output.
  }
  return output;
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
