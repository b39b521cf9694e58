/**
 * Server-side compaction (`context_management: [{type: "compaction",
 * compact_threshold}]`): once the rendered prompt passes the threshold the
 * context is compacted before the model call, the compaction item joins the
 * output (streamed like any item), and later model calls — inside one live
 * long-lived run too — pay only for the smaller window. The agent loop goes
 * on where it was: every command runs exactly once.
 */
import { describe, expect, it } from 'vitest';
import { connectClient, type AgentClient } from '../../src/client/index.js';
import type { RunRecord } from '../../src/engine/records.js';
import { compact, SUMMARY_LINE_CHARS } from '../../src/pipeline/compaction.js';
import type { FunctionCall, InputItem, Response } from '../../src/protocol/objects.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { RawSocket, UnexpectedErrorEvent } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const exec = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } };
const bigOutput = (call: FunctionCall) => `${JSON.parse(call.arguments).cmd as string}\n${'a fairly long line of tool output text\n'.repeat(150)}`;
const lines = (n: number) => Array.from({ length: n }, (_, i) => `$ echo ${i}`).join('\n');

async function record(url: string, id: string): Promise<RunRecord> {
  return (await (await fetch(`${url}/llr/runs/${id}`)).json()) as RunRecord;
}

async function agentRun(client: AgentClient, threshold: number | null) {
  const run = client.run(
    {
      model: 'sim-model',
      input: `run these:\n${lines(5)}`,
      tools: [exec],
      parallel_tool_calls: false,
      ...(threshold !== null && { context_management: [{ type: 'compaction' as const, compact_threshold: threshold }] }),
    },
    bigOutput,
  );
  const response = await run;
  return { run, response };
}

describe('compact()', () => {
  it('keeps user messages and the turn in progress (long text cut to its first line), summarises the rest', () => {
    const window: InputItem[] = [
      { type: 'message', role: 'user', content: 'old question' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'old answer\nmore', annotations: [], logprobs: [] }] },
      { type: 'message', role: 'user', content: 'new question' },
      { type: 'function_call', call_id: 'c1', name: 'exec_command', arguments: '{"cmd":"ls"}' },
      { type: 'function_call_output', call_id: 'c1', output: 'file1\nfile2\nfile3' },
      { type: 'function_call', call_id: 'c2', name: 'exec_command', arguments: '{"cmd":"pwd"}' },
    ];
    const { carried, summary, output } = compact(window);
    expect(summary).toBe('Summary of 1 earlier item:\n- assistant: old answer');
    expect(carried.slice(1)).toEqual([
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'old question' }] },
      window[2],
      window[3],
      { ...window[4], output: 'file1 [compacted]' },
      window[5],
    ]);
    expect(output.map((i) => i.type)).toEqual(['message', 'message', 'compaction']);
  });

  it('cuts a long one-line tool output or assistant text as it cuts a long multi-line one; keeps a short line whole', () => {
    // A one-line output was kept whole: every compaction item sealed every such output of the turn again
    // (a run of 10 KB one-line outputs passed its kept-bytes budget at step ~700 of ~3,300: outside attack).
    const long = `o1 ${'x'.repeat(10_000)}`;
    const short = 'y'.repeat(SUMMARY_LINE_CHARS);
    const window: InputItem[] = [
      { type: 'message', role: 'user', content: 'run it' },
      { type: 'function_call', call_id: 'c1', name: 'exec_command', arguments: '{"cmd":"ls"}' },
      { type: 'function_call_output', call_id: 'c1', output: long },
      { type: 'function_call', call_id: 'c2', name: 'exec_command', arguments: '{"cmd":"ls"}' },
      { type: 'function_call_output', call_id: 'c2', output: `${long}\nsecond line` },
      { type: 'function_call', call_id: 'c3', name: 'exec_command', arguments: '{"cmd":"ls"}' },
      { type: 'function_call_output', call_id: 'c3', output: short },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: long, annotations: [], logprobs: [] }] },
    ];
    const { carried } = compact(window);
    const cutLong = `${long.slice(0, SUMMARY_LINE_CHARS - 1)}… [compacted]`;
    expect(carried.slice(2)).toEqual([
      window[1],
      { ...window[2], output: cutLong },
      window[3],
      { ...window[4], output: cutLong },
      window[5],
      window[6],
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: cutLong, annotations: [], logprobs: [] }] },
    ]);
  });
});

describe('server-side compaction', () => {
  it('HTTP: compacts before the model call; the item is streamed first and the prompt is the smaller window', async () => {
    const { url } = await testServer();
    const history: InputItem[] = [
      { type: 'message', role: 'user', content: 'Show me the log.' },
      { type: 'function_call', call_id: 'call_1', name: 'exec_command', arguments: '{"cmd":"cat log"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'x\n'.repeat(2000) },
      { type: 'message', role: 'user', content: 'Summarise it.' },
    ];
    const plain = (await (await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: history }) })).json()) as Response;
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: history, stream: true, context_management: [{ type: 'compaction', compact_threshold: 500 }] }),
    });
    const events = (await res.text()).split('\n\n').map((f) => f.split('\n').find((l) => l.startsWith('data: '))?.slice(6)).filter((d): d is string => !!d && d !== '[DONE]').map((d) => JSON.parse(d) as { type: string; item?: { type: string }; response?: Response });
    const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => e.item!.type);
    expect(added).toEqual(['compaction', 'message']);
    const final = events.at(-1)!.response!;
    expect(final.output.map((i) => i.type)).toEqual(['compaction', 'message']);
    expect(final.usage!.input_tokens).toBeLessThan(plain.usage!.input_tokens / 5);
    const rec = await record(url, final.id);
    expect(rec.counters['compactions']).toBe(1);
    expect(rec.spans.map((s) => s.stage)).toContain('compact');
    // Below the threshold nothing happens.
    const calm = (await (await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: 'hi', context_management: [{ type: 'compaction', compact_threshold: 100000 }] }) })).json()) as Response;
    expect(calm.output.map((i) => i.type)).toEqual(['message']);
  });

  it('refuses a bad context_management', async () => {
    const { url } = await testServer();
    for (const [cm, param] of [[{}, 'context_management'], [[{ type: 'truncate' }], 'context_management[0].type'], [[{ type: 'compaction', compact_threshold: 0 }], 'context_management[0].compact_threshold']] as const) {
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'x', context_management: cm }) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { param: string } }).error.param).toBe(param);
    }
  });

  it('inside one live long-lived run: the context shrinks, later appends pay for the smaller window, every command runs once', async () => {
    const { url } = await testServer();
    const results: Record<string, { response: Response; rec: RunRecord; commands: string[] }> = {};
    for (const [name, threshold] of [['plain', null], ['compacted', 1500]] as const) {
      const client = await connectClient('long-lived', url);
      const { run, response } = await agentRun(client, threshold);
      await client.close();
      const commands = run.transcript.filter((i): i is FunctionCall => i.type === 'function_call').map((c) => JSON.parse(c.arguments).cmd as string);
      results[name] = { response, rec: await record(url, response.id), commands };
    }
    const { plain, compacted } = results as Record<'plain' | 'compacted', (typeof results)[string]>;
    expect(plain.commands).toEqual(['echo 0', 'echo 1', 'echo 2', 'echo 3', 'echo 4']);
    expect(compacted.commands).toEqual(plain.commands);
    expect(compacted.response.status).toBe('completed');
    expect(compacted.rec.counters['compactions']).toBeGreaterThan(0);
    expect(compacted.response.output.filter((i) => i.type === 'compaction')).toHaveLength(compacted.rec.counters['compactions']!);
    expect(plain.rec.counters['compactions']).toBe(0);
    // The same six model calls, far fewer prompt tokens.
    expect(compacted.rec.counters['model_calls']).toBe(plain.rec.counters['model_calls']);
    expect(compacted.response.usage!.input_tokens).toBeLessThan(plain.response.usage!.input_tokens * 0.6);
  });

  it('a long-lived run that compacts keeps its appended items and output within the context budget: past it an append is refused, the run stays paused', async () => {
    // Compaction shrank the context (each output cut to its first line) but the run kept every appended item
    // (for the store) and every compaction item (each sealing the whole turn) in its output: unbounded.
    const maxContextBytes = 200_000;
    const { url } = await testServer({ limits: { maxContextBytes } });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'run:\n$ ls', tools: [exec], tool_choice: 'required', context_management: [{ type: 'compaction', compact_threshold: 1000 }] });
    const output = 'a line of tool output\n'.repeat(500); // ~11 KB, cut to its first line by a compaction
    // An append is answered by the next pause or by an error event (which `next` rejects with).
    const pauseOrError = (): Promise<ServerEvent> => s.next('response.done').catch((err: unknown) => (err instanceof UnexpectedErrorEvent ? err.event : Promise.reject(err)));
    let refused: { code: string | null; message: string } | null = null;
    let e: ServerEvent = await s.next('response.done');
    for (let steps = 0; steps < 60 && e.type === 'response.done'; steps++) {
      s.send({ type: 'response.append', input: e.response.pending_tool_calls!.map((call_id) => ({ type: 'function_call_output', call_id, output })) });
      e = await pauseOrError();
      if (e.type === 'error') refused = e.error;
    }
    expect(refused?.code).toBe('context_length_exceeded');
    expect(refused?.message).toMatch(/kept for its whole life.*--max-context-bytes/);
    // Still paused: the cancel ends it, with an output within the budget.
    s.send({ type: 'response.cancel' });
    const end = (await s.next('response.cancelled')).response;
    const rec = await record(url, end.id);
    expect(rec.counters['compactions']).toBeGreaterThan(1);
    expect(rec.counters['appends']! * output.length).toBeLessThan(maxContextBytes);
    expect(JSON.stringify(end.output).length).toBeLessThan(maxContextBytes);
  });

  it('a long-lived run of long one-line outputs reaches its budget no sooner than one of multi-line outputs as long', async () => {
    // Compaction kept a long one-line output whole (it cut only multi-line ones), so each compaction item sealed
    // every such output of the turn again and the run was refused at a fraction of the steps (outside attack).
    const maxContextBytes = 300_000;
    const { url } = await testServer({ limits: { maxContextBytes } });
    const stepsTo = async (output: (i: number) => string): Promise<number> => {
      const s = await RawSocket.longLived(url);
      s.send({ type: 'response.create', model: 'sim-model', input: 'run:\n$ ls', tools: [exec], tool_choice: 'required', context_management: [{ type: 'compaction', compact_threshold: 100 }] });
      let e: ServerEvent = await s.next('response.done');
      let steps = 0;
      for (; steps < 200 && e.type === 'response.done'; steps++) {
        s.send({ type: 'response.append', input: e.response.pending_tool_calls!.map((call_id) => ({ type: 'function_call_output', call_id, output: output(steps) })) });
        e = await s.next('response.done').catch((err: unknown) => (err instanceof UnexpectedErrorEvent ? err.event : Promise.reject(err)));
      }
      expect(e.type === 'error' && e.error.code).toBe('context_length_exceeded');
      s.send({ type: 'response.cancel' });
      await s.next('response.cancelled');
      s.dispose();
      return steps;
    };
    const single = await stepsTo((i) => `o${i} ${'x'.repeat(5000)}`);
    const multi = await stepsTo((i) => Array.from({ length: 80 }, (_, k) => `line ${k} of output ${i} ${'y'.repeat(48)}`).join('\n'));
    expect(single).toBeGreaterThanOrEqual(multi);
  });

  it('WebSocket mode: the connection cache keeps the compacted window for the next continuation', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    const cm = [{ type: 'compaction', compact_threshold: 800 }];
    s.send({ type: 'response.create', model: 'sim-model', store: false, input: 'run:\n$ cat big', tools: [exec], context_management: cm });
    const first = (await s.next('response.completed')).response;
    const call = first.output.find((i) => i.type === 'function_call') as FunctionCall;
    s.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: first.id, tools: [exec], context_management: cm, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'y\n'.repeat(3000) }] });
    const second = (await s.next('response.completed')).response;
    expect(second.output.map((i) => i.type)).toEqual(['compaction', 'message']);
    s.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: second.id, tools: [exec], context_management: cm, input: 'thanks' });
    const third = (await s.next('response.completed')).response;
    expect(third.output.map((i) => i.type)).toEqual(['message']);
    expect(third.usage!.input_tokens).toBeLessThan(800);
    expect((await record(url, third.id)).counters['rendered_cache_hits']).toBe(1);
  });
});
