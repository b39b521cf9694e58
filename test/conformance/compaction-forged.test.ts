/**
 * A compaction item the server never produced but that opens with its key:
 * the key is fixed (docs/protocol.md, Compaction: "not secret from someone
 * who has this source"), so a client can seal any payload. What it carries
 * is read like a request's items: an item that is not an object, or JSON
 * nested past anything a request could carry, is refused as a foreign
 * compaction (`400 invalid_value`), never a 500.
 */
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RawSocket } from '../helpers/raw-socket.js';
import { testServer } from '../helpers/server.js';

/** Seals a payload as src/pipeline/compaction.ts does (the same fixed key). */
function seal(payload: string): string {
  const key = createHash('sha256').update('llr compaction v1').digest();
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(payload, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
}

const user = { type: 'message', role: 'user', content: 'go on' };
const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
const forged = {
  'a null item': seal('{"v":1,"items":[null]}'),
  'a number and a string': seal('{"v":1,"items":[1,"x"]}'),
  'an array item': seal('{"v":1,"items":[[]]}'),
  'an item nesting 100,000 arrays': seal(`{"v":1,"items":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x","z":${deep(100_000)}}]}]}`),
};

describe('a forged compaction item', () => {
  for (const [what, encrypted_content] of Object.entries(forged)) {
    it(`carrying ${what} is refused 400 on HTTP and on a long-lived create`, async () => {
      const { url } = await testServer();
      const body = { model: 'sim-model', input: [{ type: 'compaction', encrypted_content }, user] };
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      const json = (await res.json()) as { error: { code: string; param: string } };
      expect(res.status).toBe(400);
      expect(json.error).toMatchObject({ code: 'invalid_value', param: 'input[0].encrypted_content' });
      const s = await RawSocket.longLived(url);
      s.send({ type: 'response.create', ...body });
      const e = await s.next('error', { skipErrors: true });
      expect(e).toMatchObject({ type: 'error', status: 400, error: { code: 'invalid_value', param: 'input[0].encrypted_content' } });
    });
  }

  it('an item it carries that the checks refuse is named by the compaction item: its position in the input and its encrypted_content', async () => {
    // The checks ran over the expanded window, so `input[1]` named the second carried item, or the compaction item itself.
    const { url } = await testServer();
    const cases = {
      'a bad content part': { items: [{ type: 'message', role: 'user', content: 'ok' }, { type: 'message', role: 'user', content: [{ type: 'bogus' }] }], inner: "'items[1].content[0].type'", code: 'invalid_value' },
      'a content part that is not an object': { items: [{ type: 'message', role: 'user', content: [[]] }], inner: "'items[0].content[0]'", code: 'invalid_type' },
      'a compaction item': { items: [user, { type: 'compaction', encrypted_content: seal('{"v":1,"items":[]}') }], inner: "'items[1]': a compaction item can only start a new response, not be appended to one or carried by another", code: 'invalid_value' },
      'a credential': { items: [user, { type: 'message', role: 'user', content: 'my key is AKIAABCDEFGHIJKLMNOP' }], inner: "'items[1]' contains what looks like", code: 'content_flagged' },
      'an output without its call': { items: [user, user, { type: 'function_call_output', call_id: 'nope', output: 'x' }], inner: "with call_id 'nope'", code: 'unknown_call_id' },
    };
    for (const [what, { items, inner, code }] of Object.entries(cases)) {
      const kept = { type: 'message', role: 'user', content: 'kept' };
      const body = { model: 'sim-model', input: [kept, kept, { type: 'compaction', encrypted_content: seal(JSON.stringify({ v: 1, items })) }, user] };
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      const json = (await res.json()) as { error: { code: string; param: string; message: string } };
      expect(res.status, what).toBe(400);
      expect(json.error, what).toMatchObject({ code, param: 'input[2].encrypted_content' });
      expect(json.error.message, what).toContain(`Invalid 'input[2].encrypted_content': item ${items.length - 1} of the ${items.length} this compaction item carries is refused: `);
      expect(json.error.message, what).toContain(inner);
      const s = await RawSocket.longLived(url);
      s.send({ type: 'response.create', ...body });
      const e = await s.next('error', { skipErrors: true });
      expect(e, what).toMatchObject({ type: 'error', status: 400, error: { code, param: 'input[2].encrypted_content', message: json.error.message } });
      s.dispose();
    }
  });

  it('an item after a compaction item that the checks refuse keeps its own position in the input', async () => {
    const { url } = await testServer();
    const encrypted_content = seal(JSON.stringify({ v: 1, items: [user, user, user] }));
    const cases = [
      { item: { type: 'message', role: 'user', content: [{ type: 'bogus' }] }, param: 'input[3].content[0].type', quoted: "'input[3].content[0].type'" },
      { item: { type: 'function_call_output', call_id: 'nope', output: 'x' }, param: 'input[3].call_id', quoted: "call_id 'nope'" },
      { item: { type: 'message', role: 'user', content: 'my key is AKIAABCDEFGHIJKLMNOP' }, param: 'input[3]', quoted: "'input[3]' contains" },
    ];
    for (const { item, param, quoted } of cases) {
      const body = { model: 'sim-model', input: [user, { type: 'compaction', encrypted_content }, user, item] };
      const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      const json = (await res.json()) as { error: { code: string; param: string; message: string } };
      expect(res.status, param).toBe(400);
      expect(json.error.param).toBe(param);
      expect(json.error.message).toContain(quoted);
    }
  });

  it('a payload the server wrote, nested as deep as a request may be, still reads back', async () => {
    const { url } = await testServer();
    // 64 levels in the request (the default --max-json-depth): the item's content nests as deep as the body allowed.
    const nest = (n: number): unknown => (n === 0 ? 'x' : { a: nest(n - 1) });
    const body = { model: 'sim-model', input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi', extra: nest(57) }] }] };
    const c = await fetch(`${url}/v1/responses/compact`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    expect(c.status).toBe(200);
    const compacted = (await c.json()) as { output: Array<{ type: string }> };
    const item = compacted.output.find((i) => i.type === 'compaction')!;
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: [item, user] }) });
    expect(res.status).toBe(200);
  });
});
