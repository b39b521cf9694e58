/**
 * The bench's targets as one table: each row is one checked (or only
 * reported) value with its unit, its threshold and what it means. The
 * verdicts (verdicts.ts), the CLI lines, the report and the table in
 * docs/benchmarks.md are all derived from it, so a threshold is written
 * once, here.
 *
 * Pure data and small pure helpers; the figures themselves are computed in
 * derive.ts, summaries.ts and verdicts.ts.
 */

export type TargetId = 1 | 2 | 3 | 4;

export interface TargetSpec {
  key: string;
  /** The row's label in a CLI line. */
  short: string;
  target: TargetId;
  /** What is measured; `{speed}` stands for target 2's model speed. */
  value: string;
  unit: '×' | '%' | 'deltas' | 'KiB' | 'ms';
  /** null: reported, no threshold. */
  threshold: number | null;
  /** `max`: value ≤ threshold; `abs`: |value| ≤ threshold. */
  compare: 'max' | 'abs';
  meaning: string;
}

export const TARGET_SPECS: readonly TargetSpec[] = [
  {
    key: 'growth_long_lived',
    short: 'long-lived last ÷ first',
    target: 1,
    value: 'long-lived per-call overhead, last ÷ first (like-for-like continuation calls, instant model, whole workload)',
    unit: '×',
    threshold: 1.5,
    compare: 'max',
    meaning: 'the API work per model call does not grow with the conversation',
  },
  { key: 'growth_ws', short: 'ws last ÷ first', target: 1, value: 'ws per-call overhead, last ÷ first (same)', unit: '×', threshold: 1.5, compare: 'max', meaning: 'the same for WebSocket mode' },
  {
    key: 'floor_long_lived',
    short: 'long-lived over the floor',
    target: 2,
    value: 'long-lived end-to-end above the floor at {speed} tokens/s, zero tool time',
    unit: '%',
    threshold: 3,
    compare: 'max',
    meaning: 'the floor is the analytic model time plus one loopback round trip per call: what no API could beat on this machine',
  },
  { key: 'floor_ws', short: 'ws over the floor', target: 2, value: 'ws end-to-end above the floor (same)', unit: '%', threshold: 6, compare: 'max', meaning: 'the same for WebSocket mode' },
  { key: 'deltas_lost', short: 'deltas lost', target: 3, value: 'output tokens of one stream that reached the client as no delta event', unit: 'deltas', threshold: 0, compare: 'max', meaning: 'no delta lost' },
  {
    key: 'rate_deviation',
    short: 'rate',
    target: 3,
    value: "one stream's delta rate at the client against the model's rate",
    unit: '%',
    threshold: 2,
    compare: 'abs',
    meaning: 'the API does not slow a fast model down',
  },
  { key: 'paused_rss', short: 'RSS per paused run', target: 4, value: 'server RSS per paused long-lived run', unit: 'KiB', threshold: null, compare: 'max', meaning: 'what holding a run open costs; reported' },
  { key: 'resume_p99', short: 'append → resume p99', target: 4, value: 'append → first resumed event, p99', unit: 'ms', threshold: null, compare: 'max', meaning: 'how fast a paused run resumes while the others wait; reported' },
];

export const TARGET_NAMES: Record<TargetId, string> = {
  1: 'per-call overhead stays flat as the conversation grows',
  2: 'end-to-end near the floor at {speed} tokens/s with zero tool time',
  3: 'one stream holds 4,000 tokens/s, no delta lost; 100 streams against raw ws frames',
  4: '1,000 concurrent paused long-lived runs',
};

function specsOf(id: TargetId): TargetSpec[] {
  return TARGET_SPECS.filter((s) => s.target === id);
}

export function spec(key: string): TargetSpec {
  const s = TARGET_SPECS.find((x) => x.key === key);
  if (!s) throw new Error(`no target row '${key}'`);
  return s;
}

export function fill(text: string, speed: number): string {
  return text.replace(/\{speed\}/g, speed.toLocaleString('en-US'));
}

/** `≤ 1.5×`, `≤ 3 %`, `±2 %`, `= 0`, `reported`. */
export function thresholdText(s: TargetSpec): string {
  if (s.threshold === null) return 'reported';
  const unit = s.unit === '×' ? '×' : ` ${s.unit}`;
  if (s.threshold === 0 && s.compare === 'max') return '= 0';
  return `${s.compare === 'abs' ? '±' : '≤ '}${s.threshold}${unit}`;
}

/** Whether `value` (in the row's unit) passes; null for a reported row or a value not measured. */
export function passes(s: TargetSpec, value: number | null): boolean | null {
  if (s.threshold === null || value === null || !Number.isFinite(value)) return null;
  return (s.compare === 'abs' ? Math.abs(value) : value) <= s.threshold;
}

export type Verdict = 'holds' | 'does not hold' | 'not measured' | 'reported';

/** A target's verdict from its rows' values: every checked row passes → holds. */
export function verdictOf(id: TargetId, values: Record<string, number | null>): Verdict {
  const rows = specsOf(id);
  const checked = rows.filter((s) => s.threshold !== null);
  if (rows.every((s) => values[s.key] === null || values[s.key] === undefined)) return 'not measured';
  if (checked.length === 0) return 'reported';
  const results = checked.map((s) => passes(s, values[s.key] ?? null));
  if (results.some((r) => r === false)) return 'does not hold';
  if (results.some((r) => r === null)) return 'not measured';
  return 'holds';
}

/** The target text of a CLI line, from the rows: `long-lived over the floor ≤ 3 %; ws over the floor ≤ 6 %`. */
export function targetText(id: TargetId): string {
  return specsOf(id)
    .map((s) => `${s.short} ${thresholdText(s)}`)
    .join('; ');
}

/** The table as markdown (report and docs). */
export function targetsMarkdown(speed: number): string {
  const rows = TARGET_SPECS.map((s) => `| ${s.target} | ${fill(s.value, speed)} | ${s.unit} | ${thresholdText(s)} | ${s.meaning} |`);
  return ['| target | value | unit | threshold | what it means |', '|---|---|---|---|---|', ...rows].join('\n');
}
