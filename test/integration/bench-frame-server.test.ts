/**
 * The bench's raw `ws` frame server (src/bench/frame-server.ts), spawned from
 * dist as the benches spawn it: a text frame comes back byte for byte; a
 * `{"hold_us":N` frame comes back after at least N µs (capped at 10 ms, so a
 * huge hold still answers); a `{"blast":N,"bytes":B}` frame is answered with
 * N frames of B bytes; a `{"script":…}` frame loads what `llr serve` sent a
 * recorded loop (a real server on port 0), and the bench's own loop driver
 * meets the same frames from it, turn by turn, then the echo again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist } from '../helpers/build.js';
import { testServer } from '../helpers/server.js';
import { eventType, loadScript, longLivedLoop, openLongLived, type Recording } from '../../src/bench/overhead-loop.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let proc: ChildProcess;
let url: string;

beforeAll(async () => {
  await buildDist();
  proc = spawn(process.execPath, [join(ROOT, 'dist', 'bench', 'frame-server.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /"url":"([^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    });
    proc.once('exit', (code) => reject(new Error(`frame server exited (${code})`)));
  });
}, 120_000);
afterAll(() => {
  proc?.kill();
});

function open(): Promise<WebSocket> {
  const ws = new WebSocket(url.replace(/^http/, 'ws'));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

function roundTrip(ws: WebSocket, text: string): Promise<{ ms: number; back: string }> {
  return new Promise((resolve) => {
    const t = performance.now();
    ws.once('message', (data: Buffer) => resolve({ ms: performance.now() - t, back: data.toString() }));
    ws.send(text);
  });
}

describe('bench frame server', () => {
  it('echoes a frame byte for byte, and holds a hold_us frame at least that long', async () => {
    const ws = await open();
    try {
      const text = JSON.stringify({ type: 'x', pad: 'é'.repeat(300) });
      expect((await roundTrip(ws, text)).back).toBe(text);
      const held = JSON.stringify({ hold_us: 3000, pad: 'x'.repeat(100) });
      const r = await roundTrip(ws, held);
      expect(r.back).toBe(held);
      expect(r.ms).toBeGreaterThanOrEqual(3);
      // Past the 10 ms cap the frame is still answered.
      const huge = JSON.stringify({ hold_us: 99999 });
      expect((await roundTrip(ws, huge)).back).toBe(huge);
    } finally {
      ws.close();
    }
  });

  it('answers a blast with N frames of the asked size', async () => {
    const ws = await open();
    try {
      const frames: number[] = [];
      await new Promise<void>((resolve) => {
        ws.on('message', (data: Buffer) => {
          frames.push(data.length);
          if (frames.length === 25) resolve();
        });
        ws.send(JSON.stringify({ blast: 25, bytes: 200 }));
      });
      expect(frames).toEqual(Array.from({ length: 25 }, () => 200));
    } finally {
      ws.close();
    }
  });

  it('replays a recorded long-lived loop: the same frames in order, a turn per frame sent, then echoes again', async () => {
    const { url: llr } = await testServer();
    const real = await openLongLived(llr);
    const recording: Recording = [];
    const seen: string[] = [];
    real.on('message', (d: Buffer) => seen.push(d.toString()));
    await longLivedLoop(real, 3, 64, recording);
    real.close();
    // A turn per frame the driver sent (the create, three appends), holding every frame it received, in order.
    expect(recording).toHaveLength(4);
    expect(recording.flat(2)).toEqual(seen);
    const types = (write: string[]) => write.map((f) => eventType(Buffer.from(f)));
    // A tool turn's first write ends at the call's output_item.done (the server flushes there); the pause's
    // response.done is a write of its own. The last turn (the final message) is one write.
    for (const turn of recording.slice(0, 3)) {
      expect(turn).toHaveLength(2);
      expect(types(turn[0]!).at(-1)).toBe('response.output_item.done');
      expect(types(turn[1]!)).toEqual(['response.done']);
    }
    expect(recording[3]).toHaveLength(1);
    expect(types(recording[3]![0]!).at(-1)).toBe('response.completed');

    const ws = await open();
    try {
      await loadScript(ws, recording);
      const replayed: string[] = [];
      ws.on('message', (d: Buffer) => replayed.push(d.toString()));
      const again = await longLivedLoop(ws, 3, 64);
      expect(again.samples).toHaveLength(3);
      expect(replayed).toEqual(seen);
      ws.removeAllListeners('message');
      // The script used up, the connection echoes again.
      expect((await roundTrip(ws, 'after the script')).back).toBe('after the script');
    } finally {
      ws.close();
    }
  });
});
