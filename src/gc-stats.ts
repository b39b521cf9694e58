/**
 * The process's garbage-collection pauses, for `GET /llr/stats`: how many of
 * each kind V8 reported, their total and longest time. A benchmark in another
 * process reads them before and after what it measures, so a tail it sees can
 * be told apart from the server's own pauses (issue 11: a scavenge here takes
 * 2–3 ms, twenty times a tool step).
 *
 * One `PerformanceObserver` per process, whatever the number of servers in it
 * (the tests start many): observing while at least one server runs
 * (`watchGc`), not after the last has closed. The counts are cumulative while
 * observed; a reader takes differences. Fixed size: three counters per kind.
 */
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

/** One kind of pause: how many, their sum and the longest (ms). */
export interface GcPauses {
  count: number;
  total_ms: number;
  max_ms: number;
}

/** Pauses by kind: `minor` (scavenges), `major` (mark-compact), `other` (incremental marking steps, weak callbacks). */
export interface GcStats {
  minor: GcPauses;
  major: GcPauses;
  other: GcPauses;
}

const empty = (): GcPauses => ({ count: 0, total_ms: 0, max_ms: 0 });
const stats: GcStats = { minor: empty(), major: empty(), other: empty() };
let observer: PerformanceObserver | null = null;
let watchers = 0;

function kindOf(entry: PerformanceEntry): keyof GcStats {
  // Node 20 puts the kind in `detail.kind` (the top-level `kind` is deprecated).
  const detail = (entry as { detail?: unknown }).detail as { kind?: unknown } | null | undefined;
  const kind = detail?.kind;
  if (kind === constants.NODE_PERFORMANCE_GC_MINOR) return 'minor';
  if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) return 'major';
  return 'other';
}

function note(entry: PerformanceEntry): void {
  const p = stats[kindOf(entry)];
  p.count++;
  p.total_ms += entry.duration;
  if (entry.duration > p.max_ms) p.max_ms = entry.duration;
}

/** Observe the process's GC pauses until the returned function is called (once each server; the last stops it). */
export function watchGc(): () => void {
  if (watchers++ === 0) {
    observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) note(entry);
    });
    observer.observe({ entryTypes: ['gc'] });
  }
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--watchers === 0) {
      observer?.disconnect();
      observer = null;
    }
  };
}

/** A copy of the counts so far (rounded to µs). */
export function gcStats(): GcStats {
  const copy = (p: GcPauses): GcPauses => ({ count: p.count, total_ms: round3(p.total_ms), max_ms: round3(p.max_ms) });
  return { minor: copy(stats.minor), major: copy(stats.major), other: copy(stats.other) };
}

const round3 = (ms: number) => Math.round(ms * 1000) / 1000;
