/**
 * A resumed reader of an ended background response is paced (FOLLOW_WINDOW, src/modes/background.ts): it reads
 * the kept events as its socket drains. When those events were dropped under it (the response deleted, evicted
 * past --max-background-kept-bytes, or expired), every reader still behind was given the rest at once, as before
 * the pacing: each reader that read nothing then held up to the send limit (4 MiB) unsent, outside every bound.
 * Outside attack: 200 resumes that read nothing of one ended response, then its DELETE, took the server from
 * ~150 MB to ~900 MB of RSS in one turn. Now the readers behind keep reading the same events (kept for them, shared)
 * at their own pace, and get every one of them in order, then `[DONE]`.
 */
import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { KEPT_RESPONSE_BYTES } from '../../src/modes/background.js';
import { afterWrites, backgroundStream, dechunk } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

/** `FOLLOW_WINDOW` (src/modes/background.ts), written out so the old code is judged by the same figure. */
const FOLLOW_WINDOW = 64 * 1024;
// ~80,000 tokens: more delta events than loopback's socket buffers take from a reader that reads nothing.
const TEXT = Array.from({ length: 40_000 }, (_, i) => `w${i}`).join(' ');
const READERS = 3;

describe('readers of a background response whose kept events are dropped under them', () => {
  it('stay paced (FOLLOW_WINDOW) and still get every event in order, then [DONE]', async () => {
    const { server, url, port } = await testServer({ policy: scriptPolicy([{ text: TEXT }]), limits: { maxBackgroundEventBytes: 64 * 1024 * 1024 } });
    const { own, id, ownEvents } = await backgroundStream(url);
    expect(own.endsWith('data: [DONE]\n\n')).toBe(true);
    const largest = Math.max(...ownEvents.map((e) => Buffer.byteLength(e)));

    // Each server-side socket of a resume: the most it held unsent after a write, and when it first stopped
    // being given events (a write left FOLLOW_WINDOW or more unsent: the reader is behind).
    let most = 0;
    let behind = 0;
    let allBehind!: () => void;
    const saturated = new Promise<void>((resolve) => (allBehind = resolve));
    server.http.on('connection', (socket: Socket) => {
      let counted = false;
      afterWrites(socket, (s) => {
        most = Math.max(most, s.writableLength);
        if (!counted && s.writableLength >= FOLLOW_WINDOW) {
          counted = true;
          if (++behind === READERS) allBehind();
        }
      });
    });

    // Readers that read nothing (paused) until the events are dropped.
    const readers = Array.from({ length: READERS }, () => {
      const s = connect(port, '127.0.0.1');
      const chunks: Buffer[] = [];
      s.pause();
      s.on('data', (d: Buffer) => chunks.push(d));
      const closed = new Promise<Buffer>((resolve, reject) => {
        s.on('error', reject);
        s.on('data', () => {
          if (Buffer.concat(chunks.slice(-2)).includes('0\r\n\r\n')) {
            s.destroy();
            resolve(Buffer.concat(chunks));
          }
        });
        s.on('close', () => resolve(Buffer.concat(chunks)));
      });
      s.write(`GET /v1/responses/${id}?stream=true HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      return { s, closed };
    });
    await saturated;

    most = 0;
    const deleted = await fetch(`${url}/v1/responses/${id}`, { method: 'DELETE' });
    expect(deleted.status).toBe(200);
    // Before: the rest of the kept events (megabytes) written to each reader at once, here.
    expect(most).toBeLessThan(FOLLOW_WINDOW + 2 * largest + 4096);
    // Deleted, it is no longer found: a new resume is refused.
    expect((await fetch(`${url}/v1/responses/${id}?stream=true`)).status).toBe(404);

    for (const r of readers) r.s.resume();
    for (const r of readers) {
      const raw = await r.closed;
      const body = dechunk(raw.subarray(raw.indexOf('\r\n\r\n') + 4));
      expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
      const seqs = [...body.matchAll(/"sequence_number":(\d+)/g)].map((m) => Number(m[1]));
      expect(seqs.length).toBe(ownEvents.length);
      expect(seqs.every((n, i) => n === i)).toBe(true);
    }
    expect(most).toBeLessThan(FOLLOW_WINDOW + 2 * largest + 4096);
  });

  it("are let go with their events once the create's own stream, left behind, has closed", async () => {
    const { server, url, port } = await testServer({ policy: scriptPolicy([{ text: TEXT }]), limits: { maxBackgroundEventBytes: 64 * 1024 * 1024 } });
    let serverSide!: Socket;
    let saturated!: () => void;
    const behind = new Promise<void>((resolve) => (saturated = resolve));
    server.http.once('connection', (socket: Socket) => {
      serverSide = socket;
      afterWrites(socket, (s) => s.writableLength >= FOLLOW_WINDOW && saturated());
    });
    // The create's own stream, read up to its response id, then not at all: it falls behind the live events.
    const body = JSON.stringify({ model: 'm', input: 'go', background: true, stream: true });
    const s = connect(port, '127.0.0.1');
    let head = '';
    const id = await new Promise<string>((resolve) => {
      const on = (d: Buffer) => {
        head += d.toString('latin1');
        const m = /"id":"(resp_[0-9a-f]+)"/.exec(head);
        if (!m) return;
        s.off('data', on);
        s.pause();
        resolve(m[1]!);
      };
      s.on('data', on);
      s.write(`POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    });
    await behind;
    const bg = server.host.background.find(id, null)!;
    // Another reader, read to its end: the run is over.
    expect((await (await fetch(`${url}/v1/responses/${id}?stream=true`)).text()).endsWith('data: [DONE]\n\n')).toBe(true);
    expect(bg.isOver).toBe(true);
    const closed = new Promise((resolve) => serverSide.once('close', resolve));
    s.destroy();
    await closed;
    expect((await fetch(`${url}/v1/responses/${id}`, { method: 'DELETE' })).status).toBe(200);
    // No reader is left: the events go with the response (a closed stream left behind kept them for good).
    expect(bg.bytes).toBe(0);
  });
});

describe('events kept for readers behind after their response was dropped', () => {
  // Kept for them past the drop, they were counted nowhere: a reader that kept reading, however slowly, held its
  // response's events (up to --max-background-event-bytes) for as long as it read. They stay counted in
  // background_kept_bytes, and past --max-background-kept-bytes their readers are dropped, oldest drop first.
  it('stay counted, and go with their readers once later responses need the room', async () => {
    const { server, url, port } = await testServer({
      policy: scriptPolicy([{ text: TEXT }, { text: TEXT }]),
      // Room for one response's events (~46 MB counted: their ~27 MB of frames and KEPT_EVENT_BYTES each), not two.
      limits: { maxBackgroundEventBytes: 64 * 1024 * 1024, maxBackgroundKeptBytes: 64 * 1024 * 1024 },
    });
    const kept = async () => ((await (await fetch(`${url}/health`)).json()) as { background_kept_bytes: number }).background_kept_bytes;
    const create = async () => (await backgroundStream(url)).id;
    const a = await create();
    const bg = server.host.background.find(a, null)!;
    const size = bg.bytes;
    expect(size).toBeGreaterThan(20 * 1024 * 1024);
    // A resume that reads nothing: behind once its socket holds FOLLOW_WINDOW unsent.
    let behind!: () => void;
    const saturated = new Promise<void>((resolve) => (behind = resolve));
    server.http.on('connection', (socket: Socket) => afterWrites(socket, (s) => s.writableLength >= FOLLOW_WINDOW && behind()));
    const reader = connect(port, '127.0.0.1');
    reader.pause();
    reader.on('error', () => {});
    const chunks: Buffer[] = [];
    reader.on('data', (d: Buffer) => chunks.push(d));
    const closed = new Promise((resolve) => reader.once('close', resolve));
    reader.write(`GET /v1/responses/${a}?stream=true HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    await saturated;
    expect((await fetch(`${url}/v1/responses/${a}`, { method: 'DELETE' })).status).toBe(200);
    // Dropped, no longer found, but its events still counted while its reader is behind on them.
    expect(await kept()).toBeGreaterThanOrEqual(size);
    expect(bg.bytes).toBe(size);
    // A later response ends: the budget's room goes to it, the reader behind is dropped and the events go.
    const b = await create();
    expect(bg.bytes).toBe(0);
    expect(await kept()).toBe(server.host.background.find(b, null)!.bytes + KEPT_RESPONSE_BYTES);
    reader.resume();
    await closed;
    expect(Buffer.concat(chunks).toString('latin1')).not.toContain('data: [DONE]');
  });
});
