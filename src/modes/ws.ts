/**
 * WebSocket mode (the shipped design): each model call is its own response;
 * the client continues with `previous_response_id` and only the new items.
 * What survives between responses is the connection's most recent response:
 * its rendered context (items and tokens, with the function calls it knows),
 * its tool definitions and instructions, and its routing decision. A
 * continuation from it validates, scans and tokenizes only the new items.
 *
 * Cache miss: `store:false` → `previous_response_not_found`; `store:true` →
 * hydrate the chain from the store with a full rebuild (counted). A failed or
 * unfinished continuation evicts the id, and so does a `DELETE
 * /v1/responses/{id}` of the cached response (`CachedResponses`): a deleted
 * response is not continued, from the cache or the store. Each optimization
 * is a switch (`Switches`) so its contribution can be measured.
 */
import type { CreateParams } from '../protocol/events.js';
import { jsonTextWork, NATIVE_TEXT_CHARS, textOver } from '../protocol/json-chunked.js';
import { runCooperative } from '../cooperative.js';
import { hasCompaction } from '../pipeline/compaction.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import { checkFull, checkIncremental } from '../pipeline/checks.js';
import { checkJsonMode, duplicateItemId, pendingCallsOf, type PendingCalls } from '../pipeline/validate.js';
import { renderAppendAsync, renderFullAsync, type RenderedContext } from '../pipeline/render.js';
import type { RouteDecision } from '../pipeline/route.js';
import type { RunPlan } from '../engine/run.js';
import type { Services } from '../engine/services.js';
import { affinityKey, checkAndRender } from './prepare.js';
import { notFound, prepareFromStore, resolveReferences } from './hydrate.js';
import { WireError } from '../protocol/errors.js';
import { MAX_CHAIN_LINKS } from '../store/types.js';
import { checkContext, contextBytes, ITEM_HELD_BYTES } from '../engine/budget.js';
import type { ModePolicy, SessionInfo } from './session.js';

interface Cached {
  id: string;
  context: RenderedContext;
  route: RouteDecision;
  /** Instructions and tools as rendered into the context's header. */
  headerKey: string;
  /**
   * The response's client calls, each waiting for its output: a continuation must answer them all
   * (`missing_tool_output`). Only this response's: the check that let its request in left no call
   * unanswered before it, so nothing earlier is scanned again.
   */
  pending: PendingCalls;
  /** Created with `store: true`: registered in `CachedResponses`, so a DELETE of it evicts it. */
  stored: boolean;
  /**
   * The stored responses whose items the context holds: its stored ancestors, and itself when stored. Shared with
   * the entry it extended in place (each continuation adds its id, no copy); a context rendered anew copies it.
   */
  lineage: Set<string>;
  /** When its response ended (the services' clock): a `store: false` entry with calls pending is guarded a while (`guarded`). */
  endedAt: number;
}

/**
 * The stored responses the connection caches hold, server-wide (modes/host.ts): `DELETE /v1/responses/{id}`
 * of one evicts it from its connection's cache. Before, the connection went on continuing a response its
 * owner had deleted (the store said `previous_response_not_found` for it, the cache served it, and the
 * continuation was stored with a chain no later request could load; outside attack).
 */
export interface CachedResponses {
  /** A connection's cache now holds stored response `id`; `evict` empties that cache. */
  hold(id: string, evict: () => void): void;
  /** It no longer does (replaced, evicted, the connection ended). */
  release(id: string): void;
  /**
   * `deleted` is told the id of each stored response of this connection's owner that `DELETE` removes, until the
   * returned function is called: the cache checks its lineages against each at once. `null`: some were deleted
   * elsewhere that cannot be named (`sync`), every lineage is taken as broken.
   */
  watch(deleted: (id: string | null) => void): () => void;
  /**
   * Hear now of the deletes other processes on the store's file made (their watchers told, `null` when which is not
   * known): a plan calls it before it looks in its cache and before it checks what was deleted while it ran.
   */
  sync(): void;
}

/**
 * `id` added to `lineage`, which keeps the latest `cap` (MAX_CHAIN_LINKS, as many as the store walks): one id was kept
 * per stored continuation for the connection's life (a compacting chain of 200,000 grew the heap ~135 bytes a turn,
 * counted nowhere; outside attack atk62 F1). A delete of an older ancestor is not noticed, as the store path could not
 * load a chain that long either; the ids are charged with the cached context (`entryBytes`).
 */
export function extendLineage(lineage: Set<string>, id: string, cap = MAX_CHAIN_LINKS): void {
  lineage.add(id);
  while (lineage.size > cap) lineage.delete(lineage.values().next().value!);
}

/** What one id of a cached entry's lineage holds: a 37-character string and its place in a Set (measured ~135 bytes). */
const LINEAGE_ID_BYTES = 136;

export function wsModePolicy(services: Services, info: SessionInfo, cachedResponses?: CachedResponses): ModePolicy {
  /**
   * The cache: the last completed response of each WebSocket lane (`stream_id`; null for none), most recently
   * cached last. Lanes are conversations the API runs in parallel on one connection: with one entry for the
   * connection, two `store: false` conversations on lanes `a` and `b`, interleaved, could not continue (each
   * response evicted the other lane's; outside attack). Held to the context budget together: a new entry evicts
   * the oldest other lanes' entries until all fit in `maxContextBytes`, so a connection keeps no more than it did.
   */
  const caches = new Map<string | null, Cached>();
  /**
   * Per create planned here (`plan`), for `ended` and `failed`: the lane it came in; the header key computed in plan()
   * (reused when the response is cached: instructions and tools can be tens of KB); the lineage its context carries
   * (without it) and the deletes count when it was planned (null until then). One entry, not a WeakMap per field:
   * the three sets were ~5% of plan()'s samples in a CPU profile of the ws loop.
   */
  const planned = new WeakMap<CreateParams, { lane: string | null; headerKey: string | null; lineage: Set<string> | null; held: number; intact: { items: number; tokens: number } | null }>();
  /**
   * The cached entry the create planned or running continues (its context extended in place, or read for a new one),
   * null for none: `spare` keeps it, as its memory stays held by that create whatever the cache does.
   */
  let current: Cached | null = null;
  /**
   * Lineages that hold a response `DELETE` removed: a cached entry with one is not continued from the cache. Each
   * delete of the owner's is checked at once against the cached entries' lineages and the one of the response in
   * flight (a connection runs one at a time), and, while a create is planned, kept (`planning`) for its lineage,
   * known only at the plan's end. Before, deletes were listed (the latest 1,024 server-wide, then per owner), and an
   * entry checked at its next use past them asked the store for each id, which took an evicted ancestor for a deleted
   * one: another client's deletes got a session whose early responses the store had evicted refused
   * `previous_response_not_found` (outside attacks atk62 F3, atk65 F3).
   */
  const broken = new WeakSet<Set<string>>();
  /**
   * The ids of the last cached responses let go to make room in the server-wide byte budget (`shed`), at most
   * `LET_GO_IDS_KEPT`: a `store: false` continuation of one is told so, not only "not found": it was a response this
   * connection had just finished, and nothing said the budget was the cause (outside fuzzer atk88 I1).
   */
  const letGo: Array<{ id: string; stored: boolean }> = [];
  const letGoEntry = (id: string) => letGo.find((g) => g.id === id);
  let inFlight: Set<string> | null = null;
  let planning: Set<string> | null = null;
  /** More deletes during one plan than `planning` keeps: its lineage is taken as broken (a miss next time, never a wrong hit). */
  let planningOverflow = false;
  const unwatch = cachedResponses?.watch((id) => {
    if (id === null) {
      for (const c of caches.values()) broken.add(c.lineage);
      if (inFlight) broken.add(inFlight);
      if (planning !== null) planningOverflow = true;
      return;
    }
    for (const c of caches.values()) if (c.lineage.has(id)) broken.add(c.lineage);
    if (inFlight?.has(id)) broken.add(inFlight);
    if (planning === null) return;
    if (planning.size < MAX_CHAIN_LINKS) planning.add(id);
    else planningOverflow = true;
  });
  /** The one way the cache changes: a stored response it holds is registered in `cachedResponses` while it does. */
  function setCache(lane: string | null, next: Cached | null): void {
    const prev = caches.get(lane) ?? null;
    if (prev === next) return;
    if (prev?.stored) cachedResponses?.release(prev.id);
    caches.delete(lane);
    if (next === null) return;
    caches.set(lane, next);
    if (next.stored) {
      cachedResponses?.hold(next.id, () => {
        if (caches.get(lane) !== next) return;
        caches.delete(lane);
        // The connection's charge follows (an idle connection kept the deleted entry's bytes charged until its next
        // response ended or it closed; outside attack).
        info.kept?.();
      });
    }
    // The other lanes' entries, oldest first, go until everything cached fits in one context's budget, and in
    // `maxCachedLanes` entries (each context has structures of its own besides its items: tokens, digest, call ids).
    let total = 0;
    for (const c of caches.values()) total += entryBytes(c);
    for (const [other, c] of caches) {
      if (total <= services.limits.maxContextBytes && caches.size <= services.limits.maxCachedLanes) break;
      if (c === next) continue;
      total -= entryBytes(c);
      setCache(other, null);
    }
  }
  /** What the cached entries but `except` keep (`entryBytes`). */
  function cachedBytes(except: Cached | null): number {
    let n = 0;
    for (const c of caches.values()) if (c !== except) n += entryBytes(c);
    return n;
  }
  /** Every cached entry but `keep` let go for the byte budget, its id remembered (`letGo`). */
  function letGoAll(keep: Cached | null, now?: number): void {
    for (const [lane, c] of [...caches]) {
      if (c === keep || (now !== undefined && isGuarded(c, now))) continue;
      letGo.push({ id: c.id, stored: c.stored });
      if (letGo.length > LET_GO_IDS_KEPT) letGo.shift();
      setCache(lane, null);
    }
  }
  /**
   * Whether an entry is guarded from other requests' reclaim at `now` (`guardedBytes`): kept nowhere else, and its
   * agent is running the calls its response ended with, for `cacheReclaimGraceMs` after it ended.
   */
  function isGuarded(c: Cached, now: number): boolean {
    return !c.stored && c.pending.size > 0 && now - c.endedAt < services.limits.cacheReclaimGraceMs;
  }
  /** What an entry keeps: its context's items, and its header (instructions and tools) with the key made of its JSON. */
  function entryBytes(c: Cached): number {
    // Its prompt's token ids too: 4 to 8 times the items' bytes for text of a token a byte (outside attack).
    // And each item's overhead besides its bytes (engine/budget.ts `ITEM_HELD_BYTES`).
    return contextBytes(c.context) + 2 * c.headerKey.length + c.context.tokens.bytes + ITEM_HELD_BYTES * c.context.items.length + LINEAGE_ID_BYTES * c.lineage.size;
  }
  /** The cached response `id`, in whichever lane it is the last, or undefined. */
  function cachedById(id: string): { lane: string | null; entry: Cached } | undefined {
    for (const [lane, entry] of caches) if (entry.id === id) return { lane, entry };
    return undefined;
  }
  /**
   * Whether no stored response whose items `c` holds was deleted. A DELETE of the cached response itself evicts it at
   * once (`CachedResponses`); one of an ancestor (or of the response it continued while it ran) did not, and the cache
   * went on serving the deleted response's items to continuations, stored with a chain no other request could load
   * (outside attack).
   */
  function intact(c: Cached): boolean {
    return !broken.has(c.lineage);
  }

  /** What a `store: false` continuation of `prev`, which this connection does not cache, is told: served from the cache alone, it is not found. */
  function unstoredMiss(prev: string): WireError {
    const gone = letGoEntry(prev);
    // "Continue it with store: true" only while the store has it (not once deleted or expired; atk93 F5).
    return gone ? notFoundLetGo(prev, !gone.stored ? 'unstored' : services.store.has(prev, info.owner) ? 'stored' : 'gone') : notFound(prev);
  }

  async function fromCache(params: CreateParams, c: Cached, headerKey: string, metrics: RunMetrics, fork: boolean) {
    const sw = services.switches;
    const input = await resolveReferences(params.input, info.owner, services, metrics);
    const ctx = c.context;
    // The whole context again with the switch off: the same checks a cache miss runs.
    if (sw.incremental_checks) {
      // Instructions and tools the cached response was checked with (the same JSON) are not checked again: only what
      // is new is. The tools' checks (names, schemas, the strict subset) read nothing but the tools.
      const sameHeader = headerKey === c.headerKey;
      const instructions = sameHeader ? null : params.instructions;
      const tools = sameHeader ? [] : params.tools;
      await checkIncremental({ tools, instructions, text: params.text, requireToolOutputs: true }, ctx.callIds, input, metrics, 'create', c.pending);
      // The cached context's ids are read only once an input item has an id, and then once each as it grows
      // (`duplicateItemId`), not at every continuation.
      const duplicate = duplicateItemId(ctx.items, input);
      if (duplicate) throw duplicate;
    } else {
      await checkFull({ instructions: params.instructions, tools: params.tools, text: params.text, requireToolOutputs: true }, ctx.items, input, metrics);
    }
    checkJsonMode(params.text?.format, params.instructions, input, ctx.items);
    let context: RenderedContext;
    let charged: RunPlan['contextCharged'];
    if (sw.rendered_token_cache && headerKey === c.headerKey && !fork) {
      // The lane's entry holds only this one response and a continuation in the lane replaces it,
      // so the context is extended in place: no copy of the whole prompt. A fork (a continuation in another
      // lane) leaves the entry as it is for its own lane: it renders a context of its own.
      metrics.count('rendered_cache_hits');
      // What the connection's cache charge stands for (its `keptBytes`) until this response ends: not charged twice.
      charged = { tokenBytes: ctx.tokens.bytes, items: ctx.items.length };
      await renderAppendAsync(ctx, input, metrics, 'render');
      context = ctx;
    } else {
      context = await renderFullAsync(params.instructions, params.tools, [...ctx.items, ...input], metrics, ctx.compacted?.items);
    }
    let route: RouteDecision;
    if (sw.routing_reuse && c.route.requested === params.model) {
      metrics.count('route_reused');
      route = c.route;
      const hops = services.router.opts.hops - (sw.skip_intermediate_hop ? 1 : 0);
      await services.router.hop(metrics, undefined, hops);
    } else {
      route = await services.router.route(params.model, affinityKey(params, info.owner), metrics);
    }
    return { context, route, input, charged };
  }

  return {
    protocol: 'ws',
    appendable: false,
    async plan(params, metrics, lane = null, signal): Promise<RunPlan> {
      // `held`: the cached context it continues, or the stored chain it loads, counted by `planHeld`.
      // `intact`: the lane's cached context's length as this continuation found it (`failed` keeps an entry still so).
      const entry = { lane, headerKey: null as string | null, lineage: null as Set<string> | null, held: 0, intact: null as { items: number; tokens: number } | null };
      planned.set(params, entry);
      const deletedDuring = (planning = new Set());
      planningOverflow = false;
      const header = [params.instructions, params.tools];
      // Long ones in slices (one JSON.stringify of a schema of 2.5 million lone surrogates held the loop ~300 ms);
      // the usual short ones natively, with no await.
      const headerKey = textOver(header, NATIVE_TEXT_CHARS) ? await runCooperative(jsonTextWork(header)) : JSON.stringify(header);
      entry.headerKey = headerKey;
      const prev = params.previous_response_id;
      let prepared: { context: RenderedContext; route: RouteDecision; input: CreateParams['input']; charged?: RunPlan['contextCharged'] };
      if (prev) cachedResponses?.sync();
      let hit = prev ? cachedById(prev) : undefined;
      if (hit && !intact(hit.entry)) {
        // Served as a miss: from the store, which names the deleted response (or not found with `store: false`).
        setCache(hit.lane, null);
        hit = undefined;
      }
      const cache = hit?.entry;
      current = cache ?? null;
      // Before it is extended in place: what it grows by is the run's own charge (its token ids).
      if (cache) entry.held = entryBytes(cache);
      if (cache && hit!.lane === lane) entry.intact = { items: cache.context.items.length, tokens: cache.context.tokens.length };
      let lineage: Set<string> = new Set();
      /** The HTTP baseline's work, from the store (a fresh create has no chain to load): the chain's ids in `lineage`. */
      const fromStore = async () => {
        const chainIds: string[] = [];
        const charge = info.charge;
        const load = charge && ((bytes: number) => {
          charge(bytes);
          entry.held += bytes;
        });
        let got: Awaited<ReturnType<typeof prepareFromStore>>;
        try {
          got = await prepareFromStore(params, services, metrics, info.owner, { charge: load, ids: chainIds, signal });
        } catch (err) {
          // A `store: true` continuation of a `store: false` response let go for the budget: said why, as with
          // `store: false` (it was told only "not found"; outside attack atk91 F4). A stored one the store lacks was
          // deleted or expired since: the store's answer stands.
          if (prev && err instanceof WireError && err.code === 'previous_response_not_found' && letGoEntry(prev)?.stored === false) throw notFoundLetGo(prev, 'unstored');
          throw err;
        }
        lineage = new Set(chainIds);
        return got;
      };
      if (prev && cache && !hasCompaction(params.input)) {
        // Before the cached context is extended in place (item references are checked after).
        checkContext(cache.context, params.input, services.limits);
        const mark = metrics.tokenBytes;
        try {
          prepared = await fromCache(params, cache, headerKey, metrics, hit!.lane !== lane);
          // Extended in place: the lineage too; else a copy.
          lineage = prepared.context === cache.context ? cache.lineage : new Set(cache.lineage);
        } catch (err) {
          // A `store: true` continuation the byte budget refused beside its cached copy is read from the store, as on a
          // miss, which holds no copy of the cache's token ids: refused 413 "cannot fit however long it waits", the
          // same frame sent again then fitted (the failure had evicted the cache; outside attack atk93 F1). The lane's
          // own entry goes (extended in place part way, or replaced by this response anyway), its charge given back
          // now; a fork's source lane keeps its entry, which `spare` lets go only if room needs it.
          if (!params.store || !(err instanceof WireError) || err.code !== 'server_busy' || err.budgetAsk === undefined) throw err;
          metrics.releaseTokensSince(mark);
          if (hit!.lane === lane) {
            setCache(lane, null);
            info.keptShrank?.();
          }
          current = null;
          entry.held = 0;
          prepared = await fromStore();
        }
      } else if (prev && cache) {
        // A compaction item replaces the cached history: a full rebuild of the smaller window.
        const input = await resolveReferences(params.input, info.owner, services, metrics, signal);
        signal?.throwIfAborted();
        const context = await checkAndRender(params, cache.context.items, input, metrics, true);
        const route = await services.router.route(params.model, affinityKey(params, info.owner), metrics);
        prepared = { context, route, input };
        lineage = new Set(cache.lineage);
      } else {
        // A cache miss.
        if (prev && !params.store) throw unstoredMiss(prev);
        prepared = await fromStore();
      }
      entry.lineage = lineage;
      // A delete while this plan awaited (a chain read, a render) of a response its lineage holds.
      if (prev) cachedResponses?.sync();
      if (planningOverflow || [...deletedDuring].some((id) => lineage.has(id))) broken.add(lineage);
      planning = null;
      inFlight = lineage;
      // A chain of continuations extends one cached context: bound it like a long-lived run.
      checkContext(prepared.context, [], services.limits);
      return {
        protocol: 'ws',
        params,
        context: prepared.context,
        route: prepared.route,
        input: prepared.input,
        owner: info.owner,
        connection: info.connection,
        metrics,
        onToolCalls: 'end',
        postInference: services.switches.overlap_post_inference ? 'overlapped' : 'inline',
        ...(prepared.charged && { contextCharged: prepared.charged }),
      };
    },
    ended(run, plan) {
      current = null;
      const entry = planned.get(plan.params);
      const lane = entry?.lane ?? null;
      const cache = caches.get(lane);
      if (run.response.status === 'completed' && entry?.lineage && broken.has(entry.lineage)) {
        // A response its context holds was deleted while it ran: never continued from the cache (`intact`), so not kept
        // (it held its budget for nothing until the lane's next create; outside attack atk93 I1).
        setCache(lane, null);
      } else if (run.response.status === 'completed') {
        const headerKey = entry?.headerKey ?? JSON.stringify([plan.params.instructions, plan.params.tools]);
        const lineage = entry?.lineage ?? new Set<string>();
        if (plan.params.store) extendLineage(lineage, run.id);
        setCache(lane, { id: run.id, context: plan.context, route: plan.route, headerKey, pending: pendingCallsOf(run.response.output), stored: plan.params.store, lineage, endedAt: services.clock.now() });
      } else if (cache && (cache.id === plan.params.previous_response_id || cache.context === plan.context)) {
        setCache(lane, null);
      }
    },
    failed(params, err) {
      current = null;
      const entry = planned.get(params);
      const lane = entry?.lane ?? null;
      const cached = caches.get(lane);
      if (params.previous_response_id === null || cached?.id !== params.previous_response_id) return false;
      // Refused for room and told to try again, with nothing of it added to the context it continues (the budget refuses
      // its token ids as they are made, before any is committed: render.ts `renderAppendAsync`): the previous response
      // stays cached, so the retry it was told to make can be served. It was let go, as any failed continuation's is, and
      // an agent in a tool loop whose continuation met another agent's guarded cache lost its own guarded one, then was
      // refused its whole context for as long as the other's loop went on (outside attack atk103 F2).
      const intact = entry?.intact;
      if (err.code === 'server_busy' && intact && cached.context.items.length === intact.items && cached.context.tokens.length === intact.tokens) return false;
      // Refused for room, it is remembered as let go for the budget: a retry of the continuation is told why it is not
      // found, as after any cache let go for room (it was a bare "not found"; outside attack atk97 F2).
      if (err.code === 'server_busy' || err.code === 'payload_too_large') {
        letGo.push({ id: cached.id, stored: cached.stored });
        if (letGo.length > LET_GO_IDS_KEPT) letGo.shift();
      }
      setCache(lane, null);
      return true;
    },
    settled() {
      planning = null;
      inFlight = null;
    },
    closed() {
      for (const lane of [...caches.keys()]) setCache(lane, null);
      unwatch?.();
    },
    shed(now) {
      letGoAll(null, now);
      info.kept?.();
    },
    spare() {
      letGoAll(current);
      info.keptShrank?.();
    },
    spareable() {
      return cachedBytes(current);
    },
    missing(params) {
      const prev = params.previous_response_id;
      if (!prev) return null;
      cachedResponses?.sync();
      const hit = cachedById(prev);
      if (hit && intact(hit.entry)) return null;
      if (!params.store) return unstoredMiss(prev);
      // A `store: true` miss reads the chain from the store: not found there, nor being made (its write to come), it
      // can only be not found (outside attack atk105 F1: an uncached `store: false` response, or an id never made).
      if (services.store.has(prev, info.owner) || services.inFlight?.find(prev, info.owner) !== undefined) return null;
      return letGoEntry(prev)?.stored === false ? notFoundLetGo(prev, 'unstored') : notFound(prev);
    },
    planHeld(params) {
      return planned.get(params)?.held ?? 0;
    },
    keptBytes() {
      return cachedBytes(null);
    },
    guardedBytes(now) {
      let n = 0;
      for (const c of caches.values()) if (isGuarded(c, now)) n += entryBytes(c);
      return n;
    },
  };
}

/** How many ids of cached responses let go for the byte budget a ws-mode connection remembers (`letGo`). */
const LET_GO_IDS_KEPT = 16;

/**
 * `previous_response_not_found` for `id`, whose cached copy this connection let go to make room in the byte budget:
 * `stored`, the store has it (only a `store: false` continuation, served from the cache alone, misses it); `unstored`,
 * it was created with `store: false`; `gone`, it was stored and the store no longer has it (deleted or expired since:
 * it was called a `store: false` response; outside attack atk95 F3).
 */
function notFoundLetGo(id: string, was: 'stored' | 'unstored' | 'gone'): WireError {
  const err = notFound(id);
  const then =
    was === 'stored'
      ? 'and a store: false continuation is served from that cache alone: continue it with store: true, or send the whole context again.'
      : was === 'unstored'
        ? 'and it was created with store: false, so it is kept nowhere else: send the whole context again.'
        : 'and the store no longer has it (deleted or expired): send the whole context again.';
  return new WireError(err.code, `${err.message} This connection's cached copy of it was let go to make room in the server's byte budget (llr serve --max-server-bytes), ${then}`, err.param);
}
