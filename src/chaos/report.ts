/**
 * The chaos table: one row per scenario and design — inputs sent, how they
 * were answered (error / response / documented close), every failure kind
 * counted, RSS at start, peak and end, the slowest /health — and under it
 * the first examples of each failure with the input that caused it.
 */
import type { Tally } from './oracle.js';

const mb = (b: number) => (b / 1024 / 1024).toFixed(0);

const COLUMNS: Array<[string, (t: Tally) => string]> = [
  ['scenario', (t) => t.scenario],
  ['design', (t) => t.design],
  ['inputs', (t) => String(t.inputs)],
  ['error', (t) => String(t.errors)],
  ['response', (t) => String(t.responses)],
  ['close', (t) => String(t.closes)],
  ['crash', (t) => String(t.count('crash'))],
  ['hang', (t) => String(t.count('hang'))],
  ['unsettled', (t) => String(t.count('unsettled'))],
  ['billing≠1', (t) => String(t.count('billing'))],
  ['seq', (t) => String(t.count('sequence'))],
  ['malformed', (t) => String(t.count('malformed'))],
  ['other', (t) => String(t.count('close') + t.count('health') + t.count('rss') + t.count('lost') + t.count('dropped'))],
  ['RSS MB start/peak/end', (t) => `${mb(t.rss.start)}/${mb(t.rss.peak)}/${mb(t.rss.end)}`],
  ['/health max ms', (t) => t.healthMaxMs.toFixed(0)],
];

export function table(rows: readonly Tally[]): string {
  const cells = [COLUMNS.map(([h]) => h), ...rows.map((r) => COLUMNS.map(([, f]) => f(r)))];
  const widths = COLUMNS.map((_, i) => Math.max(...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i < 2 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join('  ');
  return [line(cells[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

/** One row as a single line, for progress output while the suite runs. */
export function rowLine(t: Tally): string {
  return COLUMNS.map(([h, f]) => `${h} ${f(t)}`).join(' · ');
}

export function details(rows: readonly Tally[]): string {
  const out: string[] = [];
  for (const r of rows) {
    const head = `${r.scenario} / ${r.design}`;
    if (r.closeCodes.size) out.push(`${head}: close codes ${[...r.closeCodes].map(([c, n]) => `${c}×${n}`).join(', ')}`);
    for (const n of r.notes) out.push(`${head}: ${n}`);
    for (const f of r.examples) out.push(`${head}: FAIL ${f.kind}: ${f.detail}\n    input: ${f.input}`);
  }
  return out.join('\n');
}

export function errorCodes(rows: readonly Tally[]): string {
  return rows
    .filter((r) => r.errorCodes.size)
    .map((r) => `${r.scenario} / ${r.design}: ${[...r.errorCodes].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([c, n]) => `${c}×${n}`).join(', ')}`)
    .join('\n');
}
