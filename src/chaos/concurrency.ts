/**
 * Many concurrent long-lived runs, each a real agent loop: the model calls
 * `exec_command` K times one after another, the client answers each pause,
 * the run completes. 1,000 × 10 in the long form, 100 × 5 in the quick one.
 * Every run must complete with a gapless stream and K function calls, and be
 * billed exactly once; the server must stay responsive throughout.
 */
import { Tally } from './oracle.js';
import { outputs, shellCreate } from './bodies.js';
import { checkQuiescent, checkRecords } from './settle.js';
import type { ScenarioContext } from './suite.js';
import { WsPeer } from './ws-peer.js';

/** Bound on each step of a run (its next pause or its end) while every run is in flight at once, ms. */
const STEP_BOUND_MS = 60_000;

export async function run(ctx: ScenarioContext): Promise<Tally[]> {
  const runs = ctx.opts.quick ? 100 : 1_000;
  const calls = ctx.opts.quick ? 5 : 10;
  const tally = new Tally('concurrency', `long-lived ${runs}×${calls}`);
  // One connection per run, plus the harness's probes: past the default cap (1,024) the server would refuse some with 503.
  await ctx.withServer(tally, { args: ['--max-connections', String(runs + 500)] }, async (target) => {
    const peers: WsPeer[] = [];
    // Open in waves so the listen backlog is not the thing under test.
    for (let i = 0; i < runs; i += 100) {
      const wave = await Promise.allSettled(Array.from({ length: Math.min(100, runs - i) }, () => WsPeer.connect(target.url, 'long-lived', ctx.opts.hangMs)));
      for (const w of wave) {
        if (w.status === 'fulfilled') peers.push(w.value);
        else tally.fail('malformed', `connection ${peers.length}`, `could not connect: ${(w.reason as Error).message}`);
      }
    }
    target.lastInput = `while ${runs} runs are in flight`;
    const health = setInterval(() => void target.checkAlive(tally, target.lastInput, { livenessOnly: true }), 1_000);
    const t0 = performance.now();
    try {
      await Promise.all(peers.map((p, i) => agent(p, i, calls, STEP_BOUND_MS, tally)));
    } finally {
      clearInterval(health);
    }
    tally.notes.push(`${peers.length} runs × ${calls} calls in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await Promise.all(peers.map((p) => p.close()));
    await target.checkAlive(tally, `after ${runs} concurrent runs`, { livenessOnly: true });
    const ids = peers.flatMap((p) => p.streams.map((s) => s.id).filter((x): x is string => x !== null));
    await checkRecords(target.url, ids, tally, ctx.opts.settleMs);
    await checkQuiescent(target.url, tally, ctx.opts.settleMs);
  });
  return [tally];
}

async function agent(peer: WsPeer, i: number, calls: number, boundMs: number, tally: Tally): Promise<void> {
  const input = `long-lived run ${i}: ${calls} sequential exec_command calls`;
  tally.inputs++;
  peer.send(shellCreate(calls));
  for (;;) {
    const ok = await peer.until(() => peer.current !== null && (peer.current.terminal !== null || peer.current.paused), boundMs);
    if (!ok) {
      tally.fail('hang', input, peer.closeInfo ? `closed ${peer.closeInfo.code}` : `no next pause or end within ${boundMs} ms (${peer.streams[0]?.calls.length ?? 0} calls done)`);
      return;
    }
    const cur = peer.current!;
    if (cur.terminal) break;
    const pending = cur.pendingCalls;
    cur.paused = false;
    peer.send(outputs(pending));
  }
  const s = peer.current!;
  const problems = s.close();
  if (problems.length) tally.fail('sequence', input, problems.slice(0, 3).join('; '));
  if (s.terminal === 'response.completed') tally.responses++;
  else tally.fail('malformed', input, `ended ${s.terminal} (${JSON.stringify(s.finalResponse?.['error'] ?? s.finalResponse?.['incomplete_details'] ?? null)})`);
  if (s.calls.length !== calls) tally.fail('malformed', input, `${s.calls.length} function calls, expected ${calls}`);
  for (const p of peer.problems.splice(0)) tally.fail('malformed', input, p);
}
