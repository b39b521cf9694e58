#!/usr/bin/env node
/**
 * `npm run chaos` — the chaos suite's long form (or `--quick`, the form CI
 * runs): prints one table row per scenario and design, then the failures
 * with their inputs. Exit code 1 when any property failed.
 *
 *   node dist/chaos/cli.js [--seed N] [--inputs N] [--quick] [--only fuzz,signals] [--hang-ms N] [--health-ms N]
 */
import { intFlag, parseCommandLine, usageError } from '../command-line.js';
import { stringOptions } from '../flags.js';
import { fileURLToPath } from 'node:url';
import { SCENARIOS, defaultOptions, runChaos, type ScenarioName } from './suite.js';
import { details, errorCodes, table } from './report.js';

const COMMAND = {
  name: 'chaos',
  usage: `usage: npm run chaos -- [--seed N] [--inputs N] [--quick] [--only ${SCENARIOS.join(',')}] [--hang-ms N] [--health-ms N]`,
};
const { values } = parseCommandLine(COMMAND, {
  options: {
    ...stringOptions(['seed', 'inputs', 'only', 'hang-ms', 'health-ms']),
    quick: { type: 'boolean' },
  },
});
const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
const opts = defaultOptions(cli, values.quick ?? false);
opts.seed = intFlag(COMMAND, 'seed', values.seed, opts.seed, 0, 2 ** 32 - 1);
opts.inputs = intFlag(COMMAND, 'inputs', values.inputs, opts.inputs, 1);
opts.hangMs = intFlag(COMMAND, 'hang-ms', values['hang-ms'], opts.hangMs, 1);
opts.healthDeadlineMs = intFlag(COMMAND, 'health-ms', values['health-ms'], opts.healthDeadlineMs, 1);
if (values.only) {
  const only = values.only.split(',') as ScenarioName[];
  for (const s of only) if (!(SCENARIOS as readonly string[]).includes(s)) usageError(COMMAND, `unknown scenario '${s}'; known: ${SCENARIOS.join(', ')}`);
  opts.only = only;
}
const t0 = performance.now();
opts.progress = (line) => process.stderr.write(`[chaos ${((performance.now() - t0) / 1000).toFixed(1)} s] ${line}\n`);
const rows = await runChaos(opts);
const failed = rows.reduce((n, r) => n + r.failed, 0);
process.stdout.write(`\nchaos suite: seed ${opts.seed}, ${opts.inputs} fuzz inputs per design, ${opts.quick ? 'quick' : 'long'} form, ${((performance.now() - t0) / 1000).toFixed(1)} s\n\n`);
process.stdout.write(table(rows) + '\n\n');
const d = details(rows);
if (d) process.stdout.write(d + '\n\n');
const codes = errorCodes(rows);
if (codes) process.stdout.write(`error codes seen:\n${codes}\n`);
process.stdout.write(`\n${failed === 0 ? 'every property held' : `${failed} failures`}\n`);
process.exitCode = failed === 0 ? 0 : 1;
