/**
 * A disconnect in every protocol state, on a paced model so runs are really
 * in flight: planning (close right after the create), streaming (after the
 * first delta), paused (long-lived, at `response.done`), mid-append (send the
 * outputs and close at once), queued (a second create behind the first).
 * Half the closes are clean close frames, half TCP resets. Over HTTP: an SSE
 * stream aborted mid-stream, a JSON request abandoned, an upload cut short;
 * and the long-lived Response over HTTP, its stream cut while it streams,
 * while it is paused, and right after an append was posted (mid-append).
 *
 * Each run the client saw must end (cancelled or incomplete, billed once),
 * and after all of them nothing is left in progress and the server answers.
 */
import { connect } from 'node:net';
import { request } from 'node:http';
import { Tally } from './oracle.js';
import { asPost, outputs, shellCreate, textCreate } from './bodies.js';
import { checkQuiescent, checkRecords, type Target } from './settle.js';
import type { ScenarioContext } from './suite.js';
import { WsPeer, type WsProtocol } from './ws-peer.js';
import { openRun, send } from './http-peer.js';

const PACED = { paced: true, args: ['--tokens-per-second', '200', '--ttft-ms', '20'] };

type State = 'planning' | 'streaming' | 'paused' | 'mid-append' | 'queued';
const STATES: Record<WsProtocol, State[]> = {
  'long-lived': ['planning', 'streaming', 'paused', 'mid-append', 'queued'],
  ws: ['planning', 'streaming', 'queued'],
};

export async function run(ctx: ScenarioContext): Promise<Tally[]> {
  const reps = ctx.opts.quick ? 2 : 20;
  const rows: Tally[] = [];
  for (const protocol of ['long-lived', 'ws'] as const) {
    const tally = new Tally('disconnect', protocol);
    rows.push(tally);
    await ctx.withServer(tally, PACED, async (target) => {
      const ids: string[] = [];
      for (const state of STATES[protocol]) {
        for (let r = 0; r < reps; r++) {
          const input = `${protocol} disconnect while ${state} (${r % 2 ? 'TCP reset' : 'close frame'}) #${r}`;
          tally.inputs++;
          const seen = await disconnectIn(target, protocol, state, r % 2 === 1, ctx.opts.hangMs);
          if (seen.error) tally.fail('hang', input, seen.error);
          ids.push(...seen.ids);
          tally.closes++;
        }
        await target.checkAlive(tally, `${protocol} after the '${state}' disconnects`);
      }
      const statuses = await checkRecords(target.url, ids, tally, ctx.opts.settleMs);
      tally.responses = statuses.size;
      tally.notes.push(`run statuses after disconnect: ${summarise(statuses)}`);
      await checkQuiescent(target.url, tally, ctx.opts.settleMs);
    });
  }
  const http = new Tally('disconnect', 'http');
  rows.push(http);
  await ctx.withServer(http, PACED, async (target) => {
    const ids: string[] = [];
    for (let r = 0; r < reps; r++) {
      for (const kind of ['sse mid-stream', 'json before the answer', 'upload cut short'] as const) {
        http.inputs++;
        http.closes++;
        const seen = await httpDisconnect(target.url, kind, ctx.opts.hangMs);
        if (seen.error) http.fail('hang', `http ${kind} #${r}`, seen.error);
        if (seen.id) ids.push(seen.id);
      }
      await target.checkAlive(http, `http disconnects round ${r}`);
    }
    const statuses = await checkRecords(target.url, ids, http, ctx.opts.settleMs);
    http.responses = statuses.size;
    http.notes.push(`run statuses after disconnect: ${summarise(statuses)}`);
    await checkQuiescent(target.url, http, ctx.opts.settleMs);
  });
  const llHttp = new Tally('disconnect', 'long-lived-http');
  rows.push(llHttp);
  await ctx.withServer(llHttp, PACED, async (target) => {
    const ids: string[] = [];
    for (const state of ['streaming', 'paused', 'mid-append'] as const) {
      for (let r = 0; r < reps; r++) {
        llHttp.inputs++;
        llHttp.closes++;
        const seen = await longLivedHttpDisconnect(target.url, state, ctx.opts.hangMs);
        if (seen.error) llHttp.fail('hang', `long-lived-http disconnect while ${state} #${r}`, seen.error);
        if (seen.id) ids.push(seen.id);
      }
      await target.checkAlive(llHttp, `long-lived-http after the '${state}' disconnects`);
    }
    const statuses = await checkRecords(target.url, ids, llHttp, ctx.opts.settleMs);
    llHttp.responses = statuses.size;
    llHttp.notes.push(`run statuses after disconnect: ${summarise(statuses)}`);
    await checkQuiescent(target.url, llHttp, ctx.opts.settleMs);
  });
  return rows;
}

/** A long-lived run over HTTP whose client closes its stream while it streams, while it is paused, or right after posting an append. */
async function longLivedHttpDisconnect(url: string, state: 'streaming' | 'paused' | 'mid-append', hangMs: number): Promise<{ id?: string; error?: string }> {
  const create = state === 'streaming' ? textCreate({ stream: true }) : shellCreate(3, { stream: true });
  const input = { method: 'POST', path: '/v1/responses?protocol=long-lived', headers: { 'Content-Type': 'application/json' }, body: Buffer.from(asPost(create)), label: state };
  const opened = await openRun(url, input, hangMs);
  if (opened.kind !== 'stream') return { error: `no stream opened (${opened.kind === 'answer' ? `HTTP ${opened.status}` : opened.kind})` };
  const live = opened.stream;
  const s = live.sse.stream;
  const ready = state === 'streaming' ? () => (s.counts.get('response.output_text.delta') ?? 0) > 0 : () => s.paused;
  if (!(await live.until(() => ready() || s.terminal !== null, hangMs)) || s.terminal) {
    live.req.destroy();
    return { ...(s.id && { id: s.id }), error: `the run ${s.terminal ? `ended (${s.terminal})` : 'did not reach the state'} before the client could disconnect while ${state}` };
  }
  if (state === 'mid-append') {
    // Posted, and the stream closed before its answer comes: the outputs may or may not be applied; the run must end either way.
    const append = send(url, { method: 'POST', path: `/v1/responses/${s.id}/append`, headers: { 'Content-Type': 'application/json' }, body: Buffer.from(JSON.stringify({ input: (outputs(s.pendingCalls)['input'] as unknown[]) ?? [] })), label: 'append' }, hangMs);
    live.req.destroy();
    const answer = await append;
    if (answer.kind === 'answer' && answer.status >= 500) return { id: s.id!, error: `the append was answered HTTP ${answer.status}` };
    return { id: s.id! };
  }
  live.req.destroy();
  return { id: s.id! };
}

function summarise(statuses: Map<string, string>): string {
  const n = new Map<string, number>();
  for (const s of statuses.values()) n.set(s, (n.get(s) ?? 0) + 1);
  return [...n].map(([s, k]) => `${s}×${k}`).join(', ') || 'none seen';
}

async function disconnectIn(target: Target, protocol: WsProtocol, state: State, reset: boolean, hangMs: number): Promise<{ ids: string[]; error?: string }> {
  const peer = await WsPeer.connect(target.url, protocol);
  const ids = () => peer.streams.map((s) => s.id).filter((x): x is string => x !== null);
  const hang = async (what: string) => {
    peer.terminate();
    return { ids: ids(), error: `${what} did not arrive within ${hangMs} ms` };
  };
  const leave = async () => {
    if (reset) peer.terminate();
    else await peer.close();
    return { ids: ids() };
  };
  switch (state) {
    case 'planning':
      peer.send(shellCreate(3));
      return leave();
    case 'streaming':
      peer.send(textCreate());
      if (!(await peer.until(() => peer.count('response.output_text.delta') > 0, hangMs))) return hang('a text delta');
      return leave();
    case 'paused':
      peer.send(shellCreate(3));
      if (!(await peer.until(() => peer.count('response.done') > 0, hangMs))) return hang('response.done');
      return leave();
    case 'mid-append': {
      peer.send(shellCreate(3));
      if (!(await peer.until(() => peer.count('response.done') > 0, hangMs))) return hang('response.done');
      peer.send(outputs(peer.current!.pendingCalls));
      return leave();
    }
    case 'queued':
      peer.send(textCreate());
      peer.send(shellCreate(2));
      if (!(await peer.until(() => peer.count('response.created') > 0, hangMs))) return hang('response.created');
      return leave();
  }
}

function httpDisconnect(url: string, kind: 'sse mid-stream' | 'json before the answer' | 'upload cut short', hangMs: number): Promise<{ id?: string; error?: string }> {
  const { hostname, port } = new URL(url);
  if (kind === 'upload cut short') {
    return new Promise((resolve) => {
      const sock = connect(Number(port), hostname, () => {
        sock.write(`POST /v1/responses HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"model":"sim-model","input":"`);
        sock.destroy();
        resolve({});
      });
      sock.on('error', () => resolve({}));
    });
  }
  const stream = kind === 'sse mid-stream';
  return new Promise((resolve) => {
    const body = asPost(textCreate({ stream, store: true }));
    const req = request(`${url}/v1/responses`, { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        if (text.includes('response.output_text.delta')) {
          clearTimeout(timer);
          const id = /"response":\{"id":"([^"]+)"/.exec(text)?.[1];
          req.destroy();
          resolve(id ? { id } : {});
        }
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ error: 'the stream ended before the client could disconnect mid-stream' });
      });
      res.on('error', () => {});
    });
    req.on('error', () => {});
    const timer = setTimeout(() => {
      req.destroy();
      resolve({ error: 'no delta' });
    }, hangMs);
    if (!stream) {
      // Abandon it before the (paced) answer: the server must cancel the run, not leak it.
      req.end(body, () => setImmediate(() => {
        clearTimeout(timer);
        req.destroy();
        resolve({});
      }));
    } else req.end(body);
  });
}
