/**
 * `llr workload inspect FILE` and `llr workload convert FILE [OUT]`: what the
 * reader understood of a workload file (user turns, model calls, tool calls
 * and their durations, recorded vs inferred token figures per call, anything
 * skipped and why), and the same workload written in the neutral format.
 *
 * A file the reader cannot use ends in its WorkloadError (line and what was
 * expected), which the CLI prints without a stack and exits 2. Leaves out any
 * replay: this only reads.
 */
import { accessSync, chmodSync, constants, lstatSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError } from '../flags.js';
import { quoted, shown } from '../terminal-text.js';
import { looksNeutral } from './format.js';
import { median, parseWorkload, readWorkloadText } from './load.js';
import { WorkloadError, type Workload } from './types.js';
import { replayable } from './replayable.js';

const HELP = `llr workload — read a workload file the way llr bench and llr serve do

Usage:
  llr workload inspect FILE     what the reader understood, call by call
  llr workload convert FILE [OUT]
                                the workload in the neutral format (JSON, see
                                docs/workload.schema.json) as llr serve replays
                                it, to OUT or stdout

FILE is a Codex rollout (JSONL) or an llr workload (JSON), told apart by content.
`;

export async function workloadCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { help: { type: 'boolean', short: 'h' } } });
  const [sub, file, out, ...extra] = positionals;
  if (values.help || sub === undefined || sub === 'help') {
    process.stdout.write(HELP);
    return;
  }
  if (sub !== 'inspect' && sub !== 'convert') throw new UsageError(`unknown workload command ${quoted(sub)}; known: inspect, convert`);
  if (file === undefined) throw new UsageError(`llr workload ${sub} needs a FILE`);
  if ((sub === 'inspect' ? out : extra[0]) !== undefined) throw new UsageError(`llr workload ${sub} takes ${sub === 'inspect' ? 'one FILE' : 'FILE [OUT]'}, got also ${quoted((sub === 'inspect' ? out : extra[0])!)}`);
  // `convert f.jsonl f.jsonl` replaced the rollout with its neutral JSON, exit 0 (outside attack atk114 F4): the
  // source is refused as OUT, by any name (a link, `./f`), as `cp` refuses copying a file onto itself.
  if (sub === 'convert' && out !== undefined && sameFile(file, out)) {
    throw new UsageError(`llr workload convert: OUT ${quoted(out)} is FILE ${quoted(file)} itself; converting would overwrite the file it reads: give another OUT`);
  }
  // Read once: a pipe (`<(zcat f.gz)`) gives its text only once, and the format is told from the same text.
  const { text, name, source } = readWorkloadText(file);
  const w = parseWorkload(text, name, source);
  if (sub === 'convert') {
    // What `llr serve --workload` replays and a client must follow (`replayable`: a user turn ends in a call without
    // tool calls, an interrupted turn's calls and their "aborted" answers are dropped, a new conversation starts at its
    // anchor), not the workload as read: a client following that got 400 unknown_call_id after an interrupted turn,
    // and the run's first call again at a replace_history turn (outside attack atk57 F3). One that is not replayable
    // is refused here, as serve and the bench refuse it (it was written, exit 0).
    const json = `${JSON.stringify({ llr_workload: 1, ...replayable(w) })}\n`;
    const fd = out === undefined ? 1 : descriptorOf(out);
    if (fd === 1) process.stdout.write(json);
    else if (fd === 2) process.stderr.write(json);
    else if (fd !== null) writeFileSync(fd, json);
    else writeWhole(out!, json);
    return;
  }
  const neutral = looksNeutral(text.replace(/^\uFEFF/, ''));
  // A stranger's file: its names, texts and record types printed as `llr run` prints a server's text (an escape
  // sequence in a rollout's `originator` set the clipboard, one in a call's name hid what followed; atk68 F4).
  // Made replayable once, for the report and the verdict: it tokenizes every model call's output (its notes).
  // (A file `replayable` refuses, said below the report, is reported as read.)
  let replayed = w;
  let refused: WorkloadError | null = null;
  try {
    replayed = replayable(w);
  } catch (err) {
    if (!(err instanceof WorkloadError)) throw err;
    refused = err;
  }
  process.stdout.write(shown(inspectText(w, replayed, neutral ? 'llr workload (JSON)' : 'Codex rollout (JSONL)'), true));
  // Read, but refused for replay (`replayable`: a recorded replay position note naming its length): said, exit 2, as
  // `llr serve --workload` and the bench refuse it.
  if (refused !== null) {
    process.stdout.write(`\nnot replayable: ${shown(refused.message)}\n`);
    process.exitCode = 2;
  }
}

/** The inspect report of `w` as read and `replayed` (`replayable`'s, or `w` when refused); `format` names what it was read as. */
function inspectText(w: Workload, replayed: Workload, format: string): string {
  const lines: string[] = [];
  const o = w.origin ?? {};
  const about = ['format', 'originator', 'cli_version', 'session_source', 'parent_thread_id', 'forked_from_id']
    .filter((k) => !(k === 'format' && o[k] === 'codex-rollout' && format.startsWith('Codex')))
    .filter((k) => o[k] !== undefined)
    .map((k) => `${k} ${o[k]}`);
  lines.push(`${w.name}: ${format}${about.length ? ` (${about.join(', ')})` : ''}${w.stats.lines ? `, ${w.stats.lines} records` : ''}`);
  lines.push(`source: ${w.source}`);
  lines.push(`instructions: ${w.instructions === null ? 'none' : `${w.instructions.length} chars`} · tools: ${w.tools.length}${w.tools.length ? ` (${w.tools.map((t) => t.name).join(', ')})` : ''}`);
  const calls = w.userTurns.flatMap((u) => u.modelTurns);
  // As replayed (`replayable`: an interrupted turn's calls dropped), a rollout as its conversion: a rollout's counted
  // them as read, so one session read 7 as a rollout and 1 converted, the replay making 1 (outside attack atk84 F3).
  const toolCalls = replayed.userTurns.flatMap((u) => u.modelTurns).flatMap((t) => t.output.filter((x) => x.type === 'function_call'));
  // The calls replayed, then the recording's own counts (`stats`, as read or as the file says): a converted workload
  // drops an interrupted turn's calls, so the two differ there, and the line read as if they should add up (atk68 F1).
  lines.push(
    `user turns: ${w.userTurns.length} · model calls: ${calls.length} · client tool calls: ${toolCalls.length} (recorded: ${w.stats.function_calls} function, ${w.stats.custom_tool_calls} custom) · hosted calls: ${w.stats.hosted_calls}`,
  );
  const figures = w.calls;
  if (figures) {
    const n = (k: 'input_source' | 'output_source', s: string) => figures.filter((f) => f[k] === s).length;
    lines.push(`token figures per call: input ${n('input_source', 'recorded')} recorded, ${n('input_source', 'inferred')} inferred · output ${n('output_source', 'recorded')} recorded, ${n('output_source', 'inferred')} inferred`);
  } else {
    lines.push('token figures per call: none in the file (the server counts input tokens when it renders the prompt)');
  }
  const durations = Object.values(w.toolOutputs).map((t) => t.duration_ms);
  lines.push(`tool durations: median ${fmtMs(median(durations))}, max ${fmtMs(durations.length ? durations.reduce((a, b) => Math.max(a, b)) : null)}`);
  lines.push('');
  let g = 0;
  for (const [ui, u] of w.userTurns.entries()) {
    const kinds = u.input.map((i) => String('role' in i ? i.role : (i.type ?? 'message')));
    lines.push(`user turn ${ui + 1}: input ${u.input.length} item(s) (${summarizeKinds(kinds)})${u.replace_history ? ' · starts a new conversation (the history was compacted, or a new session began)' : ''}`);
    lines.push(`  ${'call'.padEnd(6)}${'line'.padStart(6)}${'input tok'.padStart(14)}${'output tok'.padStart(14)}  output`);
    for (const t of u.modelTurns) {
      const f = figures?.[g];
      const tools = t.output.flatMap((x) => (x.type === 'function_call' ? [`${x.name} ${fmtMs(w.toolOutputs[x.call_id]?.duration_ms ?? null)}`] : []));
      const text = t.output.filter((x) => x.type === 'message').map((x) => (x.type === 'message' ? x.text.length : 0));
      const what = [...(text.length ? [`message ${text.join('+')} chars`] : []), ...tools].join(', ');
      lines.push(
        // Each column starts with a space, so a figure as wide as its column (10^9 tokens, "1000000000 rec") or a
        // seven-digit line number shifts its row rather than running into the column before it.
        `  ${String(g + 1).padEnd(6)}${` ${f?.line ?? ''}`.padStart(6)}${` ${fig(f?.input_tokens, f?.input_source)}`.padStart(14)}${` ${fig(f?.output_tokens ?? t.output_tokens, f?.output_source ?? (t.output_tokens === undefined ? undefined : 'recorded'))}`.padStart(14)}  ${what}`,
      );
      g++;
    }
  }
  // As replayed too: its notes include what making it replayable changed (a recorded figure the replay raises).
  const skipped = replayed.skipped ?? [];
  lines.push('');
  if (skipped.length === 0) lines.push('skipped: nothing');
  else {
    lines.push(`skipped or changed (${skipped.reduce((n, s) => n + 1 + (s.more ?? 0), 0)}):`);
    const groups = new Map<string, { at: number[]; n: number }>();
    for (const s of skipped) {
      const key = `${s.what} — ${s.why}`;
      // Appended in place: copying the list per entry was quadratic (a million skipped lines never finished).
      const group = groups.get(key);
      if (group) (group.at.push(s.line), (group.n += 1 + (s.more ?? 0)));
      else groups.set(key, { at: [s.line], n: 1 + (s.more ?? 0) });
    }
    for (const [key, { at, n }] of groups) {
      // Line 0: a note of a JSON workload, whose place is the JSON pointer in `what`.
      if (at.every((l) => l === 0)) {
        lines.push(`  ${key}${n > 1 ? ` (×${n})` : ''}`);
        continue;
      }
      const shown = at.slice(0, 6).join(', ') + (n > 6 ? ', …' : '');
      lines.push(`  line${n > 1 ? 's' : ''} ${shown}${n > 1 ? ` (×${n})` : ''}: ${key}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

function fig(n: number | undefined, source: string | undefined): string {
  if (n === undefined) return '–';
  return `${n} ${source === 'inferred' ? 'inf' : source === 'recorded' ? 'rec' : '?'}`;
}

function fmtMs(ms: number | null): string {
  if (ms === null) return '–';
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

function summarizeKinds(kinds: string[]): string {
  const out: string[] = [];
  for (const k of kinds) {
    const last = out.at(-1);
    const m = last ? /^(.*?)(?: ×(\d+))?$/.exec(last) : null;
    if (m && m[1] === k) out[out.length - 1] = `${k} ×${Number(m[2] ?? 1) + 1}`;
    else out.push(k);
  }
  if (out.length <= KIND_RUNS_SHOWN) return out.join(', ') || 'none';
  // The rest counted by kind: 70,001 alternating roles made one line of 595,039 characters (outside attack atk86 I1).
  const rest = new Map<string, number>();
  for (const run of out.slice(KIND_RUNS_SHOWN)) {
    const m = /^(.*?)(?: ×(\d+))?$/.exec(run)!;
    rest.set(m[1]!, (rest.get(m[1]!) ?? 0) + Number(m[2] ?? 1));
  }
  const more = [...rest].map(([k, n]) => `${k} ×${n}`).join(', ');
  return `${out.slice(0, KIND_RUNS_SHOWN).join(', ')}, then ${more} in ${out.length - KIND_RUNS_SHOWN} more runs`;
}

/** Whether paths `a` and `b` name one existing file (its device and inode). */
function sameFile(a: string, b: string): boolean {
  try {
    const x = statSync(a);
    const y = statSync(b);
    return x.isFile() && x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}

/** How many runs of alike items a user turn's input lists one by one in `inspect` (the rest are counted by kind). */
const KIND_RUNS_SHOWN = 12;

/**
 * `convert`'s OUT, whole or not at all where that keeps OUT what it was: a regular file of ours (or a new one) is
 * written beside it under a temporary name, given OUT's permission bits, and renamed over it, so a failed write (a
 * full disk, a file-size limit) leaves OUT as it was and no cut-off JSON that a later `--workload OUT` would refuse.
 * A symbolic link is followed (its target is written, the link kept). Otherwise OUT is written in place, as a shell's
 * `>` writes it: a path under /dev or /proc (`/dev/stdout` is whatever the descriptor is, a file it appends to among
 * them), anything not a regular file (a FIFO), a file with other names (hard links, which a rename would leave with
 * the old text), another user's file (a rename would make it ours, and could pass its own permissions), and a file
 * whose directory takes no new file or no rename (read-only, or sticky). A write that fails says which file.
 */
function writeWhole(out: string, text: string): void {
  let target = out;
  let inPlace = /^\/(dev|proc)\//.test(out);
  let mode: number | undefined;
  if (!inPlace) {
    try {
      target = realpathSync(out);
      const st = statSync(target);
      const mine = typeof process.getuid !== 'function' || st.uid === process.getuid();
      inPlace = !st.isFile() || st.nlink > 1 || !mine;
      mode = st.mode & 0o777;
      // As `>` would: a file we may not write is refused, not replaced.
      if (!inPlace) accessSync(target, constants.W_OK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot write ${out}: ${shortMessage(err)}`);
      // A new file; a dangling link is written through, making its target, as the shell would.
      inPlace = isLink(out);
    }
  }
  if (!inPlace) {
    const tmp = join(dirname(target), `.${basename(target)}.${process.pid}.tmp`);
    try {
      writeFileSync(tmp, text, { flag: 'wx', mode: mode ?? 0o666 });
      if (mode !== undefined) chmodSync(tmp, mode);
      renameSync(tmp, target);
      return;
    } catch (err) {
      rmSync(tmp, { force: true });
      const code = (err as NodeJS.ErrnoException).code;
      // The directory takes no new file or no rename over OUT: OUT itself may still be written.
      if (code !== 'EACCES' && code !== 'EPERM' && code !== 'EROFS') throw new Error(`cannot write ${out}: ${shortMessage(err)}`);
    }
  }
  try {
    writeFileSync(out, text);
  } catch (err) {
    throw new Error(`cannot write ${out}: ${shortMessage(err)}`);
  }
}

/**
 * The descriptor a path names (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`), written as the
 * descriptor, never opened again: opened by its path it was truncated (`convert IN /dev/stdout >> log` emptied the
 * log first), and resolved to the file behind it, renamed over (atk48 N2).
 */
function descriptorOf(path: string): number | null {
  const m = /^\/dev\/(stdout|stderr|fd\/(\d+))$|^\/proc\/self\/fd\/(\d+)$/.exec(path);
  if (m === null) return null;
  return m[1] === 'stdout' ? 1 : m[1] === 'stderr' ? 2 : Number(m[2] ?? m[3]);
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** A system call's message without the paths it quotes (a temporary one, which the user never named): `EPERM: operation not permitted`. */
function shortMessage(err: unknown): string {
  return (err as Error).message.replace(/, \w+ '.*$/, '');
}
