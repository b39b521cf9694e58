/**
 * JSON in at the edge: an HTTP body's or a WebSocket frame's text → a value,
 * with the server's limits (nesting depth, keys per object) and, for large
 * texts, in slices that give the event loop a turn every few ms
 * (protocol/json-chunked.ts run by `runCooperative`), so one 16 MiB request
 * cannot keep `/health` or other connections waiting. Also the parse caps
 * (`ParseCaps`) the limits set for `parseCreateBody` and friends.
 *
 * The limits come from the session layer (`SessionHost.limits`, the server's
 * `Limits`): only the fields read here are named, so the transport needs
 * nothing from engine/.
 */
import { StringDecoder } from 'node:string_decoder';
import { runCooperative } from '../cooperative.js';
import type { ParseCaps } from '../protocol/parse.js';
import { parseJsonText, parseJsonTextWork } from '../protocol/json-text.js';

/** The limits the edge parse applies (a subset of the server's `Limits`, engine/services.ts, where each is documented). */
export interface EdgeLimits {
  readonly maxJsonDepth: number;
  readonly maxJsonKeys: number;
  readonly maxJsonContainers: number;
  readonly maxTools: number;
  readonly maxContextItems: number;
  readonly maxSchemaNodes: number;
}

export function parseEdgeJson(text: string | Buffer, what: 'body' | 'frame', limits: EdgeLimits): Promise<unknown> {
  return runCooperative(
    (function* () {
      const s = typeof text === 'string' ? text : yield* decodeWork(text);
      return yield* parseJsonTextWork(s, what, limits.maxJsonDepth, limits.maxJsonKeys, limits.maxJsonContainers);
    })(),
  );
}

/** Bytes decoded per slice (~1–3 ms). */
const DECODE_SLICE_BYTES = 1024 * 1024;

/** UTF-8 → string in slices (a WebSocket frame arrives as one Buffer; `toString` of 16 MiB is one long turn). */
function* decodeWork(buf: Buffer): Generator<void, string, void> {
  const decoder = new StringDecoder('utf8');
  const parts: string[] = [];
  for (let i = 0; i < buf.length; i += DECODE_SLICE_BYTES) {
    parts.push(decoder.write(buf.subarray(i, i + DECODE_SLICE_BYTES)));
    yield;
  }
  parts.push(decoder.end());
  return parts.join('');
}

/** The one-turn form for small texts (a WebSocket frame under `COOPERATIVE_PARSE_CHARS`). */
export function parseEdgeJsonNow(text: string, what: 'body' | 'frame', limits: EdgeLimits): unknown {
  return parseJsonText(text, what, limits.maxJsonDepth, limits.maxJsonKeys, limits.maxJsonContainers);
}

/** `notAppendable`: a WebSocket session's protocol when it takes no `response.append` (`ParseCaps.notAppendable`). */
export function parseCaps(limits: EdgeLimits, allowUnknownParameters = false, notAppendable?: string): ParseCaps {
  // One literal: `{ ...parseCaps(limits), allowUnknownParameters }` per frame took V8's slow path for a key added after
  // a spread (protocol/fields.ts `withFields`).
  return { maxTools: limits.maxTools, maxInputParts: limits.maxContextItems, maxSchemaNodes: limits.maxSchemaNodes, allowUnknownParameters, notAppendable };
}
