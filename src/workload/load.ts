/**
 * Reading a workload file, whatever it holds: a Codex rollout (JSONL) or the
 * neutral llr workload format (JSON), told apart by content, not by the
 * file's extension; and summarising a workload for reports.
 *
 * Used by `llr serve --workload`, `llr bench --workload` and `llr workload
 * inspect`. The shape is in types.ts; the Codex reader in codex.ts; the
 * neutral format in format.ts (its schema: docs/workload.schema.json).
 * Leaves out other agents' log formats: convert them to the neutral format.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:buffer';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseRollout } from './codex.js';
import { decodeWorkload } from './encoding.js';
import { checkRequests, looksNeutral, parseNeutral } from './format.js';
import { wellFormedWorkload } from './well-formed.js';
import { replayable } from './replayable.js';
import { WorkloadError, type Skipped, type Workload } from './types.js';

export { WorkloadError } from './types.js';
export type { CallFigures, Skipped, UserTurn, Workload } from './types.js';

/** The default workload, shipped in the repository (workloads/README.md gives its source and licence). */
export const DEFAULT_WORKLOAD = fileURLToPath(new URL('../../workloads/codex-rollout-a.jsonl', import.meta.url));

/** Citations for shipped workloads, keyed by the file's SHA-256 (as in workloads/README.md). */
const KNOWN_SOURCES: Record<string, string> = {
  '8cb269b4fbbdda6eb74a2c0a14b58fbb43f8f1a67d648d63bec00e974969fe18':
    'codemie-ai/codemie-code, src/agents/plugins/codex/__tests__/fixtures/' +
    'rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl ' +
    '(Apache License 2.0, copyright its authors; kept unchanged). ' +
    'Recorded with Codex CLI 0.125.0 against a GPT-5-class model.',
};

/**
 * The most bytes a workload file may have: the reader holds it as one string, and V8's longest is this many
 * UTF-16 units (512 MiB), which no longer UTF-8 file fits.
 */
export const MAX_WORKLOAD_BYTES = constants.MAX_STRING_LENGTH;

/** The longest wait between two reads of a non-blocking pipe that had nothing (EAGAIN): 1, 2, 4, … ms up to it. */
export const EAGAIN_MAX_WAIT_MS = 50;

const napCell = new Int32Array(new SharedArrayBuffer(4));

/**
 * Blocks the thread for `ms` without spinning: a wait on a cell nobody wakes. The reader is synchronous (its
 * callers are), and Node offers no synchronous poll(2); the reader spun on EAGAIN (a core at 100%) before.
 */
function nap(ms: number): void {
  Atomics.wait(napCell, 0, 0, ms);
}

/**
 * A workload file's text (decoded, its BOM kept), its name and its source, read once: a pipe (`<(zcat f.gz)`)
 * can be read only once. Read in chunks up to MAX_WORKLOAD_BYTES, whatever the file is: `readFileSync` of a
 * file past it threw "Cannot create a string longer than 0x1fffffe8 characters" (exit 1), and of /dev/zero
 * or an endless pipe grew without bound (6.7 GB in 30 s). A descriptor that is non-blocking (a pipe whose writer has
 * not written yet) is waited on, EAGAIN_MAX_WAIT_MS at most between tries.
 */
export function readWorkloadText(path: string, maxBytes = MAX_WORKLOAD_BYTES): { text: string; name: string; source: string } {
  const name = basename(path);
  const tooLarge = () => new WorkloadError(0, `${path}: the file is larger than ${maxBytes} bytes (${(maxBytes / 2 ** 20).toFixed(0)} MiB), the most a workload may have: the reader holds it as one string`);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    throw new WorkloadError(0, `${path}: cannot read the file (${(err as Error).message})`, { cause: err });
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) throw new WorkloadError(0, `${path}: cannot read the file (it is a directory)`);
    if (st.isFile() && st.size > maxBytes) throw tooLarge();
    // Each chunk is filled by as many reads as it takes (a pipe gives 64 KiB a read): one 16 MiB chunk a read kept
    // 16 MiB alive per 64 KiB read. A non-blocking pipe with nothing yet (EAGAIN) is waited on, not spun on.
    let chunk = Buffer.allocUnsafe(0);
    let at = 0;
    let idle = 0;
    for (;;) {
      if (at === chunk.length) {
        if (at > 0) chunks.push(chunk);
        chunk = Buffer.allocUnsafe(Math.min(1 << 24, maxBytes + 1 - total));
        at = 0;
      }
      let n: number;
      try {
        n = readSync(fd, chunk, at, chunk.length - at, null);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') {
          nap(Math.min(EAGAIN_MAX_WAIT_MS, 2 ** idle++));
          continue;
        }
        throw new WorkloadError(0, `${path}: cannot read the file (${(err as Error).message})`, { cause: err });
      }
      if (n === 0) break;
      idle = 0;
      at += n;
      total += n;
      if (total > maxBytes) throw tooLarge();
    }
    if (at > 0) chunks.push(chunk.subarray(0, at));
  } finally {
    closeSync(fd);
  }
  const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
  const hash = createHash('sha256').update(bytes).digest('hex');
  return { text: decodeWorkload(bytes, name), name, source: KNOWN_SOURCES[hash] ?? path };
}

/** Reads and parses a workload file; the source is the shipped file's citation, else the path. */
export function readWorkload(path: string): Workload {
  const { text, name, source } = readWorkloadText(path);
  return parseWorkload(text, name, source);
}

/**
 * Parses workload text of either format; `name` prefixes error messages. A leading BOM is dropped; lines end in
 * LF or CRLF, or in CR alone in a file with no LF at all (old Mac style): JSON holds no raw CR inside a string, so
 * such a file reads as if each CR were an LF.
 */
export function parseWorkload(text: string, name: string, source: string): Workload {
  let clean = text.replace(/^\uFEFF/, '');
  if (!clean.includes('\n') && clean.includes('\r')) clean = clean.replaceAll('\r', '\n');
  if (looksNeutral(clean)) return wellFormedWorkload(parseNeutral(clean, name, source), name);
  const w = wellFormedWorkload(parseRollout(clean, name, source), name);
  checkAnswered(w, name);
  // What the reader makes of the rollout, checked as the neutral format is: refused here, not by the bench's
  // server process loading its copy (named workload-grid.json) or mid-run.
  checkRequests(w, name, ' (in the workload as read: llr workload convert)');
  return w;
}

/**
 * Every call of a model call but a user turn's last has an output to replay, as the neutral format requires (the
 * bench's server reads the workload it is handed in that format): a rollout the reader took a shape of wrongly is
 * refused here at the call's line, not by the server process with a JSON pointer into a file the user never wrote
 * (`workload-grid.json: /userTurns/0/modelTurns/0/output/0: call c1 has no entry in toolOutputs`).
 */
export function checkAnswered(w: Workload, name: string): void {
  let g = 0;
  for (const u of w.userTurns) {
    u.modelTurns.forEach((t, i) => {
      const line = w.calls?.[g]?.line ?? 0;
      g++;
      if (i === u.modelTurns.length - 1) return;
      for (const o of t.output) {
        if (o.type === 'function_call' && !Object.hasOwn(w.toolOutputs, o.call_id)) {
          throw new WorkloadError(line, `${name}${line ? `:${line}` : ''}: ${o.name} call ${o.call_id} has no output, yet the model called again in its user turn: not replayable as read`);
        }
      }
    });
  }
}

/** A workload file made ready for replay (what `llr serve --workload` and the bench replay). */
export function loadWorkloadFile(path: string): Workload {
  return replayable(readWorkload(path));
}

export interface WorkloadSummary {
  user_turns: number;
  model_calls: number;
  /** Client tool calls replayed (function calls, including mapped custom tools). */
  tool_calls: number;
  hosted_calls: number;
  /** Recorded prompt size of the first and the last model call; null when not recorded. */
  input_tokens_first: number | null;
  input_tokens_last: number | null;
  output_tokens_median: number | null;
  tool_output_bytes: number;
  tool_duration_median_ms: number | null;
  /** How many per-call token figures the source recorded and how many were inferred; null: none known. */
  token_figures: { input_recorded: number; input_inferred: number; output_recorded: number; output_inferred: number } | null;
  /**
   * What the reader could not replay as recorded (`Workload.skipped`): how many records its notes name (a folded
   * note's `more` included), and the first NOTES_LISTED of them. The bench printed none of them: they were only in
   * its workload-grid.json.
   */
  notes: { count: number; listed: Skipped[] };
}

/** Notes listed in a bench's results and report (the rest counted): a report of a million notes is not read. */
export const NOTES_LISTED = 20;

/**
 * Counts for printing next to benchmark results, of the workload as it replays (`replayable`): the calls a user turn
 * ended in that nobody answered (an interrupted turn) are not replayed, so not counted. Counted as read before, a
 * rollout whose turns were aborted said in results.json that it replayed 3 tool calls where the runs made 1.
 */
export function summarizeWorkload(read: Workload): WorkloadSummary {
  const w = replayable(read);
  let modelCalls = 0;
  let toolCalls = 0;
  const outputTokens: number[] = [];
  for (const ut of w.userTurns) {
    for (const mt of ut.modelTurns) {
      modelCalls++;
      toolCalls += mt.output.filter((o) => o.type === 'function_call').length;
      if (mt.output_tokens !== undefined) outputTokens.push(mt.output_tokens);
    }
  }
  const outputs = Object.values(w.toolOutputs);
  return {
    user_turns: w.userTurns.length,
    model_calls: modelCalls,
    tool_calls: toolCalls,
    hosted_calls: w.stats.hosted_calls,
    input_tokens_first: w.recorded.input_tokens[0] ?? null,
    input_tokens_last: w.recorded.input_tokens.at(-1) ?? null,
    output_tokens_median: median(outputTokens),
    tool_output_bytes: outputs.reduce((n, o) => n + Buffer.byteLength(o.output, 'utf8'), 0),
    tool_duration_median_ms: median(outputs.map((o) => o.duration_ms)),
    token_figures: w.calls
      ? {
          input_recorded: w.calls.filter((c) => c.input_source === 'recorded').length,
          input_inferred: w.calls.filter((c) => c.input_source === 'inferred').length,
          output_recorded: w.calls.filter((c) => c.output_source === 'recorded').length,
          output_inferred: w.calls.filter((c) => c.output_source === 'inferred').length,
        }
      : null,
    notes: { count: (w.skipped ?? []).reduce((n, s) => n + 1 + (s.more ?? 0), 0), listed: (w.skipped ?? []).slice(0, NOTES_LISTED) },
  };
}

export function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
