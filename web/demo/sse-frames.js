// The demo page's reader of its race's SSE stream: text chunks in, each complete frame's `data` out. Kept apart
// from demo.js (no DOM) so the tests run it in Node.
//
// The text after the last complete frame is kept in the chunks it came in: none of them holds a frame's end
// ("\n\n"), so a message that arrives in many chunks is joined and scanned once, when its end comes. The page
// first searched its whole buffer on every chunk and re-sliced the rest after every frame, quadratic in a large
// message (outside attack atk39 F7).

export class SseFrames {
  constructor() {
    this.rest = [];
    this.restEndsLine = false;
  }

  /** The `data` of each frame that `chunk` completes, in order (a frame without data lines gives nothing). */
  push(chunk) {
    if (chunk === '') return [];
    this.rest.push(chunk);
    if (chunk.indexOf('\n\n') < 0 && !(this.restEndsLine && chunk[0] === '\n')) {
      this.restEndsLine = chunk.endsWith('\n');
      return [];
    }
    const buf = this.rest.join('');
    const out = [];
    let start = 0;
    let i;
    while ((i = buf.indexOf('\n\n', start)) >= 0) {
      const data = buf
        .slice(start, i)
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      start = i + 2;
      if (data) out.push(data);
    }
    this.rest = start < buf.length ? [buf.slice(start)] : [];
    this.restEndsLine = start < buf.length && buf.endsWith('\n');
    return out;
  }
}
