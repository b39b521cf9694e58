#!/usr/bin/env node
/**
 * The `llr` command.
 *
 *   llr serve [options]         run the server with the simulated model
 *   llr run "prompt" [options]  an example agent: runs the shell commands the
 *                               model asks for on this machine, printing each step
 *   llr bench [options]         replay an agent run through every design and
 *                               report where the time goes (src/bench/command.ts)
 *   llr workload inspect FILE   what the workload reader understood of a file
 *                               (src/workload/inspect.ts)
 *   llr demo [serve options]    serve, and print the teaching demo's URL (/demo)
 *
 * Most flags also have an environment variable (LLR_PORT, …); flags win.
 * A bad command line (flags.ts `UsageError`, an unknown flag, a bad value)
 * or a workload file the reader refuses (`WorkloadError`: the file, the line
 * and why) prints `llr: MESSAGE` and exits with status 2; any other failure, 1.
 */
import { parseArgs } from 'node:util';
import { fromEnvironment, numberFlag, refuseRepeats, stringOptions, UsageError, type NumberRange } from './flags.js';
import { DEFAULT_STORE, startServer } from './server.js';
import { createLogger, flushLog, flushLogSync } from './log.js';
import { exitWithParent } from './lifecycle.js';
import { commandOf, killRunningCommands, runShell } from './shell.js';
import { WorkloadError } from './workload/types.js';
import type { Switches } from './engine/services.js';
import { DEFAULT_LIMITS, DEFAULT_SWITCHES } from './engine/services.js';
import { belowFootprint, fitToFootprint, widestFootprint, type Footprint } from './workload/fit.js';
import { limitHelp, limitOptions, limitsFrom, MAX_TIMER_MS } from './limit-flags.js';
import { CLIENT_PROTOCOLS, connectClient, type ClientProtocol } from './client/index.js';
import type { FunctionCall } from './protocol/objects.js';
import { quoted, shown } from './terminal-text.js';
import { replayPolicy, type ModelPolicy } from './model/policies.js';
import { parseChaosSpec } from './engine/faults.js';

const HELP = `llr — long-lived-responses

Usage:
  llr serve [--host H] [--port P] [--tokens-per-second N] [--ttft-ms N]
            [--prefill-tps N] [--instant] [--api-key K]... [--hop-ms N] [--hops N]
            [--call-hop-ms N] [--call-hops N]
            [--pause-timeout-ms N] [--max-frame-bytes N] [--store PATH|memory|:memory:]
            [--seed N] [--no-websockets] [--allow-unknown-parameters] [--off SWITCH]... [--on SWITCH]...
            [--policy auto|replay] [--workload FILE] [--synthetic TURNS,BYTES,TOKENS]
            [--record-requests N] [--ledger-entries N] [--prefix-cache-blocks N] [--prefix-cache-insert-blocks N]
            [--shared-prefix-cache] [--eager-tokenizer] [--lazy-tokenizer]
            [--tokenizer-cache-entries N] [--log-level trace|debug|info|warn|error|fatal|silent]
            [limits and security defaults: see below]
  llr run "prompt" [--url URL] [--protocol ${CLIENT_PROTOCOLS.join('|')}] [--model M] [--api-key K]
            [--idle-timeout-ms N (60000; 0: none; gives up on a server silent that long while the agent waits on it)]
            (exit status 1 when the response does not end completed, or on an error; 130 on SIGINT and 143 on
            SIGTERM, the running commands killed with their whole process group; each command: 60 s, 1 MiB of output)
  llr bench [--quick|--full] [--workload FILE] [--out DIR] ...   (llr bench --help)
  llr workload inspect FILE | convert FILE [OUT]               (llr workload --help)
  llr demo [serve options]   serve and print the teaching demo's URL (opens nothing)

Demo options (serve and demo): [--no-demo] [--demo-workload FILE]
  [--demo-max-races N (2)] [--demo-race-timeout-ms N (600000)]
  [--demo-max-tool-calls N (100)] [--demo-max-prompt-bytes N (16384)] [--demo-alive-ms N (5000)]

A bad flag or value: one line on stderr, exit status 2 (--port 0: any free port).
Each flag's environment variable is LLR_ + its name (LLR_PORT, LLR_MAX_CONNECTIONS, …); flags win.
A switch's (LLR_INSTANT, LLR_NO_WEBSOCKETS, LLR_NO_DEMO, …) takes 1 or 0. A repeatable flag's is
plural, comma-separated: LLR_API_KEYS, LLR_ALLOW_ORIGINS, LLR_ALLOW_HOSTS, LLR_CHAOS; serve also
takes LLR_API_KEY (one key, the one llr run sends).

serve defaults: 127.0.0.1:8080, 1000 tokens/s, 150 ms fixed time to first
token, 20000 tokens/s prefill, no API keys, store ${DEFAULT_STORE}.
Memory: the model keeps the last --record-requests requests (default 0), the
ledger per-key totals plus --ledger-entries recent entries (default 10000),
the prefix cache --prefix-cache-blocks 64-token blocks (default 65536; a
growing prompt's model call places at most --prefix-cache-insert-blocks of
them beyond those already in place, default 1024, the rest at its next calls),
partitioned per API key unless --shared-prefix-cache. The tokenizer's tables
(~6 MB) load when the first request needs them, a slice at a time (that
request waits ~0.1-0.3 s; /health and other work go on meanwhile), or at
start-up with --eager-tokenizer (~0.1 s more start-up). --lazy-tokenizer,
the old name of the default, is still accepted. The tokenizer caches the
merges of --tokenizer-cache-entries pre-tokens (default 100000, and at most
4,000,000 characters and ids together; 0: off).
Switches for --off / --on: ${Object.keys(DEFAULT_SWITCHES).join(', ')}
(all on by default except overlap_persist and lean_pause_event).
--allow-unknown-parameters ignores a create's (and input_tokens', compact's, an HTTP append's) unknown top-level fields, which are
refused 400 unknown_parameter by default, as the API refuses them, and takes input
items and tools of unknown types, refused 400 invalid_value by default (for a client
newer than the server's lists of fields and types; docs/protocol.md).
--workload (a Codex rollout, or an llr workload: docs/workload.schema.json) or --synthetic
selects the replay policy: the model replays the recorded run's turns (a model call with more
parallel calls than --max-pending-calls raises it to fit, more tools than --max-tools raises it,
and a context larger than the defaults
take raises --max-frame-bytes, --max-context-bytes, --max-context-items and --max-server-bytes,
as JSON past the defaults raises --max-json-keys, --max-json-containers and --max-schema-nodes,
each unless its flag is given; each raise is warned at start, limits_fitted_to_workload, and a flag
given below what the workload needs is kept and warned, limits_below_workload).

serve limits (docs/reliability.md; each also LLR_<NAME> in the environment):
${limitHelp()}
serve security defaults:
  --allow-origin ORIGIN     also accept browser requests from ORIGIN (repeatable; * = any;
                            default: only pages served by this server)
  --allow-host HOST         when bound to loopback, also accept this Host header
                            (repeatable; * = any; default: localhost, 127.0.0.1, [::1])
serve chaos knobs (client-resilience research; default off; docs/reliability.md "Chaos knobs"):
  --chaos KIND@POINT[:P[:MS]]  inject a fault with probability P (0-1, default 1) at each
                            occurrence of POINT (repeatable; also LLR_CHAOS=spec,spec):
                            KIND  error       the response fails: error event (code injected_fault)
                                              + response.failed, billed and recorded once
                                  disconnect  the server drops the connection (WS close 1011,
                                              SSE ends without a terminal event, plain HTTP no
                                              answer); the response ends cancelled
                                  stall       the stream stops for MS ms (required)
                                  latency     MS ms (required) added before the point
                            POINT first-token (each model call, before its first output event)
                                  mid-stream  (each model call, after its first output token)
                                  pause       (a turn that ended with tool calls, before the
                                              client is told: response.done or the terminal event)
                            e.g. --chaos error@first-token:0.1 --chaos stall@pause:0.2:3000
  --chaos-seed N            seed of the chaos decisions (default: --seed); same seed and
                            order of responses, same faults
`;

function env(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
}

/**
 * A switch's environment variable (LLR_INSTANT, LLR_NO_WEBSOCKETS, …): 1 on, 0 (or unset, or empty) off. Anything
 * else is refused: `LLR_NO_WEBSOCKETS=true` was silently off, and the server served what it was told not to.
 */
function envSwitch(name: string): boolean {
  const v = env(name);
  if (v === undefined || v === '0') return false;
  if (v === '1') return true;
  throw new UsageError(`${name} needs 1 or 0, got ${quoted(v)}`);
}

/** A serve flag's number, from the flag or its environment variable (flags win), checked against its range. */
/**
 * A numeric flag's value, else its environment variable's; a bad value from the environment says so (the flag was
 * named alone, and a user who set only the variable looked for a flag they never typed: outside attack atk41 F4).
 */
function num(flagValue: string | undefined, envVar: string, name: string, range: NumberRange): number | undefined {
  if (flagValue !== undefined) return numberFlag(flagValue, name, range);
  return fromEnvironment(envVar, () => numberFlag(env(envVar), name, range));
}

/** A timer's ms: Node fires one longer than 2^31-1 ms at once. */
const MS: NumberRange = { max: MAX_TIMER_MS };
/** A model rate, tokens/s: 0 would never finish (every request failed with a 500); Infinity is instant. */
const RATE: NumberRange = { aboveMin: true, infinity: true };
const COUNT: NumberRange = { integer: true, max: Number.MAX_SAFE_INTEGER };
const POSITIVE_COUNT: NumberRange = { integer: true, min: 1, max: Number.MAX_SAFE_INTEGER };

/**
 * Values no flag takes: an empty one (`--host=` listened on every interface
 * with the Host check off; `--store=` opened a throw-away SQLite file;
 * `--api-key=` a key no request can present), and an API key with spaces
 * at its ends (the `Bearer` value is trimmed, so no request matched it).
 */
function checkStrings(values: Record<string, unknown>, apiKeys: readonly string[] | undefined, keySource = '--api-key, LLR_API_KEYS'): void {
  for (const [flag, v] of Object.entries(values)) {
    if (v === '' || (Array.isArray(v) && v.includes(''))) throw new UsageError(`--${flag} needs a value, got ''`);
  }
  // A refused key is named by its place and length, never printed: an error line goes to terminals and CI logs.
  const which = (i: number, k: string) => `key ${i + 1} of ${apiKeys!.length}, ${k.length} characters; keys are not printed`;
  for (const [i, k] of (apiKeys ?? []).entries()) {
    if (k === '' || k.trim() !== k) throw new UsageError(`an API key (${keySource}) cannot be empty or start or end with whitespace (${which(i, k)})`);
    // No HTTP header carries a control character (RFC 9110 §5.5): the server ran with a key no client could send, and
    // llr run failed at its first request with 'Invalid character in header content' (outside attack).
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(k)) throw new UsageError(`an API key (${keySource}) cannot contain control characters, as it travels in an HTTP header (${which(i, k)})`);
  }
}

async function serve(argv: string[], demo = false): Promise<void> {
  const { values, tokens } = parseArgs({
    args: argv,
    tokens: true,
    options: {
      ...stringOptions(['host', 'port', 'tokens-per-second', 'ttft-ms', 'prefill-tps', 'hop-ms', 'hops', 'call-hop-ms', 'call-hops',
        'store', 'seed', 'max-context-bytes', 'max-context-items', 'log-level', 'policy', 'workload', 'synthetic', 'chaos-seed',
        'demo-workload', 'demo-max-races', 'demo-race-timeout-ms', 'demo-max-tool-calls', 'demo-max-prompt-bytes', 'demo-alive-ms', 'record-requests',
        'ledger-entries', 'prefix-cache-blocks', 'prefix-cache-insert-blocks', 'tokenizer-cache-entries']),
      instant: { type: 'boolean' },
      'api-key': { type: 'string', multiple: true },
      'no-websockets': { type: 'boolean' },
      'allow-unknown-parameters': { type: 'boolean' },
      'lazy-tokenizer': { type: 'boolean' },
      'eager-tokenizer': { type: 'boolean' },
      off: { type: 'string', multiple: true },
      on: { type: 'string', multiple: true },
      ...limitOptions(),
      'allow-origin': { type: 'string', multiple: true },
      'allow-host': { type: 'string', multiple: true },
      chaos: { type: 'string', multiple: true },
      'no-demo': { type: 'boolean' },
      'shared-prefix-cache': { type: 'boolean' },
    },
  });
  refuseRepeats(tokens, values);
  if (demo && values['no-demo']) throw new UsageError('llr demo cannot run with --no-demo');
  // LLR_API_KEY too, the name `LLR_` + the flag gives and the one `llr run` sends: set for serve, it was ignored, and
  // the server started with no key at all (outside reviewer atk64 F2). Failing closed: a shell that exports it for
  // the client starts a server that asks for it.
  const oneKey = env('LLR_API_KEY');
  const envKeys = [...(env('LLR_API_KEYS')?.split(',') ?? []), ...(oneKey === undefined ? [] : [oneKey])];
  const apiKeys = values['api-key'] ?? (envKeys.length > 0 ? envKeys : undefined);
  checkStrings(values, apiKeys, '--api-key, LLR_API_KEYS, LLR_API_KEY');
  const { policy, footprint } = await modelPolicy(values.policy, values.workload, values.synthetic);
  const limits = limitsFrom(values, process.env);
  const demoOff = values['no-demo'] || envSwitch('LLR_NO_DEMO');
  const demoWorkload = values['demo-workload'] ?? env('LLR_DEMO_WORKLOAD');
  let fit = footprint;
  if (!demoOff && demoWorkload !== undefined) {
    // Read now, once: a file the reader refuses exits 2 here (it failed every race with a 500), and races reuse it.
    const { demoCodexWorkload } = await import('./demo/workloads.js');
    const { replayFootprint } = await import('./workload/replayable.js');
    // Its lanes are this server's clients: fitted as --workload is (a recorded call of 300 parallel calls failed both
    // long-lived lanes too_many_pending_calls, 130 tools every lane; outside attack atk68 F7).
    fit = widestFootprint(fit, replayFootprint(demoCodexWorkload(demoWorkload)));
  }
  const given = { ...limits };
  fitToFootprint(limits, fit);
  const log = createLogger({
    ownsProcess: true,
    ...(values['log-level'] ? { level: values['log-level'] } : {}),
    ...(limits.maxLogBufferBytes !== undefined ? { maxBufferBytes: limits.maxLogBufferBytes } : {}),
  });
  // Said: each bound the workload raised holds for every client of this server (a tool of a million keys raised
  // --max-json-keys for every body; nothing said so; outside attack atk86 F5).
  const raised = Object.fromEntries(Object.entries(limits).filter(([k, v]) => given[k as keyof typeof given] === undefined && v !== undefined));
  if (Object.keys(raised).length > 0) log.warn({ code: 'limits_fitted_to_workload', raised }, 'limits raised to fit the workload: they hold for every client of this server');
  // And a limit given below what the workload needs: its replay is refused part-way (payload_too_large and the like),
  // whatever else was raised beside it (outside attack atk87 F2).
  const below = belowFootprint(given, fit);
  if (Object.keys(below).length > 0) log.warn({ code: 'limits_below_workload', below }, 'limits given below what the workload needs: its replay will be refused part-way');
  // A request between the two can never be held: refused 503 server_busy, which no wait mends (atk70 F6). Said, not
  // refused: a small budget is how its behaviour is measured (npm run bench:answers --max-server-mb 1).
  const serverBytes = limits.maxServerBytes ?? DEFAULT_LIMITS.maxServerBytes;
  const frameBytes = limits.maxFrameBytes ?? DEFAULT_LIMITS.maxFrameBytes;
  if (serverBytes < frameBytes) {
    log.warn({ code: 'server_bytes_below_frame', max_server_bytes: serverBytes, max_frame_bytes: frameBytes }, '--max-server-bytes is below --max-frame-bytes: a request of a size between them is always refused 503 server_busy, and retrying it cannot help');
  }
  // A long-lived run near its context bound holds 2 to 2.5 times it (its items, and their token ids): past 40 % of the budget,
  // one run fills the budget before its own bound, and its next append ends it `server_busy` (atk76 F1b: 1 GiB of
  // context taken silently beside 256 MiB of budget). Said, not refused, as above.
  const contextBytes = limits.maxContextBytes ?? DEFAULT_LIMITS.maxContextBytes;
  if (Number.isFinite(serverBytes) && contextBytes * 2.5 > serverBytes) {
    log.warn(
      { code: 'context_bytes_past_server_budget', max_context_bytes: contextBytes, max_server_bytes: serverBytes },
      '--max-context-bytes is more than 40% of --max-server-bytes: a long-lived run holds 2 to 2.5 times its context in the budget, so one run can fill the budget before its context bound, and then ends server_busy',
    );
  }
  // A long-lived run over HTTP holds its stream's connection, and each append needs another: with more such runs than
  // half the connection cap, their streams can take every slot, every append is refused too_many_connections, and
  // the runs wait out their pause timeout (outside attacks atk116 F2, atk119 F1: 18 of 20 runs at
  // --max-connections 20). The defaults (512 of 1,024) keep half free. Said, not refused, as above.
  const liveRuns = limits.maxLiveHttpRuns ?? DEFAULT_LIMITS.maxLiveHttpRuns;
  const connections = limits.maxConnections ?? DEFAULT_LIMITS.maxConnections;
  if (Number.isFinite(connections) && liveRuns * 2 > connections) {
    log.warn(
      { code: 'live_http_runs_past_half_connections', max_live_http_runs: liveRuns, max_connections: connections },
      '--max-live-http-runs is more than half of --max-connections: each long-lived run over HTTP holds its stream\'s connection and needs another for its appends, so such runs can take every connection, their appends are refused 503 too_many_connections, and they wait out their pause timeout',
    );
  }
  const switches: Partial<Switches> = {};
  for (const name of values.off ?? []) {
    if (!(name in DEFAULT_SWITCHES)) throw new UsageError(`unknown switch ${quoted(name)}; known: ${Object.keys(DEFAULT_SWITCHES).join(', ')}`);
    (switches as Record<string, boolean>)[name] = false;
  }
  for (const name of values.on ?? []) {
    // Both: --on won whatever their order, unsaid (outside attack).
    if ((values.off ?? []).includes(name)) throw new UsageError(`--on ${name} and --off ${name} contradict each other`);
    if (!(name in DEFAULT_SWITCHES)) throw new UsageError(`unknown switch ${quoted(name)}; known: ${Object.keys(DEFAULT_SWITCHES).join(', ')}`);
    (switches as Record<string, boolean>)[name] = true;
  }
  // Validated here so a bad spec is a clear CLI error before anything listens.
  const chaos = (values.chaos ?? env('LLR_CHAOS')?.split(',') ?? []).map((spec) => {
    try {
      return parseChaosSpec(spec);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  });
  const chaosSeed = num(values['chaos-seed'], 'LLR_CHAOS_SEED', 'chaos-seed', COUNT);
  const instant = values.instant ?? envSwitch('LLR_INSTANT');
  const { server, url } = await startServer({
    host: values.host ?? env('LLR_HOST') ?? '127.0.0.1',
    port: num(values.port, 'LLR_PORT', 'port', { integer: true, max: 65535 }) ?? 8080,
    modelSettings: {
      ...(instant ? { tokensPerSecond: Infinity, ttftBaseMs: 0, prefillTokensPerSecond: Infinity } : {}),
      ...defined({
        tokensPerSecond: num(values['tokens-per-second'], 'LLR_TOKENS_PER_SECOND', 'tokens-per-second', RATE),
        ttftBaseMs: num(values['ttft-ms'], 'LLR_TTFT_MS', 'ttft-ms', MS),
        prefillTokensPerSecond: num(values['prefill-tps'], 'LLR_PREFILL_TPS', 'prefill-tps', RATE),
      }),
    },
    ...(apiKeys ? { apiKeys } : {}),
    hopLatencyMs: num(values['hop-ms'], 'LLR_HOP_MS', 'hop-ms', MS) ?? 0,
    hops: num(values.hops, 'LLR_HOPS', 'hops', COUNT) ?? 2,
    callHopLatencyMs: num(values['call-hop-ms'], 'LLR_CALL_HOP_MS', 'call-hop-ms', MS) ?? 0,
    callHops: num(values['call-hops'], 'LLR_CALL_HOPS', 'call-hops', COUNT) ?? 0,
    limits,
    allowOrigins: values['allow-origin'] ?? env('LLR_ALLOW_ORIGINS')?.split(',') ?? [],
    allowHosts: values['allow-host'] ?? env('LLR_ALLOW_HOSTS')?.split(',') ?? [],
    store: values.store !== undefined ? storeSpec(values.store) : fromEnvironment('LLR_STORE', () => storeSpec(env('LLR_STORE') ?? DEFAULT_STORE)),
    seed: num(values.seed, 'LLR_SEED', 'seed', COUNT) ?? 1,
    refuseWebSockets: values['no-websockets'] ?? envSwitch('LLR_NO_WEBSOCKETS'),
    allowUnknownParameters: values['allow-unknown-parameters'] ?? envSwitch('LLR_ALLOW_UNKNOWN_PARAMETERS'),
    lazyTokenizer: values['lazy-tokenizer'] ?? envSwitch('LLR_LAZY_TOKENIZER'),
    eagerTokenizer: values['eager-tokenizer'] ?? envSwitch('LLR_EAGER_TOKENIZER'),
    switches,
    ...defined({
      recordRequests: num(values['record-requests'], 'LLR_RECORD_REQUESTS', 'record-requests', COUNT),
      ledgerEntries: num(values['ledger-entries'], 'LLR_LEDGER_ENTRIES', 'ledger-entries', POSITIVE_COUNT),
      prefixCacheBlocks: num(values['prefix-cache-blocks'], 'LLR_PREFIX_CACHE_BLOCKS', 'prefix-cache-blocks', COUNT),
      prefixCacheInsertBlocks: num(values['prefix-cache-insert-blocks'], 'LLR_PREFIX_CACHE_INSERT_BLOCKS', 'prefix-cache-insert-blocks', POSITIVE_COUNT),
      tokenizerCacheEntries: num(values['tokenizer-cache-entries'], 'LLR_TOKENIZER_CACHE_ENTRIES', 'tokenizer-cache-entries', COUNT),
    }),
    prefixCacheScope: (values['shared-prefix-cache'] ?? envSwitch('LLR_SHARED_PREFIX_CACHE')) ? 'shared' : 'owner',
    chaos,
    ...(chaosSeed !== undefined ? { chaosSeed } : {}),
    logger: log,
    ...(policy ? { policy } : {}),
    demo: demoOff
      ? false
      : defined({
          workloadPath: demoWorkload,
          maxRaces: num(values['demo-max-races'], 'LLR_DEMO_MAX_RACES', 'demo-max-races', POSITIVE_COUNT),
          raceTimeoutMs: num(values['demo-race-timeout-ms'], 'LLR_DEMO_RACE_TIMEOUT_MS', 'demo-race-timeout-ms', { ...POSITIVE_COUNT, max: MAX_TIMER_MS }),
          maxToolCalls: num(values['demo-max-tool-calls'], 'LLR_DEMO_MAX_TOOL_CALLS', 'demo-max-tool-calls', POSITIVE_COUNT),
          maxPromptBytes: num(values['demo-max-prompt-bytes'], 'LLR_DEMO_MAX_PROMPT_BYTES', 'demo-max-prompt-bytes', POSITIVE_COUNT),
          aliveMs: num(values['demo-alive-ms'], 'LLR_DEMO_ALIVE_MS', 'demo-alive-ms', { ...POSITIVE_COUNT, max: MAX_TIMER_MS }),
        }),
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    void server.close().then(async () => {
      await flushLog(log);
      flushLogSync(log);
      process.exit(0);
    });
  };
  // Before the ready line: whoever waits for it may stop the server at once, and a signal with no handler yet
  // killed it outright (no "shutting down", nothing flushed; test/integration/serve-ready-signals.test.ts).
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  exitWithParent(() => stop('parent process exited'));
  log.info({ url, websocket: url.replace(/^http/, 'ws') + '/v1/responses' }, `llr listening on ${url}`);
  // Whoever started the server waits for this line (log lines are otherwise written in batches).
  log.flush();
  if (demo) process.stdout.write(`llr demo: open ${url}/demo in a browser\n`);
}

/** `--policy replay` with `--workload` / `--synthetic`: the simulated model replays that run. */
async function modelPolicy(
  name: string | undefined,
  workload: string | undefined,
  synthetic: string | undefined,
): Promise<{ policy?: ModelPolicy; footprint: Footprint }> {
  const wanted = name ?? (workload !== undefined || synthetic !== undefined ? 'replay' : 'auto');
  if (wanted === 'auto') {
    if (workload !== undefined || synthetic !== undefined) throw new UsageError('--workload and --synthetic need --policy replay');
    return { footprint: { widestCall: 0, contextBytes: 0, contextItems: 0, tools: 0, jsonContainers: 0, jsonKeys: 0, schemaNodes: 0 } };
  }
  if (wanted !== 'replay') throw new UsageError(`unknown policy ${quoted(wanted)}; known: auto, replay`);
  if ((workload === undefined) === (synthetic === undefined)) throw new UsageError('--policy replay needs exactly one of --workload FILE or --synthetic TURNS,BYTES,TOKENS');
  const { loadWorkloadFile } = await import('./workload/load.js');
  const { syntheticFromSpec } = await import('./workload/synthetic.js');
  const { flatModelTurns, replayFootprint } = await import('./workload/replayable.js');
  const fromSpec = (spec: string) => {
    try {
      return syntheticFromSpec(spec);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  };
  const w = workload !== undefined ? loadWorkloadFile(workload) : fromSpec(synthetic!);
  const turns = flatModelTurns(w);
  return { policy: replayPolicy(turns), footprint: replayFootprint(w) };
}

function defined<T extends object>(o: T): Partial<{ [K in keyof T]: Exclude<T[K], undefined> }> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as never;
}

async function run(argv: string[]): Promise<void> {
  const { values, positionals, tokens } = parseArgs({
    args: argv,
    allowPositionals: true,
    tokens: true,
    options: {
      url: { type: 'string' },
      protocol: { type: 'string' },
      model: { type: 'string' },
      'api-key': { type: 'string' },
      'idle-timeout-ms': { type: 'string' },
    },
  });
  refuseRepeats(tokens, values);
  // `--model=` sent a model named '' (the server's 400 came after the connection); `--api-key=` was dropped unsaid.
  const runKey = values['api-key'] ?? env('LLR_API_KEY');
  checkStrings(values, runKey === undefined ? undefined : [runKey], '--api-key, LLR_API_KEY');
  const idleMs = num(values['idle-timeout-ms'], 'LLR_IDLE_TIMEOUT_MS', 'idle-timeout-ms', { integer: true, max: MAX_TIMER_MS }) ?? 60_000;
  const prompt = positionals.join(' ');
  if (!prompt) throw new UsageError('llr run needs a prompt, e.g. llr run "list the files\\n$ ls"');
  const protocol = (values.protocol ?? 'long-lived') as ClientProtocol;
  if (!CLIENT_PROTOCOLS.includes(protocol)) throw new UsageError(`unknown protocol ${quoted(protocol)}; known: ${CLIENT_PROTOCOLS.join(', ')}`);
  const url = values.url ?? env('LLR_URL') ?? 'http://127.0.0.1:8080';
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) throw new UsageError(`--url needs an http:// URL, got ${quoted(withoutSecrets(url))}`);
  // fetch refuses a URL with credentials ('Request cannot be constructed from a URL that includes credentials', the
  // password printed in the error): said here, without them. The key goes in --api-key.
  if (new URL(url).username !== '' || new URL(url).password !== '') throw new UsageError(`--url cannot hold a user name or password (the server takes an API key: --api-key), got ${quoted(withoutSecrets(url))}`);
  // What goes to standard output, and whether it left a line open: a stop or idle line on stderr starts on a line of
  // its own (it was glued to streamed text that had no line break yet: `You said:llr: stopped by SIGINT`, atk63 F3).
  const out = process.stdout;
  let lineOpen = false;
  const say = (text: string) => {
    if (text === '') return;
    out.write(text);
    lineOpen = !text.endsWith('\n');
  };
  const endLine = () => {
    if (lineOpen) say('\n');
  };
  // Stopped (Ctrl-C, a supervisor's SIGTERM): the commands running for the model stop with it, whole process groups,
  // and the status says so (they were left running, orphaned, and the status was the bare signal's).
  for (const [signal, status] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    process.once(signal, () => {
      void killRunningCommands().then((n) => {
        endLine();
        process.stderr.write(`llr: stopped by ${signal}${n ? `; killed ${n} running command(s)` : ''}\n`);
        process.exit(status);
      });
    });
  }
  // A server that accepts and then says nothing (no upgrade answer, no headers, a stream gone quiet) left the agent
  // waiting for ever, printing nothing. The clock runs while the agent waits on the server, not while a command runs.
  let commands = 0;
  let idle: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(idle);
    if (idleMs === 0 || commands > 0) return;
    idle = setTimeout(() => {
      endLine();
      process.stderr.write(`llr: no answer from ${shown(withoutSecrets(url))} for ${idleMs} ms (--idle-timeout-ms)\n`);
      process.exit(1);
    }, idleMs);
    // Not what keeps the process alive: a failure that ends the run otherwise exits at once.
    idle.unref();
  };
  arm();
  const client = await connectClient(protocol, url, { apiKey: values['api-key'] ?? env('LLR_API_KEY') });
  arm();
  const tools = [
    {
      type: 'function',
      name: 'exec_command',
      description: 'Run a shell command on the user machine and return its output.',
      parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
    },
  ];
  // Parallel calls run one after another here, so each command's output prints under it.
  let previous: Promise<unknown> = Promise.resolve();
  const execute = (call: FunctionCall): Promise<string> => {
    commands++;
    arm();
    const next = previous.then(async () => {
      // The call's header with its result, as one turn of the terminal: printed by the event loop below (at the call's
      // `output_item.done`), a refusal written at once came out before its own header, under the call before it, on
      // the designs that hand a call over before that loop reads its event (outside attack atk60).
      say(`\n[model calls ${shown(call.name)} ${shown(call.arguments)}]`);
      // Only the tool offered, with its one argument: a replayed call of another tool (a recorded `shell`), or one
      // whose arguments hold no string `cmd`, ran `/bin/bash -c undefined` (outside attack atk57 F4). Answered with
      // the reason instead, as Codex answers a call it cannot run ("unsupported call"), and the run goes on.
      const cmd = commandOf(call);
      if (cmd.refused !== undefined) {
        say(`\n[not run: ${shown(cmd.refused)}]\n`);
        return cmd.refused;
      }
      say(`\n$ ${shown(cmd.line)}\n`);
      const result = await runShell(cmd.line);
      say(result.endsWith('\n') ? result : `${result}\n`);
      return result;
    });
    void next.finally(() => {
      commands--;
      arm();
    }).catch(() => undefined);
    previous = next.catch(() => undefined);
    return next;
  };
  const agent = client.run({ model: values.model ?? 'sim-model', input: prompt.replace(/\\n/g, '\n'), tools }, execute);
  let response;
  try {
    for await (const e of agent) {
      arm();
      if (e.type === 'response.output_text.delta') say(shown(e.delta, true));
      else if (e.type === 'response.done') say(`\n[paused for ${e.response.pending_tool_calls?.length ?? 0} tool call(s)]\n`);
    }
    response = await agent;
  } finally {
    // The timing event follows the terminal event; once the socket has closed it has arrived (or never will).
    // Closed on an error too: an open WebSocket would keep the process alive after the error is printed.
    await client.close();
    clearTimeout(idle);
  }
  // The run's usage and server time, every response's added up: one response for the long-lived designs, one per model
  // call otherwise. The last response's alone made ws and http look half the cost of the same run (atk63 F2).
  const serverMs = agent.timings.reduce((ms, t) => ms + (t.totals['total'] ?? 0), 0);
  say(
    `\n\n[${shown(String(response.status))} · ${shown(String(response.id))} · ${agent.responses.length} response(s) · usage, all of them ${JSON.stringify(addedUp(agent.responses.map((r) => r.usage)))}${agent.timings.length ? ` · server total ${Math.round(serverMs * 1000) / 1000} ms` : ''}]\n`,
  );
  // A run that did not complete is a failed command (it exited 0 with `[failed …]`, the error unsaid): the reason
  // on stderr, exit status 1, as for an error the server sent (`content_flagged`).
  if (response.status !== 'completed') {
    const why = response.error
      ? `${response.error.code}: ${response.error.message}`
      : (response.incomplete_details?.reason ?? response.llr_incomplete_reason ?? 'no reason given');
    process.stderr.write(`llr: the response ended ${shown(String(response.status))} (${shown(String(why))})\n`);
    process.exitCode = 1;
  }
}

/**
 * Numeric fields added up across `counts` (usage objects: nested `*_details` too); anything else left out. `null` when
 * none had any (a response without usage).
 */
function addedUp(counts: readonly unknown[]): Record<string, unknown> | null {
  let sum: Record<string, unknown> | null = null;
  for (const c of counts) if (c !== null && typeof c === 'object' && !Array.isArray(c)) sum = addInto(sum ?? {}, c as Record<string, unknown>);
  return sum;
}

function addInto(into: Record<string, unknown>, from: Record<string, unknown>): Record<string, unknown> {
  for (const [key, v] of Object.entries(from)) {
    if (key === '__proto__') continue;
    const had = into[key];
    if (typeof v === 'number') into[key] = (typeof had === 'number' ? had : 0) + v;
    else if (v !== null && typeof v === 'object' && !Array.isArray(v)) into[key] = addInto(had !== null && typeof had === 'object' ? (had as Record<string, unknown>) : {}, v as Record<string, unknown>);
  }
  return into;
}

/**
 * A standard output that cannot be written (`> /dev/full`, a full disk, a closed pipe) emits 'error' on
 * process.stdout, which nothing heard: Node printed "Unhandled 'error' event" and a stack trace, exit 1. Now one line
 * on stderr (none for EPIPE: the reader left on purpose, as `| head`), the running commands of `llr run` killed,
 * exit 1. `llr serve` / `llr demo` say it and serve on: their log drops what it cannot write (log.ts), and the demo's
 * URL line is one more such line.
 */
function watchStdout(serving: boolean): void {
  let said = false;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (said) return;
    said = true;
    if (err.code !== 'EPIPE') process.stderr.write(`llr: cannot write to standard output: ${err.message.replace(/\s*\n\s*/g, ' ')}\n`);
    if (serving) return;
    void killRunningCommands().finally(() => process.exit(1));
  });
}

async function main(): Promise<void> {
  const [cmd, ...rest] = process.argv.slice(2);
  watchStdout(cmd === 'serve' || cmd === 'demo');
  if ((cmd === 'serve' || cmd === 'run' || cmd === 'demo') && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(HELP);
    return;
  }
  switch (cmd) {
    case 'serve':
      return serve(rest);
    case 'run':
      return run(rest);
    case 'demo':
      return serve(rest, true);
    case 'bench': {
      const { benchCommand } = await import('./bench/command.js');
      return benchCommand(rest);
    }
    case 'workload': {
      const { workloadCommand } = await import('./workload/inspect.js');
      return workloadCommand(rest);
    }
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(HELP);
      return;
    default:
      // One line, as every other usage error: the whole help after it (114 lines) buried the message.
      process.stderr.write(`llr: unknown command ${quoted(cmd)}; known: serve, run, bench, workload, demo (llr --help)\n`);
      process.exitCode = 2;
  }
}

/**
 * A bad command line (a flag's value, an unknown flag, a missing argument): status 2, as the repository's scripts
 * (src/command-line.ts); so is a workload file the reader refuses (--workload, llr workload): bad input, not a failure.
 */
function isUsageError(err: unknown): boolean {
  return err instanceof UsageError || err instanceof WorkloadError || String((err as { code?: unknown })?.code ?? '').startsWith('ERR_PARSE_ARGS');
}

main().catch((err: unknown) => {
  const usage = isUsageError(err);
  const help = usage && !(err instanceof WorkloadError) && ['serve', 'run', 'demo', 'bench', 'workload'].includes(process.argv[2] ?? '') ? ` (llr ${process.argv[2]} --help)` : '';
  // One line, as the help says: parseArgs says a value starting with a dash (`--port -1`) in two. Any control
  // character left (a value quoted by a message that does not cut it) is shown escaped, never sent to the terminal.
  const message = shown(String((err as Error)?.message ?? err).replace(/\s*\n\s*/g, ' '));
  process.stderr.write(`llr: ${message}${help}\n`);
  process.exitCode = usage ? 2 : 1;
});

/**
 * `--store`'s value, refused when it spells `memory` or `:memory:` in other letters: `--store MEMORY` made a SQLite
 * file named MEMORY where an in-memory store was meant (outside attack atk39 F4). A file of such a name is still
 * `./MEMORY`.
 */
export function storeSpec(spec: string): string {
  // SQLite opened ' lead.db' as 'lead.db', then the store looked for the name as given and failed (exit 1, a file made
  // under another name; outside attack atk43 F1).
  if (spec !== spec.trim()) throw new UsageError(`--store ${quoted(spec)} begins or ends with white space; a file name with it is not taken`);
  const lower = spec.toLowerCase();
  if ((lower === 'memory' || lower === ':memory:') && spec !== lower) {
    throw new UsageError(`--store ${quoted(spec)}: the in-memory stores are 'memory' and ':memory:', in lower case; a file of that name is './${spec}'`);
  }
  return spec;
}

/**
 * A URL as llr prints it: its user information, its query and its fragment hidden as `***` (a password, an
 * `?api_key=…` some gateways take, an `#access_token=…`), read as text so that one that does not parse is hidden
 * too; the rest as given.
 */
function withoutSecrets(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:[/\\]*)[^/\\?#]*@/i, '$1***@')
    .replace(/\?[^#]+/, '?***')
    .replace(/#.+$/, '#***');
}
