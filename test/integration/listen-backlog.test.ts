/**
 * `--listen-backlog` (`listenBacklog`): the listening socket's accept queue. Node's default, 511, held the
 * chaos concurrency scenario's long form to a burst of 512 connections: 1,000 long-lived runs over HTTP, paused
 * together, each appended on a fresh connection while the event loop was busy, and the kernel dropped the
 * handshakes past the queue (`ListenOverflows`); the client retried them after 1 s, 3 s, 7 s, and 240-440 runs had
 * an append (or their create) not answered within 10 s, a few reset.
 *
 * Here the server accepts nothing while a burst arrives: this process's event loop (the server's) is held by
 * `spawnSync` while a child opens the connections, so every one must wait, completed, in the kernel's queue. The
 * child exits once all have connected; with the default queue the ones past 512 never do (the child is killed at
 * its bound, which fails the test).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/engine/services.js';
import { testServer } from '../helpers/server.js';

const SOMAXCONN = existsSync('/proc/sys/net/core/somaxconn') ? Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8')) : 0;
const BACKLOG = 1024;
/** Past what Node's default queue holds (511: the kernel keeps backlog + 1). */
const BURST = 600;

/** Connects `argv[2]` sockets to port `argv[1]`, prints `connected N` once every one has and exits. */
const CONNECTOR = `
const net = require('node:net');
const [port, n] = process.argv.slice(1).map(Number);
let connected = 0;
const sockets = [];
for (let i = 0; i < n; i++) {
  const s = net.connect(port, '127.0.0.1', () => {
    if (++connected === n) { process.stdout.write('connected ' + connected + '\\n'); process.exit(0); }
  });
  s.on('error', (err) => { process.stdout.write('error ' + err.message + '\\n'); process.exit(1); });
  sockets.push(s);
}
`;

describe('the listen backlog (--listen-backlog)', () => {
  it("defaults to the connection cap's default (1,024), so a burst up to the cap fits (Node's own default is 511)", () => {
    expect(DEFAULT_LIMITS.listenBacklog).toBe(DEFAULT_LIMITS.maxConnections);
  });

  // The kernel caps the queue at net.core.somaxconn (4096 on Linux >= 5.4; 128 before).
  it.skipIf(process.platform !== 'linux' || SOMAXCONN < BACKLOG)(`holds a burst of ${BURST} connections the server has not accepted yet`, async () => {
    const { url, port } = await testServer({ limits: { listenBacklog: BACKLOG } });
    // Blocks this process, the server's: it accepts nothing until the child is done.
    const child = spawnSync(process.execPath, ['-e', CONNECTOR, String(port), String(BURST)], { encoding: 'utf8', timeout: 20_000 });
    expect({ stdout: child.stdout.trim(), signal: child.signal }).toEqual({ stdout: `connected ${BURST}`, signal: null });
    // The server then accepts them (closed by the child's exit) and goes on serving.
    const res = await fetch(`${url}/health`);
    expect(res.status).toBe(200);
  });
});
