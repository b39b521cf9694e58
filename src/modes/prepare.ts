/**
 * Full pre-inference work for a new response: check the request (validate,
 * scan: `checkFull`, pipeline/checks.ts), render the whole context, and
 * route the model. Every design does this for
 * a fresh request; the long-lived design does it once per agent run, the ws
 * design only when its connection cache misses (or a compaction item arrives),
 * and the HTTP baseline on every request.
 */
import type { CreateParams } from '../protocol/events.js';
import type { InputItem } from '../protocol/objects.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import { expandCompaction, hasCompaction, nameInClientList } from '../pipeline/compaction.js';
import { renderFullAsync, type RenderedContext } from '../pipeline/render.js';
import type { RouteDecision } from '../pipeline/route.js';
import { checkFull } from '../pipeline/checks.js';
import { checkJsonMode } from '../pipeline/validate.js';
import type { Services } from '../engine/services.js';
import { checkContext, type ContextLimits } from '../engine/budget.js';

/**
 * Validate, scan and render a whole context: `history` (items loaded from
 * earlier responses) then this request's `input`. Errors name the request's
 * params: `input[i]` for input, `previous_response_id` for history. A
 * request the checks refuse costs no tokenizing. `requireToolOutputs`: a
 * client tool call left without its output is refused (ws, http creates;
 * pipeline/checks.ts). With `limits`, a context (after any compaction item is
 * applied) past the context budget is refused, `context_length_exceeded`,
 * before any check or tokenizing.
 */
export async function checkAndRender(
  params: Pick<CreateParams, 'instructions' | 'tools'> & Partial<Pick<CreateParams, 'text'>>,
  history: readonly InputItem[],
  input: readonly InputItem[],
  metrics: RunMetrics,
  requireToolOutputs = false,
  limits?: ContextLimits,
): Promise<RenderedContext> {
  // A compaction item replaces the history it summarises (pipeline/compaction.ts); the items it carries lead
  // the window, and the render tells what they come to (`RenderedContext.compacted`).
  let carried: number | undefined;
  // Errors name positions in the client's lists, not in the expanded one (`nameInClientList`).
  let rename = (err: unknown): unknown => err;
  if (hasCompaction(input)) {
    history = [];
    const expanded = expandCompaction(input);
    ({ items: input, carried } = expanded);
    rename = (err) => nameInClientList(err, expanded, 'input');
    metrics.count('compactions_applied');
  } else if (hasCompaction(history)) {
    const expanded = expandCompaction(history, 'previous_response_id');
    ({ items: history, carried } = expanded);
    rename = (err) => nameInClientList(err, expanded, 'previous_response_id');
    metrics.count('compactions_applied');
  }
  // The HTTP baseline's context is the stored chain it loads: without this, a chain that had grown past what
  // a ws or long-lived context may hold (3,000 steps of 100 KB outputs: 300 MB) was rendered whole by every
  // continuation, while WebSocket mode refused the same chain at 32 MiB (outside attack).
  if (limits) checkContext(null, history.length ? [...history, ...input] : input, limits);
  try {
    await checkFull({ instructions: params.instructions, tools: params.tools, text: params.text, requireToolOutputs }, history, input, metrics);
    checkJsonMode(params.text?.format, params.instructions, input, history);
  } catch (err) {
    throw rename(err);
  }
  return renderFullAsync(params.instructions, params.tools, history.length ? [...history, ...input] : input, metrics, carried);
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
  requireToolOutputs = false,
): Promise<{ context: RenderedContext; route: RouteDecision }> {
  const context = await checkAndRender(params, history, input, metrics, requireToolOutputs, services.limits);
  const route = await services.router.route(params.model, affinityKey(params, owner), metrics);
  return { context, route };
}
