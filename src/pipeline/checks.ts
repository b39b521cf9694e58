/**
 * The request checks every design runs before the model sees anything:
 * validation (`pipeline/validate.ts`) then the safety scan
 * (`pipeline/safety.ts`), in two forms, written once here.
 *
 * - `checkFull`: the request's tools, the whole history (errors name
 *   `previous_response_id`) and the input (`input[i]`); the instructions are
 *   scanned. Every fresh create, the HTTP baseline every time, a ws cache
 *   miss, and — with the `incremental_checks` switch off — every ws
 *   continuation and long-lived append.
 * - `checkIncremental`: only the new items, against the call ids the
 *   context already holds; a create's tools and `text.format` schema are
 *   validated again (they are the request's own) and its instructions scanned only when they differ
 *   from the context's. A ws continuation from the cached response, and
 *   every long-lived append (WebSocket and HTTP).
 *
 * With `requireToolOutputs` (the creates of every design) either
 * form also refuses a context that leaves a client tool call without its
 * output (`missing_tool_output`): the full form follows the calls through
 * the whole history and input, the incremental one starts from the calls the
 * context is known to leave waiting (a ws continuation: the cached
 * response's own) and walks only the new items.
 *
 * Spans (docs/architecture.md): `validate` and `safety` for checks before a
 * response starts, `validate_append` and `safety_append` for the same checks
 * on items appended to a live run; the counters `validate_full` /
 * `validate_incremental` and `safety_full` / `safety_incremental` say which
 * form ran. Each stage yields to the event loop on large inputs
 * (src/cooperative.ts), the tools' check between tools (128 tools'
 * schemas can fill a 16 MiB body).
 */
import type { InputItem, TextConfig, Tool } from '../protocol/objects.js';
import type { RunMetrics } from './metrics.js';
import { safetyScanAsync } from './safety.js';
import { duplicateItemId, missingToolOutput, PendingCalls, validateItemsAsync, validateToolsAsync } from './validate.js';

/** When the checks run: before a response starts (`create`) or on items appended to a live run (`append`). */
export type CheckStage = 'create' | 'append';

const SPANS = {
  create: { validate: 'validate', safety: 'safety' },
  append: { validate: 'validate_append', safety: 'safety_append' },
} as const;

export interface CheckRequest {
  /** The create's tools (validated); none for an append. */
  tools: readonly Tool[];
  /** Instructions to scan; null for none. */
  instructions: string | null;
  /** The create's `text` config: a `json_schema` format is checked like a tool's schema (`invalid_json_schema`). */
  text?: TextConfig | undefined;
  /**
   * Refuse a context that leaves a client tool call without its output (`missing_tool_output`, the API's
   * "No tool output found for function call …"): the creates of every design (a long-lived run waits only
   * for the model's own calls, so a client call left without its output could never be answered). Not a
   * long-lived append, whose context holds the model's calls it answers (engine/run.ts checks that the
   * append's own calls have their outputs), nor a compaction.
   */
  requireToolOutputs?: boolean;
}

/** Validate and scan a whole context: `history` (items of earlier responses) then `input`. */
export async function checkFull(req: CheckRequest, history: readonly InputItem[], input: readonly InputItem[], metrics: RunMetrics, stage: CheckStage = 'create'): Promise<void> {
  await metrics.timeAsync(SPANS[stage].validate, async () => {
    metrics.count('validate_full');
    await validateToolsAsync(req.tools, metrics, req.text?.format);
    const pending = req.requireToolOutputs ? new PendingCalls() : undefined;
    const known = await validateItemsAsync(history, { callIds: new Set(), pending }, metrics, 'previous_response_id');
    await validateItemsAsync(input, { callIds: known, pending }, metrics);
    const missing = pending && missingToolOutput(pending);
    if (missing) throw missing;
    // A create's input only: an append is this server's own event, whose re-sent items are dropped (engine/run.ts).
    const duplicate = stage === 'create' ? duplicateItemId(history, input) : null;
    if (duplicate) throw duplicate;
  });
  await metrics.timeAsync(SPANS[stage].safety, async () => {
    metrics.count('safety_full');
    await safetyScanAsync(history, metrics, 'previous_response_id', req.instructions);
    await safetyScanAsync(input, metrics, 'input');
  });
}

/**
 * Validate and scan only `input`, new items after a context that knows `callIds`. With
 * `requireToolOutputs`, `pending` holds the context's unanswered calls (for a ws continuation, the
 * cached response's own: the check that let its request in left none before it); it is not changed.
 */
export async function checkIncremental(
  req: CheckRequest,
  callIds: ReadonlySet<string>,
  input: readonly InputItem[],
  metrics: RunMetrics,
  stage: CheckStage = 'create',
  pending?: PendingCalls,
): Promise<void> {
  await metrics.timeAsync(SPANS[stage].validate, async () => {
    metrics.count('validate_incremental');
    await validateToolsAsync(req.tools, metrics, req.text?.format);
    const left = req.requireToolOutputs ? new PendingCalls(pending) : undefined;
    await validateItemsAsync(input, { callIds, pending: left }, metrics);
    const missing = left && missingToolOutput(left);
    if (missing) throw missing;
  });
  await metrics.timeAsync(SPANS[stage].safety, async () => {
    metrics.count('safety_incremental');
    await safetyScanAsync(input, metrics, 'input', req.instructions);
  });
}
