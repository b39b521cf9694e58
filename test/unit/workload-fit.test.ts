/**
 * `llr serve --workload` fits its limits to the workload (src/workload/fit.ts): each limit the replay would pass is
 * raised, the server-wide byte budget with the context (outside attack atk57 F2: one client's long-lived replay of a
 * ~120 MB context was refused server_busy part-way, its run left paused), and a limit set by flag is kept.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS, type Limits } from '../../src/engine/services.js';
import { fitToFootprint, widestFootprint } from '../../src/workload/fit.js';
import { replayFootprint } from '../../src/workload/replayable.js';
import { syntheticWorkload } from '../../src/workload/synthetic.js';

const MiB = 1024 * 1024;
/** A footprint's JSON figures within every default. */
const SMALL = { jsonContainers: 100, jsonKeys: 10, schemaNodes: 10 };

describe('fitToFootprint', () => {
  it('leaves the defaults of a workload that fits them', () => {
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, { widestCall: 3, contextBytes: 2 * MiB, contextItems: 400, tools: 0, ...SMALL });
    expect(limits).toEqual({});
  });

  it('raises the frame, the context and the server-wide budget for a context past the defaults', () => {
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, { widestCall: 1, contextBytes: 120 * MiB, contextItems: 2_402, tools: 0, ...SMALL });
    const context = Math.ceil(120 * MiB * 1.25) + MiB;
    expect(limits).toEqual({ maxFrameBytes: context, maxContextBytes: context, maxServerBytes: 4 * context });
    expect(limits.maxServerBytes!).toBeGreaterThan(DEFAULT_LIMITS.maxServerBytes);
  });

  it('raises the server-wide budget alone once four contexts pass it, the context itself within its default', () => {
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, { widestCall: 1, contextBytes: 60 * MiB, contextItems: 10, tools: 0, ...SMALL });
    expect(Object.keys(limits).sort()).toEqual(['maxContextBytes', 'maxFrameBytes', 'maxServerBytes']);
    const small: Partial<Limits> = {};
    fitToFootprint(small, { widestCall: 1, contextBytes: 20 * MiB, contextItems: 10, tools: 0, ...SMALL });
    expect(small).toEqual({ maxFrameBytes: Math.ceil(20 * MiB * 1.25) + MiB });
  });

  it('keeps every limit a flag set, and raises --max-pending-calls and --max-context-items to fit', () => {
    const set: Partial<Limits> = { maxServerBytes: 64 * MiB, maxContextBytes: 8 * MiB, maxFrameBytes: 4 * MiB, maxPendingCalls: 2, maxContextItems: 10 };
    fitToFootprint(set, { widestCall: 500, contextBytes: 120 * MiB, contextItems: 90_000, tools: 0, ...SMALL });
    expect(set).toEqual({ maxServerBytes: 64 * MiB, maxContextBytes: 8 * MiB, maxFrameBytes: 4 * MiB, maxPendingCalls: 2, maxContextItems: 10 });
    const open: Partial<Limits> = {};
    fitToFootprint(open, { widestCall: 500, contextBytes: 1, contextItems: 90_000, tools: 0, ...SMALL });
    expect(open).toEqual({ maxPendingCalls: 500, maxContextItems: 91_000 });
  });

  it('raises --max-tools to the workload\'s tools, unless set (a workload of 130 tools served, then every replay was refused at its first call; atk68 F2)', () => {
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, { widestCall: 1, contextBytes: 1, contextItems: 10, tools: 130, ...SMALL });
    expect(limits).toEqual({ maxTools: 130 });
    const at: Partial<Limits> = {};
    fitToFootprint(at, { widestCall: 1, contextBytes: 1, contextItems: 10, tools: DEFAULT_LIMITS.maxTools, ...SMALL });
    expect(at).toEqual({});
    const set: Partial<Limits> = { maxTools: 5 };
    fitToFootprint(set, { widestCall: 1, contextBytes: 1, contextItems: 10, tools: 130, ...SMALL });
    expect(set).toEqual({ maxTools: 5 });
    // The footprint counts the tools every request of the replay lists.
    const w = syntheticWorkload({ turns: 2, toolOutputBytes: 10, outputTokensPerTurn: 5, seed: 1 });
    const tools = Array.from({ length: 130 }, (_, i) => ({ type: 'function', name: `t${i}`, parameters: { type: 'object', properties: {} } }));
    expect(replayFootprint({ ...w, tools: tools as typeof w.tools }).tools).toBe(130);
  });

  it('fits --workload and --demo-workload together: each figure at the larger of the two (the demo file was not fitted; atk68 F7)', () => {
    const replay = { widestCall: 300, contextBytes: 1, contextItems: 10, tools: 3, ...SMALL };
    const demo = { widestCall: 2, contextBytes: 40 * MiB, contextItems: 60_000, tools: 130, ...SMALL };
    expect(widestFootprint(replay, demo)).toEqual({ widestCall: 300, contextBytes: 40 * MiB, contextItems: 60_000, tools: 130, ...SMALL });
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, widestFootprint(replay, demo));
    expect(limits).toMatchObject({ maxPendingCalls: 300, maxTools: 130, maxContextItems: 61_000 });
  });
});
