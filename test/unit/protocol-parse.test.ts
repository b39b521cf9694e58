/**
 * The edge parser: frames and bodies become typed events or a WireError that
 * names the param. No sockets.
 */
import { describe, expect, it } from 'vitest';
import { WireError, toWireError } from '../../src/protocol/errors.js';
import { MAX_MODEL_CHARS, parseClientFrame, parseCreateBody } from '../../src/protocol/parse.js';

function fails(fn: () => unknown): WireError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WireError);
    return err as WireError;
  }
  throw new Error('expected a WireError');
}

describe('parseClientFrame', () => {
  it('parses a create with defaults filled in', () => {
    const e = parseClientFrame(JSON.stringify({ type: 'response.create', model: 'm', input: 'hi', client_metadata: { x: 1 } }));
    expect(e).toMatchObject({
      type: 'response.create',
      model: 'm',
      input: [{ type: 'message', role: 'user', content: 'hi' }],
      store: true,
      generate: true,
      parallel_tool_calls: true,
      tool_choice: 'auto',
      previous_response_id: null,
    });
  });

  it('parses append, cancel and processed', () => {
    expect(parseClientFrame('{"type":"response.append","input":[{"type":"function_call_output","call_id":"c","output":"o"}]}')).toMatchObject({
      type: 'response.append',
      input: [{ call_id: 'c' }],
    });
    expect(parseClientFrame('{"type":"response.cancel"}')).toEqual({ type: 'response.cancel', response_id: null });
    expect(parseClientFrame('{"type":"response.processed"}')).toEqual({ type: 'response.processed' });
  });

  it.each([
    ['{oops', 'invalid_json', null],
    ['[1,2]', 'invalid_type', null],
    ['{"no":"type"}', 'missing_required_parameter', 'type'],
    // Sent, of another type: the wrong type, not a missing one (outside conformance tester atk58 F5).
    ['{"type":5}', 'invalid_type', 'type'],
    ['{"type":"response.nope"}', 'unknown_event_type', 'type'],
    ['{"type":"response.append"}', 'missing_required_parameter', 'input'],
    ['{"type":"response.create","model":"m","input":[{"type":"message","role":"user"}]}', 'missing_required_parameter', 'input[0].content'],
    ['{"type":"response.create","model":"m","input":[{"type":"function_call","call_id":"c","name":"n","arguments":{}}]}', 'invalid_type', 'input[0].arguments'],
    ['{"type":"response.create","model":"m","tool_choice":5}', 'invalid_type', 'tool_choice'],
    ['{"type":"response.create","model":"m","tool_choice":"maybe"}', 'invalid_value', 'tool_choice'],
    ['{"type":"response.create","model":"m","metadata":{"k":1}}', 'invalid_type', 'metadata.k'],
    ['{"type":"response.create","model":"m","store":"yes"}', 'invalid_type', 'store'],
    // Found by the chaos fuzzer: a non-string description reached the router and was a 500.
    ['{"type":"response.create","model":"m","tools":[{"type":"function","name":"f","description":0}]}', 'invalid_type', 'tools[0].description'],
    ['{"type":"response.create","model":"m","tools":[{"type":"function","name":"f","description":{"a":1}}]}', 'invalid_type', 'tools[0].description'],
    // An item's status is the API's enum: input_items lists it as sent, where typed clients decode it.
    ['{"type":"response.create","model":"m","input":[{"role":"user","content":"a","status":"bogus"}]}', 'invalid_value', 'input[0].status'],
    ['{"type":"response.create","model":"m","input":[{"type":"function_call","call_id":"c","name":"n","arguments":"{}","status":"failed"}]}', 'invalid_value', 'input[0].status'],
    ['{"type":"response.create","model":"m","input":[{"type":"function_call_output","call_id":"c","output":"o","status":1}]}', 'invalid_type', 'input[0].status'],
    ['{"type":"response.append","input":[{"type":"reasoning","summary":[],"status":"thinking"}]}', 'invalid_value', 'input[0].status'],
    // Enumerated fields the Response echoes: a value outside the API's enum is refused, not echoed.
    ['{"type":"response.create","model":"m","service_tier":"bogus"}', 'invalid_value', 'service_tier'],
    ['{"type":"response.create","model":"m","reasoning":{"effort":"extreme"}}', 'invalid_value', 'reasoning.effort'],
    ['{"type":"response.create","model":"m","reasoning":{"summary":"none"}}', 'invalid_value', 'reasoning.summary'],
    ['{"type":"response.create","model":"m","tool_choice":{"type":"allowed_tools","mode":"bogus","tools":[]}}', 'invalid_value', 'tool_choice.mode'],
    ['{"type":"response.create","model":"m","tool_choice":{"type":"allowed_tools","tools":[]}}', 'missing_required_parameter', 'tool_choice.mode'],
    ['{"type":"response.create","model":"m","tool_choice":{"type":"allowed_tools","mode":"auto","tools":{}}}', 'invalid_type', 'tool_choice.tools'],
  ])('%s → %s (%s)', (frame, code, param) => {
    const err = fails(() => parseClientFrame(frame));
    expect(err.code).toBe(code);
    expect(err.param).toBe(param);
    expect(err.toEvent()).toMatchObject({ type: 'error', status: 400, error: { type: 'invalid_request_error', code, param } });
  });
});

describe('parseCreateBody', () => {
  it("a message's content or a tool output left out is said missing, not of the wrong type (outside conformance tester atk98 F2)", () => {
    const said = (body: object) => {
      try {
        parseCreateBody(body);
      } catch (err) {
        return { code: (err as WireError).code, message: (err as WireError).message };
      }
      throw new Error('expected a refusal');
    };
    expect(said({ model: 'm', input: [{ role: 'user' }] })).toEqual({ code: 'missing_required_parameter', message: "Missing required parameter: 'input[0].content'." });
    expect(said({ model: 'm', input: [{ type: 'function_call_output', call_id: 'c1' }] })).toEqual({ code: 'missing_required_parameter', message: "Missing required parameter: 'input[0].output'." });
    expect(said({ model: 'm', input: [{ role: 'user', content: 5 }] })).toEqual({ code: 'invalid_type', message: "Invalid 'input[0].content': expected a string or an array of content parts." });
  });

  it('carries unknown item types (reasoning, hosted calls) through untouched', () => {
    const reasoning = { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'abc' };
    expect(parseCreateBody({ model: 'm', input: [reasoning] }).input[0]).toBe(reasoning);
    // The item statuses of the API (or none, or null) are accepted; a hosted call's own statuses are not checked.
    for (const status of ['in_progress', 'completed', 'incomplete', null, undefined]) {
      expect(() => parseCreateBody({ model: 'm', input: [{ role: 'user', content: 'a', status }, { ...reasoning, status }] })).not.toThrow();
    }
    expect(() => parseCreateBody({ model: 'm', input: [{ type: 'web_search_call', id: 'ws_1', status: 'searching' }] })).not.toThrow();
  });

  it("accepts every value of the API's enums for service_tier and reasoning (echoed on the Response)", () => {
    // openai-node 7's ServiceTier adds 'fast' and 'ultrafast' (they were refused).
    for (const service_tier of ['auto', 'default', 'flex', 'scale', 'priority', 'fast', 'ultrafast', null]) expect(parseCreateBody({ model: 'm', service_tier }).service_tier).toBe(service_tier);
    for (const effort of ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max', null]) {
      for (const summary of ['auto', 'concise', 'detailed', null]) expect(parseCreateBody({ model: 'm', reasoning: { effort, summary } }).reasoning).toEqual({ effort, summary });
    }
  });

  it('takes a model name up to MAX_MODEL_CHARS and refuses a longer one, naming the param', () => {
    expect(parseCreateBody({ model: 'm'.repeat(MAX_MODEL_CHARS), input: 'hi' }).model).toHaveLength(MAX_MODEL_CHARS);
    const err = (() => {
      try {
        parseCreateBody({ model: '\ud800'.repeat(MAX_MODEL_CHARS + 1), input: 'hi' });
      } catch (e) {
        return e as WireError;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(WireError);
    expect(err!.toEvent()).toMatchObject({ status: 400, error: { code: 'string_above_max_length', param: 'model' } });
  });
});

describe('toWireError', () => {
  it('reports anything that is not a WireError as the server fault', () => {
    const e = toWireError(new TypeError('boom'));
    expect(e.code).toBe('server_error');
    expect(e.status).toBe(500);
    expect(e.cause).toBeInstanceOf(TypeError);
  });
});
