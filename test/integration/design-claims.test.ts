/**
 * The claim of the long-lived design, read from the server's own counters:
 * in a run with N tool calls, full-context work (validate, render, scan),
 * routing and post-inference work each run exactly once, and each append
 * costs exactly the tokens of the appended items — while the prompt the
 * model sees is identical to a full re-render of the whole context.
 */
import { describe, expect, it } from 'vitest';
import { connectClient } from '../../src/client/index.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { SimulatedModel } from '../../src/model/simulated.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { renderAppend, renderFull } from '../../src/pipeline/render.js';
import type { InputItem } from '../../src/protocol/objects.js';
import type { Protocol } from '../../src/protocol/designs.js';
import type { RunRecord } from '../../src/engine/records.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { SseStream, postJson } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

const N = 6;
const tool = { type: 'function', name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } } };

/** Tokens that rendering just these items costs, measured on its own. */
function tokensOf(items: InputItem[]): number {
  const m = new RunMetrics();
  renderAppend(renderFull(null, [], [], new RunMetrics()), items, m);
  return m.counters.tokens_tokenized;
}

async function record(url: string, id: string): Promise<RunRecord> {
  const res = await fetch(`${url}/llr/runs/${id}`);
  return (await res.json()) as RunRecord;
}

/** One long-lived run, over the WebSocket or over HTTP: the same events, appended to the same way. */
interface LiveConn {
  next: RawSocket['next'];
  append(id: string, input: InputItem[]): Promise<void>;
}

async function openLive(design: 'long-lived' | 'long-lived-http', url: string, create: Record<string, unknown>): Promise<LiveConn> {
  if (design === 'long-lived') {
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', ...create });
    return { next: (type) => s.next(type), append: async (_id, input) => s.send({ type: 'response.append', input }) };
  }
  const s = await SseStream.open(url, create);
  return {
    next: (type) => s.next(type),
    append: async (id, input) => {
      expect((await postJson(`${url}/v1/responses/${id}/append`, { input })).status).toBe(202);
    },
  };
}

describe.each(['long-lived', 'long-lived-http'] as const)('%s design claims', (design) => {
  it(`a run with ${N} tool calls renders, routes and post-processes once; appends cost only their own tokens`, async () => {
    const steps = Array.from({ length: N }, (_, i) => ({ calls: [{ name: 'read_file', arguments: { path: `src/file${i}.ts` } }] }));
    const policy = scriptPolicy([...steps, { text: 'Read all the files.' }]);
    const model = new SimulatedModel({ policy, seed: 7, recordRequests: N + 1 });
    const { url, server } = await testServer({ model });
    const s = await openLive(design, url, { model: 'sim-model', instructions: 'Be brief.', input: 'read the files', tools: [tool], store: true, llr: { timing: true } });

    let before = -1;
    let appended: InputItem[] = [];
    for (let i = 0; i < N; i++) {
      const done = await s.next('response.done');
      const rec = await record(url, done.response.id);
      expect(rec.counters['pauses']).toBe(i + 1);
      if (i > 0) {
        // What the previous append cost, measured by the server, equals the appended items' own tokens.
        expect(rec.counters['tokens_tokenized']! - before).toBe(tokensOf(appended));
      }
      before = rec.counters['tokens_tokenized']!;
      const callId = done.response.pending_tool_calls![0]!;
      appended = [{ type: 'function_call_output', call_id: callId, output: `contents of file ${i}\n`.repeat(i + 1) }];
      await s.append(done.response.id, appended);
    }
    const end = await s.next('response.completed');
    const timing = await s.next('llr:timing');
    expect(timing.counters['tokens_tokenized']! - before).toBe(tokensOf(appended));
    await server.services.postWork.flush();

    const rec = await record(url, end.response.id);
    expect(rec.post_done).toBe(true);
    expect(rec.counters).toMatchObject({
      validate_full: 1,
      render_full: 1,
      safety_full: 1,
      route_full: 1,
      validate_incremental: N,
      render_incremental: N,
      safety_incremental: N,
      appends: N,
      model_calls: N + 1,
      post_inference: 1,
      billing_records: 1,
      persisted: 1,
    });
    expect(server.services.ledger.countFor(end.response.id)).toBe(1);
    expect(policy.remaining()).toBe(0);

    // The incrementally built prompt of the last model call is exactly a full re-render of its context.
    const last = model.calls.at(-1)!;
    const full = renderFull('Be brief.', [tool], last.items, new RunMetrics());
    expect(Array.from(last.promptTokens)).toEqual(Array.from(full.tokens.view()));
    // And earlier calls saw shorter prompts (snapshots, not the growing buffer).
    expect(model.calls[0]!.promptTokens.length).toBeLessThan(last.promptTokens.length);
    // Each call's items, read after the run went on, are the context as it stood at that call: the first call's its
    // input alone, and each later one two items more (the call and its output) — a prefix of the next (the context is
    // handed to the model without a copy per call, engine/run.ts `itemsAsOf`).
    const calls = model.calls;
    expect(calls).toHaveLength(N + 1);
    expect(calls[0]!.items).toHaveLength(1);
    for (let i = 1; i < calls.length; i++) {
      expect(calls[i]!.items).toHaveLength(1 + 2 * i);
      expect(calls[i]!.items.slice(0, calls[i - 1]!.items.length)).toEqual(calls[i - 1]!.items);
    }
  });
});

describe('what each design tokenizes over a 20-turn agent run', () => {
  const TURNS = 20;
  const execTool = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } };
  const prompt = `one at a time:\n${Array.from({ length: TURNS }, (_, i) => `$ echo ${i}`).join('\n')}`;

  async function run(protocol: Protocol) {
    const { url, server } = await testServer();
    const client = await connectClient(protocol, url);
    const agent = client.run({ model: 'sim-model', input: prompt, tools: [execTool], parallel_tool_calls: false }, () => 'ok');
    await agent;
    await client.close();
    const records = agent.responses.map((r) => server.services.records.get(r.id)!);
    return { agent, records };
  }

  it('http re-tokenizes the whole history on every request', async () => {
    const { agent, records } = await run('http');
    expect(records).toHaveLength(TURNS + 1);
    records.forEach((rec, k) => {
      // Request k carries the prompt plus k (call, output) pairs, all tokenized again.
      expect(rec.counters['items_tokenized']).toBe(1 + 2 * k);
      expect(rec.counters['render_full']).toBe(1);
    });
    const total = records.reduce((n, r) => n + r.counters['items_tokenized']!, 0);
    expect(total).toBe((TURNS + 1) * (TURNS + 1));
    expect(agent.transcript).toHaveLength(1 + 2 * TURNS + 1);
  });

  it('ws mode tokenizes each input item once', async () => {
    const { records } = await run('ws');
    expect(records).toHaveLength(TURNS + 1);
    expect(records.map((r) => r.counters['items_tokenized'])).toEqual(Array(TURNS + 1).fill(1));
    expect(records.slice(1).every((r) => r.counters['rendered_cache_hits'] === 1 && r.counters['render_full'] === 0)).toBe(true);
  });

  it.each(['long-lived', 'long-lived-http'] as const)('%s renders the context once for the whole run', async (design) => {
    const { records } = await run(design);
    expect(records).toHaveLength(1);
    expect(records[0]!.counters).toMatchObject({ render_full: 1, render_incremental: TURNS, items_tokenized: 1 + TURNS, model_calls: TURNS + 1 });
  });
});
