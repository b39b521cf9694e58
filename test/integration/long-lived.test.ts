/**
 * The long-lived protocol end to end on real sockets: one Response for a
 * whole agent run, pausing at each client tool call and resuming on append.
 */
import { describe, expect, it } from 'vitest';
import { LongLivedClient } from '../../src/client/long-lived.js';
import { ServerError } from '../../src/client/driver.js';
import { scriptPolicy } from '../../src/model/policies.js';
import type { FunctionCall } from '../../src/protocol/objects.js';
import { testServer } from '../helpers/server.js';

const shellTool = {
  type: 'function',
  name: 'exec_command',
  description: 'run a command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
};

describe('long-lived run', () => {
  it('runs three tool calls in one response with continuing sequence numbers', async () => {
    const { url, server } = await testServer();
    const client = await LongLivedClient.connect(url);
    const seen: string[] = [];
    const run = client.run(
      { model: 'sim-model', input: 'please run:\n$ echo one\n$ echo two\n$ echo three', tools: [shellTool], parallel_tool_calls: false },
      (call: FunctionCall) => {
        const { cmd } = JSON.parse(call.arguments) as { cmd: string };
        seen.push(cmd);
        return cmd.replace('echo ', '') + '\n';
      },
    );
    const ids = new Set<string>();
    const seqs: number[] = [];
    for await (const e of run) {
      if ('sequence_number' in e && typeof e.sequence_number === 'number') seqs.push(e.sequence_number);
      if ('response' in e) ids.add(e.response.id);
    }
    const response = await run;
    expect(seen).toEqual(['echo one', 'echo two', 'echo three']);
    expect(ids.size).toBe(1);
    expect(seqs).toEqual(seqs.map((_, i) => i));
    expect(response.status).toBe('completed');
    expect(response.output.filter((i) => i.type === 'function_call')).toHaveLength(3);
    const last = response.output.at(-1);
    expect(last?.type).toBe('message');
    expect(run.responses).toHaveLength(1);
    const timing = run.timings[0]!;
    expect(timing.counters['pauses']).toBe(3);
    expect(timing.counters['render_full']).toBe(1);
    expect(timing.counters['route_full']).toBe(1);
    await client.close();
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(response.id)).toBe(1);
  });

  it('an append the server refuses fails the run with its error, the run ends on the server, and the client runs again', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'exec_command', arguments: { cmd: 'cat .env' }, call_id: 'call_a' }] }, { text: 'done' }]);
    const { url, server } = await testServer({ policy });
    const client = await LongLivedClient.connect(url);
    // A tool output carrying a credential: the append's safety scan refuses it and the run stays paused
    // on the server; the client used to ignore the error and wait for the pause timeout (10 minutes).
    const run = client.run({ model: 'sim-model', input: 'go', tools: [shellTool] }, () => 'key: AKIAABCDEFGHIJKLMNOP');
    const err = await run.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServerError);
    expect((err as ServerError).code).toBe('content_flagged');
    expect((err as ServerError).message).toMatch(/\(The server refused this client's append to its paused run, and the client ended the run: it cannot send less\.\)$/);
    expect(run.responses.map((r) => r.status)).toEqual(['cancelled']);
    // The connection is usable: the next run gets its own events, not the old run's.
    const again = await client.run({ model: 'sim-model', input: 'go', tools: [shellTool] }, () => 'fine');
    expect(again.status).toBe('completed');
    await client.close();
    await server.services.postWork.flush();
    const recs = server.services.records.page({ owner: null, limit: 10, after: null, order: 'asc' }).data;
    expect(recs.map((r) => r.status)).toEqual(['cancelled', 'completed']);
  });
  it('a run the server ends incomplete after refusing its append fails with the refusal, not only its status (atk89 F3)', async () => {
    // An append larger than the whole budget: the server ends the run `incomplete` after its `error` event
    // (payload_too_large, then the close 1009): the client said only "the run ended incomplete" (the demo's long-lived
    // lane showed that), not the server's reason.
    const policy = scriptPolicy([{ calls: [{ name: 'exec_command', arguments: { cmd: 'ls' }, call_id: 'call_a' }] }, { text: 'done' }]);
    const { url } = await testServer({ policy, limits: { maxServerBytes: 600_000 } });
    const client = await LongLivedClient.connect(url);
    const run = client.run({ model: 'sim-model', input: 'go', tools: [shellTool] }, () => 'y'.repeat(700_000));
    const err = await run.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServerError);
    expect((err as ServerError).code).toBe('payload_too_large');
    expect((err as ServerError).message).toContain('the client ended the run');
    await client.close();
  });

  it("a run cancelled while its tool runs: the tool's outputs, once it finishes, are not appended to the next run on the connection", async () => {
    // response.append names no response: the connection's paused run takes it. The first run's late outputs were sent
    // while the second run was paused; it refused them (unknown_call_id), and the client then cancelled it (the
    // refused-append path), unless the second's own append got in first.
    const policy = scriptPolicy([
      { calls: [{ name: 'exec_command', arguments: { cmd: 'one' }, call_id: 'call_a' }] },
      { calls: [{ name: 'exec_command', arguments: { cmd: 'two' }, call_id: 'call_b' }] },
      { text: 'done' },
    ]);
    const { url } = await testServer({ policy });
    const client = await LongLivedClient.connect(url);
    // What the client sends on the connection.
    const sent: string[] = [];
    const sock = (client as unknown as { socket: { send: (m: unknown) => void } }).socket;
    const send = sock.send.bind(sock);
    sock.send = (m: unknown) => (sent.push(JSON.stringify(m)), send(m));
    let inFirst!: () => void;
    const firstCalled = new Promise<void>((res) => (inFirst = res));
    let releaseFirst!: () => void;
    const firstGate = new Promise<void>((res) => (releaseFirst = res));
    const first = client.run({ model: 'sim-model', input: 'go', tools: [shellTool] }, async () => {
      inFirst();
      await firstGate;
      return 'late';
    });
    await firstCalled;
    client.cancel();
    expect((await first).status).toBe('cancelled');
    let inSecond!: () => void;
    const secondCalled = new Promise<void>((res) => (inSecond = res));
    let releaseSecond!: () => void;
    const secondGate = new Promise<void>((res) => (releaseSecond = res));
    const second = client.run({ model: 'sim-model', input: 'again', tools: [shellTool] }, async () => {
      inSecond();
      await secondGate;
      return 'ok';
    });
    await secondCalled;
    // The first run's tool finishes while the second run is paused; then the second's (frames keep their order).
    releaseFirst();
    await new Promise((res) => setImmediate(res));
    expect(sent.filter((m) => m.includes('"call_a"'))).toEqual([]);
    releaseSecond();
    const outcome = await second.then(
      (r) => r.status,
      (e: unknown) => String(e),
    );
    expect(outcome).toBe('completed');
    await client.close();
  });
});
