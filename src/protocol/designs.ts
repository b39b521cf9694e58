/**
 * The designs' names on the wire, declared once: the `Protocol` a response
 * was served over (as the run records, the telemetry and the clients name
 * it), and the `OpenAI-Beta` header values that choose a design at a
 * WebSocket upgrade. Server, clients, bench and tests import these instead
 * of spelling the strings again. Pure: no I/O.
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
