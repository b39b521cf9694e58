/**
 * A disconnect in every protocol state, on a paced model so runs are really
 * in flight, for every design of the designs table (one row each), by its
 * shape: on a WebSocket, planning (close right after the create), streaming
 * (after the first delta), paused (a design that pauses, at `response.done`),
 * mid-append (send the outputs and close at once), queued (a second create
 * behind the first); half the closes are clean close frames, half TCP
 * resets. Over HTTP, a design that pauses (the long-lived Response over
 * HTTP) has its stream cut while it streams, while it is paused, and right
 * after an append was posted (mid-append); one that does not has an SSE
 * stream aborted mid-stream, a JSON request abandoned, an upload cut short.
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
import { WsPeer } from './ws-peer.js';
import { designsFor } from './applies.js';
import { DESIGNS, designPath, isSocketDesign, type DesignTraits, type Protocol, type SocketProtocol } from '../protocol/designs.js';
import { openRun, send } from './http-peer.js';

const PACED = { paced: true, args: ['--tokens-per-second', '200', '--ttft-ms', '20'] };

type State = 'planning' | 'streaming' | 'paused' | 'mid-append' | 'queued';
type HttpKind = 'sse mid-stream' | 'json before the answer' | 'upload cut short';

/** The states a design's runs can be left in, by its shape: the queue is a WebSocket's; pausing, a design's that pauses. */
function statesOf(d: DesignTraits): readonly State[] {
  const paused: State[] = d.pauses ? ['paused', 'mid-append'] : [];
  return d.transport === 'websocket' ? ['planning', 'streaming', ...paused, 'queued'] : ['streaming', ...paused];
}

/** One disconnect: the input's name in a failure, and the disconnect itself (the ids of the runs it left, or what went wrong). */
type Disconnect = { label: string; go: () => Promise<{ ids?: string[]; id?: string; error?: string }> };

/**
 * What each round of disconnects is for a design: on a WebSocket, every state of `statesOf`, a close frame and a TCP
 * reset in turn; over HTTP, a design that pauses has its stream cut in each of its states, one that does not has an
 * SSE stream aborted mid-stream, a JSON request abandoned, an upload cut short.
 */
function rounds(design: Protocol, target: Target, reps: number, hangMs: number): Array<{ after: string; inputs: Disconnect[] }> {
  const d = DESIGNS[design];
  const path = designPath(design);
  if (isSocketDesign(design)) {
    return statesOf(d).map((state) => ({
      after: `the '${state}' disconnects`,
      inputs: Array.from({ length: reps }, (_, r) => ({
        label: `${design} disconnect while ${state} (${r % 2 ? 'TCP reset' : 'close frame'}) #${r}`,
        go: () => disconnectIn(target, design, state, r % 2 === 1, hangMs),
      })),
    }));
  }
  if (d.pauses) {
    return statesOf(d).map((state) => ({
      after: `the '${state}' disconnects`,
      inputs: Array.from({ length: reps }, (_, r) => ({
        label: `${design} disconnect while ${state} #${r}`,
        go: () => pausingHttpDisconnect(target.url, path, state as 'streaming' | 'paused' | 'mid-append', hangMs),
      })),
    }));
  }
  const kinds: HttpKind[] = ['sse mid-stream', 'json before the answer', 'upload cut short'];
  return Array.from({ length: reps }, (_, r) => ({
    after: `disconnects round ${r}`,
    inputs: kinds.map((kind) => ({ label: `${design} ${kind} #${r}`, go: () => httpDisconnect(target.url, path, kind, hangMs) })),
  }));
}

export async function run(ctx: ScenarioContext): Promise<Tally[]> {
  const reps = ctx.opts.quick ? 2 : 20;
  const rows: Tally[] = [];
  for (const design of designsFor('disconnect')) {
    const tally = new Tally('disconnect', design);
    rows.push(tally);
    await ctx.withServer(tally, PACED, async (target) => {
      const ids: string[] = [];
      for (const round of rounds(design, target, reps, ctx.opts.hangMs)) {
        for (const input of round.inputs) {
          tally.input(design);
          const seen = await input.go();
          if (seen.error) tally.fail('hang', input.label, seen.error);
          if (seen.ids) ids.push(...seen.ids);
          if (seen.id) ids.push(seen.id);
          tally.closes++;
        }
        await target.checkAlive(tally, `${design} after ${round.after}`);
      }
      const statuses = await checkRecords(target.url, ids, tally, ctx.opts.settleMs);
      tally.responses = statuses.size;
      tally.notes.push(`run statuses after disconnect: ${summarise(statuses)}`);
      await checkQuiescent(target.url, tally, ctx.opts.settleMs);
    });
  }
  return rows;
}

/** A run over HTTP of a design that pauses, whose client closes its stream while it streams, while it is paused, or right after posting an append. */
async function pausingHttpDisconnect(url: string, path: string, state: 'streaming' | 'paused' | 'mid-append', hangMs: number): Promise<{ id?: string; error?: string }> {
  const create = state === 'streaming' ? textCreate({ stream: true }) : shellCreate(3, { stream: true });
  const input = { method: 'POST', path, headers: { 'Content-Type': 'application/json' }, body: Buffer.from(asPost(create)), label: state };
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

async function disconnectIn(target: Target, protocol: SocketProtocol, state: State, reset: boolean, hangMs: number): Promise<{ ids: string[]; error?: string }> {
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

function httpDisconnect(url: string, path: string, kind: HttpKind, hangMs: number): Promise<{ id?: string; error?: string }> {
  const { hostname, port } = new URL(url);
  if (kind === 'upload cut short') {
    return new Promise((resolve) => {
      const sock = connect(Number(port), hostname, () => {
        sock.write(`POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"model":"sim-model","input":"`);
        sock.destroy();
        resolve({});
      });
      sock.on('error', () => resolve({}));
    });
  }
  const stream = kind === 'sse mid-stream';
  return new Promise((resolve) => {
    const body = asPost(textCreate({ stream, store: true }));
    const req = request(`${url}${path}`, { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
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
