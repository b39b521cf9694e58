/**
 * A demo race's stream carries a sign of life (`: alive`, an SSE comment) every --demo-alive-ms while it has nothing
 * else to say, and names the interval in its first message, so the page can give up a server that stopped answering
 * without closing (suspended, asleep; demo-browser-robustness.test.ts) and never a race that is only waiting: here a
 * step-mode race at its gate, which sends nothing until the presenter steps.
 */
import { describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';

describe('demo race stream: signs of life', () => {
  it('a step-mode race waiting at its gate sends a comment every alive_ms, and says alive_ms in its race message', async () => {
    const { url } = await testServer({ demo: { aliveMs: 40 } });
    const ac = new AbortController();
    const res = await fetch(`${url}/demo/api/races`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workload: 'synthetic', tool_calls: 2, speed: 'instant', step: true }),
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    let aliveAfterGate = 0;
    let raceMessage: { alive_ms?: number } | null = null;
    // Every lane waits at its first gate (a `step` message naming them all); nothing is stepped, so what comes after
    // is only the comments.
    while (aliveAfterGate < 3) {
      const { value, done } = await reader.read();
      expect(done).toBe(false);
      text += value;
      raceMessage ??= JSON.parse(/^event: race\ndata: (.*)$/m.exec(text)?.[1] ?? 'null') as { alive_ms?: number } | null;
      const gate = text.indexOf('event: step\n');
      if (gate >= 0) aliveAfterGate = text.slice(gate).split(': alive\n\n').length - 1;
    }
    expect(raceMessage?.alive_ms).toBe(40);
    ac.abort();
  });
});
