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
 * Spans (docs/architecture.md): `validate` and `safety` for checks before a
 * response starts, `validate_append` and `safety_append` for the same checks
 * on items appended to a live run; the counters `validate_full` /
 * `validate_incremental` and `safety_full` / `safety_incremental` say which
 * form ran. Each stage yields to the event loop on large inputs
 * (model/cooperative.ts), the tools' check between tools (128 tools'
 * schemas can fill a 16 MiB body).
 */
import type { InputItem, TextConfig, Tool } from '../protocol/objects.js';
import type { RunMetrics } from './metrics.js';
import { safetyScanAsync } from './safety.js';
import { validateItemsAsync, validateToolsAsync } from './validate.js';

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
}

/** Validate and scan a whole context: `history` (items of earlier responses) then `input`. */
export async function checkFull(req: CheckRequest, history: readonly InputItem[], input: readonly InputItem[], metrics: RunMetrics, stage: CheckStage = 'create'): Promise<void> {
  await metrics.timeAsync(SPANS[stage].validate, async () => {
    metrics.count('validate_full');
    await validateToolsAsync(req.tools, metrics, req.text?.format);
    const known = await validateItemsAsync(history, { callIds: new Set() }, metrics, 'previous_response_id');
    await validateItemsAsync(input, { callIds: known }, metrics);
  });
  await metrics.timeAsync(SPANS[stage].safety, async () => {
    metrics.count('safety_full');
    await safetyScanAsync(history, metrics, 'previous_response_id', req.instructions);
    await safetyScanAsync(input, metrics, 'input');
  });
}

/** Validate and scan only `input`, new items after a context that knows `callIds`. */
export async function checkIncremental(req: CheckRequest, callIds: ReadonlySet<string>, input: readonly InputItem[], metrics: RunMetrics, stage: CheckStage = 'create'): Promise<void> {
  await metrics.timeAsync(SPANS[stage].validate, async () => {
    metrics.count('validate_incremental');
    await validateToolsAsync(req.tools, metrics, req.text?.format);
    await validateItemsAsync(input, { callIds }, metrics);
  });
  await metrics.timeAsync(SPANS[stage].safety, async () => {
    metrics.count('safety_incremental');
    await safetyScanAsync(input, metrics, 'input', req.instructions);
  });
}
