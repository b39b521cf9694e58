/**
 * Byte-pair merging over the o200k tables (model/bpe-tables.ts): the step
 * that turns one pre-token that is not itself a token into its token ids.
 *
 * The classic merge, as gpt-tokenizer and tiktoken do it: start from single
 * bytes, repeatedly join the adjacent pair whose joined bytes have the lowest
 * rank (the leftmost on a tie) until no pair is a token. Quadratic in the
 * pre-token's length, which is why model/tokenizer.ts never hands it more
 * than `MAX_PRETOKEN_CHARS`. Results are cached, at most
 * `MERGE_CACHE_ENTRIES` (the library's default size, which the tokenizer
 * used before it read the tables itself) and `MERGE_CACHE_WEIGHT`: a cache
 * hit and a fresh merge give the same ids.
 */
import { rankOfBytes, type BpeTables } from './bpe-tables.js';

/**
 * Pre-tokens whose merge result is remembered, at most this many, and at
 * most `MERGE_CACHE_WEIGHT` characters and ids together: ordinary text fills
 * it with short words (a few MB); long pieces (the 256-unit pieces of a run
 * without spaces) count by their size, so a cache full of them stays near
 * 30 MB (counting entries alone let a few requests of random CJK fill
 * ~500 MB; outside attack). A run of one repeated character — a padded
 * tool output — is still merged once.
 */
export const MERGE_CACHE_ENTRIES = 100_000;
/** Characters of cached pre-tokens plus their ids, at most (~8 bytes each). */
export const MERGE_CACHE_WEIGHT = 4_000_000;
let cacheEntries = MERGE_CACHE_ENTRIES;

/** Change the merge cache's bound for the process (`llr serve --tokenizer-cache-entries`); 0 turns caching off. */
export function setMergeCacheEntries(n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`tokenizer cache entries must be a whole number ≥ 0, not ${n}`);
  cacheEntries = n;
}

const encoder = new TextEncoder();

/**
 * Two generations instead of a strict LRU: new results go to `young`; a hit
 * in `old` moves there; when `young` holds half the bound, it becomes `old`
 * (or half the weight) and the previous `old` is dropped whole. Every step is O(1): evicting one
 * entry at a time from the front of a Map left deleted slots that each next
 * eviction walked again, which made a full cache ~5× slower than none.
 */
export class BpeMerger {
  private young = new Map<string, number[]>();
  private old = new Map<string, number[]>();
  /** Characters and ids in `young`. */
  private youngWeight = 0;

  constructor(readonly tables: BpeTables) {}

  /** The ids of `piece` (one pre-token, or a bounded slice of one). */
  encode(piece: string): number[] {
    if (cacheEntries === 0) return merge(this.tables, encoder.encode(piece));
    const hit = this.young.get(piece);
    if (hit) return hit;
    const aged = this.old.get(piece);
    if (aged) {
      this.remember(piece, aged);
      return aged;
    }
    const ids = merge(this.tables, encoder.encode(piece));
    this.remember(piece, ids);
    return ids;
  }

  private remember(piece: string, ids: number[]): void {
    const weight = piece.length + ids.length;
    if (this.young.size >= Math.max(1, cacheEntries >>> 1) || this.youngWeight + weight > MERGE_CACHE_WEIGHT >>> 1) {
      this.old = this.young;
      this.young = new Map();
      this.youngWeight = 0;
    }
    this.young.set(piece, ids);
    this.youngWeight += weight;
  }

  /** Pre-tokens whose merge is cached now (a piece in both generations counts twice). */
  get cached(): number {
    return this.young.size + this.old.size;
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
