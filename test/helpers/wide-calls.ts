/**
 * A long-lived run whose every model call is a tool call with wide arguments, for the byte-budget tests of what a
 * run keeps: the tool's required strings are filled to their `minLength` by the default policy, so each call's
 * arguments are about `keys.length × minLength` bytes; and `bytes_held` as `GET /health` reports it.
 */

/** `bytes_held` from `GET /health`. */
export async function heldBytes(url: string): Promise<number> {
  return ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;
}

/** A `response.create` forcing the tool `lookup`, whose required string arguments `keys` each take `minLength` characters. */
export function wideCreate(keys: string[], minLength: number): Record<string, unknown> {
  const wide = {
    type: 'function',
    name: 'lookup',
    parameters: { type: 'object', required: keys, properties: Object.fromEntries(keys.map((k) => [k, { type: 'string', minLength }])) },
  };
  return { type: 'response.create', model: 'sim-model', input: 'lookup please', tools: [wide], tool_choice: { type: 'function', name: 'lookup' } };
}

/** A `response.append` answering each call `ok`. */
export function answerOk(ids: string[]): Record<string, unknown> {
  return { type: 'response.append', input: ids.map((call_id) => ({ type: 'function_call_output', call_id, output: 'ok' })) };
}
