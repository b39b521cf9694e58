/**
 * A paused long-lived run's output (the model's items, kept for the run's
 * life: its context, its `output`, its terminal event, the store) is counted
 * in the server-wide byte budget (`--max-server-bytes`) from each pause until
 * the run ends. Before, it was bounded per run only (`--max-context-bytes`, by
 * the check of each append: engine/budget.ts `RunKeep`) and counted nowhere:
 * an outside attack's four runs forcing a tool whose schema asks for 64 KB of
 * arguments, answering each call with "ok", held ~23 MB of heap each after 300
 * steps with `bytes_held` at 420 KB in all, so 1,024 connections could hold
 * 32 GiB past a 256 MiB budget. Charged unchecked (the model already made it)
 * at each pause: past the budget the run's next append is refused
 * `server_busy` (its frame is), and it stays paused. Real sockets.
 */
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { answerOk, heldBytes, wideCreate } from '../helpers/wide-calls.js';

const KiB = 1024;
/** A tool whose minimal arguments are ~64 KB: the default policy fills each required string to its minLength. */
const create = wideCreate(['a', 'b', 'c', 'd'], 16_000);
const held = heldBytes;
const answer = answerOk;

/** The next `response.done` or `error` event the socket receives (the RawSocket's waits take one type each). */
function doneOrError(s: RawSocket): Promise<{ type: string }> {
  return new Promise((resolve) => {
    const on = (data: Buffer) => {
      const e = JSON.parse(data.toString()) as { type: string };
      if (e.type !== 'response.done' && e.type !== 'error') return;
      s.ws.off('message', on);
      resolve(e);
    };
    s.ws.on('message', on);
  });
}

describe("a paused long-lived run's output is charged to --max-server-bytes", () => {
  it('each pause charges the output so far; past the budget the next append is refused server_busy, ending the run that alone holds it; all released at the end', async () => {
    const { server, url } = await testServer({ limits: { maxServerBytes: 512 * KiB } });
    const s = await RawSocket.longLived(url);
    s.send(create);
    let done = await s.next('response.done');
    const steps: number[] = [await held(url)];
    // Each step's call carries ~64 KB of arguments: after 4 pauses ~256 KB of output is held.
    for (let i = 0; i < 3; i++) {
      s.send(answer(done.response.pending_tool_calls!));
      done = await s.next('response.done');
      steps.push(await held(url));
    }
    expect(steps[0]).toBeGreaterThan(64_000);
    expect(steps[3]! - steps[0]!).toBeGreaterThan(3 * 64_000);
    // Grow it past the budget: an append is then refused.
    let refused = false;
    for (let i = 0; i < 10 && !refused; i++) {
      const next = doneOrError(s);
      s.send(answer(done.response.pending_tool_calls!));
      const e = await next;
      if (e.type === 'error') {
        expect(e).toMatchObject({ error: { code: 'server_busy' } });
        refused = true;
      } else done = e as typeof done;
    }
    expect(refused).toBe(true);
    // The budget is passed by one turn's output at most.
    expect(server.bytes.peak).toBeLessThanOrEqual(512 * KiB + 2 * 64 * KiB);
    // The paused run alone holds the budget, so no append of it can ever fit: it ends at once, not at its pause
    // timeout (it stayed paused, told to try again when other requests end; atk76 F1).
    const ended = await s.next('response.incomplete', { skipErrors: true });
    expect(ended.response).toMatchObject({ incomplete_details: null, llr_incomplete_reason: 'server_busy' });
    expect(await held(url)).toBe(0);
    s.dispose();
  });

  it('released when the client goes away while the run is paused', async () => {
    const { server, url } = await testServer({ limits: { maxServerBytes: 4096 * KiB } });
    const s = await RawSocket.longLived(url);
    s.send(create);
    await s.next('response.done');
    expect(await held(url)).toBeGreaterThan(64_000);
    s.dispose();
    await server.ws.idle();
    expect(await held(url)).toBe(0);
  });
});
