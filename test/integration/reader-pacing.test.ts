/**
 * A model faster than its reader is paced by the reader. The instant model
 * writes a long answer faster than any client reads it; the unsent bytes
 * grew until the send limit dropped a client that was reading (an outside
 * attack: a ~100,000-token call got `send_buffer_full` on every design at
 * the default 4 MiB). Now a run whose reader is behind by half the limit
 * takes no more of the model's tokens until the reader has caught up
 * (`send_paced`, the `send_wait` span), over a WebSocket and over SSE; a
 * reader that reads nothing at all is still dropped, once nothing has left
 * for `--send-stall-timeout-ms` (`send_stalled`), its run cancelled.
 *
 * The readers here stop reading until the server says it waits for them,
 * then read everything: without the pacing they are dropped first.
 */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { scriptPolicy } from '../../src/model/policies.js';
import { countTokens } from '../../src/model/tokenizer.js';
import { LlrServer } from '../../src/server.js';
import { RawSocket } from '../helpers/raw-socket.js';
import { captureLogger, rawConnect, requestText } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

const LIMIT = 64 * 1024;
// About 30,000 tokens: several megabytes of delta events, far past the limit.
const TEXT = Array.from({ length: 15_000 }, (_, i) => `w${i}`).join(' ');

function server(extra: Record<string, number> = {}, text = TEXT) {
  const cap = captureLogger();
  return testServer({ logger: cap.logger, policy: scriptPolicy([{ text }]), limits: { maxSendBufferBytes: LIMIT, ...extra } }).then((ctx) => ({ ...ctx, cap }));
}

async function recordOf(srv: LlrServer, id: string) {
  await srv.services.postWork.flush();
  return srv.services.records.get(id)!;
}

/**
 * A TCP relay in front of the server that takes what the server sends at most `rate` bytes a second
 * (client to server unthrottled: pongs and frames pass at once), until `unthrottle()`.
 */
async function slowRelay(port: number, rate: number) {
  const unthrottled: Array<() => void> = [];
  let forwarded = 0;
  const waits: Array<{ bytes: number; resolve: () => void }> = [];
  const passed = (n: number) => {
    forwarded += n;
    for (const w of waits.splice(0)) {
      if (forwarded >= w.bytes) w.resolve();
      else waits.push(w);
    }
  };
  const relay = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    client.pipe(upstream);
    upstream.pause();
    let last = performance.now();
    const tick = setInterval(() => {
      // What the time since the last tick allows (at most a second's worth): on a loaded machine the ticks come late,
      // and a fixed share per tick slowed the reader down until the server rightly took it for gone.
      const now = performance.now();
      let left = Math.min(rate, (rate * (now - last)) / 1000);
      last = now;
      while (left > 0) {
        const n = Math.min(left, upstream.readableLength);
        if (n === 0) {
          upstream.read(0);
          break;
        }
        const b = upstream.read(n) as Buffer | null;
        if (b === null) break;
        client.write(b);
        left -= b.length;
        passed(b.length);
      }
    }, 50);
    unthrottled.push(() => {
      clearInterval(tick);
      upstream.pipe(client);
    });
    const end = () => {
      clearInterval(tick);
      client.destroy();
      upstream.destroy();
    };
    upstream.on('close', end);
    client.on('close', end);
    upstream.on('error', () => {});
    client.on('error', () => {});
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(relay.address() as AddressInfo).port}`,
    /** Resolves once the throttled side has passed `bytes` on to the client. */
    forwarded: (bytes: number) => new Promise<void>((resolve) => (forwarded >= bytes ? resolve() : waits.push({ bytes, resolve }))),
    unthrottle: () => unthrottled.forEach((f) => f()),
    close: () => relay.close(),
  };
}

function socketOf(s: RawSocket): Socket {
  return (s.ws as unknown as { _socket: Socket })._socket;
}

describe('a reader slower than the model paces the run', () => {
  it('WebSocket: a client that stops reading, then reads, gets the whole answer; the run waited for it', async () => {
    const { url, server: srv, cap } = await server();
    const s = await RawSocket.longLived(url);
    socketOf(s).pause();
    s.send({ type: 'response.create', model: 'sim-model', input: 'go' });
    // Dropped instead (send_buffer_full) without the pacing: the socket closes first.
    const paced = await Promise.race([cap.waitFor((l) => l.code === 'send_paced'), s.closed.then((c) => Promise.reject(new Error(`closed ${c.code} before the run waited`)))]);
    socketOf(s).resume();
    const done = await s.next('response.completed');
    const text = done.response.output[0]!.type === 'message' ? (done.response.output[0]!.content[0] as { text: string }).text : '';
    expect(text).toBe(TEXT);
    const deltas = s.events.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as { delta: string }).delta);
    expect(deltas.join('')).toBe(TEXT);
    expect(s.events.map((e) => e.sequence_number)).toEqual(s.events.map((_, i) => i));
    expect(paced['response_id']).toBe(done.response.id);
    const rec = await recordOf(srv, done.response.id);
    expect(rec.status).toBe('completed');
    expect(rec.spans.some((sp) => sp.stage === 'send_wait')).toBe(true);
    expect(cap.lines.some((l) => l.code === 'send_buffer_full' || l.code === 'send_stalled')).toBe(false);
  });

  it('WebSocket: a reader slower than the socket buffers hold, but reading, is not dropped by the heartbeat', async () => {
    // Its pong waits behind megabytes in the kernel's buffers (unseen: the kernel took them) and in the send
    // buffer; it reads them steadily, so the kernel keeps taking bytes: the heartbeat dropped it as silent
    // (ws_idle_timeout; at the defaults, a 50 KB/s reader after 60 s) although the stall watch kept it.
    // Long enough that the run still waits for its reader when the slow phase ends (past the kernel's buffers).
    const { port, cap } = await server({ wsIdleTimeoutMs: 3000, sendStallTimeoutMs: 30_000 }, TEXT + ' ' + TEXT + ' ' + TEXT);
    const relay = await slowRelay(port, 1_000_000);
    try {
      const s = await RawSocket.longLived(relay.url);
      s.send({ type: 'response.create', model: 'sim-model', input: 'go' });
      await cap.waitFor((l) => l.code === 'send_paced');
      // 6 MB at 1 MB/s, four heartbeat periods (the pong comes seconds late: megabytes wait in the kernel ahead
      // of it; the kernel takes more every second or so), then at full speed to the end. A drop fails at once,
      // naming its code, instead of leaving the relay waiting for bytes that never come.
      const drops = ['ws_idle_timeout', 'send_stalled', 'send_buffer_full'];
      const dropped = cap.waitFor((l) => drops.includes(l.code as string));
      await Promise.race([relay.forwarded(6_000_000), dropped.then((l) => Promise.reject(new Error(`dropped while reading: ${JSON.stringify(l)}`)))]);
      relay.unthrottle();
      const done = await s.next('response.completed');
      expect(done.response.status).toBe('completed');
      expect(cap.lines.filter((l) => l.code === 'ws_idle_timeout' || l.code === 'send_stalled' || l.code === 'send_buffer_full')).toEqual([]);
    } finally {
      relay.close();
    }
    // About 7 s alone (6 MB through the 1 MB/s relay, then ~15 MB of events at full speed); the relay's pacing and the
    // server's ~90,000 deltas both slow down when the whole suite shares two CPUs: it took over 20 s in a CI run.
  }, 60_000);

  it('WebSocket: a client that pings often while it does not read keeps its connection, and then reads the whole answer', async () => {
    // The server's pongs wait behind the paced run's bytes, so none completes while the client reads nothing: the
    // `ws` library terminated a peer with 60 pongs pending (its ping-flood guard), unlogged, and the run ended as a
    // disconnect (outside attack: a 300 KB/s reader pinging every 100 ms, dropped after 6.7 s; the heartbeat had kept
    // it). The server now owes at most one pong (RFC 6455 5.5.3: only the latest ping need be answered).
    const { server: srv, url, cap } = await server();
    const s = await RawSocket.longLived(url);
    socketOf(s).pause();
    s.send({ type: 'response.create', model: 'sim-model', input: 'go' });
    await cap.waitFor((l) => l.code === 'send_paced');
    let pongs = 0;
    s.ws.on('pong', () => pongs++);
    // The server's side of the connection: every ping it got, or its end (without the fix, the guard's).
    const [peer] = (srv.ws as unknown as { wss: { clients: Set<import('ws').WebSocket> } }).wss.clients;
    const arrived = new Promise<void>((resolve) => {
      let pings = 0;
      peer!.on('ping', () => {
        if (++pings === 100) resolve();
      });
      peer!.on('close', () => resolve());
    });
    for (let i = 0; i < 100; i++) s.ws.ping(Buffer.from(String(i)));
    await arrived;
    socketOf(s).resume();
    const done = await Promise.race([s.next('response.completed'), s.closed.then((c) => Promise.reject(new Error(`closed ${c.code}`)))]);
    expect(done.response.status).toBe('completed');
    expect(pongs).toBeGreaterThanOrEqual(1);
    expect(pongs).toBeLessThan(100);
    expect((await recordOf(srv, done.response.id)).status).toBe('completed');
  });

  it('WebSocket: a client that never reads is dropped after the stall timeout, its run cancelled', async () => {
    const { url, server: srv, cap } = await server({ sendStallTimeoutMs: 200 });
    const s = await RawSocket.longLived(url);
    socketOf(s).pause();
    s.send({ type: 'response.create', model: 'sim-model', input: 'go' });
    const paced = await cap.waitFor((l) => l.code === 'send_paced');
    const stalled = await cap.waitFor((l) => l.code === 'send_stalled');
    expect(stalled['stall_ms']).toBe(200);
    await srv.ws.idle();
    const rec = await recordOf(srv, paced['response_id'] as string);
    expect(rec.status).toBe('cancelled');
    // It stopped taking tokens when its reader fell behind (what it took filled the kernel's socket buffers).
    expect(rec.usage!.output_tokens).toBeLessThan(countTokens(TEXT));
  });

  it('WebSocket with no stall timeout: a client that reads nothing but keeps sending frames is dropped, its run cancelled', async () => {
    // With the stall timeout off the run's wait for its reader was left to the heartbeat, which anything arriving
    // satisfies: a client that read nothing but sent a frame (here response.processed) or a pong now and then held
    // its run in_progress for good (outside attack: for as long as the connection's lifetime, an hour by default).
    // Nothing leaving for a whole idle timeout now ends the wait as the stall timeout would.
    const { url, server: srv, cap } = await server({ sendStallTimeoutMs: 0, wsIdleTimeoutMs: 400 });
    const s = await RawSocket.longLived(url);
    socketOf(s).pause();
    s.send({ type: 'response.create', model: 'sim-model', input: 'go' });
    const paced = await cap.waitFor((l) => l.code === 'send_paced');
    const talk = setInterval(() => s.send({ type: 'response.processed' }), 50);
    try {
      const stalled = await Promise.race([cap.waitFor((l) => l.code === 'send_stalled'), new Promise<null>((resolve) => setTimeout(() => resolve(null), 5000))]);
      expect(stalled?.['stall_ms']).toBe(400);
    } finally {
      clearInterval(talk);
    }
    await srv.ws.idle();
    expect((await recordOf(srv, paced['response_id'] as string)).status).toBe('cancelled');
  });

  it('WebSocket with no stall timeout and no heartbeat: a reader that never reads is dropped at the send limit', async () => {
    const { url, server: srv, cap } = await server({ sendStallTimeoutMs: 0, wsIdleTimeoutMs: 0 });
    const s = await RawSocket.longLived(url);
    socketOf(s).pause();
    s.send({ type: 'response.create', model: 'sim-model', input: 'go' });
    await cap.waitFor((l) => l.code === 'send_buffer_full');
    await srv.ws.idle();
    expect(srv.services.records.list().map((r) => r.status)).toEqual(['cancelled']);
    expect(cap.lines.some((l) => l.code === 'send_paced')).toBe(false);
  });

  it('SSE with no stall timeout: a reader that never reads is not waited for, but dropped at the send limit', async () => {
    // Nothing else ends an SSE stream whose reader reads nothing (no heartbeat): the run waited for it for ever,
    // in_progress, its connection held.
    const { port, server: srv, cap } = await server({ sendStallTimeoutMs: 0 });
    const sock = await rawConnect(port);
    sock.pause();
    const body = JSON.stringify({ model: 'sim-model', input: 'go', stream: true });
    sock.write(requestText('POST', '/v1/responses', { 'Content-Type': 'application/json', Host: `127.0.0.1:${port}`, Connection: 'close' }, body));
    await cap.waitFor((l) => l.code === 'send_buffer_full');
    await srv.httpTransport.idle();
    const recs = srv.services.records.list();
    expect(recs.map((r) => r.status)).toEqual(['cancelled']);
    expect(cap.lines.some((l) => l.code === 'send_paced')).toBe(false);
    sock.destroy();
  });

  it('SSE: a reader that stops, then reads, gets the whole stream to [DONE]', async () => {
    const { port, server: srv, cap } = await server();
    const sock = await rawConnect(port);
    sock.pause();
    const body = JSON.stringify({ model: 'sim-model', input: 'go', stream: true });
    sock.write(requestText('POST', '/v1/responses', { 'Content-Type': 'application/json', Host: `127.0.0.1:${port}`, Connection: 'close' }, body));
    const closed = new Promise<never>((_, reject) => sock.once('close', () => reject(new Error('closed before the run waited'))));
    const paced = await Promise.race([cap.waitFor((l) => l.code === 'send_paced'), closed]);
    const chunks: Buffer[] = [];
    // The chunked body's last chunk ends the answer (the socket itself may stay open for keep-alive).
    const ended = new Promise<void>((resolve) =>
      sock.on('data', (c: Buffer) => {
        chunks.push(c);
        if (Buffer.concat(chunks.slice(-2)).toString('latin1').endsWith('\r\n0\r\n\r\n')) resolve();
      }),
    );
    sock.resume();
    await ended;
    const raw = Buffer.concat(chunks).toString('utf8');
    expect(raw).toContain('data: [DONE]\n\n');
    expect(raw).toContain('"type":"response.completed"');
    const rec = await recordOf(srv, paced['response_id'] as string);
    expect(rec.status).toBe('completed');
    expect(rec.usage!.output_tokens).toBeGreaterThan(15_000);
    expect(cap.lines.some((l) => l.code === 'send_buffer_full' || l.code === 'send_stalled')).toBe(false);
  });

  it('SSE with a send limit below the stream\'s own high-water mark: a reader that reads is not made to wait for a drain that never comes', async () => {
    // 1 KB: the run waited at 512 unsent bytes for a 'drain', which a write under the socket's high-water mark never
    // brings, and the stall watch, with bytes leaving, never dropped the reader: the stream hung for good.
    const { url, cap } = await server({ maxSendBufferBytes: 1000 }, 'all work and no play '.repeat(200));
    const t0 = performance.now();
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'sim-model', input: 'go', stream: true }) });
    const raw = await res.text();
    expect(raw).toContain('"type":"response.completed"');
    expect(raw).toContain('data: [DONE]\n\n');
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(cap.lines.some((l) => l.code === 'send_buffer_full' || l.code === 'send_stalled')).toBe(false);
  }, 40_000);
});
