/**
 * The HTTP + SSE baseline: every request is independent and nothing
 * survives between them but what the database holds. A continuation loads
 * its `previous_response_id` chain from the store and re-validates,
 * re-renders, re-scans and re-routes the whole context — all the work, every
 * time, and the counters say so. Post-inference work runs inline, so a
 * stored response is in the database before its terminal event is sent.
 */
import type { CreateParams } from '../protocol/events.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import type { RunPlan } from '../engine/run.js';
import type { Services } from '../engine/services.js';
import { prepareFromStore } from './hydrate.js';
import type { ModePolicy, SessionInfo } from './session.js';

/** The baseline as a policy: one HTTP request is a one-shot session (modes/host.ts) that plans with `httpPlan`. */
export function httpPolicy(services: Services, info: SessionInfo): ModePolicy {
  return {
    protocol: 'http',
    appendable: false,
    plan: (params, metrics, _lane, signal) => httpPlan(params, services, metrics, info.owner, info.charge, signal),
  };
}

export async function httpPlan(
  params: CreateParams,
  services: Services,
  metrics: RunMetrics,
  owner: string | null,
  charge?: (bytes: number) => void,
  signal?: AbortSignal,
): Promise<RunPlan> {
  const { context, route, input } = await prepareFromStore(params, services, metrics, owner, { charge, signal });
  return {
    protocol: 'http',
    params,
    context,
    route,
    input,
    owner,
    connection: null,
    metrics,
    onToolCalls: 'end',
    postInference: 'inline',
  };
}
