/**
 * `--max-json-depth` has a ceiling (MAX_JSON_DEPTH, src/limit-flags.ts): the server's own JSON work recurses per
 * level, and with every JSON cap lifted (`--max-json-depth Infinity` was taken) a tool schema nested 2,500 deep
 * overflowed the stack in JSON.stringify, answered 500 (outside attack atk39 F5). The flag now refuses more than
 * the ceiling, and a server at the ceiling, with every other JSON count cap lifted, answers bodies nested exactly
 * that deep in every design without a server error. Run on the built CLI, a process of its own, so the stack is
 * the one `llr serve` has.
 */
import { type ChildProcess } from 'node:child_process';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist } from '../helpers/build.js';
import { serveChild, type ServedChild } from '../helpers/serve-child.js';
import { LIMIT_FLAGS, MAX_JSON_DEPTH, limitsFrom } from '../../src/limit-flags.js';
import { UsageError } from '../../src/flags.js';
import { LONG_LIVED_BETA } from '../../src/protocol/designs.js';

const D = MAX_JSON_DEPTH;
const arrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
const objects = (n: number) => '{"a":'.repeat(n) + '{}' + '}'.repeat(n);
/** The deepest nesting of a JSON text. */
function depthOf(text: string): number {
  let d = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') max = Math.max(max, ++d);
    else if (c === ']' || c === '}') d--;
  }
  return max;
}

/** Request bodies nested `depth` deep where a client may put any JSON: a tool's parameters and a text format's schema. */
const bodies = (depth: number, head: string): Record<string, string> => ({
  'tool parameters, arrays': `{${head}"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","x":${arrays(depth - 4)}}}]}`,
  'tool parameters, objects': `{${head}"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","x":${objects(depth - 5)}}}]}`,
  'text.format.schema': `{${head}"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object","x":${arrays(depth - 4)}}}}}`,
});

let served: ServedChild;
const children = new Set<ChildProcess>();
beforeAll(async () => {
  await buildDist();
  served = await serveChild(':memory:', ['--instant', '--max-json-depth', String(D), '--max-json-keys', 'Infinity', '--max-json-containers', 'Infinity', '--max-schema-nodes', 'Infinity', '--max-frame-bytes', '10000000'], children);
});
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('--max-json-depth', () => {
  it(`takes at most ${D}, saying so: Infinity and ${D + 1} are refused`, () => {
    expect(limitsFrom({ 'max-json-depth': String(D) }, {})).toEqual({ maxJsonDepth: D });
    for (const bad of ['Infinity', 'inf', String(D + 1), '1e9']) {
      expect(() => limitsFrom({ 'max-json-depth': bad }, {}), bad).toThrow(UsageError);
      // From the environment, the variable is named too (outside attack atk41 F4: the flag alone was named).
      expect(() => limitsFrom({}, { LLR_MAX_JSON_DEPTH: bad }), bad).toThrow(`--max-json-depth needs an integer >= 1 and <= ${D}, got '${bad}' (from LLR_MAX_JSON_DEPTH)`);
      expect(() => limitsFrom({ 'max-json-depth': bad }, {}), bad).not.toThrow(/from LLR_/);
    }
    expect(LIMIT_FLAGS.find((f) => f.flag === 'max-json-depth')!.help).toContain(`at most ${D}`);
  });

  it(`a server at ${D}, every other JSON cap lifted: HTTP bodies exactly that deep are answered (json, SSE, stored and read back), one level more is json_too_deep`, async () => {
    for (const [what, body] of Object.entries(bodies(D, '"store":true,'))) {
      expect(depthOf(body), what).toBe(D);
      for (const stream of [false, true]) {
        const res = await fetch(`${served.url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: stream ? body.replace('{', '{"stream":true,') : body });
        const text = await res.text();
        expect(res.status, `${what} ${stream}: ${text.slice(0, 200)}`).toBe(200);
        expect(text, what).toContain(stream ? 'event: response.completed' : '"status":"completed"');
        const id = /"id":"(resp_[0-9a-f]+)"/.exec(text)![1]!;
        const back = await fetch(`${served.url}/v1/responses/${id}`);
        expect(back.status).toBe(200);
        expect(depthOf(await back.text()), what).toBeGreaterThan(D - 5);
      }
      const tokens = await fetch(`${served.url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: body.replace('"store":true,', '') });
      expect(tokens.status, what).toBe(200);
    }
    const over = await fetch(`${served.url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: Object.values(bodies(D + 1, ''))[0] });
    expect(over.status).toBe(400);
    expect(((await over.json()) as { error: { code: string } }).error.code).toBe('json_too_deep');
  });

  for (const design of ['ws', 'long-lived'] as const) {
    it(`a server at ${D}: ${design} creates exactly that deep complete, on one socket`, async () => {
      const ws = new WebSocket(`${served.url.replace(/^http/, 'ws')}/v1/responses`, design === 'long-lived' ? { headers: { 'OpenAI-Beta': LONG_LIVED_BETA } } : {});
      await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
      const ends: Array<{ type: string; response?: { status: string }; error?: { code: string } }> = [];
      ws.on('message', (data) => {
        const e = JSON.parse(data.toString()) as { type: string };
        if (e.type === 'response.completed' || e.type === 'response.failed' || e.type === 'error') ends.push(e);
      });
      for (const [what, body] of Object.entries(bodies(D, '"type":"response.create",'))) {
        expect(depthOf(body), what).toBe(D);
        const before = ends.length;
        const ended = new Promise<void>((resolve) => {
          const check = () => {
            if (ends.length > before) {
              ws.off('message', check);
              resolve();
            }
          };
          ws.on('message', check);
        });
        ws.send(body);
        await ended;
        expect(ends.at(-1), what).toMatchObject({ type: 'response.completed', response: { status: 'completed' } });
      }
      expect(ws.readyState).toBe(WebSocket.OPEN);
      ws.close();
    });
  }
});
