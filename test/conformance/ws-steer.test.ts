/**
 * `response.steer` (OpenAI's WebSocket mode, openai-node 7's `ResponseSteerEvent`): the server does not
 * steer, so it answers as the API does for a response whose mode does not support it: a
 * `response.steer.failed` carrying the uncommitted input back (`steering_not_supported`, in the target's lane),
 * or `response_not_found` when the response is not on this connection. Never a generic `error`, after which a
 * client would not know what became of its input. The socket stays usable. Real sockets on port 0.
 */
import { describe, expect, it } from 'vitest';
import { captureLogger } from '../helpers/raw-http.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

describe('response.steer is refused with response.steer.failed', () => {
  it('WebSocket mode: steering a response on this connection fails steering_not_supported, in its lane, input returned', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'hi', store: false, stream_id: 'lane-1' });
    const done = await s.next('response.completed');
    const input = [{ role: 'user', content: 'also mention cats' }];
    s.send({ type: 'response.steer', previous_response_id: done.response.id, input });
    const failed = await s.next('response.steer.failed');
    expect(failed).toMatchObject({
      type: 'response.steer.failed',
      stream_id: 'lane-1',
      steer: { previous_response_id: done.response.id, input },
      error: { code: 'steering_not_supported', type: 'invalid_request_error' },
    });
    expect(typeof failed.sequence_number).toBe('number');
    expect(typeof failed.error.message).toBe('string');
    expect(s.events.filter((e) => e.type === 'error')).toEqual([]);
    s.send({ type: 'response.create', model: 'sim-model', input: 'again', store: false });
    expect((await s.next('response.completed')).response.status).toBe('completed');
    s.dispose();
  });

  it('long-lived: steering the paused run fails steering_not_supported in its stream (numbered in it); the run goes on', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    const tool = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } };
    s.send({ type: 'response.create', model: 'sim-model', input: 'Please run these:\n$ echo alpha', tools: [tool] });
    const paused = await s.next('response.done');
    s.send({ type: 'response.steer', previous_response_id: paused.response.id, input: 'hurry' });
    const failed = await s.next('response.steer.failed');
    expect(failed).toMatchObject({ steer: { previous_response_id: paused.response.id, input: 'hurry' }, error: { code: 'steering_not_supported' } });
    expect(failed.sequence_number).toBe(paused.sequence_number + 1);
    const call = paused.response.output.find((i) => i.type === 'function_call')!;
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: (call as { call_id: string }).call_id, output: 'alpha' }] });
    const done = await s.next('response.completed');
    expect(done.response.id).toBe(paused.response.id);
    expect(s.events.filter((e) => e.type === 'error')).toEqual([]);
    s.dispose();
  });

  it('a response not on this connection fails response_not_found, with no lane', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.steer', previous_response_id: 'resp_elsewhere', input: 'hello' });
    const failed = await s.next('response.steer.failed');
    expect(failed).toMatchObject({ steer: { previous_response_id: 'resp_elsewhere', input: 'hello' }, error: { code: 'response_not_found', type: 'invalid_request_error' } });
    expect('stream_id' in failed).toBe(false);
    s.dispose();
  });

  it('a steer without previous_response_id is an error naming it', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.steer', input: 'hello' });
    const err = await s.next('error');
    expect(err).toMatchObject({ error: { code: 'missing_required_parameter', param: 'previous_response_id' } });
    // An empty id is missing too (it was looked up: response_not_found for '').
    s.send({ type: 'response.steer', previous_response_id: '', input: 'hello' });
    expect(await s.next('error')).toMatchObject({ error: { code: 'missing_required_parameter', param: 'previous_response_id' } });
    s.dispose();
  });

  it('a steer whose input is not an input is an error naming it, as an inject\'s is (it was echoed back as steerable); the socket goes on', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    for (const input of [null, 5, {}, [{ bogus: 1 }]]) {
      s.send({ type: 'response.steer', previous_response_id: 'resp_x', input });
      const err = await s.next('error');
      expect(err.error.param, JSON.stringify(input)).toMatch(/^input/);
      expect(['invalid_type', 'invalid_value', 'missing_required_parameter']).toContain(err.error.code);
    }
    s.send({ type: 'response.steer', previous_response_id: 'resp_x', input: [{ role: 'user', content: 'ok' }] });
    expect(await s.next('response.steer.failed')).toMatchObject({ steer: { input: [{ role: 'user', content: 'ok' }] }, error: { code: 'response_not_found' } });
    s.dispose();
  });
});

describe('a steer whose input is not steering input fails invalid_input (outside attack atk67 F1: it said steering_not_supported)', () => {
  it('another role, an item not a message, a tool output, an empty array, a foreign field, a part not input: each returned with invalid_input, in the target lane', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'hi', store: false, stream_id: 'lane-1' });
    const done = await s.next('response.completed');
    const id = done.response.id;
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ input: [{ role: 'assistant', content: 'x' }] }, /input\[0\]\.role/],
      [{ input: [{ role: 'user', content: 'a' }, { role: 'developer', content: 'x' }] }, /input\[1\]\.role/],
      [{ input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] }, /input\[0\]\.type/],
      [{ input: [] }, /non-empty array/],
      [{ input: 'x', stream_id: 'lane-1' }, /Unknown field 'stream_id'.*chooses the lane/],
      [{ input: 'x', bogus: 1 }, /Unknown field 'bogus'/],
      [{ input: [{ role: 'user', content: 'x', id: 'msg_1' }] }, /input\[0\]\.id/],
      [{ input: [{ role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'output_text', text: 'b' }] }] }, /input\[0\]\.content\[1\]\.type/],
    ];
    for (const [fields, message] of cases) {
      s.send({ type: 'response.steer', previous_response_id: id, ...fields });
      const failed = await s.next('response.steer.failed');
      expect(failed, JSON.stringify(fields)).toMatchObject({ stream_id: 'lane-1', steer: { previous_response_id: id, input: fields['input'] }, error: { code: 'invalid_input', type: 'invalid_request_error' } });
      expect(failed.error.message).toMatch(message);
    }
    // Also for a response not on the connection: the input is wrong whatever the target.
    s.send({ type: 'response.steer', previous_response_id: 'resp_elsewhere', input: [{ role: 'system', content: 'x' }] });
    expect(await s.next('response.steer.failed')).toMatchObject({ error: { code: 'invalid_input' } });
    // Steering input of every allowed shape still fails only because this server does not steer.
    const parts = [{ type: 'input_text', text: 'a' }, { type: 'input_image', image_url: 'https://example.com/a.png' }];
    for (const input of ['more', [{ role: 'user', content: 'x' }, { type: 'message', role: 'user', content: parts }]]) {
      s.send({ type: 'response.steer', previous_response_id: id, input });
      expect(await s.next('response.steer.failed'), JSON.stringify(input)).toMatchObject({ error: { code: 'steering_not_supported' } });
    }
    expect(s.events.filter((e) => e.type === 'error')).toEqual([]);
    s.dispose();
  });
});

describe('a steer echo is charged to the server-wide byte budget until it has left', () => {
  const MiB = 1024 * 1024;
  const health = async (url: string) => (await (await fetch(`${url}/health`)).json()) as { bytes_held: number; send_bytes_unsent: number };
  // Asks /health again until `f` holds (each try one round trip: no timer), at most 2,000 times.
  const until = async (f: () => Promise<boolean>) => {
    for (let i = 0; i < 2000 && !(await f()); i++);
  };

  it('a peer that sends large steers and reads nothing holds their echoes as bytes_held (they were uncharged: outside attack)', async () => {
    const { url } = await testServer();
    const s = await RawSocket.connect(url);
    (s.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const input = 'x'.repeat(8 * MiB);
    s.send({ type: 'response.steer', previous_response_id: 'resp_x', input });
    s.send({ type: 'response.steer', previous_response_id: 'resp_x', input });
    // Both echoes handed to the socket (more unsent than the kernel's buffers take). `send_bytes_unsent` counts every
    // reader now, so it passes 4 MiB with the first echo, while the second frame may still be arriving.
    await until(async () => {
      const h = await health(url);
      return h.send_bytes_unsent > 4 * MiB && h.bytes_held >= 16 * MiB;
    });
    const h = await health(url);
    expect(h.send_bytes_unsent).toBeGreaterThan(4 * MiB);
    expect(h.bytes_held).toBeGreaterThanOrEqual(16 * MiB);
    // Read: both echoes arrive whole, and the charge is released.
    (s.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await s.next('response.steer.failed');
    const second = await s.next('response.steer.failed');
    expect((second.steer.input as string).length).toBe(8 * MiB);
    await until(async () => (await health(url)).bytes_held === 0);
    expect((await health(url)).bytes_held).toBe(0);
    s.dispose();
  });

  it('past the budget the next steer waits to be read (the peer pushed back), then both come back whole', async () => {
    const { logger, waitFor } = captureLogger();
    const { url } = await testServer({ logger, limits: { maxServerBytes: 20 * MiB } });
    const s = await RawSocket.connect(url);
    (s.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    // 14 MiB as two texts: one is at most the API's 10,485,760 characters.
    s.send({ type: 'response.steer', previous_response_id: 'resp_x', input: [{ role: 'user', content: 'x'.repeat(7 * MiB) }, { role: 'user', content: 'x'.repeat(7 * MiB) }] });
    s.send({ type: 'response.steer', previous_response_id: 'resp_y', input: 'y'.repeat(8 * MiB) });
    // The connection's reading paused at the budget: the second steer is not read, so not charged.
    await waitFor((l) => l.code === 'server_busy' && /reading paused/.test(l.msg));
    const h = await health(url);
    expect(h.bytes_held).toBeGreaterThanOrEqual(14 * MiB);
    expect(h.bytes_held).toBeLessThanOrEqual(20 * MiB);
    (s.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    expect((await s.next('response.steer.failed')).steer.previous_response_id).toBe('resp_x');
    const second = await s.next('response.steer.failed');
    expect(second.steer.previous_response_id).toBe('resp_y');
    expect((second.steer.input as string).length).toBe(8 * MiB);
    await until(async () => (await health(url)).bytes_held === 0);
    expect((await health(url)).bytes_held).toBe(0);
    s.dispose();
  });
});
