/**
 * The pure edge checks: the JSON depth scan (strings, escapes and brackets
 * inside strings must not count; it must agree with a real parse) and the
 * Host/Origin guard's decisions.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { WireError } from '../../src/protocol/errors.js';
import { checkJsonDepth, parseJsonText } from '../../src/protocol/json-text.js';
import { createGuard, isLoopbackAddress } from '../../src/transport/guard.js';

/** Depth by a real parse (recursive; fine for the small values here). */
function depthOf(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  return 1 + Math.max(0, ...Object.values(v as object).map(depthOf));
}

function refusedAt(text: string, max: number): WireError | null {
  try {
    checkJsonDepth(text, max);
    return null;
  } catch (err) {
    return err as WireError;
  }
}

describe('checkJsonDepth', () => {
  const samples = [
    '{}',
    '[]',
    '"plain"',
    '{"a":[1,{"b":[[]]}]}',
    '{"s":"[[[[{{{{"}',
    '{"s":"quote \\" then [[[[ and \\\\"}',
    '{"k\\"[":{"x":"\\\\\\"{{{"}}',
    '[[[[[[[[]]]]]]]]',
    '{"a":{"b":{"c":{"d":{}}}},"e":[{"f":[]}]}',
  ];
  it.each(samples)('agrees with a real parse: %s', (text) => {
    const d = depthOf(JSON.parse(text));
    expect(refusedAt(text, d)).toBeNull();
    if (d > 0) expect(refusedAt(text, d - 1)?.code).toBe('json_too_deep');
  });

  it('names the top-level key whose value is too deep', () => {
    const text = '{"model":"m","input":"[[[[[[","tool_choice":{"a":{"b":{"c":{}}}}}';
    expect(refusedAt(text, 3)).toMatchObject({ code: 'json_too_deep', param: 'tool_choice', status: 400 });
  });

  it('is linear: 100,000 levels and 16 MiB of string are checked without recursion', () => {
    expect(refusedAt('['.repeat(100_000) + ']'.repeat(100_000), 64)?.code).toBe('json_too_deep');
    const big = `{"input":"${'x\\"['.repeat(4 * 1024 * 1024)}"}`;
    expect(refusedAt(big, 2)).toBeNull();
  });

  it('parseJsonText reports bad JSON as invalid_json, after the depth check', () => {
    expect(() => parseJsonText('{"a":', 'body')).toThrow(expect.objectContaining({ code: 'invalid_json' }));
    expect(() => parseJsonText('[[[[', 'frame', 2)).toThrow(expect.objectContaining({ code: 'json_too_deep' }));
  });
});

const req = (headers: Record<string, string>) => ({ headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])) }) as unknown as IncomingMessage;

describe('the Host/Origin guard', () => {
  it('knows loopback listen addresses', () => {
    for (const h of ['127.0.0.1', 'localhost', '::1', '[::1]', '127.1.2.3']) expect(isLoopbackAddress(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '192.168.1.5', 'example.com']) expect(isLoopbackAddress(h), h).toBe(false);
  });

  it('on loopback: loopback Host names pass, others do not; a missing Host passes', () => {
    const guard = createGuard({ loopback: true });
    for (const host of ['localhost', 'LOCALHOST:80', '127.0.0.1:9', '[::1]:8080']) expect(guard(req({ host })), host).toBeNull();
    for (const host of ['evil.example', '127.0.0.1.evil.example', 'localhost.evil:80', '[::2]']) expect(guard(req({ host }))?.code, host).toBe('host_not_allowed');
    expect(guard(req({}))).toBeNull();
    expect(createGuard({ loopback: false })(req({ host: 'evil.example' }))).toBeNull();
    expect(createGuard({ loopback: true, allowHosts: ['*'] })(req({ host: 'evil.example' }))).toBeNull();
  });

  it('Origin: same host and port only, unless allowed; scheme default ports compare equal', () => {
    const guard = createGuard({ loopback: true });
    expect(guard(req({ host: 'localhost:8080', origin: 'http://localhost:8080' }))).toBeNull();
    expect(guard(req({ host: 'localhost', origin: 'http://localhost:80' }))).toBeNull();
    expect(guard(req({ host: 'localhost:8080', origin: 'http://127.0.0.1:8080' }))?.code).toBe('origin_not_allowed');
    expect(guard(req({ host: 'localhost:8080', origin: 'not a url' }))?.code).toBe('origin_not_allowed');
    const allowed = createGuard({ loopback: true, allowOrigins: ['https://app.example/'] });
    expect(allowed(req({ host: 'localhost:8080', origin: 'https://app.example' }))).toBeNull();
    expect(allowed(req({ host: 'localhost:8080', origin: 'https://app.example:444' }))?.code).toBe('origin_not_allowed');
  });
});
