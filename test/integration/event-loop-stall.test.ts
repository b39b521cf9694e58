/**
 * No request of any size or shape blocks the server's event loop for more
 * than 250 ms with the default limits (16 MiB bodies and frames): a 16 MiB
 * input and a 1 MB run without whitespace, over HTTP, as a WebSocket create
 * and as a long-lived append.
 *
 * The client runs in its own process (test/helpers/big-client.mjs), so
 * building and sending 16 MiB costs this process nothing; the server runs
 * here, where a timer chain measures every gap between loop turns. On a
 * shared machine a gap's wall time also counts the time the OS did not run
 * the process at all, so the assertion is on the CPU time the process used
 * during the gap — what the server itself held the loop for. The wall-clock
 * figures are reported in the failure message. No sleeps: the test waits for
 * the client process to exit.
 *
 * The transport reads a body or frame and `JSON.parse`s it in one go
 * (src/transport/, src/protocol/parse.ts): for 16 MiB that single turn costs
 * 220-390 ms of CPU on the loaded 2-vCPU sandbox (about half of it page
 * faults), which is the transport's to make incremental. So the 16 MiB cases
 * drive everything after the parse — the mode's plan (validate, render,
 * safety, route), the model and the engine's append — with parsed params on
 * this server, and the 1 MB cases go through the real sockets end to end.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';
import { ResponseRun, type RunPlan } from '../../src/engine/run.js';
import { httpPlan } from '../../src/modes/http.js';
import { resolveReferences } from '../../src/modes/hydrate.js';
import { longLivedPolicy } from '../../src/modes/long-lived.js';
import type { SessionInfo } from '../../src/modes/session.js';
import { wsModePolicy } from '../../src/modes/ws.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import type { ServerEvent } from '../../src/protocol/events.js';
import { eventJson, eventPieces, piecesLength } from '../../src/protocol/event-json.js';
import type { InputItem } from '../../src/protocol/objects.js';
import { DEFAULT_PARSE_CAPS, parseCreateBody } from '../../src/protocol/parse.js';
import type { LlrServer } from '../../src/server.js';
import { statTicks } from '../../src/bench/thread-cpu.js';

const STALL_LIMIT_MS = 250;
/**
 * The store cases' turn that inserts the stored row: one SQLite call for its 15 MB of JSON, which cannot be sliced
 * (one row, one transaction, before the terminal event). 71-120 ms of the loop thread's CPU when the file runs alone;
 * 300 and 376 ms in two fresh-clone CI runs of the whole suite (the second cores' work slows the memory-bound insert).
 * Twice the general bound; the stringify this case guards against held the loop ~0.6 s of CPU before it was sliced.
 */
const STORE_INSERT_STALL_LIMIT_MS = 2 * STALL_LIMIT_MS;
const MIB = 1024 * 1024;
const CLIENT = fileURLToPath(new URL('../helpers/big-client.mjs', import.meta.url));
const storeDir = mkdtempSync(join(tmpdir(), 'llr-loop-stall-'));
afterAll(() => rmSync(storeDir, { recursive: true, force: true }));

interface Stalls {
  /** Largest CPU time (user + system, ms) used between two loop turns. */
  maxCpuMs: number;
  /** Largest wall-clock gap between two loop turns, ms. */
  maxWallMs: number;
  turns: number;
}

/**
 * CPU time (ms) of the thread running the event loop, where it can be read (Linux: `/proc/thread-self`, read on the
 * calling thread; 10 ms ticks); else the whole process's. The process's counts V8's helper threads too (parallel
 * GC marking, the optimising compiler), which do not hold the loop: under the full suite's load one turn of the
 * ws store test read 376 ms of process CPU where it takes 71-84 ms alone.
 */
function loopCpuMs(): number {
  try {
    return statTicks(readFileSync('/proc/thread-self/stat', 'utf8')) * 10;
  } catch {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1000;
  }
}

/** Watch the loop until `work` settles: a 1 ms timer chain records each gap's wall time and the loop thread's CPU time. */
async function watchLoop<T>(work: Promise<T>): Promise<{ result: T; stalls: Stalls }> {
  const stalls: Stalls = { maxCpuMs: 0, maxWallMs: 0, turns: 0 };
  let lastWall = performance.now();
  let lastCpu = loopCpuMs();
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const wall = performance.now();
    const cpu = loopCpuMs();
    stalls.maxWallMs = Math.max(stalls.maxWallMs, wall - lastWall);
    stalls.maxCpuMs = Math.max(stalls.maxCpuMs, cpu - lastCpu);
    stalls.turns++;
    lastWall = wall;
    lastCpu = cpu;
    timer = setTimeout(tick, 1);
  };
  timer = setTimeout(tick, 1);
  try {
    return { result: await work, stalls };
  } finally {
    clearTimeout(timer);
    // The turn `work` settled in, up to here: its tick never came (the chain stops first), and a run's end (the store
    // write of a stored response) went unmeasured.
    tick();
    clearTimeout(timer);
  }
}

function runClient(url: string, how: 'http' | 'ws' | 'append', chars: number, kind: 'prose' | 'run'): Promise<{ status: string; input_tokens: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENT, url, how, String(chars), kind], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.on('error', reject);
    child.on('exit', (code) => {
      try {
        resolve(JSON.parse(out.trim().split('\n').at(-1)!) as { status: string; input_tokens: number | null });
      } catch {
        reject(new Error(`client exited ${code}: ${out}`));
      }
    });
  });
}

const WORDS = 'lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor ';
const prose = (chars: number) => WORDS.repeat(Math.floor(chars / WORDS.length));
/** 16 MiB of prose as two user messages: one text is at most the API's 10,485,760 characters (TEXT_MAX_CHARS). */
const bigInput = () => [
  { role: 'user', content: prose(8 * MIB - 2048) },
  { role: 'user', content: prose(8 * MIB - 2048) },
];
const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } }];
const info = (): SessionInfo => ({ connection: 'conn_test', owner: null, authSpan: null });

/** `minTurns`: the watch itself ran (a short run, such as one whose only large part is an echo, takes few turns). */
function assertStalls(stalls: Stalls, minTurns = 10, limitMs = STALL_LIMIT_MS): void {
  const figures = `longest stall: ${stalls.maxCpuMs.toFixed(0)} ms CPU, ${stalls.maxWallMs.toFixed(0)} ms wall, ${stalls.turns} turns`;
  expect(stalls.turns, figures).toBeGreaterThan(minTurns);
  expect(stalls.maxCpuMs, figures).toBeLessThan(limitMs);
}

/** Start a planned response on the server's services (the engine, as the transports start it). */
function run(server: LlrServer, plan: RunPlan, onEvent: (e: ServerEvent) => void = () => {}): ResponseRun {
  return new ResponseRun(plan, server.services, onEvent);
}

describe('the event loop stays responsive under large inputs', () => {
  it.each([
    ['http', 'http'],
    ['ws', 'ws'],
    ['long-lived append', 'append'],
  ] as const)('%s, 1 MB without whitespace, end to end: no loop turn holds the CPU for 250 ms', async (_name, how) => {
    const { url } = await testServer();
    const { result, stalls } = await watchLoop(runClient(url, how, 1_000_000, 'run'));
    expect(result.status).toBe('completed');
    expect(result.input_tokens).toBeGreaterThan(100_000);
    assertStalls(stalls);
  }, 180_000);

  /** The design's plan (HTTP's or a ws-mode create's) of `params`, then its run to the end. */
  async function planAndRun(server: Awaited<ReturnType<typeof testServer>>['server'], name: 'http' | 'ws', params: ReturnType<typeof parseCreateBody>) {
    const metrics = new RunMetrics();
    const plan = name === 'http' ? await httpPlan(params, server.services, metrics, null) : await wsModePolicy(server.services, info()).plan(params, metrics);
    return run(server, plan).done;
  }

  it.each(['http', 'ws'] as const)('%s plan and run of a 16 MiB input: no loop turn holds the CPU for 250 ms', async (name) => {
    const { server } = await testServer();
    const params = parseCreateBody({ model: 'sim-model', input: bigInput(), store: false });
    const work = planAndRun(server, name, params);
    const { result, stalls } = await watchLoop(work);
    expect(result.status).toBe('completed');
    expect(result.usage!.input_tokens).toBeGreaterThan(2_500_000);
    assertStalls(stalls);
  }, 180_000);

  it.each(['http', 'ws'] as const)('%s plan and run of a 16 MiB input with server-side compaction: no loop turn holds the CPU for 250 ms', async (name) => {
    // The compaction keeps the user message whole, so it seals and renders the whole 16 MiB again: it ran in one
    // turn (seconds of CPU; an outside attack held /health 2.5 s with a 13 MB context) while the compact endpoint's
    // same work yields.
    const { server } = await testServer();
    const params = parseCreateBody({ model: 'sim-model', input: bigInput(), store: false, context_management: [{ type: 'compaction', compact_threshold: 1 }] });
    const work = planAndRun(server, name, params);
    const { result, stalls } = await watchLoop(work);
    expect(result.status).toBe('completed');
    expect(result.output[0]!.type).toBe('compaction');
    expect(result.usage!.input_tokens).toBeGreaterThan(2_500_000);
    assertStalls(stalls);
  }, 180_000);

  it.each(['http', 'ws'] as const)('%s plan and run with a tool schema of 2.5 million lone surrogates: no loop turn holds the CPU for 250 ms', async (name) => {
    // Each one needs a six-character escape: one JSON.stringify of the schema held the loop ~120 ms per million of
    // them, and it ran in one turn four times (validation, the prompt's header, ws's header key, the tools' echo in
    // the lifecycle events): the chaos suite's /health deadline failed (seed 77: 369 and 455 ms).
    const { server } = await testServer();
    const tools = [{ type: 'function', name: 'get_weather', description: 'Weather.', parameters: { type: 'object', properties: { city: { type: 'string', description: '\ud800'.repeat(2_500_000) } } } }];
    const params = parseCreateBody({ model: 'sim-model', input: 'hi', tools, store: false });
    const events: ServerEvent[] = [];
    const metrics = new RunMetrics();
    const work = (async () => {
      const plan = name === 'http' ? await httpPlan(params, server.services, metrics, null) : await wsModePolicy(server.services, info()).plan(params, metrics);
      return run(server, plan, (e) => events.push(e)).done;
    })();
    const { result, stalls } = await watchLoop(work);
    expect(result.status).toBe('completed');
    // The events' bytes (their tools echo made in slices) are JSON.stringify's, byte for byte.
    const created = events.find((e) => e.type === 'response.created')!;
    expect(eventJson(created) === JSON.stringify(created)).toBe(true);
    assertStalls(stalls);
  }, 180_000);

  it.each([
    ['http', '8 M letters', 'é'.repeat(8_000_000)],
    ['ws', '8 M letters', 'é'.repeat(8_000_000)],
    ['http', '2.5 M lone surrogates', '\ud800'.repeat(2_500_000)],
    ['ws', '2.5 M lone surrogates', '\ud800'.repeat(2_500_000)],
  ] as const)('%s plan and run of an item of an unknown type named by %s: no loop turn holds the CPU for 250 ms', async (name, _what, type) => {
    // An item of a type the server does not know is shown to the model as its type, then its JSON: the type was the
    // prompt's "short" prefix, tokenised in one go, and the JSON one JSON.stringify (six characters a lone surrogate),
    // in the render and again in the safety scan (the long-form chaos fuzzer's append typed by 1 M lone surrogates
    // held /health over 250 ms, --seed 1304). 2.5 M is about what a 16 MiB body can carry (six bytes each escaped).
    // Then the tokenizer's one regex match of such a run as a pre-token (130-400 ms: now matched in windows,
    // model/tokenizer.ts), the type's tokens in one growing array (~200 ms: now in chunks) and the prompt buffer's
    // growth when the model's output is committed (~200 ms: now made in slices first) were the long turns; the cases
    // take 40-60 ms now. An unknown type is refused at the parse (400 naming input[i].type) unless
    // `--allow-unknown-parameters` carries it: the way such items still come in.
    const { server } = await testServer({ allowUnknownParameters: true });
    const body = { model: 'sim-model', input: [{ type: 'message', role: 'user', content: 'hi' }, { type }], store: false };
    expect(() => parseCreateBody(body)).toThrow(/is not an input item type/);
    const params = parseCreateBody(body, { ...DEFAULT_PARSE_CAPS, allowUnknownParameters: true });
    const { result, stalls } = await watchLoop(planAndRun(server, name, params));
    expect(result.status).toBe('completed');
    expect(result.usage!.input_tokens).toBeGreaterThan(1_000_000);
    assertStalls(stalls);
  }, 180_000);

  it.each([
    ['an OpenAI-key-like run', 'sk-'.repeat(2_700_000), 'completed'],
    ['a Slack-token-like run', 'xoxa-12345678-'.repeat(580_000), 'content_flagged'],
  ] as const)('http plan and run of a tool call whose name is %s of 8 M characters: no loop turn holds the CPU for 250 ms, no server error', async (_what, name, outcome) => {
    // A call's header (`function_call <name> <call_id>`, `function_call_output <call_id>`) is the safety scan's prefix,
    // matched by each pattern in one go beside a large body: 8 M characters of `sk-` in its call_id held the loop
    // ~430 ms, and a Slack-token-like run overflowed the regex engine's backtrack stack (RangeError: a 500 for the
    // client). A call_id is now at most 64 characters (the API's bound, protocol/parse-input.ts); a call's name has none.
    const { server } = await testServer();
    const input = [
      { type: 'message', role: 'user', content: 'hi' },
      { type: 'function_call', name, call_id: 'call_1', arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'ok' },
    ];
    const params = parseCreateBody({ model: 'sim-model', input, tools, store: false });
    const { result, stalls } = await watchLoop(planAndRun(server, 'http', params).then((r) => r.status, (err: unknown) => (err as { code?: string }).code));
    expect(result).toBe(outcome);
    assertStalls(stalls, 0);
  }, 180_000);

  it('http plan and run of a user message of 8 M Slack-token-like characters: flagged, not a server error', async () => {
    // The safety scan confirmed a candidate with one match over the whole text: the pattern's open tail ran through
    // all 8 M characters and overflowed the regex engine's backtrack stack (RangeError: a 500, not content_flagged).
    const { server } = await testServer();
    const params = parseCreateBody({ model: 'sim-model', input: 'xoxa-12345678-'.repeat(580_000), store: false });
    const { result, stalls } = await watchLoop(planAndRun(server, 'http', params).then(() => null, (err: unknown) => err));
    expect((result as { code?: string } | null)?.code).toBe('content_flagged');
    assertStalls(stalls, 0);
  }, 180_000);

  it.each([
    ['user', { user: '\ud800'.repeat(2_400_000) }],
    // safety_identifier and prompt_cache_key are not here: over 128 and 64 characters they are refused as they are parsed
    // (test/conformance/request-params.test.ts).
    ['a json_schema text format', { text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', properties: { a: { type: 'string', description: '\ud800'.repeat(2_400_000) } } } } } }],
    ['prompt_cache_options', { prompt_cache_options: { comparison_response_id: '\ud800'.repeat(2_400_000) } }],
    // An entry must name a declared tool; the rest of it is echoed as sent.
    ['an allowed_tools tool_choice', { tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'f', description: '\ud800'.repeat(2_400_000) }] } }],
  ] as const)('a Response echoing %s of 2.4 million lone surrogates: its events are made without a loop turn holding the CPU for 250 ms', async (_name, fields) => {
    // Only instructions and tools were kept as bytes between a Response's events: any other echoed field was
    // stringified with each event (about 0.1 s per 15 MB of six-character escapes), three to four times a run, and an
    // outside attack held /health 0.9 s over SSE with a long `user`.
    const { server } = await testServer();
    const params = parseCreateBody({ model: 'sim-model', input: 'hi', store: false, ...fields });
    let bytes = 0;
    const work = (async () => {
      const plan = await httpPlan(params, server.services, new RunMetrics(), null);
      // As a transport does: each event's pieces (text and kept bytes), their size.
      return run(server, plan, (e) => (bytes += piecesLength(eventPieces(e)))).done;
    })();
    const { result, stalls } = await watchLoop(work);
    expect(result.status).toBe('completed');
    expect(bytes).toBeGreaterThan(3 * 14_000_000);
    assertStalls(stalls, 3);
  }, 180_000);

  it('49,000 item references to stored items are resolved without a loop turn holding the CPU for 250 ms', async () => {
    // Each reference is a store read and a parse, all in one turn: ~0.5 s for 49,000 (/health 0.8 s against 0.2 s for
    // the same items sent inline; outside attack). Every design resolves references here (modes/hydrate.ts).
    const { server, url } = await testServer({ store: join(storeDir, 'refs.sqlite') });
    const n = 49_000;
    const stored = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', input: Array.from({ length: n }, (_, i) => ({ type: 'message', role: 'user', id: `msg_${i}`, content: 'x' })), generate: false }),
    });
    expect(stored.status).toBe(200);
    const refs = parseCreateBody({ model: 'sim-model', input: Array.from({ length: n }, (_, i) => ({ type: 'item_reference', id: `msg_${i}` })) }).input;
    const work = (async () => {
      // Deferred past this turn, so watchLoop (called next) is watching when the resolution's first slice runs.
      await new Promise((r) => setImmediate(r));
      return resolveReferences(refs, null, server.services, new RunMetrics());
    })();
    const { result, stalls } = await watchLoop(work);
    expect(result).toHaveLength(n);
    expect(result.every((item) => item.type === 'message')).toBe(true);
    assertStalls(stalls, 3);
  }, 60_000);

  it.each(['http', 'ws'] as const)('%s store:true create on a SQLite file with a tool schema of 2.5 million lone surrogates: no loop turn holds the CPU for 500 ms (its row\'s insert is one call), and the response is stored when it ends', async (name) => {
    // The store's write stringified the Response (its tools echo: 15 MB of six-character escapes), its bytes counted,
    // and inserted it, all in the run's last turn: ~0.6 s of CPU on a file store.
    const { server } = await testServer({ store: join(storeDir, `${name}.sqlite`) });
    const tools = [{ type: 'function', name: 'get_weather', description: 'Weather.', parameters: { type: 'object', properties: { city: { type: 'string', description: '\ud800'.repeat(2_500_000) } } } }];
    const params = parseCreateBody({ model: 'sim-model', input: 'hi', tools, store: true });
    const store = server.services.store;
    let early = 0;
    let watching = true;
    const work = (async () => {
      const metrics = new RunMetrics();
      const plan = name === 'http' ? await httpPlan(params, server.services, metrics, null) : await wsModePolicy(server.services, info()).plan(params, metrics);
      const r = run(server, plan);
      // While the write is made in slices, the run's Response must not read as ended (a background response's
      // retrieve reads it from the run) before the store has it: a continuation from it would find nothing.
      const check = () => {
        if (!watching) return;
        if (r.response.status !== 'in_progress' && !store.has(r.id, null)) early++;
        setImmediate(check);
      };
      check();
      return r.done;
    })();
    const { result, stalls } = await watchLoop(work);
    watching = false;
    expect(result.status).toBe('completed');
    expect(early).toBe(0);
    // Written before the run ended (before its terminal event): read at once, what JSON.stringify gives.
    const stored = store.get(result.id, null);
    expect(stored).toBeDefined();
    expect(JSON.stringify(stored!.response) === JSON.stringify(result)).toBe(true);
    assertStalls(stalls, 10, STORE_INSERT_STALL_LIMIT_MS);
  }, 180_000);

  it('a run stopped while its server-side compaction yields ends once, and nothing follows its terminal event', async () => {
    const { server } = await testServer();
    const params = parseCreateBody({ model: 'sim-model', input: prose(4 * MIB), store: false, context_management: [{ type: 'compaction', compact_threshold: 1 }] });
    const plan = await httpPlan(params, server.services, new RunMetrics(), null);
    const events: ServerEvent[] = [];
    const r = run(server, plan, (e) => events.push(e));
    // The run is inside the compaction's first yield by now (it took far more than one slice): stopped there.
    r.stop('cancelled', 'client_cancelled');
    const result = await r.done;
    expect(result.status).toBe('cancelled');
    const terminal = events.findIndex((e) => e.type === 'response.cancelled');
    expect(terminal).toBe(events.length - 1);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(result.output).toEqual([]);
    expect(plan.metrics.counters['compactions']).toBe(1);
    expect(plan.metrics.counters['model_calls'] ?? 0).toBe(0);
  }, 60_000);

  it('3,000 tools against a 1 MB message: matching tools to the message does not rescan it per tool', async () => {
    // Was one regular expression built and run over the whole message per tool: 2,000 tools and a
    // 1 MB message froze the loop for ~45 s (attack report, issue 7).
    const { server } = await testServer();
    const many = Array.from({ length: 3000 }, (_, i) => ({ type: 'function', name: `tool_${i}`, description: `Tool number ${i}.`, parameters: { type: 'object' } }));
    // Past the default 128-tool cap (`--max-tools`): this checks the matcher itself, as a server configured for more would run it.
    const caps = { ...DEFAULT_PARSE_CAPS, maxTools: 3000 };
    const params = parseCreateBody({ model: 'sim-model', input: 'Please use tool_2999 on this: ' + prose(1_000_000), tools: many, store: false }, caps);
    const work = (async () => run(server, await httpPlan(params, server.services, new RunMetrics(), null)).done)();
    const { result, stalls } = await watchLoop(work);
    expect(result.status).toBe('completed');
    // The one tool the message names exactly is the one called.
    expect(result.output.filter((o) => o.type === 'function_call').map((o) => (o as { name: string }).name)).toEqual(['tool_2999']);
    // Now fast enough that the loop may turn only a few times: the bound on any one turn is what matters.
    expect(stalls.maxCpuMs, `longest stall: ${stalls.maxCpuMs.toFixed(0)} ms CPU`).toBeLessThan(STALL_LIMIT_MS);
  }, 180_000);

  it('long-lived append of a 16 MiB tool output: no loop turn holds the CPU for 250 ms', async () => {
    const { server } = await testServer();
    const params = parseCreateBody({ model: 'sim-model', input: 'please lookup the value', tools, store: false });
    const plan = await longLivedPolicy(server.services, info()).plan(params, new RunMetrics());
    let pausedCall!: (id: string) => void;
    const paused = new Promise<string>((resolve) => (pausedCall = resolve));
    const r = run(server, plan, (e) => {
      if (e.type === 'response.done') pausedCall(e.response.pending_tool_calls![0]!);
    });
    const callId = await paused;
    // Two parts: one text is at most the API's 10,485,760 characters.
    const output = [
      { type: 'input_text', text: prose(8 * MIB - 2048) },
      { type: 'input_text', text: prose(8 * MIB - 2048) },
    ];
    const { result, stalls } = await watchLoop(r.append([{ type: 'function_call_output', call_id: callId, output } as InputItem]).then(() => r.done));
    expect(result.status).toBe('completed');
    expect(result.usage!.input_tokens).toBeGreaterThan(2_500_000);
    assertStalls(stalls);
  }, 180_000);
});
