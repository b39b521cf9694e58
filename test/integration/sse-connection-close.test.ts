/**
 * A client that sends `Connection: close` gets its SSE stream, then the
 * connection closed (RFC 9112 §9.6), on a create's stream and on a
 * background response's resumed one. The stream's explicit `Connection:
 * keep-alive` header overrode the client's `close`: the answer said
 * keep-alive and the connection stayed open after `data: [DONE]` until the
 * keep-alive timeout (outside attack). Real sockets, port 0; waits for the
 * server's end of the connection.
 */
import { describe, expect, it } from 'vitest';
import { untilServerCloses } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

describe('an SSE stream asked for with Connection: close', () => {
  it('says close and ends the connection after data: [DONE] (create, then a background resume)', async () => {
    // The keep-alive timeout is far longer than the test's: only the server's own close ends the wait.
    const { url, port } = await testServer({ limits: { keepAliveTimeoutMs: 600_000 } });
    const body = JSON.stringify({ model: 'm', input: 'hi', stream: true });
    const text = await untilServerCloses(
      port,
      `POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(text).toMatch(/\r\nConnection: close\r\n/i);
    expect(text).toContain('data: [DONE]');
    const created = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi', background: true }) });
    const { id } = (await created.json()) as { id: string };
    const resumed = await untilServerCloses(port, `GET /v1/responses/${id}?stream=true&starting_after=0 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(resumed).toMatch(/\r\nConnection: close\r\n/i);
    expect(resumed).toContain('data: [DONE]');
  });
});
