/**
 * `GET /llr/runs` pages are made one at a time server-wide, at most `maxWaiting` waiting (transport/run-pages.ts): an
 * outside attack's 100 concurrent 2 MB pages, each made in slices at once, held new connections ~12 s.
 */
import { describe, expect, it } from 'vitest';
import { RunPages } from '../../src/transport/run-pages.js';
import { WireError } from '../../src/protocol/errors.js';

const page = (n: number) => ({ object: 'list', data: Array.from({ length: n }, (_, i) => ({ response_id: `resp_${i}`, counters: { a: i }, spans: [] })) });

describe('RunPages', () => {
  it("makes each page's JSON once the pages before it are made, in order, and refuses past maxWaiting", async () => {
    const pages = new RunPages(3);
    const signal = new AbortController().signal;
    const taken: number[] = [];
    const made = [1, 2, 3].map((k) =>
      pages.make(() => {
        taken.push(k);
        return page(k * 1000);
      }, signal),
    );
    expect(pages.waiting).toBe(3);
    // None is taken at the call: the first when the queue gets to it.
    expect(taken).toEqual([]);
    const refused = await pages.make(() => page(1), signal).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(WireError);
    expect((refused as WireError).code).toBe('too_many_listings');
    const bytes = await Promise.all(made);
    expect(taken).toEqual([1, 2, 3]);
    bytes.forEach((b, i) => expect(b.toString('utf8')).toBe(JSON.stringify(page((i + 1) * 1000))));
    expect(pages.waiting).toBe(0);
  });

  it('a page whose client went away is not made, and the queue goes on', async () => {
    const pages = new RunPages(4);
    const live = new AbortController();
    const gone = new AbortController();
    let made = 0;
    const first = pages.make(() => (made++, page(10)), live.signal);
    const second = pages.make(() => (made++, page(10)), gone.signal);
    const third = pages.make(() => (made++, page(10)), live.signal);
    gone.abort(new WireError('request_aborted', 'gone'));
    await expect(second).rejects.toThrow('gone');
    expect((await first).length).toBeGreaterThan(0);
    expect((await third).length).toBeGreaterThan(0);
    expect(made).toBe(2);
    expect(pages.waiting).toBe(0);
  });
});
