// A client for the event-loop stall test, run in its own process so that
// building and sending 16 MiB costs the server's loop nothing. Usage:
//   node big-client.mjs URL http|ws|append CHARS KIND(prose|run)
// Prints one JSON line: {"status": ..., "input_tokens": ...}.
import WebSocket from 'ws';

const [url, how, chars, kind] = process.argv.slice(2);
const n = Number(chars);
const WORDS = 'lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor ';
const input = kind === 'run' ? 'a'.repeat(n) : WORDS.repeat(Math.floor(n / WORDS.length));
const done = (status, usage) => {
  process.stdout.write(`${JSON.stringify({ status, input_tokens: usage?.input_tokens ?? null })}\n`);
  process.exit(0);
};

if (how === 'http') {
  const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input, store: false }) });
  const body = await res.json();
  done(res.status === 200 ? body.status : `http ${res.status}`, body.usage);
} else {
  const headers = how === 'append' ? { 'OpenAI-Beta': 'responses_websockets=2026-02-04' } : {};
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/responses`, { headers });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } }];
  ws.on('message', (data) => {
    const e = JSON.parse(data.toString());
    if (e.type === 'error') done(`error ${e.error.code}`);
    if (e.type === 'response.done') ws.send(JSON.stringify({ type: 'response.append', input: [{ type: 'function_call_output', call_id: e.response.pending_tool_calls[0], output: input }] }));
    if (e.type === 'response.completed' || e.type === 'response.failed' || e.type === 'response.incomplete') done(e.response.status, e.response.usage);
  });
  if (how === 'append') ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input: 'please lookup the value', tools, store: false }));
  else ws.send(JSON.stringify({ type: 'response.create', model: 'sim-model', input, store: false }));
}
