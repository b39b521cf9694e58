/**
 * Builds the Response object for a run from its create parameters: every
 * field of the wire's Response, `null` where unknown, because strict clients
 * and the Open Responses schema require the full set.
 *
 * Echoes what the client asked for, as the API does: the requested model
 * name (an alias still routes to its deployment, see pipeline/route.ts, but
 * the client sees its own name back) and each function tool with every field
 * filled with the API's default (`strict: true`, `description: null`,
 * `parameters: null` when omitted).
 */
import type { CreateParams } from '../protocol/events.js';
import { isFunctionTool, newId, type OutputItem, type Response, type Tool } from '../protocol/objects.js';
import { isFinishedItem } from '../protocol/event-json.js';
import { withFields } from '../protocol/fields.js';

/** `now`: wall-clock ms since the epoch, from the injected clock (`Clock.wallNow`). */
export function newResponse(params: CreateParams, now: number): Response {
  return {
    id: newId('resp'),
    object: 'response',
    created_at: Math.floor(now / 1000),
    completed_at: null,
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    model: params.model,
    previous_response_id: params.previous_response_id,
    instructions: params.instructions,
    output: [],
    tools: params.tools.map(echoTool),
    tool_choice: params.tool_choice,
    truncation: params.truncation ?? 'disabled',
    parallel_tool_calls: params.parallel_tool_calls,
    text: params.text ?? { format: { type: 'text' } },
    top_p: params.top_p ?? 1,
    presence_penalty: params.presence_penalty ?? 0,
    frequency_penalty: params.frequency_penalty ?? 0,
    top_logprobs: params.top_logprobs ?? 0,
    temperature: params.temperature ?? 1,
    reasoning: params.reasoning ?? { effort: null, summary: null },
    user: params.user,
    usage: null,
    max_output_tokens: params.max_output_tokens,
    max_tool_calls: params.max_tool_calls ?? null,
    store: params.store,
    background: params.background === true,
    // The API's Response says `priority` for a `fast` request (the OpenAPI spec's ServiceTier): `fast` opts in to it.
    // The tier utilized, as the API shows it: 'fast' is served as 'priority', 'auto' (and none) as the project's default tier.
    service_tier: params.service_tier === 'fast' ? 'priority' : params.service_tier === 'auto' || params.service_tier == null ? 'default' : params.service_tier,
    metadata: params.metadata,
    safety_identifier: params.safety_identifier,
    prompt_cache_key: params.prompt_cache_key,
    prompt_cache_retention: params.prompt_cache_retention ?? null,
    ...(params.prompt_cache_options && { prompt_cache_options: { ...params.prompt_cache_options } }),
    access_programs: null,
    conversation: null,
    prompt: null,
  };
}

/** A function tool as the API echoes it: every field, defaults filled in. Other tools as sent. */
function echoTool(t: Tool): Tool {
  if (!isFunctionTool(t)) return t;
  // The spread's copy, faster (`withFields`): the client's keys where it put them, the filled-in ones after.
  return withFields(t, {
    type: 'function' as const,
    name: t.name,
    description: t.description ?? null,
    parameters: t.parameters ?? null,
    strict: t.strict ?? true,
  });
}

/**
 * Per output list (a Response's own, which only grows): how many of its first
 * items are finished (`isFinishedItem`). Finished items stay finished, so each
 * snapshot looks only at the items after them.
 */
const finishedPrefix = new WeakMap<readonly OutputItem[], number>();

/**
 * A snapshot safe to hand to a sink that may keep it. A finished item never
 * changes again (engine/segment.ts; `isFinishedItem`), so the snapshot shares
 * it — and its JSON is built once (protocol/event-json.ts); one still
 * streaming is copied, its message parts too. The finished items at the front
 * are known from the last snapshot of the same output, so a pause of a long
 * run copies the list (one block copy) without testing every item so far
 * again: that walk, at every pause, grew with the run.
 */
export function snapshot(r: Response): Response {
  const items = r.output;
  let finished = Math.min(finishedPrefix.get(items) ?? 0, items.length);
  while (finished < items.length && isFinishedItem(items[finished])) finished++;
  finishedPrefix.set(items, finished);
  const output = items.slice();
  for (let i = finished; i < output.length; i++) if (!isFinishedItem(output[i])) output[i] = copyOpen(output[i]!);
  return { ...r, output };
}

/**
 * An item still being written, as it is now: its message parts too (the text grows in its part, engine/segment.ts),
 * and a part's `logprobs`, which the run pushes onto in place: shared, a large retrieve written as its reader took it
 * (transport/json-out.ts) answered a part's text `a` with the logprobs of `a` and of the `b` streamed meanwhile.
 */
function copyOpen(item: OutputItem): OutputItem {
  if (item.type === 'message' && Array.isArray(item.content)) {
    return { ...item, content: item.content.map((p) => ('logprobs' in p && Array.isArray(p.logprobs) ? { ...p, logprobs: p.logprobs.slice() } : { ...p })) };
  }
  return { ...item };
}

/**
 * The lean response a pause's `response.done` carries under the
 * `lean_pause_event` switch: what a long-lived client needs to continue (which
 * calls the pause waits for), not the snapshot of everything so far.
 */
export function leanSnapshot(r: Response): Response {
  const lean = {
    id: r.id,
    object: r.object,
    created_at: r.created_at,
    status: r.status,
    model: r.model,
    previous_response_id: r.previous_response_id,
    usage: r.usage,
    pending_tool_calls: r.pending_tool_calls?.slice() ?? [],
  };
  // Deliberately a subset of Response: the documented opt-in switch's event (docs/protocol.md); typing every
  // pause event as a union would make every client narrow a shape only this switch sends.
  return lean as unknown as Response;
}
