/**
 * A workload past the JSON bounds of a request (a tool with more keys in one object, or more schema nodes, than the
 * defaults take; a history of more items than `--max-context-items`) is read, and `llr serve --workload`'s fit
 * (src/workload/fit.ts) raises each bound so every design replays it. Outside attack atk84 F1: such a tool read, then
 * every replay was refused at its first call (`object_above_max_properties`); F2: such a history was refused by the
 * reader with the default, whatever flag was given, though the server takes it with the flag.
 */
import { describe, expect, it } from 'vitest';
import { replayRun } from '../../src/bench/replay.js';
import { CLIENT_PROTOCOLS } from '../../src/client/index.js';
import { DEFAULT_LIMITS, type Limits } from '../../src/engine/services.js';
import { replayPolicy } from '../../src/model/policies.js';
import { fitToFootprint } from '../../src/workload/fit.js';
import { parseWorkload } from '../../src/workload/load.js';
import { flatModelTurns, replayFootprint } from '../../src/workload/replayable.js';
import { testServer } from '../helpers/server.js';

/** A neutral workload: a tool of `keys` properties (each a schema object) and a first input of `items` messages. */
function wide(keys: number, items: number) {
  const properties = Object.fromEntries(Array.from({ length: keys }, (_, i) => [`p${i}`, { type: 'string' }]));
  const input = Array.from({ length: items }, (_, i) => ({ type: 'message', role: i % 2 === 0 ? 'user' : 'assistant', content: `m${i}` }));
  const text = JSON.stringify({
    llr_workload: 1,
    tools: [{ type: 'function', name: 'wide', parameters: { type: 'object', properties } }],
    userTurns: [{ input, modelTurns: [{ output: [{ type: 'function_call', name: 'wide', arguments: '{}', call_id: 'c1' }] }, { output: [{ type: 'message', text: 'done' }] }] }],
    toolOutputs: { c1: { output: 'ok' } },
  });
  return parseWorkload(text, 'wide.json', 'test');
}

describe('a workload past the JSON bounds of a request', () => {
  it('is read, and its footprint raises --max-json-keys, --max-schema-nodes, --max-json-containers and --max-context-items', () => {
    const w = wide(DEFAULT_LIMITS.maxJsonKeys + 1, DEFAULT_LIMITS.maxContextItems + 1);
    const fp = replayFootprint(w);
    expect(fp.jsonKeys).toBe(DEFAULT_LIMITS.maxJsonKeys + 1);
    expect(fp.schemaNodes).toBe(DEFAULT_LIMITS.maxJsonKeys + 3);
    expect(fp.contextItems).toBeGreaterThan(DEFAULT_LIMITS.maxContextItems);
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, fp);
    expect(limits).toMatchObject({ maxJsonKeys: fp.jsonKeys, maxContextItems: fp.contextItems + 1000 });
    // Set by flag: kept.
    const set: Partial<Limits> = { maxJsonKeys: 5, maxSchemaNodes: 5, maxJsonContainers: 5 };
    fitToFootprint(set, fp);
    expect(set).toMatchObject({ maxJsonKeys: 5, maxSchemaNodes: 5, maxJsonContainers: 5 });
  });

  it('a tool past the defaults\' keys and schema nodes replays on every design once fitted', async () => {
    const w = wide(DEFAULT_LIMITS.maxSchemaNodes + 500, 2);
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, replayFootprint(w));
    expect(limits.maxJsonKeys).toBeGreaterThan(DEFAULT_LIMITS.maxJsonKeys);
    expect(limits.maxSchemaNodes).toBeGreaterThan(DEFAULT_LIMITS.maxSchemaNodes);
    const turns = flatModelTurns(w);
    for (const design of CLIENT_PROTOCOLS) {
      const { url } = await testServer({ policy: replayPolicy(turns), limits });
      const sample = await replayRun({ design, url, workload: w, nonce: `[wide ${design}]`, toolFactor: 0, timeoutMs: 30_000 });
      expect(sample.turns).toHaveLength(turns.length);
    }
  });

  it('a history past the defaults\' items replays on every design once fitted', async () => {
    const w = wide(2, DEFAULT_LIMITS.maxContextItems + 1);
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, replayFootprint(w));
    const turns = flatModelTurns(w);
    for (const design of CLIENT_PROTOCOLS) {
      const { url } = await testServer({ policy: replayPolicy(turns), limits });
      const sample = await replayRun({ design, url, workload: w, nonce: `[long ${design}]`, toolFactor: 0, timeoutMs: 60_000 });
      expect(sample.turns).toHaveLength(turns.length);
    }
  });

  it('counts items as a client sends them back: a message with its text part, a tool output with its parts (atk86 F1, F2)', () => {
    const user = { type: 'message', role: 'user', content: 'go' };
    const partsOutput = { type: 'function_call_output', call_id: 'c0', output: [{ type: 'input_text', text: 'a' }, { type: 'input_text', text: 'b' }] };
    const w = parseWorkload(
      JSON.stringify({
        llr_workload: 1,
        userTurns: [
          { input: [{ type: 'function_call', name: 'f', arguments: '{}', call_id: 'c0' }, partsOutput, user], modelTurns: [{ output: [{ type: 'message', text: 'one' }] }] },
          { input: [user], modelTurns: [{ output: [{ type: 'message', text: 'two' }] }] },
          { input: [user], modelTurns: [{ output: [{ type: 'message', text: 'three' }] }] },
        ],
      }),
      'parts.json',
      'test',
    );
    // At the last call: the call (1), its output and its two parts (3), three user messages (3), two messages sent
    // back with their text parts (4).
    expect(replayFootprint(w).contextItems).toBe(11);
  });

  it('a history of 130,000 items replays (the clients added it to their transcripts as arguments of one call: RangeError; atk86 F4)', async () => {
    const w = wide(2, 130_000);
    const limits: Partial<Limits> = {};
    fitToFootprint(limits, replayFootprint(w));
    const turns = flatModelTurns(w);
    const { url } = await testServer({ policy: replayPolicy(turns), limits });
    const sample = await replayRun({ design: 'ws', url, workload: w, nonce: '[130k ws]', toolFactor: 0, timeoutMs: 60_000 });
    expect(sample.turns).toHaveLength(turns.length);
  });
});
