/**
 * Fitting `llr serve --workload`'s limits (and `--demo-workload`'s: the demo's lanes are the server's clients) to the
 * workload it replays (its `replayFootprint`), as the bench's servers are fitted (they are such servers): each limit
 * the workload would pass is raised, unless its flag (or environment variable) set it. Pure: it changes the limits
 * object it is given. Used by cli.ts.
 */
import { DEFAULT_LIMITS, type Limits } from '../engine/services.js';

/** What the replay needs (workload/replayable.ts `replayFootprint`). */
export interface Footprint {
  widestCall: number;
  contextBytes: number;
  contextItems: number;
  /** The tools every request of the replay lists. */
  tools: number;
  /** The most objects and arrays one request's JSON holds (its context and tools: the http design sends them all). */
  jsonContainers: number;
  /** The most keys one object of a request holds (a tool's `properties`, an item). */
  jsonKeys: number;
  /** The objects and arrays of the tools' schemas together (what `--max-schema-nodes` counts). */
  schemaNodes: number;
}

/** A context's bytes with a quarter more for what a client adds per item, and 1 MiB. */
function roomy(n: number): number {
  return Math.ceil(n * 1.25) + 1024 * 1024;
}

/** What both replays need at once (`llr serve --workload` with `--demo-workload`): each figure's larger. */
export function widestFootprint(a: Footprint, b: Footprint): Footprint {
  return {
    widestCall: Math.max(a.widestCall, b.widestCall),
    contextBytes: Math.max(a.contextBytes, b.contextBytes),
    contextItems: Math.max(a.contextItems, b.contextItems),
    tools: Math.max(a.tools, b.tools),
    jsonContainers: Math.max(a.jsonContainers, b.jsonContainers),
    jsonKeys: Math.max(a.jsonKeys, b.jsonKeys),
    schemaNodes: Math.max(a.schemaNodes, b.schemaNodes),
  };
}

export function fitToFootprint(limits: Partial<Limits>, footprint: Footprint): void {
  // A replayed model call with more parallel calls than one pause waits for failed every long-lived run of it
  // (too_many_pending_calls).
  if (limits.maxPendingCalls === undefined && footprint.widestCall > DEFAULT_LIMITS.maxPendingCalls) limits.maxPendingCalls = footprint.widestCall;
  // So did a workload of more tools than a request may list: every replay's first request was refused
  // (array_above_max_length), on every design, though the reader took the file (outside attack atk68 F2).
  if (limits.maxTools === undefined && footprint.tools > DEFAULT_LIMITS.maxTools) limits.maxTools = footprint.tools;
  // So is a context larger than the defaults allow (a long run the recorded agent kept small by compacting inside a
  // user turn: the replay keeps the full history): its http replay was refused mid-run (payload_too_large).
  const context = roomy(footprint.contextBytes);
  if (limits.maxFrameBytes === undefined && context > DEFAULT_LIMITS.maxFrameBytes) limits.maxFrameBytes = context;
  if (limits.maxContextBytes === undefined && context > DEFAULT_LIMITS.maxContextBytes) limits.maxContextBytes = context;
  if (limits.maxContextItems === undefined && footprint.contextItems + 1000 > DEFAULT_LIMITS.maxContextItems) limits.maxContextItems = footprint.contextItems + 1000;
  // So was a tool of more keys in one object, or more schema nodes, than a request may hold, and a context of more
  // objects and arrays (every replay refused at its first call, though the reader took the file; outside attack
  // atk84 F1). A quarter more containers, for what a client adds to each item.
  if (limits.maxJsonKeys === undefined && footprint.jsonKeys > DEFAULT_LIMITS.maxJsonKeys) limits.maxJsonKeys = footprint.jsonKeys;
  if (limits.maxSchemaNodes === undefined && footprint.schemaNodes > DEFAULT_LIMITS.maxSchemaNodes) limits.maxSchemaNodes = footprint.schemaNodes;
  const containers = Math.ceil(footprint.jsonContainers * 1.25) + 1000;
  if (limits.maxJsonContainers === undefined && containers > DEFAULT_LIMITS.maxJsonContainers) limits.maxJsonContainers = containers;
  // And the server-wide budget, which a live context is charged to about three times over (its frames, its token ids,
  // its output's JSON: docs/reliability.md): with only the context raised, one client's long-lived replay of 1,200
  // calls of 100 KB outputs was refused server_busy after 892 calls, its run left paused, and its ws-mode replay lost
  // the connection's cache (previous_response_not_found) (outside attack atk57 F2). Four contexts' worth.
  if (limits.maxServerBytes === undefined && 4 * context > DEFAULT_LIMITS.maxServerBytes) limits.maxServerBytes = 4 * context;
}

/**
 * The limits set by a flag (or environment variable) in `given` below what the workload's replay needs at least, each
 * with that need (without `fitToFootprint`'s margins): its replay is refused part-way, for every design, whatever the
 * other limits were raised to, and nothing said so (outside attack atk87 F2). Said at start, not refused: a smaller
 * limit may be what is measured. The server-wide budget is not among them (a small one is a measured knob, and the
 * start-up warns of one below the frame limit).
 */
export function belowFootprint(given: Partial<Limits>, footprint: Footprint): Partial<Record<keyof Limits, { given: number; needs: number }>> {
  const needs: Partial<Record<keyof Limits, number>> = {
    maxPendingCalls: footprint.widestCall,
    maxTools: footprint.tools,
    maxFrameBytes: footprint.contextBytes,
    maxContextBytes: footprint.contextBytes,
    maxContextItems: footprint.contextItems,
    maxJsonKeys: footprint.jsonKeys,
    maxSchemaNodes: footprint.schemaNodes,
    maxJsonContainers: footprint.jsonContainers,
  };
  const below: Partial<Record<keyof Limits, { given: number; needs: number }>> = {};
  for (const [key, need] of Object.entries(needs) as Array<[keyof Limits, number]>) {
    const set = given[key];
    if (typeof set === 'number' && set < need) below[key] = { given: set, needs: need };
  }
  return below;
}
