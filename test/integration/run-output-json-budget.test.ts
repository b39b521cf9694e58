/**
 * A long-lived run's pause event carries its whole output; once 32 or more of its items are finished their UTF-8
 * JSON is kept between events (protocol/event-json.ts `finishedBytes`), a second copy of the output besides its
 * items, for the run's life. Charged to `--max-server-bytes` with the output (engine/run.ts `chargeKept`): before, a
 * helper's two runs of 60 steps of 64 KB-argument calls grew the heap ~25 MB against 13 MB of `bytes_held`, the
 * kept JSON being the part counted nowhere. Real sockets.
 */
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';
import { answerOk, heldBytes, wideCreate } from '../helpers/wide-calls.js';

const create = wideCreate(['a', 'b'], 8_000);
const held = heldBytes;
const answer = answerOk;

describe("a long-lived run's kept output JSON is charged to --max-server-bytes", () => {
  it('the pause that starts keeping its finished items as JSON charges them; all released at the end', async () => {
    // The full snapshot at every pause (past --max-pause-snapshot-bytes the pause event is lean and keeps no JSON).
    const { url } = await testServer({ limits: { maxPauseSnapshotBytes: Infinity } });
    const s = await RawSocket.longLived(url);
    s.send(create);
    let done = await s.next('response.done');
    const steps: number[] = [await held(url)];
    const outputs: number[] = [done.response.output.length];
    for (let i = 0; i < 40; i++) {
      s.send(answer(done.response.pending_tool_calls!));
      done = await s.next('response.done');
      steps.push(await held(url));
      outputs.push(done.response.output.length);
    }
    const deltas = steps.slice(1).map((h, i) => h - steps[i]!);
    // Each step adds one ~16 KB call. The pause whose output first holds 32 finished items keeps them all as JSON
    // (~32 x 16 KB at once); each later pause adds its call's JSON besides the call itself.
    const first = outputs.indexOf(32) - 1;
    expect(first).toBeGreaterThan(0);
    expect(deltas[first]! - deltas[first - 1]!).toBeGreaterThan(30 * 16_000);
    expect(deltas[first + 5]! - deltas[5]!).toBeGreaterThan(15_000);
    s.send({ type: 'response.cancel' });
    await s.next('response.cancelled', { skipErrors: true });
    expect(await held(url)).toBe(0);
    s.dispose();
  });
});
