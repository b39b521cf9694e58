/**
 * The conversation digest kept between model calls (model/conversation.ts
 * `ConversationDigest`): always exactly `conversationDigest` of the items it
 * is given, hashing only the items it has not hashed yet while they grow,
 * and starting over when they do not extend what it hashed.
 */
import { describe, expect, it } from 'vitest';
import { ConversationDigest, conversationDigest } from '../../src/model/conversation.js';
import { runSync } from '../../src/cooperative.js';
import type { InputItem } from '../../src/protocol/objects.js';

/** An item whose text read is counted: a getter on `output`. */
function countedOutput(callId: string, text: string, reads: Map<string, number>): InputItem {
  const item = { type: 'function_call_output', call_id: callId } as { type: string; call_id: string; output?: string };
  Object.defineProperty(item, 'output', {
    enumerable: true,
    get: () => {
      reads.set(callId, (reads.get(callId) ?? 0) + 1);
      return text;
    },
  });
  return item as InputItem;
}

function step(i: number, reads: Map<string, number>, size = 10): InputItem[] {
  return [
    { type: 'function_call', call_id: `c${i}`, name: 'exec_command', arguments: `{"cmd":"ls ${i}"}` } as InputItem,
    countedOutput(`c${i}`, `${'o'.repeat(size)} ${i}`, reads),
  ];
}

describe('ConversationDigest', () => {
  it('equals the whole-conversation digest at every step of a growing run', () => {
    const memo = new ConversationDigest();
    const items: InputItem[] = [{ type: 'message', role: 'user', content: 'go\n$ ls' } as InputItem];
    for (let i = 0; i < 50; i++) {
      items.push(...step(i, new Map()));
      if (i % 10 === 3) items.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `note ${i}` }] } as InputItem);
      expect(runSync(memo.work(items.slice(), 7))).toBe(conversationDigest(items, 7));
    }
  });

  it('hashes only the new items of a growing conversation', () => {
    const reads = new Map<string, number>();
    const memo = new ConversationDigest();
    const items: InputItem[] = [{ type: 'message', role: 'user', content: 'go' } as InputItem];
    for (let i = 0; i < 200; i++) {
      items.push(...step(i, reads));
      runSync(memo.work(items.slice(), 1));
    }
    // What hashing one output reads of it, once.
    const once = new Map<string, number>();
    conversationDigest([countedOutput('x', 'o', once)], 1);
    expect(reads.size).toBe(200);
    expect([...reads.values()].every((n) => n === once.get('x'))).toBe(true);
  });

  it('starts over for another seed, a shorter conversation or a different prefix', () => {
    const reads = new Map<string, number>();
    const memo = new ConversationDigest();
    const base: InputItem[] = [{ type: 'message', role: 'user', content: 'go' } as InputItem, ...step(0, reads), ...step(1, reads)];
    expect(runSync(memo.work(base, 1))).toBe(conversationDigest(base, 1));
    expect(runSync(memo.work(base, 2))).toBe(conversationDigest(base, 2));
    const shorter = base.slice(0, 2);
    expect(runSync(memo.work(shorter, 2))).toBe(conversationDigest(shorter, 2));
    // A compacted context: other items in front, the same objects after.
    const compacted: InputItem[] = [{ type: 'message', role: 'developer', content: 'summary' } as InputItem, ...base.slice(3)];
    expect(runSync(memo.work(compacted, 2))).toBe(conversationDigest(compacted, 2));
    // An equal-looking but different object at the front is not taken for the one hashed.
    const copy: InputItem[] = [{ type: 'message', role: 'user', content: 'gone' } as InputItem, ...compacted.slice(1)];
    expect(runSync(memo.work(copy, 2))).toBe(conversationDigest(copy, 2));
  });

  it('stays exact when two cooperative digests of one memo interleave', () => {
    const reads = new Map<string, number>();
    const memo = new ConversationDigest();
    const a: InputItem[] = [{ type: 'message', role: 'user', content: 'x'.repeat(300_000) } as InputItem, ...step(0, reads, 300_000)];
    const b: InputItem[] = [a[0]!, ...step(1, reads, 300_000)];
    const ga = memo.work(a, 3);
    const gb = memo.work(b, 3);
    // Step both a few slices in turn (each yields per slice of a large text), then finish them.
    let ra = ga.next();
    let rb = gb.next();
    for (let k = 0; k < 4; k++) {
      if (!ra.done) ra = ga.next();
      if (!rb.done) rb = gb.next();
    }
    while (!ra.done) ra = ga.next();
    while (!rb.done) rb = gb.next();
    expect(ra.value).toBe(conversationDigest(a, 3));
    expect(rb.value).toBe(conversationDigest(b, 3));
    expect(runSync(memo.work(a, 3))).toBe(conversationDigest(a, 3));
    expect(runSync(memo.work(b, 3))).toBe(conversationDigest(b, 3));
  });
});
