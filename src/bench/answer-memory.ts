/**
 * What large JSON answers being written at once cost the server in memory,
 * and what the server-wide byte budget (`--max-server-bytes`) says of them:
 * the figures docs/reliability.md gives for `sendJsonCooperative`
 * (src/transport/json-out.ts).
 *
 * A `llr serve --instant` of its own (Linux: it reads `/proc/PID/status`)
 * stores one response whose one input item is `--item-mb` MB of text; then
 * `--readers` clients at once each ask for its `input_items` page on a
 * connection of their own and read only the first bytes of the answer, as a
 * client that stops reading does (`--send-stall-timeout-ms 0`: none is
 * dropped). Printed: how many were answered 200 and how many 503
 * `server_busy`, the server's RSS before, at its peak (VmHWM) and after, and
 * its `bytes_held`; then, the clients gone, whether `bytes_held` is back at 0.
 *
 *   npm run bench:answers [-- --readers 300 --item-mb 10 --max-server-mb 256]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { intFlag, parseCommandLine } from '../command-line.js';
import { spawnServer } from './processes.js';

const COMMAND = {
  name: 'bench:answers',
  usage: `usage: npm run bench:answers -- [--readers N] [--item-mb N] [--max-server-mb N]
  --readers N        clients asking at once, each on its own connection (300, at most 2000)
  --item-mb N        MB of the stored response's one input item (10, at most 10: one text is at most 10,485,760 characters)
  --max-server-mb N  the server's --max-server-bytes, in MiB (256, its default)
  -h, --help         print this and exit`,
};

/** The server's resident set now and at its peak, in MB (`/proc/PID/status`). */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/** Sends `request` and resolves with the answer's status once its first bytes arrive; reads nothing more. */
function stalledReader(port: number, request: string, open: Socket[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write(request));
    open.push(s);
    s.once('error', reject);
    s.once('data', (d: Buffer) => {
      s.pause();
      resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(d.toString('latin1'))?.[1] ?? 0));
    });
  });
}

async function bytesHeld(url: string): Promise<number> {
  return ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;
}

async function main(): Promise<void> {
  const { values } = parseCommandLine(COMMAND, { options: { readers: { type: 'string' }, 'item-mb': { type: 'string' }, 'max-server-mb': { type: 'string' } } });
  const readers = intFlag(COMMAND, 'readers', values.readers, 300, 1, 2000);
  const itemMb = intFlag(COMMAND, 'item-mb', values['item-mb'], 10, 1, 10);
  const budgetMib = intFlag(COMMAND, 'max-server-mb', values['max-server-mb'], 256, 1, 65_536);
  const server = await spawnServer(['--instant', '--send-stall-timeout-ms', '0', '--max-server-bytes', String(budgetMib * 1024 * 1024)]);
  const pid = server.proc.pid!;
  const port = Number(new URL(server.url).port);
  const open: Socket[] = [];
  try {
    const created = await fetch(`${server.url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: [{ role: 'user', content: 'x'.repeat(itemMb * 1_000_000) }] }),
    });
    if (created.status !== 200) throw new Error(`the create was answered ${created.status}: ${await created.text()}`);
    const { id } = (await created.json()) as { id: string };
    // The peak from here on (Linux resets VmHWM to the current RSS on a write of 5).
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    const before = memory(pid).rss;
    const request = `GET /v1/responses/${id}/input_items HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
    const statuses = await Promise.all(Array.from({ length: readers }, () => stalledReader(port, request, open)));
    // Every answer has begun (or was refused): let the admitted ones run until their sockets take nothing more.
    let last = -1;
    for (let held = await bytesHeld(server.url); held !== last; held = await bytesHeld(server.url)) {
      last = held;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const during = memory(pid);
    const count = (status: number) => statuses.filter((s) => s === status).length;
    process.stdout.write(
      `${readers} readers of a ${itemMb} MB input item, none reading, --max-server-bytes ${budgetMib} MiB: ${count(200)} answered 200, ${count(503)} refused 503` +
        `${readers - count(200) - count(503) > 0 ? `, ${readers - count(200) - count(503)} other` : ''}; ` +
        `server RSS ${before.toFixed(0)} MB before, ${during.peak.toFixed(0)} MB at its peak, ${during.rss.toFixed(0)} MB while they wait; bytes_held ${(last / 1024 / 1024).toFixed(1)} MiB\n`,
    );
    for (const s of open) s.destroy();
    let held = await bytesHeld(server.url);
    for (let i = 0; i < 200 && held !== 0; i++) held = await bytesHeld(server.url);
    process.stdout.write(`the readers gone: bytes_held ${held}\n`);
  } finally {
    for (const s of open) s.destroy();
    await server.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
