/**
 * `POST /v1/responses/compact`: the window (the stored `previous_response_id`
 * chain, then `input`; an earlier compaction in it already expanded) is
 * validated, scanned and rendered like a create's, then compacted
 * (pipeline/compaction.ts). Usage is real: `input_tokens` is the rendered
 * window (instructions included), `output_tokens` the summary's tokens.
 * Nothing is stored: the client keeps the returned items and sends them back
 * as input. Leaves out the model's time: the simulated compaction is instant.
 */
import { WireError } from '../protocol/errors.js';
import { makeUsage, newId, type CompactedResponse } from '../protocol/objects.js';
import type { CompactParams } from '../protocol/parse.js';
import type { CreateParams } from '../protocol/events.js';
import { compactAsync } from '../pipeline/compaction.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import { countTokens } from '../model/tokenizer.js';
import type { Services } from '../engine/services.js';
import { checkAndRender } from './prepare.js';
import { loadChain, resolveReferences } from './hydrate.js';

/**
 * `signal` (both here): the client went away; a chain read still queued or under way stops (modes/hydrate.ts).
 * `charge` (both here): the stored chain loaded is charged to the request's share of the server-wide byte budget
 * (`server_busy` past it), as a create continuing it is: uncharged, any number of them at once each held a chain
 * (and its render) beyond the budget (outside attack).
 */
export async function compactWindow(
  params: CompactParams,
  services: Services,
  metrics: RunMetrics,
  owner: string | null,
  charge?: (bytes: number) => void,
  signal?: AbortSignal,
): Promise<CompactedResponse> {
  if (params.input.length === 0 && params.previous_response_id === null) {
    throw new WireError('missing_required_parameter', "Provide 'input' or 'previous_response_id': there is nothing to compact.", 'input');
  }
  const input = await resolveReferences(params.input, owner, services, metrics, signal);
  signal?.throwIfAborted();
  const history = params.previous_response_id ? await loadChain(params.previous_response_id, owner, services, metrics, { charge, signal }) : [];
  // The same checks and render as a create's, so errors and token counts agree with one.
  const ctx = await checkAndRender({ instructions: params.instructions, tools: [] }, history, input, metrics);
  const { output, summary } = await compactAsync(ctx.items);
  return {
    id: newId('resp'),
    object: 'response.compaction',
    created_at: Math.floor(Date.now() / 1000),
    output,
    usage: makeUsage(ctx.tokens.length, 0, countTokens(summary)),
  };
}

/**
 * `POST /v1/responses/input_tokens` (openai-node's `responses.inputTokens.count`):
 * the create body's window (the stored chain, then `input`) checked and
 * rendered exactly as a create's, so the count is the `usage.input_tokens`
 * that create would report. Nothing runs, nothing is stored.
 */
export async function countInputTokens(
  params: CreateParams,
  services: Services,
  metrics: RunMetrics,
  owner: string | null,
  charge?: (bytes: number) => void,
  signal?: AbortSignal,
): Promise<InputTokenCount> {
  const input = await resolveReferences(params.input, owner, services, metrics, signal);
  signal?.throwIfAborted();
  const history = params.previous_response_id ? await loadChain(params.previous_response_id, owner, services, metrics, { charge, signal }) : [];
  const ctx = await checkAndRender(params, history, input, metrics);
  return { object: 'response.input_tokens', input_tokens: ctx.tokens.length };
}

export interface InputTokenCount {
  object: 'response.input_tokens';
  input_tokens: number;
}
