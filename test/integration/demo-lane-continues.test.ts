/**
 * The demo's wire log shows `previous_response_id` on a continuation because the design's entry says its client
 * continues by id (`continues_by_id`), not because the design is named `ws`: a lane of another name whose client
 * chains by id (here the stored HTTP client) shows it too, and a lane that does not chain never does.
 */
import { describe, expect, it } from 'vitest';
import { DEMO_DESIGNS, type DemoDesign } from '../../src/demo/designs.js';
import { Lane } from '../../src/demo/lane.js';
import type { DemoMessage, WireMessage } from '../../src/demo/messages.js';
import { buildWorkload } from '../../src/demo/workloads.js';
import { testServer } from '../helpers/server.js';

async function outWire(design: DemoDesign): Promise<string[]> {
  const { url, server } = await testServer();
  const msgs: DemoMessage[] = [];
  const signal = new AbortController().signal;
  // Two `$ ` lines: the default model calls the shell tool twice, so the run continues twice after its tools.
  const workload = buildWorkload({ kind: 'prompt', text: 'Look.\n$ ls\n$ pwd' }, { maxToolCalls: 10, maxPromptBytes: 4096 }, '');
  const lane = new Lane({
    design,
    model: 'sim-model',
    url,
    apiKey: undefined,
    workload,
    toolTime: 'none',
    gate: { blocks: () => false, wait: () => null },
    records: server.services.records,
    signal,
    emit: (m) => msgs.push(m),
  });
  try {
    await lane.connect('sim-model', workload);
    const done = await lane.run(performance.now());
    expect(done.responses).toBeGreaterThan(0);
  } finally {
    await lane.close();
  }
  return msgs.filter((m): m is WireMessage => m.type === 'wire' && m.dir === 'out').map((m) => m.detail);
}

describe('demo wire log: previous_response_id', () => {
  it('is shown for a design whose entry continues by id, whatever its name', async () => {
    const chained: DemoDesign = { ...DEMO_DESIGNS.find((d) => d.id === 'http')!, id: 'http-chained', client: 'http-stored', continues_by_id: true };
    const out = await outWire(chained);
    expect(out).toHaveLength(3);
    expect(out[0]).not.toMatch(/previous_response_id=/);
    expect(out.slice(1).every((d) => /^previous_response_id=resp_/.test(d))).toBe(true);
  });

  it('is not shown for a design whose entry does not continue by id', async () => {
    const out = await outWire(DEMO_DESIGNS.find((d) => d.id === 'http')!);
    expect(out).toHaveLength(3);
    expect(out.some((d) => d.includes('previous_response_id='))).toBe(false);
  });

  it('the table states it for every design: only ws continues by id', () => {
    expect(Object.fromEntries(DEMO_DESIGNS.map((d) => [d.id, d.continues_by_id]))).toEqual({ 'long-lived': false, ws: true, http: false, 'long-lived-http': false });
  });
});
