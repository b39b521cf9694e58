/**
 * The server speaks no WebSocket subprotocol, so it selects none of those a
 * client offers (`Sec-WebSocket-Protocol`): the 101 names none, and the
 * connection serves the API as without the header. The `ws` library's default
 * selected the first one offered, whatever it was (`graphql-ws`, `mqtt`), so
 * the server claimed to speak a protocol it does not (outside attack). A
 * client that needs one then fails the handshake, as RFC 6455 §4.1 has it.
 * Real sockets, port 0.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { testServer } from '../helpers/server.js';

function upgrade(port: number, protocols: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end >= 0) {
        s.destroy();
        resolve(text.slice(0, end));
      }
    });
    s.on('error', reject);
    s.write(
      'GET /v1/responses HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: ${protocols}\r\n\r\n`,
    );
  });
}

describe('WebSocket subprotocols', () => {
  it('none offered is selected: the 101 names none', async () => {
    const { port } = await testServer();
    const head = await upgrade(port, 'graphql-ws, mqtt');
    expect(head).toMatch(/^HTTP\/1\.1 101 /);
    expect(head).not.toMatch(/sec-websocket-protocol/i);
  });

  it('a client that offers some and accepts none is served as without them', async () => {
    const { url } = await testServer();
    // The header set by hand: the `ws` client then expects none back, and refuses a 101 that names one ("Server sent a
    // subprotocol but none was requested"), as the server's selection of `foo` was.
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/responses`, { headers: { 'Sec-WebSocket-Protocol': 'foo' } });
    const events: string[] = [];
    const completed = new Promise<void>((resolve, reject) => {
      ws.on('message', (d) => {
        const e = JSON.parse(d.toString()) as { type: string };
        events.push(e.type);
        if (e.type === 'response.completed') resolve();
      });
      ws.on('error', reject);
    });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    expect(ws.protocol).toBe('');
    ws.send(JSON.stringify({ type: 'response.create', model: 'm', input: 'hi' }));
    await completed;
    ws.close();
    expect(events[0]).toBe('response.created');
  });
});
