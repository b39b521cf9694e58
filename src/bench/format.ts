/**
 * Text for the bench's figures: number formats and one target line as the
 * CLI prints it. Pure. Used by the target lines (verdicts.ts), the CLI and
 * the report.
 */
import type { TargetLine } from './results.js';

export const f1 = (x: number): string => x.toFixed(1);
export const f2 = (x: number): string => x.toFixed(2);
export const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;
export const kib = (b: number): string => `${(b / 1024).toFixed(1)} KiB`;

export function targetLineText(t: TargetLine): string {
  const verdict = t.verdict ?? (t.holds === null ? 'not measured' : t.holds ? 'holds' : 'does not hold');
  return `target ${t.id}: ${t.figure} vs ${t.target} → ${verdict}${verdict === 'does not hold' || verdict === 'not measured' ? ` (${t.note})` : ''}`;
}
