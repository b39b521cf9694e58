/**
 * A raw `ws` echo server for benchmarks: every text frame comes straight
 * back. Run as its own process; prints `{"url": …}` once listening.
 */
import { WebSocketServer } from 'ws';
import { exitWithParent } from '../lifecycle.js';

const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
wss.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
wss.on('listening', () => {
  const addr = wss.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
process.on('SIGTERM', () => wss.close(() => process.exit(0)));
exitWithParent(() => process.exit(0));
