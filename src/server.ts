/**
 * The composition root: builds one server's services (simulated model,
 * router, store, ledger, post-inference work, run records) from options with
 * documented defaults, binds the HTTP server and the WebSocket upgrade, and
 * shuts down gracefully — runs in flight end `incomplete`, their
 * post-inference work still happens once, deferred work is flushed.
 *
 * Used by the CLI (`llr serve`), the tests (port 0, closed after each test by
 * test/helpers/server.ts; `Symbol.asyncDispose` also closes it) and the
 * benchmarks. Transports only move bytes; the modes hold the designs.
 */
import { watchGc } from './gc-stats.js';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { realClock, type Clock } from './model/clock.js';
import { DEFAULT_RECORD_REQUESTS, SimulatedModel } from './model/simulated.js';
import { DEFAULT_BLOCK_SIZE, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_INSERT_BLOCKS, PrefixCache } from './model/prefix-cache.js';
import { autoPolicy, type ModelPolicy } from './model/policies.js';
import type { Model, ModelSettings } from './model/types.js';
import { Ledger, PostInference, PostWorkTracker } from './pipeline/post.js';
import { InFlightRuns } from './engine/in-flight.js';
import { Router } from './pipeline/route.js';
import { openStore } from './store/index.js';
import { RunRecords } from './engine/records.js';
import { DEFAULT_LIMITS, DEFAULT_SWITCHES, type Limits, type Services, type Switches } from './engine/services.js';
import { SessionHost } from './modes/host.js';
import { ServerBytes } from './modes/server-bytes.js';
import { createAuthenticator } from './transport/auth.js';
import { createGuard, isLoopbackAddress } from './transport/guard.js';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WsTransport } from './transport/ws.js';
import { HttpTransport } from './transport/http.js';
import { lingerAfterPeerEnd } from './transport/socket-watch.js';
import { LogBudget } from './engine/log-budget.js';
import { LINGER_MS } from './transport/body.js';
import { afterAnswers, answerClientError, answerConnect, asksForWebSocket, serveUpgradeAsHttp } from './transport/raw-answers.js';
import { createLogger } from './log.js';
import { DemoService, type DemoOptions } from './demo/service.js';
import { Chaos, parseChaosSpec, type ChaosRule } from './engine/faults.js';
import { loadTokenizer } from './model/tokenizer.js';
import { setMergeCacheEntries } from './model/bpe-merge.js';

/** The simulated model's defaults: a fast model (1,000 tokens/s) with a realistic first token. */
export const DEFAULT_MODEL_SETTINGS: ModelSettings = {
  tokensPerSecond: 1000,
  ttftBaseMs: 150,
  prefillTokensPerSecond: 20_000,
};

/** Settings that make the model cost nothing (no TTFT, no prefill, infinite decode rate): what remains is the API, the transport and the client. */
export const INSTANT_MODEL: ModelSettings = {
  tokensPerSecond: Infinity,
  ttftBaseMs: 0,
  prefillTokensPerSecond: Infinity,
};

export interface ServerOptions {
  host?: string;
  /** 0 picks a free port. Default 8080. */
  port?: number;
  /** API keys; none (the default) serves everyone. */
  apiKeys?: string[];
  /** The model; default the simulated model with the given policy. */
  model?: Model;
  policy?: ModelPolicy;
  modelSettings?: Partial<ModelSettings>;
  seed?: number;
  switches?: Partial<Switches>;
  limits?: Partial<Limits>;
  /** Response store: 'memory', ':memory:' (SQLite in memory) or a SQLite file path. */
  store?: string;
  /** Injected latency per remote hop on the path to the model, ms. Default 0. */
  hopLatencyMs?: number;
  /** Remote hops on that path (gateway → router → engine). Default 2. */
  hops?: number;
  /** Remote calls every design pays before each model call (e.g. a hosted safety classifier). Default 0. */
  callHops?: number;
  /** Latency of each of those calls, ms. Default 0. */
  callHopLatencyMs?: number;
  /** Answer WebSocket upgrades with 426 (fallback experiments). */
  refuseWebSockets?: boolean;
  /**
   * Ignore a create's unknown top-level fields instead of refusing them `400 unknown_parameter` as the API does
   * (`CREATE_PARAMETERS`, protocol/parse.ts): for a client that sends a field newer than that list. Default false.
   */
  allowUnknownParameters?: boolean;
  /** Browser origins allowed besides the server's own (`*`: any). Default none. See transport/guard.ts. */
  allowOrigins?: string[];
  /** Host names allowed besides localhost when bound to loopback (`*`: any). Default none. */
  allowHosts?: string[];
  logger?: Logger;
  clock?: Clock;
  /**
   * Chaos knobs (engine/faults.ts, docs/reliability.md): faults injected on
   * purpose, as rules or `--chaos` specs (`error@first-token:0.1`). Default
   * none: nothing is injected.
   */
  chaos?: Array<ChaosRule | string>;
  /** Seed of the chaos decisions; default `seed`. */
  chaosSeed?: number;
  /** The teaching demo at /demo (src/demo/service.ts for its bounds); `false` turns it off. */
  demo?: Partial<DemoOptions> | false;
  /** Model requests the simulated model keeps for inspection (a ring). Default 0 (`DEFAULT_RECORD_REQUESTS`). */
  recordRequests?: number;
  /** Billing ledger entries kept besides per-owner totals (a ring). Default 10,000. */
  ledgerEntries?: number;
  /** Prefix-cache capacity in 64-token blocks. Default 65,536 (4M tokens). */
  prefixCacheBlocks?: number;
  /** Blocks one model call places in the prefix cache beyond those already in place. Default 1,024 (`DEFAULT_MAX_INSERT_BLOCKS`). */
  prefixCacheInsertBlocks?: number;
  /** 'owner' (default): the prefix cache is partitioned per API key; 'shared': one namespace for all keys. */
  prefixCacheScope?: 'owner' | 'shared';
  /**
   * Load the tokenizer's tables (~6 MB, ~0.1 s) when the server is created,
   * in one go, instead of when the first request needs them. Default false:
   * the first request that tokenizes starts the load and waits for it while
   * the tables are built a slice at a time, so start-up stays small and
   * `/health` keeps answering during the load (model/tokenizer.ts;
   * `llr serve --eager-tokenizer`).
   */
  eagerTokenizer?: boolean;
  /** The old switch for what is now the default (tables loaded when first needed): accepted and ignored. */
  lazyTokenizer?: boolean;
  /**
   * Bound of the tokenizer's merge cache, in pre-tokens (model/bpe-merge.ts;
   * default `MERGE_CACHE_ENTRIES`, 100,000; 0: off). The tokenizer is one per
   * process, so this sets it for every server in the process
   * (`llr serve --tokenizer-cache-entries`).
   */
  tokenizerCacheEntries?: number;
}

/**
 * Sockets accepted past `maxConnections` (each answered `/health`, or 503
 * `too_many_connections`, and closed): the reserve that keeps `/health`
 * answering while idle or half-open clients hold every slot. Past cap +
 * reserve a socket is closed at once. Bounded by the headers timeout.
 */
export const OVER_CAP_RESERVE = 64;

/**
 * Node's HTTP timeouts from the limits (0: none). Node checks them every
 * `connectionsCheckingInterval` (its default is 30 s, which let a half-open
 * client hold a slot for up to 90 s): here a quarter of the shortest, at
 * least 10 ms and at most 1 s. Node requires headers ≤ request timeout.
 */
export function httpServerOptions(limits: Limits): {
  headersTimeout: number;
  requestTimeout: number;
  connectionsCheckingInterval: number;
  requireHostHeader: boolean;
} {
  const requestTimeout = limits.requestTimeoutMs;
  const headersTimeout = requestTimeout > 0 && limits.headersTimeoutMs > 0 ? Math.min(limits.headersTimeoutMs, requestTimeout) : limits.headersTimeoutMs;
  const shortest = Math.min(...[headersTimeout, requestTimeout].filter((t) => t > 0), 4000);
  return {
    headersTimeout,
    requestTimeout,
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(shortest / 4))),
    // An HTTP/1.1 request without `Host` is refused by the transport with the JSON error body every refusal
    // has (HttpTransport.route); Node's own refusal is a bare 400 with no body.
    requireHostHeader: false,
  };
}

export const DEFAULT_STORE = 'data/llr.sqlite';
export const DEFAULT_HOST = '127.0.0.1';

export class LlrServer {
  readonly services: Services;
  readonly http: Server;
  readonly ws: WsTransport;
  readonly httpTransport: HttpTransport;
  readonly demo: DemoService | null;
  /** The server-wide byte budget (`maxServerBytes`, modes/server-bytes.ts), held by the session layer and charged at the edge. */
  readonly bytes: ServerBytes;
  /** The session layer both transports open their sessions in (modes/host.ts). */
  readonly host: SessionHost;
  refuseWebSockets: boolean;
  private closing: Promise<void> | null = null;
  /** Stops this server's share of the process's GC observer (`GET /llr/stats` reports the pauses): set while listening. */
  private unwatchGc: (() => void) | null = null;

  constructor(readonly options: ServerOptions = {}) {
    if (options.tokenizerCacheEntries !== undefined) setMergeCacheEntries(options.tokenizerCacheEntries);
    if (options.eagerTokenizer) loadTokenizer();
    const log = options.logger ?? createLogger();
    const clock = options.clock ?? realClock;
    const settings = { ...DEFAULT_MODEL_SETTINGS, ...options.modelSettings };
    const switches = { ...DEFAULT_SWITCHES, ...options.switches };
    const limits = { ...DEFAULT_LIMITS, ...options.limits };
    // Expiry is measured on the injected wall clock, the one responses' created_at is taken from.
    const age = { ttlMs: limits.storeTtlMs, now: () => clock.wallNow?.() ?? Date.now() };
    const store = openStore(
      options.store ?? DEFAULT_STORE,
      { maxResponses: limits.maxMemoryStoreResponses, maxBytes: limits.maxMemoryStoreBytes, ...age },
      { maxResponses: limits.maxFileStoreResponses, maxBytes: limits.maxFileStoreBytes, ...age },
      log,
    );
    const ledger = new Ledger(options.ledgerEntries);
    const auth = createAuthenticator(options.apiKeys ?? []);
    const demo = options.demo === false ? null : new DemoService(() => this.services, options.demo ?? {}, clock, options.seed ?? 1, auth.enabled, () => !this.refuseWebSockets);
    this.demo = demo;
    const model =
      options.model ??
      new SimulatedModel({
        policy: options.policy ?? autoPolicy(),
        clock,
        seed: options.seed ?? 1,
        recordRequests: options.recordRequests ?? DEFAULT_RECORD_REQUESTS,
        prefixCache: new PrefixCache(options.prefixCacheBlocks ?? DEFAULT_MAX_ENTRIES, DEFAULT_BLOCK_SIZE, options.prefixCacheInsertBlocks ?? DEFAULT_MAX_INSERT_BLOCKS),
        prefixCacheScope: options.prefixCacheScope ?? 'owner',
      });
    this.services = {
      // Demo lanes' model names go to their own simulated models (src/demo/models.ts).
      model: demo ? demo.models.wrap(model) : model,
      router: new Router(
        {
          deployments: [{ name: 'sim-model', aliases: ['sim', 'default'], settings }],
          replicas: 4,
          hopLatencyMs: options.hopLatencyMs ?? 0,
          hops: options.hops ?? 2,
          ...(demo && { resolve: demo.models.resolve }),
          callHops: options.callHops ?? 0,
          callHopLatencyMs: options.callHopLatencyMs ?? 0,
        },
        clock,
      ),
      store,
      ledger,
      post: new PostInference(ledger, store, log),
      postWork: new PostWorkTracker(log),
      inFlight: new InFlightRuns(),
      records: new RunRecords(limits.maxRunRecords, limits.maxRunRecordsBytes),
      log,
      clock,
      switches,
      limits,
      ...(options.allowUnknownParameters === true && { allowUnknownParameters: true }),
      clientErrorLog: new LogBudget(limits.maxClientErrorLogsPerSecond, clock.now, (unlogged, perSecond) =>
        log.info({ code: 'client_errors_unlogged', unlogged, per_second: perSecond }, 'client errors past the log budget were counted, not logged'),
      ),
      chaos: new Chaos(
        (options.chaos ?? []).map((r) => (typeof r === 'string' ? parseChaosSpec(r) : r)),
        options.chaosSeed ?? options.seed ?? 1,
        clock,
      ),
    };
    if (this.services.chaos?.rules.length) log.warn({ chaos: this.services.chaos.rules, seed: this.services.chaos.seed }, 'chaos knobs on: faults will be injected');
    this.refuseWebSockets = options.refuseWebSockets ?? false;
    const guard = createGuard({
      allowOrigins: options.allowOrigins ?? [],
      allowHosts: options.allowHosts ?? [],
      loopback: isLoopbackAddress(options.host ?? DEFAULT_HOST),
    });
    // The connection cap: a socket accepted while `maxConnections` are open
    // is marked; its request or upgrade is answered 503 and it is closed.
    const overCap = new WeakSet<Socket>();
    const overCapacity = (socket: Socket) => overCap.has(socket);
    // The session layer both transports open their sessions in: every design is a policy there.
    this.bytes = new ServerBytes(limits.maxServerBytes);
    const host = new SessionHost(this.services, this.bytes);
    this.host = host;
    this.ws = new WsTransport({
      host,
      auth,
      refuseUpgrades: () => this.refuseWebSockets,
      guard,
      overCapacity,
    });
    this.httpTransport = new HttpTransport(host, auth, guard, overCapacity, demo);
    this.http = createHttpServer(httpServerOptions(limits), (req, res) => this.httpTransport.handle(req, res));
    this.http.keepAliveTimeout = limits.keepAliveTimeoutMs;
    // Past the cap a few more sockets are accepted, so `/health` still answers
    // (everything else gets 503); past that reserve the kernel's accept is
    // closed at once (net.Server.maxConnections).
    this.http.maxConnections = limits.maxConnections + OVER_CAP_RESERVE;
    let open = 0;
    // Sockets given back to the HTTP server after an `Upgrade` it ignores (serveUpgradeAsHttp): already counted.
    const reparsed = new WeakSet<Duplex>();
    this.http.on('connection', (socket: Socket) => {
      if (reparsed.has(socket)) return;
      if (open >= limits.maxConnections) overCap.add(socket);
      open++;
      socket.once('close', () => open--);
      lingerAfterPeerEnd(socket, LINGER_MS, (unsent) =>
        log.info({ code: 'peer_half_closed', unsent, linger_ms: LINGER_MS, remote: `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}` }, 'peer half-closed and took nothing more; dropped the connection'),
      );
    });
    // Only a WebSocket upgrade is taken; any other (`Upgrade: h2c` from `curl --http2`) is served as HTTP/1.1. A WebSocket
    // upgrade pipelined behind requests still being answered waits for their answers (afterAnswers): taken at once, its
    // 101 went out first and the answers before it were then written into the WebSocket stream (outside attack).
    // An HTTP/1.0 request's `Upgrade` is ignored too (RFC 9110 §7.8: a server MUST; RFC 6455 §4.1 asks for HTTP/1.1 or
    // higher): the `ws` library switched it to a WebSocket. Served as HTTP, it gets that route's answer (or 505 past 1.x).
    // So is another method's (RFC 6455 §4.1: the handshake is a GET): a POST with `Upgrade: websocket` was refused 405
    // in the `ws` library's words, no `Allow` (outside fuzzer atk61 F3); as HTTP it gets its route's answer.
    this.http.on('upgrade', (req, socket, head) =>
      asksForWebSocket(req) && req.method === 'GET' && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1
        ? afterAnswers(socket, () => this.ws.handleUpgrade(req, socket, head))
        : serveUpgradeAsHttp(this.http, req, socket, head, reparsed),
    );
    // A request the parser refuses, or one past the headers/request timeout: a JSON error body, as every refusal.
    this.http.on('clientError', (err: Error & { code?: string }, socket) => answerClientError(err, socket, log));
    this.http.on('connect', (req, socket) => answerConnect(req, socket, log));
    // `Expect: 100-continue`: the `100 Continue` waits for the checks before the body (an early refusal asks for none).
    this.http.on('checkContinue', (req, res) => this.httpTransport.handleContinue(req, res));
    // An `Expect` other than `100-continue`: 417 with the JSON error body (Node alone sends a bare 417).
    this.http.on('checkExpectation', (req, res) => this.httpTransport.refuseExpectation(req, res));
  }

  async listen(): Promise<{ host: string; port: number; url: string }> {
    const host = this.options.host ?? DEFAULT_HOST;
    try {
      await new Promise<void>((resolve, reject) => {
        this.http.once('error', reject);
        this.http.listen(this.options.port ?? 8080, host, this.services.limits.listenBacklog, () => {
          this.http.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      // Not listening (the port taken, a host not ours): what the constructor opened goes with it (the store's file
      // and its expiry sweep were left open for a caller that catches the error and goes on).
      await this.close();
      throw err;
    }
    const { port } = this.http.address() as AddressInfo;
    // Closed with the server (`close`), also when what follows throws.
    if (this.closing === null) this.unwatchGc ??= watchGc();
    const h = host.includes(':') ? `[${host}]` : host;
    const url = `http://${h}:${port}`;
    try {
      if (!URL.canParse(url)) throw new Error(`cannot serve on '${host}': ${url} is not a URL`);
      this.demo?.setUrl(url);
    } catch (err) {
      // Not left listening: the caller gets the error and no server (an IPv6 zone id, `::1%lo`, has no URL form,
      // and the process stayed up serving after 'llr: Invalid URL').
      await this.close();
      throw err;
    }
    return { host, port, url };
  }

  /** Graceful shutdown; idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.http.close();
      // Demo races first: their lanes are clients of this server and wind down through it.
      await this.demo?.shutdown();
      await Promise.all([this.ws.shutdown(), this.httpTransport.shutdown()]);
      await this.services.postWork.flush();
      // A request that reached its connection as shutdown began (accepted, its bytes not yet read) is read and
      // answered 503 `server_shutting_down` in the event loop's next turn: closed at once, its client got a reset
      // and could not tell whether its create ran (outside attack atk71 F3). A turn reads what has arrived; the
      // answer's write is corked until the tick after, which the second turn lets out.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      this.http.closeAllConnections();
      this.services.store.close();
      this.unwatchGc?.();
    })();
    return this.closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

export async function startServer(options: ServerOptions = {}): Promise<{ server: LlrServer; url: string; port: number }> {
  const server = new LlrServer(options);
  const { url, port } = await server.listen();
  return { server, url, port };
}
