/**
 * `parseArgs` options from a list of names: most flags of the commands
 * (`llr serve`, `llr bench`, the chaos suite) take one string value, so
 * each command lists those names once instead of repeating
 * `{ type: 'string' }` per flag. And the checks of the `llr` commands'
 * values: a bad command line is a `UsageError` (src/cli.ts prints its
 * message and exits with status 2, never a stack trace). Pure.
 */
import { quoted } from './terminal-text.js';

/** `{ name: { type: 'string' } }` for each name, typed so `parseArgs` knows each value is a string. */
export function stringOptions<const N extends string>(names: readonly N[]): Record<N, { type: 'string' }> {
  return Object.fromEntries(names.map((n) => [n, { type: 'string' as const }])) as Record<N, { type: 'string' }>;
}

/**
 * A flag given twice that takes one value is refused (`parseArgs` with `tokens: true` hands the tokens): `--max-tools
 * 5 --max-tools 7` served with 7, unsaid, where the project refuses such ambiguity elsewhere (`--on X --off X`, a
 * repeated `?limit=`; outside attack atk70 F2). Flags declared `multiple` may repeat (`values` tells them).
 */
export function refuseRepeats(tokens: ReadonlyArray<{ kind: string; name?: string; rawName?: string }> | undefined, values: Record<string, unknown>): void {
  const seen = new Set<string>();
  for (const t of tokens ?? []) {
    // A `multiple` flag's value is the array of every one given.
    if (t.kind !== 'option' || t.name === undefined || Array.isArray(values[t.name])) continue;
    if (seen.has(t.name)) throw new UsageError(`${t.rawName ?? `--${t.name}`} is given more than once; give it once`);
    seen.add(t.name);
  }
}

/** A bad command line (a flag's value, a missing argument): `llr` prints the message and exits with status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** What a numeric flag accepts. */
export interface NumberRange {
  /** Smallest value (inclusive); default 0. */
  min?: number;
  /** Largest value (inclusive); default unbounded. */
  max?: number;
  /** Above `min`, not equal to it (a rate of 0 would never finish). */
  aboveMin?: boolean;
  /** Whole numbers only. */
  integer?: boolean;
  /** `Infinity` (or `inf`) accepted: no limit. */
  infinity?: boolean;
}

/**
 * A flag's (or its environment variable's) value as a number in its range,
 * undefined when not given. A plain decimal number only: `Number()` took
 * '' as 0 (`--port=` listened on a random port), and ' 5' or '0x10' as
 * numbers.
 */
export function numberFlag(raw: string | undefined, flag: string, range: NumberRange = {}): number | undefined {
  if (raw === undefined) return undefined;
  const { min = 0, max = Infinity, aboveMin = false, integer = false, infinity = false } = range;
  const what = `${integer ? 'an integer' : 'a number'} ${aboveMin ? `> ${min}` : `>= ${min}`}${max < Number.MAX_SAFE_INTEGER ? ` and <= ${max}` : ''}${infinity ? ' (or Infinity)' : ''}`;
  const n = raw === 'Infinity' || raw === 'inf' ? Infinity : /^\d+(\.\d+)?([eE][+-]?\d+)?$/.test(raw) ? Number(raw) : NaN;
  // A number too small for a double reads as 0: `1e-400` was taken as the integer 0 (--port=1e-400 listened on a random
  // port, --pause-timeout-ms=1e-400 ended every run at its first pause; outside attack atk43 F3).
  const underflow = n === 0 && /[1-9]/.test(raw.split(/[eE]/)[0]!);
  // A fraction a double rounds to a whole number (`4503599627370496.5`) is still not an integer (atk78 I1).
  const fraction = /^\d+\.\d*[1-9]\d*$/.test(raw);
  const ok = Number.isFinite(n)
    ? !underflow && (!integer || (Number.isSafeInteger(n) && !fraction)) && (aboveMin ? n > min : n >= min) && n <= max
    : // Infinity only as spelled: a number too large for a double (`1e309`) read as Infinity, no limit (atk70 F4).
      n === Infinity && infinity && max === Infinity && (raw === 'Infinity' || raw === 'inf');
  // A whole number past 2^53 is one, but not one a double holds exactly: said so, not "needs an integer" (atk75 I2).
  const unsafe = integer && !fraction && Number.isFinite(n) && Number.isInteger(n) && !Number.isSafeInteger(n) && n <= max;
  if (!ok) throw new UsageError(`--${flag} needs ${what}, got ${quoted(raw)}${unsafe ? ` (above ${Number.MAX_SAFE_INTEGER}, the largest integer this server holds exactly${infinity ? '; Infinity for no limit' : ''})` : ''}`);
  return n;
}

/** `read()` of a value taken from `envVar`: a UsageError it throws names the variable. */
export function fromEnvironment<T>(envVar: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`${err.message} (from ${envVar})`);
    throw err;
  }
}
