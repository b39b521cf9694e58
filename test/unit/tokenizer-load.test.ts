/**
 * Loading the tokenizer's tables on demand (model/tokenizer.ts): nothing is
 * loaded until asked; concurrent waiters share one read; a failed load
 * rejects every waiter with a server_error and the next call loads again;
 * a synchronous caller during a load builds the tables itself; once loaded,
 * `afterTokenizer` runs its step at once. The read is gated by the test (a
 * source whose promise the test settles), so no timing is involved.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { encode as libraryEncode } from 'gpt-tokenizer/encoding/o200k_base';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WireError } from '../../src/protocol/errors.js';
import { afterTokenizer, encodeText, setTokenizerSource, tokenizerReady, tokenizerState } from '../../src/model/tokenizer.js';
import { MERGE_CACHE_ENTRIES, setMergeCacheEntries } from '../../src/model/bpe-merge.js';

const data = readFileSync(createRequire(import.meta.url).resolve('gpt-tokenizer/data/o200k_base.tiktoken'));
const TEXT = 'The server streams one delta per token: 日本語 🎉';

function gatedSource() {
  let release!: (d: Uint8Array) => void;
  let fail!: (e: Error) => void;
  const gate = new Promise<Uint8Array>((res, rej) => {
    release = res;
    fail = rej;
  });
  const src = {
    reads: 0,
    syncReads: 0,
    read: () => {
      src.reads++;
      return gate;
    },
    readSync: () => {
      src.syncReads++;
      return data;
    },
  };
  return { src, release, fail };
}

beforeEach(() => setTokenizerSource(null));
afterEach(() => setTokenizerSource(null));

describe('tokenizer tables on demand', () => {
  it('loads nothing until asked, then shares one read among concurrent waiters', async () => {
    const { src, release } = gatedSource();
    setTokenizerSource(src);
    expect(tokenizerState().state).toBe('unloaded');
    const waiters = [tokenizerReady(), tokenizerReady(), tokenizerReady()];
    expect(waiters[1]).toBe(waiters[0]);
    expect(src.reads).toBe(1);
    expect(tokenizerState().state).toBe('loading');
    release(data);
    await Promise.all(waiters);
    expect(src.reads).toBe(1);
    expect(src.syncReads).toBe(0);
    const state = tokenizerState();
    expect(state.state).toBe('loaded');
    expect(state.load_ms).toBeGreaterThan(0);
    expect(encodeText(TEXT)).toEqual(libraryEncode(TEXT));
  });

  it('rejects every waiter with a server_error when the load fails, and loads again on the next call', async () => {
    const bad = gatedSource();
    setTokenizerSource(bad.src);
    const failuresBefore = tokenizerState().failed_loads;
    const waiters = [tokenizerReady(), afterTokenizer(async () => 'ran')];
    bad.fail(new Error('ENOENT: no such file'));
    const results = await Promise.allSettled(waiters);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as WireError;
      expect(err).toBeInstanceOf(WireError);
      expect(err.code).toBe('server_error');
      expect(err.message).toMatch(/tokenizer tables could not be loaded/);
      expect((err.cause as Error).message).toMatch(/ENOENT/);
    }
    expect(tokenizerState()).toMatchObject({ state: 'unloaded', failed_loads: failuresBefore + 1 });

    // A malformed file fails the same way (the build throws).
    const garbage = gatedSource();
    setTokenizerSource(garbage.src);
    const third = tokenizerReady();
    garbage.release(Buffer.from('not a tiktoken file\n'));
    await expect(third).rejects.toMatchObject({ code: 'server_error' });

    const good = gatedSource();
    setTokenizerSource(good.src);
    const again = afterTokenizer(async () => encodeText(TEXT));
    good.release(data);
    expect(await again).toEqual(libraryEncode(TEXT));
  });

  it('runs a step at once, without waiting a turn, once the tables are loaded', async () => {
    await tokenizerReady();
    let ran = false;
    const p = afterTokenizer(async () => {
      ran = true;
    });
    expect(ran).toBe(true);
    await p;
  });

  it('lets a synchronous caller build the tables itself during a load, which then completes without replacing them', async () => {
    const { src, release } = gatedSource();
    setTokenizerSource(src);
    const waiting = tokenizerReady();
    expect(encodeText(TEXT)).toEqual(libraryEncode(TEXT));
    expect(src.syncReads).toBe(1);
    expect(tokenizerState().state).toBe('loaded');
    release(data);
    await waiting;
    expect(encodeText(TEXT)).toEqual(libraryEncode(TEXT));
  });
});

describe('tokenizer merge cache bound', () => {
  afterEach(() => setMergeCacheEntries(MERGE_CACHE_ENTRIES));

  it('holds at most the set number of pre-tokens, and off (0) gives the same ids', () => {
    const words = Array.from({ length: 50 }, (_, i) => ` zq${i}xv${i * 7}kj`);
    const want = words.map((w) => libraryEncode(w));
    setMergeCacheEntries(3);
    expect(words.map((w) => encodeText(w))).toEqual(want);
    expect(tokenizerState().merge_cache).toBeLessThanOrEqual(3);
    expect(tokenizerState().merge_cache).toBeGreaterThan(0);
    setMergeCacheEntries(0);
    expect(words.map((w) => encodeText(w))).toEqual(want);
    expect(() => setMergeCacheEntries(-1)).toThrow(RangeError);
    expect(() => setMergeCacheEntries(1.5)).toThrow(RangeError);
  });
});
