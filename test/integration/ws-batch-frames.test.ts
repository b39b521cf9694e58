/**
 * The WebSocket transport's own frames for a batch of deltas
 * (transport/ws-frames.ts), over real sockets: written directly only when
 * the `ws` library's sender is provably idle and uncompressed, and then
 * received as one text message per delta, in order after what `ws.send`
 * wrote before.
 */
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { mulberry32 } from '../../src/model/rng.js';
import { DeltaBatch, DeltaHead, eventJson } from '../../src/protocol/event-json.js';
import { batchFrames, directSocket } from '../../src/transport/ws-frames.js';

function randomBatch(seed: number): DeltaBatch {
  const rng = mulberry32(seed);
  const pick = ['a', ' the', '"', '\\', '\n', 'é', '中', '😀', '\ud83d', '\u0000', 'x'.repeat(300)];
  const deltas = Array.from({ length: 64 }, () => pick[Math.floor(rng() * pick.length)]!);
  return new DeltaBatch(new DeltaHead('response.output_text.delta', 'msg_abc', 0, 0), deltas, 5);
}

async function pair(options: { perMessageDeflate?: boolean } = {}) {
  const wss = new WebSocketServer({ port: 0, ...options });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  const serverSide = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, options);
  const [ws] = await Promise.all([serverSide, new Promise<void>((resolve) => client.once('open', () => resolve()))]);
  const close = async () => {
    client.close();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  };
  return { ws, client, close };
}

describe('WebSocket frames of a batch, on a real socket', () => {
  it('go out as one message per delta over a real socket, once the sender is proven idle', async () => {
    const { ws, client, close } = await pair();
    try {
      const b = randomBatch(3);
      const socket = directSocket(ws);
      expect(socket).not.toBeNull();
      const got: string[] = [];
      const all = new Promise<void>((resolve) =>
        client.on('message', (data: Buffer, isBinary: boolean) => {
          expect(isBinary).toBe(false);
          got.push(data.toString('utf8'));
          if (got.length === b.deltas.length + 1) resolve();
        }),
      );
      ws.send('before');
      socket!.write(batchFrames(b).frames);
      await all;
      expect(got).toEqual(['before', ...b.deltas.map((_, i) => eventJson(b.event(i)))]);
    } finally {
      await close();
    }
  });

  it('are not written directly while permessage-deflate is on', async () => {
    const { ws, close } = await pair({ perMessageDeflate: true });
    try {
      expect(ws.extensions).toContain('permessage-deflate');
      expect(directSocket(ws)).toBeNull();
    } finally {
      await close();
    }
  });
});
