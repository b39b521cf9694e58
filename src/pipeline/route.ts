/**
 * Model resolution and routing: an alias table maps the requested model name
 * to a deployment (its simulated speed settings) and a consistent-hash ring
 * picks the replica, keyed by `prompt_cache_key` or the user so a
 * conversation keeps landing where its prefix cache is warm.
 *
 * Any model name is served (Codex and other clients send their own slugs):
 * unknown names route to the default deployment. The optional injected
 * latency per remote hop (default 0) stands for the router → inference hop
 * of a real deployment; it is an explicit knob, not hidden cost. So is the
 * optional per-model-call remote call (`callHops`, default 0), which every
 * design pays before each model call.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../model/clock.js';
import type { ModelSettings } from '../model/types.js';
import type { RunMetrics } from './metrics.js';

export interface Deployment {
  name: string;
  aliases: string[];
  settings: ModelSettings;
}

export interface RouteDecision {
  requested: string;
  model: string;
  replica: string;
  settings: ModelSettings;
}

export interface RouterOptions {
  deployments: Deployment[];
  replicas: number;
  /** Injected latency per remote hop, ms (default 0). */
  hopLatencyMs: number;
  /** Remote hops on the path to the model (gateway → router → engine); `llr serve --hops`, default 2 (set in server.ts). */
  hops: number;
  /**
   * Names the table does not hold are looked up here before falling back to
   * the default deployment: deployments that come and go while the server
   * runs (the teaching demo gives each race lane its own, see src/demo/models.ts).
   */
  resolve?: (name: string) => Deployment | undefined;
  /**
   * Remote calls paid before every model call by every design (a hosted
   * safety classifier on the new input, for instance), and the latency of
   * each; default 0 and 0 ms. Unlike `hops` no design skips them: a
   * continuation still sends its new items through them.
   */
  callHops?: number;
  callHopLatencyMs?: number;
}

export class Router {
  private readonly table = new Map<string, Deployment>();
  private readonly ring: Array<{ point: number; replica: string }> = [];

  constructor(readonly opts: RouterOptions, private readonly clock: Clock) {
    for (const d of opts.deployments) {
      this.table.set(d.name, d);
      for (const a of d.aliases) this.table.set(a, d);
    }
    for (let r = 0; r < opts.replicas; r++) {
      for (let v = 0; v < 32; v++) this.ring.push({ point: hash32(`replica-${r}#${v}`), replica: `replica-${r}` });
    }
    this.ring.sort((a, b) => a.point - b.point);
  }

  /** Resolve and route; pays the injected hop latency. */
  async route(model: string, affinityKey: string, metrics: RunMetrics, signal?: AbortSignal): Promise<RouteDecision> {
    const decision = metrics.time('route', () => {
      metrics.count('route_full');
      const dep = this.table.get(model.toLowerCase()) ?? this.opts.resolve?.(model) ?? this.opts.deployments[0];
      if (!dep) throw new Error('router has no deployments');
      return { requested: model, model: dep.name, replica: this.pick(affinityKey), settings: dep.settings };
    });
    await this.hop(metrics, signal);
    return decision;
  }

  /** The injected remote hop(s) on the way to the model; paid on every model-bound request. */
  async hop(metrics: RunMetrics, signal?: AbortSignal, hops = this.opts.hops): Promise<void> {
    if (this.opts.hopLatencyMs <= 0 || hops <= 0) return;
    await metrics.timeAsync('hop', async () => {
      for (let i = 0; i < hops; i++) {
        metrics.count('remote_hops');
        await this.clock.sleep(this.opts.hopLatencyMs, signal);
      }
    });
  }

  /** The per-model-call remote calls (`callHops`), timed as a `hop` span. */
  async callHop(metrics: RunMetrics, signal?: AbortSignal): Promise<void> {
    const ms = this.opts.callHopLatencyMs ?? 0;
    const n = this.opts.callHops ?? 0;
    if (ms <= 0 || n <= 0) return;
    await metrics.timeAsync('hop', async () => {
      for (let i = 0; i < n; i++) {
        metrics.count('remote_hops');
        await this.clock.sleep(ms, signal);
      }
    });
  }

  private pick(key: string): string {
    const h = hash32(key);
    let lo = 0;
    let hi = this.ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.ring[mid]?.point ?? 0) < h) lo = mid + 1;
      else hi = mid;
    }
    return (this.ring[lo % this.ring.length] ?? this.ring[0])?.replica ?? 'replica-0';
  }
}

function hash32(s: string): number {
  return createHash('sha1').update(s).digest().readUInt32BE(0);
}
