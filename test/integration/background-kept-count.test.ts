/**
 * What `background_kept_bytes` counts for an ended background response: each
 * kept event's SSE frame bytes plus `KEPT_EVENT_BYTES`, plus
 * `KEPT_RESPONSE_BYTES` for the response. Counting the frames alone (and 256
 * bytes a response), 2,000 small responses kept took 22 KB of heap apiece
 * against 12 KB counted, so `--max-background-kept-bytes` bounded about half
 * the heap it was set for (`npm run bench:kept`). Real sockets.
 */
import { describe, expect, it } from 'vitest';
import { KEPT_EVENT_BYTES, KEPT_RESPONSE_BYTES } from '../../src/modes/background.js';
import { testServer } from '../helpers/server.js';

describe('background_kept_bytes', () => {
  it("counts each kept event's frame and its overhead, and the response's entry", async () => {
    const { url } = await testServer();
    const health = async () => (await (await fetch(`${url}/health`)).json()) as { background_in_flight: number; background_kept_bytes: number };
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'm', input: 'say something', background: true, store: true }),
    });
    const { id } = (await res.json()) as { id: string };
    let h = await health();
    for (let i = 0; i < 500 && h.background_in_flight > 0; i++) h = await health();
    expect(h.background_in_flight).toBe(0);
    // Its kept events, as a resumed stream sends them: one SSE frame each, then `data: [DONE]`.
    const body = await (await fetch(`${url}/v1/responses/${id}?stream=true`)).text();
    const frames = body.split(/(?<=\n\n)/).filter((f) => f.startsWith('event: '));
    expect(frames.length).toBeGreaterThan(5);
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    const framed = frames.reduce((n, f) => n + Buffer.byteLength(f, 'utf8'), 0);
    expect(h.background_kept_bytes).toBe(framed + frames.length * KEPT_EVENT_BYTES + KEPT_RESPONSE_BYTES);
  });
});
