/**
 * A compaction of a large window is sealed in slices (pipeline/compaction.ts
 * `sealWork`): the item still opens to exactly what it carries when the
 * text is over one slice and surrogate pairs straddle the slice boundaries,
 * and the sync and cooperative forms agree on what they carry.
 */
import { describe, expect, it } from 'vitest';
import { applyCompaction, compact, compactAsync } from '../../src/pipeline/compaction.js';
import type { InputItem } from '../../src/protocol/objects.js';

describe('sealed compactions of a large window', () => {
  it('open to what they carry, across slice boundaries and surrogate pairs', async () => {
    // 1 MiB is the slice: two runs of emoji (surrogate pairs) of opposite parity around the
    // 1 MiB and 2 MiB boundaries, so at least one boundary falls between a pair's halves.
    const big = `${'\ud83d\ude00'.repeat(600_000)}a${'\ud83d\ude00'.repeat(600_000)}`;
    const window: InputItem[] = [
      { type: 'message', role: 'user', content: big } as InputItem,
      { type: 'message', role: 'assistant', content: 'ok' } as InputItem,
      { type: 'message', role: 'user', content: 'next \ud83d\ude00' } as InputItem,
    ];
    for (const done of [compact(window), await compactAsync(window)]) {
      const item = done.output.at(-1) as InputItem;
      expect(item.type).toBe('compaction');
      expect(applyCompaction([item])).toEqual(done.carried);
      expect(JSON.stringify(done.carried)).toContain(big);
    }
  });
});
