/**
 * The real client: Codex CLI 0.107.0 (the last release that speaks the
 * long-lived protocol) runs `codex exec` against the server. The simulated
 * model asks it to run a `$ echo` line; Codex runs it, appends the output with
 * `response.append`, and prints the final answer. Because Codex silently
 * falls back to HTTP on any WebSocket failure, the test proves the protocol
 * from the server's own records, not from Codex's exit code.
 */
import { describe, expect, it } from 'vitest';
import { codexExec, completedItems } from '../helpers/codex.js';
import { testServer } from '../helpers/server.js';

describe('Codex CLI 0.107.0 over the long-lived protocol', () => {
  it('runs the command the model asks for in one long-lived response', async () => {
    const { server, port } = await testServer({ apiKeys: ['test-key'] });
    const marker = `llr-${process.pid}`;
    const result = await codexExec('0.107.0', port, 'long-lived', `Please run this:\n$ echo ${marker}`);
    expect(result.code, result.stderr).toBe(0);

    const commands = completedItems(result, 'command_execution');
    expect(commands).toHaveLength(1);
    expect(String(commands[0]!['command'])).toContain(`echo ${marker}`);
    expect(String(commands[0]!['aggregated_output'])).toContain(marker);
    const answer = completedItems(result, 'agent_message').at(-1);
    expect(String(answer?.['text'])).toContain(marker);

    await server.ws.idle();
    const records = server.services.records.list();
    expect(records.filter((r) => r.protocol === 'http')).toEqual([]);
    const ll = records.filter((r) => r.protocol === 'long-lived');
    expect(ll).toHaveLength(1);
    expect(ll[0]).toMatchObject({ status: 'completed' });
    expect(ll[0]!.counters).toMatchObject({ pauses: 1, appends: 1, render_full: 1, model_calls: 2 });
  }, 90_000);
});
