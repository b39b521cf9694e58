/**
 * One scenario list run against every design through the one agent-loop
 * driver: the same agent code, the same simulated model (auto policy, same
 * seed), and the same final transcript whether the run is one long-lived
 * Response, a chain of WebSocket-mode responses, or independent HTTP
 * requests (full input, or previous_response_id against the store).
 */
import { describe, expect, it } from 'vitest';
import { CLIENT_PROTOCOLS, connectClient, ServerError, type AgentClient, type ClientProtocol } from '../../src/client/index.js';
import type { FunctionCall, InputItem } from '../../src/protocol/objects.js';
import { testServer } from '../helpers/server.js';

const execTool = {
  type: 'function',
  name: 'exec_command',
  description: 'Run a shell command.',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
};

const fakeShell = (call: FunctionCall) => {
  const { cmd } = JSON.parse(call.arguments) as { cmd: string };
  return `ran: ${cmd}\nexit 0`;
};

/** The transcript without what legitimately differs per design: item ids, statuses, call id spelling. */
function normalize(items: InputItem[]): unknown[] {
  const callIds = new Map<string, string>();
  const callId = (id: unknown) => {
    const s = String(id);
    if (!callIds.has(s)) callIds.set(s, `call_${callIds.size + 1}`);
    return callIds.get(s);
  };
  return items.map((item) => {
    const { id: _id, status: _status, ...rest } = item as unknown as Record<string, unknown>;
    if ('call_id' in rest) rest['call_id'] = callId(rest['call_id']);
    if (rest['type'] === 'message' && Array.isArray(rest['content'])) {
      rest['content'] = (rest['content'] as Array<Record<string, unknown>>).map((p) => ({ type: p['type'], text: p['text'] }));
    }
    return rest;
  });
}

interface Outcome {
  transcript: unknown[];
  statuses: string[];
  responses: number;
}

type Scenario = (client: AgentClient) => Promise<Outcome>;

async function turn(client: AgentClient, input: string, opts: { parallel?: boolean } = {}) {
  const run = client.run(
    { model: 'sim-model', input, tools: [execTool], instructions: 'You are a test agent.', parallel_tool_calls: opts.parallel ?? false },
    fakeShell,
  );
  const response = await run;
  return { run, response };
}

const scenarios: Record<string, Scenario> = {
  'text answer': async (c) => {
    const { run, response } = await turn(c, 'Say something about protocols.');
    expect(response.output.every((i) => i.type === 'message')).toBe(true);
    return { transcript: normalize(run.transcript), statuses: [response.status], responses: run.responses.length };
  },
  'one tool call': async (c) => {
    const { run, response } = await turn(c, 'run:\n$ echo hello');
    const calls = run.transcript.filter((i) => i.type === 'function_call');
    expect(calls).toHaveLength(1);
    return { transcript: normalize(run.transcript), statuses: [response.status], responses: run.responses.length };
  },
  'parallel tool calls': async (c) => {
    const { run, response } = await turn(c, 'run both:\n$ echo one\n$ echo two', { parallel: true });
    expect(run.transcript.filter((i) => i.type === 'function_call_output')).toHaveLength(2);
    return { transcript: normalize(run.transcript), statuses: [response.status], responses: run.responses.length };
  },
  'a user follow-up after a finished run': async (c) => {
    const first = await turn(c, 'first:\n$ echo a');
    const second = await turn(c, 'and then:\n$ echo b');
    // The follow-up continues the conversation: it holds the first turn.
    expect(second.run.transcript.length).toBeGreaterThan(first.run.transcript.length);
    return {
      transcript: normalize(second.run.transcript),
      statuses: [first.response.status, second.response.status],
      responses: first.run.responses.length + second.run.responses.length,
    };
  },
  'a long conversation': async (c) => {
    const lines = Array.from({ length: 20 }, (_, i) => `$ echo step-${i}`).join('\n');
    const { run, response } = await turn(c, `do each step in order:\n${lines}`);
    expect(run.transcript.filter((i) => i.type === 'function_call')).toHaveLength(20);
    return { transcript: normalize(run.transcript), statuses: [response.status], responses: run.responses.length };
  },
  'error: invalid request': async (c) => {
    const err = await c.run({ model: 'sim-model', input: [{ type: 'message', role: 'wizard', content: 'x' } as unknown as InputItem] }, fakeShell).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServerError);
    const e = err as ServerError;
    return { transcript: [e.code, e.param], statuses: [], responses: 0 };
  },
  'error: flagged input': async (c) => {
    const err = await c.run({ model: 'sim-model', input: 'my key: AKIAABCDEFGHIJKLMNOP' }, fakeShell).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServerError);
    const e = err as ServerError;
    return { transcript: [e.code, e.param], statuses: [], responses: 0 };
  },
};

async function runScenario(name: string, protocol: ClientProtocol): Promise<Outcome> {
  const { url } = await testServer({ seed: 11 });
  const client = await connectClient(protocol, url);
  try {
    return await scenarios[name]!(client);
  } finally {
    await client.close();
  }
}

/**
 * Each scenario's outcome over the reference design (the first listed), run
 * once on its own server by whichever test needs it first, so the tests pass
 * in any order (`--sequence.shuffle`) and alone (`-t`).
 */
const references = new Map<string, Promise<Outcome>>();
function reference(name: string): Promise<Outcome> {
  let p = references.get(name);
  if (!p) {
    p = runScenario(name, CLIENT_PROTOCOLS[0]!);
    references.set(name, p);
  }
  return p;
}

describe.each(Object.keys(scenarios))('%s', (name) => {
  it.each(CLIENT_PROTOCOLS)('over %s', async (protocol) => {
    const outcome = await runScenario(name, protocol);
    expect(outcome.statuses.every((s) => s === 'completed')).toBe(true);
    if (protocol === 'long-lived' || protocol === 'long-lived-http') {
      // One Response per user turn, however many tool calls.
      expect(outcome.responses).toBe(outcome.statuses.length);
    }
    // Every design ends with the same transcript as the reference design.
    expect(outcome.transcript).toEqual((await reference(name)).transcript);
  });
});
