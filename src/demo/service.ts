/**
 * The teaching demo's HTTP routes, mounted by the HTTP transport under
 * `/demo`:
 *
 *   GET  /demo                         the page (static files from web/demo/)
 *   GET  /demo/<file>                  its script and style sheet
 *   GET  /demo/api/config              designs, speeds, workloads, limits
 *   POST /demo/api/races               start a race; the response is its SSE stream
 *   POST /demo/api/races/{id}/step     step mode: let every lane make one more model call
 *
 * A race lives as long as its stream: closing the page stops it. The page
 * needs no build step and makes no request outside this server (its Content
 * Security Policy says so to the browser too). The API takes the same API
 * key as /v1 and the lanes use it against this server.
 *
 * Bounds (options, `llr serve` flags, docs/demo.md): races at once, a race's
 * duration, tool calls of a synthetic run or `$ ` lines of a prompt, prompt
 * size; the race's body is read at the transport's edge (`RouteEdge`):
 * bounded by the frame limit too, and charged to the server-wide byte budget
 * until the race's stream ends, as a /v1 create's; a page that stops reading its stream is dropped at the transport's
 * send-buffer limit, or once nothing of it has left for the stall timeout.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Services } from '../engine/services.js';
import { WireError, methodNotAllowed } from '../protocol/errors.js';
import { parseJsonText } from '../protocol/json-text.js';
import { bearerKey } from '../transport/auth.js';
import type { HttpRoutes, RouteEdge } from '../transport/http.js';
import { checkJsonContentType } from '../transport/http-query.js';
import { watchStall } from '../transport/socket-watch.js';
import { DEMO_DESIGNS, servedDesigns } from './designs.js';
import type { DemoMessage } from './messages.js';
import { DemoModels } from './models.js';
import { tokenizerReady } from '../model/tokenizer.js';
import { leastRaceMs, parseRaceRequest, SPEEDS, speedSettings } from './request.js';
import { Race } from './race.js';
import { codexAvailable, codexLabel, DEFAULT_DEMO_WORKLOAD, PROMPT_TOOL_MS, promptMaxLines, SYNTHETIC_TOOL_MS } from './workloads.js';

export interface DemoOptions {
  /** Races running at once (default 2); one more gets HTTP 429. */
  maxRaces: number;
  /** A race is stopped after this long, step-mode waits included (default 10 minutes). */
  raceTimeoutMs: number;
  /** Most tool calls in a synthetic run, and `$ ` lines in a prompt (default 100). */
  maxToolCalls: number;
  /** Largest prompt, bytes (default 16 KiB). */
  maxPromptBytes: number;
  /** The Codex rollout the "bundled Codex run" replays (default workloads/codex-rollout-a.jsonl in the package). */
  workloadPath: string;
  /**
   * A race's stream carries an SSE comment this often (default 5 s), so the page can tell a server that stopped
   * answering (suspended with Ctrl-Z, its machine asleep, a network gone) from one that has nothing to say yet (a step
   * gate, a long tool): the page gives the race up after three of these with nothing at all.
   */
  aliveMs: number;
}

export const DEFAULT_DEMO_OPTIONS: DemoOptions = {
  maxRaces: 2,
  raceTimeoutMs: 10 * 60 * 1000,
  maxToolCalls: 100,
  maxPromptBytes: 16 * 1024,
  workloadPath: DEFAULT_DEMO_WORKLOAD,
  aliveMs: 5000,
};

const PAGE_DIR = fileURLToPath(new URL('../../web/demo/', import.meta.url));
const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'demo.css': 'text/css; charset=utf-8',
  'demo.js': 'text/javascript; charset=utf-8',
  'lanes.js': 'text/javascript; charset=utf-8',
  'timeline.js': 'text/javascript; charset=utf-8',
  'sse-frames.js': 'text/javascript; charset=utf-8',
};
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export class DemoService implements HttpRoutes {
  readonly prefix = '/demo';
  readonly options: DemoOptions;
  readonly models: DemoModels;
  private readonly races = new Map<string, Race>();
  /** Who started each race (the key's owner id, null without keys): only that key may step it. */
  private readonly owners = new Map<string, string | null>();
  private readonly running = new Set<Promise<unknown>>();
  private url: string | null = null;
  private closed = false;

  constructor(
    private readonly services: () => Services,
    options: Partial<DemoOptions>,
    clock: Services['clock'],
    seed: number,
    private readonly authRequired: boolean,
    /** Whether the server accepts WebSocket upgrades now (`--no-websockets` refuses them): the page lists, and a race runs, only the designs it serves. */
    private readonly webSockets: () => boolean = () => true,
  ) {
    this.options = { ...DEFAULT_DEMO_OPTIONS, ...options };
    for (const k of ['maxRaces', 'raceTimeoutMs', 'maxToolCalls', 'maxPromptBytes', 'aliveMs'] as const) {
      const v = this.options[k];
      if (!Number.isSafeInteger(v) || v < 1) throw new RangeError(`demo option ${k} must be an integer >= 1, got ${v}`);
    }
    // Each race: one lane model per design and one for the lanes' warm-up request.
    this.models = new DemoModels(clock, seed, this.options.maxRaces * (DEMO_DESIGNS.length + 1));
  }

  /** The server's own address, for the lanes' clients (set once it listens). */
  setUrl(url: string): void {
    const u = new URL(url);
    if (u.hostname === '0.0.0.0') u.hostname = '127.0.0.1';
    if (u.hostname === '[::]') u.hostname = '[::1]';
    this.url = u.toString().replace(/\/$/, '');
  }

  async handle(req: IncomingMessage, res: ServerResponse, path: string, edge: RouteEdge): Promise<void> {
    const authenticate = (): string | null => edge.authenticate();
    const method = req.method ?? 'GET';
    const rest = path.slice(this.prefix.length).replace(/^\//, '');
    if (rest === '' || Object.hasOwn(FILES, rest)) {
      if (method !== 'GET' && method !== 'HEAD') throw methodNotAllowed('GET, HEAD');
      return this.file(req, res, rest === '' ? 'index.html' : rest, method === 'HEAD');
    }
    if (rest === 'api/config') {
      if (method !== 'GET' && method !== 'HEAD') throw methodNotAllowed('GET, HEAD');
      authenticate();
      return json(res, 200, this.config());
    }
    if (rest === 'api/races') {
      if (method !== 'POST') throw methodNotAllowed('POST');
      const owner = authenticate();
      // As on /v1: a JSON body or none (415 otherwise), so a form a browser may post without a preflight
      // (text/plain, x-www-form-urlencoded) is refused for its type, not read as JSON.
      checkJsonContentType(req);
      return this.startRace(req, res, owner, edge);
    }
    const step = /^api\/races\/([a-z0-9]+)\/step$/.exec(rest);
    if (step) {
      if (method !== 'POST') throw methodNotAllowed('POST');
      const owner = authenticate();
      const race = this.races.get(step[1]!);
      // Another key's race is reported exactly like a missing one, as /v1 reports another key's response.
      if (!race || this.owners.get(race.o.id) !== owner) throw new WireError('not_found', `No running demo race '${step[1]!.slice(0, 100)}'.`);
      // A race not in step mode has no gate: its "allowed" would be Infinity, which JSON sends as null.
      if (!race.o.step) throw new WireError('invalid_value', `Demo race '${race.o.id}' is not in step mode: its lanes wait for no step.`, 'step');
      return json(res, 200, { allowed: race.step() });
    }
    throw new WireError('not_found', `No demo route for ${method} ${path}.`);
  }

  /** Races running now. */
  get racesRunning(): number {
    return this.running.size;
  }

  /** Resolves once no race is running (tests; shutdown uses `shutdown`). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  /** Shutdown: stop every race and wait until each has ended. */
  async shutdown(): Promise<void> {
    this.closed = true;
    for (const r of this.races.values()) r.stop('the server is shutting down');
    await Promise.all([...this.running]);
  }

  private config(): object {
    const o = this.options;
    return {
      designs: servedDesigns(this.webSockets()).map(({ id, label, starts_with, continues_with, keeps }) => ({ id, label, starts_with, continues_with, keeps })),
      speeds: SPEEDS.map((id) => ({ id, label: id === 'instant' ? 'instant' : `${Number(id).toLocaleString('en')} tokens/s` })),
      tool_times: [
        { id: 'none', label: 'none (tools answer at once)' },
        { id: 'recorded', label: 'as recorded' },
      ],
      workloads: {
        // `bundled`: the page calls it a Codex CLI session only then (a file given is any agent's recorded run; atk106 F4).
        codex: { available: codexAvailable(o.workloadPath), label: codexLabel(o.workloadPath, true), bundled: o.workloadPath === DEFAULT_DEMO_WORKLOAD },
        synthetic: { max_tool_calls: o.maxToolCalls, tool_ms: SYNTHETIC_TOOL_MS },
        prompt: { max_bytes: o.maxPromptBytes, max_lines: promptMaxLines(o.maxToolCalls), tool_ms: PROMPT_TOOL_MS },
      },
      auth_required: this.authRequired,
      limits: { max_races: o.maxRaces, race_timeout_ms: o.raceTimeoutMs },
    };
  }

  /**
   * One of the page's files. `no-cache` has the browser revalidate it at every load, so the file (read afresh each
   * time) carries a validator, its content's hash: a copy still current is answered 304 with no body (RFC 9110
   * §13.1.2, `If-None-Match`). Without one the browser fetched every file whole at every load.
   */
  private async file(req: IncomingMessage, res: ServerResponse, name: string, head: boolean): Promise<void> {
    const body = await readFile(PAGE_DIR + name);
    const etag = `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"`;
    const headers = {
      ETag: etag,
      'Cache-Control': 'no-cache',
      'Content-Security-Policy': CSP,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
    };
    if (matchesEtag(req.headers['if-none-match'], etag)) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': FILES[name]!, 'Content-Length': body.length });
    res.end(head ? undefined : body);
  }

  private async startRace(req: IncomingMessage, res: ServerResponse, owner: string | null, edge: RouteEdge): Promise<void> {
    const services = this.services();
    // JSON escapes one byte of the prompt into as many as six (`\u0001`): a prompt within its limit must fit the body's,
    // and one over it is refused by the prompt's own check, which names it. Read at the edge as a /v1 body is: never
    // more than --max-frame-bytes, and charged to --max-server-bytes until the race's stream ends (503 server_busy past it).
    const body = parseJsonText(await edge.readBody(6 * this.options.maxPromptBytes + 4096), 'body', services.limits.maxJsonDepth);
    // Reading a recorded workload counts its tokens synchronously: wait for the tokenizer's tables first (model/tokenizer.ts).
    await tokenizerReady();
    const r = parseRaceRequest(body, this.options);
    // A page gone while its body was read or the tables loaded: its stream's `close` has fired already, so the listener
    // below would never hear it, and the race would run to its end (or the race timeout) for nobody, holding a race slot.
    if (res.destroyed || req.socket.destroyed) return;
    if (this.closed) throw new WireError('server_shutting_down');
    if (this.races.size >= this.options.maxRaces) {
      const n = this.options.maxRaces;
      throw new WireError('too_many_races', `${n} demo race${n === 1 ? ' is' : 's are'} already running; try again when one ends.`);
    }
    if (!this.url) throw new Error('the demo service does not know the server address yet');
    const designs = servedDesigns(this.webSockets());
    const settings = speedSettings(r.speed, services.router.opts.deployments[0]?.settings);
    // A race that cannot end before its deadline is refused now, not failed there: the Codex run at 65 tokens/s with
    // its lanes one after another (>= 140 s a lane) ran for the default limit's ten minutes, its last lane failed.
    const least = leastRaceMs(r, settings, designs.length);
    const limitMs = this.options.raceTimeoutMs;
    if (least > limitMs) {
      const s = (ms: number) => (ms / 1000).toLocaleString('en', { maximumFractionDigits: 1 });
      throw new WireError(
        'invalid_value',
        `This race would take at least ${s(least)} s (${r.workload.label} at ${r.speed === 'instant' ? 'instant speed' : `${r.speed} tokens/s`}${r.toolTime === 'recorded' ? ', tools as recorded' : ''}${r.order === 'one-by-one' ? `, ${designs.length} lanes one after another` : ''}), past the race limit of ${s(limitMs)} s (--demo-race-timeout-ms): choose ${['a faster model speed', ...(r.order === 'one-by-one' ? ['lanes at the same time'] : []), ...(r.toolTime === 'recorded' ? ['no tool time'] : [])].join(' or ')}.`,
        'speed',
      );
    }
    const id = `r${randomBytes(5).toString('hex')}`;
    // The key as the server read it: a header it accepted (`bearer KEY`, any case) gave the lanes no key, and each
    // lane then failed with 401 in a race that had been accepted.
    const apiKey = bearerKey(req.headers.authorization) ?? undefined;
    const race = new Race(
      {
        id,
        designs,
        workload: r.workload,
        speed: r.speed,
        settings,
        toolTime: r.toolTime,
        step: r.step,
        order: r.order,
        url: this.url,
        apiKey,
        timeoutMs: this.options.raceTimeoutMs,
        aliveMs: this.options.aliveMs,
      },
      services,
      this.models,
      (m) => send(m),
    );
    const limit = services.limits.maxSendBufferBytes;
    // Frames made in one turn of the event loop go out in one write.
    let pending: string[] = [];
    let flushing: NodeJS.Immediate | null = null;
    const flush = (): void => {
      flushing = null;
      const text = pending.join('');
      pending = [];
      if (res.writableEnded || res.destroyed || text === '') return;
      res.write(text);
      if (res.writableLength > limit) {
        race.stop('the page stopped reading its stream');
        res.destroy();
      }
    };
    const send = (m: DemoMessage): void => {
      pending.push(`event: ${m.type}\ndata: ${JSON.stringify(m)}\n\n`);
      flushing ??= setImmediate(flush);
    };
    this.races.set(id, race);
    this.owners.set(id, owner);
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });
    res.on('close', () => race.stop('the page closed the race stream'));
    // A page that reads nothing while the kernel's buffers are full: dropped once nothing has left for the stall
    // timeout, as on /v1. The send-buffer check above runs only as the race writes, so a page that stopped reading
    // near the race's end kept its socket, and up to the send-buffer limit of unsent stream, for as long as it liked.
    watchStall(res, services.limits.sendStallTimeoutMs, (pending) =>
      services.log.info({ code: 'send_stalled', race: id, pending, stall_ms: services.limits.sendStallTimeoutMs }, 'demo race stream left unsent with nothing leaving; dropped the page'),
    );
    // A sign of life between messages (a comment, which the page reads as nothing but that): without it a page whose
    // server was suspended mid-race (Ctrl-Z in its terminal) or whose network went away without a close showed every
    // lane running for as long as it stayed open.
    const alive = setInterval(() => {
      if (res.writableEnded || res.destroyed) return;
      pending.push(': alive\n\n');
      flushing ??= setImmediate(flush);
    }, this.options.aliveMs);
    const done = race.run();
    this.running.add(done);
    try {
      const status = await done;
      send({ type: 'race.done', race_id: id, status });
      if (flushing) clearImmediate(flushing);
      flush();
      if (!res.destroyed) res.end();
    } finally {
      clearInterval(alive);
      this.running.delete(done);
      this.races.delete(id);
      this.owners.delete(id);
    }
  }
}

/** Whether an `If-None-Match` header names this entity tag (weak comparison, as RFC 9110 §13.1.2 asks), or is `*`. */
function matchesEtag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag.replace(/^W\//, '') === etag;
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-cache' });
  res.end(text);
}
