/**
 * The demo's pieces without sockets: lane models (each lane its own speed
 * and model, bounded, released), the race request at the edge, and the
 * design list the page is built from.
 */
import { describe, expect, it } from 'vitest';
import { DEMO_DESIGNS } from '../../src/demo/designs.js';
import { DemoModels } from '../../src/demo/models.js';
import { parseRaceRequest, speedSettings } from '../../src/demo/request.js';
import { codexLabel, DEFAULT_DEMO_WORKLOAD } from '../../src/demo/workloads.js';
import { scriptPolicy } from '../../src/model/policies.js';
import type { Model, ModelEvent, ModelRequest } from '../../src/model/types.js';
import { WireError } from '../../src/protocol/errors.js';
import { CLIENT_PROTOCOLS } from '../../src/client/index.js';

const clock = { now: () => 0, sleep: async () => {} };
const limits = { maxToolCalls: 5, maxPromptBytes: 100, workloadPath: '/nonexistent/codex.jsonl' };

function request(model: string): ModelRequest {
  return {
    model,
    settings: speedSettings('instant', undefined),
    instructions: null,
    items: [{ type: 'message', role: 'user', content: 'hi' }],
    tools: [],
    tool_choice: 'auto',
    parallel_tool_calls: true,
    promptTokens: [1, 2, 3],
    maxOutputTokens: null,
  };
}

async function text(model: Model, req: ModelRequest): Promise<string> {
  let out = '';
  for await (const e of model.sample(req, new AbortController().signal) as AsyncIterable<ModelEvent>) if (e.type === 'text.delta') out += e.delta;
  return out;
}

describe('DemoModels', () => {
  it('gives each lane its own deployment and model, and leaves other names to the server', async () => {
    const models = new DemoModels(clock, 1, 2);
    const a = models.register('llr-demo-r1-ws', speedSettings('65', { tokensPerSecond: 1, ttftBaseMs: 40, prefillTokensPerSecond: 900 }), scriptPolicy([{ text: 'lane a' }]));
    const b = models.register('llr-demo-r1-http', speedSettings('4000', undefined), scriptPolicy([{ text: 'lane b' }]));
    expect(models.resolve(a.model)?.settings).toEqual({ tokensPerSecond: 65, ttftBaseMs: 40, prefillTokensPerSecond: 900 });
    expect(models.resolve(b.model)?.settings.tokensPerSecond).toBe(4000);
    expect(models.resolve('sim-model')).toBeUndefined();
    const base: Model = {
      async *sample() {
        yield { type: 'message.start' };
        yield { type: 'text.delta', delta: 'server' };
        yield { type: 'message.end' };
      },
    };
    const wrapped = models.wrap(base);
    expect(await text(wrapped, request(a.model))).toBe('lane a');
    expect(await text(wrapped, request(b.model))).toBe('lane b');
    expect(await text(wrapped, request('sim-model'))).toBe('server');
    expect(() => models.register('llr-demo-r2-ws', speedSettings('65', undefined), scriptPolicy([{ text: 'x' }]))).toThrow(/too many/);
    a.release();
    expect(models.resolve(a.model)).toBeUndefined();
    expect(await text(wrapped, request(a.model))).toBe('server');
    expect(models.size).toBe(1);
  });

  it('refuses names outside its prefix and a name twice', () => {
    const models = new DemoModels(clock, 1, 4);
    expect(() => models.register('sim-model', speedSettings('65', undefined), scriptPolicy([{ text: 'x' }]))).toThrow(TypeError);
    models.register('llr-demo-r1-ws', speedSettings('65', undefined), scriptPolicy([{ text: 'x' }]));
    expect(() => models.register('llr-demo-r1-ws', speedSettings('65', undefined), scriptPolicy([{ text: 'x' }]))).toThrow(/already/);
  });
});

describe('race requests', () => {
  it('turns the page choices into a workload, a speed and a schedule', () => {
    const r = parseRaceRequest({ workload: 'synthetic', tool_calls: 3, speed: '1000', tool_time: 'recorded' }, limits);
    expect(r).toMatchObject({ speed: '1000', toolTime: 'recorded', step: false, order: 'together' });
    expect(r.workload.model_calls).toBe(4);
    expect(r.workload.parallel_tool_calls).toBe(true);
    const p = parseRaceRequest({ workload: 'prompt', prompt: 'x\n$ ls\n  $ pwd\nnot $ this', speed: 'instant' }, limits);
    expect(p.workload.model_calls).toBe(3);
    expect(parseRaceRequest({ workload: 'prompt', prompt: '$  ls\n$ \tpwd\n$ ', speed: 'instant' }, limits).workload.model_calls).toBe(3);
    expect(p.workload.toolResult('call_1', '{"cmd":"ls"}')?.output).toMatch(/`ls` was not run/);
  });

  it('calls a --demo-workload file by its name, not the bundled run (outside attack atk89 F5)', () => {
    expect(codexLabel(DEFAULT_DEMO_WORKLOAD, true)).toBe('The bundled Codex CLI run');
    expect(codexLabel('/data/runs/long-400.json', true)).toBe('The run of long-400.json');
    expect(codexLabel('/data/runs/long-400.json', false)).toBe('the run of long-400.json');
  });

  it('names the field at fault', () => {
    const param = (body: unknown) => {
      try {
        parseRaceRequest(body, limits);
      } catch (err) {
        expect(err).toBeInstanceOf(WireError);
        return (err as WireError).param;
      }
      return 'accepted';
    };
    expect(param({ workload: 'synthetic', tool_calls: 6, speed: 'instant' })).toBe('tool_calls');
    expect(param({ workload: 'synthetic', tool_calls: 2.5, speed: 'instant' })).toBe('tool_calls');
    expect(param({ workload: 'synthetic', tool_calls: 2 })).toBe('speed');
    expect(param({ workload: 'codex', speed: 'instant' })).toBe('workload');
    expect(param({ workload: 'prompt', prompt: 'x'.repeat(101), speed: 'instant' })).toBe('prompt');
    expect(param({ workload: 'prompt', prompt: Array(7).fill('$ ls').join('\n'), speed: 'instant' })).toBe('prompt');
    expect(param({ workload: 'prompt', prompt: 5, speed: 'instant' })).toBe('prompt');
    // Counted as the model reads them: `$  ls` (two spaces) and `$ \tls` are commands it runs.
    expect(param({ workload: 'prompt', prompt: Array(6).fill('$  ls').join('\n'), speed: 'instant' })).toBe('prompt');
    expect(param({ workload: 'prompt', prompt: Array(6).fill('$ \tls').join('\n'), speed: 'instant' })).toBe('prompt');
    expect(param({ workload: 'synthetic', tool_calls: 2, speed: 'instant', tool_time: 'slow' })).toBe('tool_time');
    expect(param(null)).toBe(null);
    // A typo or an unknown field is refused naming it (it was ignored, the default taken in its place: atk50 F4),
    // and null is not "absent".
    expect(param({ workload: 'synthetic', tool_calls: 2, speed: 'instant', tooltime: 'recorded' })).toBe('tooltime');
    expect(param({ workload: 'synthetic', tool_calls: 2, speed: 'instant', step: null })).toBe('step');
    expect(param({ workload: 'synthetic', tool_calls: 2, speed: 'instant', order: null })).toBe('order');
    expect(param({ workload: 'synthetic', tool_calls: 2, speed: 'instant', tool_time: null })).toBe('tool_time');
    // Another workload's field is refused, not ignored (atk106 F6).
    expect(param({ workload: 'codex', tool_calls: 2, speed: 'instant' })).toBe('tool_calls');
    expect(param({ workload: 'prompt', prompt: 'hi', tool_calls: 2, speed: 'instant' })).toBe('tool_calls');
    expect(param({ workload: 'synthetic', tool_calls: 2, prompt: 'hi', speed: 'instant' })).toBe('prompt');
    expect(param({ workload: 'synthetic', tool_calls: 2, speed: 'instant' })).toBe('accepted');
  });

  it('keeps the server’s time to first token and prefill rate, except for the instant model', () => {
    const base = { tokensPerSecond: 1000, ttftBaseMs: 150, prefillTokensPerSecond: 20_000 };
    expect(speedSettings('65', base)).toEqual({ tokensPerSecond: 65, ttftBaseMs: 150, prefillTokensPerSecond: 20_000 });
    expect(speedSettings('instant', base)).toEqual({ tokensPerSecond: Infinity, ttftBaseMs: 0, prefillTokensPerSecond: Infinity });
  });
});

describe('the design list', () => {
  it('has unique ids, each driven by one of the project’s clients', () => {
    expect(new Set(DEMO_DESIGNS.map((d) => d.id)).size).toBe(DEMO_DESIGNS.length);
    for (const d of DEMO_DESIGNS) expect(CLIENT_PROTOCOLS).toContain(d.client);
  });
});
