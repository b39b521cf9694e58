/**
 * `keptOutputBytes` (protocol/event-json.ts): the buffer a Response's finished items' JSON is kept in is charged
 * whole, its spare room as it doubles too: unwritten, that room was left out as not resident, but memory the
 * allocator hands out again after a free is resident (measured for `TokenBuffer`'s arrays, which grow the same way).
 */
import { describe, expect, it } from 'vitest';
import { eventPieces, keptOutputBytes, piecesLength } from '../../src/protocol/event-json.js';

const item = (i: number) => ({ type: 'message', id: `msg_${i}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: `text ${i} `.repeat(50), annotations: [] }] });

describe('keptOutputBytes', () => {
  it('counts the kept buffer whole: after its first doubling, its spare room too', () => {
    const output = Array.from({ length: 32 }, (_, i) => item(i));
    const event = (o: unknown[]) => ({ type: 'response.done', sequence_number: 0, response: { id: 'resp_1', output: o } });
    eventPieces(event(output));
    const first = keptOutputBytes(output);
    // The first fill is sized to what it holds (`[` and the items joined by `,`), a byte to spare.
    expect(first).toBe(Buffer.byteLength(JSON.stringify(output)));
    output.push(item(32));
    const pieces = eventPieces(event(output));
    expect(piecesLength(pieces)).toBe(Buffer.byteLength(JSON.stringify(event(output))));
    // One more item doubles the buffer: ~twice the first fill, most of it not written yet.
    expect(keptOutputBytes(output)).toBe(2 * first);
  });
});
