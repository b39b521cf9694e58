/**
 * A long stored record's serialisation is made in slices before the run ends (`ResponseRun.prepareRecord`): the
 * run's end is decided then, and a stop changes nothing. What the server tells the client in that window.
 */
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { ResponseRun } from '../../src/engine/run.js';
import type { PreparedPut, StoredResponse } from '../../src/store/types.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

// Past NATIVE_TEXT_CHARS (256 K): the SQLite store serialises the record in slices before the write.
const LONG = `${'\ud800'.repeat(200_000)}${'x'.repeat(100_000)}`;

type Preparing = { prepare?: (rec: StoredResponse) => Generator<void, PreparedPut, void> | undefined };

/** Holds the store's sliced serialisation (it yields, the loop goes on) until `release`; `entered` once it runs. */
function gatePrepare(store: Preparing): { entered: Promise<void>; release: () => void } {
  const real = store.prepare!.bind(store);
  let open = false;
  let enter!: () => void;
  const entered = new Promise<void>((r) => (enter = r));
  store.prepare = (rec) => {
    const work = real(rec);
    if (work === undefined) return undefined;
    return (function* () {
      enter();
      while (!open) yield;
      return yield* work;
    })();
  };
  return { entered, release: () => void (open = true) };
}

describe('the sliced store write window', () => {
  it('ws: the lifetime limit while a long stored response is written: it completes, the limit said once on the connection after it', async () => {
    const { server, url } = await testServer({ store: ':memory:', limits: { connectionLifetimeMs: 1500 } });
    const gate = gatePrepare(server.services.store as Preparing);
    const s = await RawSocket.connect(url);
    s.send({ type: 'response.create', model: 'sim-model', input: 'hi', store: true, instructions: LONG });
    await gate.entered;
    // Held in the write's slices until the lifetime limit stops the run (a no-op: its end is decided). Without the
    // fix the limit's error was already in the response's stream, before its response.completed.
    const stop = ResponseRun.prototype.stop;
    const spy = vi.spyOn(ResponseRun.prototype, 'stop').mockImplementation(function (this: ResponseRun, status, reason) {
      stop.call(this, status, reason);
      if (reason === 'connection_limit_reached') gate.release();
    });
    onTestFinished(() => spy.mockRestore());
    const closed = await s.closed;
    expect(closed.code).toBe(1000);
    const types = s.events.filter((e) => e.type !== 'llr:timing').map((e) => (e.type === 'error' ? `error:${e.error.code}` : e.type));
    expect(types.slice(-2)).toEqual(['response.completed', 'error:websocket_connection_limit_reached']);
    expect(types.filter((t) => t.startsWith('error:'))).toHaveLength(1);
    expect(s.all('response.completed')[0]!.response.status).toBe('completed');
  });
});
