/**
 * The per-turn write batcher (src/transport/batch.ts): a turn's writes are
 * corked once and uncorked once in the check phase; `flush` writes at once
 * (a call the client runs), and a write after it in the same turn is corked
 * again, with every cork still matched by exactly one uncork; `readyToRun`
 * picks out exactly the events that hand the client a call to run.
 */
import { describe, expect, it } from 'vitest';
import { batchWrites } from '../../src/transport/batch.js';
import { readyToRun } from '../../src/protocol/events.js';
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
    batch(0);
    batch(0);
    batch(0);
    expect(s.log).toEqual(['cork']);
    await checkPhase();
    expect(s.log).toEqual(['cork', 'uncork']);
    batch(0);
    await checkPhase();
    expect(s.log).toEqual(['cork', 'uncork', 'cork', 'uncork']);
    expect(s.depth()).toBe(0);
  });

  it('flush writes at once; a later write in the turn corks again, and corks stay balanced', async () => {
    const s = stream();
    const batch = batchWrites(s);
    batch(0);
    batch.flush();
    expect(s.log).toEqual(['cork', 'uncork']);
    batch.flush(); // nothing corked: nothing to do
    expect(s.log).toEqual(['cork', 'uncork']);
    batch(0);
    expect(s.depth()).toBe(1);
    await checkPhase();
    await checkPhase();
    expect(s.log).toEqual(['cork', 'uncork', 'cork', 'uncork']);
    expect(s.depth()).toBe(0);
  });
});

describe('Batcher.backlog', () => {
  it("judges a send limit on the bytes unsent at the turn's first write until the check phase, then on the present", async () => {
    const s = stream();
    const batch = batchWrites(s);
    expect(batch.backlog(7)).toBe(7); // no turn open: the present
    batch(100);
    expect(batch.backlog(5_000_000)).toBe(100); // this turn's own writes are not the reader's
    batch.flush();
    batch(900); // corked again in the same turn: still the turn's first figure
    expect(batch.backlog(5_000_000)).toBe(100);
    await checkPhase();
    expect(batch.backlog(5_000_000)).toBe(5_000_000);
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
