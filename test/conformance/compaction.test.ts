/**
 * Compaction: `POST /v1/responses/compact` (through openai-node's
 * `responses.compact` and raw HTTP), and a compaction item sent back as input
 * on every design, where it replaces the history it summarises: the next
 * response's prompt is the smaller window (real token counts), a pending call
 * it carries can still be answered, and a tampered item is refused.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/engine/records.js';
import { scriptPolicy } from '../../src/model/policies.js';
import type { CompactedResponse, InputItem, Response } from '../../src/protocol/objects.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const long = (n: number) => Array.from({ length: n }, (_, i) => `line ${i} of a long tool output`).join('\n');

/** A finished conversation: two user turns, an answer, a tool call with a long output. */
const conversation: InputItem[] = [
  { type: 'message', role: 'user', content: 'First question about the build.' },
  { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me look at the logs.', annotations: [], logprobs: [] }] },
  { type: 'function_call', call_id: 'call_1', name: 'read_logs', arguments: '{"path":"build.log"}' },
  { type: 'function_call_output', call_id: 'call_1', output: long(200) },
  { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'The build failed in step 3.', annotations: [], logprobs: [] }] },
  { type: 'message', role: 'user', content: 'Second question: why step 3?' },
];

async function post<T>(url: string, path: string, body: unknown): Promise<{ status: number; json: T }> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as T };
}

describe('POST /v1/responses/compact', () => {
  it("refuses a field ResponseCompactParams does not have, 400 unknown_parameter naming it; --allow-unknown-parameters ignores it", async () => {
    const { url } = await testServer();
    const compact = (u: string, body: unknown) => fetch(`${u}/v1/responses/compact`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    for (const field of ['stream', 'tools', 'store', 'instructons']) {
      const res = await compact(url, { model: 'm', input: 'hi', [field]: field === 'tools' ? [] : false });
      expect(res.status, field).toBe(400);
      expect(((await res.json()) as { error: unknown }).error, field).toMatchObject({ type: 'invalid_request_error', code: 'unknown_parameter', param: field });
    }
    const every = { model: 'm', input: 'hi', instructions: 'x', previous_response_id: null, prompt_cache_key: 'k', prompt_cache_options: { ttl: '30m' }, prompt_cache_retention: 'in_memory', service_tier: 'auto', image: { context_compression: 'auto' } };
    expect((await compact(url, every)).status).toBe(200);
    // openai-node 7.59's `image` (request-level image options; outside conformance tester): its enum is checked.
    const badImage = await compact(url, { model: 'm', input: 'hi', image: { context_compression: 'always' } });
    expect(badImage.status).toBe(400);
    expect(((await badImage.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_value', param: 'image.context_compression' });
    const lenient = await testServer({ allowUnknownParameters: true });
    expect((await compact(lenient.url, { model: 'm', input: 'hi', stream: false })).status).toBe(200);
  });


  it('answers the compacted window: the user messages, then one compaction item, with real usage', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    const c = await client.responses.compact({ model: 'gpt-5.1-codex-max', input: conversation as never, instructions: 'Be brief.' });
    expect(c.object).toBe('response.compaction');
    expect(c.id).toMatch(/^resp_/);
    expect(Number.isInteger(c.created_at)).toBe(true);
    expect(c.output.map((i) => i.type)).toEqual(['message', 'message', 'compaction']);
    // Kept messages are output items: an id and a status, as the Open Responses `Message` schema
    // requires (its compliance suite's `compact-response` test failed on their absence).
    expect(c.output.slice(0, 2)).toEqual([
      { id: expect.stringMatching(/^msg_/), type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'First question about the build.' }] },
      { id: expect.stringMatching(/^msg_/), type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'Second question: why step 3?' }] },
    ]);
    expect(new Set(c.output.map((i) => i.id)).size).toBe(3);
    const item = c.output[2] as { id: string; encrypted_content: string };
    expect(item.id).toMatch(/^cmp_/);
    expect(item.encrypted_content).not.toContain('build');
    // input_tokens is the rendered window, the same prompt a create with this input gets.
    const { json: full } = await post<Response>(url, '/v1/responses', { model: 'sim-model', input: conversation, instructions: 'Be brief.' });
    expect(c.usage.input_tokens).toBe(full.usage!.input_tokens);
    expect(c.usage.output_tokens).toBeGreaterThan(0);
    expect(c.usage.total_tokens).toBe(c.usage.input_tokens + c.usage.output_tokens);
  });

  it('requires model, and something to compact', async () => {
    const { url } = await testServer();
    const noModel = await post<{ error: { code: string; param: string } }>(url, '/v1/responses/compact', { input: 'hi' });
    expect(noModel.status).toBe(400);
    expect(noModel.json.error).toMatchObject({ code: 'missing_required_parameter', param: 'model' });
    // Required but nullable (openai-node 7's `ResponseCompactParams.model: … | null`): a null names no model.
    const nullModel = await post<{ object: string }>(url, '/v1/responses/compact', { model: null, input: 'hi' });
    expect(nullModel.status).toBe(200);
    expect(nullModel.json.object).toBe('response.compaction');
    const emptyPrevious = await post<{ error: { code: string; param: string } }>(url, '/v1/responses/compact', { model: 'm', input: 'hi', previous_response_id: '' });
    expect(emptyPrevious.json.error).toMatchObject({ code: 'empty_string', param: 'previous_response_id' });
    const empty = await post<{ error: { param: string } }>(url, '/v1/responses/compact', { model: 'm' });
    expect(empty.status).toBe(400);
    expect(empty.json.error.param).toBe('input');
    const get = await fetch(`${url}/v1/responses/compact`);
    expect(get.status).toBe(405);
  });

  it('compacts a stored previous_response_id chain', async () => {
    const { url } = await testServer();
    const { json: first } = await post<Response>(url, '/v1/responses', { model: 'sim-model', input: 'Remember the number 42.' });
    const { json: c } = await post<CompactedResponse>(url, '/v1/responses/compact', { model: 'sim-model', previous_response_id: first.id, input: 'And 43.' });
    const texts = c.output.flatMap((i) => (i.type === 'message' && 'content' in i ? [(i.content as Array<{ text: string }>)[0]!.text] : []));
    expect(texts).toEqual(['Remember the number 42.', 'And 43.']);
  });
});

describe('a compaction item as input', () => {
  it('HTTP: replaces the history it summarises; the next prompt is the smaller window', async () => {
    const { url } = await testServer();
    const { json: c } = await post<CompactedResponse>(url, '/v1/responses/compact', { model: 'sim-model', input: conversation });
    const next = { type: 'message', role: 'user', content: 'Third question.' };
    const { json: full } = await post<Response>(url, '/v1/responses', { model: 'sim-model', input: [...conversation, next] });
    const { json: compacted } = await post<Response>(url, '/v1/responses', { model: 'sim-model', input: [...c.output, next] });
    // Sending the whole old history before the compaction item changes nothing: it is replaced.
    const { json: withOld } = await post<Response>(url, '/v1/responses', { model: 'sim-model', input: [...conversation, ...c.output, next] });
    expect(compacted.status).toBe('completed');
    expect(compacted.usage!.input_tokens).toBeLessThan(full.usage!.input_tokens / 3);
    expect(withOld.usage!.input_tokens).toBe(compacted.usage!.input_tokens);
    // The model answers the latest user message.
    const text = (compacted.output[0] as { content: Array<{ text: string }> }).content[0]!.text;
    expect(text).toContain('Third question');
    // And a continuation of a response whose input held the compaction starts from the compacted window.
    const { json: after } = await post<Response>(url, '/v1/responses', { model: 'sim-model', previous_response_id: compacted.id, input: 'Fourth.' });
    expect(after.usage!.input_tokens).toBeLessThan(full.usage!.input_tokens / 3);
    const rec = (await (await fetch(`${url}/llr/runs/${after.id}`)).json()) as RunRecord;
    expect(rec.counters['compactions_applied']).toBe(1);
  });

  it('a pending call it carries can still be answered', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'thanks' }]) });
    const open: InputItem[] = [...conversation, { type: 'function_call', call_id: 'call_2', name: 'read_logs', arguments: '{}' }];
    const { json: c } = await post<CompactedResponse>(url, '/v1/responses/compact', { model: 'sim-model', input: open });
    const answer = { type: 'function_call_output', call_id: 'call_2', output: 'ok' };
    const res = await post<Response>(url, '/v1/responses', { model: 'sim-model', input: [...c.output, answer] });
    expect(res.status).toBe(200);
    const unknown = await post<{ error: { code: string } }>(url, '/v1/responses', { model: 'sim-model', input: [...c.output, { ...answer, call_id: 'call_1' }] });
    expect(unknown.json.error.code).toBe('unknown_call_id');
  });

  it('a tampered or foreign compaction item is refused with the param named', async () => {
    const { url } = await testServer();
    const { json: c } = await post<CompactedResponse>(url, '/v1/responses/compact', { model: 'sim-model', input: conversation });
    const item = c.output.at(-1) as { encrypted_content: string };
    const bad = { ...item, encrypted_content: `${item.encrypted_content.slice(0, -4)}AAAA` };
    const res = await post<{ error: { code: string; param: string } }>(url, '/v1/responses', { model: 'sim-model', input: [...c.output.slice(0, -1), bad] });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: 'invalid_value', param: 'input[2].encrypted_content' });
  });

  it('WebSocket mode: a continuation from the cached response with a compaction item rebuilds the smaller window', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', store: false, input: conversation });
    const first = (await s.next('response.completed')).response;
    const { json: c } = await post<CompactedResponse>(url, '/v1/responses/compact', { model: 'sim-model', input: conversation });
    s.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: first.id, input: [...c.output, { role: 'user', content: 'Next.' }] });
    const second = (await s.next('response.completed')).response;
    expect(second.usage!.input_tokens).toBeLessThan(first.usage!.input_tokens / 3);
    // The connection cache now holds the compacted window: the next continuation builds on it.
    s.send({ type: 'response.create', model: 'sim-model', store: false, previous_response_id: second.id, input: 'More.' });
    const third = (await s.next('response.completed')).response;
    expect(third.usage!.input_tokens).toBeLessThan(first.usage!.input_tokens / 2);
    const rec = (await (await fetch(`${url}/llr/runs/${third.id}`)).json()) as RunRecord;
    expect(rec.counters['rendered_cache_hits']).toBe(1);
  });

  it('long-lived: a create may start from a compaction; an append may not carry one', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'ok' }, { calls: [{ name: 'f', arguments: {}, call_id: 'call_x' }] }]) });
    const { json: c } = await post<CompactedResponse>(url, '/v1/responses/compact', { model: 'sim-model', input: conversation });
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.create', model: 'sim-model', input: [...c.output, { role: 'user', content: 'Go on.' }] });
    const done = (await s.next('response.completed')).response;
    expect(done.usage!.input_tokens).toBeGreaterThan(0);
    s.send({ type: 'response.create', model: 'sim-model', input: 'call f', tools: [{ type: 'function', name: 'f' }] });
    await s.next('response.done');
    s.send({ type: 'response.append', input: [c.output.at(-1)] });
    const err = await s.next('error');
    expect(err.error).toMatchObject({ code: 'invalid_value', param: 'input[0]' });
  });
});
