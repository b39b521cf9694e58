/**
 * The pause registry on its own (no run, no socket): a wait settles when
 * every call it registered is answered, and only then; limits and duplicate
 * call_ids are refused before anything is registered; close() rejects every
 * wait still pending with its reason, refuses new ones, and is idempotent.
 */
import { describe, expect, it } from 'vitest';
import { PauseRegistry, RunClosedError, duplicateCallId } from '../../src/engine/pause.js';
import { WireError } from '../../src/protocol/errors.js';

/** Whether a promise has settled, observed after every pending microtask has run (setImmediate runs after them; no timer). */
async function settled(p: Promise<unknown>): Promise<'pending' | 'resolved' | 'rejected'> {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  p.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  );
  await new Promise<void>((resolve) => setImmediate(resolve));
  return state;
}

describe('PauseRegistry', () => {
  it('a wait settles only when every call it registered is answered', async () => {
    const reg = new PauseRegistry(8);
    const waiting = reg.wait(['a', 'b']);
    expect(reg.pending()).toEqual(['a', 'b']);
    expect(reg.size).toBe(2);
    reg.resolve('a');
    expect(reg.has('a')).toBe(false);
    expect(reg.has('b')).toBe(true);
    expect(await settled(waiting)).toBe('pending');
    reg.resolve('b');
    await expect(waiting).resolves.toBeUndefined();
    expect(reg.size).toBe(0);
  });

  it('answering an unknown or already answered call does nothing', async () => {
    const reg = new PauseRegistry(8);
    const waiting = reg.wait(['a']);
    reg.resolve('zzz');
    expect(reg.pending()).toEqual(['a']);
    reg.resolve('a');
    reg.resolve('a');
    await expect(waiting).resolves.toBeUndefined();
  });

  it('a wait for no calls settles at once', async () => {
    await expect(new PauseRegistry(8).wait([])).resolves.toBeUndefined();
  });

  it('refuses more pending calls than its limit, registering none of the batch', () => {
    const reg = new PauseRegistry(3);
    void reg.wait(['a', 'b']);
    let err: unknown;
    try {
      void reg.wait(['c', 'd']);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WireError);
    expect((err as WireError).code).toBe('too_many_pending_calls');
    expect(reg.pending()).toEqual(['a', 'b']);
    // Up to the limit is fine.
    void reg.wait(['c']);
    expect(reg.size).toBe(3);
  });

  it('refuses a call_id repeated in a batch or still pending, registering none of the batch', () => {
    const reg = new PauseRegistry(8);
    expect(() => reg.wait(['x', 'y', 'x'])).toThrowError(duplicateCallId('x').message);
    expect(reg.size).toBe(0);
    void reg.wait(['x']);
    let err: unknown;
    try {
      void reg.wait(['z', 'x']);
    } catch (e) {
      err = e;
    }
    expect((err as WireError).code).toBe('duplicate_call_id');
    expect(reg.pending()).toEqual(['x']);
  });

  it('a call_id answered earlier may be waited for again', async () => {
    const reg = new PauseRegistry(8);
    const first = reg.wait(['a']);
    reg.resolve('a');
    await first;
    const second = reg.wait(['a']);
    reg.resolve('a');
    await expect(second).resolves.toBeUndefined();
  });

  it('close() rejects every pending wait with its reason and empties the registry', async () => {
    const reg = new PauseRegistry(8);
    const one = reg.wait(['a']);
    const two = reg.wait(['b', 'c']);
    reg.resolve('b');
    const outcomes = Promise.allSettled([one, two]);
    reg.close('cancelled_by_client');
    for (const o of await outcomes) {
      expect(o.status).toBe('rejected');
      const err = (o as PromiseRejectedResult).reason as unknown;
      expect(err).toBeInstanceOf(RunClosedError);
      expect((err as RunClosedError).reason).toBe('cancelled_by_client');
    }
    expect(reg.size).toBe(0);
    expect(reg.pending()).toEqual([]);
  });

  it('after close() a wait is refused (a rejected promise, nothing registered) and answers change nothing', async () => {
    const reg = new PauseRegistry(8);
    reg.close('pause_timeout');
    const late = reg.wait(['a']);
    await expect(late).rejects.toThrow(RunClosedError);
    await expect(late).rejects.toMatchObject({ reason: 'pause_timeout' });
    expect(reg.size).toBe(0);
    reg.resolve('a');
    expect(reg.has('a')).toBe(false);
  });

  it('close() is idempotent: the first reason stands', async () => {
    const reg = new PauseRegistry(8);
    const waiting = reg.wait(['a']);
    const rejected = expect(waiting).rejects.toMatchObject({ reason: 'client_disconnected' });
    reg.close('client_disconnected');
    reg.close('server_shutdown');
    await rejected;
    await expect(reg.wait(['b'])).rejects.toMatchObject({ reason: 'client_disconnected' });
  });
});
