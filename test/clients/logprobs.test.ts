/**
 * Logprobs as clients ask for them: `include: ["message.output_text.logprobs"]`
 * with `top_logprobs` through the openai SDK (a Response, a stream), over
 * WebSocket mode and through a long-lived run of several model calls, and
 * the per-response bound (`--max-logprob-tokens`). Each text delta lists its
 * piece's logprob; the text part and `output_text.done` list them all, in
 * order, their tokens joining to the text.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const INCLUDE = ['message.output_text.logprobs' as const];
type Part = { text: string; logprobs: Array<{ token: string; bytes: number[]; logprob: number; top_logprobs: Array<{ token: string; bytes: number[]; logprob: number }> }> };

/** A text part's logprobs hold together: one per piece, joining to the text, each with `top` alternatives, the piece first. */
function checkPart(part: Part, top: number): void {
  expect(part.logprobs.length).toBeGreaterThan(3);
  expect(part.logprobs.map((l) => l.token).join('')).toBe(part.text);
  for (const l of part.logprobs) {
    expect(Buffer.from(l.bytes).toString('utf8')).toBe(l.token);
    expect(l.top_logprobs).toHaveLength(top);
    if (top > 0) expect(l.top_logprobs[0]).toEqual({ token: l.token, bytes: l.bytes, logprob: l.logprob });
  }
}

describe('logprobs through the openai SDK', () => {
  it('a Response lists them in its text part with top_logprobs alternatives; retrieved the same; none unless asked', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.responses.create({ model: 'sim-model', input: 'Describe the weather in one sentence.', include: INCLUDE, top_logprobs: 4 });
    const msg = r.output.find((o) => o.type === 'message')!;
    const part = msg.content[0] as unknown as Part;
    checkPart(part, 4);
    expect(r.top_logprobs).toBe(4);
    const again = await client.responses.retrieve(r.id);
    expect((again.output.find((o) => o.type === 'message')!.content[0] as unknown as Part).logprobs).toEqual(part.logprobs);
    // top_logprobs 0 (or absent): each token's own logprob, no alternatives.
    checkPart((await client.responses.create({ model: 'sim-model', input: 'Describe the weather in one sentence.', include: INCLUDE })).output.find((o) => o.type === 'message')!.content[0] as unknown as Part, 0);
    // Not asked for (top_logprobs alone does not ask): none, as before.
    const plain = await client.responses.create({ model: 'sim-model', input: 'Describe the weather in one sentence.', top_logprobs: 4 });
    expect((plain.output.find((o) => o.type === 'message')!.content[0] as unknown as Part).logprobs).toEqual([]);
    expect(plain.output_text).toBe(r.output_text);
  });

  it('streamed: each delta lists its piece, output_text.done all of them, and the part the same with bytes', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await client.responses.create({ model: 'sim-model', input: 'Tell me about the sea.', include: INCLUDE, top_logprobs: 2, stream: true });
    const deltas: Array<{ delta: string; logprobs: unknown[] }> = [];
    let done: { text: string; logprobs: unknown[] } | undefined;
    let part: Part | undefined;
    for await (const e of stream) {
      if (e.type === 'response.output_text.delta') deltas.push(e);
      if (e.type === 'response.output_text.done') done = e;
      if (e.type === 'response.completed') part = e.response.output.find((o) => o.type === 'message')!.content[0] as unknown as Part;
    }
    checkPart(part!, 2);
    expect(deltas.map((d) => d.delta).join('')).toBe(part!.text);
    const eventShape = part!.logprobs.map((l) => ({ token: l.token, logprob: l.logprob, top_logprobs: l.top_logprobs.map(({ token, logprob }) => ({ token, logprob })) }));
    expect(deltas.map((d) => d.logprobs)).toEqual(eventShape.map((l) => [l]));
    expect(done!.logprobs).toEqual(eventShape);
  });
});

describe('logprobs over WebSocket mode and through a long-lived run', () => {
  it('ws mode: the deltas and the completed Response list them', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'Say something short.', include: INCLUDE, top_logprobs: 1 });
    const completed = await s.next('response.completed');
    const part = (completed.response.output.find((o) => o.type === 'message') as { content: Part[] }).content[0]!;
    checkPart(part, 1);
    expect(s.all('response.output_text.delta').flatMap((d) => d.logprobs)).toHaveLength(part.logprobs.length);
    s.dispose();
  });

  it('a long-lived run lists them for every model call, until --max-logprob-tokens for the whole run; past it deltas list none', async () => {
    const policy = () => scriptPolicy([{ text: 'First I will look it up.', calls: [{ name: 'lookup', arguments: { q: 'x' }, call_id: 'call_1' }] }, { text: 'Then the answer is forty-two, as the lookup said.' }]);
    const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } }];
    const run = async (limits?: { maxLogprobTokens: number }) => {
      const { url } = await testServer({ policy: policy(), ...(limits && { limits }) });
      const s = await RawSocket.longLived(url);
      s.send({ type: 'response.create', model: 'sim-model', input: 'go', tools, include: INCLUDE, top_logprobs: 3 });
      await s.next('response.done');
      s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_1', output: 'forty-two' }] });
      const end = await s.next('response.completed');
      const parts = end.response.output.filter((o) => o.type === 'message').map((m) => (m as { content: Part[] }).content[0]!);
      const deltas = s.all('response.output_text.delta') as Array<Extract<ServerEvent, { type: 'response.output_text.delta' }>>;
      s.dispose();
      return { parts, deltas };
    };
    const whole = await run();
    expect(whole.parts).toHaveLength(2);
    for (const p of whole.parts) checkPart(p, 3);
    const pieces = whole.deltas.length;
    expect(whole.deltas.every((d) => d.logprobs.length === 1)).toBe(true);
    // Bounded: the first 7 pieces of the run list theirs (all in the first call's text), the rest none.
    const cut = await run({ maxLogprobTokens: 7 });
    expect(cut.deltas).toHaveLength(pieces);
    expect(cut.deltas.map((d) => d.logprobs.length)).toEqual(whole.deltas.map((_, i) => (i < 7 ? 1 : 0)));
    expect(cut.parts.map((p) => p.logprobs.length)).toEqual([7, 0]);
    expect(cut.parts[0]!.logprobs).toEqual(whole.parts[0]!.logprobs.slice(0, 7));
  });
});

describe('logprobs and the limits around them', () => {
  const text = 'The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun by the river bank.';
  const body = { model: 'sim-model', input: 'go', include: INCLUDE, top_logprobs: 2 };

  it('max_output_tokens cutting the text keeps the logprobs of every piece sent, and the part matches the cut text', async () => {
    for (const chaos of [undefined, ['latency@first-token:0:1']]) {
      // With a chaos rule (probability 0) every token is its own event: the other path through the engine.
      const { url } = await testServer({ policy: scriptPolicy([{ text }]), ...(chaos && { chaos }) });
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
      const r = await client.responses.create({ ...body, max_output_tokens: 16 });
      expect(r.status).toBe('incomplete');
      const part = r.output.find((o) => o.type === 'message')!.content[0] as unknown as Part;
      expect(part.logprobs).toHaveLength(16);
      checkPart(part, 2);
    }
  });

  it('--max-logprob-tokens bounds the part and output_text.done on every path, and the model makes no more than it', async () => {
    for (const chaos of [undefined, ['latency@first-token:0:1']]) {
      const policy = scriptPolicy([{ text }]);
      const { url } = await testServer({ policy, limits: { maxLogprobTokens: 5 }, ...(chaos && { chaos }) });
      const s = await RawSocket.connect(url);
      s.send({ type: 'response.create', ...body });
      const done = await s.next('response.output_text.done');
      const end = await s.next('response.completed');
      const part = (end.response.output.find((o) => o.type === 'message') as { content: Part[] }).content[0]!;
      expect(part.logprobs).toHaveLength(5);
      expect(done.logprobs).toHaveLength(5);
      expect(s.all('response.output_text.delta').map((d) => d.logprobs.length).reduce((a, b) => a + b, 0)).toBe(5);
      s.dispose();
    }
  });

  it('a chain of answers with logprobs holds their text in its context, not their logprobs (--max-context-bytes)', async () => {
    const long = 'word '.repeat(400).trim();
    // 400 pieces at top_logprobs 20 list ~700 KB; the text is 2 KB: a context bound of 256 KB holds the text of many.
    const { url } = await testServer({ policy: scriptPolicy(Array.from({ length: 4 }, () => ({ text: long }))), limits: { maxContextBytes: 256 * 1024 } });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    let prev: string | undefined;
    for (let turn = 0; turn < 4; turn++) {
      const r = await client.responses.create({ model: 'sim-model', input: 'more', include: INCLUDE, top_logprobs: 20, ...(prev && { previous_response_id: prev }) });
      expect(r.status).toBe('completed');
      expect((r.output.find((o) => o.type === 'message')!.content[0] as unknown as Part).logprobs.length).toBeGreaterThan(300);
      prev = r.id;
    }
    // Over WebSocket mode, continuing from the connection's cache.
    const { url: wsUrl } = await testServer({ policy: scriptPolicy(Array.from({ length: 4 }, () => ({ text: long }))), limits: { maxContextBytes: 256 * 1024 } });
    const s = await RawSocket.connect(wsUrl);
    let last: string | undefined;
    for (let turn = 0; turn < 4; turn++) {
      s.send({ type: 'response.create', model: 'sim-model', input: 'more', include: INCLUDE, top_logprobs: 20, store: false, ...(last && { previous_response_id: last }) });
      last = (await s.next('response.completed')).response.id;
    }
    s.dispose();
  });
});

