/**
 * A ws-mode connection cache's lineage (the stored responses whose items its context holds, checked against deletes)
 * keeps the latest MAX_CHAIN_LINKS ids, oldest out first: it kept one per stored continuation for the connection's life
 * (outside attack atk62 F1).
 */
import { describe, expect, it } from 'vitest';
import { extendLineage } from '../../src/modes/ws.js';
import { MAX_CHAIN_LINKS } from '../../src/store/types.js';

describe('ws-mode lineage', () => {
  it('keeps the latest ids up to its cap, oldest out first', () => {
    const lineage = new Set<string>();
    for (let i = 0; i < 7; i++) extendLineage(lineage, `resp_${i}`, 3);
    expect([...lineage]).toEqual(['resp_4', 'resp_5', 'resp_6']);
    // An id it holds again is not a second place.
    extendLineage(lineage, 'resp_6', 3);
    expect([...lineage]).toEqual(['resp_4', 'resp_5', 'resp_6']);
  });

  it('is capped at the links the store walks by default', () => {
    const lineage = new Set<string>();
    for (let i = 0; i < MAX_CHAIN_LINKS + 50; i++) extendLineage(lineage, `resp_${i}`);
    expect(lineage.size).toBe(MAX_CHAIN_LINKS);
    expect(lineage.has('resp_49')).toBe(false);
    expect(lineage.has('resp_50')).toBe(true);
  });
});
