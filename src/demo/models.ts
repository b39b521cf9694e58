/**
 * Lane models for the teaching demo: each lane of a race gets a deployment of
 * its own, named `llr-demo-<race>-<design>`, with its own speed and its own
 * simulated model (its own policy and prefix cache).
 *
 * Why per lane rather than a global setting: the simulated model's speed is
 * a deployment setting in the router, and two pages may race at different
 * speeds at once, so changing the one deployment would make races interfere.
 * A lane's model name carries everything: the router resolves it to the
 * lane's settings (`Router`'s `resolve` hook) and `wrap`'s model sends the
 * request to the lane's own SimulatedModel, which replays the race's
 * workload. Separate prefix caches keep the lanes fair: the lane that
 * prefilled a prompt first would otherwise hand its cached blocks to the
 * others. Requests for any other model name go to the server's own model
 * untouched.
 *
 * Bounded: at most `maxLanes` registered at once (the demo's race limit ×
 * designs); a lane is released when its race ends. Leaves out everything
 * about running races (race.ts).
 */
import type { Clock } from '../model/clock.js';
import type { ModelPolicy } from '../model/policies.js';
import { SimulatedModel } from '../model/simulated.js';
import type { Model, ModelEvent, ModelRequest, ModelSettings } from '../model/types.js';
import type { Deployment } from '../pipeline/route.js';

export const DEMO_MODEL_PREFIX = 'llr-demo-';

interface Lane {
  deployment: Deployment;
  model: SimulatedModel;
}

export class DemoModels {
  private readonly lanes = new Map<string, Lane>();

  constructor(
    private readonly clock: Clock,
    private readonly seed: number,
    readonly maxLanes: number,
  ) {}

  get size(): number {
    return this.lanes.size;
  }

  /** A lane's deployment; throws past `maxLanes` (the caller checks its race limit first). */
  register(name: string, settings: ModelSettings, policy: ModelPolicy): { model: string; release: () => void } {
    if (!name.startsWith(DEMO_MODEL_PREFIX)) throw new TypeError(`demo lane model names start with ${DEMO_MODEL_PREFIX}`);
    if (this.lanes.has(name)) throw new Error(`demo lane ${name} is already registered`);
    if (this.lanes.size >= this.maxLanes) throw new Error(`too many demo lanes at once (${this.maxLanes})`);
    this.lanes.set(name, {
      deployment: { name, aliases: [], settings: { ...settings } },
      model: new SimulatedModel({ policy, clock: this.clock, seed: this.seed }),
    });
    return { model: name, release: () => void this.lanes.delete(name) };
  }

  /** For the router: a registered lane's deployment. */
  resolve = (name: string): Deployment | undefined => this.lanes.get(name)?.deployment;

  /** The server's model, with lane requests sent to their lane's model. */
  wrap(base: Model): Model {
    return {
      sample: (req: ModelRequest, signal: AbortSignal): AsyncIterable<ModelEvent> => {
        const lane = req.model.startsWith(DEMO_MODEL_PREFIX) ? this.lanes.get(req.model) : undefined;
        return (lane?.model ?? base).sample(req, signal);
      },
    };
  }
}
