/**
 * Full pre-inference work for a new response: validate the request, render
 * the whole context, scan it, and route the model. Every design does this for
 * a fresh request; the long-lived design does it once per agent run, the ws
 * design only when its connection cache misses (or a compaction item arrives),
 * and the HTTP baseline on every request.
 */
import type { CreateParams } from '../protocol/events.js';
import type { InputItem } from '../protocol/objects.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import { applyCompaction, hasCompaction } from '../pipeline/compaction.js';
import { renderFullAsync, type RenderedContext } from '../pipeline/render.js';
import type { RouteDecision } from '../pipeline/route.js';
import { safetyScanAsync } from '../pipeline/safety.js';
import { validateItemsAsync, validateToolsAsync } from '../pipeline/validate.js';
import type { Services } from '../engine/services.js';

/**
 * Validate, render and scan a whole context: `history` (items loaded from
 * earlier responses) then this request's `input`. Errors name the request's
 * params: `input[i]` for input, `previous_response_id` for history.
 */
export async function checkAndRender(
  params: Pick<CreateParams, 'instructions' | 'tools'> & Partial<Pick<CreateParams, 'text'>>,
  history: readonly InputItem[],
  input: readonly InputItem[],
  metrics: RunMetrics,
): Promise<RenderedContext> {
  // A compaction item replaces the history it summarises (pipeline/compaction.ts).
  if (hasCompaction(input)) {
    history = [];
    input = applyCompaction(input);
    metrics.count('compactions_applied');
  } else if (hasCompaction(history)) {
    history = applyCompaction(history, 'previous_response_id');
    metrics.count('compactions_applied');
  }
  // Each stage yields to the event loop on large inputs (model/cooperative.ts).
  await metrics.timeAsync('validate', async () => {
    metrics.count('validate_full');
    await validateToolsAsync(params.tools, metrics, params.text?.format);
    const known = await validateItemsAsync(history, { callIds: new Set() }, metrics, 'previous_response_id');
    await validateItemsAsync(input, { callIds: known }, metrics);
  });
  const context = await renderFullAsync(params.instructions, params.tools, history.length ? [...history, ...input] : input, metrics);
  await metrics.timeAsync('safety', async () => {
    metrics.count('safety_full');
    await safetyScanAsync(history, metrics, 'previous_response_id', params.instructions);
    await safetyScanAsync(input, metrics, 'input');
  });
  return context;
}

export function affinityKey(params: CreateParams, owner: string | null): string {
  return params.prompt_cache_key ?? params.user ?? owner ?? 'anonymous';
}

export async function prepareFull(
  params: CreateParams,
  history: readonly InputItem[],
  input: readonly InputItem[],
  services: Services,
  metrics: RunMetrics,
  owner: string | null,
): Promise<{ context: RenderedContext; route: RouteDecision }> {
  const context = await checkAndRender(params, history, input, metrics);
  const route = await services.router.route(params.model, affinityKey(params, owner), metrics);
  return { context, route };
}
