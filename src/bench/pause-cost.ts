/**
 * `node dist/bench/pause-cost.js`: what the server spends building and
 * serialising a long-lived run's full pause snapshot (the default
 * `response.done` of every pause until the run's output passes
 * `--max-pause-snapshot-bytes`, 256 KiB; this bench builds the full one at
 * every step, whatever its size), per pause, as the run grows. In one
 * process, no socket and no model: for each of `--calls` steps one finished
 * `function_call` joins the Response's output (and a message every tenth
 * step), then the pause's event is built as the run builds it
 * (engine/response.ts `snapshot`) and turned into what the transport writes
 * (protocol/event-json.ts `eventPieces`, `piecesLength`). The socket write and
 * the client's parse of those bytes are left out: they are the bytes
 * themselves, the same whatever builds them. `--compaction` puts a
 * compaction item (server-side compaction) at the start of the output.
 *
 * Prints the total, the mean per pause over the first and the last tenth of
 * the steps, and the bytes of the last pause's event.
 */
import { intFlag, parseCommandLine } from '../command-line.js';
import { newResponse, snapshot } from '../engine/response.js';
import { parseCreateBody } from '../protocol/parse.js';
import { eventPieces, piecesLength } from '../protocol/event-json.js';
import type { OutputItem } from '../protocol/objects.js';

const COMMAND = {
  name: 'pause-cost',
  usage: `usage: node dist/bench/pause-cost.js [--calls N] [--compaction] [--json]
  --calls N       pauses (one function call each) in the run (5000)
  --compaction    a compaction item first in the output
  --json          the result as JSON
  -h, --help      print this and exit`,
};
const { values } = parseCommandLine(COMMAND, {
  options: { calls: { type: 'string' }, compaction: { type: 'boolean' }, json: { type: 'boolean' } },
});
const calls = intFlag(COMMAND, 'calls', values.calls, 5000, 10, 1_000_000);

const response = newResponse(
  parseCreateBody({
    model: 'gpt-5',
    // A coding agent's few kilobytes of instructions and its one shell tool.
    instructions: 'You are a coding agent. Work in the repository; run commands with exec_command. '.repeat(40),
    input: 'Find where pending tool calls are settled on disconnect.',
    tools: [
      {
        type: 'function',
        name: 'exec_command',
        description: 'Runs a shell command in the workspace and returns its output.',
        parameters: { type: 'object', properties: { cmd: { type: 'string', description: 'The shell command to run.' } }, required: ['cmd'], additionalProperties: false },
        strict: true,
      },
    ],
  }),
  Date.now(),
);
const output = response.output as OutputItem[];
if (values.compaction) output.push({ id: 'cmp_0', type: 'compaction', encrypted_content: 'x'.repeat(2000) });

const perPause: number[] = [];
let lastBytes = 0;
const t0 = performance.now();
for (let step = 0; step < calls; step++) {
  if (step % 10 === 9) {
    output.push({ id: `msg_${step}`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `Step ${step}: the "cache" — état ✓ \u2028 done.`, annotations: [], logprobs: [] }] });
  }
  output.push({ id: `fc_${step}`, type: 'function_call', call_id: `call_${step}`, name: 'exec_command', arguments: JSON.stringify({ cmd: `rg -n "pending" src/engine/run${step}.ts` }), status: 'completed' });
  const s = performance.now();
  response.pending_tool_calls = [`call_${step}`];
  const event = { type: 'response.done', response: snapshot(response), sequence_number: 3 * step };
  lastBytes = piecesLength(eventPieces(event));
  delete response.pending_tool_calls;
  perPause.push(performance.now() - s);
}
const totalMs = performance.now() - t0;
const tenth = Math.max(1, Math.floor(calls / 10));
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const result = {
  calls,
  compaction: values.compaction === true,
  total_ms: Math.round(totalMs),
  first_tenth_ms_per_pause: Number(mean(perPause.slice(0, tenth)).toFixed(4)),
  last_tenth_ms_per_pause: Number(mean(perPause.slice(-tenth)).toFixed(4)),
  last_event_bytes: lastBytes,
};
if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
else {
  process.stdout.write(
    `${calls} pauses${result.compaction ? ' (compaction item first)' : ''}: ${result.total_ms} ms; per pause ${result.first_tenth_ms_per_pause} ms (first tenth) → ${result.last_tenth_ms_per_pause} ms (last tenth); last event ${lastBytes} bytes\n`,
  );
}
