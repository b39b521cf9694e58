/**
 * The fourth design, `long-lived-http`: the long-lived Response over plain
 * HTTP. Is the prototype's gain the live state or the socket? This design
 * keeps the state and drops the socket: `POST /v1/responses?protocol=long-lived`
 * (`stream:true`) opens one SSE stream for the whole run, each client tool
 * call pauses it with the same `response.done` as on the WebSocket, and
 * `POST /v1/responses/{id}/append` resumes the same stream.
 *
 * The planning is the WebSocket long-lived policy's (`longLivedPolicy`): the
 * same full checks once per run, the same incremental checks per append
 * (`ResponseRun.append`), post-inference work once at the end. What this file
 * adds is what a socket gave for free: finding the run again by id. `LiveRuns`
 * keeps the runs open over HTTP in a map, bounded by `maxLiveHttpRuns`
 * (429 `too_many_live_runs` past it), each entry removed when its run ends;
 * only the key that created a run may append to or cancel it (another key
 * gets the same 404 as a missing run). Closing the stream, cancelling and
 * shutdown are the transport's, through the run itself.
 */
import { WireError } from '../protocol/errors.js';
import type { CreateParams } from '../protocol/events.js';
import type { InputItem, Response } from '../protocol/objects.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import { ResponseRun, type EventSink, type RunHooks, type RunPlan } from '../engine/run.js';
import type { Services } from '../engine/services.js';
import type { ModePolicy } from './session.js';
import { longLivedPolicy } from './long-lived.js';

export function longLivedHttpPolicy(services: Services, owner: string | null): ModePolicy {
  // No connection: the run outlives none (its record says `connection: null`, as HTTP's do).
  const ws = longLivedPolicy(services, { connection: '', owner, authSpan: null });
  return {
    protocol: 'long-lived-http',
    appendable: true,
    async plan(params, metrics) {
      if (!params.stream) {
        throw new WireError(
          'invalid_value',
          "The long-lived protocol over HTTP streams the whole run on one SSE stream: set 'stream': true.",
          'stream',
        );
      }
      return { ...(await ws.plan(params, metrics)), protocol: 'long-lived-http', connection: null };
    },
  };
}

interface Live {
  run: ResponseRun;
  owner: string | null;
}

/** The long-lived runs open over HTTP, by response id. */
export class LiveRuns {
  private readonly live = new Map<string, Live>();
  /** Creates admitted and still being planned: they count against the cap. */
  private planning = 0;
  private closed = false;

  constructor(private readonly services: Services) {}

  get size(): number {
    return this.live.size;
  }

  /**
   * Plan a create and start its run with `sink` as its stream. The cap is
   * checked before planning (a refused create costs no tokenizing) and
   * covers creates being planned; a create planned after shutdown began
   * never starts.
   */
  async start(params: CreateParams, owner: string | null, metrics: RunMetrics, sink: (plan: RunPlan) => EventSink, hooks: RunHooks = {}): Promise<ResponseRun> {
    if (this.closed) throw new WireError('server_shutting_down');
    const cap = this.services.limits.maxLiveHttpRuns;
    if (this.live.size + this.planning >= cap) {
      throw new WireError('too_many_live_runs', `At most ${cap} long-lived runs may be open over HTTP at once; try again when one ends.`);
    }
    this.planning++;
    let plan: RunPlan;
    try {
      plan = await longLivedHttpPolicy(this.services, owner).plan(params, metrics);
    } finally {
      this.planning--;
    }
    if (this.closed) throw new WireError('server_shutting_down');
    const run = new ResponseRun(plan, this.services, sink(plan), hooks);
    this.live.set(run.id, { run, owner });
    void run.done.finally(() => this.live.delete(run.id));
    return run;
  }

  /** The live run `id` created by `owner`; another key's run is reported exactly like a missing one. */
  private get(id: string, owner: string | null): ResponseRun {
    const entry = this.live.get(id);
    if (!entry || entry.owner !== owner) {
      throw new WireError('response_not_found', `No long-lived response '${id.slice(0, 100)}' is open over HTTP.`, 'response_id');
    }
    return entry.run;
  }

  /** Append tool outputs to a paused run: the WebSocket protocol's checks and errors. */
  async append(id: string, owner: string | null, input: InputItem[]): Promise<void> {
    const run = this.get(id, owner);
    if (!run.paused) throw new WireError('no_paused_response', `Response '${run.id}' is not paused; there is nothing to append to.`);
    await run.append(input);
  }

  /** End a run `cancelled`; resolves with its final Response once its terminal event was sent. */
  cancel(id: string, owner: string | null): Promise<Response> {
    const run = this.get(id, owner);
    run.stop('cancelled', 'cancelled_by_client');
    return run.done;
  }

  /** No run starts any more (those open are ended by the transport, like every HTTP run). */
  close(): void {
    this.closed = true;
  }
}
