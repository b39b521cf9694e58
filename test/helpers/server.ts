/**
 * Test servers: a real server on 127.0.0.1 port 0 with a silent logger, an
 * in-memory store and (by default) an instant scripted model, disposed after
 * each test. No fakes for sockets.
 */
import { pino } from 'pino';
import { afterEach } from 'vitest';
import { LlrServer, INSTANT_MODEL, type ServerOptions } from '../../src/server.js';

const live = new Set<LlrServer>();

afterEach(async () => {
  const servers = [...live];
  live.clear();
  await Promise.all(servers.map((s) => s.close()));
});

export async function testServer(opts: ServerOptions = {}): Promise<{ server: LlrServer; url: string; port: number }> {
  const server = new LlrServer({
    port: 0,
    store: 'memory',
    logger: pino({ level: 'silent' }),
    modelSettings: INSTANT_MODEL,
    ...opts,
  });
  live.add(server);
  const { url, port } = await server.listen();
  return { server, url, port };
}
