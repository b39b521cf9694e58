/**
 * The long-lived design (the prototype): the whole agent run is one
 * Response. Pre-inference work (validate, render, scan, route) happens once
 * per `response.create`; at each client tool call the run pauses and the
 * client's `response.append` gets only incremental work inside the run.
 * Post-inference work happens once, when the run ends.
 *
 * `previous_response_id` is not part of this protocol: a follow-up turn after
 * `response.completed` is a fresh create with the full input, as Codex sends.
 */
import { WireError } from '../protocol/errors.js';
import type { Services } from '../engine/services.js';
import type { ModePolicy, SessionInfo } from './session.js';
import { prepareFull } from './prepare.js';
import { resolveReferences } from './hydrate.js';
import { checkContext } from '../engine/budget.js';

/** A long-lived create names no previous response: a run continues by appends. */
function previousRefused(): WireError {
  return new WireError(
    'invalid_value',
    "'previous_response_id' is not supported on the long-lived protocol: append to the paused response, or send the full input in a new response.create.",
    'previous_response_id',
  );
}

export function longLivedPolicy(services: Services, info: SessionInfo): ModePolicy {
  return {
    protocol: 'long-lived',
    appendable: true,
    // Refused for room on arrival, it was told to try again, and every retry could only be refused so (atk107 F1).
    missing: (params) => (params.previous_response_id ? previousRefused() : null),
    async plan(params, metrics, _lane, signal) {
      if (params.previous_response_id) throw previousRefused();
      // An item_reference names a stored item (a response of an earlier run): replaced by it, as the other designs
      // do, or refused (`item_not_found`); it was rendered as nothing, the item silently missing from the run.
      const input = await resolveReferences(params.input, info.owner, services, metrics, signal);
      // Resolving stops early once the session has ended: what it has is not the input, and nothing will run.
      signal?.throwIfAborted();
      // The run's context budget covers what it starts with, not only what is
      // appended; checked before rendering, so an oversized input costs no tokenizing.
      checkContext(null, input, services.limits);
      // A client call in its input without its output is refused (`missing_tool_output`), as on the other designs: the
      // run waits only for the model's own calls, so that output could never be sent (`unknown_call_id`), and the stored
      // response was then a dead end, every continuation of it refused (outside attack atk89 F6).
      const { context, route } = await prepareFull(params, [], input, services, metrics, info.owner, true);
      return {
        protocol: 'long-lived',
        params,
        context,
        route,
        input,
        owner: info.owner,
        connection: info.connection,
        metrics,
        onToolCalls: 'pause',
        postInference: services.switches.overlap_post_inference ? 'overlapped' : 'inline',
        resolveAppend: async (items, m, signal, held) => resolveReferences([...items], info.owner, services, m, signal, held),
      };
    },
  };
}
