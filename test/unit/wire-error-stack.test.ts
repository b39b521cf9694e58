/**
 * A client's mistake is reported to the client, by code and message: its
 * error carries no stack trace, whose capture was most of what refusing a
 * frame cost (a flood of 7-byte frames that are not JSON, ~30 µs each, the
 * JSON.parse SyntaxError's stack and the WireError's about half each, held
 * the event loop; outside attack). A server fault keeps its stack for the log.
 */
import { describe, expect, it } from 'vitest';
import { WireError } from '../../src/protocol/errors.js';
import { parseJsonText } from '../../src/protocol/json-text.js';

const frames = (err: Error) => (err.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l)).length;

describe('stack traces of wire errors', () => {
  it('a client error (4xx) has none; a server error (5xx) keeps its own', () => {
    const before = Error.stackTraceLimit;
    expect(frames(new WireError('invalid_json'))).toBe(0);
    expect(frames(new WireError('queue_full'))).toBe(0);
    expect(frames(new WireError('server_error'))).toBeGreaterThan(0);
    expect(Error.stackTraceLimit).toBe(before);
  });

  it("a text that is not JSON: the refusal and the parser's SyntaxError behind it have none; the limit is restored", () => {
    const before = Error.stackTraceLimit;
    let caught: unknown;
    try {
      parseJsonText('x', 'frame');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(WireError);
    expect((caught as WireError).code).toBe('invalid_json');
    expect(frames(caught as Error)).toBe(0);
    expect(frames((caught as Error).cause as Error)).toBe(0);
    expect(Error.stackTraceLimit).toBe(before);
    // Valid JSON is parsed as before.
    expect(parseJsonText('{"a":[1]}', 'frame')).toEqual({ a: [1] });
  });
});
