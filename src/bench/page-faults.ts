/**
 * What a page fault costs on this host, and how many a tool step takes with
 * each young-generation size: the figures docs/benchmarks.md ("Nineteenth
 * pass") gives for choosing `--max-semi-space-size` (src/node-flags.ts).
 *
 * First, in this process, the first and the second touch of each 4 KiB page
 * of a fresh 64 MiB Buffer (µs per page). Then, per semi-space size, a
 * `llr serve --instant` of its own with that size (a later option wins over
 * the built-in one): a ws-mode loop of 22-step chains on one connection
 * and a long-lived loop on another, `--warm` unmeasured chains each, then
 * `--chains` measured ones, with the server's minor page faults and CPU
 * (user + system) per step from `/proc/PID/stat` (Linux only), the step's
 * p50 as the client sees it, and the server's RSS after the loop.
 *
 *   npm run bench:faults [-- --sizes 64,16 --warm 300 --chains 100]
 */
import { readFileSync } from 'node:fs';
import { intFlag, parseCommandLine, usageError } from '../command-line.js';
import { longLivedLoop, openLongLived, openWs, wsChainLoop } from './overhead-loop.js';
import { spawnServer } from './processes.js';

const PAGE = 4096;
const STEPS = 22;
const OUTPUT_BYTES = 1024;
/** Clock ticks per second of /proc's utime and stime (USER_HZ, 100 on Linux). */
const TICKS = 100;

function touchCost(): { first: number; second: number } {
  const buf = Buffer.allocUnsafeSlow(64 * 1024 * 1024);
  const pages = buf.length / PAGE;
  const pass = (v: number) => {
    const t = process.hrtime.bigint();
    for (let i = 0; i < buf.length; i += PAGE) buf[i] = v;
    return Number(process.hrtime.bigint() - t) / 1000 / pages;
  };
  return { first: pass(1), second: pass(2) };
}

function procStat(pid: number): { minflt: number; ticks: number } {
  // Fields after the command's closing parenthesis: state is the 1st, minflt the 8th, utime the 12th, stime the 13th.
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { minflt: Number(f[7]), ticks: Number(f[11]) + Number(f[12]) };
}

function rssKb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
}

const COMMAND = {
  name: 'bench:faults',
  usage: `usage: npm run bench:faults -- [--sizes 64,16] [--warm N] [--chains N]
  --sizes A,B,…  the server's semi-space sizes to measure, in MiB (64,16)
  --warm N       unmeasured 22-step chains per design first (300)
  --chains N     measured chains per design (100, at most 10000)
  -h, --help     print this and exit`,
};

async function main(): Promise<void> {
  const { values } = parseCommandLine(COMMAND, { options: { sizes: { type: 'string' }, warm: { type: 'string' }, chains: { type: 'string' } } });
  const sizes = (values.sizes ?? '64,16').split(',').map((v) => intFlag(COMMAND, 'sizes', v, 0, 1, 1024));
  if (sizes.length > 8) usageError(COMMAND, '--sizes takes at most 8 sizes');
  const warm = intFlag(COMMAND, 'warm', values.warm, 300, 0, 10_000);
  const chains = intFlag(COMMAND, 'chains', values.chains, 100, 1, 10_000);
  const t = touchCost();
  process.stdout.write(`a page's first touch: ${t.first.toFixed(2)} µs; its second: ${t.second.toFixed(3)} µs (64 MiB of a fresh Buffer, this process)\n`);
  for (const size of sizes) {
    const server = await spawnServer(['--instant'], { nodeArgs: [`--max-semi-space-size=${size}`] });
    const pid = server.proc.pid!;
    try {
      for (const design of ['ws', 'long-lived'] as const) {
        const ws = design === 'ws' ? await openWs(server.url) : await openLongLived(server.url);
        const loop = () => (design === 'ws' ? wsChainLoop(ws, STEPS, OUTPUT_BYTES) : longLivedLoop(ws, STEPS, OUTPUT_BYTES));
        for (let i = 0; i < warm; i++) await loop();
        const before = procStat(pid);
        const samples: number[] = [];
        for (let i = 0; i < chains; i++) samples.push(...(await loop()).samples);
        const after = procStat(pid);
        ws.close();
        const steps = chains * STEPS;
        samples.sort((a, b) => a - b);
        const faults = (after.minflt - before.minflt) / steps;
        const cpuMs = ((after.ticks - before.ticks) * 1000) / TICKS / steps;
        process.stdout.write(
          `semi-space ${size} MiB, ${design}: ${faults.toFixed(2)} page faults and ${cpuMs.toFixed(3)} ms of server CPU per step; step p50 ${samples[samples.length >> 1]!.toFixed(3)} ms; server RSS ${(rssKb(pid) / 1024).toFixed(0)} MB\n`,
        );
      }
    } finally {
      await server.stop();
    }
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
