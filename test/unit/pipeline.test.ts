/**
 * Pipeline stages without sockets: the safety scan, validation, and the
 * render stage's incremental form matching a full render.
 */
import { describe, expect, it } from 'vitest';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { renderAppend, renderFull } from '../../src/pipeline/render.js';
import { safetyScan } from '../../src/pipeline/safety.js';
import { duplicateItemId, missingToolOutput, pendingCallsOf, validateItems, validateTools } from '../../src/pipeline/validate.js';
import { WireError } from '../../src/protocol/errors.js';
import type { InputItem } from '../../src/protocol/objects.js';

const msg = (text: string): InputItem => ({ type: 'message', role: 'user', content: text });

describe('safety scan', () => {
  it.each([
    ['-----BEGIN RSA PRIVATE KEY-----\n' + 'A'.repeat(64), 'private key'],
    ['id AKIAABCDEFGHIJKLMNOP here', 'AWS access key id'],
    ['token ghp_' + 'x'.repeat(36), 'GitHub token'],
    ['xoxb-12345678901-abcdefghijkl', 'Slack token'],
  ])('flags %s', (text, name) => {
    const m = new RunMetrics();
    const err = (() => {
      try {
        safetyScan([msg('fine'), msg(text)], m);
      } catch (e) {
        return e as WireError;
      }
      return null;
    })();
    expect(err?.code).toBe('content_flagged');
    expect(err?.param).toBe('input[1]');
    expect(err?.message).toContain(name);
  });

  it("passes AWS's documented placeholder keys (ending in EXAMPLE), in short and sliced texts, and still flags a key beside one", () => {
    const m = new RunMetrics();
    const docs = 'aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nAKIAI44QH8DHBEXAMPLE ASIAIOSFODNN7EXAMPLE\n';
    safetyScan([msg(docs), msg('x'.repeat(300 * 1024) + docs)], m);
    expect(() => safetyScan([msg(`${docs} AKIAABCDEFGHIJKLMNOP`)], m)).toThrow(/AWS access key id/);
    // A real-looking key that merely contains EXAMPLE elsewhere, or a longer run ending in it, is still a key.
    expect(() => safetyScan([msg('AKIAEXAMPLE123456789')], m)).toThrow(/AWS access key id/);
  });

  it('passes ordinary code and counts the bytes it read', () => {
    const m = new RunMetrics();
    const code = 'const sk = "sk-test"; // AKIA is a prefix\nexport function key() { return process.env.KEY; }\n';
    safetyScan([msg(code), msg(code)], m);
    expect(m.counters.bytes_scanned).toBeGreaterThanOrEqual(2 * code.length);
  });
});

describe('validation', () => {
  it('refuses an output for a call the context does not hold, naming it', () => {
    const m = new RunMetrics();
    expect(() => validateItems([{ type: 'function_call_output', call_id: 'c9', output: 'x' }], { callIds: new Set(['c1']) }, m)).toThrow(/c9/);
  });

  it('accepts an output answering a call earlier in the same items, and returns the known calls', () => {
    const m = new RunMetrics();
    const known = validateItems(
      [
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' } as InputItem,
        { type: 'function_call_output', call_id: 'c1', output: 'x' },
      ],
      { callIds: new Set() },
      m,
    );
    expect([...known]).toEqual(['c1']);
    expect(m.counters.items_validated).toBe(2);
  });

  it("checks outputs against the known calls without walking them (an append's cost must not grow with the run)", () => {
    const m = new RunMetrics();
    // A long-lived run's context knows every call id so far; an append only asks it about the ids it answers.
    class AskOnly extends Set<string> {
      override [Symbol.iterator](): SetIterator<string> {
        throw new Error('walked the known call ids');
      }
      override forEach(): void {
        throw new Error('walked the known call ids');
      }
    }
    const known = new AskOnly(Array.from({ length: 1000 }, (_, i) => `c${i}`));
    const added = validateItems(
      [
        { type: 'function_call_output', call_id: 'c7', output: 'x' },
        { type: 'function_call', call_id: 'n1', name: 'f', arguments: '{}' } as InputItem,
        { type: 'function_call_output', call_id: 'n1', output: 'y' },
      ],
      { callIds: known },
      m,
    );
    expect([...added]).toEqual(['n1']);
    expect(() => validateItems([{ type: 'function_call_output', call_id: 'c1000', output: 'x' }], { callIds: known }, m)).toThrow(/c1000/);
  });

  it('follows pending calls in time linear in the items: outputs naming a call by item id do not scan every pending call', () => {
    // An input of n calls then n local_shell_call_outputs naming no pending item id: each output scanned every
    // pending call, O(n^2) (20,000 of each, a 2.7 MB body, held a core ~14 s), against n calls answered by call_id.
    const n = 10_000;
    const calls = Array.from({ length: n }, (_, i) => ({ type: 'function_call', call_id: `c${i}`, name: 'f', arguments: '{}' })) as InputItem[];
    const byItemId = Array.from({ length: n }, (_, i) => ({ type: 'local_shell_call_output', id: `none_${i}`, output: '' })) as InputItem[];
    const byCallId = Array.from({ length: n }, (_, i) => ({ type: 'function_call_output', call_id: `x${i}`, output: '' })) as InputItem[];
    const time = (items: InputItem[]) => {
      const start = performance.now();
      const pending = pendingCallsOf(items);
      expect(pending.size).toBe(n);
      return performance.now() - start;
    };
    time([...calls, ...byCallId]); // warm up
    const linear = Math.min(time([...calls, ...byCallId]), time([...calls, ...byCallId]));
    const named = Math.min(time([...calls, ...byItemId]), time([...calls, ...byItemId]));
    expect(named).toBeLessThan(20 * linear + 5);
    // The item id still answers its call: the first pending call with that item id.
    const shells = [
      { type: 'local_shell_call', id: 'lsh_1', call_id: 'l1', action: { type: 'exec', command: ['ls'] }, status: 'completed' },
      { type: 'local_shell_call', id: 'lsh_1', call_id: 'l2', action: { type: 'exec', command: ['ls'] }, status: 'completed' },
    ] as InputItem[];
    const one = { type: 'local_shell_call_output', id: 'lsh_1', output: '' } as InputItem;
    expect([...pendingCallsOf([...shells, one]).keys()]).toEqual(['l2']);
    expect(pendingCallsOf([...shells, one, one]).size).toBe(0);
  });

  it('a function_call_output answers a client call of any type, in the same items or in a rendered context (a ws continuation)', () => {
    const m = new RunMetrics();
    const calls = [
      { type: 'local_shell_call', id: 'lsh_1', call_id: 'l1', action: { type: 'exec', command: ['ls'] }, status: 'completed' },
      { type: 'custom_tool_call', call_id: 'c1', name: 'apply_patch', input: 'x' },
    ] as InputItem[];
    const outputs = [
      { type: 'function_call_output', call_id: 'l1', output: 'a.txt' },
      { type: 'function_call_output', call_id: 'c1', output: 'aborted' },
    ] as InputItem[];
    expect(() => validateItems([...calls, ...outputs], { callIds: new Set() }, m)).not.toThrow();
    const ctx = renderFull(null, [], calls, m);
    expect([...ctx.callIds]).toEqual(['l1', 'c1']);
    expect(() => validateItems(outputs, { callIds: ctx.callIds }, m)).not.toThrow();
  });

  it('follows which client calls still wait for an output: by call_id, any output type, a cut call not at all', () => {
    const items = [
      { type: 'function_call', call_id: 'f1', name: 'f', arguments: '{}' },
      { type: 'custom_tool_call', call_id: 'c1', name: 'apply_patch', input: 'x' },
      { type: 'local_shell_call', id: 'lsh_1', call_id: 'l1', action: { type: 'exec', command: ['ls'] }, status: 'completed' },
      { type: 'function_call', call_id: 'cut', name: 'f', arguments: '{"a', status: 'incomplete' },
      { role: 'user', content: 'between' },
    ] as InputItem[];
    expect([...pendingCallsOf(items).keys()]).toEqual(['f1', 'c1', 'l1']);
    expect(missingToolOutput(pendingCallsOf(items))).toMatchObject({ code: 'missing_tool_output', param: 'input', message: 'No tool output found for function call f1.' });
    const answered = [
      ...items,
      { type: 'function_call_output', call_id: 'f1', output: 'x' },
      // The API's local shell output names its call by `id`: the call's item id here.
      { type: 'local_shell_call_output', id: 'lsh_1', output: '{}' },
    ] as InputItem[];
    expect(missingToolOutput(pendingCallsOf(answered))?.message).toBe('No tool output found for custom tool call c1.');
    expect(missingToolOutput(pendingCallsOf([...answered, { type: 'custom_tool_call_output', call_id: 'c1', output: 'ok' } as InputItem]))).toBeNull();
  });

  it('refuses bad tool definitions', () => {
    const m = new RunMetrics();
    expect(() => validateTools([{ type: 'function', name: 'has space' }], m)).toThrow(WireError);
    expect(() => validateTools([{ type: 'function', name: 'f', parameters: { type: 'array' } }], m)).toThrow(/object/);
    expect(() => validateTools([{ type: 'function', name: 'f' }, { type: 'function', name: 'f' }], m)).toThrow(/Duplicate/);
  });

  it('refuses output_text outside an assistant message; takes arguments that are not JSON (a cut call sent back)', () => {
    const m = new RunMetrics();
    expect(() => validateItems([{ type: 'message', role: 'user', content: [{ type: 'output_text', text: 'x' }] } as InputItem], { callIds: new Set() }, m)).toThrow(
      /assistant/,
    );
    expect(validateItems([{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{' } as InputItem], { callIds: new Set() }, m)).toEqual(new Set(['c']));
  });
});

describe('render', () => {
  it('an incremental render equals a full render and counts only the new tokens', () => {
    const items = [msg('hello world'), msg('how are you?'), { type: 'function_call_output', call_id: 'c', output: 'done ✓' } as InputItem];
    const full = renderFull('Be brief.', [], items, new RunMetrics());
    const m = new RunMetrics();
    const ctx = renderFull('Be brief.', [], items.slice(0, 1), m);
    const before = m.counters.tokens_tokenized;
    const ctxAfter = new RunMetrics();
    renderAppend(ctx, items.slice(1), ctxAfter);
    expect(Array.from(ctx.tokens.view())).toEqual(Array.from(full.tokens.view()));
    expect(ctxAfter.counters.items_tokenized).toBe(2);
    expect(before + ctxAfter.counters.tokens_tokenized).toBe(
      (() => {
        const mm = new RunMetrics();
        renderFull('Be brief.', [], items, mm);
        return mm.counters.tokens_tokenized;
      })(),
    );
  });
});

describe('duplicateItemId', () => {
  const msg = (id?: string): InputItem => ({ type: 'message', role: 'user', content: 'x', ...(id !== undefined && { id }) }) as InputItem;
  const code = (err: WireError | null) => err?.code ?? null;

  it('finds an input id repeated within the input or already in the history, and nothing else', () => {
    expect(code(duplicateItemId([msg('msg_a'), msg()], [msg('msg_b'), msg()]))).toBeNull();
    expect(code(duplicateItemId([], [msg('msg_b'), msg('msg_b')]))).toBe('duplicate_item');
    expect(duplicateItemId([msg('msg_a')], [msg('msg_a')])).toMatchObject({ code: 'duplicate_item', param: 'input', message: expect.stringContaining('msg_a') });
    // A local shell call's output carries the call's id as its own `id` (the API's type says so): not a repeat.
    const call = { type: 'local_shell_call', id: 'lsc_1', call_id: 'c1', action: { type: 'exec', command: ['ls'], env: {} }, status: 'completed' } as InputItem;
    const out = { type: 'local_shell_call_output', id: 'lsc_1', output: 'x' } as InputItem;
    expect(code(duplicateItemId([], [call, out]))).toBeNull();
    expect(code(duplicateItemId([call], [out]))).toBeNull();
    expect(code(duplicateItemId([call, out], [call]))).toBe('duplicate_item');
    // A history is not checked against itself.
    expect(code(duplicateItemId([msg('msg_a'), msg('msg_a')], [msg('msg_c')]))).toBeNull();
  });

  it('follows a history array that grows in place (a ws connection’s cached context) and one replaced or cut short', () => {
    const history = [msg('msg_1')];
    expect(code(duplicateItemId(history, [msg('msg_2')]))).toBeNull();
    history.push(msg('msg_2'), msg());
    // Items added since the last check are known to the next one.
    expect(code(duplicateItemId(history, [msg('msg_2')]))).toBe('duplicate_item');
    expect(code(duplicateItemId(history, [msg('msg_3')]))).toBeNull();
    history.push(msg('msg_3'));
    expect(code(duplicateItemId(history, [msg('msg_3')]))).toBe('duplicate_item');
    // The same array cut short and grown again with other items: read afresh, not from what it held before.
    history.length = 1;
    history.push(msg('msg_x'), msg('msg_y'), msg('msg_z'));
    expect(code(duplicateItemId(history, [msg('msg_2')]))).toBeNull();
    expect(code(duplicateItemId(history, [msg('msg_y')]))).toBe('duplicate_item');
  });
});
