/**
 * The body of `POST /demo/api/races`, validated at the edge, and the model
 * speeds the page offers. Every bad field is a WireError naming it.
 *
 *   { "workload": "codex" | "synthetic" | "prompt",
 *     "tool_calls": 10,            (synthetic)
 *     "prompt": "…\n$ ls",         (prompt)
 *     "speed": "65" | "1000" | "4000" | "instant",
 *     "tool_time": "none" | "recorded",
 *     "step": false,
 *     "order": "together" | "one-by-one" }   (one-by-one: not with step)
 */
import type { ModelSettings } from '../model/types.js';
import { WireError } from '../protocol/errors.js';
import { checkParameters } from '../protocol/parse.js';
import { buildWorkload, type DemoWorkload, type WorkloadChoice, type WorkloadLimits } from './workloads.js';

export const SPEEDS = ['65', '1000', '4000', 'instant'] as const;
export type Speed = (typeof SPEEDS)[number];

export interface RaceRequest {
  workload: DemoWorkload;
  speed: Speed;
  toolTime: 'none' | 'recorded';
  step: boolean;
  order: 'together' | 'one-by-one';
}

/**
 * A lane's model settings: the chosen decode rate with the server's own time
 * to first token and prefill rate (`llr serve --ttft-ms`, `--prefill-tps`);
 * "instant" makes all three free.
 */
export function speedSettings(speed: Speed, base: ModelSettings | undefined): ModelSettings {
  if (speed === 'instant') return { tokensPerSecond: Infinity, ttftBaseMs: 0, prefillTokensPerSecond: Infinity };
  return { tokensPerSecond: Number(speed), ttftBaseMs: base?.ttftBaseMs ?? 150, prefillTokensPerSecond: base?.prefillTokensPerSecond ?? 20_000 };
}

/**
 * The fields a race body may carry; any other (a typo such as `tooltime`) is refused `400 unknown_parameter` naming it,
 * as `/v1` refuses one: it was ignored, and the race ran with the default in its place (outside attack atk50 F4).
 */
const RACE_PARAMETERS: ReadonlySet<string> = new Set(['workload', 'tool_calls', 'prompt', 'speed', 'tool_time', 'step', 'order']);

export function parseRaceRequest(body: unknown, limits: WorkloadLimits & { workloadPath: string }): RaceRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new WireError('invalid_type', 'The body must be a JSON object.', null);
  const b = body as Record<string, unknown>;
  checkParameters(b, RACE_PARAMETERS);
  const speed = oneOf(b['speed'], SPEEDS, 'speed');
  // Absent is the default; null is not (`"step": null` was taken as false).
  const toolTime = oneOf(b['tool_time'] === undefined ? 'none' : b['tool_time'], ['none', 'recorded'] as const, 'tool_time');
  const step = b['step'] === undefined ? false : b['step'];
  if (typeof step !== 'boolean') throw new WireError('invalid_type', 'step must be a boolean.', 'step');
  const order = oneOf(b['order'] === undefined ? 'together' : b['order'], ['together', 'one-by-one'] as const, 'order');
  if (order === 'one-by-one' && step) throw new WireError('invalid_value', 'Step mode steps every lane together; it cannot run the lanes one after another.', 'order');
  const kind = oneOf(b['workload'], ['codex', 'synthetic', 'prompt'] as const, 'workload');
  // A field of another workload's is refused, not ignored: a race asked with `prompt` on `codex` ran the Codex run
  // (outside attack atk106 F6), as a typo's default did before `checkParameters`.
  for (const [field, owner] of [['tool_calls', 'synthetic'], ['prompt', 'prompt']] as const) {
    if (b[field] !== undefined && kind !== owner) throw new WireError('invalid_value', `${field} is for the ${owner} workload only, not ${kind}.`, field);
  }
  let choice: WorkloadChoice;
  if (kind === 'synthetic') {
    const n = b['tool_calls'];
    if (typeof n !== 'number') throw new WireError('invalid_type', 'tool_calls must be a number.', 'tool_calls');
    choice = { kind, tool_calls: n };
  } else if (kind === 'prompt') {
    const text = b['prompt'];
    if (typeof text !== 'string') throw new WireError('invalid_type', 'prompt must be a string.', 'prompt');
    choice = { kind, text };
  } else {
    choice = { kind };
  }
  return { workload: buildWorkload(choice, limits, limits.workloadPath), speed, toolTime, step, order };
}

/**
 * The least time a race can take, ms: each lane's model calls at the chosen speed (the server's time to first
 * token for each, the run's recorded output tokens at the decode rate), its tools when their time is "as recorded",
 * and the lanes one after another when asked; prefill, the API's own work and step-mode waits not counted.
 */
export function leastRaceMs(r: RaceRequest, settings: ModelSettings, lanes: number): number {
  const w = r.workload;
  const calls = w.model_calls ?? 1;
  const decode = settings.tokensPerSecond === Infinity ? 0 : (w.min_output_tokens / settings.tokensPerSecond) * 1000;
  const lane = calls * settings.ttftBaseMs + decode + (r.toolTime === 'recorded' ? w.min_tool_ms : 0);
  return r.order === 'one-by-one' ? lane * lanes : lane;
}

function oneOf<T extends string>(v: unknown, allowed: readonly T[], param: string): T {
  if (v === undefined) throw new WireError('missing_required_parameter', `Missing required parameter: '${param}'.`, param);
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    throw new WireError('invalid_value', `${param} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}.`, param);
  }
  return v as T;
}
