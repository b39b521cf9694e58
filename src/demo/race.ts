/**
 * One demo race: the same workload run once per design, concurrently, each
 * lane on its own connection with its own client and its own lane model
 * (models.ts), all started at the same instant after every lane connected
 * (or, on request, one after another: each lane's clock starts at its own
 * start).
 *
 * The race owns its lanes' deployments, the step gate (in step mode each lane
 * may start model call k only after the presenter pressed "next" k times)
 * and the race deadline. It ends exactly once: every lane settled, the
 * server's deferred post-inference work pending then done (so the records
 * carry their billing and persist spans; work other clients' runs defer
 * later is not waited for, nor anything once the race is stopped), the
 * final records and each lane's figures sent. Stopping it (the page went away, the deadline, shutdown) closes the
 * lanes' connections, which cancels their runs on the server (the HTTP
 * lane's client drops its request in flight and sends no other); a lane
 * model's next call, should one still come, answers in one line at once.
 */
import type { Services } from '../engine/services.js';
import type { ModelPolicy } from '../model/policies.js';
import type { ModelSettings } from '../model/types.js';
import type { DemoDesign } from './designs.js';
import { Lane, round, type StepGate } from './lane.js';
import type { DemoMessage, LaneDoneMessage } from './messages.js';
import { DEMO_MODEL_PREFIX, type DemoModels } from './models.js';
import { warmUpWorkload, type DemoWorkload } from './workloads.js';

export interface RaceOptions {
  id: string;
  designs: readonly DemoDesign[];
  workload: DemoWorkload;
  speed: string;
  settings: ModelSettings;
  toolTime: 'none' | 'recorded';
  step: boolean;
  /** Lanes start together (the default), or each after the previous one ended. */
  order: 'together' | 'one-by-one';
  url: string;
  apiKey: string | undefined;
  timeoutMs: number;
  /** How often the race's stream carries a sign of life (DemoOptions.aliveMs); told to the page in the race message. */
  aliveMs: number;
}

const INSTANT: ModelSettings = { tokensPerSecond: Infinity, ttftBaseMs: 0, prefillTokensPerSecond: Infinity };
const MODEL_STAGES = new Set(['prefill', 'decode', 'paused']);
const STOPPED_TEXT = '(the demo race was stopped)';

export class Race implements StepGate {
  private readonly abort = new AbortController();
  private allowed: number;
  private readonly waiters: Array<{ design: string; index: number; resolve: () => void; reject: (e: unknown) => void }> = [];
  private readonly lanes: Lane[] = [];
  private readonly releases: Array<() => void> = [];
  private readonly settings: ModelSettings[] = [];
  private stopReason: string | null = null;

  constructor(
    readonly o: RaceOptions,
    private readonly services: Services,
    private readonly models: DemoModels,
    private readonly emit: (m: DemoMessage) => void,
  ) {
    this.allowed = o.step ? 1 : Infinity;
  }

  /** Stop the race (page gone, deadline, shutdown); idempotent. */
  stop(reason: string): void {
    if (this.abort.signal.aborted) return;
    this.stopReason = reason;
    for (const s of this.settings) Object.assign(s, INSTANT);
    this.abort.abort(new Error(reason));
    for (const w of this.waiters.splice(0)) w.reject(new Error(reason));
  }

  /** Step mode: let every lane start one more model call. */
  step(): number {
    if (!this.o.step || this.abort.signal.aborted) return this.allowed;
    this.allowed++;
    const still = this.waiters.filter((w) => w.index >= this.allowed);
    for (const w of this.waiters) if (w.index < this.allowed) w.resolve();
    this.waiters.splice(0, this.waiters.length, ...still);
    this.emitStep();
    return this.allowed;
  }

  blocks(index: number): boolean {
    return index >= this.allowed;
  }

  wait(design: string, index: number, signal: AbortSignal): Promise<void> | null {
    if (index < this.allowed) return null;
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      this.waiters.push({ design, index, resolve, reject });
      this.emitStep();
    });
  }

  /** Run the race to its end; never rejects. */
  async run(): Promise<'done' | 'failed' | 'stopped'> {
    const o = this.o;
    const timer = setTimeout(() => this.stop(`the race did not finish within ${o.timeoutMs} ms`), o.timeoutMs);
    try {
      const warmUp = warmUpWorkload();
      const warm = this.models.register(`${DEMO_MODEL_PREFIX}${o.id}-warmup`, INSTANT, warmUp.policy());
      this.releases.push(warm.release);
      for (const d of o.designs) {
        const settings = { ...o.settings };
        const reg = this.models.register(`${DEMO_MODEL_PREFIX}${o.id}-${d.id}`, settings, this.stoppable(o.workload.policy()));
        this.releases.push(reg.release);
        // The registry keeps its own copy; `stop` speeds up this one through the router's decision object.
        this.settings.push(this.models.resolve(reg.model)!.settings);
        this.lanes.push(
          new Lane({
            design: d,
            model: reg.model,
            url: o.url,
            apiKey: o.apiKey,
            workload: o.workload,
            toolTime: o.toolTime,
            gate: this,
            records: this.services.records,
            signal: this.abort.signal,
            emit: this.emit,
          }),
        );
      }
      this.emit({
        type: 'race',
        race_id: o.id,
        designs: o.designs.map((d, i) => ({ id: d.id, label: d.label, model: this.lanes[i]!.model, continues_with: d.continues_with, keeps: d.keeps })),
        workload: { label: o.workload.label, tools_note: o.workload.tools_note, model_calls: o.workload.model_calls },
        speed: o.speed,
        tool_time: o.toolTime,
        step: o.step,
        order: o.order,
        alive_ms: o.aliveMs,
      });
      const connected = await Promise.allSettled(this.lanes.map((l) => l.connect(warm.model, warmUp)));
      // The warm-ups' deferred post-inference work is done before the clock starts: the work pending now (theirs is, as
      // each warm-up's run defers it before its terminal event goes out), not whatever other clients' runs defer
      // meanwhile, and no longer than the race lives (a page gone, the deadline, shutdown). A flush until nothing at all
      // was pending never ended under a steady load, and nothing cut it short: the race held its slot for good.
      await this.postWorkSettled();
      const runLane = async (lane: Lane, i: number): Promise<LaneDoneMessage | null> => {
        const c = connected[i]!;
        if (c.status === 'rejected') return this.fail(lane, `cannot connect: ${(c.reason as Error).message}`);
        if (this.abort.signal.aborted) return this.fail(lane, this.stopReason ?? 'stopped');
        this.emit({ type: 'lane.state', design: lane.id, state: 'running' });
        try {
          const done = await lane.run(performance.now());
          // Stopped, a lane whose run resolved anyway (its last response ended as the stop came, or a call answered the
          // model's one-line stop) completed a run, but not the workload, and its figures would pass for the lane's result.
          return this.stopReason ? this.fail(lane, this.stopReason) : done;
        } catch (err) {
          return this.fail(lane, this.stopReason ?? (err as Error).message);
        } finally {
          await lane.close();
        }
      };
      // A lane's post-inference work (billing, persist spans in its records), as at the start: what is pending now; then
      // its figures, then its state: a lane shown done can be compared at once.
      const report = async (res: LaneDoneMessage | null, lane: Lane): Promise<void> => {
        await this.postWorkSettled();
        lane.emitRecords(true);
        if (!res) return;
        this.emit(finish(res, lane));
        this.emit({ type: 'lane.state', design: lane.id, state: 'done' });
      };
      const results: Array<LaneDoneMessage | null> = [];
      if (o.order === 'together') {
        // Each lane is said done as it ends too: a lane that had ended stayed `running` until the last one had, and the
        // page's time scale, which holds a running lane's time so far, overshot the longest lane (atk89 F2).
        await Promise.all(
          this.lanes.map(async (lane, i) => {
            const res = await runLane(lane, i);
            results[i] = res;
            await report(res, lane);
          }),
        );
      } else {
        // One after another: each lane has the server to itself, so an HTTP
        // lane's re-tokenising cannot hold up the others (it would with an
        // instant model, where every lane is pure CPU on one event loop).
        // Each lane is reported done as it ends: reported only once the last
        // had run, a finished lane was shown running for the whole race, and
        // the page's one time scale, which holds a running lane's time so far,
        // grew to the race's length (every lane drawn in its first quarter;
        // outside attack atk89 F2). Its post-inference work is done before the
        // next lane's clock starts.
        for (const [i, lane] of this.lanes.entries()) {
          const res = await runLane(lane, i);
          results.push(res);
          await report(res, lane);
        }
      }
      const failed = results.some((r) => r === null);
      return this.stopReason ? 'stopped' : failed ? 'failed' : 'done';
    } catch (err) {
      this.services.log.error({ err, race: o.id }, 'demo race failed');
      for (const lane of this.lanes) this.emit({ type: 'lane.state', design: lane.id, state: 'failed', error: 'the demo race failed on the server' });
      return 'failed';
    } finally {
      clearTimeout(timer);
      this.stop('the race ended');
      await Promise.all(this.lanes.map((l) => l.close()));
      for (const l of this.lanes) l.forget();
      for (const r of this.releases) r();
    }
  }

  /**
   * The server's deferred post-inference work pending now (`PostWorkTracker.settled`: a snapshot, not work deferred
   * later), or until the race is stopped, whichever comes first; at once if it has been stopped already.
   */
  private postWorkSettled(): Promise<void> {
    const signal = this.abort.signal;
    if (signal.aborted) return Promise.resolve();
    let onAbort!: () => void;
    const stopped = new Promise<void>((resolve) => {
      onAbort = resolve;
      signal.addEventListener('abort', onAbort, { once: true });
    });
    return Promise.race([this.services.postWork.settled(), stopped]).finally(() => signal.removeEventListener('abort', onAbort));
  }

  /** Once the race is stopped, the lane's next model call answers in one line, ending its run. */
  private stoppable(policy: ModelPolicy): ModelPolicy {
    return {
      name: policy.name,
      plan: (req, rng) => (this.abort.signal.aborted ? { items: [{ type: 'message', text: STOPPED_TEXT }] } : policy.plan(req, rng)),
    };
  }

  private fail(lane: Lane, error: string): null {
    this.emit({ type: 'lane.state', design: lane.id, state: 'failed', error });
    return null;
  }

  private emitStep(): void {
    this.emit({ type: 'step', allowed: this.allowed, waiting: [...new Set(this.waiters.map((w) => w.design))] });
  }
}

/** The lane's figures, completed from the server's final records. */
function finish(res: LaneDoneMessage, lane: Lane): LaneDoneMessage {
  const stage: Record<string, number> = {};
  let model = 0;
  for (const rec of lane.records()) {
    for (const [k, v] of Object.entries(rec.totals)) {
      if (k === 'prefill' || k === 'decode') model += v;
      if (!MODEL_STAGES.has(k)) stage[k] = round((stage[k] ?? 0) + v);
    }
  }
  return { ...res, model_ms: round(model), api_overhead_ms: round(res.e2e_ms - model - res.tool_ms), stage_ms: stage, ...lane.bytes() };
}
