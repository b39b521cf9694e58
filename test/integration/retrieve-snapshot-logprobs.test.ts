/**
 * A retrieve of a response in flight answers its state at the retrieve, even
 * when its answer is large and written as the reader takes it
 * (transport/json-out.ts): the run goes on meanwhile, and the answer must
 * not pick up what it adds. Outside attack: a background response with 12 MB
 * of instructions and logprobs, retrieved by a client that paused reading
 * after the first bytes while the run streamed one more token, answered its
 * text part as `a` (one token) with two logprobs: the part was copied, its
 * `logprobs` array was not, and the run pushed onto it before the walk
 * reached it. The model waits on gates the test opens: no sleeps. Real sockets.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Model, ModelEvent } from '../../src/model/types.js';
import { testServer } from '../helpers/server.js';

const lp = (token: string) => ({ token, logprob: -0.5, bytes: [...Buffer.from(token)], top_logprobs: [] });

describe('a large retrieve of a response in flight', () => {
  it('is the snapshot at the retrieve: a token streamed while it is written does not add its logprobs', async () => {
    let reached!: () => void;
    const atGate = new Promise<void>((r) => (reached = r));
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let streamed!: () => void;
    const second = new Promise<void>((r) => (streamed = r));
    let finish!: () => void;
    const end = new Promise<void>((r) => (finish = r));
    const model: Model = {
      async *sample(): AsyncIterable<ModelEvent> {
        yield { type: 'message.start' };
        yield { type: 'text.delta', delta: 'a', logprobs: lp('a') };
        reached();
        await gate;
        yield { type: 'text.delta', delta: 'b', logprobs: lp('b') };
        streamed();
        await end;
        yield { type: 'message.end' };
      },
    };
    const { url, port } = await testServer({ model });
    const instructions = 'x'.repeat(12_000_000);
    const created = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'm', input: 'hi', instructions, background: true, store: true, include: ['message.output_text.logprobs'], top_logprobs: 0 }),
    });
    const { id } = (await created.json()) as { id: string };
    await atGate;
    // A reader that takes the first bytes, then pauses: the answer waits in its instructions, before `output`.
    const sock = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    sock.on('data', (d) => chunks.push(d));
    sock.write(`GET /v1/responses/${id} HTTP/1.0\r\n\r\n`);
    await new Promise((resolve) => sock.once('data', resolve));
    sock.pause();
    open();
    await second;
    const closed = new Promise((resolve) => sock.once('close', resolve));
    sock.resume();
    await closed;
    const raw = Buffer.concat(chunks);
    const body = raw.subarray(raw.indexOf('\r\n\r\n') + 4).toString('utf8');
    const got = JSON.parse(body) as { status: string; output: { content: { text: string; logprobs: unknown[] }[] }[] };
    finish();
    expect(got.status).toBe('in_progress');
    const part = got.output[0]!.content[0]!;
    expect(part.text).toBe('a');
    // Before: 2 (the `b` streamed while the answer waited for its reader).
    expect(part.logprobs).toHaveLength(1);
  });
});
