/**
 * A response cut by `max_output_tokens` closes its open item the way the API
 * does: `output_text.done`, `content_part.done`, then `output_item.done` with
 * status `incomplete` (for a cut function call: `function_call_arguments.done`
 * then `output_item.done`), all before `response.incomplete`. Over SSE and
 * both WebSocket protocols.
 */
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import type { Response } from '../../src/protocol/objects.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

// Well past the smallest budget the API accepts (16 tokens).
const LONG = 'one two three four five six seven eight nine ten eleven twelve '.repeat(4).trim();

async function sse(url: string, body: unknown): Promise<ServerEvent[]> {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  return text
    .split('\n\n')
    .map((f) => f.split('\n').find((l) => l.startsWith('data: '))?.slice(6))
    .filter((d): d is string => d !== undefined && d !== '[DONE]')
    .map((d) => JSON.parse(d) as ServerEvent);
}

function tail(events: ServerEvent[]): string[] {
  const types = events.map((e) => e.type);
  return types.slice(types.lastIndexOf('response.output_item.added'));
}

describe('truncated output', () => {
  it('SSE: a cut message gets its done events with status incomplete, then response.incomplete', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: LONG }]) });
    const events = await sse(url, { model: 'sim-model', input: 'talk', stream: true, max_output_tokens: 16 });
    const t = tail(events);
    expect(t.filter((x) => x === 'response.output_text.delta')).toHaveLength(16);
    expect(t.filter((x) => x !== 'response.output_text.delta')).toEqual([
      'response.output_item.added', 'response.content_part.added',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete',
    ]);
    const textDone = events.find((e) => e.type === 'response.output_text.done') as Extract<ServerEvent, { type: 'response.output_text.done' }>;
    const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as { delta: string }).delta).join('');
    expect(textDone.text).toBe(deltas);
    const itemDone = events.find((e) => e.type === 'response.output_item.done') as Extract<ServerEvent, { type: 'response.output_item.done' }>;
    expect(itemDone.item).toMatchObject({ status: 'incomplete' });
    const final = (events.at(-1) as { response: Response }).response;
    expect(final.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(final.output[0]).toMatchObject({ status: 'incomplete', content: [{ text: deltas }] });
    expect(final.usage!.output_tokens).toBe(16);
    const seqs = events.map((e) => e.sequence_number);
    expect(seqs).toEqual(seqs.map((_, i) => i));
  });

  it('SSE: a cut function call gets arguments.done and output_item.done (incomplete)', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ calls: [{ name: 'f', arguments: { text: LONG } }] }]) });
    const events = await sse(url, { model: 'sim-model', input: 'go', stream: true, max_output_tokens: 16, tools: [{ type: 'function', name: 'f' }] });
    expect(tail(events).filter((x) => x !== 'response.function_call_arguments.delta')).toEqual([
      'response.output_item.added', 'response.function_call_arguments.done', 'response.output_item.done', 'response.incomplete',
    ]);
    const itemDone = events.find((e) => e.type === 'response.output_item.done') as Extract<ServerEvent, { type: 'response.output_item.done' }>;
    expect(itemDone.item).toMatchObject({ type: 'function_call', status: 'incomplete' });
  });

  it('WebSocket mode and the long-lived protocol close the cut item before the terminal event', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: LONG }, { text: LONG }]) });
    for (const s of [await RawSocket.connect(url), await RawSocket.longLived(url)]) {
      s.send({ type: 'response.create', model: 'sim-model', input: 'talk', max_output_tokens: 16 });
      await s.next('response.incomplete');
      const t = tail(s.events);
      expect(t.slice(0, t.indexOf('response.incomplete') + 1).slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete']);
    }
  });

  // Found by a state-machine fuzzer: the server refused its own stored output. A call cut mid-arguments keeps
  // arguments that are not JSON, and every continuation from that response (previous_response_id, HTTP or a
  // ws-mode cache miss), or a stateless client sending the output back, got 400 invalid_value
  // `previous_response_id[1].arguments` / `input[1].arguments`.
  it('a continuation from a response with a cut function call is accepted (stored, and sent back as input)', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ calls: [{ name: 'f', arguments: { text: LONG } }] }, { text: 'next' }, { text: 'again' }]) });
    const tools = [{ type: 'function', name: 'f' }];
    const post = (body: unknown) =>
      fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const cut = (await (await post({ model: 'sim-model', input: 'go', max_output_tokens: 16, tools })).json()) as Response;
    expect(cut.status).toBe('incomplete');
    expect(cut.output[0]).toMatchObject({ type: 'function_call', status: 'incomplete' });
    expect(() => JSON.parse((cut.output[0] as { arguments: string }).arguments)).toThrow();
    const next = await post({ model: 'sim-model', input: 'go on', previous_response_id: cut.id, tools });
    expect(await next.json()).toMatchObject({ status: 'completed', previous_response_id: cut.id });
    const stateless = await post({ model: 'sim-model', input: [{ role: 'user', content: 'go' }, cut.output[0], { role: 'user', content: 'go on' }], tools, store: false });
    expect(await stateless.json()).toMatchObject({ status: 'completed' });
  });
});
