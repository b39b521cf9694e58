/**
 * A paused long-lived run's SSE keep-alive (`sseTransport`'s `heartbeatMs`, `llr serve --sse-heartbeat-ms`): comments
 * only while paused (after a `response.done`, until the next event or the end), and none while bytes wait unsent: each
 * comment the kernel took was progress to the stall watch, so a client that read nothing was never dropped while
 * paused (outside attack atk113 F1). Fake timers drive the interval; the response is a stand-in that records writes.
 */
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ServerEvent } from '../../src/protocol/events.js';
import { sseTransport } from '../../src/transport/sse.js';

function fakeResponse() {
  const writes: string[] = [];
  const res = Object.assign(new EventEmitter(), {
    writableEnded: false,
    destroyed: false,
    writableLength: 0,
    writableNeedDrain: false,
    socket: null,
    writeHead() {},
    write(chunk: string) {
      writes.push(String(chunk));
      return true;
    },
    end(chunk?: string) {
      if (chunk) writes.push(chunk);
      res.writableEnded = true;
    },
  });
  const comments = () => writes.filter((w) => w.startsWith(':')).length;
  return { res, writes, comments };
}

const response = { id: 'resp_1', object: 'response', status: 'in_progress', output: [] };
const event = (type: string) => ({ type, sequence_number: 0, response }) as unknown as ServerEvent;

describe('the SSE keep-alive of a paused run', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('comes every heartbeatMs while paused, never while streaming, and stops at the next event and at the end', async () => {
    const { res, writes, comments } = fakeResponse();
    const t = sseTransport(res as never, 1 << 20, () => {}, true, null, 100);
    t.start();
    t.send(event('response.created'));
    await vi.advanceTimersByTimeAsync(500);
    expect(comments()).toBe(0);
    t.send(event('response.done'));
    await vi.advanceTimersByTimeAsync(350);
    expect(comments()).toBe(3);
    expect(writes.at(-1)).toBe(': keep-alive\n\n');
    // The run resumed: no more.
    t.send(event('response.in_progress'));
    await vi.advanceTimersByTimeAsync(500);
    expect(comments()).toBe(3);
    t.send(event('response.done'));
    await vi.advanceTimersByTimeAsync(100);
    expect(comments()).toBe(4);
    await t.end({} as never);
    await vi.advanceTimersByTimeAsync(500);
    expect(comments()).toBe(4);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('is not written while the stream holds bytes unsent: the stall watch then sees no progress and can drop a reader that reads nothing (atk113 F1)', async () => {
    const { res, comments } = fakeResponse();
    const t = sseTransport(res as never, 1 << 20, () => {}, true, null, 100);
    t.start();
    t.send(event('response.done'));
    res.writableLength = 8 << 20;
    await vi.advanceTimersByTimeAsync(1000);
    expect(comments()).toBe(0);
    // Read: the keep-alive goes on.
    res.writableLength = 0;
    await vi.advanceTimersByTimeAsync(100);
    expect(comments()).toBe(1);
    // The client gone: its timer with it.
    res.emit('close');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('is off at 0', async () => {
    const { res, comments } = fakeResponse();
    const t = sseTransport(res as never, 1 << 20, () => {}, true, null, 0);
    t.start();
    t.send(event('response.done'));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(comments()).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
