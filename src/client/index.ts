/**
 * The clients of the designs behind one factory, for agent code that
 * takes the design as a parameter (the CLI, the conformance tests, the
 * benchmark).
 */
import type { AgentClient } from './driver.js';
import { HttpClient } from './http.js';
import { LongLivedClient } from './long-lived.js';
import { LongLivedHttpClient } from './long-lived-http.js';
import { WsClient } from './ws.js';
import type { Protocol } from '../protocol/designs.js';
import { ownValue } from '../protocol/fields.js';

export type ClientProtocol = Protocol | 'http-stored';

type Auth = { apiKey?: string; timing?: boolean };

/**
 * Each design's client, in the order the CLI, the benchmark and the report list them: the one table a new
 * client design adds a row to (its key is then a `ClientProtocol`, everywhere that takes one).
 */
const CLIENTS: { readonly [P in ClientProtocol]: (url: string, auth: Auth) => AgentClient | Promise<AgentClient> } = {
  'long-lived': (url, auth) => LongLivedClient.connect(url, auth),
  ws: (url, auth) => WsClient.connect(url, auth),
  http: (url, auth) => new HttpClient(url, { ...auth, style: 'full' }),
  'http-stored': (url, auth) => new HttpClient(url, { ...auth, style: 'stored' }),
  'long-lived-http': (url, auth) => new LongLivedHttpClient(url, auth),
};

export const CLIENT_PROTOCOLS: readonly ClientProtocol[] = Object.keys(CLIENTS) as ClientProtocol[];

/** `timing` (default true): ask the server for its `llr:timing` events. */
export async function connectClient(
  protocol: ClientProtocol,
  url: string,
  opts: { apiKey?: string | undefined; timing?: boolean } = {},
): Promise<AgentClient> {
  const auth = { ...(opts.apiKey ? { apiKey: opts.apiKey } : {}), ...(opts.timing !== undefined && { timing: opts.timing }) };
  // An own property only: a name from outside (`llr run --protocol`) that is not a design is refused, never `toString`.
  const connect = ownValue(CLIENTS, protocol);
  if (!connect) throw new Error(`unknown protocol '${String(protocol)}'`);
  return connect(url, auth);
}

export { AgentRun, ServerError, type AgentClient, type AgentEvent, type AgentRequest, type ToolExecutor } from './driver.js';
export { HttpClient, LongLivedClient, LongLivedHttpClient, WsClient };
