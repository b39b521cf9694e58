/**
 * Two ways a bench could report nonsense or never return: a server child
 * that cannot act on SIGTERM (stopped, or its loop stuck) is killed after
 * the grace instead of keeping `stop()` waiting for ever, and a stream
 * round over which the server's CPU did not advance fails instead of
 * reporting an infinite rate (which passed the target and "agreed" with
 * any other round in the warm-up's steadiness test).
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { describe, expect, it } from 'vitest';
import type { ServerProcess, ServerStats } from '../../src/bench/guard.js';
import { deltaThroughput } from '../../src/bench/overhead-server.js';
import { stopper } from '../../src/bench/processes.js';

describe('bench guards', () => {
  it('stop() kills a child that ignores SIGTERM once the grace is over', { timeout: 10_000 }, async () => {
    const proc = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000); console.log('up')"], { stdio: ['ignore', 'pipe', 'ignore'] });
    await new Promise((resolve) => proc.stdout.once('data', resolve));
    try {
      // stop() resolves on the child's exit; one that waited for ever fails on the test's timeout, and the finally still kills the child.
      await stopper(proc, 200)();
      expect(proc.signalCode).toBe('SIGKILL');
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    }
  });

  it('a stream round with no server CPU fails instead of reporting Infinity', async () => {
    const http = createServer();
    const wss = new WebSocketServer({ server: http });
    wss.on('connection', (ws) =>
      ws.on('message', () => {
        for (let i = 0; i < 3; i++) ws.send(`{"type":"response.output_text.delta","delta":"x","sequence_number":${i}}`);
        ws.send('{"type":"response.completed"}');
      }),
    );
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    const frozen: ServerStats = { cpu_us: { user: 1000, system: 1000 }, memory: { rss: 0, heapUsed: 0, heapTotal: 0, external: 0, arrayBuffers: 0 }, gc_available: false };
    const server = { url, race: <T>(p: Promise<T>) => p, getJson: async () => frozen } as unknown as ServerProcess;
    try {
      await expect(deltaThroughput(server, { streams: 2, input: [], tools: [], expected: 3, timeoutMs: 5000 })).rejects.toThrow(/CPU did not advance/);
    } finally {
      for (const c of wss.clients) c.terminate();
      wss.close();
      http.close();
    }
  });
});
