/**
 * The model's output joins the prompt with the tokens the model produced
 * (pipeline/render.ts `appendOutput`, the ids of `message.end` / `call.end`):
 * the prompt must be token for token what encoding the whole item gives,
 * for random messages and calls, with or without the model's ids; and the
 * simulated model reports exactly the ids of what it streamed.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/model/rng.js';
import { encodeText } from '../../src/model/tokenizer.js';
import { SimulatedModel } from '../../src/model/simulated.js';
import { scriptPolicy } from '../../src/model/policies.js';
import type { ModelEvent, ModelRequest } from '../../src/model/types.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { appendOutput, renderAppend, renderFull } from '../../src/pipeline/render.js';
import type { InputItem } from '../../src/protocol/objects.js';

const PIECES = ['a', 'Hello', ' world', '\n', '\n\n', ' ', '  ', '/', '//', '!', '!!', '{', '"', '12345', 'é', '中文', '😀', '\t', "'s", 'x/y', '\r\n', '...'];

function randomText(rng: () => number): string {
  let s = '';
  const n = 1 + Math.floor(rng() * 12);
  for (let i = 0; i < n; i++) s += PIECES[Math.floor(rng() * PIECES.length)]!;
  return s;
}

function randomItem(rng: () => number, i: number): InputItem {
  const text = randomText(rng);
  if (rng() < 0.5) {
    return { id: `msg_${i}`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] } as unknown as InputItem;
  }
  const callId = rng() < 0.3 ? `call_${i}!` : `call_${i}`;
  return { id: `fc_${i}`, type: 'function_call', call_id: callId, name: 'exec_command', arguments: text, status: 'completed' } as InputItem;
}

describe('appendOutput', () => {
  it('gives the tokens of encoding each whole item, memo or not', () => {
    const rng = mulberry32(5);
    for (let i = 0; i < 1500; i++) {
      const item = randomItem(rng, i);
      const body = item.type === 'function_call' ? (item as { arguments: string }).arguments : (item as unknown as { content: Array<{ text: string }> }).content[0]!.text;
      const a = renderFull(null, [], [], new RunMetrics());
      const b = renderFull(null, [], [], new RunMetrics());
      appendOutput(a, [item], i % 2 === 0 ? [encodeText(body)] : []);
      renderAppend(b, [item], new RunMetrics());
      expect(Array.from(a.tokens.view()), JSON.stringify(item)).toEqual(Array.from(b.tokens.view()));
    }
  });

  it('the simulated model reports the ids of what it streamed, except when the pieces do not rejoin', async () => {
    const texts = ['Hello, world!', ' leading space', 'emoji 😀 and 中文', 'lone \ud83d surrogate'];
    const policy = scriptPolicy(texts.map((text) => ({ text })));
    const model = new SimulatedModel({ policy });
    for (const text of texts) {
      const req = { model: 'm', settings: { tokensPerSecond: Infinity, ttftBaseMs: 0, prefillTokensPerSecond: Infinity }, instructions: null, items: [], tools: [], tool_choice: 'auto', parallel_tool_calls: true, promptTokens: [], maxOutputTokens: null } as unknown as ModelRequest;
      const events: ModelEvent[] = [];
      for await (const e of model.sample(req, new AbortController().signal)) events.push(e);
      const streamed = events.map((e) => (e.type === 'text.delta' ? e.delta : '')).join('');
      const end = events.find((e) => e.type === 'message.end') as Extract<ModelEvent, { type: 'message.end' }>;
      if (streamed === text) expect(end.tokens).toEqual(encodeText(text));
      else expect(end.tokens).toBeUndefined();
    }
  });
});
