/**
 * Clients that stop reading, on every design of the designs table (one row,
 * its designs joined by `+`). Over a WebSocket design: a raw TCP client does
 * the upgrade, queues fat creates (every lifecycle event carries megabytes)
 * and never reads again. Over an HTTP design: raw TCP clients POST fat
 * streamed requests and never read. The server must keep its memory bounded (RSS growth under
 * `SLOW_READER_RSS_BUDGET_MB` above a control: the same requests from
 * clients that read, sent first on the same server), drop a WebSocket reader
 * that does not read (at the send limit within a response, or by the
 * heartbeat while its next queued response waits for it), and end every run.
 *
 * Raw sockets because a real client library reads as fast as it can; the
 * point is a peer whose receive window closes.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { Tally } from './oracle.js';
import { asPost, fatCreate } from './bodies.js';
import { checkQuiescent, listRuns } from './settle.js';
import { RssSampler } from './proc.js';
import { WsPeer } from './ws-peer.js';
import type { ScenarioContext } from './suite.js';
import { designsFor } from './applies.js';
import { designPath, isSocketDesign, type HttpProtocol, type Protocol, type SocketProtocol } from '../protocol/designs.js';

/**
 * What slow readers may add to the server's peak RSS over the same requests
 * read promptly, MB (the harness's bound, see docs/reliability.md).
 */
export const SLOW_READER_RSS_BUDGET_MB = 150;
/** The documented default send limit (`--send-buffer-bytes`, docs/reliability.md): a reader owed more must be dropped. */
const WS_SEND_BUFFER_DEFAULT = 4 * 1024 * 1024;
/** `--ws-idle-timeout-ms` of this scenario's server: a reader that answers no ping (and takes no bytes) is dropped within one and a half of it. */
const WS_IDLE_MS = 3000;
/**
 * `--send-stall-timeout-ms` of this scenario's server: a run whose reader is behind by half the send limit waits for it
 * to read, and one that reads nothing is dropped once nothing has left for this long (the default 30 s is past the
 * scenario's hang bound: an SSE reader's run stayed `in_progress` for it, an unsettled run).
 */
const SEND_STALL_MS = 2000;
/** Responses a control ws client reads before it closes (its other creates are then dropped, as a slow reader's are). */
const CONTROL_RUNS = 6;

/** A masked client text frame (RFC 6455 §5.2). */
function wsFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const len = payload.length;
  const head = len < 126 ? Buffer.from([0x81, 0x80 | len]) : len < 65536 ? Buffer.from([0x81, 0x80 | 126, len >> 8, len & 255]) : Buffer.concat([Buffer.from([0x81, 0x80 | 127]), u64(len)]);
  const mask = randomBytes(4);
  for (let i = 0; i < len; i++) payload[i] = payload[i]! ^ mask[i & 3]!;
  return Buffer.concat([head, mask, payload]);
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => resolve(s));
    // Keep a listener for the socket's whole life: a reset while our writes are pending must not crash the harness.
    s.on('error', reject);
  });
}

/** Upgrade a raw socket to a WebSocket design; resolves once the 101 is read. */
async function rawUpgrade(url: string, design: SocketProtocol): Promise<Socket> {
  const s = await open(url);
  const { host } = new URL(url);
  s.write(`GET ${designPath(design)} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  await new Promise<void>((resolve, reject) => {
    let head = '';
    const onData = (c: Buffer) => {
      head += c.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        s.off('data', onData);
        s.pause();
        if (head.startsWith('HTTP/1.1 101')) resolve();
        else reject(new Error(`upgrade refused: ${head.slice(0, 60)}`));
      }
    };
    s.on('data', onData);
  });
  return s;
}

/** After the scenario: does the server close this socket? Reads (and discards) what is buffered until it ends or `ms` pass. */
function closedByServer(s: Socket, ms: number): Promise<{ closed: boolean; bytes: number; sawDone: boolean }> {
  return new Promise((resolve) => {
    let bytes = 0;
    let tail = '';
    let timer: NodeJS.Timeout | undefined;
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      s.destroy();
      resolve({ closed, bytes, sawDone: tail.includes('data: [DONE]') });
    };
    // Already gone (a reset seen while our writes were pending): closed by the server.
    if (s.destroyed || s.closed) return finish(true);
    timer = setTimeout(() => finish(false), ms);
    s.on('data', (c: Buffer) => {
      bytes += c.length;
      tail = (tail + c.toString('latin1')).slice(-64);
      // A complete SSE stream: the server delivered everything; nothing more to learn by waiting.
      if (tail.includes('data: [DONE]')) finish(false);
    });
    s.on('end', () => finish(true));
    s.on('close', () => finish(true));
    s.on('error', () => finish(true));
    s.resume();
  });
}

export async function run(ctx: ScenarioContext): Promise<Tally[]> {
  const quick = ctx.opts.quick;
  const designs = designsFor('slow-reader');
  const sockets = designs.filter(isSocketDesign);
  const posts = designs.filter((d): d is HttpProtocol => !isSocketDesign(d));
  const tally = new Tally('slow-reader', designs.join('+'));
  const wsReaders = quick ? 1 : 2;
  // Each create's instructions are tokenized once by the server; the reader is owed them three times.
  const creates = quick ? 8 : 40;
  const wsBytes = 1 << 20;
  const sseReaders = quick ? 1 : 3;
  const sseBytes = quick ? 2 << 20 : 15 << 20;
  let control = { start: 0, peak: 0, end: 0 };
  let slow = { start: 0, peak: 0, end: 0 };
  // A ws reader that reads nothing holds its queue (the next response waits for it to read) until the heartbeat drops it
  // for answering no ping: a short idle timeout here so the scenario need not wait the default 60 s.
  await ctx.withServer(tally, { args: ['--ws-idle-timeout-ms', String(WS_IDLE_MS), '--send-stall-timeout-ms', String(SEND_STALL_MS)] }, async (target) => {
    // The control: the same fat requests from clients that read. What they
    // cost (parsing and tokenizing megabytes, serialising events that echo
    // them) is the cost of the requests, not of slow reading; the budget
    // below is for what slow readers add on top.
    const controlRss = new RssSampler(() => target.server);
    const controlIds = await readingControl(target.url, sockets, posts, wsReaders, creates, wsBytes, sseReaders, sseBytes, ctx.opts.hangMs, tally);
    control = controlRss.stop();
    const slowRss = new RssSampler(() => target.server);
    const wsSockets: Array<{ s: Socket; design: SocketProtocol }> = [];
    const frame = wsFrame(JSON.stringify(fatCreate(wsBytes)));
    for (const design of sockets) {
      for (let r = 0; r < wsReaders; r++) {
        const s = await rawUpgrade(target.url, design);
        wsSockets.push({ s, design });
        for (let i = 0; i < creates; i++) {
          tally.input(design);
          s.write(frame);
        }
      }
    }
    const sseSockets: Array<{ s: Socket; design: HttpProtocol }> = [];
    const body = asPost(fatCreate(sseBytes, { stream: true }));
    for (const design of posts) {
      for (let r = 0; r < sseReaders; r++) {
        const s = await open(target.url);
        s.write(`POST ${designPath(design)} HTTP/1.1\r\nHost: ${new URL(target.url).host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        s.pause();
        tally.input(design);
        sseSockets.push({ s, design });
      }
    }
    // The server reads megabytes of frames and bodies before any run starts: wait (bounded) until each reader has a run
    // on record, or a quiescence check could pass before anything began.
    const deadline = performance.now() + ctx.opts.hangMs;
    for (;;) {
      const recs = ((await listRuns(target.url)) ?? []).filter((r) => !controlIds.has(String(r['response_id'])));
      const started = (p: Protocol) => recs.filter((r) => r['protocol'] === p).length;
      if ((sockets.every((d) => started(d) >= wsReaders) && posts.every((d) => started(d) >= sseReaders)) || performance.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    // Then wait (bounded) until the server has done all it will: every run ended, nothing in flight.
    await checkQuiescent(target.url, tally, ctx.opts.hangMs);
    await target.checkAlive(tally, 'slow readers while they are not reading', { livenessOnly: true });
    const runs = ((await listRuns(target.url)) ?? []).filter((r) => !controlIds.has(String(r['response_id'])));
    tally.responses = runs.length;
    for (const design of sockets) {
      const ws = runs.filter((r) => r['protocol'] === design);
      const completed = ws.filter((r) => r['status'] === 'completed').length;
      tally.notes.push(`${design} runs: ${ws.length} started of ${creates * wsReaders} sent, ${completed} completed, ${ws.length - completed} ended otherwise`);
    }
    for (const [i, { s, design }] of wsSockets.entries()) {
      // Dropped by the send limit (owed more than it in one response) or by the heartbeat (it answers no ping).
      const seen = await closedByServer(s, 2 * WS_IDLE_MS + 2_000);
      tally.closes += seen.closed ? 1 : 0;
      // Each create owes the reader its instructions three times (created, in_progress, completed).
      const owed = creates * wsBytes * 3;
      if (!seen.closed && owed <= WS_SEND_BUFFER_DEFAULT) tally.notes.push(`${design} slow reader ${i} owed ${(owed / 1048576).toFixed(0)} MB, under the send limit: not dropped, as expected`);
      else if (!seen.closed) {
        tally.fail('dropped', `${design} slow reader ${i}: ${creates} creates × ${wsBytes} bytes of instructions, never read`, `the server still held the connection open ${2 * WS_IDLE_MS} ms after the heartbeat should have dropped it (${(seen.bytes / 1048576).toFixed(0)} MB read afterwards)`);
      }
    }
    for (const [i, { s, design }] of sseSockets.entries()) {
      const seen = await closedByServer(s, 5_000);
      tally.notes.push(`${design} sse slow reader ${i}: ${seen.sawDone ? 'the whole stream was buffered for it and delivered' : 'dropped by the server'} (${(seen.bytes / 1048576).toFixed(0)} MB read afterwards)`);
    }
    slow = slowRss.stop();
  });
  const mb = (n: number) => (n / 1048576).toFixed(0);
  tally.notes.push(
    `RSS MB: the same requests read promptly ${mb(control.start)}/${mb(control.peak)}/${mb(control.end)}, then by slow readers ${mb(slow.start)}/${mb(slow.peak)}/${mb(slow.end)} (start/peak/end)`,
  );
  // What slow readers add over serving the same requests: the peak over the higher of the control's peak and where the slow phase began.
  const growth = (slow.peak - Math.max(control.peak, slow.start)) / 1048576;
  if (growth > SLOW_READER_RSS_BUDGET_MB) {
    tally.fail('rss', `${wsReaders} slow readers on each of ${sockets.join(', ') || 'no WebSocket design'}, ${sseReaders} on each of ${posts.join(', ') || 'no HTTP design'}`, `RSS peaked ${growth.toFixed(0)} MB over the same requests read promptly (budget ${SLOW_READER_RSS_BUDGET_MB} MB)`);
  }
  return [tally];
}

/**
 * The same requests as the slow readers', from clients that read everything:
 * creates on a WebSocket client of each socket design (until each has its
 * terminal event or an error), SSE posts of each HTTP design on raw sockets
 * read to the end. Returns the ids of the runs it caused, so the slow phase's
 * counts leave them out.
 */
async function readingControl(url: string, sockets: readonly SocketProtocol[], posts: readonly HttpProtocol[], wsReaders: number, creates: number, wsBytes: number, sseReaders: number, sseBytes: number, boundMs: number, tally: Tally): Promise<Set<string>> {
  const before = new Set(((await listRuns(url)) ?? []).map((r) => String(r['response_id'])));
  const frame = JSON.stringify(fatCreate(wsBytes));
  const peers = await Promise.all(sockets.flatMap((d) => Array.from({ length: wsReaders }, () => WsPeer.connect(url, d))));
  const answered = (p: WsPeer) => p.events.filter((e) => e['type'] === 'error' || /^response\.(completed|failed|incomplete)$/.test(String(e['type']))).length;
  for (const p of peers) for (let i = 0; i < creates; i++) p.ws.send(frame);
  const { host } = new URL(url);
  const body = asPost(fatCreate(sseBytes, { stream: true }));
  const sse = posts.flatMap((d) => Array.from({ length: sseReaders }, () => d)).map(async (design) => {
    const s = await open(url);
    s.write(`POST ${designPath(design)} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    await closedByServer(s, boundMs * 4);
  });
  // Every frame is parsed and queued as in the slow phase; the first few runs are enough (a slow reader is dropped after
  // about as many), and running all of them (megabytes of instructions tokenized each) would take a minute.
  const runs = Math.min(creates, CONTROL_RUNS);
  // A reading client may still be dropped (this process is busy writing megabytes, so it may answer a ping of the
  // scenario's short heartbeat late); the server's cost (every frame parsed and queued, runs started) is paid either way.
  const wsDone = await Promise.all(peers.map((p) => p.until(() => answered(p) >= runs || p.closeInfo !== null, boundMs * 4)));
  await Promise.all(sse);
  for (const p of peers) p.ws.close();
  await Promise.all(peers.map((p) => p.closed));
  const dropped = peers.filter((p) => p.closeInfo !== null && answered(p) < runs).length;
  if (dropped) tally.notes.push(`control: ${dropped} reading ws client(s) closed by the server before ${runs} answers`);
  if (wsDone.includes(false)) {
    const seen = peers.map((p) => `${answered(p)} answers of ${p.events.length} events${p.closeInfo ? `, closed ${p.closeInfo.code}` : ''}`).join('; ');
    tally.notes.push(`control: a reading ws client did not get ${runs} answers in time (${seen})`);
  }
  await checkQuiescent(url, tally, boundMs);
  return new Set(((await listRuns(url)) ?? []).map((r) => String(r['response_id'])).filter((id) => !before.has(id)));
}
