/**
 * Signals with a SQLite store file, on every design of the designs table (by
 * its shape; one row per signal).
 *
 * SIGTERM with clients in every state: on a WebSocket, two runs paused (a
 * design that pauses) or streaming (one that does not), and a run streaming
 * with creates queued behind it; over HTTP, two SSE streams paused or
 * streaming likewise. Each run in flight must get its terminal event, each
 * queued create an answer (an error such as `server_shutting_down`), each
 * socket a documented close, and the process must exit 0 in time.
 *
 * SIGKILL for durability: clients of every design loop `store:true`
 * requests; the server is killed the instant a client sees the n-th
 * `response.completed`, restarted on the same file, and every response a
 * client saw completed must be retrievable (`GET /v1/responses/{id}`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DOCUMENTED_CLOSE, Tally } from './oracle.js';
import { asPost, shellCreate, textCreate } from './bodies.js';
import { Rng } from './mutate.js';
import { checkSse } from './http-peer.js';
import { ServerProc } from './proc.js';
import { httpJson, type Target } from './settle.js';
import type { ScenarioContext } from './suite.js';
import { WsPeer } from './ws-peer.js';
import { designsFor } from './applies.js';
import { DESIGNS, designPath, isSocketDesign, type Protocol, type SocketProtocol } from '../protocol/designs.js';

export async function run(ctx: ScenarioContext): Promise<Tally[]> {
  const dir = mkdtempSync(join(tmpdir(), 'llr-chaos-'));
  try {
    return [await sigterm(ctx, join(dir, 'term.sqlite')), await sigkill(ctx, join(dir, 'kill.sqlite'))];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function sigterm(ctx: ScenarioContext, file: string): Promise<Tally> {
  const tally = new Tally('signals', 'SIGTERM');
  const rounds = ctx.opts.quick ? 1 : 3;
  for (let round = 0; round < rounds; round++) {
    await ctx.withServer(tally, { store: file, paced: true, args: ['--tokens-per-second', '40', '--ttft-ms', '20'] }, async (target) => {
      const hang = ctx.opts.hangMs;
      const designs = designsFor('signals');
      // Per WebSocket design: two runs paused (a design that pauses) or streaming, and one streaming with two creates
      // queued behind it. Per HTTP design: two SSE streams, paused or streaming likewise.
      const inFlight: Array<{ p: WsPeer; input: string }> = [];
      const queued: Array<{ p: WsPeer; design: SocketProtocol }> = [];
      const sse: Array<{ design: Protocol; client: ReturnType<typeof sseClient> }> = [];
      const ready: Array<Promise<boolean>> = [];
      for (const design of designs) {
        const pauses = DESIGNS[design].pauses;
        if (isSocketDesign(design)) {
          for (const p of await Promise.all([0, 1].map(() => WsPeer.connect(target.url, design)))) {
            p.send(pauses ? shellCreate(3) : textCreate());
            ready.push(pauses ? p.until(() => p.count('response.done') > 0, hang) : p.until(() => p.count('response.output_text.delta') > 0, hang));
            inFlight.push({ p, input: `SIGTERM with a ${design} run ${pauses ? 'paused' : 'streaming'}` });
          }
          const q = await WsPeer.connect(target.url, design);
          for (let i = 0; i < 3; i++) q.send(textCreate());
          ready.push(q.until(() => q.count('response.output_text.delta') > 0, hang));
          queued.push({ p: q, design });
          tally.input(design);
          tally.input(design);
          tally.inputs += 3;
          tally.exercise(design, 3);
        } else {
          for (let i = 0; i < 2; i++) {
            const body = asPost(pauses ? shellCreate(3, { stream: true, store: true }) : textCreate({ stream: true, store: true }));
            const client = sseClient(target.url, hang, designPath(design), body, pauses ? 'event: response.done' : 'response.output_text.delta');
            sse.push({ design, client });
            ready.push(client.ready);
            tally.input(design);
          }
        }
      }
      const ok = await Promise.all(ready);
      if (ok.some((r) => !r)) tally.fail('hang', `SIGTERM round ${round}: setting up clients`, 'a client never reached its state');
      target.server.signal('SIGTERM');
      const exitTimer = setTimeout(() => target.server.proc.kill('SIGKILL'), hang);
      for (const { p, input } of inFlight) {
        await Promise.race([p.closed, new Promise((r) => setTimeout(r, hang))]);
        const s = p.streams[0];
        if (s?.terminal) tally.responses++;
        else tally.fail('sequence', input, `no terminal event for the run in flight (close ${p.closeInfo?.code ?? 'none'})`);
        for (const q of s?.close() ?? []) if (q !== 'no terminal event') tally.fail('sequence', input, q);
        judgeClose(p, tally, input);
      }
      for (const { p, design } of queued) {
        const input = `SIGTERM with one ${design} run streaming and two creates queued behind it`;
        await Promise.race([p.closed, new Promise((r) => setTimeout(r, hang))]);
        const answered = p.streams.filter((s) => s.terminal).length + p.connErrors.size;
        tally.responses += p.streams.filter((s) => s.terminal).length;
        if (answered < 3) tally.fail('hang', input, `${3 - answered} of 3 creates got no answer (no terminal event, no server_shutting_down error) before close ${p.closeInfo?.code ?? 'none'}`);
        judgeClose(p, tally, input);
      }
      for (const p of [...inFlight.map((x) => x.p), ...queued.map((x) => x.p)]) for (const q of p.problems.splice(0)) tally.fail('malformed', 'SIGTERM with clients in every state', q);
      for (const { design, client } of sse) {
        const r = await client.result;
        const problems = r.error ? [r.error] : [...r.problems];
        if (problems.length) tally.fail('sequence', `SIGTERM with a ${design} SSE stream in flight`, problems.slice(0, 3).join('; '));
        else tally.responses++;
      }
      const exit = await target.server.exited;
      clearTimeout(exitTimer);
      if (exit.code !== 0) tally.fail(exit.signal === 'SIGKILL' ? 'hang' : 'crash', 'SIGTERM with clients in every state', `exit code ${exit.code} signal ${exit.signal}${exit.signal === 'SIGKILL' ? ` (did not exit within ${hang} ms)` : ''}: ${target.server.stderr.slice(-400)}`);
    });
  }
  return tally;
}

function judgeClose(p: WsPeer, tally: Tally, input: string): void {
  if (!p.closeInfo) return tally.fail('hang', input, 'the socket was never closed');
  tally.closeCode(p.closeInfo.code);
  if (DOCUMENTED_CLOSE.has(p.closeInfo.code)) tally.closes++;
  else tally.fail('close', input, `closed with ${p.closeInfo.code} instead of a documented code`);
}

/** An SSE client of the design at `path` that reads the whole stream; `ready` once the stream holds `mark` (text flowing, a pause). */
function sseClient(url: string, boundMs: number, path: string, body: string, mark: string) {
  let onDelta: (ok: boolean) => void = () => {};
  const ready = new Promise<boolean>((r) => (onDelta = r));
  const result = new Promise<{ problems: string[]; error?: string }>((resolve) => {
    const timer = setTimeout(() => {
      req.destroy();
      onDelta(false);
      resolve({ problems: [], error: `the SSE stream did not end within ${boundMs} ms` });
    }, boundMs * 2);
    const req = request(`${url}${path}`, { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        if (text.includes(mark)) onDelta(true);
      });
      res.on('end', () => {
        clearTimeout(timer);
        const sse = checkSse(text);
        resolve({ problems: [...sse.problems, ...sse.stream.close()] });
      });
      res.on('error', () => {});
      res.on('aborted', () => {
        clearTimeout(timer);
        resolve({ problems: [], error: 'the server cut the SSE stream without a terminal event' });
      });
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      onDelta(false);
      resolve({ problems: [], error: `request failed: ${err.message}` });
    });
    req.end(body);
  });
  return { ready, result };
}

async function sigkill(ctx: ScenarioContext, file: string): Promise<Tally> {
  const tally = new Tally('signals', 'SIGKILL durability');
  const rounds = ctx.opts.quick ? 1 : 10;
  const rng = new Rng(ctx.opts.seed ^ 0x5151);
  const seen: Array<{ id: string; design: string }> = [];
  for (let round = 0; round < rounds; round++) {
    const killAfter = rng.int(3, 25);
    await ctx.withServer(tally, { store: file }, async (target) => {
      let completed = 0;
      let killed = false;
      const sawCompleted = (id: string, design: string) => {
        if (killed) return;
        seen.push({ id, design });
        if (++completed >= killAfter) {
          killed = true;
          target.server.signal('SIGKILL');
        }
      };
      const sent = (design: Protocol) => tally.exercise(design);
      await Promise.all(designsFor('signals').map((d) => (isSocketDesign(d) ? wsLoop(target, d, sawCompleted, sent, () => killed) : httpLoop(target.url, d, sawCompleted, sent, () => killed))));
      await target.server.exited;
    });
    tally.inputs += killAfter;
  }
  // The last restart on the same file: every response a client saw completed must be there.
  const server = await ServerProc.start({ cli: ctx.opts.cli, store: file });
  try {
    const lost = new Map<string, number>();
    for (const { id, design } of seen) {
      const r = await httpJson(server.url, `/v1/responses/${encodeURIComponent(id)}`);
      if (r.status === 200 && r.json?.['status'] === 'completed') tally.responses++;
      else {
        lost.set(design, (lost.get(design) ?? 0) + 1);
        tally.fail('lost', `${design} response ${id}, store:true, client saw response.completed, then SIGKILL`, `GET after restart: HTTP ${r.status} ${String(r.json?.['status'] ?? (r.json?.['error'] as { code?: string } | undefined)?.code ?? '')}`);
      }
    }
    const byDesign = new Map<string, number>();
    for (const s of seen) byDesign.set(s.design, (byDesign.get(s.design) ?? 0) + 1);
    tally.notes.push(`${rounds} kills; completed-then-lost per design: ${[...byDesign].map(([d, n]) => `${d} ${lost.get(d) ?? 0}/${n}`).join(', ')}`);
  } finally {
    await server.stop();
  }
  return tally;
}

async function wsLoop(target: Target, protocol: SocketProtocol, saw: (id: string, design: string) => void, sent: (design: Protocol) => void, killed: () => boolean): Promise<void> {
  let peer: WsPeer;
  try {
    peer = await WsPeer.connect(target.url, protocol);
  } catch {
    return;
  }
  peer.onEvent = (e) => {
    const r = e['response'] as { id?: string } | undefined;
    if (e['type'] === 'response.completed' && r?.id) saw(r.id, protocol);
  };
  while (!killed() && peer.open) {
    const before = peer.count('response.completed') + peer.count('response.failed');
    peer.send(textCreate({ store: true }));
    sent(protocol);
    await peer.until(() => peer.count('response.completed') + peer.count('response.failed') > before, 10_000);
  }
  peer.terminate();
}

async function httpLoop(url: string, design: Protocol, saw: (id: string, design: string) => void, sent: (design: Protocol) => void, killed: () => boolean): Promise<void> {
  const body = asPost(textCreate({ stream: true, store: true }));
  while (!killed()) {
    sent(design);
    await new Promise<void>((resolve) => {
      const req = request(`${url}${designPath(design)}`, { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
          const m = /event: response\.completed\ndata: \{"type":"response\.completed","response":\{"id":"([^"]+)"/.exec(text);
          if (m) {
            text = '';
            saw(m[1]!, design);
          }
        });
        res.on('end', () => resolve());
        res.on('error', () => resolve());
        res.on('aborted', () => resolve());
      });
      req.on('error', () => resolve());
      req.end(body);
    });
  }
}
