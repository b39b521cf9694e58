/**
 * A raw `ws` server for benchmarks, in its own process: text frames come
 * straight back (the loopback round-trip floor), except a frame
 * `{"blast":N,"bytes":B}`, which is answered with N frames of B bytes of JSON
 * sent as fast as `ws` takes them (the raw frame-throughput ceiling the
 * streaming target is compared with), and a frame starting `{"hold_us":N`,
 * echoed after the process has kept its CPU busy for N µs (at most 10 ms):
 * the round trip of a server that does no work but takes as long as one
 * that does, which shows what the time a server takes costs its client on
 * this machine beyond that time (the peer's wake-up). A frame
 * `{"script":[turn, …]}` loads a recorded exchange on that connection
 * (answered `{"type":"script.loaded","turns":N}`): each turn is a list of
 * writes, each write a list of frames; the connection's next N frames are
 * answered one turn each, every write's frames corked into one socket write,
 * as the server that sent them wrote them (transport/batch.ts), and then it
 * echoes again. A client that replays what `llr serve` sent it meets the
 * same bytes and framing from a server that does no work for them: the wire
 * floor of that exchange. Prints `{"url": …}` once listening.
 */
import { WebSocketServer } from 'ws';
import { exitWithParent } from '../lifecycle.js';

const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
wss.on('connection', (ws, req) => {
  const socket = req.socket;
  let script: string[][][] = [];
  ws.on('message', (data, isBinary) => {
    const turn = script.shift();
    if (turn) {
      for (const write of turn) {
        socket.cork();
        for (const frame of write) ws.send(frame);
        socket.uncork();
      }
      return;
    }
    const text = isBinary ? '' : data.toString();
    if (text.startsWith('{"script":')) {
      script = (JSON.parse(text) as { script: string[][][] }).script;
      ws.send(JSON.stringify({ type: 'script.loaded', turns: script.length }));
      return;
    }
    const hold = /^\{"hold_us":(\d{1,5})[,}]/.exec(text);
    if (hold) {
      const until = performance.now() + Math.min(10_000, Number(hold[1])) / 1000;
      while (performance.now() < until);
      ws.send(data, { binary: false });
      return;
    }
    const blast = text.startsWith('{"blast":') ? (JSON.parse(text) as { blast: number; bytes: number }) : null;
    if (!blast) {
      ws.send(data, { binary: isBinary });
      return;
    }
    const head = '{"type":"raw","seq":0,"pad":"';
    const pad = 'x'.repeat(Math.max(0, blast.bytes - head.length - 2));
    for (let i = 0; i < blast.blast; i++) ws.send(`${head}${pad}"}`);
  });
});
wss.on('listening', () => {
  const addr = wss.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
process.on('SIGTERM', () => wss.close(() => process.exit(0)));
exitWithParent(() => process.exit(0));
