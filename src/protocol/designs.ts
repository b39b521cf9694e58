/**
 * The designs' names on the wire, declared once: the `Protocol` a response
 * was served over (as the run records, the telemetry and the clients name
 * it), and the `OpenAI-Beta` header values that choose a design at a
 * WebSocket upgrade; and `DESIGNS`, each design's shape as a client sees it
 * (transport, `?protocol=`, whether its runs pause). Server, clients, bench,
 * chaos and tests import these instead of spelling the strings again. Pure:
 * no I/O.
 */

/** The designs a WebSocket carries, one chosen at the upgrade (transport/ws.ts `chooseProtocol`). */
export type SocketProtocol = 'long-lived' | 'ws';

/** The designs a `POST /v1/responses` carries, one chosen by its `?protocol=` (transport/http-query.ts `createProtocol`). */
export type HttpProtocol = 'http' | 'long-lived-http';

/** The server-side designs: what carried a response. A new design is added to its transport's union above. */
export type Protocol = SocketProtocol | HttpProtocol;

/** `OpenAI-Beta` value that selects the long-lived Response on a WebSocket upgrade. */
export const LONG_LIVED_BETA = 'responses_websockets=2026-02-04';

/** `OpenAI-Beta` value of WebSocket mode (also the default when no beta value is sent). */
export const WS_MODE_BETA = 'responses_websockets=2026-02-06';

/** What a design looks like from a client, for code that treats every design alike (the chaos scenarios). */
interface DesignShape<T extends 'websocket' | 'http'> {
  /** A WebSocket upgrade to `/v1/responses`, or `POST /v1/responses`. */
  transport: T;
  /** The `?protocol=` value that chooses the design on its transport; null: the transport's default. */
  query: string | null;
  /**
   * A run pauses at the client's tool calls (`response.done`) and goes on when their outputs are appended to it
   * (`response.append` on a WebSocket, `POST /v1/responses/{id}/append` over HTTP); otherwise each model call's
   * continuation is a new response.
   */
  pauses: boolean;
}

/**
 * Every server design, in the order the CLI, the benchmark and the chaos suite list them, with its shape: the
 * one runtime table of the designs. A new `Protocol` is a compile error here until it has its row, and the chaos
 * scenarios iterate this table (chaos/suite.ts `designsFor`), so they cover it with no edit of theirs.
 */
export const DESIGNS: { readonly [P in SocketProtocol]: DesignShape<'websocket'> } & { readonly [P in HttpProtocol]: DesignShape<'http'> } = {
  'long-lived': { transport: 'websocket', query: 'long-lived', pauses: true },
  ws: { transport: 'websocket', query: 'ws', pauses: false },
  http: { transport: 'http', query: null, pauses: false },
  'long-lived-http': { transport: 'http', query: 'long-lived', pauses: true },
};

export type DesignTraits = (typeof DESIGNS)[Protocol];

/** The designs' names, in the table's order. */
export const PROTOCOLS: readonly Protocol[] = Object.keys(DESIGNS) as Protocol[];

/** The path a client opens the design on: `/v1/responses`, with its `?protocol=` when it has one. */
export function designPath(p: Protocol): string {
  const q = DESIGNS[p].query;
  return q === null ? '/v1/responses' : `/v1/responses?protocol=${encodeURIComponent(q)}`;
}

/** Is `s` a design's name (one read back from a store file, which another build may have written)? */
export function isProtocol(s: string): s is Protocol {
  return Object.hasOwn(DESIGNS, s);
}

/**
 * Are `p`'s runs cancelled by `POST /v1/responses/{id}/cancel` while they live (a design over HTTP whose runs pause:
 * a run lives across requests)? Such a run, once ended and stored, is answered by a repeated cancel with its final
 * Response, as a background response is (transport/http.ts `cancel`).
 */
export function cancelledOverHttp(p: Protocol): boolean {
  return DESIGNS[p].transport === 'http' && DESIGNS[p].pauses;
}

/** Is `p` carried by a WebSocket (its `transport` in the table)? */
export function isSocketDesign(p: Protocol): p is SocketProtocol {
  return DESIGNS[p].transport === 'websocket';
}
