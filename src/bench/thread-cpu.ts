/**
 * A process's CPU time per thread, from Linux's /proc: its main thread (the
 * event loop, where the server's own work runs) apart from the rest (V8's
 * optimising compiler and garbage-collector helpers, libuv's pool). On a
 * small machine the background threads take CPU from the benchmark's client,
 * and while they are busy V8 is still optimising or tiering down what the
 * benchmark measures (bench:overhead reports them over its measured loops).
 *
 * Leaves out other platforms (null there) and time finer than the kernel's
 * clock tick (USER_HZ, 100 per second on Linux's ABIs: 10 ms per thread).
 */
import { readdirSync, readFileSync } from 'node:fs';

const MS_PER_TICK = 10;

export interface ThreadCpu {
  /** The main thread's user + system CPU, ms. */
  main: number;
  /** Every other thread's, summed, ms (threads that ended are not counted). */
  others: number;
}

/** Fields 14 and 15 (utime, stime) of a /proc stat line, after the command name (which may hold spaces and parentheses). */
export function statTicks(stat: string): number {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

export function threadCpu(pid: number): ThreadCpu | null {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let main = 0;
  let others = 0;
  for (const tid of tids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const ms = statTicks(stat) * MS_PER_TICK;
    if (tid === String(pid)) main += ms;
    else others += ms;
  }
  return { main, others };
}

/** What `b` adds to `a`, or null when either is unknown. */
export function threadCpuSince(a: ThreadCpu | null, b: ThreadCpu | null): ThreadCpu | null {
  return a && b ? { main: b.main - a.main, others: Math.max(0, b.others - a.others) } : null;
}
