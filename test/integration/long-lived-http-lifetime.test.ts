/**
 * A long-lived run over HTTP is held to `--lifetime-ms`, the bound a
 * WebSocket long-lived run has through its connection. Found by an outside
 * attack: nothing bounded such a run's time, so a client that appended within
 * every pause timeout kept its run, its SSE connection, its slot of
 * `--max-live-http-runs` and its context alive for ever. It ends `incomplete`,
 * `llr_incomplete_reason: "connection_limit_reached"`, once.
 */
import { describe, expect, it } from 'vitest';
import { SseStream, postJson } from '../helpers/sse-stream.js';
import { testServer } from '../helpers/server.js';

const shell = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } };
// `tool_choice: required`: every model call calls the tool, so the run pauses at every step for as long as it is fed.
const create = { model: 'sim-model', input: 'run:\n$ ls', tools: [shell], tool_choice: 'required', store: false };

describe('the lifetime of a long-lived run over HTTP (--lifetime-ms)', () => {
  it('a run fed at every pause ends incomplete (connection_limit_reached) at the lifetime, once', async () => {
    const { url, server } = await testServer({ limits: { connectionLifetimeMs: 150 } });
    const s = await SseStream.open(url, create);
    const id = (await s.next('response.created')).response.id;
    let steps = 0;
    // Without the bound the run pauses again after every append, for ever; 1,000 steps are many lifetimes.
    for (; steps < 1000; steps++) {
      let done;
      try {
        done = await s.next('response.done');
      } catch {
        break; // the stream ended
      }
      const r = await postJson(`${url}/v1/responses/${id}/append`, {
        input: done.response.pending_tool_calls!.map((call_id) => ({ type: 'function_call_output', call_id, output: 'ok' })),
      });
      // The run may end between its response.done and this append: then the append is refused, the stream ends.
      if (r.status !== 202) expect(r.json.error.code).toMatch(/response_not_found|no_paused_response/);
    }
    expect(steps).toBeLessThan(1000);
    expect(await s.ended).toEqual({ done: true });
    const terminal = s.events.filter((e) => /^response\.(completed|failed|cancelled|incomplete)$/.test(e.type));
    expect(terminal).toHaveLength(1);
    expect(terminal[0]!.type).toBe('response.incomplete');
    expect((terminal[0] as { response: { llr_incomplete_reason?: string } }).response.llr_incomplete_reason).toBe('connection_limit_reached');
    await server.services.postWork.flush();
    expect(server.services.records.get(id)).toMatchObject({ status: 'incomplete' });
    expect(server.services.ledger.countFor(id)).toBe(1);
  }, 60_000);
});
