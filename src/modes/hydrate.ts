/**
 * Loading state from the response store: the items of a stored
 * `previous_response_id` chain (every response's input then output, oldest
 * first) and the resolution of `item_reference` input items. This is the
 * slow path: the HTTP baseline takes it on every continuation, the ws design
 * only when its connection cache misses (`prepareFromStore`, both).
 */
import { clipText, WireError } from '../protocol/errors.js';
import type { CreateParams } from '../protocol/events.js';
import type { InputItem } from '../protocol/objects.js';
import type { RunMetrics } from '../pipeline/metrics.js';
import type { RenderedContext } from '../pipeline/render.js';
import type { RouteDecision } from '../pipeline/route.js';
import type { Services } from '../engine/services.js';
import { MAX_CHAIN_LINKS, contextItems, unfinished } from '../store/types.js';
import { findListedItem } from '../store/input-items.js';
import { prepareFull } from './prepare.js';
import { itemBytes } from '../engine/budget.js';
import { abortableWork, runCooperative, type Work } from '../cooperative.js';
import { SerialQueue } from '../model/serial-queue.js';
import { runnerElsewhere } from '../store/runner.js';

/** What a chain load takes besides the chain's id (`loadChain`, `prepareFromStore`). */
export interface ChainLoad {
  /** Charged the loaded chain's items (`itemBytes`), if given: the request's share of the server-wide budget. */
  charge?: ((bytes: number) => void) | undefined;
  /** Gets the chain's ids, oldest first, if given. */
  ids?: string[] | undefined;
  /**
   * Aborts once nobody waits for the answer (the client went away, its connection ended): a read still queued leaves
   * the queue at once, a read under way stops at its next slice, with the signal's reason.
   */
  signal?: AbortSignal | undefined;
}

/**
 * A create with everything it needs loaded from the store: its item
 * references resolved, its `previous_response_id` chain (if any) loaded
 * (`store_hydrations`), then the full checks, render and route over both;
 * every client tool call in them must have its output (`missing_tool_output`).
 */
export async function prepareFromStore(
  params: CreateParams,
  services: Services,
  metrics: RunMetrics,
  owner: string | null,
  load: ChainLoad = {},
): Promise<{ context: RenderedContext; route: RouteDecision; input: InputItem[] }> {
  const input = await resolveReferences(params.input, owner, services, metrics, load.signal);
  load.signal?.throwIfAborted();
  // The loaded chain is charged as it is loaded (`loadChain`).
  const before = params.previous_response_id ? await loadChain(params.previous_response_id, owner, services, metrics, load) : [];
  if (params.previous_response_id) metrics.count('store_hydrations');
  // Only the ws and http designs come here: their responses end at tool calls, so a create must answer them.
  return { ...(await prepareFull(params, before, input, services, metrics, owner, true)), input };
}

export function notFound(id: string): WireError {
  // Quoted cut to 100 characters, as other refusals quote a client's id: a 16 MiB id was echoed whole.
  const shown = id.length > 100 ? `${id.slice(0, 100)}…` : id;
  return new WireError('previous_response_not_found', `Previous response with id '${shown}' not found.`, 'previous_response_id');
}

/**
 * The whole stored context up to and including `id`, or a not-found error (`load`: what to charge it to, where its
 * ids go, when nobody waits for it any more). Read in slices (`chainWork`): a chain of 9,001 stored responses (27 MB)
 * read and parsed in one turn held the event loop 0.5–1 s, and four such continuations at once 1.6 s (outside attack).
 *
 * One chain is read at a time per server (`serially`), and its items are charged to `load.charge` before the next read
 * starts: the loaded chain is request data its request holds while it is prepared and runs, charged to its peer's
 * share of the server-wide budget (`server_busy` past it), as its body is. Read in slices but all at once, 40
 * continuations of a long chain each held its parsed records uncharged until its read ended, and the server died out
 * of memory (3.5 GB; outside attack). Read in one turn each, as before, they were read one after the other anyway.
 */
export function loadChain(id: string, owner: string | null, services: Services, metrics: RunMetrics, load: ChainLoad = {}): Promise<InputItem[]> {
  return serially(services, load.signal, () =>
    metrics.timeAsync('load_state', () => {
      metrics.count('store_reads');
      return runCooperative(abortableWork(chainItems(id, owner, services, load), load.signal));
    }),
  );
}

/** Items charged between yields (`chainItems`): sizing 49,000 items in one turn held the loop ~50 ms. */
const CHARGE_SLICE_ITEMS = 1024;

/** The chain's items, read (`chainWork`), checked ended, and charged to `load.charge`, with yields between. */
function* chainItems(id: string, owner: string | null, services: Services, load: ChainLoad): Work<InputItem[]> {
  const chain = yield* services.store.chainWork(id, owner);
  if (!chain) throw (yield* brokenChain(id, owner, services)) ?? notFound(id);
  const items: InputItem[] = [];
  for (const rec of chain) {
    // Stored as it started and not ended (a background response in flight, here or in another process on the file,
    // or one whose server stopped while it ran): its output is not there to continue from.
    if (unfinished(rec)) throw unfinishedLink(rec.response.id, rec.runner);
    contextItems(rec, items);
    load.ids?.push(rec.response.id);
  }
  if (load.charge && items.length > 0) {
    let bytes = 0;
    for (let i = 0; i < items.length; i++) {
      if (i > 0 && i % CHARGE_SLICE_ITEMS === 0) yield;
      bytes += itemBytes(items[i]!);
    }
    load.charge(bytes);
  }
  return items;
}

/**
 * The refusal of a chain whose link `id` is stored as it started and has not ended, so it has no output to continue
 * from: `invalid_value` on `previous_response_id`, not `previous_response_not_found`, since retrieve finds it (a client
 * that drops the id on "not found" and sends the rest would lose its context). Its run alive in another process on the
 * store's file: in progress there. Otherwise its run is here (`ModeHost.stillRunning` says so) or gone (retrieve answers
 * it `failed`, `orphanedResponse`). The process that ran it answered `invalid_value` and every other process on the file
 * `previous_response_not_found` (outside client test atk74 F1).
 */
function unfinishedLink(id: string, runner: string | undefined): WireError {
  const shown = clipText(id, 100);
  if (runnerElsewhere(runner)) {
    return new WireError(
      'invalid_value',
      `Previous response with id '${shown}' is still in progress in another server on this store's file: a response can be continued once it has ended. Poll it (GET /v1/responses/${shown}) until its status is no longer 'in_progress', then continue from it.`,
      'previous_response_id',
    );
  }
  return new WireError(
    'invalid_value',
    `Previous response with id '${shown}' cannot be continued: it has not ended, and the server that ran it stopped before it did (retrieve answers it 'failed'; its output is lost). Continue from a response that has ended, or send the whole input again.`,
    'previous_response_id',
  );
}

/** Each server's queue of chain reads (`loadChain`). */
const chainReads = new WeakMap<Services, SerialQueue>();

/**
 * `read` once every chain read queued before it on this server has settled. Once `signal` aborts, the caller is
 * answered with its reason at once, and `read`, if its turn has not come, never runs: 20 continuations of a long
 * chain whose clients had gone each still read it in turn, and each session stayed open until then (5.6 s for a
 * 3,000-link chain).
 */
function serially<T>(services: Services, signal: AbortSignal | undefined, read: () => Promise<T>): Promise<T> {
  let queue = chainReads.get(services);
  if (!queue) chainReads.set(services, (queue = new SerialQueue()));
  return queue.run(read, signal);
}

/**
 * `id` is stored but its chain is not whole: an earlier response was created with `store: false` (a ws-mode
 * continuation from the connection's cache stores a response whose parent was never stored), deleted, or expired or evicted. Said
 * so, naming the missing one: "'id' not found" was wrong, `GET /v1/responses/{id}` finds it. So is a chain longer
 * than MAX_CHAIN_LINKS, which the store does not walk (a ws-mode connection extends its chain from its cache whatever
 * its length, so one is stored). Undefined when `id` itself is missing.
 */
function* brokenChain(id: string, owner: string | null, services: Services): Work<WireError | undefined> {
  // The links' parents only (`previousOf`), with a yield between them: `get` parsed each link's record.
  let prev = services.store.previousOf(id, owner);
  for (let links = 0; prev !== undefined && links < MAX_CHAIN_LINKS; links++) {
    if (prev === null) return undefined;
    yield;
    const next = services.store.previousOf(prev, owner);
    if (next === undefined) {
      return new WireError(
        'previous_response_not_found',
        `Previous response with id '${id}' cannot be continued: response '${prev}' earlier in its chain is not stored (created with 'store': false, deleted, or expired or evicted from the store). Send the full input instead.`,
        'previous_response_id',
      );
    }
    prev = next;
  }
  if (prev !== undefined) {
    return new WireError(
      'previous_response_not_found',
      `Previous response with id '${id}' cannot be continued: its chain of previous responses is longer than ${MAX_CHAIN_LINKS} responses, the most this server loads from the store. Send the full input instead.`,
      'previous_response_id',
    );
  }
  return undefined;
}

/**
 * Replace `item_reference` items by the stored items they name. Each is a fresh copy of the stored item, so what
 * the references expand to is held to the context's byte budget (`maxContextBytes`) as they are resolved, not after:
 * 2,000 references to one stored 4 MB message (a 90 KB request) parsed 8 GB and the server died out of memory
 * (outside attack). Refused `context_length_exceeded` at the first reference past it.
 */
export async function resolveReferences(
  items: InputItem[],
  owner: string | null,
  services: Services,
  metrics: RunMetrics,
  signal?: AbortSignal,
  held?: (id: string) => InputItem | undefined,
): Promise<InputItem[]> {
  if (!items.some((i) => i.type === 'item_reference')) return items;
  // In slices (`runCooperative`): each reference is a store read and a parse, and 49,000 of them to small stored items
  // held one loop turn ~0.5 s (/health 0.8 s against 0.2 s for the same items sent inline; outside attack).
  // `signal`: an append's run ended, so what is resolved no longer matters; the items so far are returned and the
  // caller, which checks its run after, refuses the append (it resolved on, up to ~2.5 s of CPU, to be refused).
  return metrics.timeAsync('load_state', () => runCooperative(resolving(items, owner, services, metrics, signal, held)));
}

/** `held`: the items of the run an append goes to (not stored until it ends), found when the store has no such id. */
function* resolving(
  items: InputItem[],
  owner: string | null,
  services: Services,
  metrics: RunMetrics,
  signal?: AbortSignal,
  held?: (id: string) => InputItem | undefined,
): Work<InputItem[]> {
  const max = services.limits.maxContextBytes;
  let bytes = 0;
  const out: InputItem[] = [];
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    if (item.type !== 'item_reference') {
      bytes += itemBytes(item);
      out.push(item);
      continue;
    }
    yield;
    if (signal?.aborted) return out;
    metrics.count('store_reads');
    const id = (item as { id: string }).id;
    // An id input_items derived (an item sent without one) is found through its response's list.
    const found = services.store.getItem(id, owner) ?? (yield* findListedItem(services.store, id, owner)) ?? held?.(id);
    // The id cut to 100 characters where it is quoted, as every quoted id (docs/protocol.md): a 100,000-character one
    // filled the message to its cap, cutting off " not found." (outside fuzzer atk61 F5).
    if (!found) throw new WireError('item_not_found', `Item with id '${clipText(id, 100)}' not found.`, `input[${i}].id`);
    bytes += itemBytes(found as InputItem);
    if (bytes > max) {
      throw new WireError(
        'context_length_exceeded',
        `The input's items, its item references resolved, would hold more than ${max} bytes; this server keeps at most ${max} per response (llr serve --max-context-bytes).`,
        `input[${i}]`,
      );
    }
    out.push(found as InputItem);
  }
  return out;
}
