/**
 * A long-lived run's appended items are stored with it. Its tool outputs
 * arrive by `response.append`, not in its create's input, and the store kept
 * only the create's input: `inputItems.list` left them out, and a create
 * chained onto the run with `previous_response_id` gave the model its calls
 * without their outputs. Checked over both long-lived designs and both
 * stores (the SQLite one through a file reopened by a second server), with
 * the project's own clients: the listing has every output, and the chained
 * context holds every item in the order the run's model read them, counted
 * by `POST /v1/responses/input_tokens` against the same items sent inline.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { connectClient, type ClientProtocol } from '../../src/client/index.js';
import type { InputItem } from '../../src/protocol/objects.js';
import { SqliteStore } from '../../src/store/index.js';
import { contextItems, type StoredResponse } from '../../src/store/types.js';
import { listInputItems } from '../../src/store/input-items.js';
import { testServer } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'llr-stored-appends-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const shell = { type: 'function' as const, name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } };

async function countTokens(url: string, body: Record<string, unknown>): Promise<number> {
  const res = await fetch(`${url}/v1/responses/input_tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { input_tokens: number }).input_tokens;
}

describe.each<[ClientProtocol, 'memory' | 'sqlite']>([
  ['long-lived', 'memory'],
  ['long-lived-http', 'memory'],
  ['long-lived', 'sqlite'],
])('a stored %s run (%s store) keeps what was appended to it', (protocol, store) => {
  it('lists its tool outputs as input items, and a chain from it reads every item in the run\'s order', async () => {
    const storePath = join(dir, `${protocol}.db`);
    const opts = store === 'sqlite' ? { store: storePath } : {};
    let { server, url } = await testServer(opts);
    const client = await connectClient(protocol, url, { timing: false });
    const outputs = ['first output line', 'second output, longer: ' + 'x'.repeat(300)];
    let n = 0;
    // Two commands, one call each (parallel_tool_calls off): two pauses, two appends.
    const final = await client.run(
      { model: 'sim', input: 'Do two things.\n$ echo one\n$ echo two', tools: [shell], parallel_tool_calls: false, store: true },
      () => outputs[n++]!,
    );
    await client.close();
    expect(final.status).toBe('completed');
    expect(final.output.map((i) => i.type)).toEqual(['function_call', 'function_call', 'message']);
    await server.services.postWork.flush();
    if (store === 'sqlite') {
      await server.close();
      ({ server, url } = await testServer(opts));
    }

    const sdk = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'k', maxRetries: 0 });
    const listed = [];
    for await (const item of sdk.responses.inputItems.list(final.id, { order: 'asc', limit: 1 })) listed.push(item);
    expect(listed.map((i) => i.type)).toEqual(['message', 'function_call_output', 'function_call_output']);
    const calls = final.output.filter((i) => i.type === 'function_call');
    expect(listed.slice(1)).toMatchObject(calls.map((c, i) => ({ call_id: (c as { call_id: string }).call_id, output: outputs[i] })));

    // The same context sent inline, in the run's order: the user's message, each call then its output, the answer.
    const inline: unknown[] = [
      { role: 'user', content: 'Do two things.\n$ echo one\n$ echo two' },
      calls[0],
      { type: 'function_call_output', call_id: (calls[0] as { call_id: string }).call_id, output: outputs[0] },
      calls[1],
      { type: 'function_call_output', call_id: (calls[1] as { call_id: string }).call_id, output: outputs[1] },
      final.output[2],
    ];
    const next = { role: 'user', content: 'thanks' };
    const chained = await countTokens(url, { model: 'sim', tools: [shell], previous_response_id: final.id, input: [next] });
    expect(chained).toBe(await countTokens(url, { model: 'sim', tools: [shell], input: [...inline, next] }));
    // And a chained create runs (its calls all have outputs).
    const r = await sdk.responses.create({ model: 'sim', tools: [shell] as never, previous_response_id: final.id, input: 'thanks' });
    expect(r.status).toBe('completed');
  });
});

const item = (id: string) => ({ type: 'message', role: 'user', content: id, id }) as InputItem;

describe('contextItems', () => {
  const out = (id: string) => ({ type: 'function_call', id, call_id: id, name: 't', arguments: '{}', status: 'completed' });
  const rec = (appended: StoredResponse['appended']): StoredResponse => ({
    response: { id: 'resp_1', output: [out('o0'), out('o1'), out('o2')] } as unknown as StoredResponse['response'],
    input: [item('i0')],
    owner: null,
    created_at: 0,
    ...(appended && { appended }),
  });
  const ids = (r: StoredResponse) => contextItems(r).map((i) => (i as { id: string }).id);

  it('puts each appended batch after the output items it followed', () => {
    expect(ids(rec(undefined))).toEqual(['i0', 'o0', 'o1', 'o2']);
    expect(ids(rec([{ at: 1, items: [item('a1')] }, { at: 2, items: [item('a2'), item('a3')] }]))).toEqual(['i0', 'o0', 'a1', 'o1', 'a2', 'a3', 'o2']);
    expect(ids(rec([{ at: 3, items: [item('a1')] }]))).toEqual(['i0', 'o0', 'o1', 'o2', 'a1']);
    // Two batches after the same call (a call answered in two appends).
    expect(ids(rec([{ at: 1, items: [item('a1')] }, { at: 1, items: [item('a2')] }]))).toEqual(['i0', 'o0', 'a1', 'a2', 'o1', 'o2']);
  });
});

describe('SQLite schema 1 → 2', () => {
  it('a version-1 file gains the appended column and keeps its responses', () => {
    const path = join(dir, 'v1.db');
    const raw = new Database(path);
    raw.exec(`CREATE TABLE responses (id TEXT PRIMARY KEY, owner TEXT, previous_response_id TEXT, created_at INTEGER NOT NULL, response TEXT NOT NULL, input TEXT NOT NULL);
      CREATE TABLE items (item_id TEXT NOT NULL, response_id TEXT NOT NULL, owner TEXT, item TEXT NOT NULL, PRIMARY KEY (item_id, response_id));
      CREATE INDEX items_by_response ON items (response_id);`);
    raw.prepare('INSERT INTO responses VALUES (?, NULL, NULL, 1, ?, ?)').run('resp_old', JSON.stringify({ id: 'resp_old', output: [], previous_response_id: null }), '[]');
    raw.pragma('user_version = 1');
    raw.close();
    const s = new SqliteStore(path);
    expect(s.get('resp_old', null)).toMatchObject({ response: { id: 'resp_old' }, input: [] });
    expect(s.get('resp_old', null)!.appended).toBeUndefined();
    const appended = [{ at: 0, items: [item('a')] }];
    s.put({ response: { id: 'resp_new', output: [], previous_response_id: null } as unknown as StoredResponse['response'], input: [], owner: null, created_at: 2, appended });
    s.close();
    const reopened = new SqliteStore(path);
    expect(reopened.get('resp_new', null)!.appended).toEqual(appended);
    // The appended item is found by its id, as an input item is.
    expect(reopened.getItem('a', null)).toEqual(item('a'));
    reopened.close();
  });
});

describe('input item ids of a listing with appends', () => {
  // An item without an id gets one derived from the response id and its position, which a client knows once the
  // response exists: an appended item could carry the id derived for a later item, and both were listed with it
  // (a page `after` it then began again after the first: the SDK's auto-pagination looped).
  it('are unique even when an appended item carries the id derived for a later one', () => {
    const msg = (content: string, id?: string) => ({ type: 'message', role: 'user', content, ...(id && { id }) }) as InputItem;
    const rec = (id?: string): StoredResponse => ({
      response: { id: 'resp_1', output: [] } as unknown as StoredResponse['response'],
      input: [msg('first')],
      owner: null,
      created_at: 0,
      appended: [{ at: 0, items: [msg('second', id), msg('third')] }],
    });
    const all = { limit: 100, order: 'asc' as const, after: null, before: null };
    const taken = listInputItems(rec(), all).data[2]!.id as string;
    const ids = listInputItems(rec(taken), all).data.map((i) => i.id);
    expect(new Set(ids).size).toBe(3);
    // One item a page, by `after`: each item once, then the end.
    const paged: unknown[] = [];
    let after: string | null = null;
    for (let page = 0; page < 5; page++) {
      const p = listInputItems(rec(taken), { ...all, limit: 1, after });
      paged.push(...p.data.map((i) => (i.content as Array<{ text: string }>)[0]!.text));
      if (!p.has_more) break;
      after = p.last_id;
    }
    expect(paged).toEqual(['first', 'second', 'third']);
  });
});
