/**
 * `TurnScan` (model/conversation.ts): a conversation's latest user message
 * and the calls after it with their outputs, kept between model calls and
 * extended by the new items, must be exactly what scanning the whole
 * conversation gives, however it grows (calls, outputs before or after their
 * call or for no call, repeated call ids, new user turns) and when it is
 * replaced by another (a compacted or rebuilt context). And the auto policy
 * answers the same with a kept scan as without one.
 */
import { describe, expect, it } from 'vitest';
import { autoPolicy } from '../../src/model/auto-policy.js';
import { TurnScan } from '../../src/model/conversation.js';
import { mulberry32, type Rng } from '../../src/model/rng.js';
import type { ModelRequest } from '../../src/model/types.js';
import type { FunctionCall, FunctionCallOutput, InputItem } from '../../src/protocol/objects.js';

/** The oracle: the whole conversation scanned from the start. */
function scanned(items: readonly InputItem[]) {
  let user = -1;
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i]!;
    if (it.type === 'message' && (it as { role: string }).role === 'user') {
      user = i;
      break;
    }
  }
  const outputs = new Map<string, FunctionCallOutput>();
  const calls: Array<{ call: FunctionCall; output: FunctionCallOutput | undefined }> = [];
  for (let i = user + 1; i < items.length; i++) {
    const it = items[i]!;
    if (it.type === 'function_call') calls.push({ call: it as FunctionCall, output: undefined });
    else if (it.type === 'function_call_output') outputs.set((it as FunctionCallOutput).call_id, it as FunctionCallOutput);
  }
  for (const c of calls) c.output = outputs.get(c.call.call_id);
  return { user, calls };
}

function randomItem(rng: Rng, n: number): InputItem {
  const r = rng();
  const id = `call_${Math.floor(rng() * Math.max(1, n / 2))}`;
  if (r < 0.05) return { type: 'message', role: 'user', content: `turn ${n}` };
  if (r < 0.1) return { type: 'message', role: 'assistant', content: 'ok' } as InputItem;
  if (r < 0.55) return { type: 'function_call', call_id: id, name: rng() < 0.5 ? 'shell' : 'lookup', arguments: '{}' } as InputItem;
  return { type: 'function_call_output', call_id: id, output: `out ${n}` };
}

describe('TurnScan', () => {
  it('kept across a growing conversation, equals scanning it from the start at every call', () => {
    for (const seed of [1, 2, 3, 4]) {
      const rng = mulberry32(seed);
      const items: InputItem[] = [];
      const kept = new TurnScan();
      for (let call = 0; call < 300; call++) {
        const grow = Math.floor(rng() * 5);
        for (let i = 0; i < grow; i++) items.push(randomItem(rng, items.length));
        // Each model call gets a snapshot of the context's items (the same objects).
        const turn = kept.update(items.slice());
        const want = scanned(items);
        expect(turn.user).toBe(want.user);
        expect(turn.calls).toEqual(want.calls);
        turn.calls.forEach((c, i) => {
          expect(c.call).toBe(want.calls[i]!.call);
          expect(c.output).toBe(want.calls[i]!.output);
        });
        expect([...turn.byName.keys()].sort()).toEqual([...new Set(want.calls.map((c) => c.call.name))].sort());
        for (const name of turn.byName.keys()) expect(turn.byName.get(name)).toEqual(want.calls.filter((c) => c.call.name === name));
      }
    }
  });

  it('starts over when the conversation is not the one it scanned (compacted, rebuilt or shorter)', () => {
    const rng = mulberry32(7);
    const items: InputItem[] = Array.from({ length: 50 }, (_, i) => randomItem(rng, i));
    items[0] = { type: 'message', role: 'user', content: 'go' };
    const kept = new TurnScan().update(items);
    // Another conversation with an item replaced in the middle, then a shorter one.
    const other = items.slice();
    other[10] = { type: 'function_call', call_id: 'call_new', name: 'shell', arguments: '{}' } as InputItem;
    for (const conv of [other, items.slice(0, 20), items]) {
      const turn = kept.update(conv);
      const want = scanned(conv);
      expect(turn.user).toBe(want.user);
      expect(turn.calls).toEqual(want.calls);
    }
  });

  it('the auto policy plans the same with its context\'s kept scan as with a fresh one, over a long forced loop', () => {
    const policy = autoPolicy();
    const shell = { type: 'function' as const, name: 'shell', description: null, strict: true, parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } } } };
    for (const input of ['keep going', 'run these:\n$ ls\n$ pwd\n$ ls']) {
      const items: InputItem[] = [{ type: 'message', role: 'user', content: input }];
      const kept = new TurnScan();
      for (let step = 0; step < 200; step++) {
        const base = { model: 'sim-model', items: items.slice(), tools: [shell], tool_choice: 'required' as const, parallel_tool_calls: false, promptTokens: [], maxOutputTokens: null } as unknown as ModelRequest;
        const a = policy.plan({ ...base, turns: kept }, mulberry32(step));
        const b = policy.plan(base, mulberry32(step));
        expect(a).toEqual(b);
        const item = a.items[0]!;
        expect(item.type).toBe('function_call');
        const callId = `call_${step}`;
        items.push({ type: 'function_call', call_id: callId, name: (item as { name: string }).name, arguments: (item as { arguments: string }).arguments } as InputItem);
        items.push({ type: 'function_call_output', call_id: callId, output: `ran ${step}` });
      }
    }
  });
});
