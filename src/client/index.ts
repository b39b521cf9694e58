/**
 * The clients of the four designs behind one factory, for agent code that
 * takes the design as a parameter (the CLI, the conformance tests, the
 * benchmark).
 */
import type { AgentClient } from './driver.js';
import { HttpClient } from './http.js';
import { LongLivedClient } from './long-lived.js';
import { LongLivedHttpClient } from './long-lived-http.js';
import { WsClient } from './ws.js';
import type { Protocol } from '../protocol/designs.js';

export type ClientProtocol = Protocol | 'http-stored';
export const CLIENT_PROTOCOLS: readonly ClientProtocol[] = ['long-lived', 'ws', 'http', 'http-stored', 'long-lived-http'];

/** `timing` (default true): ask the server for its `llr:timing` events. */
export async function connectClient(
  protocol: ClientProtocol,
  url: string,
  opts: { apiKey?: string | undefined; timing?: boolean } = {},
): Promise<AgentClient> {
  const auth = { ...(opts.apiKey ? { apiKey: opts.apiKey } : {}), ...(opts.timing !== undefined && { timing: opts.timing }) };
  switch (protocol) {
    case 'long-lived':
      return LongLivedClient.connect(url, auth);
    case 'ws':
      return WsClient.connect(url, auth);
    case 'http':
      return new HttpClient(url, { ...auth, style: 'full' });
    case 'http-stored':
      return new HttpClient(url, { ...auth, style: 'stored' });
    case 'long-lived-http':
      return new LongLivedHttpClient(url, auth);
    default: {
      const never: never = protocol;
      throw new Error(`unknown protocol '${String(never)}'`);
    }
  }
}

export { AgentRun, ServerError, type AgentClient, type AgentEvent, type AgentRequest, type ToolExecutor } from './driver.js';
export { HttpClient, LongLivedClient, LongLivedHttpClient, WsClient };
