/**
 * What llr prints of text it did not write: a server's text (`shown`) and a refused command-line value (`quoted`).
 */
import { describe, expect, it } from 'vitest';
import { quoted, shown } from '../../src/terminal-text.js';

describe('terminal text', () => {
  it('shows control characters and bidirectional overrides as escapes, keeping line breaks only when asked', () => {
    expect(shown('a\u001b[2Jb')).toBe('a\\u{1b}[2Jb');
    expect(shown('x\ny\tz')).toBe('x\\u{a}y\\u{9}z');
    expect(shown('x\ny\tz', true)).toBe('x\ny\tz');
    expect(shown('rm \u202eexe.sh')).toBe('rm \\u{202e}exe.sh');
    expect(shown('plain – text ✓')).toBe('plain – text ✓');
  });

  it('quotes a refused value on one safe line, cut to 100 characters', () => {
    expect(quoted('nope')).toBe("'nope'");
    expect(quoted('\u001b]52;c;aGk=\u0007')).toBe("'\\u{1b}]52;c;aGk=\\u{7}'");
    expect(quoted('a\r\nb')).toBe("'a\\u{d}\\u{a}b'");
    const long = quoted('9'.repeat(5000));
    expect(long).toBe(`'${'9'.repeat(100)}…'`);
    // The cut comes before the escaping: an escape is never split, and the line stays short.
    expect(quoted('\u0007'.repeat(500)).length).toBeLessThan(100 * 6 + 4);
    expect(quoted('\u0007'.repeat(500))).toMatch(/^'(\\u\{7\}){100}…'$/);
  });
});
