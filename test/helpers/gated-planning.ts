/**
 * Holding a create in planning: a clock whose 777 ms sleep — the injected
 * routing hop of a server started with `opts` — waits on a gate the test
 * opens. `inPlan` resolves when planning reaches the hop. No timers.
 */
import type { Clock } from '../../src/model/clock.js';
import { realClock } from '../../src/model/clock.js';

export function gatedPlanning(): { opts: { clock: Clock; hopLatencyMs: number; hops: number }; inPlan: Promise<void>; release: () => void } {
  let entered!: () => void;
  const inPlan = new Promise<void>((r) => (entered = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const clock: Clock = { ...realClock, sleep: (ms, signal) => (ms === 777 ? (entered(), gate) : realClock.sleep(ms, signal)) };
  return { opts: { clock, hopLatencyMs: 777, hops: 1 }, inPlan, release };
}
