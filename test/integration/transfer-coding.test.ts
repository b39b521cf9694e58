/**
 * A body sent with a transfer coding other than `chunked` is refused with
 * 415 `unsupported_media_type`, `param: "Transfer-Encoding"`, as a
 * Content-Encoding is: Node removes the chunking only, so `Transfer-Encoding:
 * gzip, chunked` was read as its gzip bytes (400 "not valid UTF-8"), or, not
 * compressed after all, taken as sent (outside attack). The connection goes
 * on: a request pipelined after it is answered. Real sockets, port 0.
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { untilServerCloses } from '../helpers/raw-http.js';
import { testServer } from '../helpers/server.js';

describe('Transfer-Encoding other than chunked', () => {
  for (const [name, body] of [
    ['gzip', gzipSync('{"input":"hi"}')],
    ['not compressed after all', Buffer.from('{"input":"hi"}')],
  ] as const) {
    it(`is refused 415 with the API's error shape (${name}); the next request on the connection is answered`, async () => {
      const { port } = await testServer();
      const head = `POST /v1/responses/input_tokens HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n`;
      const request = Buffer.concat([
        Buffer.from(`${head}${body.length.toString(16)}\r\n`),
        body,
        Buffer.from('\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'),
      ]);
      const text = await untilServerCloses(port, request, 'latin1');
      const answers = text.split(/(?=HTTP\/1\.1 \d{3} )/);
      expect(answers).toHaveLength(2);
      expect(answers[0]).toMatch(/^HTTP\/1\.1 415 /);
      const error = (JSON.parse(answers[0]!.slice(answers[0]!.indexOf('\r\n\r\n') + 4)) as { error: Record<string, unknown> }).error;
      expect(error).toEqual({ message: expect.stringContaining("Transfer-Encoding 'gzip'"), type: 'invalid_request_error', param: 'Transfer-Encoding', code: 'unsupported_media_type' });
      expect(answers[1]).toMatch(/^HTTP\/1\.1 200 /);
    });
  }
});
