/**
 * The server's WebSocket class (the `ws` library's `WebSocket` option): the library closes a connection itself
 * when its peer breaks the protocol (a message over `maxPayload`: 1009; text that is not UTF-8: 1007; a malformed
 * frame: 1002; a message in more fragments than `maxFragments`, or a frame in more reads than `maxBufferedChunks`:
 * 1008, since `ws` 8.23, which closed a paused run's connection with no word and no terminal event), from inside its frame reader and before it emits `error`, so nothing can be sent after it. A run in
 * flight on that connection then got no terminal event: its client read a response that never ended, and one
 * without a run got no word of why (the long-form chaos fuzzer's 40 MB append to a paused run, `--seed 1304`).
 * Here that close waits for `peerFault`, set by the connection, which says why and ends what runs as the lifetime
 * limit does, then closes with the library's code. Every other close is the library's own.
 */
import { WebSocket } from 'ws';

/** The close codes the `ws` library's reader sends for a peer's mistake (RFC 6455 §7.4.1). */
export const PEER_FAULT_CLOSES: ReadonlySet<number> = new Set([1002, 1007, 1008, 1009]);

export class ServerWebSocket extends WebSocket {
  /**
   * Called once, in place of the library's close for a peer's mistake, with the code and the close to make once
   * the connection has said its last; unset, the close is made at once.
   */
  peerFault: ((code: number, close: () => void) => void) | undefined = undefined;

  override close(code?: number, data?: string | Buffer): void {
    const hook = this.peerFault;
    // The library answers a peer's close frame through `close` too, echoing its code: a peer closing with 1009 (a
    // message of ours too big for it), 1002 or 1007 broke nothing, and is closed as any peer is (its run cancelled),
    // not told it sent an oversized or malformed frame (outside attack). `_closeFrameReceived` is the library's own.
    const peerClosed = (this as unknown as { _closeFrameReceived?: boolean })._closeFrameReceived === true;
    if (hook !== undefined && !peerClosed && code !== undefined && PEER_FAULT_CLOSES.has(code) && this.readyState === WebSocket.OPEN) {
      this.peerFault = undefined;
      hook(code, () => super.close(code, data));
      return;
    }
    super.close(code, data);
  }
}
