/**
 * An API key sent in a request target's query (`?api_key=`, how a browser's WebSocket upgrade carries one) never
 * reaches the log: refused upgrades and refused requests logged their target whole, the key with it (outside attack).
 * Real sockets, port 0; the waits are on the server's log lines.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';
import { loggedPath } from '../../src/transport/auth.js';

const KEY = 'sk-live-SECRET-0123456789';

/** Send `head` on a raw socket; resolves with what came back once the server closes it or answers a whole head. */
function raw(port: number, head: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('error', () => resolve(text));
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (text.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('close', () => resolve(text));
    socket.write(head);
  });
}

const upgrade = (target: string) =>
  `GET ${target} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;

describe('an API key in a request target', () => {
  it('is not written to the log when its upgrade or request is refused', async () => {
    const cap = captureLogger();
    const { port } = await testServer({ logger: cap.logger, apiKeys: [KEY] });
    const cases = [
      upgrade(`/v1/responses?api_key=${KEY}&protocol=bogus`),
      upgrade(`/v1/response?api_key=${KEY}`),
      upgrade(`/v1/responses?api%5Fkey=${encodeURIComponent(KEY)}&protocol=bogus`),
      `GET /v1/responses/resp_x?api_key=${KEY}x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
    ];
    for (const head of cases) {
      const answer = await raw(port, head);
      expect(answer).toMatch(/^HTTP\/1\.1 4\d\d /);
    }
    const refusals = () => cap.lines.filter((l) => l.msg === 'websocket upgrade refused' || l.msg === 'request refused');
    // Each refusal's line, as the log receives it.
    while (refusals().length < cases.length) await cap.waitFor(() => true);
    expect(refusals().map((l) => l.msg)).toEqual(['websocket upgrade refused', 'websocket upgrade refused', 'websocket upgrade refused', 'request refused']);
    for (const l of refusals()) expect(String(l['path'])).toContain('REDACTED');
    const all = cap.lines.map((l) => JSON.stringify(l)).join('\n');
    expect(all).not.toContain('SECRET');
  });

  it('loggedPath redacts every api_key value, however its name is spelled in the query, and keeps the rest', () => {
    expect(loggedPath('/v1/responses?protocol=ws&api_key=abc&x=1')).toBe('/v1/responses?protocol=ws&api_key=REDACTED&x=1');
    expect(loggedPath('/v1/responses?api%5Fkey=abc&api_key=def')).toBe('/v1/responses?api%5Fkey=REDACTED&api_key=REDACTED');
    expect(loggedPath('/a?api_key')).toBe('/a?api_key=REDACTED');
    expect(loggedPath('/a?%E0%A4%A=1&api_key=k')).toBe('/a?%E0%A4%A=1&api_key=REDACTED');
    expect(loggedPath('/v1/responses')).toBe('/v1/responses');
    expect(loggedPath(undefined)).toBe('');
    expect(loggedPath(`/x?${'a=1&'.repeat(100)}api_key=${'k'.repeat(300)}`)).not.toContain('kkk');
  });
});
