/**
 * The server-side half of `npm run bench:overhead`: delta events per server
 * CPU-second over many concurrent unpaced streams (the server in its own
 * process, its CPU read from `GET /llr/stats` around the streams), and
 * start-up (spawn → listening, and the resident memory of the idle server
 * before any request, read from /proc where there is one).
 *
 * Leaves out printing (overhead.ts) and the paused phase (phases.ts).
 */
import { readFileSync } from 'node:fs';
import type WebSocket from 'ws';
import type { ServerStats } from './guard.js';
import { cpuMs, deadline, type ServerProcess } from './guard.js';
import { spawnServer } from './processes.js';
import { openWs } from './overhead-loop.js';

const DELTA = '"type":"response.output_text.delta"';

export interface ThroughputResult {
  streams: number;
  deltas: number;
  delta_bytes: number;
  server_cpu_ms: number;
  wall_ms: number;
  deltas_per_cpu_second: number;
}

/**
 * `streams` connections, each running one response that streams
 * `tokensPerStream` deltas (the stream workload's model call 2: see
 * phases.ts `streamWorkload`), all at once. Counts delta frames by their
 * type prefix without parsing them, so the bench's own process is not what
 * limits the rate.
 */
export async function deltaThroughput(
  server: ServerProcess,
  opts: { streams: number; input: unknown[]; tools: unknown[]; expected: number; timeoutMs: number },
): Promise<ThroughputResult> {
  const sockets: WebSocket[] = await server.race(Promise.all(Array.from({ length: opts.streams }, () => openWs(server.url))));
  let deltas = 0;
  let bytes = 0;
  try {
    const before = await server.getJson<ServerStats>('/llr/stats');
    const t0 = performance.now();
    const done = sockets.map(
      (ws) =>
        new Promise<void>((resolve, reject) => {
          ws.on('message', (data: Buffer) => {
            const text = data.toString();
            if (text.includes(DELTA)) {
              deltas++;
              bytes += data.length;
            } else if (text.includes('"type":"response.completed"')) resolve();
            else if (text.includes('"type":"error"') || text.includes('"type":"response.failed"')) reject(new Error(`stream failed: ${text.slice(0, 300)}`));
          });
          ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', store: false, input: opts.input, tools: opts.tools }));
        }),
    );
    await deadline(server.race(Promise.all(done)), opts.timeoutMs, `${opts.streams} concurrent streams`);
    const wall = performance.now() - t0;
    const after = await server.getJson<ServerStats>('/llr/stats');
    const cpu = cpuMs(before, after);
    // A rate over no CPU is Infinity: it would pass the target, agree with any other round in the warm-up's
    // steadiness test (|x − ∞| ≤ 0.1 × ∞) and print as "∞". Fail instead: the measurement is void.
    if (!(cpu > 0)) throw new Error(`the server's CPU did not advance over a stream round (${cpu} ms from /llr/stats): no rate to report`);
    if (deltas !== opts.streams * opts.expected) throw new Error(`expected ${opts.streams * opts.expected} deltas, got ${deltas}`);
    return {
      streams: opts.streams,
      deltas,
      delta_bytes: Math.round(bytes / Math.max(1, deltas)),
      server_cpu_ms: cpu,
      wall_ms: wall,
      deltas_per_cpu_second: deltas / (cpu / 1000),
    };
  } finally {
    for (const ws of sockets) ws.close();
  }
}

export interface StartupResult {
  listening_ms: number;
  /** CPU (user + system) the server process had used when it was listening (/proc; null elsewhere): the figure a busy machine inflates least. */
  listening_cpu_ms: number | null;
  /** Resident memory of the idle server before any request (/proc), or from `/llr/stats` where there is no /proc. */
  rss_bytes: number;
  rss_source: 'proc' | 'llr/stats';
  /** The same, after one request (the tokenizer's tables and the first model call loaded). */
  rss_after_first_response_bytes: number;
  /** Send → complete JSON body of that first request (by default it includes loading the tokenizer's tables). */
  first_response_ms: number;
}

/** utime + stime of a process, ms (/proc/PID/stat, in clock ticks of 10 ms on Linux). */
function procCpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

function procRss(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Spawn `llr serve` (default options plus `args`), time it to listening, read its idle RSS, then after one response. */
export async function startup(args: string[] = []): Promise<StartupResult> {
  const t0 = performance.now();
  const child = await spawnServer(args);
  const listening = performance.now() - t0;
  try {
    const cpu = procCpuMs(child.proc.pid);
    const proc = procRss(child.proc.pid);
    let rss = proc;
    if (rss === null) {
      const res = await fetch(new URL('/llr/stats', child.url));
      rss = ((await res.json()) as ServerStats).memory.rss;
    }
    const sent = performance.now();
    const res = await fetch(new URL('/v1/responses', child.url), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: 'hello', store: false }),
    });
    const body = await res.text();
    const firstResponse = performance.now() - sent;
    if (!res.ok) throw new Error(`the first request failed: HTTP ${res.status} ${body.slice(0, 300)}`);
    const after = procRss(child.proc.pid) ?? ((await (await fetch(new URL('/llr/stats', child.url))).json()) as ServerStats).memory.rss;
    return { listening_ms: listening, listening_cpu_ms: cpu, rss_bytes: rss, rss_source: proc === null ? 'llr/stats' : 'proc', rss_after_first_response_bytes: after, first_response_ms: firstResponse };
  } finally {
    await child.stop();
  }
}
