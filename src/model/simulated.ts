/**
 * The simulated model: a `Model` that takes the time a real one would (time
 * to first token, prefill of uncached prompt tokens, a steady decode rate)
 * and streams what its policy plans, one token piece per delta.
 *
 * Used by every mode's server, the benchmarks, the CLI and the tests. It is a
 * product, not a test double: deterministic for a seed, with time injected
 * through a `Clock`, and it records the most recent `recordRequests`
 * requests in `calls` (default none: a server that kept every request grew
 * by the size of every prompt it ever saw). Leaves out
 * `maxOutputTokens` (the engine stops consuming when the budget is spent;
 * breaking out of the stream is safe) and any notion of GPU contention: each
 * call runs at the configured rate however many run at once.
 */
import { randomBytes } from 'node:crypto';
import { type Clock, realClock } from './clock.js';
import { conversationDigestWork, itemTextChars } from './conversation.js';
import { runCooperative, runSync } from '../cooperative.js';
import type { ModelPolicy, PiecesMemo } from './policies.js';
import { PrefixCache } from './prefix-cache.js';
import { pieceLogprobs } from './logprobs.js';
import { digitString, hashString, mulberry32, type Rng } from './rng.js';
import { encodeText, piecesOf } from './tokenizer.js';
import type { Model, ModelEvent, ModelRequest, ModelSettings } from './types.js';
import { withFields } from '../protocol/fields.js';

export interface SimulatedModelOptions {
  policy: ModelPolicy;
  /** Defaults to the real clock; tests pass a fake one that records sleeps. */
  clock?: Clock;
  /** Seeds call ids and the policy's rng. Default 1. */
  seed?: number;
  /** Defaults to a private cache; pass one to share it between models (e.g. one per simulated GPU pool). */
  prefixCache?: PrefixCache;
  /**
   * How many of the most recent requests `calls` keeps (a ring; default
   * `DEFAULT_RECORD_REQUESTS` = 0). Each holds the request's items and prompt,
   * so this is the memory a test or a debugging session asks for, no more.
   */
  recordRequests?: number;
  /**
   * 'owner' (default): the prefix cache is partitioned per API key (the
   * request's `cachePartition`), so `cached_tokens` never tells one tenant
   * what another sent; 'shared': one namespace, as a single-tenant deployment.
   */
  prefixCacheScope?: 'owner' | 'shared';
}

/** Requests kept in `calls` unless the caller asks for more (`llr serve --record-requests N`). */
export const DEFAULT_RECORD_REQUESTS = 0;

/**
 * Without a real timer wait (an infinite rate, or a stream running behind its
 * schedule), give the event loop a turn this often so one long stream cannot
 * starve sockets and other runs.
 */
export const YIELD_EVERY_TOKENS = 64;

/** Prompts longer than this (tokens) are hashed for the prefix cache cooperatively. */
export const EAGER_HASH_TOKENS = 64 * 1024;

/** Conversations longer than this (characters of text) are digested eagerly and cooperatively. */
export const EAGER_DIGEST_CHARS = 256 * 1024;

/** Characters of text in the conversation, counted without reading it. */
function conversationChars(items: readonly ModelRequest['items'][number][]): number {
  let n = 0;
  for (const item of items) n += itemTextChars(item);
  return n;
}

/** Every `call_id` in `items`, calls' and outputs' alike (for a request that does not carry its context's call ids). */
function callIdsOf(items: readonly ModelRequest['items'][number][]): Set<string> {
  const ids = new Set<string>();
  for (const item of items) {
    const id = (item as { call_id?: unknown }).call_id;
    if (typeof id === 'string') ids.add(id);
  }
  return ids;
}

/** This process's draw for the call id stream (`newCallId`). */
const PROCESS_NONCE = randomBytes(8).toString('hex');

export class SimulatedModel implements Model {
  /** Requests sampled so far, including those no longer kept in `calls`. */
  callCount = 0;
  readonly recordRequests: number;
  readonly prefixCacheScope: 'owner' | 'shared';
  private readonly ring: ModelRequest[] = [];
  readonly policy: ModelPolicy;
  readonly clock: Clock;
  readonly seed: number;
  readonly prefixCache: PrefixCache;
  /** Call ids come from one sequential stream: unique within the model, identical for the same seed and call order. */
  private readonly ids: Rng;

  constructor(options: SimulatedModelOptions) {
    this.policy = options.policy;
    this.clock = options.clock ?? realClock;
    this.seed = options.seed ?? 1;
    this.prefixCache = options.prefixCache ?? new PrefixCache();
    // Another stream in each process (its start's random draw beside the seed): a restarted server drew the ids its
    // first run drew, and a client holding a call the first one cut (Codex 0.107, resending its turn after the
    // restart) held two calls under one id (outside attack atk63 F1).
    this.ids = mulberry32(hashString(`call ids ${this.seed} ${PROCESS_NONCE}`));
    const keep = options.recordRequests ?? DEFAULT_RECORD_REQUESTS;
    if (!Number.isInteger(keep) || keep < 0) throw new RangeError(`recordRequests must be a non-negative integer, got ${keep}`);
    this.recordRequests = keep;
    this.prefixCacheScope = options.prefixCacheScope ?? 'owner';
  }

  /**
   * The most recent `recordRequests` requests, oldest first (the objects
   * themselves, not copies).
   */
  get calls(): ModelRequest[] {
    const n = this.ring.length;
    if (n < this.recordRequests) return this.ring.slice();
    const start = this.callCount % this.recordRequests;
    return [...this.ring.slice(start), ...this.ring.slice(0, start)];
  }

  /**
   * A call id drawn from the seeded stream that no call in the request's context and none of this call's planned items
   * has. The stream differs in every process; it started again with each, and a restarted server (or a second one on
   * the same store) drew the ids its first run drew: a call under an id its conversation had already answered was
   * never paused for (hence the check), and one a client kept from a cut response was held twice.
   * Decimal digits, 24 of them: every such id is the same number of tokens wherever it stands in a prompt (three
   * digits a token), so one task costs the same tokens in every design and on every run. With hex ids the text
   * ` call_id call_<id> x` took 14 to 26 tokens as their letters and digits fell (13 with any digit id), and the same task's input tokens differed by up to 5% between designs and runs
   * (outside attack atk63 F4). Not seeded by the conversation: a retry of a create cut while it wrote a call would then
   * draw the cut call's id again, and a client keeping both (Codex 0.107) held two calls under one id.
   */
  private newCallId(taken: ReadonlySet<string>, planned: readonly { type: string; call_id?: string | undefined }[]): string {
    for (;;) {
      const id = `call_${digitString(this.ids, 24)}`;
      if (!taken.has(id) && !planned.some((p) => p.call_id === id)) return id;
    }
  }

  private remember(req: ModelRequest): void {
    if (this.recordRequests > 0) this.ring[this.callCount % this.recordRequests] = req;
    this.callCount++;
  }

  /** The prompt's prefill: its prefix-cache lookup, the time to first token, then its blocks cached; one `prefill` event. */
  private async prefill(req: ModelRequest, signal: AbortSignal): Promise<ModelEvent> {
    const { settings } = req;
    const partition = this.prefixCacheScope === 'owner' ? (req.cachePartition ?? null) : null;
    // The prompt is hashed once for both lookup and insert: only its new blocks when the
    // caller keeps its keys (a growing context), cooperatively when it is large.
    const cache = this.prefixCache;
    let keys: readonly number[] | null = null;
    if (req.promptKeys) {
      const work = req.promptKeys.work(req.promptTokens, cache.blockSize, partition);
      const fresh = req.promptTokens.length - req.promptKeys.covered(cache.blockSize, partition);
      keys = fresh > EAGER_HASH_TOKENS ? await runCooperative(work) : runSync(work);
    }
    else if (req.promptTokens.length > EAGER_HASH_TOKENS) keys = await runCooperative(cache.keysWork(req.promptTokens, partition));
    const blocks = keys?.length ?? 0;
    const cached = keys ? cache.lookupKeys(keys, blocks) : cache.lookup(req.promptTokens, partition);
    const uncached = req.promptTokens.length - cached;
    const prefillMs = settings.prefillTokensPerSecond === Infinity ? 0 : (uncached / settings.prefillTokensPerSecond) * 1000;
    const ttft = settings.ttftBaseMs + prefillMs;
    if (ttft > 0) await this.clock.sleep(ttft, signal);
    signal.throwIfAborted();
    // Only a finished prefill leaves KV blocks behind, so an aborted call caches nothing.
    if (keys) this.prefixCache.insertKeys(keys, blocks);
    else this.prefixCache.insert(req.promptTokens, partition);
    // Every full block of the prompt is now cached: those it did not hold before were written (none without a cache).
    const written = cache.maxEntries > 0 ? Math.floor(req.promptTokens.length / cache.blockSize) * cache.blockSize - cached : 0;
    return { type: 'prefill', prompt_tokens: req.promptTokens.length, cached_tokens: cached, cache_write_tokens: written, duration_ms: ttft };
  }

  async *sample(req: ModelRequest, signal: AbortSignal): AsyncGenerator<ModelEvent, void, undefined> {
    this.remember(req);
    signal.throwIfAborted();
    checkSettings(req.settings);

    // A prewarm plans nothing (a script's or replay's next turn is not spent on it): the prompt is prefilled, and that is all.
    if (req.prefillOnly) {
      yield await this.prefill(req, signal);
      return;
    }

    // Plan before prefill so a policy error (an exhausted script) fails the
    // call at once instead of after a simulated TTFT. The policy's rng is
    // seeded from the conversation, not from call order, so the same
    // conversation gets the same text in every mode and under concurrency.
    // The digest walks the whole conversation, so it is computed only if the
    // policy draws from the rng (replay and script never do: `random: false`;
    // digesting for them cost a replayed 66-call run ~100 ms of model span
    // with the instant model, bookkeeping the bench books as model time).
    // A large conversation is digested up front, yielding to the event loop
    // (the same number the lazy path computes), so hashing megabytes of
    // input cannot stall other connections.
    // A caller that keeps the conversation's digest (a growing context) has only the new items hashed.
    const digestWork = () => (req.digest ? req.digest.work(req.items, this.seed) : conversationDigestWork(req.items, this.seed));
    let rng: Rng | undefined;
    if (this.policy.random !== false && (req.conversationChars ?? conversationChars(req.items)) > EAGER_DIGEST_CHARS) {
      rng = mulberry32(await runCooperative(digestWork()));
      signal.throwIfAborted();
    }
    const plan = this.policy.plan(req, () => (rng ??= mulberry32(runSync(digestWork())))());
    // The context's ids, read from the items once per call when the request does not carry them (parallel calls share them).
    let taken: ReadonlySet<string> | undefined;
    const newCallId = () => this.newCallId((taken ??= req.callIds ?? callIdsOf(req.items)), plan.items);
    const items = plan.items.map((item) => (item.type === 'function_call' ? withFields(item, { call_id: item.call_id ?? newCallId() }) : item));

    yield await this.prefill(req, signal);
    const { settings } = req;

    const pacer = new Pacer(this.clock, settings.tokensPerSecond, signal);
    const hidden = plan.hiddenTokens ?? 0;
    if (hidden > 0) {
      await pacer.advance(hidden);
      yield { type: 'reasoning', tokens: hidden };
    }
    const batch = Math.max(1, Math.floor(req.batchTokens ?? 1));
    // Pieces this call may still give logprobs for (the request's allowance, over all its messages).
    const logprobs = req.logprobs && { top: req.logprobs.top, seed: this.seed, left: req.logprobs.pieces };
    for (const [i, item] of items.entries()) {
      const memo = plan.pieces?.[i];
      if (item.type === 'message') {
        yield { type: 'message.start' };
        const { pieces, tokens } = split(item.text, memo);
        yield* deltaEvents(pieces, pacer, batch, true, logprobs);
        yield tokens ? { type: 'message.end', tokens } : { type: 'message.end' };
      } else {
        const custom = item.custom === true;
        yield custom ? { type: 'call.start', name: item.name, call_id: item.call_id, custom } : { type: 'call.start', name: item.name, call_id: item.call_id };
        const { pieces, tokens } = split(item.arguments, memo);
        yield* deltaEvents(pieces, pacer, batch, false);
        yield tokens ? { type: 'call.end', tokens } : { type: 'call.end' };
      }
    }
  }
}

/**
 * An item's pieces as delta events, paced: one event per token, or (when
 * the caller takes batches) every token already due, up to `batch`, in one
 * event. `text`: a message's text, else a call's arguments.
 */
async function* deltaEvents(
  pieces: readonly string[],
  pacer: Pacer,
  batch: number,
  text: boolean,
  logprobs?: { top: number; seed: number; left: number },
): AsyncGenerator<ModelEvent, void, undefined> {
  // Made as each piece goes out, not for the whole text up front, and no more than the allowance: a cancel, a budget
  // or the response's bound stops the work too, not only what is listed.
  const lp = logprobs && ((i: number) => pieceLogprobs(pieces[i]!, i, logprobs.top, logprobs.seed));
  if (batch === 1) {
    for (let i = 0; i < pieces.length; i++) {
      const delta = pieces[i]!;
      await pacer.advance(1);
      if (!text) yield { type: 'args.delta', delta };
      else if (lp && logprobs.left > 0) {
        logprobs.left--;
        yield { type: 'text.delta', delta, logprobs: lp(i) };
      } else yield { type: 'text.delta', delta };
    }
    return;
  }
  for (let i = 0; i < pieces.length; ) {
    const n = await pacer.take(Math.min(batch, pieces.length - i));
    const from = i;
    const deltas = pieces.slice(i, (i += n));
    const listed = lp ? Math.min(deltas.length, logprobs.left) : 0;
    if (!text) yield { type: 'args.deltas', deltas };
    else if (listed > 0) {
      logprobs!.left -= listed;
      yield { type: 'text.deltas', deltas, logprobs: Array.from({ length: listed }, (_, k) => lp!(from + k)) };
    } else yield { type: 'text.deltas', deltas };
  }
}

/**
 * A text's pieces (one delta each) and its token ids, which the model hands
 * back at the item's end so the prompt is not encoded again; the ids only
 * when the pieces rejoin to the text (a lone surrogate comes back as U+FFFD:
 * then the engine encodes what was streamed).
 */
function split(text: string, memo?: PiecesMemo): { pieces: readonly string[]; tokens: readonly number[] | null } {
  if (text === '') return { pieces: [], tokens: null };
  if (memo?.text === text && memo.pieces && memo.tokens !== undefined) return { pieces: memo.pieces, tokens: memo.tokens };
  const ids = encodeText(text);
  const pieces = piecesOf(ids);
  const tokens = pieces.join('') === text ? ids : null;
  if (memo) Object.assign(memo, { text, pieces, tokens });
  return { pieces, tokens };
}

function checkSettings(s: ModelSettings): void {
  if (!(s.tokensPerSecond > 0)) throw new RangeError(`tokensPerSecond must be > 0, got ${s.tokensPerSecond}`);
  if (!(s.prefillTokensPerSecond > 0)) throw new RangeError(`prefillTokensPerSecond must be > 0, got ${s.prefillTokensPerSecond}`);
  if (!(s.ttftBaseMs >= 0) || !Number.isFinite(s.ttftBaseMs)) throw new RangeError(`ttftBaseMs must be a finite number >= 0, got ${s.ttftBaseMs}`);
}

/**
 * Decode pacing on an absolute schedule: token i (1-based, hidden tokens
 * included) is due at `t0 + i * 1000 / rate`. A token that is already late
 * is released without sleeping, so timer granularity (1 ms and worse) delays
 * single tokens but never lowers the average rate, and every token is still
 * its own event. A caller that takes batches (`take`) gets every token due
 * at once in one hand-over.
 */
class Pacer {
  private readonly t0: number;
  private readonly msPerToken: number;
  private emitted = 0;
  private sinceLoopTurn = 0;

  constructor(
    private readonly clock: Clock,
    tokensPerSecond: number,
    private readonly signal: AbortSignal,
  ) {
    this.t0 = clock.now();
    this.msPerToken = tokensPerSecond === Infinity ? 0 : 1000 / tokensPerSecond;
  }

  /** Wait until the next `n` tokens are due; throws the signal's reason once aborted. */
  async advance(n: number): Promise<void> {
    this.signal.throwIfAborted();
    this.emitted += n;
    if (this.msPerToken > 0) {
      const due = this.t0 + this.emitted * this.msPerToken;
      const now = this.clock.now();
      if (now < due) {
        await this.clock.sleep(due - now, this.signal);
        this.sinceLoopTurn = 0;
        return;
      }
    }
    await this.turn(n);
  }

  /**
   * Wait until the next token is due, then take it and every later one
   * already due, up to `max`; returns how many (1 to `max`): the batch a
   * caller streams at once. Each token keeps its own due time, so the rate
   * and the time of every token are those of `advance(1)` per token; only
   * the hand-over is batched. Throws the signal's reason once aborted.
   */
  async take(max: number): Promise<number> {
    if (max <= 1) {
      await this.advance(1);
      return 1;
    }
    this.signal.throwIfAborted();
    if (this.msPerToken === 0) {
      this.emitted += max;
      await this.turn(max);
      return max;
    }
    let now = this.clock.now();
    const next = this.t0 + (this.emitted + 1) * this.msPerToken;
    const slept = now < next;
    if (slept) {
      await this.clock.sleep(next - now, this.signal);
      now = this.clock.now();
    }
    // Every token whose due time has passed (the next one at least, whatever the rounding).
    let n = 1;
    while (n < max && this.t0 + (this.emitted + n + 1) * this.msPerToken <= now) n++;
    this.emitted += n;
    if (slept) this.sinceLoopTurn = 0;
    else await this.turn(n);
    return n;
  }

  /** Count `n` tokens released without a timer wait; give the event loop a turn every `YIELD_EVERY_TOKENS` of them. */
  private async turn(n: number): Promise<void> {
    this.sinceLoopTurn += n;
    if (this.sinceLoopTurn >= YIELD_EVERY_TOKENS) {
      this.sinceLoopTurn = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.signal.throwIfAborted();
    }
  }
}
