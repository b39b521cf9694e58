/**
 * The tool-loop half of `npm run bench:overhead`: what the server adds to
 * one tool call, against the raw `ws` echo round trip measured in the same
 * run. A long-lived run (`response.append` → the next model call's first
 * `response.output_item.done`) and a ws-mode chain (`response.create` with
 * `previous_response_id` → the same event), both over a tool loop of
 * `steps` sequential calls with an instant model, each tool output padded to
 * `outputBytes` so the conversation grows as a real one does (what makes a
 * per-step cost that grows with the conversation visible). Between loops,
 * echo round trips of a frame the size of the append frame.
 *
 * Leaves out statistics and printing (overhead.ts).
 */
import WebSocket from 'ws';
import { LONG_LIVED_BETA } from '../protocol/designs.js';
import type { ServerEvent } from '../protocol/events.js';

export const SHELL_TOOL = {
  type: 'function',
  name: 'exec_command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
} as const;

export function openWs(url: string, headers: Record<string, string> = {}): Promise<WebSocket> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/v1/responses', { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

export function openLongLived(url: string): Promise<WebSocket> {
  return openWs(url, { 'OpenAI-Beta': LONG_LIVED_BETA });
}

/** Per step (1-based index of the tool call answered), the ms from sending the answer to the next call's first item. */
export interface LoopSamples {
  /** samples[i] answers tool call i + 1. */
  samples: number[];
  frameBytes: number;
  /** Bytes of each pause's `response.done` frame (long-lived), in order. */
  pauseBytes: number[];
  /** When each sample's `output_item.done` arrived (performance.now()), in order. */
  doneAt: number[];
}

/** An event frame's `type`, read from its head (the server writes `type` first); the whole frame parsed otherwise. */
export function eventType(data: Buffer): string {
  const head = /^\{"type":"([a-z_.]+)"/.exec(data.toString('latin1', 0, 64));
  return head ? head[1]! : (JSON.parse(data.toString()) as { type: string }).type;
}

function prompt(steps: number): string {
  // The auto policy runs `$ ` lines one at a time; a final message ends the run.
  return `run these one at a time:\n${Array.from({ length: steps }, (_, i) => `$ echo ${i}`).join('\n')}`;
}

/**
 * What a server sent a loop, for replaying it (frame-server.ts `script`):
 * one turn per frame the driver sent, each a list of writes, each a list of
 * frames. A turn's writes are split after each function call's
 * `output_item.done`, where the server flushes its batch (transport/batch.ts,
 * `readyToRun`); the rest of a turn is one write.
 */
export type Recording = string[][][];

/**
 * One tool loop. `answer(callId, output)` sends the tool output (an append,
 * or a new create chained on the last response id) and returns the frame;
 * `awaitsAnswer` tells when a response has ended with a call to answer.
 * `cancelAfter`: the run never ends by itself (every model call is a tool
 * call); after `steps` answered calls it is cancelled instead of answered.
 * `record`: filled with what the server sent, turn by turn (Recording).
 */
function loop(
  ws: WebSocket,
  steps: number,
  outputBytes: number,
  first: string,
  answer: (callId: string, output: string, lastResponseId: string) => string,
  awaitsAnswer: (type: string) => boolean,
  cancelAfter = false,
  record?: Recording,
): Promise<LoopSamples> {
  const output = 'x'.repeat(Math.max(0, outputBytes - 1)) + '\n';
  const samples: number[] = [];
  let sentAt = 0;
  let waiting = false;
  let frameBytes = 0;
  let callId: string | null = null;
  let responseId = '';
  const pauseBytes: number[] = [];
  const doneAt: number[] = [];
  const send = (frame: string) => {
    record?.push([[]]);
    ws.send(frame);
  };
  return new Promise((resolve, reject) => {
    ws.on('message', function onMessage(data: Buffer) {
      const at = performance.now();
      if (record) record.at(-1)!.at(-1)!.push(data.toString());
      // The driver decodes only the frames it acts on (a call's item, the response id, an error), so its own
      // garbage — a 5 KB pause snapshot parsed per step — does not land in the steps it measures as scavenges.
      const type = eventType(data);
      if (type === 'response.done') pauseBytes.push(data.length);
      if (type === 'response.output_item.done') {
        if (waiting) {
          samples.push(at - sentAt);
          doneAt.push(at);
          waiting = false;
        }
        const e = JSON.parse(data.toString()) as Extract<ServerEvent, { type: 'response.output_item.done' }>;
        if (e.item.type === 'function_call') {
          callId = e.item.call_id;
          record?.at(-1)!.push([]);
        }
        return;
      }
      if (type === 'response.created') responseId = (JSON.parse(data.toString()) as Extract<ServerEvent, { type: 'response.created' }>).response.id;
      if (type === 'error' || type === 'response.failed' || (cancelAfter && type === 'response.incomplete')) {
        ws.off('message', onMessage);
        reject(new Error(`server error: ${data.toString().slice(0, 500)}`));
        return;
      }
      if (awaitsAnswer(type) && callId !== null && cancelAfter && samples.length === steps) {
        callId = null;
        send('{"type":"response.cancel"}');
      } else if (awaitsAnswer(type) && callId !== null) {
        const frame = answer(callId, output, responseId);
        callId = null;
        frameBytes = Buffer.byteLength(frame);
        waiting = true;
        sentAt = performance.now();
        send(frame);
      } else if (type === 'response.completed' && callId === null) {
        ws.off('message', onMessage);
        if (samples.length !== steps) reject(new Error(`expected ${steps} tool calls, saw ${samples.length}`));
        else resolve({ samples, frameBytes, pauseBytes, doneAt });
        trimRecording(record);
      } else if (cancelAfter && type === 'response.cancelled') {
        ws.off('message', onMessage);
        resolve({ samples, frameBytes, pauseBytes, doneAt });
        trimRecording(record);
      }
    });
    send(first);
  });
}

/** Drops the empty write a turn ending in a call's `output_item.done` leaves open. */
function trimRecording(record: Recording | undefined): void {
  for (const turn of record ?? []) if (turn.length > 1 && turn.at(-1)!.length === 0) turn.pop();
}

/** A long-lived answer: the tool output appended to the paused run. */
const appendOutput = (callId: string, output: string) => JSON.stringify({ type: 'response.append', input: [{ type: 'function_call_output', call_id: callId, output }] });
/** A long-lived run waits for its answer once its pause's `response.done` arrives. */
const paused = (type: string) => type === 'response.done';

/** A long-lived run of `steps` tool calls: each answered with `response.append`. */
export function longLivedLoop(ws: WebSocket, steps: number, outputBytes: number, record?: Recording): Promise<LoopSamples> {
  const create = JSON.stringify({ type: 'response.create', model: 'sim-model', input: prompt(steps), parallel_tool_calls: false, tools: [SHELL_TOOL] });
  return loop(ws, steps, outputBytes, create, appendOutput, paused, false, record);
}

/**
 * A long-lived run of any number of tool calls: `tool_choice: 'required'`
 * makes the auto policy call the shell tool at every model call (a prompt's
 * `$ ` lines stop at 64 calls), each answered with `response.append`; after
 * `steps` answers the run is cancelled.
 */
export function longLivedRun(ws: WebSocket, steps: number, outputBytes: number): Promise<LoopSamples> {
  const create = JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'run the shell tool until told to stop', tool_choice: 'required', parallel_tool_calls: false, tools: [SHELL_TOOL] });
  return loop(ws, steps, outputBytes, create, appendOutput, paused, true);
}

/** A ws-mode chain of `steps` tool calls: each answered with a `response.create` on `previous_response_id`. */
export function wsChainLoop(ws: WebSocket, steps: number, outputBytes: number, record?: Recording): Promise<LoopSamples> {
  const base = { type: 'response.create', model: 'sim-model', store: false, parallel_tool_calls: false, tools: [SHELL_TOOL] };
  return loop(
    ws,
    steps,
    outputBytes,
    JSON.stringify({ ...base, input: prompt(steps) }),
    (callId, output, prev) =>
      JSON.stringify({ ...base, previous_response_id: prev, input: [{ type: 'function_call_output', call_id: callId, output }] }),
    (type) => type === 'response.completed',
    false,
    record,
  );
}

/**
 * Loads a recording on a frame-server connection (frame-server.ts): its next
 * frames are answered with the recorded turns, so running the same loop on
 * it replays the exchange from a server that does no work for it.
 */
export function loadScript(ws: WebSocket, recording: Recording): Promise<void> {
  return new Promise((resolve, reject) => {
    ws.once('message', (data: Buffer) => {
      const ack = JSON.parse(data.toString()) as { type?: string; turns?: number };
      if (ack.type === 'script.loaded' && ack.turns === recording.length) resolve();
      else reject(new Error(`frame server: unexpected answer to a script: ${data.toString().slice(0, 200)}`));
    });
    ws.send(JSON.stringify({ script: recording }));
  });
}

/** `n` sequential echo round trips of `frame`, ms each. */
export async function echoRounds(ws: WebSocket, frame: string, n: number): Promise<number[]> {
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
