/**
 * `parseArgs` options from a list of names: most flags of the commands
 * (`llr serve`, `llr bench`, the chaos suite) take one string value, so
 * each command lists those names once instead of repeating
 * `{ type: 'string' }` per flag. Pure; no parsing of values here.
 */

/** `{ name: { type: 'string' } }` for each name, typed so `parseArgs` knows each value is a string. */
export function stringOptions<const N extends string>(names: readonly N[]): Record<N, { type: 'string' }> {
  return Object.fromEntries(names.map((n) => [n, { type: 'string' as const }])) as Record<N, { type: 'string' }>;
}
