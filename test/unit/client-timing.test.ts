/**
 * The clients' handling of the optional `llr:timing` event: `AgentRun.telemetry()`
 * settles once every response has its timing or none can come, and
 * `TimingRoutes` holds a bounded number of responses waiting for theirs.
 * No sockets.
 */
import { describe, expect, it } from 'vitest';
import { AgentRun, TimingRoutes } from '../../src/client/driver.js';
import { TIMING_EVENT, type TimingEvent } from '../../src/protocol/events.js';
import type { Response } from '../../src/protocol/objects.js';

const response = (id: string) => ({ id, status: 'completed' }) as Response;
const timing = (id: string): TimingEvent => ({ type: TIMING_EVENT, sequence_number: 9, response_id: id, mode: 'ws', spans: [], totals: {}, counters: {}, switches: {} });

describe('AgentRun.telemetry', () => {
  it('resolves at once for a run that did not ask for timings', async () => {
    const run = new AgentRun(false);
    run.responses.push(response('r1'));
    run.resolve(response('r1'));
    expect(await run.telemetry()).toEqual([]);
  });

  it('waits for the run to end and a timing per response', async () => {
    const run = new AgentRun(true);
    let settled = false;
    const t = run.telemetry().then((x) => {
      settled = true;
      return x;
    });
    run.responses.push(response('r1'), response('r2'));
    run.push(timing('r1'));
    run.resolve(response('r2'));
    await Promise.resolve();
    expect(settled).toBe(false);
    run.push(timing('r2'));
    expect((await t).map((x) => x.response_id)).toEqual(['r1', 'r2']);
  });

  it('ends when no more can come (the connection closed)', async () => {
    const run = new AgentRun(true);
    run.responses.push(response('r1'));
    run.resolve(response('r1'));
    const t = run.telemetry();
    run.endTelemetry();
    expect(await t).toEqual([]);
  });
});

describe('TimingRoutes', () => {
  it('delivers by response id, once, and gives up the oldest past its bound', async () => {
    const routes = new TimingRoutes(2);
    const runs = ['a', 'b', 'c'].map((id) => {
      const run = new AgentRun(true);
      run.responses.push(response(id));
      run.resolve(response(id));
      routes.expect(id, run);
      return run;
    });
    // 'a' was evicted when 'c' arrived: its telemetry ends without a timing.
    expect(await runs[0]!.telemetry()).toEqual([]);
    expect(routes.deliver(timing('a'))).toBe(false);
    expect(routes.deliver(timing('b'))).toBe(true);
    expect(routes.deliver(timing('b'))).toBe(false);
    expect((await runs[1]!.telemetry()).map((t) => t.response_id)).toEqual(['b']);
    routes.close();
    expect(await runs[2]!.telemetry()).toEqual([]);
  });
});
