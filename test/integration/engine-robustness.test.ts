/**
 * The engine's guarantees seen on the wire (real sockets, port 0): an event
 * that cannot be serialised ends the run once instead of crashing the
 * process or leaving it `in_progress`; two model calls sharing a call_id fail
 * the run and let the server close; the per-run context budget refuses a
 * create or an append with `context_length_exceeded` and keeps a paused run
 * paused.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import type { LlrServer } from '../../src/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const DEEP = '['.repeat(6000) + ']'.repeat(6000);
/** tool_choice with a field nested deeper than JSON.stringify can recurse: every snapshot of the Response carries it. */
const DEEP_FIELDS = `"tools":[${JSON.stringify(tool)}],"tool_choice":{"type":"function","name":"lookup","extra":${DEEP}}`;

/** No run is left in_progress, and each one that started is billed exactly once. */
async function allEndedOnce(server: LlrServer) {
  await server.services.postWork.flush();
  for (const rec of server.services.records.list()) {
    expect(rec.status).not.toBe('in_progress');
    expect(rec.ended_at).not.toBeNull();
    expect(server.services.ledger.countFor(rec.response_id)).toBe(1);
  }
}

describe('an event that cannot be serialised', () => {
  it('HTTP stream:true: a clean error (or an edge 400), the process lives, the run ends once', async () => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'hi' }, { text: 'still here' }]) });
    const body = `{"model":"sim-model","input":"hi","stream":true,${DEEP_FIELDS}}`;
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const text = await res.text();
    if (res.status === 200) {
      // The engine path: the run failed with a server_error and the stream ended.
      expect(text).toMatch(/event: error\ndata: \{"type":"error","code":"server_error"/);
      expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
      expect(server.services.records.list().map((r) => r.status)).toEqual(['failed']);
    } else {
      // Refused at the edge (a depth bound): a well-formed client error.
      expect(res.status).toBe(400);
      expect((JSON.parse(text) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    }
    await allEndedOnce(server);
    const next = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: 'again' }) });
    expect(((await next.json()) as { status: string }).status).toBe('completed');
  });

  it.each(['long-lived', 'ws'] as const)('%s: an error event, the run recorded failed and billed once, the socket still serves', async (protocol) => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'hi' }, { text: 'still here' }]) });
    const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
    s.send(`{"type":"response.create","model":"sim-model","input":"hi",${DEEP_FIELDS}}`);
    const err = await s.next('error');
    // The engine's server_error, or refused at the edge (a value check or the JSON depth bound).
    expect(['server_error', 'invalid_value', 'invalid_type', 'json_too_deep']).toContain(err.error.code);
    await allEndedOnce(server);
    s.send({ type: 'response.create', model: 'sim-model', input: 'again' });
    expect((await s.next('response.completed')).response.status).toBe('completed');
    await allEndedOnce(server);
  });
});

describe('two model calls sharing a call_id', () => {
  const dup = () =>
    scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_same' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_same' }] },
      { text: 'unreachable' },
    ]);

  it.each(['long-lived', 'ws'] as const)('%s: the run fails with duplicate_call_id and server.close() returns', async (protocol) => {
    const { url, server } = await testServer({ policy: dup() });
    const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool] });
    const err = await s.next('error');
    expect(err.error).toMatchObject({ code: 'duplicate_call_id', type: 'server_error' });
    const failed = await s.next('response.failed');
    // The Response's error.code is from the spec's closed enum; the precise code is the error event's.
    expect(failed.response.error).toMatchObject({ code: 'server_error', message: err.error.message });
    expect(s.all('response.done')).toEqual([]);
    await allEndedOnce(server);
    await server.close();
  });
});

describe('a model call taking a call_id already in the context', () => {
  // A call under an id the conversation had answered was not paused for: the run went on without it and ended
  // `completed`, the client never told (outside attack: a restarted server's model drew the ids it drew before).
  const history = [
    { role: 'user', content: 'go' },
    { type: 'function_call', call_id: 'call_old', name: 'lookup', arguments: '{"q":"a"}' },
    { type: 'function_call_output', call_id: 'call_old', output: 'found' },
    { role: 'user', content: 'again' },
  ];

  it.each(['long-lived', 'ws'] as const)('%s: a model that reuses one fails the run with duplicate_call_id, never completes past it', async (protocol) => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_old' }] }, { text: 'unreachable' }]);
    const { url, server } = await testServer({ policy });
    const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: history, tools: [tool] });
    expect((await s.next('error')).error).toMatchObject({ code: 'duplicate_call_id', type: 'server_error' });
    await s.next('response.failed');
    expect(s.all('response.completed')).toEqual([]);
    await allEndedOnce(server);
  });

  it('the simulated model never draws one: a fresh server given a history with the ids it draws first still pauses for its new call', async () => {
    const shell = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } };
    // The first server's first call: the id every server with this seed draws first.
    const first = await testServer();
    const r1 = await fetch(`${first.url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: '$ ls', tools: [shell] }) });
    const call = ((await r1.json()) as { output: Array<{ type: string; call_id: string; name: string; arguments: string }> }).output.find((i) => i.type === 'function_call')!;
    expect(call).toBeDefined();
    // A second server (a restart), the client's full history with that call answered, and a new command.
    const { url, server } = await testServer();
    const s = await RawSocket.longLived(url);
    const input = [
      { role: 'user', content: '$ ls' },
      { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: 'README.md' },
      { role: 'user', content: '$ make test' },
    ];
    s.send({ type: 'response.create', model: 'sim-model', input, tools: [shell] });
    const paused = await s.next('response.done');
    expect(paused.response.status).toBe('in_progress');
    const pending = paused.response.pending_tool_calls ?? [];
    expect(pending).toHaveLength(1);
    expect(pending[0]).not.toBe(call.call_id);
    s.send({ type: 'response.cancel' });
    await s.next('response.cancelled');
    await allEndedOnce(server);
  });
});

describe('the per-run context budget', () => {
  const create = (extra: Record<string, unknown> = {}) => ({ type: 'response.create', model: 'sim-model', input: 'go', tools: [tool], ...extra });
  const note = (text: string) => ({ type: 'message', role: 'user', content: text });

  it('long-lived: appends that answer nothing are refused past the item budget; the run stays paused and can finish', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);
    // The context holds the input and the call (2 items); 4 leaves room for one note and the output.
    const { url, server } = await testServer({ policy, limits: { maxContextItems: 4 } });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const paused = await s.next('response.done');
    s.send({ type: 'response.append', input: [note('one')] });
    s.send({ type: 'response.append', input: [note('two'), note('three')] });
    const err = await s.next('error');
    expect(err.status).toBe(400);
    expect(err.error).toMatchObject({ code: 'context_length_exceeded', type: 'invalid_request_error', param: 'input' });
    expect(err.error.message).toMatch(/--max-context-items/);
    expect(err.sequence_number).toBeTypeOf('number');
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    const end = await s.next('response.completed');
    expect(end.response.id).toBe(paused.response.id);
    expect(server.services.records.get(end.response.id)!.counters['appends']).toBe(2);
  });

  it('long-lived: an append past the byte budget is refused and nothing of it is applied', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);
    const { url, server } = await testServer({ policy, limits: { maxContextBytes: 4096 } });
    const s = await RawSocket.longLived(url);
    s.send(create());
    await s.next('response.done');
    s.send({ type: 'response.append', input: [note('x'.repeat(5000))] });
    const err = await s.next('error');
    expect(err.error.code).toBe('context_length_exceeded');
    expect(err.error.message).toMatch(/--max-context-bytes/);
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output: 'ok' }] });
    const end = await s.next('response.completed');
    expect(server.services.records.get(end.response.id)!.counters['appends']).toBe(1);
  });

  it.each(['long-lived', 'ws'] as const)('%s: a create whose context is over the budget gets a 400, no run starts', async (protocol) => {
    const { url, server } = await testServer({ policy: scriptPolicy([{ text: 'fits' }]), limits: { maxContextBytes: 4096 } });
    const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
    s.send(create({ input: 'y'.repeat(5000) }));
    const err = await s.next('error');
    expect(err.status).toBe(400);
    expect(err.error.code).toBe('context_length_exceeded');
    expect(server.services.records.list()).toEqual([]);
    s.send(create({ input: 'small' }));
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it('ws: a chain of continuations that outgrows the budget is refused, and the id is evicted', async () => {
    const policy = scriptPolicy([{ text: 'one' }, { text: 'two' }, { text: 'three' }]);
    const { url } = await testServer({ policy, limits: { maxContextItems: 4 } });
    const s = await RawSocket.connect(url);
    s.send(create({ input: 'a', store: false }));
    const first = await s.next('response.completed'); // 2 items: input, answer
    s.send(create({ input: 'b', store: false, previous_response_id: first.response.id }));
    const second = await s.next('response.completed'); // 4 items
    s.send(create({ input: 'c', store: false, previous_response_id: second.response.id }));
    const err = await s.next('error');
    expect(err.error.code).toBe('context_length_exceeded');
    // The failed continuation evicted the cache entry, so store:false can no longer continue from it.
    s.send(create({ input: 'c', store: false, previous_response_id: second.response.id }));
    expect((await s.next('error')).error.code).toBe('previous_response_not_found');
  });
});
