/**
 * The valid requests the protocol-state scenarios send: a plain question
 * (streams text), a shell request that makes the model call `exec_command`
 * once per `$` line (one at a time unless parallel), and a fat request whose
 * every lifecycle event carries megabytes (slow readers).
 */
export const EXEC_TOOL = {
  type: 'function',
  name: 'exec_command',
  description: 'Run a shell command.',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
};

export function textCreate(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'response.create', model: 'sim-model', input: 'tell me something about the sea', store: false, ...extra };
}

/** The model calls `exec_command` once per line, `calls` pauses in all (long-lived). */
export function shellCreate(calls: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const lines = Array.from({ length: calls }, (_, i) => `$ echo step-${i + 1}`).join('\n');
  return { type: 'response.create', model: 'sim-model', input: `run these one by one\n${lines}`, tools: [EXEC_TOOL], parallel_tool_calls: false, store: false, ...extra };
}

/** Every response.* lifecycle event of this request carries `bytes` of instructions. */
export function fatCreate(bytes: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'response.create', model: 'sim-model', instructions: 'slow reader '.repeat(Math.ceil(bytes / 12)).slice(0, bytes), input: 'hi', store: false, ...extra };
}

export function outputs(callIds: readonly string[]): Record<string, unknown> {
  return { type: 'response.append', input: callIds.map((call_id) => ({ type: 'function_call_output', call_id, output: `ran ${call_id}` })) };
}

/** The body of a create as an HTTP POST (without the event `type`). */
export function asPost(create: Record<string, unknown>): string {
  const { type: _t, ...body } = create;
  return JSON.stringify(body);
}
