/**
 * Small statistics for benchmark reports: percentiles (nearest-rank on a
 * sorted copy), median, and spread. No sampling tricks: every measured value
 * is kept.
 */
import { mulberry32 } from '../model/rng.js';

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

export interface Interval {
  lo: number;
  hi: number;
  /** Values it rests on: with 3 runs the interval cannot be narrower than the data allow, and says so by its width. */
  n: number;
}

/**
 * Percentile bootstrap interval of the median: `resamples` resamples with
 * replacement (seeded, so deterministic), the `level` central share of
 * their medians. With one value the interval is that value; with none, NaN.
 * Few values give a wide (honest) interval, never a narrower one.
 */
export function bootstrapMedianCI(values: readonly number[], opts: { resamples?: number; level?: number; seed?: number } = {}): Interval {
  const n = values.length;
  if (n === 0) return { lo: NaN, hi: NaN, n };
  if (n === 1) return { lo: values[0]!, hi: values[0]!, n };
  const resamples = opts.resamples ?? 2000;
  const level = opts.level ?? 0.95;
  const next = mulberry32(opts.seed ?? 1);
  const medians = new Float64Array(resamples);
  const pick = new Array<number>(n);
  for (let b = 0; b < resamples; b++) {
    for (let i = 0; i < n; i++) pick[i] = values[Math.floor(next() * n)]!;
    medians[b] = median(pick);
  }
  medians.sort();
  const tail = (1 - level) / 2;
  const at = (q: number) => medians[Math.min(resamples - 1, Math.max(0, Math.floor(q * resamples)))]!;
  return { lo: at(tail), hi: at(1 - tail), n };
}

/** (max − min) / median: the spread seen between repetitions of one configuration. */
export function relativeSpread(values: readonly number[]): number {
  if (values.length < 2) return NaN;
  const m = median(values);
  return m > 0 ? (Math.max(...values) - Math.min(...values)) / m : NaN;
}
