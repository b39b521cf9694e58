/**
 * The command lines of the repository's own scripts (`npm run
 * bench:overhead`, `soak`, `chaos`, `bench:persist`, `bench:loop-hold`):
 * `-h` / `--help` prints the usage, and a bad command line (an unknown
 * flag, a missing value, a count that is not an integer) gets its message
 * and the usage on stderr with exit status 2, never a stack trace. `llr`
 * itself parses its flags in flags.ts and cli.ts.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { refuseRepeats } from './flags.js';
import { quoted } from './terminal-text.js';

export interface Command {
  /** How the command names itself in its messages (`bench:overhead`). */
  name: string;
  /** The whole usage text, printed by --help and after every usage error. */
  usage: string;
}

/** A bad command line: its message and the usage on stderr, exit status 2. */
export function usageError(cmd: Command, message: string): never {
  process.stderr.write(`${cmd.name}: ${message}\n${cmd.usage}\n`);
  process.exit(2);
}

/** `parseArgs` of the process's arguments with `-h` / `--help` added: help prints the usage and exits 0; a parse error is a usage error. */
export function parseCommandLine<T extends ParseArgsConfig>(cmd: Command, config: T) {
  const withHelp = { ...config, tokens: true, options: { ...config.options, help: { type: 'boolean', short: 'h' } } } as T & {
    tokens: true;
    options: NonNullable<T['options']> & { help: { type: 'boolean'; short: 'h' } };
  };
  let parsed: ReturnType<typeof parseArgs<typeof withHelp>>;
  try {
    parsed = parseArgs(withHelp);
    // Each flag once, as the llr commands take them (flags.ts refuseRepeats); the parse's own tokens tell repeats.
    refuseRepeats(parsed.tokens, parsed.values as Record<string, unknown>);
  } catch (err) {
    return usageError(cmd, (err as Error).message);
  }
  if ((parsed.values as { help?: boolean }).help) {
    process.stdout.write(`${cmd.usage}\n`);
    process.exit(0);
  }
  return parsed;
}

/**
 * A flag's value as an integer in [min, max], `fallback` when the flag was
 * not given. Digits only: `Number()` would take '' as 0, and '1e3', '0x10'
 * or ' 5' as numbers.
 */
export function intFlag(cmd: Command, name: string, value: string | undefined, fallback: number, min: number, max = Infinity): number {
  if (value === undefined) return fallback;
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) usageError(cmd, `--${name} needs an integer in [${min}, ${max}], got ${quoted(value)}`);
  return n;
}
