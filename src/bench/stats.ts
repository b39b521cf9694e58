/**
 * Small statistics for benchmark reports: percentiles (nearest-rank on a
 * sorted copy), median, and spread. No sampling tricks: every measured value
 * is kept.
 */

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function summary(values: readonly number[]): { n: number; min: number; p50: number; p99: number; max: number; mean: number } {
  const n = values.length;
  return {
    n,
    min: n ? Math.min(...values) : NaN,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: n ? Math.max(...values) : NaN,
    mean: n ? values.reduce((a, b) => a + b, 0) / n : NaN,
  };
}

export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
