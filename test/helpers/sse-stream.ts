/**
 * A streamed `POST /v1/responses` read event by event on a real socket, for
 * tests of the long-lived protocol over HTTP: `next(type)` waits for the next
 * event of that type (an unexpected `error` event or the end of the stream
 * fails it at once, never a timeout), `ended` resolves when the stream ends,
 * saying whether `data: [DONE]` closed it. `abort()` closes it from the
 * client side. Also `postJson` for the append and cancel routes, and `parseSse` for a whole body already read.
 */
import type { ServerEvent } from '../../src/protocol/events.js';

type Of<K extends ServerEvent['type']> = Extract<ServerEvent, { type: K }>;

export class SseStream {
  readonly events: ServerEvent[] = [];
  /** The comment frames read (lines starting with `:`, a heartbeat), each with how many events had come before it. */
  readonly comments: Array<{ text: string; after: number }> = [];
  private commentCursor = 0;
  /** Resolves when the stream ends: `done` when it ended with `data: [DONE]`. */
  readonly ended: Promise<{ done: boolean }>;
  private cursor = 0;
  private finished = false;
  private wake: (() => void) | null = null;
  private readonly controller: AbortController;

  private constructor(res: Response, controller: AbortController) {
    this.controller = controller;
    this.ended = this.read(res.body!);
  }

  /** Open the stream (long-lived over HTTP unless `query` says otherwise: `''` is the http design); a refusal (non-200) throws with the status and body. */
  static async open(url: string, body: Record<string, unknown>, headers: Record<string, string> = {}, query = '?protocol=long-lived'): Promise<SseStream> {
    const controller = new AbortController();
    const res = await fetch(`${url}/v1/responses${query}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify({ stream: true, ...body }),
      signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`stream refused: ${res.status} ${await res.text()}`);
    return new SseStream(res, controller);
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<{ done: boolean }> {
    const decoder = new TextDecoder();
    let buf = '';
    let done = false;
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let idx: number;
        while ((idx = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, idx);
          const data = frame.split('\n').find((l) => l.startsWith('data: '))?.slice(6);
          buf = buf.slice(idx + 2);
          if (frame.startsWith(':')) this.comments.push({ text: frame, after: this.events.length });
          if (data === '[DONE]') done = true;
          else if (data) this.events.push(JSON.parse(data) as ServerEvent);
          this.wake?.();
        }
      }
    } catch {
      // Aborted by the test (or reset): the stream is over either way.
    }
    this.finished = true;
    this.wake?.();
    return { done };
  }

  /** The next event of `type` after the last one returned. */
  async next<K extends ServerEvent['type']>(type: K): Promise<Of<K>> {
    for (;;) {
      while (this.cursor < this.events.length) {
        const e = this.events[this.cursor++]!;
        if (e.type === type) return e as Of<K>;
        if (e.type === 'error') throw new Error(`unexpected error event while waiting for ${type}: ${JSON.stringify(e)}`);
      }
      if (this.finished) throw new Error(`the stream ended before a ${type} event`);
      await new Promise<void>((r) => (this.wake = r));
      this.wake = null;
    }
  }

  /** The next comment frame after the last one returned (the end of the stream fails it at once). */
  async comment(): Promise<{ text: string; after: number }> {
    for (;;) {
      if (this.commentCursor < this.comments.length) return this.comments[this.commentCursor++]!;
      if (this.finished) throw new Error('the stream ended before a comment');
      await new Promise<void>((r) => (this.wake = r));
      this.wake = null;
    }
  }

  abort(): void {
    this.controller.abort();
  }
}

/** POST a JSON body; the status and the parsed answer. */
export async function postJson(url: string, body: unknown = {}, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

/** A whole SSE body's events: each block's `data:` line parsed, `[DONE]` left out. */
export function parseSse(text: string): Record<string, any>[] {
  const events: Record<string, any>[] = [];
  for (const block of text.split('\n\n')) {
    const data = block.split('\n').find((l) => l.startsWith('data: '))?.slice(6);
    if (data && data !== '[DONE]') events.push(JSON.parse(data) as Record<string, any>);
  }
  return events;
}
