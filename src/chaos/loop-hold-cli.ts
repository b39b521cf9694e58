#!/usr/bin/env node
/**
 * `npm run bench:loop-hold` — the loop-hold probe (chaos/loop-hold.ts):
 * every hostile request shape against a fresh `llr serve` process with the
 * default limits, the slowest `/health` answer while each is processed, and
 * a verdict against 250 ms. Exit code 1 when any shape holds the loop.
 *
 *   node dist/chaos/loop-hold-cli.js [--bytes N] [--only SUBSTRING] [-- serve flags…]
 */
import { intFlag, parseCommandLine } from '../command-line.js';
import { fileURLToPath } from 'node:url';
import { cpus } from 'node:os';
import { HOLD_LIMIT_MS, holdTable, probeLoopHold } from './loop-hold.js';

const COMMAND = { name: 'bench:loop-hold', usage: 'usage: npm run bench:loop-hold -- [--bytes N] [--only SUBSTRING] [-- extra llr serve flags]' };
const { values, positionals } = parseCommandLine(COMMAND, {
  options: { bytes: { type: 'string' }, only: { type: 'string' } },
  allowPositionals: true,
});
const bytes = values.bytes === undefined ? undefined : intFlag(COMMAND, 'bytes', values.bytes, 0, 1);
const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
const only = values.only;
const t0 = performance.now();
const rows = await probeLoopHold({
  cli,
  ...(bytes !== undefined && { bytes }),
  serveArgs: positionals,
  ...(only !== undefined && { only: (name: string) => name.includes(only) }),
  progress: (line) => process.stderr.write(`[loop-hold ${((performance.now() - t0) / 1000).toFixed(1)} s] ${line}\n`),
});
const held = rows.filter((r) => r.verdict === 'HOLDS').length;
process.stdout.write(
  `\nloop-hold probe: node ${process.version}, ${cpus().length} CPUs, load ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}; ` +
    `llr serve --instant ${positionals.join(' ')}(default limits otherwise); /health polled every ~2 ms from a worker thread\n` +
    `'srv CPU' = CPU time of the server's main thread (its event loop) during the slowest /health wait; ` +
    `verdict 'slow machine' = a slow answer while that thread used < ${HOLD_LIMIT_MS} ms CPU (the OS did not run it)\n\n`,
);
process.stdout.write(`${holdTable(rows)}\n\n${held === 0 ? `no shape held /health over ${HOLD_LIMIT_MS} ms` : `${held} shapes held /health over ${HOLD_LIMIT_MS} ms`}\n`);
process.exitCode = held === 0 ? 0 : 1;
