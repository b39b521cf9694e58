/**
 * Bad input on the long-lived protocol: every case gets a clear, well-formed
 * error, the socket stays open where the protocol allows, a paused run stays
 * paused, and usage is recorded exactly once however the run ends.
 */
import { describe, expect, it, vi } from 'vitest';
import { ResponseRun } from '../../src/engine/run.js';
import { WireError } from '../../src/protocol/errors.js';
import { realClock, type Clock } from '../../src/model/clock.js';
import { scriptPolicy } from '../../src/model/policies.js';
import { tokenPieces } from '../../src/model/tokenizer.js';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';
import { gatedPlanning } from '../helpers/gated-planning.js';
import { captureLogger } from '../helpers/raw-http.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const create = (extra: Record<string, unknown> = {}) => ({
  type: 'response.create',
  model: 'sim-model',
  input: 'go',
  tools: [tool],
  ...extra,
});
const twoCalls = () =>
  scriptPolicy([
    { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
    { text: 'all done' },
  ]);
const out = (call_id: string, output = 'ok') => ({ type: 'function_call_output', call_id, output });

async function pausedRun() {
  const policy = twoCalls();
  const ctx = await testServer({ policy });
  const s = await RawSocket.longLived(ctx.url);
  s.send({ ...create(), llr: { timing: true } });
  const done = await s.next('response.done');
  return { ...ctx, s, done, policy };
}

/** Proves the socket is still usable: a cancel of the paused run is answered. */
async function stillOpen(s: RawSocket) {
  s.send({ type: 'response.cancel' });
  const end = await s.next('response.cancelled');
  expect(end.response.status).toBe('cancelled');
}

describe('response.cancel before response.created', () => {
  // Found by an outside attack: a cancel sent right after the create, while it was still being planned (a
  // large input is tokenised and scanned first), was refused with no_response_in_flight and the whole run
  // went on, billed, as if the client had never asked to stop.
  it.each(['long-lived', 'ws'])('%s: a cancel while the create is planned ends its run cancelled as it starts, billed once', async (protocol) => {
    const { opts, inPlan, release } = gatedPlanning();
    const { url, server } = await testServer({ policy: twoCalls(), ...opts });
    const s = await RawSocket.connect(url, { query: `?protocol=${protocol}` });
    s.send(create());
    await inPlan;
    s.send({ type: 'response.cancel' });
    // Frames are handled in order: this one's error proves the cancel was handled while planning waited.
    s.send({ type: 'no.such.event' });
    const first = await s.next('error');
    release();
    expect(first.error.code).toBe('unknown_event_type');
    const created = await s.next('response.created');
    const end = await s.next('response.cancelled');
    expect(end.response).toMatchObject({ id: created.response.id, status: 'cancelled' });
    expect(s.all('error').map((e) => e.error.code)).toEqual(['unknown_event_type']);
    expect(s.all('response.output_item.added')).toEqual([]);
    await server.services.postWork.flush();
    const rec = server.services.records.page({ owner: null, limit: 10, after: null, order: 'desc' }).data;
    expect(rec.map((r) => [r.status, r.counters.billing_records])).toEqual([['cancelled', 1]]);
    // The cancel was spent on that create: the next one runs (to its first tool call).
    s.send(create());
    const next = await s.next('response.output_item.added');
    expect(next.item).toMatchObject({ type: 'function_call', call_id: 'call_a' });
    s.dispose();
  });

  it('a cancel naming an id while a create is planned is still refused (the id cannot be the unstarted one)', async () => {
    const { opts, inPlan, release } = gatedPlanning();
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'hi' }]), ...opts });
    const s = await RawSocket.longLived(url);
    s.send(create());
    await inPlan;
    s.send({ type: 'response.cancel', response_id: 'resp_other' });
    const refused = await s.next('error');
    release();
    expect(refused.error).toMatchObject({ code: 'no_response_in_flight', param: 'response_id' });
    expect((await s.next('response.completed', { skipErrors: true })).response.status).toBe('completed');
  });
});

describe('long-lived bad input', () => {
  it('non-JSON frame → invalid_json, socket stays open', async () => {
    const { url } = await testServer({ policy: scriptPolicy([{ text: 'hi' }]) });
    const s = await RawSocket.longLived(url);
    s.send('{not json');
    const err = await s.next('error');
    expect(err.error.code).toBe('invalid_json');
    expect(err.error.type).toBe('invalid_request_error');
    s.send(create());
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it('unknown event type → unknown_event_type', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.explode' });
    const err = await s.next('error');
    expect(err.error.code).toBe('unknown_event_type');
    expect(err.error.param).toBe('type');
  });

  it.each([
    [{ model: undefined }, 'model', 'missing_required_parameter'],
    [{ model: 42 }, 'model', 'invalid_type'],
    [{ input: 7 }, 'input', 'invalid_type'],
    [{ input: [{ type: 'message', role: 'wizard', content: 'x' }] }, 'input[0].role', 'invalid_value'],
    [{ tools: 'all' }, 'tools', 'invalid_type'],
    [{ input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id', 'missing_required_parameter'],
  ])('invalid create %j → invalid_request_error naming %s', async (extra, param, code) => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send(create(extra));
    const err = await s.next('error');
    expect(err.status).toBe(400);
    expect(err.error.type).toBe('invalid_request_error');
    expect(err.error.param).toBe(param);
    expect(err.error.code).toBe(code);
  });

  it('append with no paused response → no_paused_response', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.append', input: [out('call_x')] });
    expect((await s.next('error')).error.code).toBe('no_paused_response');
  });

  it('append for an unknown call_id → unknown_call_id, run stays paused', async () => {
    const { s, done } = await pausedRun();
    expect(done.response.status).toBe('in_progress');
    expect(done.response.pending_tool_calls).toEqual(['call_a', 'call_b']);
    s.send({ type: 'response.append', input: [out('call_a'), out('call_nope')] });
    const err = await s.next('error');
    // `param` names the item's position, as on every other design (it was 'input.call_id', no position).
    expect(err.error).toMatchObject({ code: 'unknown_call_id', param: 'input[1].call_id' });
    // An empty append answers nothing: an error, as an inject's (it got no event at all; atk69 F1).
    s.send({ type: 'response.append', input: [] });
    expect((await s.next('error')).error).toMatchObject({ code: 'empty_array', param: 'input' });
    s.send({ type: 'response.inject', response_id: done.response.id, input: [] });
    expect((await s.next('error')).error).toMatchObject({ code: 'empty_array', param: 'input' });
    // A client call appended without its output: the run waits only for the model's calls, so that output could never
    // be taken (unknown_call_id) and the stored response was a dead end; refused as a create's is (atk89 F6).
    s.send({ type: 'response.append', input: [out('call_a'), out('call_b'), { type: 'function_call', call_id: 'call_mine', name: 'lookup', arguments: '{}' }] });
    expect((await s.next('error')).error).toMatchObject({ code: 'missing_tool_output', message: 'No tool output found for function call call_mine.' });
    // Still paused: the real outputs resume it. A frame's other fields are ignored, as documented: Codex 0.107 sends
    // client_metadata on every append, and refused, every long-lived run of it failed (outside attack atk90 F1).
    s.send({ type: 'response.append', input: [out('call_a'), out('call_b')], client_metadata: { 'x-codex-turn-metadata': '{}' }, event_id: 'evt_1' });
    expect((await s.next('response.completed')).response.output.at(-1)?.type).toBe('message');
  });

  it.each([[[null]], [['text']], [[[1]]]])('append whose function_call_output.output is %j → 400 invalid_type naming the part, run stays paused', async (output) => {
    const { s } = await pausedRun();
    // Found by the chaos fuzzer: a non-object part used to be a 500 (TypeError in validateParts).
    s.send({ type: 'response.append', input: [{ type: 'function_call_output', call_id: 'call_a', output }, out('call_b')] });
    const err = await s.next('error');
    expect(err.status).toBe(400);
    expect(err.error.type).toBe('invalid_request_error');
    expect(err.error.code).toBe('invalid_type');
    expect(err.error.param).toBe('input[0].output[0]');
    s.send({ type: 'response.append', input: [out('call_a'), out('call_b')] });
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  // Over ws and http any output type answers a call of any type; here a custom_tool_call_output for a pending call was
  // appended and left the run paused, nothing sent, until the pause timeout (outside conformance tester).
  it('another output type (custom_tool_call_output, …) answers a pending call as a function_call_output does; an orphan one is unknown_call_id', async () => {
    const { s, server } = await pausedRun();
    s.send({ type: 'response.append', input: [{ type: 'custom_tool_call_output', call_id: 'call_zzz', output: 'x' }] });
    expect((await s.next('error')).error).toMatchObject({ code: 'unknown_call_id', param: 'input[0].call_id' });
    s.send({ type: 'response.append', input: [{ type: 'custom_tool_call_output', call_id: 'call_a', output: 'ran a' }] });
    // A repeat of it is dropped as a repeated function_call_output is; the other call answered by a shell output.
    s.send({ type: 'response.append', input: [{ type: 'custom_tool_call_output', call_id: 'call_a', output: 'ran a' }, { type: 'shell_call_output', call_id: 'call_b', output: [] }] });
    const done = await s.next('response.completed');
    expect(done.response.output.at(-1)?.type).toBe('message');
    expect(server.services.records.get(done.response.id)!.counters).toMatchObject({ appends: 2, duplicate_items_dropped: 1 });
  });

  it('a partial append keeps the run paused until every call is answered', async () => {
    const { s, server } = await pausedRun();
    s.send({ type: 'response.append', input: [out('call_a')] });
    // A second bad append proves the run is still paused (not no_paused_response).
    s.send({ type: 'response.append', input: [out('call_zzz')] });
    expect((await s.next('error')).error.code).toBe('unknown_call_id');
    expect(s.all('response.output_item.added')).toHaveLength(2);
    s.send({ type: 'response.append', input: [out('call_b')] });
    const done = await s.next('response.completed');
    expect(done.response.status).toBe('completed');
    const rec = server.services.records.get(done.response.id)!;
    expect(rec.counters['appends']).toBe(2);
  });

  it('re-sent function_call items and repeated outputs are de-duplicated', async () => {
    const { s, done } = await pausedRun();
    const calls = done.response.output.filter((i) => i.type === 'function_call');
    // Codex <= 0.99 re-sends [function_call, function_call_output] pairs.
    s.send({ type: 'response.append', input: [calls[0], out('call_a'), calls[0], out('call_a')] });
    s.send({ type: 'response.append', input: [calls[1], out('call_b'), out('call_a')] });
    const end = await s.next('response.completed');
    const timing = await s.next('llr:timing');
    expect(end.response.status).toBe('completed');
    expect(timing.counters['duplicate_items_dropped']).toBe(5);
    expect(timing.counters['items_tokenized']).toBe(1 + 2);
  });

  it('response.cancel while paused → cancelled, usage recorded once', async () => {
    const { s, server } = await pausedRun();
    s.send({ type: 'response.cancel' });
    const end = await s.next('response.cancelled');
    expect(end.response.status).toBe('cancelled');
    expect(end.response.usage?.output_tokens).toBeGreaterThan(0);
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(end.response.id)).toBe(1);
  });

  it('response.cancel with nothing in flight → no_response_in_flight', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send({ type: 'response.cancel' });
    expect((await s.next('error')).error.code).toBe('no_response_in_flight');
  });

  // Found by an outside attack: the refusal said "There is no response in flight on this connection to cancel."
  // while one was (paused), only under another id.
  it('response.cancel naming another id while a run is paused → no_response_in_flight naming that id; the run stays paused', async () => {
    const { s, done } = await pausedRun();
    s.send({ type: 'response.cancel', response_id: 'resp_other' });
    const err = await s.next('error');
    expect(err.error).toMatchObject({ code: 'no_response_in_flight', param: 'response_id' });
    expect(err.error.message).toContain("'resp_other'");
    expect(err.error.message).toContain(done.response.id);
    expect(err.error.message).not.toMatch(/There is no response in flight/);
    s.send({ type: 'response.append', input: [out('call_a'), out('call_b')] });
    expect((await s.next('response.completed')).response.id).toBe(done.response.id);
  });

  it('disconnect while paused → cancelled, every deferred settled, usage once', async () => {
    const { s, done, server } = await pausedRun();
    const id = done.response.id;
    s.ws.terminate();
    await server.ws.idle();
    await server.services.postWork.flush();
    const rec = server.services.records.get(id)!;
    expect(rec.status).toBe('cancelled');
    expect(server.services.ledger.countFor(id)).toBe(1);
  });

  it('disconnect while streaming → cancelled, usage once', async () => {
    // A slow model (real clock) so the socket closes mid-stream, gated on the first delta.
    const { url, server } = await testServer({
      policy: scriptPolicy([{ text: 'word '.repeat(400) }]),
      modelSettings: { tokensPerSecond: 2000, ttftBaseMs: 0, prefillTokensPerSecond: Infinity },
    });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const delta = await s.next('response.output_text.delta');
    const created = s.all('response.created')[0]!;
    expect(delta.delta.length).toBeGreaterThan(0);
    s.ws.terminate();
    await server.ws.idle();
    await server.services.postWork.flush();
    const rec = server.services.records.get(created.response.id)!;
    expect(rec.status).toBe('cancelled');
    expect(rec.usage!.output_tokens).toBeGreaterThan(0);
    expect(rec.usage!.output_tokens).toBeLessThan(400);
    expect(server.services.ledger.countFor(created.response.id)).toBe(1);
  });

  it('the pause timeout runs on the injected clock: its sleep ending times the pause out', async () => {
    const HOUR = 3_600_000;
    let fire!: () => void;
    const fired = new Promise<void>((r) => (fire = r));
    let asked!: () => void;
    const sleeping = new Promise<void>((r) => (asked = r));
    const clock: Clock = { ...realClock, sleep: (ms, signal) => (ms === HOUR ? (asked(), fired) : realClock.sleep(ms, signal)) };
    const { url } = await testServer({ policy: twoCalls(), clock, limits: { pauseTimeoutMs: HOUR } });
    const s = await RawSocket.longLived(url);
    s.send(create());
    await s.next('response.done');
    await sleeping;
    fire();
    const end = await s.next('response.incomplete');
    expect(end.response).toMatchObject({ incomplete_details: null, llr_incomplete_reason: 'pause_timeout' });
  });

  /** A clock whose long sleeps (the pause watch's) wait for the test to end them; `nextSleep()` resolves when one starts. */
  function heldSleeps() {
    const sleeps: Array<{ ms: number; end: () => void; signal: AbortSignal | undefined }> = [];
    let started: (() => void) | null = null;
    const clock: Clock = {
      ...realClock,
      sleep: (ms, signal) => {
        if (ms < 60_000) return realClock.sleep(ms, signal);
        return new Promise<void>((resolve, reject) => {
          sleeps.push({ ms, end: resolve, signal });
          signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
          const wake = started;
          started = null;
          wake?.();
        });
      },
    };
    const nextSleep = () => new Promise<void>((r) => (started = r));
    return { sleeps, clock, nextSleep };
  }
  const callThenCall = () =>
    scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] },
      { calls: [{ name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
      { text: 'all done' },
    ]);

  it('one pause watch spans the pauses of a run: its sleep ending in a later pause waits out the rest of that pause', async () => {
    const HOUR = 3_600_000;
    const { sleeps, clock, nextSleep } = heldSleeps();
    const { url } = await testServer({ policy: callThenCall(), clock, limits: { pauseTimeoutMs: HOUR } });
    const s = await RawSocket.longLived(url);
    let started = nextSleep();
    s.send(create());
    await s.next('response.done');
    await started;
    expect(sleeps.map((x) => x.ms)).toEqual([HOUR]);
    s.send({ type: 'response.append', input: [out('call_a')] });
    await s.next('response.done');
    // The second pause starts no timer of its own.
    expect(sleeps).toHaveLength(1);
    started = nextSleep();
    sleeps[0]!.end();
    // The first pause's timeout ending in the second pause does not time it out: the watch sleeps on for the rest.
    await started;
    expect(sleeps).toHaveLength(2);
    expect(sleeps[1]!.ms).toBeGreaterThan(0);
    expect(sleeps[1]!.ms).toBeLessThanOrEqual(HOUR);
    sleeps[1]!.end();
    const end = await s.next('response.incomplete');
    expect(end.response).toMatchObject({ incomplete_details: null, llr_incomplete_reason: 'pause_timeout' });
    expect(s.all('response.output_item.done').map((e) => e.item.type)).toEqual(['function_call', 'function_call']);
  });

  it('a run that ends aborts its pause watch: no sleep is left behind', async () => {
    const { sleeps, clock, nextSleep } = heldSleeps();
    const { url } = await testServer({ policy: callThenCall(), clock, limits: { pauseTimeoutMs: 3_600_000 } });
    const s = await RawSocket.longLived(url);
    const started = nextSleep();
    s.send(create());
    await s.next('response.done');
    await started;
    s.send({ type: 'response.append', input: [out('call_a')] });
    await s.next('response.done');
    s.send({ type: 'response.append', input: [out('call_b')] });
    await s.next('response.completed');
    expect(sleeps).toHaveLength(1);
    expect(sleeps[0]!.signal?.aborted).toBe(true);
  });

  it('paused longer than the pause timeout → incomplete', async () => {
    const { url, server } = await testServer({ policy: twoCalls(), limits: { pauseTimeoutMs: 50 } });
    const s = await RawSocket.longLived(url);
    s.send(create());
    await s.next('response.done');
    const end = await s.next('response.incomplete');
    expect(end.response.status).toBe('incomplete');
    expect(end.response).toMatchObject({ incomplete_details: null, llr_incomplete_reason: 'pause_timeout' });
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(end.response.id)).toBe(1);
    // The connection goes on: a new run works.
    s.send({ type: 'response.append', input: [out('call_a')] });
    expect((await s.next('error')).error.code).toBe('no_paused_response');
  });

  // Found by a state-machine fuzzer: an append still being processed (a large one is checked and tokenised in
  // slices) when its run was cancelled is refused once it is done, by then maybe while the next create's run is
  // in flight; its error was numbered by the connection's own counter in the middle of that response's
  // stream, so the client saw two events numbered 2 (the error, then the response's output_item.added).
  it("an append refused after its run ended is numbered in the stream of the response then in flight", async () => {
    const policy = scriptPolicy([
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] },
      { calls: [{ name: 'lookup', arguments: { q: 'c' }, call_id: 'call_c' }] },
      { text: 'done' },
    ]);
    const { url } = await testServer({ policy });
    const s = await RawSocket.longLived(url);
    s.send(create());
    await s.next('response.done');
    let refuse!: (err: Error) => void;
    const spy = vi.spyOn(ResponseRun.prototype, 'append').mockImplementation(() => new Promise<readonly string[] | null>((_, reject) => (refuse = reject)));
    s.send({ type: 'response.append', input: [out('call_a')] });
    s.send({ type: 'response.cancel' });
    await s.next('response.cancelled');
    s.send(create());
    const second = await s.next('response.done');
    expect(spy).toHaveBeenCalledTimes(1);
    refuse(new WireError('no_paused_response', 'ended while the append was being processed'));
    const err = await s.next('error');
    expect(err.error.code).toBe('no_paused_response');
    expect(err.sequence_number).toBe(second.sequence_number + 1);
    spy.mockRestore();
    s.send({ type: 'response.append', input: [out('call_c')] });
    const end = await s.next('response.completed');
    expect(end.sequence_number).toBeGreaterThan(err.sequence_number);
  });

  // Found by a state-machine fuzzer: a large append whose run was cancelled while its checks ran was still
  // tokenised in full (seconds of CPU for 16 MiB) before being refused, while the connection's next responses ran.
  it('an append whose run ends while it is checked is refused without being tokenised', async () => {
    const { s } = await pausedRun();
    let run!: ResponseRun;
    let appended!: Promise<readonly string[] | null>;
    const orig = ResponseRun.prototype.append;
    const spy = vi.spyOn(ResponseRun.prototype, 'append').mockImplementation(function (this: ResponseRun, ...args: Parameters<ResponseRun['append']>) {
      run = this;
      // The run ends while the append's checks run, as its safety scan starts (a cancel reaching the run at that
      // point: the connection hands a frame over a turn after the one before it, so a cancel sent right after the
      // append can land anywhere in the append's work, and the test would depend on where).
      const count = this.metrics.count.bind(this.metrics);
      vi.spyOn(this.metrics, 'count').mockImplementation((name, n) => {
        count(name, n);
        if (name === 'safety_incremental') this.stop('cancelled', 'cancelled by the client');
      });
      appended = orig.apply(this, args);
      return appended;
    });
    const big = Array.from({ length: 60_000 }, (_, i) => `word${i}`).join(' ');
    s.send({ type: 'response.append', input: [out('call_a', big), out('call_b', big)] });
    await s.next('response.cancelled');
    await expect(appended).rejects.toMatchObject({ code: 'no_paused_response' });
    spy.mockRestore();
    expect(run.metrics.counters.items_tokenized).toBe(1);
  });

  it('shutdown while paused → incomplete (server_shutdown), post-inference once, socket closed 1001', async () => {
    const { s, done, server } = await pausedRun();
    const closing = server.close();
    const end = await s.next('response.incomplete');
    expect(end.response.id).toBe(done.response.id);
    expect(end.response).toMatchObject({ incomplete_details: null, llr_incomplete_reason: 'server_shutdown' });
    await closing;
    expect((await s.closed).code).toBe(1001);
    expect(server.services.ledger.countFor(end.response.id)).toBe(1);
    expect(server.services.records.get(end.response.id)).toMatchObject({ status: 'incomplete', post_done: true });
  });

  // Found by an outside attack: an append still being processed when shutdown (or the lifetime limit) ended its run
  // was refused after the session had closed, so the refusal was dropped and the socket closed 1001 without it:
  // the client could not tell whether its outputs were applied. Over HTTP such an append was already answered.
  it('shutdown while an append is being processed: the append is answered (no_paused_response) before the close', async () => {
    const { s, done, server } = await pausedRun();
    let refuse!: (err: Error) => void;
    let closing: Promise<void> | null = null;
    const spy = vi.spyOn(ResponseRun.prototype, 'append').mockImplementation(() => {
      closing = server.close();
      return new Promise<readonly string[] | null>((_, reject) => (refuse = reject));
    });
    s.send({ type: 'response.append', input: [out('call_a')] });
    const end = await s.next('response.incomplete');
    expect(end.response.id).toBe(done.response.id);
    // The append's checks finish after its run ended: refused, as the engine does.
    refuse(new WireError('no_paused_response', `Response '${done.response.id}' ended while the append was being processed; nothing was appended.`));
    const err = await s.next('error');
    expect(err.error.code).toBe('no_paused_response');
    expect(typeof err.sequence_number).toBe('number');
    spy.mockRestore();
    await closing;
    expect((await s.closed).code).toBe(1001);
    expect(server.services.ledger.countFor(done.response.id)).toBe(1);
  });

  it('a frame over the size limit closes the socket with 1009', async () => {
    const { url } = await testServer({ limits: { maxFrameBytes: 1024 } });
    const s = await RawSocket.longLived(url);
    s.send(create({ input: 'x'.repeat(4096) }));
    expect((await s.closed).code).toBe(1009);
  });

  // Found by the long-form chaos fuzzer (`--seed 1304`): an append over the frame limit to a paused run closed the
  // socket 1009 from inside the `ws` library's reader, and the run's client never got its terminal event.
  it('a frame over the limit to a paused run: the error and the terminal event come before the 1009', async () => {
    const { url, server } = await testServer({ policy: twoCalls(), limits: { maxFrameBytes: 4096 } });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const done = await s.next('response.done');
    s.send({ type: 'response.append', input: [out('call_a', 'x'.repeat(8192)), out('call_b')] });
    const closed = await s.closed;
    expect(closed.code).toBe(1009);
    const tail = s.events.slice(s.events.indexOf(done) + 1);
    expect(tail.map((e) => e.type)).toEqual(['error', 'response.incomplete']);
    const [err, end] = tail as [Extract<typeof tail[number], { type: 'error' }>, Extract<typeof tail[number], { type: 'response.incomplete' }>];
    expect(err.error.code).toBe('payload_too_large');
    expect(err.error.message).toContain('4096 bytes');
    expect(end.response.id).toBe(done.response.id);
    expect(end.response.llr_incomplete_reason).toBe('payload_too_large');
    expect(end.sequence_number).toBe(err.sequence_number! + 1);
    expect(server.services.ledger.countFor(done.response.id)).toBe(1);
  });

  it('a frame over the limit with no run in flight: one error, then the 1009', async () => {
    const { url } = await testServer({ limits: { maxFrameBytes: 1024 } });
    const s = await RawSocket.longLived(url);
    s.send(create({ input: 'x'.repeat(4096) }));
    expect((await s.closed).code).toBe(1009);
    expect(s.events.map((e) => [e.type, e.type === 'error' ? e.error.code : null])).toEqual([['error', 'payload_too_large']]);
  });

  it('text that is not UTF-8 to a paused run: the error and the terminal event come before the 1007', async () => {
    const { url } = await testServer({ policy: twoCalls() });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const done = await s.next('response.done');
    s.ws.send(Buffer.from([0x7b, 0xff, 0x7d]), { binary: false });
    expect((await s.closed).code).toBe(1007);
    const tail = s.events.slice(s.events.indexOf(done) + 1);
    expect(tail.map((e) => (e.type === 'error' ? e.error.code : e.type))).toEqual(['invalid_websocket_frame', 'response.incomplete']);
  });

  it('a close frame whose reason is not UTF-8: the error says so (it spoke of a text message none was sent), then the 1007', async () => {
    const { url } = await testServer({ policy: twoCalls() });
    const s = await RawSocket.longLived(url);
    s.send(create());
    await s.next('response.done');
    s.ws.close(1000, Buffer.from([0xff]));
    expect((await s.closed).code).toBe(1007);
    const err = s.events.find((e) => e.type === 'error');
    expect(err?.type === 'error' && err.error.message).toBe('A WebSocket text message or close reason is not valid UTF-8; the connection closes (1007).');
  });

  // Outside attack: `ws` 8.23 closes a message of more than 16,384 fragments with 1008, a code the connection did not
  // take for a peer's mistake, so a paused run's client got the bare close: no error, no terminal event.
  it('a message in more fragments than --max-message-fragments to a paused run: the error and the terminal event come before the 1008', async () => {
    const { url, server } = await testServer({ policy: twoCalls(), limits: { maxMessageFragments: 8 } });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const done = await s.next('response.done');
    const sendIn = (n: number, text: string) => {
      for (let i = 0; i < n; i++) s.ws.send(i === 0 ? text : '', { binary: false, fin: i === n - 1 });
    };
    // At the limit the message is taken: call_a's output is applied (a partial append: still paused)…
    sendIn(8, JSON.stringify({ type: 'response.append', input: [out('call_a')] }));
    // …and one fragment more is the peer's mistake.
    sendIn(9, JSON.stringify({ type: 'response.append', input: [out('call_b')] }));
    expect((await s.closed).code).toBe(1008);
    const tail = s.events.slice(s.events.indexOf(done) + 1);
    expect(tail.map((e) => (e.type === 'error' ? e.error.code : e.type))).toEqual(['invalid_websocket_frame', 'response.incomplete']);
    const err = tail[0] as Extract<typeof tail[number], { type: 'error' }>;
    expect(err.error.message).toContain('more than 8 frames');
    const end = tail[1] as Extract<typeof tail[number], { type: 'response.incomplete' }>;
    expect(end.response.id).toBe(done.response.id);
    expect(end.response.llr_incomplete_reason).toBe('invalid_websocket_frame');
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(done.response.id)).toBe(1);
    const input = (await (await fetch(`${url}/v1/responses/${done.response.id}/input_items?order=asc`)).json()) as { data: Array<{ type: string; call_id?: string }> };
    expect(input.data.filter((i) => i.type === 'function_call_output').map((i) => i.call_id)).toEqual(['call_a']);
  });

  // Outside attack: the `ws` library echoes a peer's close frame with its code through the same `close`, so a client
  // closing with 1009 (a server message too big for it), 1002 or 1007 was told it had sent an oversized or malformed
  // frame, and its run ended incomplete (payload_too_large), where any other close from the peer cancels it.
  it.each([1009, 1002, 1007, 1008])('a peer that closes with %d is not told it broke the protocol: its run ends as for any close', async (code) => {
    const { url, server } = await testServer({ policy: twoCalls() });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const done = await s.next('response.done');
    s.ws.close(code, 'bye');
    expect((await s.closed).code).toBe(code);
    expect(s.events.slice(s.events.indexOf(done) + 1)).toEqual([]);
    await server.services.postWork.flush();
    const rec = server.services.records.page({ owner: null, limit: 10, after: null, order: 'desc' }).data;
    expect(rec.map((r) => [r.response_id, r.status, r.counters.billing_records])).toEqual([[done.response.id, 'cancelled', 1]]);
  });

  it('a frame limit past 2^31 bytes is not cut to its low 32 bits by the ws library (2^32 + 1024 was 1024)', async () => {
    const { url } = await testServer({ limits: { maxFrameBytes: 2 ** 32 + 1024 } });
    const s = await RawSocket.longLived(url);
    s.send(create({ input: 'x'.repeat(4096) }));
    expect((await s.next('response.created')).type).toBe('response.created');
  });

  it('a frame limit of 0 refuses frames as HTTP refuses bodies (the ws library read 0 as no limit)', async () => {
    const { url } = await testServer({ limits: { maxFrameBytes: 0 } });
    const s = await RawSocket.longLived(url);
    s.send(create());
    expect((await s.closed).code).toBe(1009);
  });

  it('a client that stops reading is dropped once nothing leaves (--send-stall-timeout-ms) and its run cancelled', async () => {
    const { url, server } = await testServer({
      policy: scriptPolicy([{ text: 'all work and no play '.repeat(60_000) }]),
      limits: { maxSendBufferBytes: 256 * 1024, sendStallTimeoutMs: 200 },
    });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const created = await s.next('response.created');
    // Stop reading: the server's unsent bytes pile up to half the limit, where the run waits for the reader until the stall timeout.
    (s.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    await server.ws.idle();
    const rec = server.services.records.get(created.response.id)!;
    expect(rec.status).toBe('cancelled');
    expect(rec.usage!.output_tokens).toBeLessThan(300_000);
  });

  it('a binary frame → binary_frame error, socket stays open', async () => {
    const { s } = await pausedRun();
    s.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    expect((await s.next('error')).error.code).toBe('binary_frame');
    await stillOpen(s);
  });

  it('flagged input fails the request with content_flagged', async () => {
    const { url } = await testServer();
    const s = await RawSocket.longLived(url);
    s.send(create({ input: 'my key is AKIAABCDEFGHIJKLMNOP ok' }));
    const err = await s.next('error');
    expect(err.error.code).toBe('content_flagged');
    expect(err.error.param).toBe('input[0]');
  });

  it('a flagged append is refused and the run stays paused', async () => {
    const { s } = await pausedRun();
    s.send({ type: 'response.append', input: [out('call_a', 'ghp_' + 'a'.repeat(36))] });
    expect((await s.next('error')).error.code).toBe('content_flagged');
    s.send({ type: 'response.append', input: [out('call_a'), out('call_b')] });
    expect((await s.next('response.completed')).response.status).toBe('completed');
  });

  it('more tool calls than one pause may hold → the run fails with too_many_pending_calls', async () => {
    const calls = ['x', 'y', 'z'].map((q) => ({ name: 'lookup', arguments: { q }, call_id: `call_${q}` }));
    const { logger, lines, waitFor } = captureLogger();
    const { url, server } = await testServer({ policy: scriptPolicy([{ calls }]), limits: { maxPendingCalls: 2 }, logger });
    const s = await RawSocket.longLived(url);
    s.send(create());
    const err = await s.next('error');
    expect(err).toMatchObject({ status: 500, error: { type: 'server_error', code: 'too_many_pending_calls' } });
    // A bound a client can provoke: a warning with its code, never an error line with a stack trace.
    expect((await waitFor((l) => l.code === 'too_many_pending_calls')).level).toBe(40);
    expect(lines.filter((l) => (l.level as number) >= 50)).toEqual([]);
    const failed = await s.next('response.failed');
    // The Response's error.code is from the spec's closed enum; the precise code is the error event's.
    expect(failed.response.error).toMatchObject({ code: 'server_error', message: err.error.message });
    await server.services.postWork.flush();
    expect(server.services.ledger.countFor(failed.response.id)).toBe(1);
  });

  it('max_output_tokens is a budget for the whole long-lived run', async () => {
    const args = JSON.stringify({ q: 'a' });
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: args, call_id: 'call_a' }] }, { text: 'a long final answer that will not fit in the budget of output tokens this run was given, however it is counted' }]);
    const budget = Math.max(16, tokenPieces(args).length + 3);
    const { url } = await testServer({ policy });
    const s = await RawSocket.longLived(url);
    s.send(create({ max_output_tokens: budget }));
    await s.next('response.done');
    s.send({ type: 'response.append', input: [out('call_a')] });
    const end = await s.next('response.incomplete');
    expect(end.response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(end.response.usage?.output_tokens).toBe(budget);
    expect(end.response.output.at(-1)).toMatchObject({ type: 'message', status: 'incomplete' });
  });

  it('a create during a run is queued and runs after it', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: {}, call_id: 'call_q' }] }, { text: 'first' }, { text: 'second' }]);
    const { url } = await testServer({ policy });
    const s = await RawSocket.longLived(url);
    s.send(create());
    await s.next('response.done');
    s.send(create({ input: 'again' }));
    s.send({ type: 'response.append', input: [out('call_q')] });
    const first = await s.next('response.completed');
    const second = await s.next('response.completed');
    expect(first.response.id).not.toBe(second.response.id);
    expect(second.response.output[0]?.type === 'message' && second.response.output[0].content[0]?.text).toBe('second');
    expect(policy.remaining()).toBe(0);
  });

  it('refuses a missing or wrong API key at the upgrade with 401', async () => {
    const { url } = await testServer({ apiKeys: ['sekret'] });
    await expect(RawSocket.longLived(url)).rejects.toMatchObject({ status: 401 });
    await expect(
      RawSocket.connect(url, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA, Authorization: 'Bearer wrong' } }),
    ).rejects.toMatchObject({ status: 401 });
    const ok = await RawSocket.connect(url, { headers: { 'OpenAI-Beta': LONG_LIVED_BETA, Authorization: 'Bearer sekret' } });
    ok.send(create());
    expect((await ok.next('response.created')).response.status).toBe('in_progress');
  });
});

describe('item_reference on the long-lived designs', () => {
  // Found by an outside attack: an item_reference in a long-lived create or append was rendered as nothing, the
  // item it names silently missing from the run, while the other designs replace it by the stored item or refuse it.
  it('a create and an append replace each item_reference by the stored item it names; an unknown one is item_not_found and the run stays paused', async () => {
    const policy = scriptPolicy([
      { text: 'noted' },
      { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }, { name: 'lookup', arguments: { q: 'b' }, call_id: 'call_b' }] },
      { text: 'all done' },
    ]);
    const { url, server } = await testServer({ policy });
    // A stored response (any design): its input message is an item a reference can name.
    const stored = (await (
      await fetch(`${url}/v1/responses`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'sim-model', input: [{ type: 'message', id: 'msg_note', role: 'user', content: 'remember the note' }], tools: [tool] }),
      })
    ).json()) as { status: string };
    expect(stored.status).toBe('completed');
    const s = await RawSocket.longLived(url);
    s.send(create({ input: [{ type: 'item_reference', id: 'msg_note' }, { type: 'message', role: 'user', content: 'go' }] }));
    const paused = await s.next('response.done');
    const id = paused.response.id as string;
    // Unknown: refused, named, the run still paused.
    s.send({ type: 'response.append', input: [{ type: 'item_reference', id: 'msg_nowhere' }, out('call_a')] });
    const refused = await s.next('error');
    expect(refused.error).toMatchObject({ code: 'item_not_found', param: 'input[0].id' });
    expect(refused.error.message).toContain('msg_nowhere');
    // Known: replaced by the stored message, with the outputs the pause waits for.
    s.send({ type: 'response.append', input: [{ type: 'item_reference', id: 'msg_note' }, out('call_a'), out('call_b')] });
    const end = await s.next('response.completed');
    expect(end.response.id).toBe(id);
    s.dispose();
    await server.services.postWork.flush();
    const items = (await (await fetch(`${url}/v1/responses/${id}/input_items?order=asc`)).json()) as { data: Array<Record<string, unknown>> };
    const notes = items.data.filter((i) => i['type'] === 'message' && JSON.stringify(i['content']).includes('remember the note'));
    expect(notes).toHaveLength(2);
    expect(items.data.some((i) => i['type'] === 'item_reference')).toBe(false);
    // A create naming an unknown item is refused before it starts.
    const t = await RawSocket.longLived(url);
    t.send(create({ input: [{ type: 'item_reference', id: 'msg_nowhere' }] }));
    expect((await t.next('error')).error).toMatchObject({ code: 'item_not_found', param: 'input[0].id' });
    t.dispose();
  });
});

describe("an append's item_reference to an item of its own run", () => {
  // The run is stored when it ends, so its own items (its input, its output items, what was appended) were not found
  // by a reference in its appends: item_not_found, though the run holds them. A reference is the item it names, as
  // any reference is: a call the run already holds is dropped as a re-sent one, a message is there twice.
  it('is the item the run holds: its input message (twice in the context) and its own function_call (dropped as held); an id of nothing is still item_not_found', async () => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'all done' }]);
    const { url, server } = await testServer({ policy });
    const s = await RawSocket.longLived(url);
    s.send(create({ input: [{ type: 'message', id: 'msg_go', role: 'user', content: 'go' }] }));
    const call = await s.next('response.output_item.done');
    const paused = await s.next('response.done');
    const id = paused.response.id as string;
    s.send({ type: 'response.append', input: [{ type: 'item_reference', id: 'msg_elsewhere' }, out('call_a')] });
    expect((await s.next('error')).error).toMatchObject({ code: 'item_not_found', param: 'input[0].id' });
    s.send({ type: 'response.append', input: [{ type: 'item_reference', id: call.item.id }, { type: 'item_reference', id: 'msg_go' }, out('call_a')] });
    expect((await s.next('response.completed')).response.id).toBe(id);
    s.dispose();
    await server.services.postWork.flush();
    const items = (await (await fetch(`${url}/v1/responses/${id}/input_items?order=asc`)).json()) as { data: Array<Record<string, unknown>> };
    expect(items.data.map((i) => i['type'])).toEqual(['message', 'message', 'function_call_output']);
    expect(JSON.stringify(items.data[1]!['content'])).toContain('go');
  });
});

describe('item_reference expansion is bounded as it is resolved', () => {
  // Outside attack: 2,000 references to one stored 4 MB message (a 90 KB request) were each parsed to a fresh copy
  // before any budget was checked: 8 GB, and the server died out of memory. Now refused at the first reference past
  // the context's byte budget, the store read no further.
  it.each(['http', 'long-lived create', 'long-lived append'] as const)('%s: references past --max-context-bytes are refused context_length_exceeded, the store read no further', async (how) => {
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);
    const { url, server } = await testServer({ policy, limits: { maxContextBytes: 1_000_000 } });
    const big = 'x '.repeat(100_000);
    const stored = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: [{ type: 'message', id: 'msg_big', role: 'user', content: big }], generate: false }),
    });
    expect(stored.status).toBe(200);
    const refs = Array.from({ length: 200 }, () => ({ type: 'item_reference', id: 'msg_big' }));
    const reads = server.services.store.counters.reads;
    let error: { code?: string; param?: string | null } | undefined;
    if (how === 'http') {
      const r = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: refs, store: false, generate: false }) });
      error = ((await r.json()) as { error?: typeof error }).error;
      expect(r.status).toBe(400);
    } else {
      const s = await RawSocket.longLived(url);
      if (how === 'long-lived create') s.send(create({ input: refs }));
      else {
        s.send(create({ input: 'go', tools: [tool] }));
        await s.next('response.done');
        s.send({ type: 'response.append', input: refs });
      }
      error = (await s.next('error')).error;
      s.dispose();
    }
    expect(error).toMatchObject({ code: 'context_length_exceeded' });
    // Five fit in the budget: the sixth is refused, no more read.
    expect(server.services.store.counters.reads - reads).toBeLessThan(10);
  });
});

describe("an append's references stop resolving when its run ends", () => {
  // The attack's note: an append's 30,000 references went on being read from the store, in slices, after its run was
  // cancelled, up to ~2.5 s of CPU, only to be refused. The run's signal now stops the resolution.
  it('a cancel while an append resolves 30,000 references stops the reads; the append is refused no_paused_response', async () => {
    const n = 30_000;
    const policy = scriptPolicy([{ calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_a' }] }, { text: 'done' }]);
    const { url, server } = await testServer({ policy });
    // generate: false, no model call: the script's first step is the long-lived run's.
    const stored = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: Array.from({ length: n }, (_, i) => ({ type: 'message', role: 'user', id: `msg_${i}`, content: 'x' })), generate: false }),
    });
    expect(stored.status).toBe(200);
    const s = await RawSocket.longLived(url);
    s.send(create({ input: 'go', tools: [tool] }));
    await s.next('response.done');
    const reads = server.services.store.counters.reads;
    // Frames are read in order, and the append's resolution yields between slices: the cancel lands during it.
    s.send({ type: 'response.append', input: [...Array.from({ length: n }, (_, i) => ({ type: 'item_reference', id: `msg_${i}` })), out('call_a')] });
    s.send({ type: 'response.cancel' });
    // The append's refusal and the run's end may come in either order.
    const end = await s.next('response.cancelled', { skipErrors: true });
    const refused = s.all('error')[0] ?? (await s.next('error'));
    expect(end.response.status).toBe('cancelled');
    expect(refused.error.code).toBe('no_paused_response');
    expect(server.services.store.counters.reads - reads).toBeLessThan(n);
    s.dispose();
  });
});
