/**
 * API keys: optional. With none configured every request is served and has
 * no owner; with keys configured a request must carry one as
 * `Authorization: Bearer <key>` (or `?api_key=` on a WebSocket upgrade,
 * since browsers cannot set headers). The owner of stored responses is a
 * hash of the key, never the key itself. Comparison is constant-time.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { WireError } from '../protocol/errors.js';

export interface Authenticator {
  readonly enabled: boolean;
  /** The owner id (null when auth is off), or false when refused. */
  check(req: IncomingMessage, url?: URL): string | null | false;
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/**
 * The key of an `Authorization: Bearer <key>` header, as `check` reads it (the scheme in any case, the key trimmed),
 * or null. The demo hands the same key to its lanes (src/demo/service.ts).
 */
export function bearerKey(header: unknown): string | null {
  return typeof header === 'string' && /^Bearer\s+/i.test(header) ? header.replace(/^Bearer\s+/i, '').trim() : null;
}

export function createAuthenticator(keys: readonly string[]): Authenticator {
  const digests = keys.map(digest);
  return {
    enabled: digests.length > 0,
    check(req, url) {
      if (digests.length === 0) return null;
      const key = bearerKey(req.headers['authorization']) ?? url?.searchParams.get('api_key') ?? null;
      if (!key) return false;
      const d = digest(key);
      let ok = false;
      for (const k of digests) ok = timingSafeEqual(k, d) || ok;
      return ok ? d.toString('hex').slice(0, 24) : false;
    },
  };
}

/**
 * The refusal of a request `check` refused, as the API words it: `401 invalid_api_key`, type
 * `invalid_request_error`; the message says whether no key came or a wrong one (the key itself is never echoed).
 */
export function apiKeyRefusal(req: IncomingMessage, url?: URL): WireError {
  const sent = bearerKey(req.headers['authorization']) ?? url?.searchParams.get('api_key') ?? null;
  return new WireError(
    'invalid_api_key',
    sent
      ? 'Incorrect API key provided.'
      : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
  );
}

/**
 * A request target as a log line shows it: any `api_key` query parameter's value replaced by `REDACTED` (its name
 * read as `URLSearchParams` reads it, so `api%5Fkey` too), then cut to 200 characters. A refused WebSocket upgrade or
 * request logged its target whole, a key sent as `?api_key=` with it (outside attack).
 */
export function loggedPath(target: string | undefined): string {
  const url = target ?? '';
  const q = url.indexOf('?');
  if (q < 0) return url.slice(0, 200);
  const pairs = url.slice(q + 1).split('&').map((pair) => {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    let decoded = name;
    try {
      decoded = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // Not decodable: URLSearchParams keeps such a name as it is.
    }
    return decoded === 'api_key' ? `${name}=REDACTED` : pair;
  });
  return `${url.slice(0, q)}?${pairs.join('&')}`.slice(0, 200);
}
