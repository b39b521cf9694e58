/**
 * `GET /llr/runs` pages made one at a time server-wide. A page of 1,000 run records is ~2 MB of JSON: made in slices,
 * each page alone holds the loop briefly, but any number of them at once each took its slice in every turn, and an
 * outside attack's 100 concurrent page reads held new connections (a `/health` probe) 12 s. A page's text is made
 * when its turn comes (in slices, `jsonBytesWork`), then written with back-pressure outside the queue, so a reader
 * that does not read holds no one else up. Past `maxWaiting` pages waiting (`--max-queued-listings`, the bound the
 * `input_items` listings' own queue has), 429 `too_many_listings`. A page whose client goes away leaves the queue.
 */
import { WireError } from '../protocol/errors.js';
import { jsonBytesWork } from '../protocol/json-chunked.js';
import { abortableWork, runCooperative } from '../cooperative.js';
import { SerialQueue } from '../model/serial-queue.js';

export class RunPages {
  readonly #queue: SerialQueue;

  constructor(readonly maxWaiting: number) {
    this.#queue = new SerialQueue(
      maxWaiting,
      () => new WireError('too_many_listings', `Too many run-record pages are waiting to be made (${maxWaiting}, llr serve --max-queued-listings); try again shortly.`),
    );
  }

  /** Pages waiting or being made. */
  get waiting(): number {
    return this.#queue.waiting;
  }

  /** The UTF-8 JSON of `page()`, taken and made once the pages queued before it are made; rejects with `signal`'s reason once it aborts. */
  make(page: () => unknown, signal: AbortSignal): Promise<Buffer> {
    return this.#queue.run(async () => runCooperative(abortableWork(jsonBytesWork(page()), signal)), signal);
  }
}
