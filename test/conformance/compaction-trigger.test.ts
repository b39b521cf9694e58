/**
 * `{"type": "compaction_trigger"}` as the last input item of a create (what
 * Codex 0.169+ sends with its built-in OpenAI provider, "remote compaction
 * v2"): the response compacts the context instead of sampling, and its
 * output is exactly that one compaction item, which a later create takes
 * as input. Anywhere else (not last, in a long-lived append) it is refused,
 * never carried as an unknown item the model would answer around.
 * Codex itself: test/integration/codex-compaction.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import type { CompactionItem, Response } from '../../src/protocol/objects.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { postJson } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

const exec = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } };
const history = [
  { type: 'message', role: 'user', content: 'earlier question' },
  { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'earlier answer', annotations: [] }] },
  { type: 'message', role: 'user', content: 'run this:\n$ echo one\n$ echo two' },
  { type: 'function_call', call_id: 'call_1', name: 'exec_command', arguments: '{"cmd":"echo one"}' },
  { type: 'function_call_output', call_id: 'call_1', output: 'one\nmore lines\nof output' },
];

async function record(url: string, id: string): Promise<RunRecord> {
  return (await (await fetch(`${url}/llr/runs/${id}`)).json()) as RunRecord;
}

describe('compaction_trigger', () => {
  it('over HTTP: the output is one compaction item, no model call; the item starts the next create where the run was', async () => {
    const { url } = await testServer();
    const { status, json } = await postJson(`${url}/v1/responses`, {
      model: 'sim-model',
      input: [...history, { type: 'compaction_trigger' }],
      tools: [exec],
      parallel_tool_calls: false,
      store: false,
    });
    expect(status, JSON.stringify(json)).toBe(200);
    const res = json as Response;
    expect(res.status).toBe('completed');
    expect(res.output.map((i) => i.type)).toEqual(['compaction']);
    expect(res.usage!.input_tokens).toBeGreaterThan(0);
    expect(res.usage!.output_tokens).toBeGreaterThan(0);
    const rec = await record(url, res.id);
    expect(rec.counters).toMatchObject({ compactions: 1, model_calls: 0 });

    // The compaction item carries the turn in progress: the model runs the command not yet run, and only it.
    const item = res.output[0] as CompactionItem;
    const next = await postJson(`${url}/v1/responses`, { model: 'sim-model', input: [item], tools: [exec], parallel_tool_calls: false, store: false });
    expect(next.status, JSON.stringify(next.json)).toBe(200);
    const calls = (next.json as Response).output.filter((i) => i.type === 'function_call');
    expect(calls.map((c) => (c as { arguments: string }).arguments)).toEqual(['{"cmd":"echo two"}']);
  });

  it('streamed: the compaction item is streamed as an item, then response.completed', async () => {
    const { url } = await testServer();
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', stream: true, input: [...history, { type: 'compaction_trigger' }], tools: [exec] }),
    });
    const types = (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => (JSON.parse(l.slice(6)) as { type: string; item?: { type: string } }))
      .map((e) => (e.item ? `${e.type}:${e.item.type}` : e.type));
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added:compaction',
      'response.output_item.done:compaction',
      'response.completed',
    ]);
  });

  it('anywhere but last is refused, naming the item', async () => {
    const { url } = await testServer();
    const { status, json } = await postJson(`${url}/v1/responses`, {
      model: 'sim-model',
      input: [{ type: 'compaction_trigger' }, { type: 'message', role: 'user', content: 'hi' }],
    });
    expect(status).toBe(400);
    expect(json.error).toMatchObject({ code: 'invalid_value', param: 'input[0]' });
  });

  it('in WebSocket mode: a continuation of the compacting response runs from the compacted window', async () => {
    const { url } = await testServer();
    const ws = await RawSocket.connect(url);
    ws.send({ type: 'response.create', model: 'sim-model', store: false, input: [...history, { type: 'compaction_trigger' }], tools: [exec], parallel_tool_calls: false });
    const done = await ws.next('response.completed');
    expect(done.response.output.map((i) => i.type)).toEqual(['compaction']);
    ws.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: done.response.id, input: [], tools: [exec], parallel_tool_calls: false });
    const next = await ws.next('response.completed');
    expect(next.response.output.map((i) => (i.type === 'function_call' ? i.arguments : i.type))).toEqual(['{"cmd":"echo two"}']);
    ws.dispose();
  });

  it('in a long-lived append: refused, the run still paused', async () => {
    const { url } = await testServer();
    const ws = await RawSocket.longLived(url);
    ws.send({ type: 'response.create', model: 'sim-model', input: 'run this:\n$ echo one', tools: [exec] });
    const paused = await ws.next('response.done');
    ws.send({ type: 'response.append', input: [{ type: 'compaction_trigger' }] });
    const err = await ws.next('error', { skipErrors: true });
    expect(err.error).toMatchObject({ code: 'invalid_value', param: 'input[0]' });
    const callId = paused.response.pending_tool_calls![0]!;
    ws.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: callId, output: 'one' }] });
    expect((await ws.next('response.completed')).response.id).toBe(paused.response.id);
    ws.dispose();
  });
});
