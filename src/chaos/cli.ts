#!/usr/bin/env node
/**
 * `npm run chaos` — the chaos suite's long form (or `--quick`, the form CI
 * runs): prints one table row per scenario and design, then the failures
 * with their inputs. Exit code 1 when any property failed.
 *
 *   node dist/chaos/cli.js [--seed N] [--inputs N] [--quick] [--only fuzz,signals] [--hang-ms N] [--health-ms N]
 */
import { parseArgs } from 'node:util';
import { stringOptions } from '../flags.js';
import { fileURLToPath } from 'node:url';
import { SCENARIOS, defaultOptions, runChaos, type ScenarioName } from './suite.js';
import { details, errorCodes, table } from './report.js';

const { values } = parseArgs({
  options: {
    ...stringOptions(['seed', 'inputs', 'only', 'hang-ms', 'health-ms']),
    quick: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  process.stdout.write(`usage: npm run chaos -- [--seed N] [--inputs N] [--quick] [--only ${SCENARIOS.join(',')}] [--hang-ms N] [--health-ms N]\n`);
  process.exit(0);
}
const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
const opts = defaultOptions(cli, values.quick ?? false);
if (values.seed) opts.seed = Number(values.seed);
if (values.inputs) opts.inputs = Number(values.inputs);
if (values['hang-ms']) opts.hangMs = Number(values['hang-ms']);
if (values['health-ms']) opts.healthDeadlineMs = Number(values['health-ms']);
if (values.only) {
  const only = values.only.split(',') as ScenarioName[];
  for (const s of only) if (!(SCENARIOS as readonly string[]).includes(s)) throw new Error(`unknown scenario '${s}'; known: ${SCENARIOS.join(', ')}`);
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
