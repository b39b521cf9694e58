/**
 * Every limit has an `llr serve` flag with its default in `--help`, and the
 * flags (or their environment variables) set the limits.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/engine/services.js';
import { LIMIT_FLAGS, envName, limitHelp, limitsFrom } from '../../src/limit-flags.js';
import { UsageError } from '../../src/flags.js';

describe('limit flags', () => {
  it('every limit in DEFAULT_LIMITS has a flag (add new ones to LIMIT_FLAGS in src/limit-flags.ts)', () => {
    expect(LIMIT_FLAGS.map((f) => f.key).sort()).toEqual(Object.keys(DEFAULT_LIMITS).sort());
  });

  it('--help shows each flag with its default', () => {
    const help = limitHelp();
    for (const f of LIMIT_FLAGS) expect(help).toMatch(new RegExp(`--${f.flag} N .*\\(${DEFAULT_LIMITS[f.key]}\\)`));
    // What 0 means, where it is not 'none' (--lifetime-ms 0 closed every WebSocket at once, undocumented).
    expect(help).toMatch(/--lifetime-ms N .*0: every connection is closed at once/);
    expect(help).toMatch(/--pause-timeout-ms N .*0: a run ends at its first pause/);
  });

  it('flags set limits, environment variables too, flags win; bad values are refused', () => {
    expect(limitsFrom({ 'max-connections': '7', 'max-json-depth': '9' }, { LLR_MAX_CONNECTIONS: '3', LLR_SEND_BUFFER_BYTES: '1024' })).toEqual({
      maxConnections: 7,
      maxJsonDepth: 9,
      maxSendBufferBytes: 1024,
    });
    expect(limitsFrom({ 'max-connections': 'Infinity' }, {})).toEqual({ maxConnections: Infinity });
    expect(limitsFrom({ 'lifetime-ms': '2147483647' }, {})).toEqual({ connectionLifetimeMs: 2147483647 });
    // A longer Node timer would fire at once.
    expect(() => limitsFrom({ 'lifetime-ms': 'Infinity' }, {})).toThrow(/at most 2147483647/);
    expect(() => limitsFrom({ 'pause-timeout-ms': '3000000000' }, {})).toThrow(/at most/);
    expect(envName('max-run-records')).toBe('LLR_MAX_RUN_RECORDS');
    // Whole numbers in plain decimal: Number() took '' as 0 and ' 5' or '0x10' as numbers; Node refused a fractional HTTP timeout with its own message.
    for (const bad of ['-1', 'x', '', ' 5', '0x10', '1.5', '-Infinity', 'NaN']) expect(() => limitsFrom({ 'max-queued-bytes': bad }, {}), bad).toThrow(UsageError);
    expect(() => limitsFrom({ 'headers-timeout-ms': '1.5' }, {})).toThrow("--headers-timeout-ms needs an integer >= 0, got '1.5'");
    expect(limitsFrom({ 'max-frame-bytes': '1e6' }, {})).toEqual({ maxFrameBytes: 1e6 });
  });

  it('the cache reclaim grace is an age, not a timer: 0, past 2^31-1 ms and Infinity are taken (atk102 I3)', () => {
    expect(limitsFrom({ 'cache-reclaim-grace-ms': 'Infinity' }, {})).toEqual({ cacheReclaimGraceMs: Infinity });
    expect(limitsFrom({ 'cache-reclaim-grace-ms': '3000000000' }, {})).toEqual({ cacheReclaimGraceMs: 3_000_000_000 });
    expect(limitsFrom({}, { LLR_CACHE_RECLAIM_GRACE_MS: '0' })).toEqual({ cacheReclaimGraceMs: 0 });
    for (const bad of ['-1', '1.5', 'x']) expect(() => limitsFrom({ 'cache-reclaim-grace-ms': bad }, {}), bad).toThrow(`--cache-reclaim-grace-ms needs an integer >= 0 (or Infinity), got '${bad}'`);
  });

  it('the store bounds: a file store has its own, and the TTL is an age, not a timer (its 30-day default is past 2^31-1 ms)', () => {
    expect(DEFAULT_LIMITS.storeTtlMs).toBe(30 * 24 * 60 * 60 * 1000);
    expect(limitsFrom({ 'max-file-store-responses': '5', 'max-file-store-bytes': 'Infinity', 'store-ttl-ms': '2592000000' }, { LLR_STORE_TTL_MS: '1' })).toEqual({
      maxFileStoreResponses: 5,
      maxFileStoreBytes: Infinity,
      storeTtlMs: 2_592_000_000,
    });
    expect(limitsFrom({ 'store-ttl-ms': 'Infinity' }, {})).toEqual({ storeTtlMs: Infinity });
    // 0 would forget every response as it is stored: store: false says that.
    for (const bad of ['0', '-1', '1.5', 'x', '']) expect(() => limitsFrom({ 'store-ttl-ms': bad }, {}), bad).toThrow(`--store-ttl-ms needs an integer >= 1 (or Infinity), got '${bad}'`);
    // At 0 no list not yet cached could ever be listed: refused, as a TTL of 0 is.
    for (const bad of ['0', '-1', '1.5']) expect(() => limitsFrom({ 'max-queued-listings': bad }, {}), bad).toThrow(`--max-queued-listings needs an integer >= 1 (or Infinity), got '${bad}'`);
    expect(limitsFrom({ 'max-queued-listings': '1' }, {}).maxQueuedListings).toBe(1);
    expect(() => limitsFrom({ 'max-file-store-bytes': '-1' }, {})).toThrow("--max-file-store-bytes needs an integer >= 0 (or Infinity), got '-1'");
    // A fraction a double rounds to a whole number is not an integer; nor is one past 2^53 said to be too large (atk78 I1).
    for (const bad of ['4503599627370496.5', '9007199254740993.5']) {
      expect(() => limitsFrom({ 'max-tools': bad }, {}), bad).toThrow(`--max-tools needs an integer >= 0 (or Infinity), got '${bad}'`);
      expect(() => limitsFrom({ 'max-tools': bad }, {}), bad).not.toThrow(/above 9007199254740991/);
    }
    expect(limitsFrom({ 'max-tools': '1.5e3' }, {}).maxTools).toBe(1500);
    // A whole number past 2^53 is said to be too large, not "not an integer" (atk75 I2).
    expect(() => limitsFrom({ 'max-tools': '99999999999999999999' }, {})).toThrow(
      "--max-tools needs an integer >= 0 (or Infinity), got '99999999999999999999' (above 9007199254740991, the largest integer this server holds exactly; Infinity for no limit)",
    );
    expect(limitHelp()).toMatch(/--store-ttl-ms N .*\(2592000000\)/);
  });

  it('docs/reliability.md has a row for every flag (the docs state a default and a flag for each bound)', () => {
    const doc = readFileSync(new URL('../../docs/reliability.md', import.meta.url), 'utf8');
    const rows = doc.split('\n').filter((l) => l.startsWith('| '));
    for (const f of LIMIT_FLAGS) expect(rows.some((r) => r.includes(`\`--${f.flag}\``) || r.includes(`\`--${f.flag} `)), f.flag).toBe(true);
  });
});
