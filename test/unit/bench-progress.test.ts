/**
 * The bench's progress line within a step: a replay of thousands of user turns keeps one step busy for minutes, and
 * with nothing printed the bench looked hung (outside attack atk99 I1). `note` shows how far the step has got: a
 * plain line at most every NOTE_LINE_MS when stderr is not a terminal, the bar redrawn at most every NOTE_REDRAW_MS
 * when it is.
 */
import { describe, expect, it } from 'vitest';
import { NOTE_LINE_MS, NOTE_REDRAW_MS, Progress } from '../../src/bench/progress.js';

function sink(): { out: NodeJS.WriteStream; text: () => string } {
  let text = '';
  const out = { write: (s: string) => ((text += s), true), columns: 200 } as unknown as NodeJS.WriteStream;
  return { out, text: () => text };
}

describe('bench progress within a step', () => {
  it('not on a terminal: a line per NOTE_LINE_MS of a long step, none for a short one, and the step line as before', () => {
    let now = 1_000;
    const s = sink();
    const bar = new Progress(3, s.out, false, () => now);
    bar.step('overhead long-lived instant rep 1');
    now += NOTE_LINE_MS - 1;
    bar.note('model call 10 of 2000');
    expect(s.text()).toBe('');
    now += 1;
    bar.note('model call 11 of 2000');
    expect(s.text()).toBe('[0/3] overhead long-lived instant rep 1 · model call 11 of 2000 (0:10 in this step)\n');
    now += NOTE_LINE_MS / 2;
    bar.note('model call 700 of 2000');
    expect(s.text().split('\n')).toHaveLength(2);
    now += NOTE_LINE_MS / 2;
    bar.note('model call 1500 of 2000');
    expect(s.text().split('\n').at(-2)).toBe('[0/3] overhead long-lived instant rep 1 · model call 1500 of 2000 (0:20 in this step)');
    bar.tick('31000 ms');
    expect(s.text().split('\n').at(-2)).toBe('[1/3] overhead long-lived instant rep 1 · 31000 ms (0:20)');
    // A new step starts its own count: a note just after it prints nothing.
    bar.step('overhead ws instant rep 1');
    now += 1;
    bar.note('model call 1 of 2000');
    expect(s.text().split('\n')).toHaveLength(4);
  });

  it('on a terminal: the bar is redrawn with the step and its progress, at most every NOTE_REDRAW_MS', () => {
    let now = 0;
    const s = sink();
    const bar = new Progress(4, s.out, true, () => now);
    bar.step('grid http 4000 tok/s rep 2');
    const drawn = s.text().length;
    now += NOTE_REDRAW_MS - 1;
    bar.note('model call 3 of 66');
    expect(s.text().length).toBe(drawn);
    now += 1;
    bar.note('model call 4 of 66');
    expect(s.text().slice(drawn)).toMatch(/^\r\[\.+\] 0\/4 0:00 · grid http 4000 tok\/s rep 2 · model call 4 of 66$/);
    // Finishing the step drops its progress from the bar.
    bar.tick();
    expect(s.text().split('\r').at(-1)).not.toContain('model call');
  });
});
