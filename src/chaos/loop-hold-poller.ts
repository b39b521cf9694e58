/**
 * The `/health` poller of the loop-hold probe (chaos/loop-hold.ts), in a
 * worker thread so that the probe's own work (building a 16 MiB body,
 * reading a large answer) never delays a poll: one `GET /health` at a time on
 * a kept-alive connection, the next one 2 ms after the last answer. For every
 * poll it also reads the CPU time of the server's main thread (the event
 * loop's; GC helper threads and the libuv pool excluded) from /proc (Linux),
 * so the slowest wait can be told apart from a machine too busy to run the
 * server.
 *
 * Messages in: `{cmd: 'start'}` (reset the figures), `{cmd: 'stop'}` (answer
 * with `PollFigures`), `{cmd: 'exit'}`. Leaves out everything but /health.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';

export interface PollFigures {
  polls: number;
  /** The slowest /health answer, ms (wall clock, from sending to the whole answer). */
  maxMs: number;
  /** CPU time (user + system) the server's main thread used during that slowest wait, ms; null off Linux. */
  cpuAtMaxMs: number | null;
  /** The most main-thread CPU time used during any one wait, ms. */
  maxCpuMs: number | null;
  /** Polls that failed (connection refused or reset). */
  failures: number;
}

const { url, pid } = workerData as { url: string; pid: number };
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const TICK_MS = 10; // /proc reports CPU time in clock ticks (USER_HZ, 100 on Linux).

function cpuMs(): number | null {
  try {
    // Fields after the `(comm)`: utime is the 12th, stime the 13th (1-based after the state field).
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return null;
  }
}

let figures: PollFigures = fresh();
let running = false;

function fresh(): PollFigures {
  return { polls: 0, maxMs: 0, cpuAtMaxMs: null, maxCpuMs: null, failures: 0 };
}

function pollOnce(): Promise<void> {
  return new Promise((resolve) => {
    const cpu0 = cpuMs();
    const t0 = performance.now();
    const done = (ok: boolean) => {
      const ms = performance.now() - t0;
      const c1 = cpuMs();
      const cpu = cpu0 !== null && c1 !== null ? c1 - cpu0 : null;
      figures.polls++;
      if (!ok) figures.failures++;
      if (ms > figures.maxMs) {
        figures.maxMs = ms;
        figures.cpuAtMaxMs = cpu;
      }
      if (cpu !== null) figures.maxCpuMs = Math.max(figures.maxCpuMs ?? 0, cpu);
      resolve();
    };
    const req = request(`${url}/health`, { agent }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode === 200));
      res.on('error', () => done(false));
    });
    req.on('error', () => done(false));
    req.end();
  });
}

async function loop(): Promise<void> {
  while (running) {
    await pollOnce();
    await new Promise((r) => setTimeout(r, 2));
  }
}

let looping: Promise<void> = Promise.resolve();
parentPort!.on('message', (m: { cmd: 'start' | 'stop' | 'exit' }) => {
  if (m.cmd === 'start') {
    figures = fresh();
    running = true;
    looping = loop();
    parentPort!.postMessage({ started: true });
  } else if (m.cmd === 'stop') {
    running = false;
    void looping.then(() => parentPort!.postMessage(figures));
  } else {
    agent.destroy();
    parentPort!.close();
  }
});
