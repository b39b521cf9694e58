/**
 * Full pre-inference work for a new response: validate the request, render
 * the whole context, scan it, and route the model. Every design does this for
 * a fresh request; the long-lived design does it once per agent run, the ws
 * design only when its connection cache misses, and the HTTP baseline on
 * every request.
 */
import type { CreateParams } from '../protocol/events.js';
import type { InputItem } from '../protocol/objects.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import { renderFull, type RenderedContext } from '../pipeline/render.js';
import type { RouteDecision } from '../pipeline/route.js';
import { safetyScan } from '../pipeline/safety.js';
import { validateItems, validateTools } from '../pipeline/validate.js';
import type { Services } from '../engine/services.js';

/** Validate, render and scan `items` as one whole context. */
export function checkAndRender(params: CreateParams, items: readonly InputItem[], metrics: RunMetrics): RenderedContext {
  metrics.time('validate', () => {
    metrics.count('validate_full');
    validateTools(params.tools, metrics);
    validateItems(items, { callIds: new Set() }, metrics);
  });
  const context = renderFull(params.instructions, params.tools, items, metrics);
  metrics.time('safety', () => {
    metrics.count('safety_full');
    safetyScan(items, metrics, 'input', params.instructions);
  });
  return context;
}

export function affinityKey(params: CreateParams, owner: string | null): string {
  return params.prompt_cache_key ?? params.user ?? owner ?? 'anonymous';
}

export async function prepareFull(
  params: CreateParams,
  items: readonly InputItem[],
  services: Services,
  metrics: RunMetrics,
  owner: string | null,
): Promise<{ context: RenderedContext; route: RouteDecision }> {
  const context = checkAndRender(params, items, metrics);
  const route = await services.router.route(params.model, affinityKey(params, owner), metrics);
  return { context, route };
}
