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
 */
import { WireError } from '../protocol/errors.js';
import type { InputItem } from '../protocol/objects.js';
import type { RunMetrics } from './metrics.js';
import { itemText } from './render.js';

export const SAFETY_PATTERNS: ReadonlyArray<{ name: string; re: RegExp }> = [
  { name: 'private key', re: /-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----[\r\n]+[A-Za-z0-9+/=\r\n]{40,}/ },
  { name: 'AWS access key id', re: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/ },
  { name: 'GitHub token', re: /\bgh[pousr]_[A-Za-z0-9]{36,}\b/ },
  { name: 'OpenAI API key', re: /\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20}T3BlbkFJ[A-Za-z0-9_-]{20,}/ },
  { name: 'Slack token', re: /\bxox[abprs]-[0-9]{8,}-[0-9A-Za-z-]{8,}/ },
  { name: 'Google API key', re: /\bAIza[0-9A-Za-z_-]{35}\b/ },
];

/** Scan instructions and items; throws `content_flagged` on the first hit. */
export function safetyScan(items: readonly InputItem[], metrics: RunMetrics, param = 'input', instructions: string | null = null): void {
  if (instructions) scanText(instructions, 'instructions', metrics);
  items.forEach((item, i) => scanText(itemText(item).text, `${param}[${i}]`, metrics));
}

function scanText(text: string, param: string, metrics: RunMetrics): void {
  metrics.count('bytes_scanned', text.length);
  for (const { name, re } of SAFETY_PATTERNS) {
    if (re.test(text)) {
      throw new WireError('content_flagged', `The input was flagged by the safety scan: '${param}' contains what looks like a ${name}. Remove the credential and retry.`, param);
    }
  }
}
