/**
 * Structured outputs as the openai SDK's own helpers use them: `zodTextFormat`
 * writes a json_schema `text.format` from a zod schema (with the `format` and
 * `pattern` of zod's string checks: `.ipv4()`, `.email()`, `.uuid()`,
 * `.regex()`, …) and `responses.parse` runs zod's parse on the model's text,
 * which throws when a value does not pass its check. A strict function tool
 * with a pattern and formats, read back by `responses.parse` too
 * (`parsed_arguments`), and the same over a stream (`responses.stream`).
 */
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { testServer } from '../helpers/server.js';

const Thing = z.object({
  ip: z.ipv4(),
  ip6: z.ipv6(),
  when: z.iso.datetime(),
  day: z.iso.date(),
  dur: z.iso.duration(),
  email: z.email(),
  id: z.uuid(),
  sku: z.string().regex(/^[A-Z]{3}-\d{4}$/),
  host: z.hostname(),
  slug: z.string().regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/).min(12).max(20),
  count: z.number().int().min(5).max(9),
  tags: z.array(z.string().min(2).max(8)).min(1).max(3),
  site: z.url(),
});

describe('structured outputs through the openai SDK and zod', () => {
  it('responses.parse with zodTextFormat: zod takes every value the model wrote, prompt after prompt', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    for (const input of ['describe a server', 'another one', 'a third, with detail', 'one more']) {
      const res = await client.responses.parse({ model: 'sim-model', input, text: { format: zodTextFormat(Thing, 'thing') } });
      expect(res.status).toBe('completed');
      // parse() ran zod on the text: a value failing its check would have thrown here.
      expect(res.output_parsed).not.toBeNull();
      expect(Thing.parse(res.output_parsed)).toEqual(res.output_parsed);
    }
  });

  it("the answer's text and the slots filled from the user's message keep to their property's bounds, format and pattern", async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    // `summary` and `answer` would hold the model's text, `location`, `query` and `url` the user's words.
    const Answer = z.object({
      summary: z.string().max(24),
      answer: z.string().min(3).max(40),
      explanation: z.string().regex(/^[A-Z][a-z ]+\.$/),
      location: z.string().max(6),
      query: z.string().regex(/^[a-z]+$/),
      url: z.url(),
      text: z.email(),
    });
    for (const input of ['What is the weather in San Francisco, California today? See https://example.org/a b', 'search for "blue whales" please']) {
      const res = await client.responses.parse({ model: 'sim-model', input, text: { format: zodTextFormat(Answer, 'answer') } });
      expect(Answer.parse(res.output_parsed)).toEqual(res.output_parsed);
    }
    // Where the text fits, it is the text.
    const Loose = z.object({ answer: z.string() });
    const res = await client.responses.parse({ model: 'sim-model', input: 'hi there', text: { format: zodTextFormat(Loose, 'loose') } });
    expect(res.output_parsed!.answer.split(' ').length).toBeGreaterThan(1);
  });

  it('responses.stream with zodTextFormat: the final response parses the same', async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = client.responses.stream({ model: 'sim-model', input: 'describe a server', text: { format: zodTextFormat(Thing, 'thing') } });
    let deltas = 0;
    stream.on('response.output_text.delta', () => deltas++);
    const final = await stream.finalResponse();
    expect(deltas).toBeGreaterThan(0);
    expect(Thing.parse(final.output_parsed)).toEqual(final.output_parsed);
  });

  it("a strict function tool's arguments with formats and a pattern: parsed_arguments pass the tool's schema", async () => {
    const { url } = await testServer();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    const parameters = z.toJSONSchema(z.object({ host: z.ipv4(), ticket: z.string().regex(/^[A-Z]{2,4}-[1-9]\d{0,5}$/), notify: z.email(), at: z.iso.datetime() }), { target: 'draft-7' });
    const Args = z.object({ host: z.ipv4(), ticket: z.string().regex(/^[A-Z]{2,4}-[1-9]\d{0,5}$/), notify: z.email(), at: z.iso.datetime() });
    const res = await client.responses.parse({
      model: 'sim-model',
      input: 'open a ticket for the host',
      tools: [{ type: 'function', name: 'open_ticket', parameters: { ...parameters, additionalProperties: false }, strict: true }],
      tool_choice: 'required',
    });
    const call = res.output.find((o) => o.type === 'function_call');
    expect(call).toBeDefined();
    expect(Args.parse((call as { parsed_arguments: unknown }).parsed_arguments)).toEqual((call as { parsed_arguments: unknown }).parsed_arguments);
  });
});
