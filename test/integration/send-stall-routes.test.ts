/**
 * `--send-stall-timeout-ms` drops a connection whose answer nobody reads on
 * every route, not only on a create's: a retrieve, an `input_items` page, a
 * compaction, a cancel and a background create answered as JSON to a client
 * that reads nothing kept their socket, their answer in memory and (for the
 * first three) their share of the server-wide byte budget for good (outside
 * attack: ten such GETs of an 8 MiB response held 92 MB of `bytes_held` with
 * a 2 s stall timeout; twelve cancels of a background response with 12 MiB
 * of instructions held ~370 MB of heap with `bytes_held` at 0). A cancel's
 * answer is also charged to the budget while it is unsent, as a retrieve's
 * is: what it holds at once (`ANSWER_HELD_BYTES`), as it is made while it is
 * written. Real sockets, port 0; waits on the server's own connection count.
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { LlrServer } from '../../src/server.js';
import { ANSWER_HELD_BYTES } from '../../src/transport/json-out.js';
import { stallUntilRefused } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const connections = (server: LlrServer) => new Promise<number>((resolve, reject) => server.http.getConnections((err, n) => (err ? reject(err) : resolve(n))));

/** One request on a connection of its own, closed after its answer (fetch's kept-alive ones would count as open). */
function once(url: string, method: string, path: string, body?: string): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, agent: false, headers: body ? { 'Content-Type': 'application/json' } : {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown> }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
const held = async (url: string) => (await once(url, 'GET', '/health')).json['bytes_held'];

/** Sends one request and reads nothing of its answer. */
async function nonReader(port: number, method: string, path: string, body = ''): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.pause();
  const type = body ? 'Content-Type: application/json\r\n' : '';
  socket.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${type}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  return socket;
}

/** Resolves once the server has closed every connection (the health checks' own included). */
async function allDropped(server: LlrServer): Promise<void> {
  while ((await connections(server)) > 0) await new Promise((r) => setImmediate(r));
}

async function post(url: string, path: string, body: unknown): Promise<{ id: string }> {
  const res = await once(url, 'POST', path, JSON.stringify(body));
  expect(res.status).toBe(200);
  return res.json as { id: string };
}

describe('a JSON answer nobody reads, on the routes other than a create', () => {
  const instructions = 'i'.repeat(8 * MiB);
  const cases: Array<{ name: string; request: (url: string) => Promise<[string, string, string?]> }> = [
    { name: 'retrieve', request: async (url) => ['GET', `/v1/responses/${(await post(url, '/v1/responses', { model: 'm', input: 'hi', instructions })).id}`] },
    {
      name: 'input_items',
      request: async (url) => {
        const input = Array.from({ length: 100 }, (_, i) => ({ role: 'user', content: `${i} ` + 'y'.repeat(100_000) }));
        return ['GET', `/v1/responses/${(await post(url, '/v1/responses', { model: 'm', input })).id}/input_items?limit=100`];
      },
    },
    {
      name: 'compact',
      request: async () => {
        const input = Array.from({ length: 3000 }, (_, i) => ({ role: 'user', content: `message ${i} ` + 'lorem ipsum dolor '.repeat(30) }));
        return ['POST', '/v1/responses/compact', JSON.stringify({ model: 'm', input })];
      },
    },
    { name: 'cancel', request: async (url) => ['POST', `/v1/responses/${(await post(url, '/v1/responses', { model: 'm', input: 'hi', instructions, background: true })).id}/cancel`] },
    { name: 'background create', request: async () => ['POST', '/v1/responses', JSON.stringify({ model: 'm', input: 'hi', instructions, background: true })] },
  ];
  for (const c of cases) {
    it(`is dropped once nothing leaves for sendStallTimeoutMs (${c.name}), its bytes released`, async () => {
      const { server, url, port } = await testServer({ limits: { sendStallTimeoutMs: 200 } });
      const [method, path, body] = await c.request(url);
      const socket = await nonReader(port, method, path, body);
      // The server has the connection, then (nothing of its answer leaving) drops it.
      while ((await connections(server)) === 0) await new Promise((r) => setImmediate(r));
      await allDropped(server);
      expect(await held(url)).toBe(0);
      socket.destroy();
    });
  }
});

describe('cancels answered to readers that do not read', () => {
  it('are each charged ANSWER_HELD_BYTES until they have left: past the budget server_busy, then all released', async () => {
    const size = 12 * MiB;
    // Room for the create: its body, its run's token ids (~6 MB of them for 12 MiB of `x`) and its own answer's
    // charge, all held at once.
    const budget = size + 12 * MiB;
    const { url, port } = await testServer({ limits: { maxServerBytes: budget, sendStallTimeoutMs: 0 } });
    const { id } = await post(url, '/v1/responses', { model: 'm', input: 'hi', instructions: 'x'.repeat(size), background: true });
    // Ended (the instant model): a cancel answers its stored final Response, 12 MiB of instructions echoed.
    let status = 'in_progress';
    while (status === 'in_progress') status = (await once(url, 'GET', `/v1/responses/${id}`)).json['status'] as string;
    let now = await held(url);
    for (let i = 0; i < 200 && now !== 0; i++) now = await held(url);
    expect(now).toBe(0);
    const { stalled, refused } = await stallUntilRefused(port, `POST /v1/responses/${id}/cancel HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: 0\r\n\r\n`, 64);
    expect(refused).toBe(503);
    expect(stalled.length).toBe(Math.floor(budget / ANSWER_HELD_BYTES));
    expect(await held(url)).toBe(stalled.length * ANSWER_HELD_BYTES);
    const closed = stalled.map((a) => new Promise((resolve) => a.once('close', resolve)));
    for (const a of stalled) a.destroy();
    await Promise.all(closed);
    now = await held(url);
    for (let i = 0; i < 200 && now !== 0; i++) now = await held(url);
    expect(now).toBe(0);
    const third = await fetch(`${url}/v1/responses/${id}/cancel`, { method: 'POST' });
    expect(third.status).toBe(200);
    expect(((await third.json()) as { instructions: string }).instructions.length).toBe(size);
  });
});
