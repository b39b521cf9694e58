/**
 * The model's output joins the prompt with the tokens the model produced
 * (pipeline/render.ts `appendOutput`, model/tokenizer.ts `encodeOutput`):
 * the prompt must be token for token what encoding the whole item gives,
 * for random messages and calls, whether or not the memo holds the text.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/model/rng.js';
import { tokenPieces } from '../../src/model/tokenizer.js';
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
      if (i % 2 === 0) tokenPieces(body); // what the model does: the memo then holds the body's tokens
      const a = renderFull(null, [], [], new RunMetrics());
      const b = renderFull(null, [], [], new RunMetrics());
      appendOutput(a, [item]);
      renderAppend(b, [item], new RunMetrics());
      expect(Array.from(a.tokens.view()), JSON.stringify(item)).toEqual(Array.from(b.tokens.view()));
    }
  });
});
