/**
 * Every kind of workload file the reader accepts replays to the end through
 * every design: each fixture in test/fixtures/workloads/ (Codex rollouts of
 * each variant, and two hand-written neutral-format files, the second unlike
 * any Codex run: unicode and emoji everywhere, parallel calls with messages
 * between them, hidden reasoning, a zero-call user turn, failing tools, an
 * interrupted turn and a compaction) is loaded as
 * `llr serve --workload` loads it, served by a real server on port 0 whose
 * model replays it, and driven by the bench's replay driver. A replay that
 * goes off script fails loudly (ReplayError), so "completes" here means the
 * model made exactly the recorded calls, user turn by user turn, including
 * the new conversation a compaction starts.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { replayRun } from '../../src/bench/replay.js';
import { CLIENT_PROTOCOLS } from '../../src/client/index.js';
import { replayPolicy, visibleTokens } from '../../src/model/policies.js';
import { loadWorkloadFile } from '../../src/workload/load.js';
import { flatModelTurns } from '../../src/workload/replayable.js';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const DIR = fileURLToPath(new URL('../fixtures/workloads/', import.meta.url));
const FIXTURES = readdirSync(DIR).filter((f) => f.endsWith('.jsonl') || f.endsWith('.json')).sort();

describe('every fixture replays to the end through every design', () => {
  it('has a fixture of each kind', () => {
    expect(FIXTURES).toEqual([
      'other-agent-browser.json',
      'other-agent.json',
      'rollout-aborted.jsonl',
      'rollout-compacted.jsonl',
      'rollout-desktop-event-only.jsonl',
      'rollout-exec-no-usage.jsonl',
      'rollout-ide-multi-turn.jsonl',
      'rollout-subagent.jsonl',
    ]);
  });

  for (const file of FIXTURES) {
    for (const design of CLIENT_PROTOCOLS) {
      it(`${file} over ${design}`, async () => {
        const w = loadWorkloadFile(DIR + file);
        const turns = flatModelTurns(w);
        const { url } = await testServer({ policy: replayPolicy(turns) });
        const sample = await replayRun({ design, url, workload: w, nonce: `[${file} ${design}]`, toolFactor: 0, timeoutMs: 20_000 });
        expect(sample.turns).toHaveLength(turns.length);
        expect(sample.turns.map((t) => t.user_turn)).toEqual(w.userTurns.flatMap((u, ui) => u.modelTurns.map(() => ui)));
        // Output tokens decoded = what the workload says each call decodes (recorded or inferred; at least the visible ones).
        const expected = turns.reduce((n, t) => n + Math.max(t.output_tokens ?? 0, visibleTokens(t.output)), 0);
        expect(sample.counters['output_tokens']).toBe(expected);
      });
    }
  }
});

describe('a replay that a server bound ends', () => {
  it('says why the run ended incomplete (the pause timeout), on both long-lived designs', async () => {
    const file = DIR + 'other-agent.json';
    const w = loadWorkloadFile(file);
    const { url } = await testServer({ policy: replayPolicy(flatModelTurns(w)), limits: { pauseTimeoutMs: 30 } });
    for (const design of ['long-lived', 'long-lived-http'] as const) {
      // The first tool takes 12 ms recorded, 120 ms at ×10: longer than the server waits for it.
      const err = await replayRun({ design, url, workload: w, nonce: design, toolFactor: 10, timeoutMs: 20_000 }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toBe(`${design}: user turn 1 ended incomplete (pause_timeout) at model call 1`);
    }
  });
});

describe('a conversation past the recorded run', () => {
  it('fails with a message that says so, not a bare server error, over HTTP (openai SDK) and WebSocket mode', async () => {
    const w = loadWorkloadFile(DIR + 'other-agent.json');
    const { url } = await testServer({ policy: replayPolicy(flatModelTurns(w)) });
    // The recorded run is over after its final answer; the user asks once more.
    const input = [
      { role: 'user' as const, content: 'hi' },
      { role: 'assistant' as const, content: 'You are welcome.' },
      { role: 'user' as const, content: 'And now?' },
    ];
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    await expect(client.responses.create({ model: 'sim', input })).rejects.toThrow(/^500 The replayed run has 4 model calls and this conversation is past its last one/);
    const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.send(JSON.stringify({ type: 'response.create', model: 'sim', input }));
    const failed = await new Promise<{ response: { error: { message: string } } }>((resolve) =>
      ws.on('message', (data) => {
        const e = JSON.parse(String(data)) as { type: string };
        if (e.type === 'response.failed') resolve(e as never);
      }),
    );
    ws.close();
    expect(failed.response.error.message).toMatch(/^The replayed run has 4 model calls/);
  });

  it('is logged as a warning with its code, without a stack trace: a client asking again and again cannot fill the log with stacks', async () => {
    const w = loadWorkloadFile(DIR + 'other-agent.json');
    const log = captureLogger();
    const { url } = await testServer({ policy: replayPolicy(flatModelTurns(w)), logger: log.logger });
    const input = [
      { role: 'user' as const, content: 'hi' },
      { role: 'assistant' as const, content: 'You are welcome.' },
      { role: 'user' as const, content: 'And now?' },
    ];
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0 });
    for (let i = 0; i < 3; i++) await expect(client.responses.create({ model: 'sim', input })).rejects.toThrow(/^500 The replayed run/);
    const failed = log.lines.filter((l) => l.msg === 'run failed at a bound');
    expect(failed).toHaveLength(3);
    for (const l of failed) expect(l).toMatchObject({ level: 40, code: 'server_error' });
    expect(log.lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(JSON.stringify(log.lines)).not.toContain('"stack"');
  });
});

describe('a recorded tool time past what a Node timer takes', () => {
  it('is waited (the run meets its deadline), not answered at once with a TimeoutOverflowWarning', async () => {
    const w = loadWorkloadFile(DIR + 'other-agent.json');
    // 2^31 ms (24.9 days; a rollout whose clock jumped, a call left waiting for approval over days): Node fires a
    // timer that long after 1 ms.
    const toolOutputs = Object.fromEntries(Object.entries(w.toolOutputs).map(([id, o]) => [id, { output: o.output, duration_ms: id === 'rf_1' ? 2 ** 31 : 0 }]));
    const long = { ...w, toolOutputs };
    const { url } = await testServer({ policy: replayPolicy(flatModelTurns(long)) });
    const err = await replayRun({ design: 'ws', url, workload: long, nonce: 'long tool', toolFactor: 1, timeoutMs: 300 }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/did not finish within 300 ms/);
  });
});
