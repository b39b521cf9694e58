/**
 * `npm run bench:overhead`: what the long-lived protocol adds to a tool call
 * round trip. With an instant model (no decode, no prefill), it measures the
 * time from sending `response.append` to the first event of the resumed
 * response, and beside it, in the same run, a raw `ws` echo round trip of a
 * frame of the same size to an echo server in its own process. Prints p50
 * and p99 of both and their ratio, and the machine it ran on.
 *
 * Flags: --appends N (default 2000, in runs of 50 tool calls), --json.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import type { ServerEvent } from '../protocol/events.js';
import { LONG_LIVED_BETA } from '../protocol/designs.js';
import { spawnFrameServer, spawnServer } from './processes.js';
import { round, summary } from './stats.js';

const { values } = parseArgs({
  options: { appends: { type: 'string', default: '2000' }, json: { type: 'boolean' } },
});
/** Tool calls per run: under the auto policy's backstop of 64 calls per user message. */
const perRun = 50;
const runs = Math.ceil(Number(values.appends) / perRun);

function open(url: string, headers: Record<string, string> = {}): Promise<WebSocket> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/v1/responses', { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

/** One long-lived run with `n` sequential tool calls; returns append → first resumed event, ms. */
async function longLivedRun(ws: WebSocket, n: number): Promise<{ samples: number[]; frameBytes: number }> {
  const lines = Array.from({ length: n }, (_, i) => `$ echo ${i}`).join('\n');
  const samples: number[] = [];
  let sentAt = 0;
  let frameBytes = 0;
  let waitingFirst = false;
  return new Promise((resolve, reject) => {
    ws.on('message', function onMessage(data) {
      const e = JSON.parse(data.toString()) as ServerEvent;
      if (waitingFirst) {
        samples.push(performance.now() - sentAt);
        waitingFirst = false;
      }
      if (e.type === 'response.done') {
        const callId = e.response.pending_tool_calls![0]!;
        const frame = JSON.stringify({ type: 'response.append', input: [{ type: 'function_call_output', call_id: callId, output: 'ok\n' }] });
        frameBytes = Buffer.byteLength(frame);
        waitingFirst = true;
        sentAt = performance.now();
        ws.send(frame);
      } else if (e.type === 'response.completed') {
        ws.off('message', onMessage);
        resolve({ samples, frameBytes });
      } else if (e.type === 'error' || e.type === 'response.failed') {
        reject(new Error(`server error: ${JSON.stringify(e)}`));
      }
    });
    ws.send(
      JSON.stringify({
        type: 'response.create',
        model: 'sim-model',
        input: `run these one at a time:\n${lines}`,
        parallel_tool_calls: false,
        tools: [{ type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } }],
      }),
    );
  });
}

async function echoRound(ws: WebSocket, frame: string, n: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await new Promise<void>((resolve) => {
      ws.once('message', () => resolve());
      ws.send(frame);
    });
    samples.push(performance.now() - t);
  }
  return samples;
}

async function main(): Promise<void> {
  const server = await spawnServer(['--instant']);
  // The frame server echoes every frame that is not a blast request.
  const echo = await spawnFrameServer();
  try {
    const ll = await open(server.url, { 'OpenAI-Beta': LONG_LIVED_BETA });
    const ew = await open(echo.url);
    const appendMs: number[] = [];
    const echoMs: number[] = [];
    // Warm-up (JIT, tokenizer tables) is not measured.
    const warm = await longLivedRun(ll, 50);
    await echoRound(ew, 'x'.repeat(warm.frameBytes), 200);
    for (let r = 0; r < runs; r++) {
      const { samples, frameBytes } = await longLivedRun(ll, perRun);
      appendMs.push(...samples);
      echoMs.push(...(await echoRound(ew, 'x'.repeat(frameBytes), perRun)));
    }
    ll.close();
    ew.close();
    const a = summary(appendMs);
    const e = summary(echoMs);
    const result = {
      machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version, platform: `${os.platform()} ${os.release()}` },
      config: { model: 'instant (no decode, no prefill)', appends: appendMs.length, runs },
      append_to_resume_ms: { p50: round(a.p50), p99: round(a.p99), mean: round(a.mean) },
      ws_echo_rtt_ms: { p50: round(e.p50), p99: round(e.p99), mean: round(e.mean) },
      ratio: { p50: round(a.p50 / e.p50, 2), p99: round(a.p99 / e.p99, 2) },
    };
    if (values.json) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    } else {
      const out = [
        `machine: ${result.machine.cpus} × ${result.machine.cpu}, node ${result.machine.node}, ${result.machine.platform}`,
        `samples: ${appendMs.length} appends over ${runs} long-lived runs, instant model; same count of echo round trips`,
        ``,
        `                          p50 ms    p99 ms`,
        `append → resumed event   ${fmt(a.p50)}  ${fmt(a.p99)}`,
        `raw ws echo round trip   ${fmt(e.p50)}  ${fmt(e.p99)}`,
        `ratio                    ${fmt(a.p50 / e.p50)}× ${fmt(a.p99 / e.p99)}×`,
      ];
      process.stdout.write(`${out.join('\n')}\n`);
    }
  } finally {
    await Promise.all([server.stop(), echo.stop()]);
  }
}

function fmt(x: number): string {
  return x.toFixed(3).padStart(8);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:overhead failed: ${(err as Error).message}\n`);
  process.exitCode = 1;
});
