/**
 * An error's message and param are bounded (`MAX_ERROR_TEXT_CHARS`), whatever
 * they quote of the client's input (outside attack: an `item_reference` with
 * an id of 1 MB was refused with that megabyte in its message, over HTTP and
 * on a WebSocket; a 16 KB path was echoed whole in a 404). Real sockets.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_ERROR_TEXT_CHARS, clipText } from '../../src/protocol/errors.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

interface ErrorBody {
  error: { message: string; param: string | null; code: string };
}

function send(port: number, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ port, host: '127.0.0.1', method, path, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const sockets: RawSocket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.dispose();
});

describe('error text is bounded', () => {
  const id = 'x'.repeat(1_000_000);

  it('an item_reference to an unknown id of 1 MB over HTTP: item_not_found, its message cut', async () => {
    const { port } = await testServer();
    const res = await send(port, 'POST', '/v1/responses', JSON.stringify({ model: 'm', input: [{ type: 'item_reference', id }] }));
    expect(res.status).toBe(400);
    const { error } = JSON.parse(res.body) as ErrorBody;
    expect(error.code).toBe('item_not_found');
    expect(error.message.length).toBeLessThanOrEqual(MAX_ERROR_TEXT_CHARS);
    // The id cut to 100 characters where it is quoted, the sentence whole (it was cut by the message's cap alone).
    expect(error.message).toMatch(/^Item with id 'x{99}…' not found\.$/);
    expect(res.body.length).toBeLessThan(MAX_ERROR_TEXT_CHARS + 200);
  });

  it('the same on a WebSocket: the error event is bounded and the socket stays open', async () => {
    const { url } = await testServer();
    const ws = await RawSocket.connect(url);
    sockets.push(ws);
    ws.send({ type: 'response.create', model: 'm', input: [{ type: 'item_reference', id }] });
    const e = await ws.next('error', { skipErrors: true });
    expect(e.error.code).toBe('item_not_found');
    expect(e.error.message.length).toBeLessThanOrEqual(MAX_ERROR_TEXT_CHARS);
    ws.send({ type: 'response.create', model: 'm', input: 'hi' });
    expect((await ws.next('response.completed')).response.status).toBe('completed');
  });

  it('a 404 for a path of 16,000 characters does not echo it whole', async () => {
    const { port } = await testServer();
    const res = await send(port, 'GET', `/${'a'.repeat(16_000)}`);
    expect(res.status).toBe(404);
    const { error } = JSON.parse(res.body) as ErrorBody;
    expect(error.code).toBe('not_found');
    expect(error.message.startsWith('No route for GET /aaa')).toBe(true);
    expect(error.message.length).toBeLessThanOrEqual(MAX_ERROR_TEXT_CHARS);
  });

  it('clipText never splits a surrogate pair and leaves short text as it is', () => {
    expect(clipText('short', 10)).toBe('short');
    const cut = clipText('a'.repeat(8) + '😀' + 'b'.repeat(10), 10);
    expect(cut).toBe('a'.repeat(8) + '…');
    expect(clipText('a'.repeat(20), 10)).toBe('a'.repeat(9) + '…');
    expect(clipText('a'.repeat(8) + '😀' + 'bb', 11)).toBe('a'.repeat(8) + '😀' + '…');
  });
});
