/**
 * The clients' SSE reader (`sseEvents`) against the WHATWG event-stream
 * rules: CRLF, CR and LF line ends (a CRLF split across chunks is one line
 * end), `data:` with or without its space, multi-line data, comments and
 * other fields skipped, `[DONE]`, and an event unfinished at the end dropped.
 */
import { describe, expect, it } from 'vitest';
import { sseEvents } from '../../src/client/http.js';

async function* chunks(parts: Array<string | Uint8Array>): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield typeof p === 'string' ? new TextEncoder().encode(p) : p;
}

async function read(parts: Array<string | Uint8Array>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const e of sseEvents(chunks(parts))) out.push(e);
  return out;
}

/** Every split of `text` into one-byte chunks. */
const bytewise = (text: string) => [...new TextEncoder().encode(text)].map((b) => Uint8Array.of(b));

const a = '{"type":"a","n":1}';
const b = '{"type":"b","n":2}';

describe('sseEvents', () => {
  it('an event longer than its bound ends the stream with a clear error (a line that never ends grew memory without bound)', async () => {
    // A line that never ends, in many chunks; and many complete data lines of one event.
    async function* endless(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 1000; i++) yield new TextEncoder().encode(i === 0 ? 'data: "' : 'x'.repeat(1000));
    }
    async function* manyLines(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 1000; i++) yield new TextEncoder().encode(`data: ${'y'.repeat(999)}\n`);
    }
    for (const body of [endless, manyLines]) {
      const seen: unknown[] = [];
      const reading = (async () => {
        for await (const e of sseEvents(body(), () => {}, 100_000)) seen.push(e);
      })();
      await expect(reading, body.name).rejects.toThrow(/SSE event longer than 100000 characters/);
      expect(seen).toEqual([]);
    }
    // At the bound's side, events that fit are read (the bound is per event, not per stream).
    const fits = Array.from({ length: 50 }, (_, i) => `data: {"n":${i},"pad":"${'z'.repeat(5000)}"}\n\n`).join('');
    const out: unknown[] = [];
    for await (const e of sseEvents(chunks([fits]), () => {}, 100_000)) out.push(e);
    expect(out).toHaveLength(50);
  });

  it.each([
    ['LF', '\n'],
    ['CRLF', '\r\n'],
    ['CR', '\r'],
  ])('reads %s line ends, whole and a byte at a time', async (_name, nl) => {
    const text = `event: a${nl}data: ${a}${nl}${nl}: a comment${nl}id: 7${nl}data: ${b}${nl}${nl}data: [DONE]${nl}${nl}data: {"type":"after"}${nl}${nl}`;
    const want = [JSON.parse(a), JSON.parse(b)];
    expect(await read([text])).toEqual(want);
    expect(await read(bytewise(text))).toEqual(want);
  });

  it('a CRLF split across chunks is one line end, not a line end and a blank line', async () => {
    // One event whose JSON spans two data lines (joined by LF): read as CR then a blank line, the first half was
    // dispatched alone and failed to parse.
    const parts = ['data: {"type":"x",\r', '\ndata: "n":1}\r', '\n\r', '\n'];
    expect(await read(parts)).toEqual([{ type: 'x', n: 1 }]);
  });

  it('a CR ending a chunk that the next chunk does not follow with LF still ends the line', async () => {
    expect(await read([`data: ${a}\r`, `\r`, `data: ${b}\r\r`])).toEqual([JSON.parse(a), JSON.parse(b)]);
  });

  it('mixed line ends in one stream', async () => {
    expect(await read([`data: ${a}\r\n\rdata: ${b}\n\r\n`])).toEqual([JSON.parse(a), JSON.parse(b)]);
  });

  it('data: without its space, a bare data line, and a multi-byte character split across chunks', async () => {
    expect(await read([`data:${a}\n\n`])).toEqual([JSON.parse(a)]);
    expect(await read([`data:{"type":"x",\ndata\ndata:  "n":1}\n\n`])).toEqual([{ type: 'x', n: 1 }]);
    const bytes = new TextEncoder().encode('data: {"type":"é€"}\r\n\r\n');
    expect(await read([bytes.slice(0, 16), bytes.slice(16, 17), bytes.slice(17)])).toEqual([{ type: 'é€' }]);
  });

  it('an event left unfinished when the body ends is dropped; a field named like data is not data', async () => {
    expect(await read([`data: ${a}\r\n`])).toEqual([]);
    expect(await read([`datax: ${a}\r\n\r\ndata: ${b}\r\n\r\n`])).toEqual([JSON.parse(b)]);
  });
});
