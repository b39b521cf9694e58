/**
 * A recorded custom (freeform) tool call, as Codex writes its `apply_patch`, replayed to a client that declares that
 * tool custom: played as a `custom_tool_call` (its input streamed as `response.custom_tool_call_input.delta`s), not as
 * the function call taking `{"input": text}` the workload reader keeps it as. Played as a function call, Codex answered
 * every recorded edit `unsupported call: apply_patch`, and none reached its workspace (outside attack atk99 F1). A
 * client that declares no such custom tool (the bench's) still gets the function call.
 */
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { replayPolicy } from '../../src/model/policies.js';
import { parseWorkload } from '../../src/workload/load.js';
import { flatModelTurns, replayable } from '../../src/workload/replayable.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { parseSse } from '../helpers/sse-stream.js';

let clock = Date.parse('2026-11-01T10:00:00Z');
const rec = (type: string, payload: Record<string, unknown>) => JSON.stringify({ timestamp: new Date((clock += 250)).toISOString(), type, payload });
/** The recorded output tokens of the patch call: more than its input shows, fewer than its {"input": …} wrapping. */
const RECORDED_OUT = 60;
const PATCH = '*** Begin Patch\n*** Update File: calc.py\n@@\n-    return a - b\n+    return a + b  # "fixed"\n*** End Patch\n';
const rollout = [
  rec('session_meta', { id: 's1', source: 'cli', base_instructions: { text: 'You are Codex.' } }),
  rec('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'fix add' }] }),
  rec('response_item', { type: 'custom_tool_call', name: 'apply_patch', input: PATCH, call_id: 'cp1', status: 'completed' }),
  rec('event_msg', { type: 'token_count', info: { total_token_usage: { total_tokens: 1060 }, last_token_usage: { input_tokens: 1000, cached_input_tokens: 0, output_tokens: RECORDED_OUT, reasoning_output_tokens: 0 } } }),
  rec('response_item', { type: 'custom_tool_call_output', call_id: 'cp1', output: 'Success. Updated the following files:\nM calc.py\n' }),
  rec('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Fixed.' }] }),
];
const workload = replayable(parseWorkload(rollout.join('\n') + '\n', 'patch.jsonl', 'test'));
const applyPatch = { type: 'custom', name: 'apply_patch', description: 'Edit files.', format: { type: 'text' } };
const user = { role: 'user', content: 'fix add' };
const output = { type: 'custom_tool_call_output', call_id: 'cp1', output: 'Success.' };

async function server() {
  return testServer({ policy: replayPolicy(flatModelTurns(workload)) });
}

describe('a recorded custom tool call replayed to a client that declares the tool custom', () => {
  it('over HTTP: a custom_tool_call whose input is the recorded text, streamed as custom_tool_call_input events; the run goes on with its output', async () => {
    const { url } = await server();
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: [user], tools: [applyPatch], stream: true }) });
    const events = parseSse(await res.text());
    const done = events.find((e) => e.type === 'response.output_item.done')!;
    expect(done.item).toMatchObject({ type: 'custom_tool_call', name: 'apply_patch', call_id: 'cp1', input: PATCH, status: 'completed', id: expect.stringMatching(/^ctc_/) });
    const added = events.find((e) => e.type === 'response.output_item.added')!;
    expect(added.item).toMatchObject({ type: 'custom_tool_call', input: '', status: 'in_progress', id: done.item.id });
    const deltas = events.filter((e) => e.type === 'response.custom_tool_call_input.delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((d) => d.delta).join('')).toBe(PATCH);
    for (const d of deltas) expect(Object.keys(d)).toEqual(['type', 'item_id', 'output_index', 'delta', 'sequence_number']);
    expect(events.find((e) => e.type === 'response.custom_tool_call_input.done')).toMatchObject({ item_id: done.item.id, output_index: 0, input: PATCH });
    expect(events.filter((e) => e.type.startsWith('response.function_call_arguments'))).toEqual([]);
    const completed = events.at(-1)!;
    expect(completed.type).toBe('response.completed');
    expect(completed.response.output).toEqual([done.item]);
    // The client sends the call back with its output (as Codex does over HTTP): the recorded answer follows.
    const next = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: [user, done.item, output], tools: [applyPatch] }) });
    expect(((await next.json()) as { output: Array<{ type: string; content?: Array<{ text: string }> }> }).output[0]).toMatchObject({ type: 'message', content: [{ text: 'Fixed.' }] });
  });

  it("the openai SDK's stream reads it: the call's input and the final response", async () => {
    const { url } = await server();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'test', maxRetries: 0 });
    const stream = client.responses.stream({ model: 'sim-model', input: [user] as never, tools: [applyPatch] as never });
    const types: string[] = [];
    for await (const e of stream) types.push(e.type);
    const final = await stream.finalResponse();
    expect(final.output[0]).toMatchObject({ type: 'custom_tool_call', input: PATCH });
    expect(types).toContain('response.custom_tool_call_input.done');
  });

  it('over a long-lived WebSocket: the run pauses for the custom call, its custom_tool_call_output resumes it', async () => {
    const { url } = await server();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: [user], tools: [applyPatch] });
    const paused = await s.next('response.done');
    expect(paused.response.output[0]).toMatchObject({ type: 'custom_tool_call', input: PATCH, call_id: 'cp1' });
    s.send({ type: 'response.append', input: [output] });
    const completed = await s.next('response.completed');
    expect(completed.response.output.map((o: { type: string }) => o.type)).toEqual(['custom_tool_call', 'message']);
    s.dispose();
  });

  it('the call decodes the recorded output tokens, and the prompt shows it as a function call is: the same input tokens on every run and design (outside attack atk101 F1, F2, F3)', async () => {
    const { url } = await server();
    const post = async (input: unknown[]) =>
      (await (await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input, tools: [applyPatch] }) })).json()) as {
        output: Array<Record<string, unknown>>;
        usage: { input_tokens: number; output_tokens: number };
      };
    const inputs: number[] = [];
    let firstInput = 0;
    for (let run = 0; run < 2; run++) {
      const first = await post([user]);
      // Fewer were reported: the hidden tokens came from the wrapped form's count.
      expect(first.usage.output_tokens).toBe(RECORDED_OUT);
      firstInput = first.usage.input_tokens;
      // Sent back as received, with its random item id: the prompt does not show the id.
      inputs.push((await post([user, first.output[0], output])).usage.input_tokens);
    }
    expect(inputs[1]).toBe(inputs[0]);
    // A long-lived run's two model calls read the same prompts as those two requests (the call as the run holds it).
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: [user], tools: [applyPatch] });
    await s.next('response.done');
    // The call sent back with its output is the one the run holds: dropped as a duplicate, not held twice (atk101 F3).
    const paused = s.events.at(-1) as { response: { output: Array<Record<string, unknown>> } };
    s.send({ type: 'response.append', input: [paused.response.output[0], output] });
    const done = await s.next('response.completed');
    expect(done.response.output.filter((o: { type: string }) => o.type === 'custom_tool_call')).toHaveLength(1);
    expect(done.response.usage!.input_tokens).toBe(firstInput + inputs[0]!);
    s.dispose();
  });

  it('a client that declares no such custom tool gets the function call taking {"input": text}, as before', async () => {
    const { url } = await server();
    const tool = { type: 'function', name: 'apply_patch', parameters: { type: 'object', properties: { input: { type: 'string' } } } };
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: [user], tools: [tool] }) });
    const body = (await res.json()) as { output: Array<{ type: string; arguments: string }> };
    expect(body.output[0]).toMatchObject({ type: 'function_call', name: 'apply_patch' });
    expect(JSON.parse(body.output[0]!.arguments)).toEqual({ input: PATCH });
  });

  it('a recorded call whose arguments wrap no input, to a tool the client declares custom, is a custom call taking those arguments: never a function call to a custom tool (outside attack atk103 F3)', async () => {
    // Another agent's apply_patch_call is read as a function call taking its operation; Codex took it, sent as a function
    // call to its custom apply_patch, as a fatal tool error and answered `aborted`.
    const args = JSON.stringify({ operation: { type: 'create_file', path: 'a.txt', diff: '+hi\n' } });
    const turns = [{ output: [{ type: 'function_call' as const, name: 'apply_patch', arguments: args, call_id: 'fp2' }] }, { output: [{ type: 'message' as const, text: 'Done.' }] }];
    const { url } = await testServer({ policy: replayPolicy(turns) });
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: [user], tools: [applyPatch], stream: true }) });
    const events = parseSse(await res.text());
    const done = events.find((e) => e.type === 'response.output_item.done')!;
    expect(done.item).toMatchObject({ type: 'custom_tool_call', name: 'apply_patch', call_id: 'fp2', input: args });
    expect(events.filter((e) => e.type === 'response.custom_tool_call_input.delta').map((d) => d.delta).join('')).toBe(args);
    expect(events.filter((e) => e.type.startsWith('response.function_call_arguments'))).toEqual([]);
    // Declared a function, it is the function call as recorded.
    const fn = { type: 'function', name: 'apply_patch', parameters: { type: 'object', properties: {} } };
    const plain = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: [user], tools: [fn] }) });
    expect(((await plain.json()) as { output: unknown[] }).output[0]).toMatchObject({ type: 'function_call', name: 'apply_patch', arguments: args });
  });
});
