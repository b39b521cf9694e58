/**
 * Where one tool step's time goes, across the two processes: the client's
 * answer (a long-lived `response.append`, a ws-mode `response.create` with
 * `previous_response_id`) until the next call's `output_item.done` reaches
 * it, cut into four pieces on the monotonic clock both processes share
 * (`process.hrtime`, CLOCK_MONOTONIC on Linux):
 *
 *   in      the client's send until the server's socket hands it the frame
 *           (the loopback, the kernel, the server waking up)
 *   server  from that frame to the start of the write that carries the call
 *           (everything the server does for the step: parse, checks,
 *           tokenizing, the model call, the events)
 *   out     from the start of that write until the client has the call:
 *           the write (one `writev` system call, which on loopback also
 *           delivers the bytes to the client's socket and wakes it), the
 *           client waking, reading and parsing the frames; the write's own
 *           length is printed apart, and overlaps the client's part (a
 *           client on another core can have the frame before the server's
 *           system call returns)
 *
 * The server is `llr serve --instant` with timeline-probe.ts loaded (`node
 * --import`): it stamps each chunk its TCP sockets receive and each write
 * they make, and hands them over on SIGUSR2. The client wraps its socket's
 * `send` and listens for its frames. The same cut of a raw `ws` echo round
 * trip (frame-server.ts, with the same probe) is the yardstick's: what the
 * wire and a server that does no work cost. Each design runs `--warm`
 * unmeasured 22-step loops first, then `--loops` measured ones (each loop's
 * last answer, followed by the final message rather than a call, is left
 * out, as bench:overhead leaves it out); the p50, p90 and p99 of each piece
 * are printed, and where the slowest 1 % of the steps spent their time
 * (each piece's share of their summed length), and the p50 of the whole
 * step next to the loop's own p50 (measured with `performance.now()` by the loop itself: the
 * cut should add up to it).
 *
 *   npm run bench:timeline [-- --warm 300 --loops 100] [--json]
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { WebSocket } from 'ws';
import { intFlag, parseCommandLine } from '../command-line.js';
import { echoRounds, eventType, longLivedLoop, openLongLived, openWs, wsChainLoop, type LoopSamples } from './overhead-loop.js';
import { spawnFrameServer, spawnServer, type Child } from './processes.js';
import { percentile } from './stats.js';

const STEPS = 22;
const OUTPUT_BYTES = 1024;
/** How long a child has to hand over its timeline after SIGUSR2. */
const DUMP_MS = 10_000;

const COMMAND = {
  name: 'bench:timeline',
  usage: `usage: npm run bench:timeline -- [--warm N] [--loops N] [--json]
  --warm N    unmeasured 22-step loops of each design first (300)
  --loops N   measured loops of each design (100, at most 10000)
  --json      print the figures as one JSON object instead of the table
  -h, --help  print this and exit`,
};

const nowUs = (): number => Number(process.hrtime.bigint()) / 1000;

/** What the probe hands over: [kind (0 a received chunk, 1 a write), start µs, duration µs, bytes, 1 if an `output_item.done` went in it]. */
interface Dump {
  events: Array<[number, number, number, number, number]>;
  dropped: number;
}

/** A child with the probe loaded, and the file it hands its timeline over in. */
interface Probed {
  child: Child;
  file: string;
}

const probeUrl = pathToFileURL(fileURLToPath(new URL('./timeline-probe.js', import.meta.url))).href;

async function probed(what: 'server' | 'echo'): Promise<Probed> {
  const file = join(tmpdir(), `llr-timeline-${process.pid}-${what}.json`);
  rmSync(file, { force: true });
  // The children take the driver's environment: the probe reads where to write from it.
  process.env['LLR_TIMELINE_OUT'] = file;
  const nodeArgs = ['--import', probeUrl];
  const child = what === 'server' ? await spawnServer(['--instant'], { nodeArgs }) : await spawnFrameServer({ nodeArgs });
  delete process.env['LLR_TIMELINE_OUT'];
  return { child, file };
}

/** The probe's events since its last hand-over. */
async function take(p: Probed): Promise<Dump> {
  p.child.proc.kill('SIGUSR2');
  const until = Date.now() + DUMP_MS;
  // The probe renames a complete file into place: it exists only once it is whole.
  while (!existsSync(p.file)) {
    if (Date.now() > until) throw new Error(`the probed process did not hand over its timeline within ${DUMP_MS} ms`);
    if (p.child.proc.exitCode !== null) throw new Error('the probed process exited');
    await new Promise((r) => setTimeout(r, 10));
  }
  const dump = JSON.parse(readFileSync(p.file, 'utf8')) as Dump;
  rmSync(p.file);
  return dump;
}

/** The client's side: when each answer went out, and when each awaited frame came in. */
interface ClientMarks {
  answers: number[];
  arrivals: number[];
}

/** Stamps `ws`'s sends that `isAnswer` picks and its frames that `arrives` picks, while `on()` says so. */
function mark(ws: WebSocket, isAnswer: (frame: string) => boolean, arrives: (data: Buffer) => boolean) {
  const marks: ClientMarks = { answers: [], arrivals: [] };
  let on = false;
  const send = ws.send.bind(ws) as (data: string, ...rest: unknown[]) => void;
  (ws as unknown as { send: (data: string, ...rest: unknown[]) => void }).send = (data: string, ...rest: unknown[]) => {
    if (on && isAnswer(data)) marks.answers.push(nowUs());
    send(data, ...rest);
  };
  // Registered before the loop's own listener, so it stamps each frame first.
  ws.on('message', (data: Buffer) => {
    if (on && arrives(data)) marks.arrivals.push(nowUs());
  });
  return {
    marks,
    set: (v: boolean) => {
      on = v;
    },
  };
}

/** The first index in sorted `xs` whose value is at least `t`. */
function firstAtLeast(xs: readonly number[], t: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

interface Pieces {
  in: number[];
  server: number[];
  out: number[];
  /** The call's write: its system call's length, and its bytes. */
  write: number[];
  bytes: number[];
  total: number[];
  /** Writes the server made between the frame and the call's write (a turn that yielded before the call). */
  earlierWrites: number;
  unmatched: number;
}

/**
 * Each answer matched with the server's first received chunk after it, the
 * server's first write after that chunk carrying an `output_item.done`
 * (`callWrites`; any first write for the echo, whose writes carry none), and
 * the client's first awaited frame after the answer. A step missing any of
 * them, or whose pieces are out of order, is counted apart.
 */
function cut(marks: ClientMarks, dump: Dump, callWrites: boolean): Pieces {
  const reads = dump.events.filter((e) => e[0] === 0).map((e) => e[1]);
  const writes = dump.events.filter((e) => e[0] === 1);
  const writeStarts = writes.map((e) => e[1]);
  const p: Pieces = { in: [], server: [], out: [], write: [], bytes: [], total: [], earlierWrites: 0, unmatched: 0 };
  for (const sent of marks.answers) {
    const arrived = marks.arrivals[firstAtLeast(marks.arrivals, sent)];
    const read = reads[firstAtLeast(reads, sent)];
    if (arrived === undefined || read === undefined || read > arrived) {
      p.unmatched++;
      continue;
    }
    const first = firstAtLeast(writeStarts, read);
    let call = first;
    while (call < writes.length && callWrites && writes[call]![4] !== 1) call++;
    const w = writes[call];
    if (w === undefined || w[1] > arrived) {
      p.unmatched++;
      continue;
    }
    const [, start, took, bytes] = w;
    p.earlierWrites += call - first;
    p.in.push(read - sent);
    p.server.push(start - read);
    p.out.push(arrived - start);
    p.write.push(took);
    p.bytes.push(bytes);
    p.total.push(arrived - sent);
  }
  return p;
}

interface Row {
  design: string;
  pieces: Pieces;
  loopP50Ms: number;
  dropped: number;
}

async function measure(design: 'long-lived' | 'ws', server: Probed, warm: number, loops: number): Promise<Row> {
  const ws = design === 'ws' ? await openWs(server.child.url) : await openLongLived(server.child.url);
  try {
    const answer = design === 'ws' ? (f: string) => f.includes('"previous_response_id"') : (f: string) => f.startsWith('{"type":"response.append"');
    const m = mark(ws, answer, (d) => eventType(d) === 'response.output_item.done');
    const loop = (): Promise<LoopSamples> => (design === 'ws' ? wsChainLoop(ws, STEPS, OUTPUT_BYTES) : longLivedLoop(ws, STEPS, OUTPUT_BYTES));
    for (let i = 0; i < warm; i++) await loop();
    await take(server);
    m.set(true);
    const samples: number[] = [];
    for (let i = 0; i < loops; i++) {
      // The last answer of a loop is followed by the final message, not a call: left out, as bench:overhead does.
      samples.push(...(await loop()).samples.slice(0, STEPS - 1));
      m.marks.answers.pop();
    }
    m.set(false);
    const dump = await take(server);
    return { design, pieces: cut(m.marks, dump, true), loopP50Ms: percentile(samples, 50), dropped: dump.dropped };
  } finally {
    ws.close();
  }
}

async function measureEcho(echo: Probed, frameBytes: number, warm: number, rounds: number): Promise<Row> {
  const ws = await openWs(echo.child.url);
  try {
    const m = mark(ws, () => true, () => true);
    const frame = 'x'.repeat(frameBytes);
    await echoRounds(ws, frame, warm);
    await take(echo);
    m.set(true);
    const samples = await echoRounds(ws, frame, rounds);
    m.set(false);
    const dump = await take(echo);
    return { design: 'raw ws echo', pieces: cut(m.marks, dump, false), loopP50Ms: percentile(samples, 50), dropped: dump.dropped };
  } finally {
    ws.close();
  }
}

/** The figures as data: each piece's p50, p90 and p99 in µs. */
function asJson(rows: Row[]): unknown {
  const p = (xs: number[]) => ({ p50: percentile(xs, 50), p90: percentile(xs, 90), p99: percentile(xs, 99) });
  return rows.map((r) => ({
    design: r.design,
    in_us: p(r.pieces.in),
    server_us: p(r.pieces.server),
    out_us: p(r.pieces.out),
    step_us: p(r.pieces.total),
    write_syscall_us: p(r.pieces.write),
    write_bytes_p50: percentile(r.pieces.bytes, 50),
    slowest_1pct_us: r.pieces.total.length === 0 ? null : slowest(r.pieces),
    loop_p50_us: r.loopP50Ms * 1000,
    steps: r.pieces.total.length,
    unmatched: r.pieces.unmatched,
    earlier_writes: r.pieces.earlierWrites,
    dropped: r.dropped,
  }));
}

/**
 * The slowest 1 % of the steps (at least one): how many, the p50 of their length, and the share of their summed time
 * each piece took (the shares add up to 1), so a tail can be read as the wire's, the server's or the client's.
 */
function slowest(p: Pieces): { n: number; p50: number; in: number; server: number; out: number } {
  const order = p.total.map((_, i) => i).sort((a, b) => p.total[b]! - p.total[a]!);
  const top = order.slice(0, Math.max(1, Math.ceil(order.length / 100)));
  const sum = (xs: number[]) => top.reduce((n, i) => n + xs[i]!, 0);
  const total = sum(p.total);
  return { n: top.length, p50: percentile(top.map((i) => p.total[i]!), 50), in: sum(p.in) / total, server: sum(p.server) / total, out: sum(p.out) / total };
}

function print(rows: Row[]): void {
  const cell = (xs: number[]) => (xs.length === 0 ? 'n/a' : `${percentile(xs, 50).toFixed(1)} (${percentile(xs, 90).toFixed(1)}, ${percentile(xs, 99).toFixed(1)})`);
  const lines: string[][] = [
    ['µs, p50 (p90, p99)', ...rows.map((r) => r.design)],
    ['in: client send → server reads the frame', ...rows.map((r) => cell(r.pieces.in))],
    ["server: the frame → the call's write starts", ...rows.map((r) => cell(r.pieces.server))],
    ["out: the call's write starts → the client has the call", ...rows.map((r) => cell(r.pieces.out))],
    ['the step, cut (send → the call)', ...rows.map((r) => cell(r.pieces.total))],
    ["the call's write: its system call (within out)", ...rows.map((r) => cell(r.pieces.write))],
    ["the call's write: bytes", ...rows.map((r) => (r.pieces.bytes.length === 0 ? 'n/a' : String(percentile(r.pieces.bytes, 50))))],
    ["the step, the loop's own p50", ...rows.map((r) => (r.loopP50Ms * 1000).toFixed(1))],
    ['the slowest 1 % (n, their p50): share in / server / out', ...rows.map((r) => {
      if (r.pieces.total.length === 0) return 'n/a';
      const t = slowest(r.pieces);
      const pct = (x: number) => `${Math.round(x * 100)} %`;
      return `(${t.n}, ${t.p50.toFixed(0)}) ${pct(t.in)} / ${pct(t.server)} / ${pct(t.out)}`;
    })],
    ['steps cut / not matched', ...rows.map((r) => `${r.pieces.total.length} / ${r.pieces.unmatched}`)],
    ["writes between the frame and the call's", ...rows.map((r) => String(r.pieces.earlierWrites))],
  ];
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  for (const l of lines) process.stdout.write(`${l.map((c, i) => c.padEnd(widths[i]!)).join('  ')}\n`);
  const dropped = rows.filter((r) => r.dropped > 0);
  if (dropped.length > 0) process.stdout.write(`the probe dropped events (over LLR_TIMELINE_MAX): ${dropped.map((r) => `${r.design} ${r.dropped}`).join(', ')}\n`);
}

async function main(): Promise<void> {
  const { values } = parseCommandLine(COMMAND, { options: { warm: { type: 'string' }, loops: { type: 'string' }, json: { type: 'boolean' } } });
  const warm = intFlag(COMMAND, 'warm', values.warm, 300, 0, 10_000);
  const loops = intFlag(COMMAND, 'loops', values.loops, 100, 1, 10_000);
  const t0 = Date.now();
  const server = await probed('server');
  const echo = await probed('echo');
  try {
    const ll = await measure('long-lived', server, warm, loops);
    const ws = await measure('ws', server, warm, loops);
    // The echo's frame: the size of the long-lived answer, as bench:overhead's yardstick.
    const answerBytes = JSON.stringify({ type: 'response.append', input: [{ type: 'function_call_output', call_id: `call_${'0'.repeat(24)}`, output: 'x'.repeat(OUTPUT_BYTES) }] }).length;
    const e = await measureEcho(echo, answerBytes, warm * STEPS, loops * STEPS);
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ node: process.version, warm, loops, steps: STEPS, output_bytes: OUTPUT_BYTES, rows: asJson([ll, ws, e]) })}\n`);
      return;
    }
    process.stdout.write(`node ${process.version}; ${warm} warm and ${loops} measured ${STEPS}-step loops per design, ${OUTPUT_BYTES}-byte tool outputs; ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
    print([ll, ws, e]);
  } finally {
    await Promise.all([server.child.stop(), echo.child.stop()]);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
