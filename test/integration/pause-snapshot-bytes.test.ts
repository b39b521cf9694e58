/**
 * The full pause snapshot is built from kept bytes (protocol/event-json.ts:
 * the finished items' JSON, extended as items finish; engine/response.ts
 * `snapshot`: only the items after the finished ones looked at), never from
 * a fresh `JSON.stringify` of the Response. Over a long long-lived run with
 * what could make kept bytes go stale — parallel calls, text and arguments
 * full of escapes and non-ASCII (a surrogate pair split across deltas, a lone
 * surrogate, U+2028, NUL), hidden reasoning, server-side compactions adding
 * items that have no status, and a cancel closing an item being written —
 * every event carrying the Response is checked twice:
 *
 * - on the server, what the transport writes against `JSON.stringify` of the
 *   very event (snapshot) it was given;
 * - on the client, the frame's bytes against `JSON.stringify` of the frame
 *   with its `output` replaced by the items the stream's
 *   `output_item.done` events gave so far.
 */
import { describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import type { Model, ModelEvent } from '../../src/model/types.js';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';
import { testServer } from '../helpers/server.js';

type Json = Record<string, any>;

/** Each event with a Response the transport serialised: its bytes and `JSON.stringify` of the event. */
const written = vi.hoisted(() => [] as Array<{ type: string; got: string; want: string }>);

vi.mock('../../src/protocol/event-json.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/protocol/event-json.js')>();
  return {
    ...real,
    eventPieces: (e: object) => {
      const pieces = real.eventPieces(e);
      if ('response' in e) {
        const got = Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p))).toString('utf8');
        written.push({ type: String(Reflect.get(e, 'type')), got, want: JSON.stringify(e) });
      }
      return pieces;
    },
  };
});

const STEPS = 70;
const TRICKY = ['"', '\\', '\n', 'é', '😀', '\u2028', '\ud800', '\u0000', '</script>', '\t', 'a', ' ', '{"x":[1]}'];

/** Deterministic text with every tricky piece, `n` pieces long, starting at `seed`. */
function tricky(seed: number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += TRICKY[(seed * 7 + i * 3) % TRICKY.length];
  return s;
}

/** Splits `s` into pieces of 3 UTF-16 units: a surrogate pair may be cut between two deltas. */
function pieces(s: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += 3) out.push(s.slice(i, i + 3));
  return out;
}

/**
 * Call k < STEPS: hidden reasoning, a message every third call, then 1–3 parallel calls. Call STEPS: a message it
 * never ends (the test cancels it).
 */
function longModel(): Model {
  let call = 0;
  return {
    async *sample(_req, signal): AsyncIterable<ModelEvent> {
      const k = call++;
      yield { type: 'reasoning', tokens: 5 };
      if (k === STEPS) {
        yield { type: 'message.start' };
        yield { type: 'text.delta', delta: `held ${tricky(k, 5)}` };
        await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
        return;
      }
      if (k % 3 === 0) {
        yield { type: 'message.start' };
        for (const d of pieces(`Step ${k}: ${tricky(k, 12)}`)) yield { type: 'text.delta', delta: d };
        yield { type: 'message.end' };
      }
      for (let j = 0; j <= k % 3; j++) {
        yield { type: 'call.start', name: 'exec_command', call_id: `call_${k}_${j}` };
        for (const d of pieces(JSON.stringify({ cmd: `echo ${tricky(k + j, 9)}` }))) yield { type: 'args.delta', delta: d };
        yield { type: 'call.end' };
      }
    },
  };
}

describe('the full pause snapshot from kept bytes', () => {
  it('is byte for byte JSON.stringify of the snapshot, at every event of a long run with compactions and a cancel', async () => {
    written.length = 0;
    const { url } = await testServer({ model: longModel() });
    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses`, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } });
    /** The items the stream closed, by output_index. */
    const items: Json[] = [];
    const mismatches: string[] = [];
    let frames = 0;
    let pauses = 0;
    let longest = 0;
    let cancelSent = false;
    const ended = new Promise<Json>((resolve, reject) => {
      ws.on('message', (data) => {
        const raw = data.toString();
        const e = JSON.parse(raw) as Json;
        if (e['type'] === 'response.output_item.done') items[e['output_index'] as number] = e['item'] as Json;
        if (e['response'] && Array.isArray(e['response']['output'])) {
          frames++;
          longest = Math.max(longest, e['response']['output'].length);
          const want = JSON.stringify({ ...e, response: { ...e['response'], output: items } });
          if (raw !== want) mismatches.push(`${e['type']} #${e['sequence_number']} (${e['response']['output'].length} items)`);
        }
        if (e['type'] === 'response.done') {
          pauses++;
          const input = (e['response']['pending_tool_calls'] as string[]).map((id, i) => ({ type: 'function_call_output', call_id: id, output: tricky(pauses + i, 6) }));
          ws.send(JSON.stringify({ type: 'response.append', input }));
        }
        if (e['type'] === 'response.output_text.delta' && typeof e['delta'] === 'string' && e['delta'].startsWith('held') && !cancelSent) {
          cancelSent = true;
          ws.send(JSON.stringify({ type: 'response.cancel' }));
        }
        if (e['type'] === 'error') reject(new Error(raw));
        if (e['type'] === 'response.cancelled' || e['type'] === 'response.completed' || e['type'] === 'response.failed' || e['type'] === 'response.incomplete') resolve(e);
      });
      ws.on('error', reject);
    });
    await new Promise((r) => ws.once('open', r));
    ws.send(
      JSON.stringify({
        type: 'response.create',
        model: 'sim-model',
        instructions: `Be brief. ${tricky(1, 20)}`,
        input: `Go ${tricky(2, 10)}`,
        tools: [{ type: 'function', name: 'exec_command', description: `Runs ${tricky(3, 4)}`, parameters: { type: 'object', properties: { cmd: { type: 'string' } } } }],
        parallel_tool_calls: true,
        context_management: [{ type: 'compaction', compact_threshold: 1000 }],
      }),
    );
    const terminal = await ended;
    ws.close();

    // Every frame as the stream's items say (the client), every event as JSON.stringify of itself (the server).
    expect(mismatches).toEqual([]);
    expect(written.filter((w) => w.got !== w.want).map((w) => w.type)).toEqual([]);
    // What the run had to hold: every pause, compactions among the items, the held message closed as incomplete.
    expect(terminal['type']).toBe('response.cancelled');
    expect(pauses).toBe(STEPS);
    expect(items.filter((i) => i['type'] === 'compaction').length).toBeGreaterThanOrEqual(2);
    expect(items.at(-1)!['status']).toBe('incomplete');
    expect(longest).toBeGreaterThan(120);
    expect(frames).toBe(STEPS + 3);
    expect(written.length).toBe(STEPS + 3);
  });
});
