/**
 * A prompt-prefix cache keyed on token ids, modelled on vLLM's automatic
 * prefix caching: the prompt is cut into fixed blocks of 64 tokens and each
 * full block is keyed by a hash chained through every block before it, so a
 * block's key stands for the whole prefix ending at that block.
 *
 * Used by the simulated model: `lookup()` before prefill decides how many
 * prompt tokens are free (cached), `insert()` after prefill remembers the
 * prompt. The cached count is always a multiple of the block size (a partial
 * trailing block is never cached), just as real servers report cached tokens
 * in block-sized steps. A `partition` (the API key's owner id) seeds the
 * chain, so the same prompt under two keys shares no block: one tenant's
 * `cached_tokens` cannot reveal what another sent. All partitions share the
 * one LRU capacity. Leaves out the KV data itself (there is none to keep)
 * and hash-collision checks: two 32-bit lanes give 53-bit keys, so a false hit
 * needs about 2^26 live blocks, far beyond any sane `maxEntries`.
 */

import type { Work } from '../cooperative.js';

export const DEFAULT_BLOCK_SIZE = 64;
/** 65,536 blocks of 64 tokens = 4M tokens, ~8 MB of keys and LRU links (`llr serve --prefix-cache-blocks N`). */
export const DEFAULT_MAX_ENTRIES = 65_536;
/**
 * Blocks an insert of a growing prompt places beyond those its last insert left in place (its new blocks, and those
 * evicted or moved since): 1,024 blocks, 65,536 tokens (`llr serve --prefix-cache-insert-blocks N`). See `insertKeys`.
 */
export const DEFAULT_MAX_INSERT_BLOCKS = 1_024;

/**
 * What the cache knows of a key array `insertKeys` was last given: a
 * `PromptKeys` array, which only grows until it is replaced by another.
 */
interface Inserted {
  /** Its leading keys still cached right after that insert (and its evictions). */
  count: number;
  /** The cache's `version` right after that insert. */
  version: number;
}

/** A cached block in the LRU list (oldest at `head`, newest at `tail`). */
interface Block {
  readonly key: number;
  /** As a chain's root (its first block): the `version` of the last touch that used it. */
  stamp: number;
  older: Block | null;
  newer: Block | null;
}

export class PrefixCache {
  /** Block key → its place in the LRU list. */
  private readonly blocks = new Map<number, Block>();
  private head: Block | null = null;
  private tail: Block | null = null;
  /**
   * Bumped by every `touch` and `clear` (evictions only follow a touch, in
   * the same call): unchanged since a key array's insert means nothing was
   * used, added or removed since.
   */
  private version = 0;
  /**
   * Per key array, its last insert (see `Inserted`): a growing prompt's next
   * call then places only its new blocks while nothing else used a block in
   * between — otherwise every call walked the whole prompt's blocks, a cost
   * that grew with the run (found by an outside attack's 1,000-step
   * long-lived run; bench:overhead's long phase).
   */
  private readonly inserted = new WeakMap<readonly number[], Inserted>();

  /**
   * @param maxEntries how many blocks (not prompts) the cache holds before
   *   evicting the least recently used; each block is `blockSize` tokens.
   * @param blockSize tokens per block; cached counts are multiples of it.
   */
  constructor(
    readonly maxEntries = DEFAULT_MAX_ENTRIES,
    readonly blockSize = DEFAULT_BLOCK_SIZE,
    /** Blocks one insert places beyond those already in place (`insertKeys`). */
    readonly maxInsertBlocks = DEFAULT_MAX_INSERT_BLOCKS,
  ) {
    if (!Number.isInteger(maxEntries) || maxEntries < 0) throw new RangeError(`maxEntries must be a non-negative integer, got ${maxEntries}`);
    if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
    if (!Number.isInteger(maxInsertBlocks) || maxInsertBlocks < 1) throw new RangeError(`maxInsertBlocks must be a positive integer, got ${maxInsertBlocks}`);
  }

  /** Blocks currently cached. */
  get size(): number {
    return this.blocks.size;
  }

  /**
   * How many leading tokens of `tokens` are cached: the longest run of full
   * blocks whose chained keys are all present. Hashes only up to the first
   * miss, so a cold prompt costs one block.
   */
  lookup(tokens: ArrayLike<number>, partition: string | null = null): number {
    const hits: number[] = [];
    const chain = new BlockChain(tokens, this.blockSize, partition);
    for (let key = chain.next(); key !== undefined; key = chain.next()) {
      if (!this.blocks.has(key)) break;
      hits.push(key);
    }
    this.touch(hits);
    return hits.length * this.blockSize;
  }

  /** Remember every full block of `tokens` (the trailing partial block is dropped). */
  insert(tokens: ArrayLike<number>, partition: string | null = null): void {
    if (this.maxEntries === 0) return;
    const keys: number[] = [];
    const chain = new BlockChain(tokens, this.blockSize, partition);
    for (let key = chain.next(); key !== undefined; key = chain.next()) keys.push(key);
    this.touch(keys, Math.min(keys.length, this.maxEntries));
    this.evict();
  }

  /**
   * The chained keys of every full block of `tokens`, yielding every 1,024
   * blocks (src/cooperative.ts): for prompts of millions of tokens, whose
   * hashing would otherwise hold the event loop. `lookupKeys` and
   * `insertKeys` then give exactly what `lookup` and `insert` give.
   */
  *keysWork(tokens: ArrayLike<number>, partition: string | null = null): Work<number[]> {
    const keys: number[] = [];
    const chain = new BlockChain(tokens, this.blockSize, partition);
    for (let key = chain.next(); key !== undefined; key = chain.next()) {
      keys.push(key);
      if (keys.length % 1024 === 0) yield;
    }
    return keys;
  }

  /**
   * `lookup` from precomputed keys (the first `count` of them: a `PromptKeys`
   * array may grow later). Unlike `lookup` it leaves the LRU order alone: its
   * caller (the simulated model) inserts the same keys after prefill, which
   * marks the hits used again, so touching them here too was every block's
   * delete and set twice per model call. A call aborted during prefill
   * leaves its hits' recency as it was.
   */
  lookupKeys(keys: readonly number[], count = keys.length): number {
    return this.cachedRun(keys, count) * this.blockSize;
  }

  insertKeys(keys: readonly number[], count = keys.length): void {
    if (this.maxEntries === 0) return;
    // A prompt larger than the cache: touching its blocks past the first `maxEntries` only made them the
    // oldest, to be evicted at once with everything else — what touching the first `maxEntries` leaves too.
    // Without this, each call of a long run whose prompt outgrew the cache created and evicted every block
    // past the cache's size, a cost that grew with the run (an outside attack, --prefix-cache-blocks 4000).
    count = Math.min(count, this.maxEntries);
    const last = this.inserted.get(keys);
    // Nothing used or removed since these keys' last insert: the blocks it left cached are still the newest, in order.
    let placed = 0;
    if (last !== undefined) placed = last.version === this.version ? Math.min(last.count, count) : this.raise(keys, Math.min(last.count, count), last.version);
    // A prompt inserted before places at most `maxInsertBlocks` more than those in place; the rest by its later
    // inserts. Each block placed is a Map operation and a relink, in the event loop's turn: two runs whose prompts
    // together outgrew the cache evicted each other's blocks at every call and placed them all again, up to the whole
    // cache per call (an outside attack: 21–42 ms of CPU per step, 15–30× a step's cost, /health 200 ms with four such
    // runs). A prompt's blocks are placed from its root, so what stays out is its end: a lookup finds a leading run.
    // A prompt's first insert places it whole (up to the cache's size), a cost paid once, as its tokenizing is.
    if (last !== undefined) count = Math.min(count, placed + this.maxInsertBlocks);
    this.touch(keys, count, placed);
    this.evict();
    // The `count` blocks just touched are the newest and no more than the cache holds: none was evicted.
    this.inserted.set(keys, { count, version: this.version });
  }

  /**
   * Makes the blocks this key array's last insert left cached the newest
   * again, in one move, when no touch used them since (another chain's
   * insert in between: two runs stepping in turn). Returns how many it moved
   * (the caller's `placed`), 0 when they must be placed one by one.
   *
   * Any touch of a chain's block touches its root too (a key stands for its
   * whole prefix), so a root still stamped with that insert's version means
   * none of the chain's blocks was used since. Other touches link their own
   * blocks only at the tail or next to each other, and evictions take the
   * oldest, so the chain's cached blocks are still one contiguous run, its
   * root newest: moving that run to the tail is what touching each of them
   * again, deepest first, gives. Without it a long run's every model call
   * walked its whole prompt as soon as another run had used the cache in
   * between — the usual case on a server — a cost that grew with the run
   * (an outside attack: two interleaved 4,000-step prompts, ~2 ms a call).
   */
  private raise(keys: readonly number[], upTo: number, version: number): number {
    const root = upTo > 0 ? this.blocks.get(keys[0]!) : undefined;
    if (root === undefined || root.stamp !== version) return 0;
    const n = this.cachedRun(keys, upTo);
    if (root !== this.tail) {
      const oldest = this.blocks.get(keys[n - 1]!)!;
      const before = oldest.older;
      const after = root.newer!;
      if (before) before.newer = after;
      else this.head = after;
      after.older = before;
      oldest.older = this.tail;
      this.tail!.newer = oldest;
      root.newer = null;
      this.tail = root;
    }
    return n;
  }

  /**
   * How many of the first `count` keys of one chain are cached: they are
   * always a leading run. Every touch that marks a block used marks every
   * block before it in its chain too (a key stands for its whole prefix, and
   * `lookup` touches only a leading run of hits), placing each newer than
   * the one after it; so a block is never older than its successor, and
   * eviction, oldest first, takes a chain's blocks from its end. Found by
   * binary search: a full cache evicts at nearly every insert, and checking
   * every block from the start then made each model call of a long run cost
   * more than the one before (bench:overhead's long phase, once warm-up
   * had filled the cache).
   */
  private cachedRun(keys: readonly number[], count: number): number {
    if (count === 0 || this.blocks.has(keys[count - 1]!)) return count;
    let lo = 0;
    let hi = count - 1; // keys[hi] is not cached
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.blocks.has(keys[mid]!)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  clear(): void {
    this.blocks.clear();
    this.head = this.tail = null;
    this.version++;
  }

  /** The cached block keys, least recently used first (tests compare the LRU order). */
  order(): number[] {
    const out: number[] = [];
    for (let b = this.head; b !== null; b = b.newer) out.push(b.key);
    return out;
  }

  /** Drop the least recently used blocks until the cache fits. */
  private evict(): void {
    while (this.blocks.size > this.maxEntries && this.head) {
      const oldest = this.head;
      this.unlink(oldest);
      this.blocks.delete(oldest.key);
    }
  }

  /**
   * Mark blocks as most recently used, deepest block first, so the root of a
   * chain is the newest and is evicted last. Evicting a root before its
   * descendants would make the whole chain unreachable while it still used
   * space (vLLM frees blocks tail-first for the same reason).
   */
  private touch(keys: readonly number[], count = keys.length, placed = 0): void {
    this.version++;
    // The chain's root belongs at the tail, its next block just before it, and
    // so on. A growing prompt touched again finds its earlier blocks already
    // there (nothing else was used since, the usual case): they are only
    // checked — or, when the caller knows the first `placed` are still where
    // its last insert put them, skipped — and the new blocks are linked in
    // behind them. The resulting order is the one deleting and re-adding
    // every block gave.
    let i = placed;
    let place = i === 0 ? this.tail : null;
    while (i < count && place !== null && place.key === keys[i]) {
      place = place.older;
      i++;
    }
    // `newer` is where the next block goes: just older than the last one placed.
    let newer = i === 0 ? null : this.blocks.get(keys[i - 1]!)!;
    for (; i < count; i++) {
      const key = keys[i]!;
      let block = this.blocks.get(key);
      if (block === undefined) {
        block = { key, stamp: 0, older: null, newer: null };
        this.blocks.set(key, block);
      } else if (block === (newer === null ? this.tail : newer.older)) {
        newer = block;
        continue;
      } else this.unlink(block);
      this.linkOlderThan(block, newer);
      newer = block;
    }
    if (count > 0) this.blocks.get(keys[0]!)!.stamp = this.version;
  }

  private unlink(b: Block): void {
    if (b.older) b.older.newer = b.newer;
    else this.head = b.newer;
    if (b.newer) b.newer.older = b.older;
    else this.tail = b.older;
    b.older = b.newer = null;
  }

  /** Link `b` just older than `newer` (null: as the newest block). */
  private linkOlderThan(b: Block, newer: Block | null): void {
    const older = newer === null ? this.tail : newer.older;
    b.newer = newer;
    b.older = older;
    if (older) older.newer = b;
    else this.head = b;
    if (newer) newer.older = b;
    else this.tail = b;
  }
}

/**
 * The chained block keys of one growing prompt, kept between model calls:
 * a long-lived run's or a ws connection's prompt only grows (pipeline/tokens.ts
 * `TokenBuffer`), so each call hashes only the blocks completed since the
 * last one, instead of the whole prompt twice (lookup, then insert) — which
 * over a run of N calls was quadratic. The owner guarantees the append-only
 * contract: every `tokens` passed extends the previous one.
 */
export class PromptKeys {
  private keys: number[] = [];
  private chain: BlockChain | null = null;
  private blockSize = 0;
  private partition: string | null = null;

  /** Tokens already hashed (for `blockSize` and `partition`): a call hashes only what lies past them. */
  covered(blockSize: number, partition: string | null): number {
    return this.chain !== null && blockSize === this.blockSize && partition === this.partition ? this.chain.offset : 0;
  }

  /** Keys of every full block of `tokens` (yielding every 1,024 new blocks); the array is this object's, read its current length at once. */
  *work(tokens: ArrayLike<number>, blockSize: number, partition: string | null): Work<readonly number[]> {
    if (this.chain === null || blockSize !== this.blockSize || partition !== this.partition || tokens.length < this.chain.offset) {
      this.keys = [];
      this.chain = new BlockChain(tokens, blockSize, partition);
      this.blockSize = blockSize;
      this.partition = partition;
    }
    const chain = this.chain;
    chain.tokens = tokens;
    let fresh = 0;
    try {
      for (let key = chain.next(); key !== undefined; key = chain.next()) {
        this.keys.push(key);
        if (++fresh % 1024 === 0) yield;
      }
    } finally {
      // Each call hands the prompt again: holding on to this view between calls (a paused run's life) kept a
      // typed array object, and after the prompt's buffer grew, the old buffer, for nothing.
      chain.tokens = NO_TOKENS;
    }
    return this.keys;
  }

  /** An independent copy (for a context that forks): the keys so far without hashing them again. */
  clone(): PromptKeys {
    const c = new PromptKeys();
    c.keys = this.keys.slice();
    c.chain = this.chain?.clone() ?? null;
    c.blockSize = this.blockSize;
    c.partition = this.partition;
    return c;
  }
}

const NO_TOKENS: ArrayLike<number> = Object.freeze([]);

/**
 * Walks the full blocks of a token list, yielding each block's chained key.
 * Two murmur3-style 32-bit lanes with different seeds; each block's lanes
 * start from the previous block's, which is what makes a key name a prefix.
 */
class BlockChain {
  offset = 0;
  private h1 = 0x9747b28c;
  private h2 = 0x5bd1e995;

  constructor(
    /** Replaced by `PromptKeys` with the grown prompt (the same tokens, more of them). */
    public tokens: ArrayLike<number>,
    private readonly blockSize: number,
    partition: string | null,
  ) {
    if (partition !== null) {
      // Different starting lanes per partition: every key of the chain differs.
      this.h1 = fmix(this.h1 ^ hashPartition(partition, 0x2f6b));
      this.h2 = fmix(this.h2 ^ hashPartition(partition, 0x71c3));
    }
  }

  clone(): BlockChain {
    const c = new BlockChain(this.tokens, this.blockSize, null);
    c.offset = this.offset;
    c.h1 = this.h1;
    c.h2 = this.h2;
    return c;
  }

  next(): number | undefined {
    const end = this.offset + this.blockSize;
    if (end > this.tokens.length) return undefined;
    let h1 = this.h1;
    let h2 = this.h2;
    for (let i = this.offset; i < end; i++) {
      const t = this.tokens[i]! | 0;
      h1 = mixLane(h1, t);
      h2 = mixLane(h2, t ^ 0x2545f491);
    }
    this.h1 = fmix(h1 ^ this.blockSize);
    this.h2 = fmix(h2 ^ end);
    this.offset = end;
    // 32 bits of lane 1 and 21 of lane 2: a safe integer, cheap as a Map key.
    return this.h1 * 0x200000 + (this.h2 >>> 11);
  }
}

function hashPartition(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) h = mixLane(h, s.charCodeAt(i));
  return fmix(h ^ s.length);
}

function mixLane(h: number, word: number): number {
  let k = Math.imul(word, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
