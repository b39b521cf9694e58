/**
 * The designs the teaching demo races, in lane order: the one list the page
 * reads (through `GET /demo/api/config`) and the race driver runs. Adding a
 * design is one entry here (`long-lived-http` was).
 *
 * The texts are the page's teaching copy: what the client sends to continue
 * after a tool call, and one sentence on what the server keeps between model
 * calls. Leaves out how each design works: that is the server's modes and the
 * project's clients, which the race drives for real.
 */
import type { ClientProtocol } from '../client/index.js';

export interface DemoDesign {
  /** The lane's `data-design` value. */
  id: string;
  /** Which of the project's clients drives the lane. */
  client: ClientProtocol;
  /** Whether the lane's client needs a WebSocket: a server started with `--no-websockets` races only the others. */
  websocket: boolean;
  label: string;
  /** What the client sends to start a run (shown in the wire log). */
  starts_with: string;
  /** What the client sends to continue after its tools ran (shown in the wire log). */
  continues_with: string;
  /**
   * Whether that continuation names the response it continues (`previous_response_id`): the wire log then shows the
   * id with each continuation. Stated per design, so a new design says it here (the log once decided by the name `ws`).
   */
  continues_by_id: boolean;
  /** One sentence for the page: what survives between model calls. */
  keeps: string;
}

export const DEMO_DESIGNS: readonly DemoDesign[] = [
  {
    id: 'long-lived',
    client: 'long-lived',
    websocket: true,
    label: 'Long-lived Response',
    starts_with: 'response.create',
    continues_with: 'response.append',
    continues_by_id: false,
    keeps:
      'One Response stays open for the whole run: at a tool call it pauses (response.done), the client appends only the tool outputs, and the server carries on with everything it had already checked and tokenised.',
  },
  {
    id: 'ws',
    client: 'ws',
    websocket: true,
    label: 'WebSocket mode',
    starts_with: 'response.create',
    continues_with: 'response.create + previous_response_id',
    continues_by_id: true,
    keeps:
      'Each model call is a new Response on the same connection; the server caches the previous one, so the client sends previous_response_id and the new items, but every call pays for a new response, its routing and its bookkeeping.',
  },
  {
    id: 'http',
    client: 'http',
    websocket: false,
    label: 'HTTP + SSE',
    starts_with: 'POST /v1/responses',
    continues_with: 'POST /v1/responses (whole conversation)',
    continues_by_id: false,
    keeps:
      'Nothing survives between calls: every model call is a new POST carrying the whole conversation, which the server validates, tokenises and scans again from the start, so its work grows with every call.',
  },
  {
    id: 'long-lived-http',
    client: 'long-lived-http',
    websocket: false,
    label: 'Long-lived over HTTP',
    starts_with: 'POST /v1/responses?protocol=long-lived',
    continues_with: 'POST /v1/responses/{id}/append',
    continues_by_id: false,
    keeps:
      'The same long-lived Response without a WebSocket: one SSE stream stays open for the whole run, the client posts only the tool outputs to append, and the server keeps everything it had already checked and tokenised.',
  },
];

/** The designs a server races: all of them, or (WebSockets refused) those whose clients use plain HTTP. */
export function servedDesigns(webSockets: boolean): readonly DemoDesign[] {
  return webSockets ? DEMO_DESIGNS : DEMO_DESIGNS.filter((d) => !d.websocket);
}
