/**
 * Byte-pair merging over the o200k tables (model/bpe-tables.ts): the step
 * that turns one pre-token that is not itself a token into its token ids.
 *
 * The classic merge, as gpt-tokenizer and tiktoken do it: start from single
 * bytes, repeatedly join the adjacent pair whose joined bytes have the lowest
 * rank (the leftmost on a tie) until no pair is a token. Quadratic in the
 * pre-token's length, which is why model/tokenizer.ts never hands it more
 * than `MAX_PRETOKEN_CHARS`. Results are cached per pre-token in an LRU of
 * `MERGE_CACHE_ENTRIES` (the library's default size, which the tokenizer used
 * before it read the tables itself): a cache hit and a fresh merge give the
 * same ids.
 */
import { rankOfBytes, type BpeTables } from './bpe-tables.js';

/**
 * Pre-tokens whose merge result is remembered (least recently used dropped
 * first). Each entry is one pre-token of at most `MAX_PRETOKEN_CHARS` and its
 * ids, so the cache stays under ~20 MB even when full of long ones; ordinary
 * text fills it with short words (a few MB).
 */
export const MERGE_CACHE_ENTRIES = 100_000;
let cacheEntries = MERGE_CACHE_ENTRIES;

/** Change the merge cache's bound for the process (`llr serve --tokenizer-cache-entries`); 0 turns caching off. */
export function setMergeCacheEntries(n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`tokenizer cache entries must be a whole number ≥ 0, not ${n}`);
  cacheEntries = n;
}

const encoder = new TextEncoder();

export class BpeMerger {
  private readonly cache = new Map<string, number[]>();

  constructor(readonly tables: BpeTables) {}

  /** The ids of `piece` (one pre-token, or a bounded slice of one). */
  encode(piece: string): number[] {
    const hit = this.cache.get(piece);
    if (hit) {
      this.cache.delete(piece);
      this.cache.set(piece, hit);
      return hit;
    }
    const ids = merge(this.tables, encoder.encode(piece));
    if (cacheEntries === 0) return ids;
    while (this.cache.size >= cacheEntries) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(piece, ids);
    return ids;
  }

  /** Pre-tokens whose merge is cached now. */
  get cached(): number {
    return this.cache.size;
  }
}

function merge(t: BpeTables, bytes: Uint8Array): number[] {
  // bounds[i]..bounds[i+1] is part i; pair[i] is the rank of parts i and i+1 joined.
  const bounds: number[] = [];
  for (let i = 0; i <= bytes.length; i++) bounds.push(i);
  const pairRank = (i: number) => rankOfBytes(t, bytes, bounds[i]!, bounds[i + 2]!) ?? Infinity;
  const pair: number[] = [];
  for (let i = 0; i + 2 < bounds.length; i++) pair.push(pairRank(i));
  for (;;) {
    let best = Infinity;
    let at = -1;
    for (let i = 0; i < pair.length; i++) {
      if (pair[i]! < best) {
        best = pair[i]!;
        at = i;
      }
    }
    if (at < 0) break;
    bounds.splice(at + 1, 1);
    pair.splice(at, 1);
    if (at < pair.length) pair[at] = pairRank(at);
    if (at > 0) pair[at - 1] = pairRank(at - 1);
  }
  const ids: number[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const id = rankOfBytes(t, bytes, bounds[i]!, bounds[i + 1]!);
    // Every single byte is a token, so a part is always one; anything else is a broken table.
    if (id === undefined) throw new Error('o200k tables: a merged part is not a token');
    ids.push(id);
  }
  return ids;
}
