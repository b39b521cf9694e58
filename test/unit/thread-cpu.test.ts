/**
 * bench/thread-cpu.ts: a process's CPU per thread from /proc (Linux only,
 * null elsewhere and for a process that does not exist), its main thread
 * apart from the rest; the stat line's parse survives a command name with
 * spaces and parentheses.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { statTicks, threadCpu, threadCpuSince } from '../../src/bench/thread-cpu.js';

const linux = existsSync('/proc/self/task');

describe('thread-cpu', () => {
  it('reads utime + stime after the command name, whatever it holds', () => {
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
    const rest = 'S 1 1 1 0 -1 4194560 10 0 0 0 123 45 0 0 20 0 11 0';
    expect(statTicks(`4242 (node) ${rest}`)).toBe(168);
    expect(statTicks(`4242 (a) b (c) d) ${rest}`)).toBe(168);
  });

  it.runIf(linux)("charges this thread's work to main, and tells a missing process apart", () => {
    const before = threadCpu(process.pid);
    expect(before).not.toBeNull();
    // Busy until the kernel's clock has charged this (main) thread five more ticks (50 ms).
    // Bounded: each round is ~0.1 ms of work, so 20,000 rounds is far past 50 ms (a /proc that never advances fails).
    let now = before!;
    let sink = 0;
    for (let round = 0; round < 20_000 && now.main < before!.main + 50; round++) {
      for (let i = 0; i < 1e5; i++) sink += Math.sqrt(i);
      now = threadCpu(process.pid)!;
    }
    expect(sink).toBeGreaterThan(0);
    const d = threadCpuSince(before, now)!;
    expect(d.main).toBeGreaterThanOrEqual(50);
    // The spin is this thread's: the process's other threads (V8's compiler, the test runner's) did less meanwhile.
    expect(d.others).toBeGreaterThanOrEqual(0);
    expect(d.main).toBeGreaterThan(d.others);
    expect(threadCpu(2 ** 22 + 1)).toBeNull(); // above the kernel's pid_max limit: no such process
    expect(threadCpuSince(null, now)).toBeNull();
  });
});
