/**
 * The loop-hold probe: does any one request, of any size or shape the
 * default limits allow, hold the server's event loop long enough to keep
 * `/health` waiting more than 250 ms (issue 7)? Each hostile shape — 16 MiB
 * of tiny input items, content parts, images, tools, schema properties,
 * metadata keys, deep-but-allowed nesting, a huge `text.format` schema, the
 * compaction endpoint, WebSocket creates, a long-lived append and a ws-mode
 * continuation of a 4,000-link stored chain from a new connection — is sent to
 * a real `llr serve` process (default limits, a SQLite file store as by
 * default, `--instant` model) while a
 * worker thread polls `/health` (chaos/loop-hold-poller.ts). One row per
 * shape: what came back, how long it took, the slowest `/health`, and the
 * CPU time of the server's main thread during that slowest wait (a wait with
 * little of it was the machine's doing, not the server's).
 *
 * `npm run bench:loop-hold` prints the table (chaos/loop-hold-cli.ts).
 * Leaves out concurrency: one request at a time is the claim under test.
 */
import { Worker } from 'node:worker_threads';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import WebSocket from 'ws';
import type { PollFigures } from './loop-hold-poller.js';
import { ServerProc } from './proc.js';

/** What the issue allows one request to hold `/health` for, ms. */
export const HOLD_LIMIT_MS = 250;
const MIB = 1024 * 1024;

export interface Shape {
  name: string;
  /** Where it goes. */
  via: 'http' | 'http-sse' | 'http-chain' | 'ws-chain' | 'compact' | 'ws' | 'long-lived-append';
  /** The body or frame (built before the clock starts; `ws-chain`: each link's tool output). */
  build(bytes: number): string;
}

export interface HoldRow {
  shape: string;
  via: Shape['via'];
  bytes: number;
  outcome: string;
  totalMs: number;
  health: PollFigures;
  verdict: 'ok' | 'HOLDS' | 'slow machine';
}

/** Repeat `unit(i)` joined by commas until the text reaches about `bytes`; returns the joined text and the count. */
function fill(bytes: number, unit: (i: number) => string): { text: string; n: number } {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const u = unit(i);
    parts.push(u);
    size += u.length + 1;
  }
  return { text: parts.join(','), n: parts.length };
}

const envelope = (fields: string) => `{"model":"sim-model",${fields}}`;
const OVERHEAD = 512;
/** Stored responses in the `ws-chain` shape's chain (its row's size is theirs together). */
export const CHAIN_LINKS = 4_000;

/** Prose of about `n` characters (tokenizes like text, not like one long word). */
const prose = (n: number) => 'lorem ipsum dolor sit amet, consectetur adipiscing elit '.repeat(Math.max(1, Math.ceil(n / 56))).slice(0, n);

/** The default caps (src/engine/services.ts): the at-cap shapes stay just under them. */
const AT_CAP = { inputParts: 49_000, tools: 128, schemaNodes: 19_500 };

/** `AT_CAP.tools` tools whose schemas hold `AT_CAP.schemaNodes` objects together, descriptions filling `bytes`. */
function toolsAtCap(bytes: number): string {
  const props = Math.floor(AT_CAP.schemaNodes / AT_CAP.tools) - 2;
  const desc = prose(Math.floor((bytes - OVERHEAD) / (AT_CAP.tools * props)) - 40);
  const tool = (i: number) => {
    const p = Array.from({ length: props }, (_, j) => `"p${j}":{"type":"string","description":"${desc}"}`).join(',');
    return `{"type":"function","name":"tool_${i}","description":"tool ${i}","parameters":{"type":"object","properties":{${p}}}}`;
  };
  return Array.from({ length: AT_CAP.tools }, (_, i) => tool(i)).join(',');
}

/** `AT_CAP.inputParts` user messages filling `bytes`. */
function itemsAtCap(bytes: number): string {
  const text = prose(Math.floor((bytes - OVERHEAD) / AT_CAP.inputParts) - 32);
  return Array.from({ length: AT_CAP.inputParts }, () => `{"role":"user","content":"${text}"}`).join(',');
}

export const SHAPES: Shape[] = [
  { name: 'at cap: 49k input items, prose', via: 'http', build: (b) => envelope(`"input":[${itemsAtCap(b)}]`) },
  {
    name: 'at cap: 49k content parts, prose',
    via: 'http',
    build: (b) => envelope(`"input":[{"role":"user","content":[${Array.from({ length: AT_CAP.inputParts }, () => `{"type":"input_text","text":"${prose(Math.floor((b - OVERHEAD) / AT_CAP.inputParts) - 40)}"}`).join(',')}]}]`),
  },
  { name: 'at cap: 128 tools, 19.5k schema nodes', via: 'http', build: (b) => envelope(`"input":"please use tool_7","tools":[${toolsAtCap(b)}]`) },
  { name: 'at cap: 128 tools (SSE)', via: 'http-sse', build: (b) => envelope(`"stream":true,"input":"hi","tools":[${toolsAtCap(b)}]`) },
  {
    name: 'at cap: text.format, 19.5k schema nodes',
    via: 'http',
    build: (b) => {
      const per = 9_000;
      const desc = prose(Math.floor((b - OVERHEAD) / (2 * per)) - 40);
      const obj = (k: string) => `"${k}":{"type":"object","properties":{${Array.from({ length: per }, (_, j) => `"${k}${j}":{"type":"string","description":"${desc}"}`).join(',')}}}`;
      return envelope(`"input":"hi","text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object","properties":{${obj('a')},${obj('b')}},"required":["a","b"]}}}`);
    },
  },
  { name: 'at cap: previous_response_id of 49k items', via: 'http-chain', build: (b) => envelope(`"input":[${itemsAtCap(b)}]`) },
  { name: 'at cap: compact, 49k items', via: 'compact', build: (b) => envelope(`"input":[${itemsAtCap(b)}]`) },
  {
    name: 'at cap: 49k images',
    via: 'http',
    build: (b) => {
      const data = 'A'.repeat(Math.floor((b - OVERHEAD) / AT_CAP.inputParts) - 70);
      return envelope(`"input":[{"role":"user","content":[${Array.from({ length: AT_CAP.inputParts }, () => `{"type":"input_image","image_url":"data:image/png;base64,${data}"}`).join(',')}]}]`);
    },
  },
  {
    name: 'at cap: 199k arrays, depth 60',
    via: 'http',
    build: () => envelope(`"input":"hi","x_unknown":[${Array.from({ length: Math.floor(199_000 / 59) }, () => `${'['.repeat(59)}0${']'.repeat(59)}`).join(',')}]`),
  },
  { name: 'at cap: ws create, 49k items', via: 'ws', build: (b) => `{"type":"response.create","model":"sim-model","input":[${itemsAtCap(b)}]}` },
  { name: 'at cap: ws create, 128 tools', via: 'ws', build: (b) => `{"type":"response.create","model":"sim-model","input":"hi","tools":[${toolsAtCap(b)}]}` },
  {
    name: 'at cap: long-lived append, 49k items',
    via: 'long-lived-append',
    build: (b) => `{"type":"response.append","input":[{"type":"function_call_output","call_id":"%CALL%","output":"ok"},${itemsAtCap(b - 200)}]}`,
  },
  { name: 'input: tiny items', via: 'http', build: (b) => envelope(`"input":[${fill(b - OVERHEAD, () => '{"role":"user","content":"a"}').text}]`) },
  {
    name: 'input: content parts',
    via: 'http',
    build: (b) => envelope(`"input":[{"role":"user","content":[${fill(b - OVERHEAD, () => '{"type":"input_text","text":"a"}').text}]}]`),
  },
  {
    name: 'input: images',
    via: 'http',
    build: (b) => envelope(`"input":[{"role":"user","content":[${fill(b - OVERHEAD, () => '{"type":"input_image","image_url":"data:image/png;base64,AAAA"}').text}]}]`),
  },
  {
    name: 'input: call/output pairs',
    via: 'http',
    build: (b) =>
      envelope(
        `"input":[${fill(b - OVERHEAD, (i) => `{"type":"function_call","call_id":"c${i}","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c${i}","output":"ok"}`).text}]`,
      ),
  },
  { name: 'instructions: one string', via: 'http', build: (b) => envelope(`"input":"hi","instructions":"${'lorem ipsum '.repeat(Math.floor((b - OVERHEAD) / 12))}"`) },
  { name: 'tools: many small', via: 'http', build: (b) => envelope(`"input":"hi","tools":[${fill(b - OVERHEAD, (i) => `{"type":"function","name":"t${i}","parameters":{"type":"object","properties":{}}}`).text}]`) },
  {
    name: 'tools: one schema, many properties',
    via: 'http',
    build: (b) => envelope(`"input":"hi","tools":[{"type":"function","name":"big","parameters":{"type":"object","properties":{${fill(b - OVERHEAD, (i) => `"p${i}":{"type":"string"}`).text}}}}]`),
  },
  {
    name: 'tools: many small (SSE)',
    via: 'http-sse',
    build: (b) => envelope(`"stream":true,"input":"hi","tools":[${fill(b - OVERHEAD, (i) => `{"type":"function","name":"t${i}","parameters":{"type":"object","properties":{}}}`).text}]`),
  },
  {
    name: 'text.format: schema, many properties',
    via: 'http',
    build: (b) =>
      envelope(`"input":"hi","text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object","properties":{${fill(b - OVERHEAD, (i) => `"p${i}":{"type":"string"}`).text}}}}}`),
  },
  {
    // The tool is forced, so the model generates its arguments from the schema: `required` is read by the shape count,
    // the schema check, the strict check and the argument generator.
    name: 'tools: one schema, a required of many names',
    via: 'http',
    build: (b) =>
      envelope(
        `"input":"hi","tool_choice":"required","tools":[{"type":"function","name":"big","parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":[${fill(b - OVERHEAD, () => '"a"').text}],"additionalProperties":false}}]`,
      ),
  },
  { name: 'metadata: many keys', via: 'http', build: (b) => envelope(`"input":"hi","metadata":{${fill(b - OVERHEAD, (i) => `"k${i}":"v"`).text}}`) },
  {
    name: 'unknown field: deep arrays (depth 60)',
    via: 'http',
    build: (b) => envelope(`"input":"hi","x_unknown":[${fill(b - OVERHEAD, () => `${'['.repeat(59)}0${']'.repeat(59)}`).text}]`),
  },
  { name: 'compact: tiny items', via: 'compact', build: (b) => envelope(`"input":[${fill(b - OVERHEAD, () => '{"role":"user","content":"a"}').text}]`) },
  { name: 'ws create: tiny items', via: 'ws', build: (b) => `{"type":"response.create","model":"sim-model","input":[${fill(b - OVERHEAD, () => '{"role":"user","content":"a"}').text}]}` },
  {
    name: 'ws create: schema properties',
    via: 'ws',
    build: (b) =>
      `{"type":"response.create","model":"sim-model","input":"hi","tools":[{"type":"function","name":"big","parameters":{"type":"object","properties":{${fill(b - OVERHEAD, (i) => `"p${i}":{"type":"string"}`).text}}}}]}`,
  },
  {
    name: `chain: ${CHAIN_LINKS} ws responses, new connection`,
    via: 'ws-chain',
    build: (b) => prose(Math.floor(b / CHAIN_LINKS) - 256),
  },
  {
    name: 'long-lived append: tiny items',
    via: 'long-lived-append',
    // The call_id placeholder is replaced with the pending call's id once the run pauses.
    build: (b) => `{"type":"response.append","input":[{"type":"function_call_output","call_id":"%CALL%","output":"ok"},${fill(b - OVERHEAD, () => '{"role":"user","content":"a"}').text}]}`,
  },
];

function post(url: string, path: string, body: string, timeoutMs: number, onHead?: (head: string) => void): Promise<string> {
  return new Promise((resolve) => {
    const req = request(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }, agent: false }, (res) => {
      // Only the head and the tail of the answer are kept: reading a 16 MiB answer must not cost the probe.
      let head = '';
      let tail = '';
      let terminal: string | undefined;
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        if (head.length < 4096) head += c.slice(0, 4096);
        // An SSE terminal event's name starts a frame that may be megabytes long: look for it as it passes.
        terminal ??= TERMINAL.exec(tail.slice(-64) + c.slice(0, 4096))?.[1] ?? TERMINAL.exec(c.slice(-64 * 1024))?.[1];
        tail = (tail + c).slice(-4096);
      });
      res.on('end', () => {
        onHead?.(head);
        resolve(summarise(res.statusCode ?? 0, head, terminal));
      });
      res.on('error', (e) => resolve(`aborted: ${e.message}`));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve(`error: ${e.message}`));
    req.end(body);
  });
}

/** Store a response made of `body`, then continue it with `previous_response_id` (the stored items are loaded again). */
async function chain(url: string, body: string, timeoutMs: number): Promise<string> {
  let id: string | undefined;
  const first = await post(url, '/v1/responses', body, timeoutMs, (head) => (id = /"id":"(resp_[^"]+)"/.exec(head)?.[1]));
  if (!first.startsWith('200') || id === undefined) return `first: ${first}`;
  return post(url, '/v1/responses', JSON.stringify({ model: 'sim-model', previous_response_id: id, input: 'and then?' }), timeoutMs);
}

/**
 * Store a chain of `CHAIN_LINKS` ws-mode responses (each continuing the last with `output` as its tool output; the
 * connection's cache extends the context, so building it is cheap), then continue its last response from a new
 * connection: a cache miss, so the whole chain is read from the store and rendered (an outside attack's chain of
 * 9,001 held /health 0.5–1 s: the store read and parsed it in one turn).
 */
async function wsChain(url: string, output: string, timeoutMs: number): Promise<string> {
  const deadline = performance.now() + timeoutMs;
  const building = await stepper(url);
  let last = await building.step({ input: 'please lookup the value' }, deadline);
  for (let i = 1; i < CHAIN_LINKS && last.outcome === 'completed'; i++) {
    last = await building.step({ previous_response_id: last.id, input: [{ type: 'function_call_output', call_id: last.call, output }] }, deadline);
  }
  building.close();
  if (last.outcome !== 'completed') return `building: ${last.outcome}`;
  const fresh = await stepper(url);
  const end = await fresh.step({ previous_response_id: last.id, input: [{ type: 'function_call_output', call_id: last.call, output: 'done' }] }, deadline);
  fresh.close();
  return end.outcome;
}

interface Step {
  outcome: string;
  id?: string;
  call?: string;
}

/** A ws-mode connection sending one stored, tool-forced `response.create` at a time (`wsChain`). */
function stepper(url: string): Promise<{ step(fields: object, deadline: number): Promise<Step>; close(): void }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/responses`);
  let current: Step = { outcome: '' };
  let done: ((s: Step) => void) | null = null;
  const end = (outcome: string) => {
    current.outcome = outcome;
    done?.(current);
    done = null;
  };
  ws.on('message', (data: Buffer) => {
    const e = JSON.parse(data.toString('utf8')) as { type: string; response?: { id: string }; item?: { type: string; call_id?: string }; error?: { code?: string } };
    if (e.type === 'response.created') current.id = e.response!.id;
    else if (e.type === 'response.output_item.done' && e.item?.type === 'function_call') current.call = e.item.call_id;
    else if (e.type === 'error') end(`error ${e.error?.code ?? ''}`);
    else if (e.type === 'response.completed' || e.type === 'response.failed' || e.type === 'response.incomplete') end(e.type.slice('response.'.length));
  });
  ws.on('close', (code) => end(`closed ${code}`));
  ws.on('error', (err) => end(`error: ${err.message}`));
  const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } }];
  const step = (fields: object, deadline: number) =>
    new Promise<Step>((resolve) => {
      current = { outcome: '' };
      const timer = setTimeout(() => end('timeout'), Math.max(0, deadline - performance.now()));
      done = (s) => {
        clearTimeout(timer);
        resolve(s);
      };
      if (ws.readyState !== WebSocket.OPEN) return end('closed');
      ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', store: true, tools, tool_choice: 'required', parallel_tool_calls: false, ...fields }));
    });
  return new Promise((resolve) => {
    const ready = () => resolve({ step, close: () => ws.close() });
    ws.once('open', ready);
    ws.once('error', ready);
  });
}

const TERMINAL = /event: (response\.(?:completed|failed|incomplete))/;

function summarise(status: number, head: string, terminal: string | undefined): string {
  const code = /"code":"([^"]+)"/.exec(head)?.[1];
  if (status !== 200) return `${status} ${code ?? ''}`.trim();
  if (terminal) return `200 ${terminal.slice('response.'.length)}`;
  const st = /"status":"(completed|failed|incomplete|in_progress)"/.exec(head)?.[1];
  return `200 ${st ?? ''}`.trim();
}

function viaWs(url: string, frame: string, longLived: boolean, timeoutMs: number): Promise<string> {
  const headers = longLived ? { 'OpenAI-Beta': 'responses_websockets=2026-02-04' } : {};
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/responses`, { headers, maxPayload: 256 * MIB });
  return new Promise((resolve) => {
    const end = (s: string) => {
      clearTimeout(timer);
      ws.close();
      resolve(s);
    };
    const timer = setTimeout(() => end('timeout'), timeoutMs);
    ws.on('error', (e) => end(`error: ${e.message}`));
    ws.on('close', (code) => end(`closed ${code}`));
    ws.on('message', (data: Buffer) => {
      // Events can be megabytes: read only the type and what decides the row.
      const text = data.toString('utf8', 0, Math.min(data.length, 4096));
      const type = /"type":"([^"]+)"/.exec(text)?.[1];
      if (type === 'error') return end(`error ${/"code":"([^"]+)"/.exec(text)?.[1] ?? ''}`);
      if (type === 'response.done' && longLived) {
        const call = /"pending_tool_calls":\["([^"]+)"/.exec(data.toString('utf8'))?.[1];
        if (call) return ws.send(frame.replace('%CALL%', call));
      }
      if (type === 'response.completed' || type === 'response.failed' || type === 'response.incomplete') end(type.slice('response.'.length));
    });
    ws.on('open', () => {
      if (!longLived) return ws.send(frame);
      ws.send(
        JSON.stringify({
          type: 'response.create',
          model: 'sim-model',
          input: 'please lookup the value',
          tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } }],
        }),
      );
    });
  });
}

function ask(worker: Worker, cmd: 'start' | 'stop'): Promise<unknown> {
  return new Promise((resolve) => {
    worker.once('message', resolve);
    worker.postMessage({ cmd });
  });
}

export interface ProbeOptions {
  cli: string;
  /** Body/frame size per shape, bytes (default: just under the 16 MiB default limit). */
  bytes?: number;
  /** Extra `serve` flags. */
  serveArgs?: string[];
  only?: (name: string) => boolean;
  timeoutMs?: number;
  progress?: (line: string) => void;
}

export async function probeLoopHold(opts: ProbeOptions): Promise<HoldRow[]> {
  const bytes = opts.bytes ?? 16 * MIB - 64 * 1024;
  // On a SQLite file, as `llr serve` stores by default: the chain shape's store read is the file's (the memory store
  // hands out copies of its records, which held the loop far less).
  const dir = mkdtempSync(join(tmpdir(), 'llr-loop-hold-'));
  const server = await ServerProc.start({ cli: opts.cli, store: join(dir, 'store.sqlite'), args: opts.serveArgs ?? [] });
  const worker = new Worker(new URL('./loop-hold-poller.js', import.meta.url), { workerData: { url: server.url, pid: server.pid } });
  const rows: HoldRow[] = [];
  try {
    for (const shape of SHAPES.filter((s) => opts.only?.(s.name) ?? true)) {
      const body = shape.build(bytes);
      await ask(worker, 'start');
      const t0 = performance.now();
      const timeout = opts.timeoutMs ?? 120_000;
      const outcome =
        shape.via === 'ws' || shape.via === 'long-lived-append'
          ? await viaWs(server.url, body, shape.via === 'long-lived-append', timeout)
          : shape.via === 'http-chain'
            ? await chain(server.url, body, timeout)
            : shape.via === 'ws-chain'
              ? await wsChain(server.url, body, timeout)
            : await post(server.url, shape.via === 'compact' ? '/v1/responses/compact' : '/v1/responses', body, timeout);
      const totalMs = performance.now() - t0;
      const health = (await ask(worker, 'stop')) as PollFigures;
      const verdict = health.maxMs <= HOLD_LIMIT_MS ? 'ok' : health.cpuAtMaxMs !== null && health.cpuAtMaxMs < HOLD_LIMIT_MS ? 'slow machine' : 'HOLDS';
      const row: HoldRow = { shape: shape.name, via: shape.via, bytes: Buffer.byteLength(body) * (shape.via === 'ws-chain' ? CHAIN_LINKS : 1), outcome: server.alive ? outcome : `server died (${JSON.stringify(server.exit)})`, totalMs, health, verdict };
      rows.push(row);
      opts.progress?.(rowText(row));
      if (!server.alive) {
        opts.progress?.(`server died; its stderr ends:\n${server.stderr.slice(-3000)}`);
        break;
      }
    }
  } finally {
    worker.postMessage({ cmd: 'exit' });
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

function rowText(r: HoldRow): string {
  const cpu = (v: number | null) => (v === null ? '-' : v.toFixed(0));
  return [
    r.shape.padEnd(40),
    r.via.padEnd(17),
    `${(r.bytes / MIB).toFixed(1)} MiB`.padStart(9),
    r.outcome.padEnd(26),
    `${(r.totalMs / 1000).toFixed(2)} s`.padStart(8),
    `${r.health.maxMs.toFixed(0)} ms`.padStart(9),
    `${cpu(r.health.cpuAtMaxMs)} ms`.padStart(8),
    String(r.health.polls).padStart(6),
    r.verdict,
  ].join(' | ');
}

export function holdTable(rows: HoldRow[]): string {
  const head = ['shape'.padEnd(40), 'via'.padEnd(17), 'size'.padStart(9), 'answer'.padEnd(26), 'total'.padStart(8), 'max /health'.padStart(9), 'srv CPU'.padStart(8), 'polls'.padStart(6), 'verdict'].join(' | ');
  return [head, '-'.repeat(head.length), ...rows.map(rowText)].join('\n');
}
