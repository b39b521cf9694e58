/**
 * The auto policy as an agent model that uses its tools: it calls a declared
 * tool when the message plainly asks for what the tool does, fills string
 * slots from the message, answers in text once the outputs are in, and calls
 * a tool on every model call while `tool_choice` forces one.
 */
import { describe, expect, it } from 'vitest';
import type { PlannedOutput } from '../../src/model/policies.js';
import { autoPolicy } from '../../src/model/policies.js';
import { MAX_COMMAND_CHARS } from '../../src/model/auto-policy.js';
import { mulberry32 } from '../../src/model/rng.js';
import { extract, relevance } from '../../src/model/tool-match.js';
import type { FunctionTool, InputItem } from '../../src/protocol/objects.js';
import { call, EXEC_COMMAND, output, request, user, validate } from './model-fixtures.js';

function planAuto(items: InputItem[], over: Parameters<typeof request>[0] = {}): PlannedOutput {
  return autoPolicy().plan(request({ items, ...over }), mulberry32(7));
}

function tool(name: string, description: string | null, properties: Record<string, unknown>, required = Object.keys(properties)): FunctionTool {
  return { type: 'function', name, description, parameters: { type: 'object', properties, required, additionalProperties: false }, strict: true };
}

const weather = tool('get_weather', 'Get the current weather for a location.', { location: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } });
const fx = tool('fx', 'Convert an amount between currencies using exchange rates.', { amount: { type: 'number' } });
const readFile = tool('readFile', 'Read a file from the workspace.', { path: { type: 'string' } });
const search = tool('web_search_docs', 'Search the documentation.', { query: { type: 'string', maxLength: 30 } });
const fetchPage = tool('fetch_page', 'Download a web page.', { url: { type: 'string' } });

function calls(p: PlannedOutput) {
  return p.items.map((i) => (i.type === 'function_call' ? { name: i.name, args: JSON.parse(i.arguments) as Record<string, unknown> } : { text: i.text }));
}

describe('auto policy: tools the message asks for', () => {
  it('calls get_weather for "What\'s the weather in San Francisco?" with the location, then answers in text', () => {
    const ask = user("What's the weather in San Francisco?");
    const first = planAuto([ask], { tools: [fx, weather] });
    expect(calls(first)).toEqual([{ name: 'get_weather', args: { location: 'San Francisco', unit: 'celsius' } }]);
    expect(validate(weather.parameters!, calls(first)[0]!.args as never)).toEqual([]);
    const done = planAuto([ask, call('c1', 'get_weather', '{"location":"San Francisco"}'), output('c1', '18°C, fog')], { tools: [fx, weather] });
    expect(done.items).toEqual([{ type: 'message', text: 'Called 1 tool.\n- `get_weather` → 18°C, fog' }]);
  });

  it('matches name words in any case style, plurals, and two description words', () => {
    expect(relevance(weather, 'weather forecast please')).toBeGreaterThan(0);
    expect(relevance(readFile, 'can you read the files in src?')).toBeGreaterThan(0);
    expect(relevance(fx, 'What is the exchange rate for 100 dollars, and convert it')).toBeGreaterThan(0);
    expect(relevance(fx, 'What is the rate?')).toBe(0);
  });

  it('does not call a tool for generic verbs or unrelated messages', () => {
    for (const text of ['get me a coffee', 'Tell me a joke', 'my_get_weather_helper is broken']) {
      expect(planAuto([user(text)], { tools: [weather, fx] }).items[0]?.type, text).toBe('message');
    }
    // Shell tools keep the `$ ` rule: words alone never run a command.
    expect(planAuto([user('run a command for me')], { tools: [EXEC_COMMAND] }).items[0]?.type).toBe('message');
  });

  it('fills path, query and url slots from the message', () => {
    expect(calls(planAuto([user('Please read file src/server.ts and explain it')], { tools: [readFile] }))).toEqual([{ name: 'readFile', args: { path: 'src/server.ts' } }]);
    expect(calls(planAuto([user('search the docs for prefix caching?')], { tools: [search] }))).toEqual([{ name: 'web_search_docs', args: { query: 'search the docs for prefix cac' } }]);
    expect(calls(planAuto([user('fetch the page at https://example.com/a?b=1.')], { tools: [fetchPage] }))).toEqual([{ name: 'fetch_page', args: { url: 'https://example.com/a?b=1' } }]);
  });

  it('extracts locations with or without capitals', () => {
    expect(extract('location', 'Weather in New York City today?')).toBe('New York City');
    expect(extract('location', 'is it raining in paris right now')).toBe('paris right now');
    expect(extract('location', 'how is the weather')).toBeUndefined();
  });

  it('calls every asked tool at once with parallel_tool_calls, one at a time without', () => {
    const ask = user('What is the weather in Oslo, and convert 10 euros using exchange rates?');
    expect(calls(planAuto([ask], { tools: [weather, fx], parallel_tool_calls: true })).map((c) => c.name)).toEqual(['get_weather', 'fx']);
    const second = planAuto([ask, call('c1', 'get_weather', '{}'), output('c1', 'cold')], { tools: [weather, fx] });
    expect(calls(second).map((c) => c.name)).toEqual(['fx']);
  });
});

describe('auto policy: forced tools', () => {
  it('calls the named function on every model call, even after it ran', () => {
    let items: InputItem[] = [user('hello')];
    for (let i = 0; i < 3; i++) {
      const p = planAuto(items, { tools: [weather, fx], tool_choice: { type: 'function', name: 'fx' } });
      expect(calls(p).map((c) => c.name)).toEqual(['fx']);
      items = [...items, call(`c${i}`, 'fx', '{}'), output(`c${i}`, 'ok')];
    }
  });

  it('"required" calls a tool every time: the asked one, else the first', () => {
    const ask = user('weather in Rome?');
    const after = [ask, call('c1', 'get_weather', '{}'), output('c1', 'sunny')];
    expect(calls(planAuto(after, { tools: [fx, weather], tool_choice: 'required' }))[0]).toMatchObject({ name: 'get_weather', args: { location: 'Rome' } });
    expect(calls(planAuto([user('hi')], { tools: [fx, weather], tool_choice: 'required' }))[0]).toMatchObject({ name: 'fx' });
    // Shell lines that all ran: forced, the shell runs again.
    const shell = [user('$ echo a'), call('s1', 'exec_command', '{"cmd":"echo a"}'), output('s1', 'a')];
    expect(calls(planAuto(shell, { tools: [EXEC_COMMAND], tool_choice: 'required' }))).toEqual([{ name: 'exec_command', args: { cmd: 'echo a' } }]);
  });

  it('obeys allowed_tools: only listed tools, required or auto', () => {
    const allowed = (mode: string) => ({ type: 'allowed_tools', mode, tools: [{ type: 'function', name: 'fx' }] });
    expect(planAuto([user('weather in Rome?')], { tools: [weather, fx], tool_choice: allowed('auto') }).items[0]?.type).toBe('message');
    expect(calls(planAuto([user('weather in Rome?')], { tools: [weather, fx], tool_choice: allowed('required') })).map((c) => c.name)).toEqual(['fx']);
  });

  it('"none" never calls, even when asked', () => {
    expect(planAuto([user('weather in Rome?')], { tools: [weather], tool_choice: 'none' }).items[0]?.type).toBe('message');
  });
});

describe('auto policy: shell command lines', () => {
  it('runs a `$ ` line up to MAX_COMMAND_CHARS as a command, and treats a longer one as text', () => {
    const ok = `echo ${'x'.repeat(MAX_COMMAND_CHARS - 5)}`;
    expect(calls(planAuto([user(`$ ${ok}`)], { tools: [EXEC_COMMAND] }))).toEqual([{ name: 'exec_command', args: { cmd: ok } }]);
    // One unit over: not a command (its arguments would be tokenized in one go by the model), so a text reply.
    const long = `echo ${'x'.repeat(MAX_COMMAND_CHARS - 4)}`;
    const out = planAuto([user(`$ ${long}`)], { tools: [EXEC_COMMAND] });
    expect(out.items.every((i) => i.type === 'message')).toBe(true);
  });
});
