import { describe, it, expect } from 'vitest';
import { sseEvents } from '../../src/client/http.js';

async function parse(chunks: Uint8Array[]) {
  async function* gen() { for (const c of chunks) yield c; }
  const out: unknown[] = [];
  for await (const e of sseEvents(gen())) out.push(e);
  return out;
}
function rnd(seed: number) { let s = seed >>> 0; return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32); }
// Random chunkings of a valid stream parse as the whole stream does; a long line sent in many chunks is
// read in time linear in its length (it was re-searched and re-copied with every chunk: 8 MB in 8 KiB
// chunks took ~5 s of CPU on this host).
describe('sseEvents under random chunking and long lines', () => {
  it('random chunkings equal unchunked', async () => {
    for (let seed = 1; seed < 150; seed++) {
      const r = rnd(seed);
      const eols = [['\n', '\r\n', '\r'][Math.floor(r() * 3)]];
      let s = r() < 0.3 ? '\ufeff' : '';
      const n = 1 + Math.floor(r() * 5);
      for (let i = 0; i < n; i++) {
        const eol = eols[0];
        if (r() < 0.3) s += ': comment' + eol;
        if (r() < 0.3) s += 'event: x' + eol;
        s += 'data: ' + JSON.stringify({ type: 't', i, s: 'é€😀' + 'a'.repeat(Math.floor(r() * 5)) }) + eols[0];
        s += eols[0];
      }
      const bytes = new TextEncoder().encode(s);
      const whole = await parse([bytes]);
      expect(whole.length, JSON.stringify(s)).toBe(n);
      for (let k = 0; k < 20; k++) {
        const chunks: Uint8Array[] = [];
        let p = 0;
        while (p < bytes.length) { const l = r() < 0.2 ? 0 : 1 + Math.floor(r() * 6); chunks.push(bytes.subarray(p, p + l)); p += l; }
        expect(await parse(chunks), JSON.stringify({ s, cuts: chunks.map((c) => c.length) })).toEqual(whole);
      }
    }
  });
  it('huge line in small chunks', async () => {
    const big = 'data: ' + JSON.stringify({ type: 'x', s: 'a'.repeat(8 << 20) }) + '\n\n';
    const b = new TextEncoder().encode(big);
    const chunks: Uint8Array[] = [];
    for (let p = 0; p < b.length; p += 8192) chunks.push(b.subarray(p, p + 8192));
    const t = Date.now();
    const out = await parse(chunks);
    const ms = Date.now() - t;
    expect(out.length).toBe(1);
    expect(ms).toBeLessThan(1500);
  });
});
