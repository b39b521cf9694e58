/**
 * The designs' names on the wire, declared once: the `Protocol` a response
 * was served over (as the run records, the telemetry and the clients name
 * it), and the `OpenAI-Beta` header values that choose a design at a
 * WebSocket upgrade. Server, clients, bench and tests import these instead
 * of spelling the strings again. Pure: no I/O.
 */

/** The server-side designs: what carried a response. */
export type Protocol = 'long-lived' | 'ws' | 'http' | 'long-lived-http';

/** `OpenAI-Beta` value that selects the long-lived Response on a WebSocket upgrade. */
export const LONG_LIVED_BETA = 'responses_websockets=2026-02-04';

/** `OpenAI-Beta` value of WebSocket mode (also the default when no beta value is sent). */
export const WS_MODE_BETA = 'responses_websockets=2026-02-06';
