/**
 * The per-turn write batcher (src/transport/batch.ts): a turn's writes are
 * corked once and uncorked once in the check phase; `flush` writes at once
 * (a call the client runs), and a write after it in the same turn is corked
 * again, with every cork still matched by exactly one uncork; `readyToRun`
 * picks out exactly the events that hand the client a call to run.
 */
import { describe, expect, it } from 'vitest';
import { batchWrites, readyToRun } from '../../src/transport/batch.js';
import type { ServerEvent } from '../../src/protocol/events.js';

function stream() {
  const log: string[] = [];
  let depth = 0;
  return {
    log,
    depth: () => depth,
    cork() {
      depth++;
      log.push('cork');
    },
    uncork() {
      depth--;
      log.push('uncork');
    },
  };
}

const checkPhase = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('batchWrites', () => {
  it('corks at the first write of a turn and uncorks once in its check phase', async () => {
    const s = stream();
    const batch = batchWrites(s);
    batch();
    batch();
    batch();
    expect(s.log).toEqual(['cork']);
    await checkPhase();
    expect(s.log).toEqual(['cork', 'uncork']);
    batch();
    await checkPhase();
    expect(s.log).toEqual(['cork', 'uncork', 'cork', 'uncork']);
    expect(s.depth()).toBe(0);
  });

  it('flush writes at once; a later write in the turn corks again, and corks stay balanced', async () => {
    const s = stream();
    const batch = batchWrites(s);
    batch();
    batch.flush();
    expect(s.log).toEqual(['cork', 'uncork']);
    batch.flush(); // nothing corked: nothing to do
    expect(s.log).toEqual(['cork', 'uncork']);
    batch();
    expect(s.depth()).toBe(1);
    await checkPhase();
    await checkPhase();
    expect(s.log).toEqual(['cork', 'uncork', 'cork', 'uncork']);
    expect(s.depth()).toBe(0);
  });
});

describe('readyToRun', () => {
  const done = (item: Record<string, unknown>) => ({ type: 'response.output_item.done', output_index: 0, sequence_number: 1, item }) as unknown as ServerEvent;
  it('is true for a finished call the client runs, false for everything else', () => {
    expect(readyToRun(done({ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }))).toBe(true);
    expect(readyToRun(done({ type: 'custom_tool_call', call_id: 'c', name: 'f', input: '' }))).toBe(true);
    expect(readyToRun(done({ type: 'message', role: 'assistant', content: [] }))).toBe(false);
    expect(readyToRun(done({ type: 'reasoning', summary: [] }))).toBe(false);
    expect(readyToRun({ type: 'response.output_item.added', output_index: 0, sequence_number: 1, item: { type: 'function_call' } } as unknown as ServerEvent)).toBe(false);
    expect(readyToRun({ type: 'response.function_call_arguments.done', arguments: '{}' } as unknown as ServerEvent)).toBe(false);
  });
});
