/**
 * A client that half-closes its connection after its request (sends FIN and
 * keeps reading: `nc -N`, HTTP/1.0 scripts) gets its answer, then the
 * connection closes. Node's default took every FIN for a close: a create not
 * yet answered got nothing at all, nothing was logged, and no run was
 * recorded (outside attack). A client that closes completely still has its
 * paused run ended as a disconnect: its stream writes a comment now and then
 * once the FIN came, and the peer's reset closes it. Real sockets, port 0;
 * each wait is on the server's bytes, its log or its close.
 */
import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { captureLogger } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';
import { scriptPolicy } from '../../src/model/policies.js';

const post = (path: string, body: object) => {
  const text = JSON.stringify(body);
  return `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
};

/** Writes `request`, half-closes, and resolves with what came back once the server ended the connection. */
function halfClosed(port: number, request: string, onData?: (text: string, socket: Socket) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString('utf8');
      onData?.(text, socket);
    });
    socket.on('end', () => {
      socket.destroy();
      resolve(text);
    });
    socket.on('error', reject);
    socket.write(request);
    socket.end();
  });
}

const TOOLS = [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }];

describe('a client that half-closes after its request', () => {
  it('gets its answer (JSON, SSE, HTTP/1.0), then the connection closes', async () => {
    const { port, server } = await testServer();
    const json = await halfClosed(port, post('/v1/responses', { model: 'm', input: 'hi' }));
    // Any number of `103 Early Hints` (the probe of a half-closed connection, before the answer has started), then the answer.
    expect(json).toMatch(/^(HTTP\/1\.1 103 Early Hints\r\n\r\n)*HTTP\/1\.1 200 /);
    expect(json).toContain('"status":"completed"');
    const sse = await halfClosed(port, post('/v1/responses', { model: 'm', input: 'hi', stream: true }));
    expect(sse).toContain('"type":"response.completed"');
    expect(sse).toContain('data: [DONE]');
    const old = await halfClosed(port, post('/v1/responses', { model: 'm', input: 'hi', stream: true }).replace('HTTP/1.1', 'HTTP/1.0'));
    expect(old).toContain('data: [DONE]');
    // No 1xx to an HTTP/1.0 client (RFC 9110 §15.2).
    expect(old).toMatch(/^HTTP\/1\.1 200 /);
    await server.services.postWork.flush();
    expect(server.services.records.list().map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
  });

  it('a long-lived run over HTTP: paused, answered from another connection, its stream reaches the half-closed client', async () => {
    const { url, port } = await testServer({ policy: scriptPolicy([{ calls: [{ name: 'f', arguments: {}, call_id: 'call_1' }] }, { text: 'done' }]) });
    let appended = false;
    const text = await halfClosed(port, post('/v1/responses?protocol=long-lived', { model: 'm', input: 'go', stream: true, tools: TOOLS }), (t) => {
      const id = /"id":"(resp_[0-9a-f]+)"/.exec(t)?.[1];
      if (appended || !id || !t.includes('event: response.done')) return;
      appended = true;
      void fetch(`${url}/v1/responses/${id}/append`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ input: [{ type: 'function_call_output', call_id: 'call_1', output: 'ok' }] }),
      });
    });
    expect(appended).toBe(true);
    expect(text).toContain('"type":"response.completed"');
    expect(text).toContain('data: [DONE]');
  });

  it('a client that closes (not half) while its long-lived run is paused: the run ends as a disconnect', async () => {
    const cap = captureLogger();
    const { server, port } = await testServer({ logger: cap.logger, policy: scriptPolicy([{ calls: [{ name: 'f', arguments: {}, call_id: 'call_1' }] }]) });
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const paused = new Promise<void>((resolve) =>
      socket.on('data', (d: Buffer) => {
        text += d.toString('utf8');
        if (text.includes('event: response.done')) resolve();
      }),
    );
    socket.on('error', () => {});
    socket.write(post('/v1/responses?protocol=long-lived', { model: 'm', input: 'go', stream: true, tools: TOOLS }));
    await paused;
    const ended = cap.waitFor((l) => l['status'] === 'cancelled');
    // Everything sent was read: the close is a FIN, as a half-close's is (unread bytes would make it a reset).
    socket.destroy();
    await ended;
    await server.httpTransport.idle();
    await server.services.postWork.flush();
    expect(server.services.records.list().map((r) => r.status)).toEqual(['cancelled']);
  });
});
