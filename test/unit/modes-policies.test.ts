/**
 * The design policies on their own, without a socket: what each one's
 * `plan()` does for a create (which pre-inference work, counted), what a
 * tool call does to the response, and what survives between responses —
 * nothing (HTTP: the store only), the connection's last response (ws), or a
 * refusal of `previous_response_id` (long-lived). Runs are real
 * `ResponseRun`s over the scripted model with an in-memory sink.
 */
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ResponseRun, type RunPlan } from '../../src/engine/run.js';
import type { Limits, Services, Switches } from '../../src/engine/services.js';
import { httpPlan } from '../../src/modes/http.js';
import { longLivedPolicy } from '../../src/modes/long-lived.js';
import type { ModePolicy, SessionInfo } from '../../src/modes/session.js';
import { wsModePolicy } from '../../src/modes/ws.js';
import { scriptPolicy, type ScriptStep } from '../../src/model/policies.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { WireError } from '../../src/protocol/errors.js';
import type { CreateParams } from '../../src/protocol/events.js';
import { parseClientFrame } from '../../src/protocol/parse.js';
import { INSTANT_MODEL, LlrServer } from '../../src/server.js';

const servers: LlrServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.services.store.close();
});

const tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const CALL: ScriptStep = { calls: [{ name: 'lookup', arguments: { q: 'a' }, call_id: 'call_1' }] };
const info: SessionInfo = { connection: 'conn_unit', owner: null, authSpan: null };

function services(steps: ScriptStep[], opts: { switches?: Partial<Switches>; limits?: Partial<Limits> } = {}): Services {
  const server = new LlrServer({ store: 'memory', logger: pino({ level: 'silent' }), modelSettings: INSTANT_MODEL, policy: scriptPolicy(steps), ...opts });
  servers.push(server);
  return server.services;
}

/** Create params as the edge parses them. */
function params(fields: Record<string, unknown>): CreateParams {
  const frame = parseClientFrame(JSON.stringify({ type: 'response.create', model: 'sim-model', tools: [tool], ...fields }));
  if (frame.type !== 'response.create') throw new Error('not a create');
  const { type: _type, ...rest } = frame;
  return rest;
}

async function plan(policy: ModePolicy, p: CreateParams, svc: Services): Promise<{ plan: RunPlan; counters: RunMetrics['counters'] }> {
  const metrics = new RunMetrics(svc.clock.now);
  const planned = await policy.plan(p, metrics);
  return { plan: planned, counters: metrics.counters };
}

/** Run a plan to its end, as the session does, and tell the policy. */
async function run(policy: ModePolicy | null, planned: RunPlan, svc: Services) {
  const r = new ResponseRun(planned, svc, () => {});
  const response = await r.done;
  await svc.postWork.flush();
  policy?.ended?.(r, planned);
  return response;
}

async function refusal(p: Promise<unknown>): Promise<WireError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WireError);
  return err as WireError;
}

describe('long-lived policy', () => {
  it('does the full work once and pauses on tool calls', async () => {
    const svc = services([]);
    const { plan: p, counters } = await plan(longLivedPolicy(svc, info), params({ input: 'go' }), svc);
    expect(p).toMatchObject({ protocol: 'long-lived', onToolCalls: 'pause', connection: 'conn_unit' });
    expect(counters).toMatchObject({ validate_full: 1, render_full: 1, safety_full: 1, route_full: 1, store_hydrations: 0 });
  });

  it('refuses previous_response_id: a follow-up is a fresh create or an append', async () => {
    const svc = services([]);
    const err = await refusal(plan(longLivedPolicy(svc, info), params({ input: 'go', previous_response_id: 'resp_x' }), svc));
    expect(err).toMatchObject({ code: 'invalid_value', param: 'previous_response_id' });
  });

  it('checks the context budget before rendering anything', async () => {
    const svc = services([], { limits: { maxContextItems: 1 } });
    const metrics = new RunMetrics(svc.clock.now);
    const two = [
      { type: 'message', role: 'user', content: 'one' },
      { type: 'message', role: 'user', content: 'two' },
    ];
    const err = await refusal(longLivedPolicy(svc, info).plan(params({ input: two }), metrics));
    expect(err.code).toBe('context_length_exceeded');
    expect(metrics.counters.render_full).toBe(0);
  });
});

describe('ws-mode policy', () => {
  it('a fresh create does the full work and ends the response at a tool call', async () => {
    const svc = services([]);
    const { plan: p, counters } = await plan(wsModePolicy(svc, info), params({ input: 'go' }), svc);
    expect(p).toMatchObject({ protocol: 'ws', onToolCalls: 'end' });
    expect(counters).toMatchObject({ validate_full: 1, render_full: 1, route_full: 1, store_hydrations: 0 });
  });

  it("a continuation from the connection's last response checks and tokenizes only the new items and reuses the route", async () => {
    const svc = services([CALL, { text: 'done' }]);
    const ws = wsModePolicy(svc, info);
    const first = await plan(ws, params({ input: 'go', store: false }), svc);
    const response = await run(ws, first.plan, svc);
    const next = await plan(ws, params({ input: [{ type: 'function_call_output', call_id: 'call_1', output: 'found' }], previous_response_id: response.id, store: false }), svc);
    expect(next.counters).toMatchObject({ validate_incremental: 1, validate_full: 0, rendered_cache_hits: 1, route_reused: 1, route_full: 0, store_hydrations: 0 });
    expect(next.plan.context.items.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call_output']);
    expect(next.plan.input.map((i) => i.type)).toEqual(['function_call_output']);
  });

  it('with the optimizations switched off a continuation redoes the work, and builds the same context', async () => {
    const svc = services([CALL], { switches: { incremental_checks: false, rendered_token_cache: false, routing_reuse: false } });
    const ws = wsModePolicy(svc, info);
    const response = await run(ws, (await plan(ws, params({ input: 'go', store: false }), svc)).plan, svc);
    const next = await plan(ws, params({ input: [{ type: 'function_call_output', call_id: 'call_1', output: 'found' }], previous_response_id: response.id, store: false }), svc);
    expect(next.counters).toMatchObject({ validate_full: 1, validate_incremental: 0, rendered_cache_hits: 0, render_full: 1, route_full: 1, route_reused: 0 });
    expect(next.plan.context.items.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call_output']);
  });

  it('a previous response not in the cache: not found when unstored, hydrated from the store when stored', async () => {
    const svc = services([CALL]);
    const stored = await run(null, (await plan(wsModePolicy(svc, info), params({ input: 'go', store: true }), svc)).plan, svc);
    // Another connection: its cache is empty.
    const other = wsModePolicy(svc, { ...info, connection: 'conn_other' });
    const unstored = await refusal(plan(other, params({ input: 'more', previous_response_id: stored.id, store: false }), svc));
    expect(unstored).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    const hydrated = await plan(other, params({ input: [{ type: 'function_call_output', call_id: 'call_1', output: 'x' }], previous_response_id: stored.id, store: true }), svc);
    expect(hydrated.counters).toMatchObject({ store_hydrations: 1, validate_full: 1, render_full: 1 });
    expect(hydrated.plan.context.items.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call_output']);
  });

  it('a failed continuation evicts the cached response', async () => {
    const svc = services([CALL]);
    const ws = wsModePolicy(svc, info);
    const response = await run(ws, (await plan(ws, params({ input: 'go', store: false }), svc)).plan, svc);
    const cont = params({ input: 'more', previous_response_id: response.id, store: false });
    ws.failed?.(cont, new WireError('invalid_value', 'refused', 'input'));
    const err = await refusal(plan(ws, cont, svc));
    expect(err.code).toBe('previous_response_not_found');
  });
});

describe('HTTP plan', () => {
  it('a fresh request: full work, the response ends at a tool call, post-inference inline', async () => {
    const svc = services([]);
    const metrics = new RunMetrics(svc.clock.now);
    const p = await httpPlan(params({ input: 'go' }), svc, metrics, null);
    expect(p).toMatchObject({ protocol: 'http', onToolCalls: 'end', postInference: 'inline', connection: null });
    expect(metrics.counters).toMatchObject({ validate_full: 1, render_full: 1, route_full: 1, store_hydrations: 0 });
  });

  it('a continuation loads the whole chain from the store and redoes all the work', async () => {
    const svc = services([CALL]);
    const metrics0 = new RunMetrics(svc.clock.now);
    const first = await run(null, await httpPlan(params({ input: 'go', store: true }), svc, metrics0, null), svc);
    const metrics = new RunMetrics(svc.clock.now);
    const p = await httpPlan(params({ input: [{ type: 'function_call_output', call_id: 'call_1', output: 'x' }], previous_response_id: first.id, store: true }), svc, metrics, null);
    expect(metrics.counters).toMatchObject({ store_hydrations: 1, validate_full: 1, render_full: 1, route_full: 1 });
    expect(metrics.counters.store_reads).toBeGreaterThanOrEqual(1);
    expect(p.context.items.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call_output']);
    expect(p.input.map((i) => i.type)).toEqual(['function_call_output']);
  });

  it('an unknown previous response is not found', async () => {
    const svc = services([]);
    const err = await refusal(httpPlan(params({ input: 'x', previous_response_id: 'resp_nope' }), svc, new RunMetrics(svc.clock.now), null));
    expect(err).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
  });
});
