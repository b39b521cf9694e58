/**
 * Browser-facing checks at the edge, for a server that runs on a developer's
 * laptop (see docs/reliability.md, "Security defaults"):
 *
 * - Origin: a request that carries `Origin` (browsers add it to every
 *   WebSocket upgrade, every POST and every cross-site request) is served
 *   only when the origin's host and port are the server's own (its `Host`
 *   header), or when `--allow-origin` lists it (`*`: any). Without this any
 *   web page the user visits could drive the local server. Clients that are
 *   not browsers (SDKs, Codex, curl) send no `Origin` and are not affected;
 *   a page served by llr itself (the `/demo` page) is same-origin.
 * - Host: when the server is bound to loopback, the `Host` header must name
 *   loopback (`localhost`, `127.0.0.1`, `[::1]`, any port) or be listed by
 *   `--allow-host` (`*`: any). This stops DNS rebinding, where an attacker's
 *   name resolves to 127.0.0.1 and a page on it reads the server as
 *   same-origin. A request without `Host` (HTTP/1.0) is not a browser's.
 *
 * - The request's host is what RFC 9112 §3.2 says: a request with more than
 *   one `Host` line is refused 400 (Node keeps the first, so `Host:
 *   localhost` then `Host: evil.example` passed while a proxy reading the last
 *   saw another host), and one in absolute form (`GET http://host/path`) is
 *   judged by its target's host, which replaces `Host` (it was judged by its
 *   `Host` header, whatever its target named).
 *
 * Pure functions of the request line and headers; the transports turn a refusal into
 * a 400 or 403 body or an upgrade refusal.
 */
import type { IncomingMessage } from 'node:http';
import { WireError } from '../protocol/errors.js';

export interface GuardOptions {
  /** Origins allowed besides the server's own, as `scheme://host[:port]`; `*` allows any. */
  allowOrigins?: readonly string[];
  /** Host names (or `host:port`) allowed besides loopback when bound to loopback; `*` allows any. */
  allowHosts?: readonly string[];
  /** Whether the server is bound to a loopback address (the Host check applies only then). */
  loopback: boolean;
}

export type Guard = (req: IncomingMessage) => WireError | null;

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Whether a listen address is loopback-only. */
export function isLoopbackAddress(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

function hostAndPort(u: URL): { hostname: string; port: string } {
  const port = u.port || (u.protocol === 'https:' || u.protocol === 'wss:' ? '443' : '80');
  return { hostname: u.hostname.toLowerCase(), port };
}

function tryUrl(s: string): URL | null {
  try {
    return new URL(s);
  } catch {
    return null;
  }
}

/** The authority of an absolute-form request target (`http://host:port/path`), which replaces `Host` (RFC 9112 §3.2.2); else null. */
function targetAuthority(url: string | undefined): string | null {
  if (url === undefined || !/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) return null;
  const u = tryUrl(url);
  return u ? u.host : null;
}

/**
 * A request's target as a URL whose path is the one routed: the absolute form's (`http://host/v1/responses`, RFC 9112
 * §3.2.2), else the target as sent, a path. Resolved against a base, a target beginning `//` had its first segment
 * read as a host: `DELETE //anything/v1/responses/{id}` deleted the response and `//x/v1/responses` opened a
 * WebSocket, past a proxy rule on the `/v1/` prefix, and `POST //v1/responses` was answered 404 for `/responses`
 * (outside conformance tester). Now such a path is routed as it is, and matches no route.
 */
export function requestUrl(target: string | undefined): URL {
  const t = target ?? '/';
  if (targetAuthority(t) !== null) return new URL(t);
  return new URL(`http://localhost${t.startsWith('/') ? '' : '/'}${t}`);
}

/** Characters of a path a refusal names, as sent and as read (`pathSaid`). */
const SAID_PATH_CHARS = 200;

/**
 * A request's path for a refusal's message: as sent (its query left out, and an absolute-form target's scheme and
 * authority, userinfo included), then, when reading it changed it (dot segments resolved, percent-encoding
 * normalised), as read: `/v1/%2e%2e/responses (read as /responses)`. It named only the path as read, one the client
 * never sent (outside attack atk109 I1; over a WebSocket upgrade too, atk112 F5). Each part is clipped, so a long path
 * keeps its "read as" (cut at the message's own bound, it was the part lost: atk112 F6).
 */
export function pathSaid(target: string | undefined, url: URL): string {
  const sent = (target ?? '/').split('?')[0]!.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '') || '/';
  const clip = (p: string) => (p.length > SAID_PATH_CHARS ? `${p.slice(0, SAID_PATH_CHARS)}…` : p);
  return sent === url.pathname ? clip(sent) : `${clip(sent)} (read as ${clip(url.pathname)})`;
}

export function createGuard(opts: GuardOptions): Guard {
  const anyOrigin = opts.allowOrigins?.includes('*') ?? false;
  const origins = new Set((opts.allowOrigins ?? []).map((o) => tryUrl(o)?.origin ?? o.toLowerCase()));
  const anyHost = opts.allowHosts?.includes('*') ?? false;
  const hosts = new Set((opts.allowHosts ?? []).map((h) => h.toLowerCase()));

  return (req) => {
    const raw = req.rawHeaders ?? [];
    let hostLines = 0;
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') hostLines++;
    if (hostLines > 1) return new WireError('invalid_http_request', 'The request has more than one Host header.');
    const host = targetAuthority(req.url) ?? req.headers.host;
    const hostUrl = host === undefined ? null : tryUrl(`http://${host}`);
    if (opts.loopback && host !== undefined && !anyHost) {
      // A fully qualified name's one trailing dot names the same host (`localhost.`, `llr.test.`).
      const name = hostUrl?.hostname.toLowerCase().replace(/([^.])\.$/, '$1');
      if (!name || !(LOOPBACK_NAMES.has(name) || hosts.has(name) || hosts.has(host.toLowerCase()))) {
        return new WireError(
          'host_not_allowed',
          `Host '${host.slice(0, 100)}' is not allowed: this server is bound to loopback and answers only localhost names (start it with --allow-host to add one).`,
        );
      }
    }
    const origin = req.headers.origin;
    if (origin === undefined || anyOrigin) return null;
    const o = tryUrl(origin);
    if (o && o.origin !== 'null') {
      if (origins.has(o.origin)) return null;
      if (hostUrl) {
        const a = hostAndPort(o);
        const b = hostAndPort(hostUrl);
        if (a.hostname === b.hostname && a.port === b.port) return null;
      }
    }
    return new WireError(
      'origin_not_allowed',
      `Origin '${origin.slice(0, 100)}' is not allowed: only pages served by this server may call it (start it with --allow-origin to add one).`,
    );
  };
}
