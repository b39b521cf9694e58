/**
 * The demo page's SSE reader (web/demo/sse-frames.js), run in Node: frames come out whole and in order however
 * the stream is cut into chunks, and the text of a frame under way is joined once, when its end arrives (the page
 * searched its whole buffer on every chunk before: quadratic in a large message, outside attack atk39 F7).
 */
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain browser module without types
import { SseFrames } from '../../web/demo/sse-frames.js';

interface Reader {
  push(chunk: string): string[];
  rest: string[];
}
const reader = (): Reader => new SseFrames() as Reader;

const messages = [{ type: 'race', alive_ms: 5000 }, { type: 'progress', text: 'a\nb' }, { type: 'response', body: 'x'.repeat(300) }, { type: 'race.done' }];
const stream = `: comment\n\n${messages.map((m, i) => `event: m${i}\ndata: ${JSON.stringify(m)}\n\n`).join('')}`;

describe('the demo page reads its SSE stream', () => {
  it('in one chunk: each frame with data, in order; a comment frame gives nothing', () => {
    expect(reader().push(stream).map((d) => JSON.parse(d))).toEqual(messages);
  });

  it('cut anywhere into two chunks, or one character at a time: the same frames', () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      const r = reader();
      const out = [...r.push(stream.slice(0, cut)), ...r.push(stream.slice(cut))];
      expect(out.map((d) => JSON.parse(d)), `cut at ${cut}`).toEqual(messages);
    }
    const r = reader();
    expect([...stream].flatMap((c) => r.push(c)).map((d) => JSON.parse(d))).toEqual(messages);
  });

  it('a frame end split across chunks ("\\n" then "\\n") is found; a lone "\\n" at a chunk boundary is not an end', () => {
    const r = reader();
    expect(r.push('data: 1\n')).toEqual([]);
    expect(r.push('\ndata: 2\n')).toEqual(['1']);
    expect(r.push('x')).toEqual([]);
    expect(r.push('\n')).toEqual([]);
    expect(r.push('\n')).toEqual(['2']);
  });

  it('a large message in many chunks is kept as its chunks until its end, then read once', () => {
    const r = reader();
    const big = JSON.stringify({ type: 'response', body: 'y'.repeat(1 << 20) });
    const text = `data: ${big}\n\n`;
    const size = 1024;
    let pushed = 0;
    for (; pushed + size < text.length - 2; pushed += size) {
      expect(r.push(text.slice(pushed, pushed + size))).toEqual([]);
      // Not joined on the way: one entry per chunk received.
      expect(r.rest.length).toBe(pushed / size + 1);
    }
    expect(r.push(text.slice(pushed))).toEqual([big]);
    expect(r.rest).toEqual([]);
  });
});
