/**
 * The `lean_pause_event` switch (off by default): a long-lived pause's
 * `response.done` carries only what a client needs to continue; by default
 * the full snapshot, as before. The run, its items and its final response
 * are the same either way.
 */
import { describe, expect, it } from 'vitest';
import { LongLivedClient } from '../../src/client/long-lived.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { testServer } from '../helpers/server.js';

const shellTool = {
  type: 'function',
  name: 'exec_command',
  description: 'run a command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
};

async function pauses(
  lean: boolean | undefined,
  opts: Parameters<typeof testServer>[0] = {},
  input = 'please run:\n$ echo one\n$ echo two',
): Promise<{ done: Array<Extract<ServerEvent, { type: 'response.done' }>>; output: number }> {
  const { url } = await testServer({ ...(lean !== undefined && { switches: { lean_pause_event: lean } }), ...opts });
  const client = await LongLivedClient.connect(url);
  try {
    const run = client.run({ model: 'sim-model', input, tools: [shellTool], parallel_tool_calls: false }, () => 'ok\n');
    const done: Array<Extract<ServerEvent, { type: 'response.done' }>> = [];
    for await (const e of run) if (e.type === 'response.done') done.push(e);
    const response = await run;
    expect(response.status).toBe('completed');
    return { done, output: response.output.length };
  } finally {
    await client.close();
  }
}

describe('lean_pause_event', () => {
  it('is off by default: each pause carries the full response snapshot', async () => {
    const { done } = await pauses(undefined);
    expect(done).toHaveLength(2);
    expect(done[1]!.response.output).toHaveLength(2);
    expect(done[1]!.response.tools).toHaveLength(1);
    expect(done[1]!.response.pending_tool_calls).toHaveLength(1);
  });

  it('on: each pause carries the lean response, and the run is otherwise the same', async () => {
    const full = await pauses(false);
    const lean = await pauses(true);
    expect(lean.output).toBe(full.output);
    expect(lean.done).toHaveLength(2);
    for (const e of lean.done) {
      expect(Object.keys(e.response).sort()).toEqual(['created_at', 'id', 'model', 'object', 'pending_tool_calls', 'previous_response_id', 'status', 'usage']);
      expect(e.response.status).toBe('in_progress');
      expect(e.response.pending_tool_calls).toHaveLength(1);
    }
    expect(JSON.stringify(lean.done[1]).length).toBeLessThan(JSON.stringify(full.done[1]).length);
  });

  it('past --max-pause-snapshot-bytes of output a pause carries the lean response: each full one repeated everything so far (atk110 F1)', async () => {
    // Six commands of ~300 bytes each: every call's arguments hold one.
    const commands = Array.from({ length: 6 }, (_, i) => `$ echo ${String(i).repeat(300)}`).join('\n');
    const capped = await pauses(undefined, { limits: { maxPauseSnapshotBytes: 1000 } }, `please run:\n${commands}`);
    const full = await pauses(undefined, {}, `please run:\n${commands}`);
    expect(capped.output).toBe(full.output);
    expect(capped.done).toHaveLength(6);
    const shapes = capped.done.map((e) => (e.response.output === undefined ? 'lean' : `full:${e.response.output.length}`));
    // The first pauses' output (each call ~400 bytes as measured) is within 1,000 bytes; past it, lean.
    expect(shapes.slice(0, 2)).toEqual(['full:1', 'full:2']);
    expect(shapes.slice(3)).toEqual(['lean', 'lean', 'lean']);
    for (const e of capped.done.slice(3)) expect(e.response.pending_tool_calls).toHaveLength(1);
    expect(full.done.every((e) => e.response.output !== undefined)).toBe(true);
  });
});
