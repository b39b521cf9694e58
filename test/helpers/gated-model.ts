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
