/**
 * The safety scan: a real classifier over the request text whose cost grows
 * with the text it reads. It looks for credentials that must not be sent to
 * a model (private keys, cloud and API tokens) with anchored patterns, so
 * ordinary code and logs do not trip it.
 *
 * Full form scans every item; incremental form scans only new items. A hit
 * is a `content_flagged` WireError naming the item. Leaves out content
 * moderation (violence, etc.): it needs a model, and this project simulates
 * only the model being served.
 *
 * Large texts are scanned in slices of `SCAN_SLICE_CHARS` (each read with
 * `SCAN_OVERLAP_CHARS` more, so a credential that starts in a slice is seen
 * whole), yielding to the event loop between slices in the cooperative form.
 * A hit inside a slice is confirmed against the whole text at the same
 * offset, so a slice edge can neither invent a match (a `\b` at the cut)
 * nor hide one; the one blind spot is a private key whose header is followed
 * by more than ~4,000 line breaks before its body.
 */
import { WireError } from '../protocol/errors.js';
import type { InputItem } from '../protocol/objects.js';
import type { RunMetrics } from './metrics.js';
import { itemPartsWork, JOIN_LIMIT_CHARS } from './render.js';
import { runCooperative, runSync, type Work } from '../cooperative.js';

/** Characters scanned per slice (per pattern) before a yield point. */
export const SCAN_SLICE_CHARS = 256 * 1024;
/** Extra characters each slice reads past its end: longer than any credential's shortest match. */
export const SCAN_OVERLAP_CHARS = 4096;

export const SAFETY_PATTERNS: ReadonlyArray<{ name: string; re: RegExp }> = [
  { name: 'private key', re: /-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----[\r\n]+[A-Za-z0-9+/=\r\n]{40,}/ },
  // Not AWS's documented placeholders (`AKIAIOSFODNN7EXAMPLE` and its kin end in `EXAMPLE`): an agent reading AWS's
  // docs, or a test fixture, was refused here and served by the API (outside conformance tester).
  { name: 'AWS access key id', re: /\b(?:AKIA|ASIA)(?![0-9A-Z]{9}EXAMPLE\b)[0-9A-Z]{16}\b/ },
  { name: 'GitHub token', re: /\bgh[pousr]_[A-Za-z0-9]{36,}\b/ },
  { name: 'OpenAI API key', re: /\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20}T3BlbkFJ[A-Za-z0-9_-]{20,}/ },
  { name: 'Slack token', re: /\bxox[abprs]-[0-9]{8,}-[0-9A-Za-z-]{8,}/ },
  { name: 'Google API key', re: /\bAIza[0-9A-Za-z_-]{35}\b/ },
];

/** Scan instructions and items; throws `content_flagged` on the first hit. */
export function safetyScan(items: readonly InputItem[], metrics: RunMetrics, param = 'input', instructions: string | null = null): void {
  runSync(scanWork(items, metrics, param, instructions));
}

/** The same scan, yielding to the event loop on large inputs. */
export function safetyScanAsync(items: readonly InputItem[], metrics: RunMetrics, param = 'input', instructions: string | null = null): Promise<void> {
  return runCooperative(scanWork(items, metrics, param, instructions));
}

function* scanWork(items: readonly InputItem[], metrics: RunMetrics, param: string, instructions: string | null): Work<void> {
  if (instructions) yield* scanText(instructions, 'instructions', metrics);
  for (let i = 0; i < items.length; i++) {
    yield* scanItem(items[i]!, `${param}[${i}]`, metrics);
    yield;
  }
}

/**
 * Scan an item's text. A large single body is scanned in place rather than
 * joined to its prefix: matches starting in the body are found in the body
 * alone (the prefix ends in a line break, which is a word boundary like the
 * start of a string), and those starting in the prefix in the prefix plus the
 * body's first `SCAN_OVERLAP_CHARS`.
 */
function* scanItem(item: InputItem, param: string, metrics: RunMetrics): Work<void> {
  const { prefix, body } = yield* itemPartsWork(item);
  const single = body.length === 1 ? body[0]! : undefined;
  if (single === undefined || prefix.length + single.length <= JOIN_LIMIT_CHARS) {
    yield* scanText(prefix + body.join(''), param, metrics);
    return;
  }
  const head = prefix + single.slice(0, SCAN_OVERLAP_CHARS);
  // Matches starting in the prefix, found in slices as in a body: the prefix is short but where the client names it
  // (a call's call_id and name): one exec over 8 M characters of `sk-` held the loop ~430 ms, and a Slack-token-like
  // one overflowed the regex engine's backtrack stack (RangeError).
  for (const p of SLICED) if (yield* slicedTest(p, head, prefix.length)) flag(param, p.name);
  metrics.count('bytes_scanned', prefix.length);
  yield* scanText(single, param, metrics);
}

function flag(param: string, name: string): never {
  throw new WireError('content_flagged', `The input was flagged by the safety scan: '${param}' contains what looks like a ${name}. Remove the credential and retry.`, param);
}

const SLICED = SAFETY_PATTERNS.map(({ name, re }) => ({
  name,
  re,
  /** Finds candidates inside a slice. */
  global: new RegExp(re.source, `${re.flags.replace(/[gy]/g, '')}g`),
  /** Confirms a candidate at its offset in the whole text. */
  sticky: new RegExp(re.source, `${re.flags.replace(/[gy]/g, '')}y`),
}));

function* scanText(text: string, param: string, metrics: RunMetrics): Work<void> {
  metrics.count('bytes_scanned', text.length);
  for (const p of SLICED) {
    const hit = text.length <= SCAN_SLICE_CHARS ? p.re.test(text) : yield* slicedTest(p, text);
    if (hit) flag(param, p.name);
  }
}

function* slicedTest(p: (typeof SLICED)[number], text: string, limit = text.length): Work<boolean> {
  for (let start = 0; start < limit; start += SCAN_SLICE_CHARS) {
    const end = Math.min(limit, start + SCAN_SLICE_CHARS);
    const slice = text.slice(start, Math.min(text.length, end + SCAN_OVERLAP_CHARS));
    p.global.lastIndex = 0;
    for (let m = p.global.exec(slice); m !== null && start + m.index < end; m = p.global.exec(slice)) {
      if (confirmed(p, text, start + m.index)) return true;
      p.global.lastIndex = m.index + 1;
    }
    yield;
  }
  return false;
}

/** Characters a candidate is confirmed in, from its start: far past any pattern's shortest match. */
const CONFIRM_CHARS = 64 * 1024;

/**
 * Is there a match of `p` starting at `at` in `text`? Read in a window of `CONFIRM_CHARS`, not the whole text: a
 * pattern's open-ended tail (`{8,}`, `{40,}`) ran greedily to the end of a run of its characters, holding the loop
 * (8 M characters) or overflowing the regex engine's backtrack stack (a RangeError: a 500 for the request). A match
 * cut by the window's end is taken as one (a credential-like run of 64 K characters is flagged). The window starts a
 * character early: a leading `\b` reads the character before the candidate.
 */
function confirmed(p: (typeof SLICED)[number], text: string, at: number): boolean {
  // The character before the candidate too: a leading `\b` reads it.
  const from = Math.max(0, at - 1);
  p.sticky.lastIndex = at - from;
  return p.sticky.test(text.length - from <= CONFIRM_CHARS + 1 ? text.slice(from) : text.slice(from, at + CONFIRM_CHARS));
}
