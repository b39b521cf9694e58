/**
 * A tool schema no bounded arguments can satisfy is refused before any run
 * starts, as a client error naming the tool: HTTP 400 and a WebSocket
 * `error` event with `invalid_tool_schema`, never a hang or a 500. The
 * server keeps serving afterwards.
 */
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const fine = { type: 'function', name: 'fine', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const hostile = [
  { type: 'object', properties: { a: { type: 'array', minItems: 1e9 } }, required: ['a'] },
  { type: 'object', properties: { s: { type: 'string', minLength: 6e8 } }, required: ['s'] },
  { type: 'object', properties: { next: { $ref: '#' } }, required: ['next'] },
  { type: 'object', properties: { x: { $ref: '#/$defs/Missing' } } },
];

describe('hostile tool schemas', () => {
  it.each(hostile.map((p, i) => [i, p] as const))('HTTP: schema %i → 400 invalid_tool_schema on tools[1].parameters', async (_i, parameters) => {
    const { url } = await testServer();
    const body = { model: 'sim-model', input: 'call bad', tools: [fine, { type: 'function', name: 'bad', parameters }], tool_choice: { type: 'function', name: 'bad' }, store: false };
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: { code: string; param: string; type: string } };
    expect(json.error).toMatchObject({ code: 'invalid_tool_schema', param: 'tools[1].parameters', type: 'invalid_request_error' });
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
  });

  it.each(['long-lived', 'ws'] as const)('%s: an error event before any response; the connection goes on', async (protocol) => {
    const { url } = await testServer();
    const s = protocol === 'long-lived' ? await RawSocket.longLived(url) : await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'call bad', tools: [{ type: 'function', name: 'bad', parameters: hostile[0] }], tool_choice: 'required', store: false });
    const err = await s.next('error');
    expect(err.error).toMatchObject({ code: 'invalid_tool_schema', param: 'tools[0].parameters' });
    expect(err.status).toBe(400);
    s.send({ type: 'response.create', model: 'sim-model', input: 'hello', tools: [fine], store: false });
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });
});
