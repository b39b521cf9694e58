/**
 * The heartbeat's rule (src/transport/heartbeat.ts), period by period, without timers: a peer is dropped
 * after two periods in a row (a whole idle timeout) with no sign of life, never after one. A slow reader's
 * only sign, the kernel taking more of the server's bytes, can come over a period apart: with one silent
 * period enough, a reader that read steadily was dropped (the reader-pacing heartbeat test failed so in CI).
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Heartbeat, startHeartbeat } from '../../src/transport/heartbeat.js';

class FakePeer extends EventEmitter {
  readonly OPEN = 1;
  readonly CLOSING = 2;
  readyState = 1;
  pings = 0;
  terminated = 0;
  ping(): void {
    this.pings++;
  }
  terminate(): void {
    this.terminated++;
    this.readyState = 3;
  }
}

/** `took()`: the peer took bytes this period (what `busy` reports once, as the connection's byte count does). */
function heartbeat() {
  const peer = new FakePeer();
  let drops = 0;
  let took = false;
  const hb = new Heartbeat(
    peer,
    () => drops++,
    () => {
      const t = took;
      took = false;
      return t;
    },
  );
  return { peer, hb, drops: () => drops, took: () => void (took = true) };
}

describe('WebSocket heartbeat rule', () => {
  it('a silent peer is dropped at the second silent period, exactly once, and pinged before', () => {
    const { peer, hb, drops } = heartbeat();
    hb.tick(); // the first period counts as heard (the connection just opened)
    expect(peer.pings).toBe(1);
    hb.tick();
    expect(drops()).toBe(0);
    expect(peer.pings).toBe(2);
    hb.tick();
    expect(drops()).toBe(1);
    expect(peer.terminated).toBe(1);
    for (let i = 0; i < 5; i++) hb.tick();
    expect(drops()).toBe(1);
    expect(peer.terminated).toBe(1);
    expect(peer.pings).toBe(2);
  });

  it('a peer heard once every two periods (a sign just under a whole timeout apart) is never dropped', () => {
    const { peer, hb, drops } = heartbeat();
    for (let i = 0; i < 40; i++) {
      if (i % 2 === 0) peer.emit('pong');
      hb.tick();
    }
    expect(drops()).toBe(0);
    expect(peer.pings).toBe(40);
  });

  it('every sign of life counts: a pong, a ping, a frame, and the peer taking bytes', () => {
    const { peer, hb, drops, took } = heartbeat();
    hb.tick();
    const signs: Array<() => void> = [() => peer.emit('pong'), () => peer.emit('ping'), () => peer.emit('message'), took];
    for (const sign of signs) {
      hb.tick(); // one silent period
      sign();
      hb.tick();
    }
    expect(drops()).toBe(0);
    hb.tick();
    hb.tick();
    expect(drops()).toBe(1);
  });

  it('while the connection closes: a silent peer is still dropped after two periods, unpinged; one taking bytes stays', () => {
    const { peer, hb, drops, took } = heartbeat();
    hb.tick();
    expect(peer.pings).toBe(1);
    peer.readyState = peer.CLOSING; // the server sent its close frame
    for (let i = 0; i < 4; i++) {
      took(); // its close frame waits behind bytes it is still reading
      hb.tick();
    }
    expect(drops()).toBe(0);
    hb.tick();
    hb.tick();
    expect(drops()).toBe(1);
    expect(peer.terminated).toBe(1);
    expect(peer.pings).toBe(1);
  });

  it('no heartbeat at 0 or past what a timer holds', () => {
    const peer = new FakePeer();
    expect(startHeartbeat(peer, 0, () => {}, () => false)).toBeUndefined();
    expect(startHeartbeat(peer, 2 ** 31, () => {}, () => false)).toBeUndefined();
  });
});
