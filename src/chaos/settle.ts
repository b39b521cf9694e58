/**
 * After the clients are gone, the server must have wound everything down:
 * every run record ended, billed exactly once (its `billing_records`
 * counter, incremented with each ledger entry), post-inference work done,
 * no HTTP request in flight. Also the server under test as a restartable
 * target, so one crash is recorded with its input and the fuzzing goes on.
 *
 * Run records are read over `GET /llr/runs[/{id}]`; nothing here needs the
 * server's internals. The waits poll the server with a bound: there is no
 * event a client could wait on for work the server does after a close.
 */
import { request } from 'node:http';
import type { Tally } from './oracle.js';
import type { Scale } from './mutate.js';
import { HealthWatch, ServerProc, probeHealth, type ExitInfo, type ServerProcOptions } from './proc.js';

type Obj = Record<string, unknown>;

/** What both fuzzers (HTTP, WebSocket) take: how many inputs, from which seed, and the bounds their oracle checks. */
export interface FuzzOptions {
  inputs: number;
  seed: number;
  scale: Scale;
  /** Bound on any single answer, ms: longer is a hang. */
  hangMs: number;
  /** Probe /health (and liveness) and check the batch's run records every this many inputs. */
  batch: number;
  /** Bound on a run record ending after its client saw the end, ms. */
  settleMs: number;
}

export function httpJson(url: string, path: string, timeoutMs = 10_000): Promise<{ status: number; json: Obj | null }> {
  return new Promise((resolve) => {
    const req = request(`${url}${path}`, { agent: false, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let json: Obj | null = null;
        try {
          json = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Obj;
        } catch {
          json = null;
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
      res.on('error', () => resolve({ status: 0, json: null }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, json: null }));
    req.end();
  });
}

const ENDED = new Set(['completed', 'failed', 'incomplete', 'cancelled']);
const POLL_MS = 25;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pool<T>(items: readonly T[], width: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!);
  }));
}

/** Each response id: its record ends and shows exactly one billing entry, within `boundMs`. */
export async function checkRecords(url: string, ids: Iterable<string>, tally: Tally, boundMs: number): Promise<Map<string, string>> {
  const unique = [...new Set(ids)];
  const statuses = new Map<string, string>();
  let missing = 0;
  await pool(unique, 8, async (id) => {
    const deadline = performance.now() + boundMs;
    let rec: Obj | null = null;
    for (;;) {
      const r = await httpJson(url, `/llr/runs/${encodeURIComponent(id)}`);
      rec = r.json;
      const done = rec && ENDED.has(String(rec['status'])) && (rec['post_deferred'] !== true || rec['post_done'] === true);
      if (done || performance.now() > deadline) break;
      await sleep(POLL_MS);
    }
    if (rec && typeof rec['status'] === 'string') statuses.set(id, rec['status']);
    // Every run records itself when it starts, so a missing record was evicted from the bounded ring: nothing to judge.
    if (!rec || typeof rec['status'] !== 'string') return void missing++;
    if (!ENDED.has(String(rec['status']))) return tally.fail('unsettled', `response ${id}`, `run record still '${String(rec['status'])}' ${boundMs} ms after its client finished`);
    if (rec['post_deferred'] === true && rec['post_done'] !== true) return tally.fail('unsettled', `response ${id}`, 'post-inference work never finished');
    const billed = (rec['counters'] as Obj | undefined)?.['billing_records'];
    if (billed !== 1) tally.fail('billing', `response ${id}`, `billing_records = ${String(billed)} (status ${String(rec['status'])})`);
  });
  if (missing) tally.notes.push(`${missing} run records no longer kept by the server (bounded ring), not judged`);
  return statuses;
}

/** `GET /llr/runs` page size the harness asks for (the server's most). */
const RUNS_PAGE = 1000;
/** Bound on pages read in one listing (the harness starts its servers with a ring of at most this × `RUNS_PAGE` records). */
const MAX_RUNS_PAGES = 1000;

/**
 * Every run record the server keeps, all pages of `GET /llr/runs` followed by
 * their `after` cursor (the server answers at most 1,000 per page). Null if a
 * page could not be read (server gone or not answering JSON).
 */
export async function listRuns(url: string): Promise<Obj[] | null> {
  const all: Obj[] = [];
  let after: string | null = null;
  for (let page = 0; page < MAX_RUNS_PAGES; page++) {
    const r = await httpJson(url, `/llr/runs?limit=${RUNS_PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    const data = r.json?.['data'];
    if (r.status !== 200 || !Array.isArray(data)) return null;
    all.push(...(data as Obj[]));
    const last = r.json?.['last_id'];
    if (r.json?.['has_more'] !== true || typeof last !== 'string') return all;
    after = last;
  }
  return all;
}

/** Every run record of the server ended and no HTTP request in flight, within `boundMs`. */
export async function checkQuiescent(url: string, tally: Tally, boundMs: number): Promise<void> {
  const deadline = performance.now() + boundMs;
  let open: Obj[] = [];
  let health: Obj | null = null;
  for (;;) {
    const data = (await listRuns(url)) ?? [];
    open = data.filter((r) => !ENDED.has(String(r['status'])));
    health = (await httpJson(url, '/health')).json;
    const busy = Number(health?.['http_in_flight'] ?? 0) + Number(health?.['post_work_pending'] ?? 0);
    if ((open.length === 0 && busy === 0) || performance.now() > deadline) break;
    await sleep(POLL_MS);
  }
  for (const r of open.slice(0, 50)) {
    tally.fail('unsettled', `run ${String(r['response_id'])} (${String(r['protocol'])})`, `record '${String(r['status'])}' after every client closed`);
  }
  if (Number(health?.['http_in_flight'] ?? 0) !== 0) tally.fail('unsettled', '/health', `http_in_flight = ${String(health?.['http_in_flight'])} after every client closed`);
}

/** The server under test; restarted after a crash so the run goes on. */
export class Target {
  /** How long an unanswered /health means the server froze, ms. */
  freezeMs = 3_000;
  /** The responsiveness bound for /health, ms. */
  healthDeadlineMs = 250;
  /** What the scenario sent last: slow /health answers are charged to it. */
  lastInput = '';
  private watch: HealthWatch | null = null;
  private tally: Tally | null = null;

  constructor(
    public server: ServerProc,
    private readonly opts: ServerProcOptions,
  ) {}

  static async start(opts: ServerProcOptions): Promise<Target> {
    return new Target(await ServerProc.start(opts), opts);
  }

  /**
   * Watch /health (deadline `healthDeadlineMs`) from another process for as long as this
   * target runs. `strict`: a slow answer is a failure charged to the input in
   * flight (fuzzing sends one input at a time, so one input blocked the
   * server); otherwise slow answers under deliberate load are counted in a note.
   */
  watchHealth(tally: Tally, strict: boolean): void {
    this.tally = tally;
    this.strict = strict;
    this.watch?.stop();
    this.watch = new HealthWatch(
      this.url,
      (ms) => {
        if (this.strict) tally.fail('health', this.lastInput || '(between inputs)', `/health took ${ms} ms (deadline ${this.healthDeadlineMs} ms)`);
        else this.slowUnderLoad++;
      },
      this.healthDeadlineMs,
    );
  }

  /** /health answers over the deadline seen while not strict. */
  slowUnderLoad = 0;
  private strict = true;

  private async restart(): Promise<void> {
    this.server = await ServerProc.start(this.opts);
    if (this.tally) this.watchHealth(this.tally, this.strict);
  }

  get url(): string {
    return this.server.url;
  }

  /**
   * Is the server alive and responsive? A slow /health is a `health` failure;
   * a server that does not answer for `freezeMs` is killed and restarted (a
   * `hang` of the whole server); one that died is a `crash`, both recorded
   * with the input last sent. Returns true when the server was replaced.
   */
  checkAlive(tally: Tally, lastInput: string, opts: { livenessOnly?: boolean } = {}): Promise<boolean> {
    // One check at a time: concurrent checks of a dead server would each restart it.
    if (this.checking) return this.checking.then(() => false);
    this.checking = this.check(tally, lastInput, opts).finally(() => (this.checking = null));
    return this.checking;
  }

  private checking: Promise<boolean> | null = null;

  private async check(tally: Tally, lastInput: string, opts: { livenessOnly?: boolean }): Promise<boolean> {
    // Under deliberate load a slow answer is expected; only a much longer silence is a freeze.
    const freezeMs = opts.livenessOnly ? Math.max(this.freezeMs * 20, 60_000) : this.freezeMs;
    if (this.server.alive) {
      // After a batch the harness is idle, so its own probe measures the server; under load only liveness is judged here.
      const h = await probeHealth(this.url, opts.livenessOnly ? freezeMs : this.healthDeadlineMs, freezeMs);
      if (h.ok) return false;
      const deadline = performance.now() + freezeMs;
      let answered = false;
      while (this.server.alive && performance.now() < deadline) {
        const left = Math.max(deadline - performance.now(), 1);
        const again = await Promise.race([probeHealth(this.url, left, left), this.server.exited.then(() => null)]);
        if (again?.ok) {
          answered = true;
          break;
        }
        if (again) await sleep(100);
      }
      if (this.server.alive && answered) {
        tally.fail('health', lastInput, `/health after the batch took ${h.ms.toFixed(0)} ms (deadline ${this.healthDeadlineMs} ms)`);
        return false;
      }
      if (this.server.alive) {
        tally.fail('hang', lastInput, `the server froze: /health unanswered for ${(freezeMs / 1000).toFixed(0)} s; killed and restarted`);
        this.server.signal('SIGKILL');
        await this.server.exited;
        await this.restart();
        return true;
      }
    }
    const exit = await this.server.exited;
    tally.fail('crash', lastInput, `exit code ${exit.code} signal ${exit.signal}; stderr: ${this.server.stderr.slice(-1200)}`);
    await this.restart();
    return true;
  }

  /** The slowest /health the watch saw, ms. */
  get healthMaxMs(): number {
    return this.watch?.maxMs ?? 0;
  }

  stop(): Promise<ExitInfo> {
    this.watch?.stop();
    return this.server.stop();
  }
}
