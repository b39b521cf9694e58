/**
 * A large JSON answer (here a compaction's, ~3x its body) is written as the
 * reader takes it, made as it is written, and the request's share of the
 * server-wide byte budget is kept until it has left: a client that reads
 * nothing cannot pin one answer per connection outside the budget (outside
 * attack: six 16 MiB compactions never read held ~1.5 GB with `bytes_held`
 * back at 0). An answer is charged what it holds at once
 * (`ANSWER_HELD_BYTES`), before its head, not its whole size once built:
 * answers being built at once were outside the budget (300 listings of a
 * 10 MB item took the RSS to ~2 GB, `npm run bench:answers`). Real sockets.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ANSWER_HELD_BYTES } from '../../src/transport/json-out.js';
import { stallUntilRefused } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const body = JSON.stringify({ model: 'm', input: Array.from({ length: 6000 }, (_, i) => ({ role: 'user', content: `message ${i} ` + 'lorem ipsum dolor '.repeat(30) })) });
const held = async (url: string) => ((await (await fetch(`${url}/health`)).json()) as { bytes_held: number }).bytes_held;

/** A raw client that sends `request` and reads only the first bytes of the answer. */
async function stalledReader(port: number, ...request: string[]): Promise<net.Socket> {
  const a = net.connect(port, '127.0.0.1');
  a.on('error', () => {});
  for (const r of request) a.write(r);
  await new Promise((resolve) => a.once('data', resolve));
  a.pause();
  return a;
}

/** The reader gone, what the server held for it is released: `bytes_held` back at 0. */
async function closeAndSettle(a: net.Socket, url: string): Promise<number> {
  const closed = new Promise((resolve) => a.once('close', resolve));
  a.destroy();
  await closed;
  // The server hears the close on its own turn: ask until it has (each ask is a round trip, no timer).
  let now = await held(url);
  for (let i = 0; i < 200 && now !== 0; i++) now = await held(url);
  return now;
}

describe('a JSON answer to a reader that does not read', () => {
  it('keeps the request charged until the answer has left, so a second one past the budget gets server_busy', async () => {
    // Room for one request's body and its answer's charge, not for a second body besides.
    const { url, port } = await testServer({ limits: { maxServerBytes: Math.ceil(body.length * 1.5) + ANSWER_HELD_BYTES } });
    // The first client sends a compaction and reads only the first bytes of its answer.
    const a = await stalledReader(port, `POST /v1/responses/compact HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`, body);
    const second = await fetch(`${url}/v1/responses/compact`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    expect(second.status).toBe(503);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('server_busy');
    expect(await held(url)).toBeGreaterThanOrEqual(body.length + ANSWER_HELD_BYTES);
    // The reader gone, its share is released.
    expect(await closeAndSettle(a, url)).toBe(0);
    expect(body.length).toBeGreaterThan(MiB);
  });
});

describe('large retrieves to readers that do not read', () => {
  it('are each charged ANSWER_HELD_BYTES until they have left, not their size: past the budget server_busy, then all released', async () => {
    const size = 12 * MiB;
    const budget = size + 4 * MiB;
    const { url, port } = await testServer({ limits: { maxServerBytes: budget } });
    // Text of few tokens (64 characters a token): the create's token ids, charged while it is tokenized, fit beside its body.
    const created = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', instructions: '='.repeat(size), input: 'hi' }) });
    const { id } = (await created.json()) as { id: string };
    expect(await held(url)).toBe(0);
    // Each answer (12 MiB, more than the kernel's buffers take) stays unsent: as many are admitted as their charges fit.
    const { stalled, refused } = await stallUntilRefused(port, `GET /v1/responses/${id} HTTP/1.1\r\nHost: localhost\r\n\r\n`, 64);
    expect(refused).toBe(503);
    expect(stalled.length).toBe(Math.floor(budget / ANSWER_HELD_BYTES));
    expect(await held(url)).toBe(stalled.length * ANSWER_HELD_BYTES);
    const second = await fetch(`${url}/v1/responses/${id}`);
    expect(second.status).toBe(503);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('server_busy');
    for (const a of stalled.slice(1)) a.destroy();
    expect(await closeAndSettle(stalled[0]!, url)).toBe(0);
    // Read as it is made: a chunked answer, the whole Response.
    const third = await fetch(`${url}/v1/responses/${id}`);
    expect(third.status).toBe(200);
    expect(third.headers.get('transfer-encoding')).toBe('chunked');
    expect(((await third.json()) as { instructions: string }).instructions.length).toBe(size);
  });
});

describe('a create answered as JSON to a reader that does not read', () => {
  // Its run has happened (stored, billed): its answer is charged to the budget unchecked, never refused for it, and
  // released with its request. It was not charged at all, and was built whole before a byte of it left.
  it('is answered whatever the budget says, its answer charged with its body until it has left', async () => {
    const size = 12 * MiB;
    // Room for the body, not for its answer's charge besides.
    const budget = size + MiB;
    const { url, port } = await testServer({ limits: { maxServerBytes: budget } });
    // Text of few tokens (64 characters a token): its ~0.8 MiB of token ids, charged while it runs, fit the budget too.
    const body = JSON.stringify({ model: 'm', instructions: '='.repeat(size), input: 'hi' });
    const { stalled, refused } = await stallUntilRefused(port, `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 1);
    expect(refused).toBe(0);
    expect(stalled).toHaveLength(1);
    expect(await held(url)).toBeGreaterThan(budget);
    expect(await held(url)).toBeGreaterThanOrEqual(size + ANSWER_HELD_BYTES);
    expect(await closeAndSettle(stalled[0]!, url)).toBe(0);
  });
});
