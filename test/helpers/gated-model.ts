/**
 * Holding a run in flight: a model that streams `hello`, then waits for a
 * gate the test opens (or the run's abort) before ending its message with
 * ` world`. No timers.
 */
import type { Model, ModelEvent } from '../../src/model/types.js';

export function gatedModel(): { model: Model; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const model: Model = {
    async *sample(_req, signal): AsyncIterable<ModelEvent> {
      yield { type: 'message.start' };
      yield { type: 'text.delta', delta: 'hello' };
      await Promise.race([gate, new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
      yield { type: 'text.delta', delta: ' world' };
      yield { type: 'message.end' };
    },
  };
  return { model, release };
}

/**
 * A model whose first call answers `ok` at once and whose later calls stream `ok`, then wait for the gate (or their
 * run's abort) before they end: a stored response made first, then continuations of it held in flight.
 */
export function firstCallFreeModel(): { model: Model; release: () => void } {
  let calls = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const model: Model = {
    async *sample(_req, signal): AsyncIterable<ModelEvent> {
      calls++;
      yield { type: 'message.start' };
      yield { type: 'text.delta', delta: 'ok' };
      if (calls > 1) await Promise.race([gate, new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
      yield { type: 'message.end' };
    },
  };
  return { model, release };
}
