/**
 * `npm run bench:persist`: what the durability default costs. Two servers
 * in their own processes, each on its own SQLite file, instant model: one
 * with the default (a `store:true` response is committed before its terminal
 * event), one with `--on overlap_persist` (the write runs after it). The same
 * ws-mode `store:true` requests alternate between them; it prints p50 / p99
 * of create → `response.completed` for both, their difference, and the
 * server's own `persist` span, with the machine it ran on.
 *
 * Flags: --responses N per server (default 400), --input-bytes N (default
 * 4096, the stored input's size), --json.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { intFlag, parseCommandLine } from '../command-line.js';
import WebSocket from 'ws';
import type { ServerEvent } from '../protocol/events.js';
import { spawnServer } from './processes.js';
import { round, summary } from './stats.js';

const COMMAND = {
  name: 'bench:persist',
  usage: `usage: npm run bench:persist -- [--responses N] [--input-bytes N] [--json]
  --responses N    stored responses per store (400)
  --input-bytes N  bytes of input per response (4096)
  --json           the result as JSON
  -h, --help       print this and exit`,
};
const { values } = parseCommandLine(COMMAND, {
  options: { responses: { type: 'string' }, 'input-bytes': { type: 'string' }, json: { type: 'boolean' } },
});
const responses = intFlag(COMMAND, 'responses', values.responses, 400, 1);
const input = 'x'.repeat(intFlag(COMMAND, 'input-bytes', values['input-bytes'], 4096, 1, 16 * 2 ** 20));

function open(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/v1/responses');
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

/** One stored response: ms from send to response.completed, and the server's persist span. */
function once(ws: WebSocket): Promise<{ ms: number; persist: number }> {
  return new Promise((resolve, reject) => {
    let ms = 0;
    const t = performance.now();
    ws.on('message', function onMessage(data) {
      const e = JSON.parse(data.toString()) as ServerEvent;
      if (e.type === 'response.completed') ms = performance.now() - t;
      else if (e.type === 'llr:timing') {
        ws.off('message', onMessage);
        resolve({ ms, persist: e.totals['persist'] ?? 0 });
      } else if (e.type === 'error' || e.type === 'response.failed') {
        ws.off('message', onMessage);
        reject(new Error(`server error: ${JSON.stringify(e)}`));
      }
    });
    ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input, store: true, llr: { timing: true } }));
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(os.tmpdir(), 'llr-persist-'));
  const configs = [
    { name: 'durable (default)', args: [] as string[] },
    { name: 'overlap_persist', args: ['--on', 'overlap_persist'] },
  ];
  const servers = await Promise.all(configs.map((c, i) => spawnServer(['--instant', '--store', join(dir, `s${i}.sqlite`), ...c.args])));
  try {
    const sockets = await Promise.all(servers.map((s) => open(s.url)));
    const ms: number[][] = configs.map(() => []);
    const persist: number[][] = configs.map(() => []);
    // Warm-up (JIT, tokenizer tables, SQLite pages) is not measured.
    for (const ws of sockets) for (let i = 0; i < 50; i++) await once(ws);
    for (let i = 0; i < responses; i++) {
      // Alternate which server goes first so drift on a shared machine hits both alike.
      const order = i % 2 === 0 ? [0, 1] : [1, 0];
      for (const k of order) {
        const r = await once(sockets[k]!);
        ms[k]!.push(r.ms);
        persist[k]!.push(r.persist);
      }
    }
    for (const ws of sockets) ws.close();
    const rows = configs.map((c, k) => {
      const s = summary(ms[k]!);
      return { config: c.name, completed_ms: { p50: round(s.p50), p99: round(s.p99) }, persist_ms_p50: round(summary(persist[k]!).p50) };
    });
    const result = {
      machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version, platform: `${os.platform()} ${os.release()}` },
      config: { design: 'ws', model: 'instant', store: 'SQLite file (WAL, synchronous=NORMAL)', responses_per_server: responses, input_bytes: input.length },
      rows,
      durable_minus_overlapped_ms: { p50: round(rows[0]!.completed_ms.p50 - rows[1]!.completed_ms.p50), p99: round(rows[0]!.completed_ms.p99 - rows[1]!.completed_ms.p99) },
    };
    if (values.json) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      return;
    }
    const out = [
      `machine: ${result.machine.cpus} × ${result.machine.cpu}, node ${result.machine.node}, ${result.machine.platform}`,
      `ws mode, instant model, ${responses} store:true responses per server, ${input.length}-byte input, SQLite file store`,
      ``,
      `                     create → completed p50 / p99 ms   server persist span p50 ms`,
      ...rows.map((r) => `${r.config.padEnd(20)} ${fmt(r.completed_ms.p50)} / ${fmt(r.completed_ms.p99)}            ${fmt(r.persist_ms_p50)}`),
      `durable − overlapped ${fmt(result.durable_minus_overlapped_ms.p50)} / ${fmt(result.durable_minus_overlapped_ms.p99)}`,
    ];
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

function fmt(x: number): string {
  return x.toFixed(3).padStart(8);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:persist failed: ${(err as Error).message}\n`);
  process.exitCode = 1;
});
