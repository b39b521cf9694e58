/**
 * A background create's JSON answer is charged to the server-wide byte
 * budget unchecked, as a non-stream create's is: its run has started (it is
 * in flight, found by id, billed once it ends) before the answer is made, so
 * a `server_busy` then would tell the client its create failed. Outside
 * attack: under `--max-server-bytes 2 MiB`, a background create with 900 K
 * characters of instructions was answered 503 `server_busy` (the run held
 * 1.35 MB, the answer's charge 0.9 MB more) while its run went on, its id
 * never given to the client (the SDKs retry a 503: a second run). The model
 * waits on a gate the test opens: no sleeps. Real sockets.
 */
import { describe, expect, it } from 'vitest';
import { gatedModel } from '../helpers/gated-model.js';
import { testServer } from '../helpers/server.js';

describe('a large background create answer under a nearly full byte budget', () => {
  it('is answered 200 with the started run, not 503 server_busy, and the budget returns to 0', async () => {
    const gated = gatedModel();
    const { url } = await testServer({ model: gated.model, limits: { maxServerBytes: 2 * 1024 * 1024 } });
    const health = async () => (await (await fetch(`${url}/health`)).json()) as { bytes_held: number; background_in_flight: number };
    const instructions = 'x'.repeat(900_000);
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'm', input: 'hi', instructions, store: true, background: true }),
    });
    const text = await res.text();
    // Before: 503 server_busy, with the run in flight (background_in_flight 1).
    expect(res.status, text.slice(0, 300)).toBe(200);
    const r = JSON.parse(text) as { id: string; status: string; instructions: string };
    expect(r).toMatchObject({ status: 'in_progress' });
    expect(r.instructions).toBe(instructions);
    expect((await health()).background_in_flight).toBe(1);
    gated.release();
    let h = await health();
    for (let i = 0; i < 500 && (h.background_in_flight !== 0 || h.bytes_held !== 0); i++) h = await health();
    expect(h).toMatchObject({ background_in_flight: 0, bytes_held: 0 });
  });
});
