/**
 * A long-lived run keeps the simulated model's conversation digest between
 * its model calls (model/conversation.ts `ConversationDigest`) and hashes
 * only what each append added. What the model says must not change: the
 * auto policy seeds its reply from the digest, so a run's final answer, its
 * context digested piece by piece across the pause, equals the answer an
 * HTTP request carrying the same conversation in one go gets (a fresh
 * context, digested whole). Real sockets on port 0; the conversation is past
 * EAGER_DIGEST_CHARS at both model calls, so both use the cooperative path.
 */
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { testServer } from '../helpers/server.js';
import { EAGER_DIGEST_CHARS } from '../../src/model/simulated.js';

const TOOLS = [{ type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } }];

interface Ev {
  type: string;
  response?: { id: string; output: Array<{ type: string; call_id?: string; name?: string; arguments?: string; content?: Array<{ text: string }> }>; pending_tool_calls?: string[] };
}

function finalText(r: NonNullable<Ev['response']>): string {
  return r.output.filter((o) => o.type === 'message').map((o) => o.content!.map((c) => c.text).join('')).join('\n');
}

describe('long-lived run: the conversation digest kept between model calls', () => {
  it('gives the same answer as the whole conversation over HTTP', async () => {
    const { url } = await testServer();
    const first = `${'context '.repeat(EAGER_DIGEST_CHARS / 8 + 1)}\n$ ls`;
    const output = 'file '.repeat(EAGER_DIGEST_CHARS / 5);
    const second = 'Thanks. Now tell me something.';

    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses?protocol=long-lived`);
    await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
    const events: Ev[] = [];
    const next = (type: string) =>
      new Promise<Ev>((resolve) => {
        const on = (data: Buffer) => {
          const e = JSON.parse(data.toString('utf8')) as Ev;
          events.push(e);
          if (e.type === type) {
            ws.off('message', on);
            resolve(e);
          }
        };
        ws.on('message', on);
      });
    const paused = next('response.done');
    ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input: first, tools: TOOLS }));
    const done = (await paused).response!;
    const call = done.output.find((o) => o.type === 'function_call')!;
    expect(done.pending_tool_calls).toEqual([call.call_id]);
    const completed = next('response.completed');
    ws.send(
      JSON.stringify({
        type: 'response.append',
        input: [
          { type: 'function_call_output', call_id: call.call_id, output },
          { type: 'message', role: 'user', content: second },
        ],
      }),
    );
    const live = (await completed).response!;
    ws.close();

    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        model: 'sim-model',
        store: false,
        tools: TOOLS,
        input: [
          { type: 'message', role: 'user', content: first },
          { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
          { type: 'function_call_output', call_id: call.call_id, output },
          { type: 'message', role: 'user', content: second },
        ],
      }),
    });
    expect(res.status).toBe(200);
    const whole = (await res.json()) as NonNullable<Ev['response']>;
    expect(finalText(live).length).toBeGreaterThan(0);
    expect(finalText(live)).toBe(finalText(whole));
  });
});
