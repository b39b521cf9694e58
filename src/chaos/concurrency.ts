/**
 * Many concurrent runs of every design that pauses (one row each), each a
 * real agent loop: the model calls `exec_command` K times one after another,
 * the client answers each pause (`response.append` on a WebSocket, `POST
 * /v1/responses/{id}/append` over HTTP), the run completes. 1,000 × 10 in the
 * long form, 100 × 5 in the quick one. Every run must complete with a
 * gapless stream and K function calls, and be billed exactly once; the server
 * must stay responsive throughout.
 */
import { readFileSync } from 'node:fs';
import { Tally } from './oracle.js';
import { asPost, outputs, shellCreate } from './bodies.js';
import { openRun, send } from './http-peer.js';
import { checkQuiescent, checkRecords } from './settle.js';
import type { ScenarioContext } from './suite.js';
import { WsPeer } from './ws-peer.js';
import { designsFor } from './applies.js';
import { designPath, isSocketDesign, type Protocol, type SocketProtocol } from '../protocol/designs.js';

/** Bound on each step of a run (its next pause or its end) while every run is in flight at once, ms. */
const STEP_BOUND_MS = 60_000;

export async function run(ctx: ScenarioContext): Promise<Tally[]> {
  const rows: Tally[] = [];
  for (const design of designsFor('concurrency')) rows.push(await runDesign(ctx, design));
  return rows;
}

async function runDesign(ctx: ScenarioContext, design: Protocol): Promise<Tally> {
  const runs = ctx.opts.quick ? 100 : 1_000;
  const calls = ctx.opts.quick ? 5 : 10;
  const tally = new Tally('concurrency', `${design} ${runs}×${calls}`);
  // One connection per run, plus the harness's probes (and, over HTTP, the appends): past the default cap (1,024) the
  // server would refuse some with 503. Over HTTP every run is open at once, past the default of 512 live runs (429).
  // And over HTTP every append is a connection of its own, the runs' paused together: 1,000 at once, past Node's default
  // accept queue (511), and the kernel dropped the handshakes past it (the client retries after 1 s, 3 s, 7 s): 240-440
  // runs had an append (or their create) unanswered within --hang-ms. The listen backlog is not the thing under test (the WebSocket clients
  // connect in waves of 100 for the same reason); the kernel caps it at net.core.somaxconn.
  const connections = 2 * runs + 500;
  const args = ['--max-connections', String(connections), '--max-live-http-runs', String(runs), '--listen-backlog', String(connections)];
  const somaxconn = kernelSomaxconn();
  if (somaxconn !== null && somaxconn < runs) tally.notes.push(`net.core.somaxconn is ${somaxconn}: the kernel caps the listen backlog below the ${runs} connections a round of appends opens at once`);
  await ctx.withServer(tally, { args }, async (target) => {
    target.lastInput = `while ${runs} ${design} runs are in flight`;
    const health = setInterval(() => void target.checkAlive(tally, target.lastInput, { livenessOnly: true }), 1_000);
    const t0 = performance.now();
    let ids: string[];
    try {
      ids = isSocketDesign(design) ? await socketRuns(target.url, design, runs, calls, ctx.opts.hangMs, tally) : await httpRuns(target.url, design, runs, calls, ctx.opts.hangMs, tally);
    } finally {
      clearInterval(health);
    }
    tally.notes.push(`${ids.length} runs × ${calls} calls in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await target.checkAlive(tally, `after ${runs} concurrent ${design} runs`, { livenessOnly: true });
    await checkRecords(target.url, ids, tally, ctx.opts.settleMs);
    await checkQuiescent(target.url, tally, ctx.opts.settleMs);
  });
  return tally;
}

/** `runs` WebSocket agents at once, one connection each; the ids of the responses they saw. */
async function socketRuns(url: string, design: SocketProtocol, runs: number, calls: number, hangMs: number, tally: Tally): Promise<string[]> {
  const peers: WsPeer[] = [];
  // Open in waves so the listen backlog is not the thing under test.
  for (let i = 0; i < runs; i += 100) {
    const wave = await Promise.allSettled(Array.from({ length: Math.min(100, runs - i) }, () => WsPeer.connect(url, design, hangMs)));
    for (const w of wave) {
      if (w.status === 'fulfilled') peers.push(w.value);
      else tally.fail('malformed', `connection ${peers.length}`, `could not connect: ${(w.reason as Error).message}`);
    }
  }
  await Promise.all(peers.map((p, i) => socketAgent(p, design, i, calls, STEP_BOUND_MS, tally)));
  await Promise.all(peers.map((p) => p.close()));
  return peers.flatMap((p) => p.streams.map((s) => s.id).filter((x): x is string => x !== null));
}

async function socketAgent(peer: WsPeer, design: Protocol, i: number, calls: number, boundMs: number, tally: Tally): Promise<void> {
  const input = `${design} run ${i}: ${calls} sequential exec_command calls`;
  tally.input(design);
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
  judge(s.close(), s.terminal, s.finalResponse, s.calls.length, calls, input, tally);
  for (const p of peer.problems.splice(0)) tally.fail('malformed', input, p);
}

/** `runs` HTTP agents at once, each its run's SSE stream and an append per pause; the ids of the runs they opened. */
async function httpRuns(url: string, design: Protocol, runs: number, calls: number, hangMs: number, tally: Tally): Promise<string[]> {
  const ids: string[] = [];
  await Promise.all(Array.from({ length: runs }, (_, i) => httpAgent(url, design, i, calls, hangMs, STEP_BOUND_MS, tally).then((id) => id && ids.push(id))));
  return ids;
}

async function httpAgent(url: string, design: Protocol, i: number, calls: number, hangMs: number, boundMs: number, tally: Tally): Promise<string | null> {
  const input = `${design} run ${i}: ${calls} sequential exec_command calls`;
  const headers = { 'Content-Type': 'application/json' };
  tally.input(design);
  const opened = await openRun(url, { method: 'POST', path: designPath(design), headers, body: Buffer.from(asPost(shellCreate(calls, { stream: true }))), label: input }, hangMs);
  if (opened.kind !== 'stream') {
    tally.fail(opened.kind === 'hang' ? 'hang' : 'malformed', input, `no stream opened (${opened.kind === 'answer' ? `HTTP ${opened.status} ${opened.body.toString('utf8').slice(0, 200)}` : opened.kind})`);
    return null;
  }
  const live = opened.stream;
  const s = live.sse.stream;
  try {
    for (;;) {
      const ok = await live.until(() => s.terminal !== null || s.paused, boundMs);
      if (!ok) {
        tally.fail('hang', input, live.broken ?? (live.over ? 'the stream ended without a terminal event' : `no next pause or end within ${boundMs} ms (${s.calls.length} calls done)`));
        return s.id;
      }
      if (s.terminal) break;
      const pending = s.pendingCalls;
      s.paused = false;
      const body = JSON.stringify({ input: outputs(pending)['input'] });
      const answer = await send(url, { method: 'POST', path: `/v1/responses/${encodeURIComponent(s.id ?? '')}/append`, headers, body: Buffer.from(body), label: 'append' }, hangMs);
      if (answer.kind !== 'answer' || answer.status !== 202) {
        tally.fail(answer.kind === 'hang' ? 'hang' : 'malformed', input, `the append was answered ${answer.kind === 'answer' ? `HTTP ${answer.status} ${answer.body.toString('utf8').slice(0, 200)}` : answer.kind}`);
        return s.id;
      }
    }
    if (!(await live.until(() => live.over, boundMs))) tally.fail('hang', input, `the stream did not end within ${boundMs} ms of its terminal event`);
    judge([...live.sse.end().problems, ...s.close()], s.terminal, s.finalResponse, s.calls.length, calls, input, tally);
    return s.id;
  } finally {
    live.req.destroy();
  }
}

/** The kernel's cap on a listen backlog (Linux), or null where it cannot be read. */
function kernelSomaxconn(): number | null {
  try {
    return Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
  } catch {
    return null;
  }
}

function judge(problems: string[], terminal: string | null, final: Record<string, unknown> | null, made: number, calls: number, input: string, tally: Tally): void {
  if (problems.length) tally.fail('sequence', input, problems.slice(0, 3).join('; '));
  if (terminal === 'response.completed') tally.responses++;
  else tally.fail('malformed', input, `ended ${terminal} (${JSON.stringify(final?.['error'] ?? final?.['incomplete_details'] ?? null)})`);
  if (made !== calls) tally.fail('malformed', input, `${made} function calls, expected ${calls}`);
}
