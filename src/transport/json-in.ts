/**
 * JSON in at the edge: an HTTP body's or a WebSocket frame's text → a value,
 * with the server's limits (nesting depth, keys per object) and, for large
 * texts, in slices that give the event loop a turn every few ms
 * (protocol/json-chunked.ts run by `runCooperative`), so one 16 MiB request
 * cannot keep `/health` or other connections waiting. Also the parse caps
 * (`ParseCaps`) the limits set for `parseCreateBody` and friends.
 */
import type { Limits } from '../engine/services.js';
import { runCooperative } from '../model/cooperative.js';
import { parseJsonText, parseJsonTextWork, type ParseCaps } from '../protocol/parse.js';

export function parseEdgeJson(text: string, what: 'body' | 'frame', limits: Limits): Promise<unknown> {
  return runCooperative(parseJsonTextWork(text, what, limits.maxJsonDepth, limits.maxJsonKeys, limits.maxJsonContainers));
}

/** The one-turn form for small texts (a WebSocket frame under `COOPERATIVE_PARSE_CHARS`). */
export function parseEdgeJsonNow(text: string, what: 'body' | 'frame', limits: Limits): unknown {
  return parseJsonText(text, what, limits.maxJsonDepth, limits.maxJsonKeys, limits.maxJsonContainers);
}

export function parseCaps(limits: Limits): ParseCaps {
  return { maxTools: limits.maxTools, maxInputParts: limits.maxContextItems, maxSchemaNodes: limits.maxSchemaNodes };
}
