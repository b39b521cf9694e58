/**
 * Text a server sent, made safe to print to a terminal (`llr run`), and a refused command-line value quoted in an
 * error line.
 */

/** C0 controls but a line break and a tab, DEL, C1 controls, and the bidirectional marks, embeddings and isolates. */
const TERMINAL_UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
/** The same, and a line break or a tab too: a name, an id or a command is one line. */
const TERMINAL_UNSAFE_LINE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * What the server sent, as `llr run` prints it to a terminal: control characters and the bidirectional overrides
 * shown as `\u{…}` escapes (`lines`: a text's line breaks and tabs kept). A hostile or broken server's text went to
 * the terminal as sent: an escape sequence could retitle the window, set the clipboard (OSC 52), move the cursor or
 * hide what was printed, and a carriage return or a bidi override could make a command read as another.
 */
export function shown(text: string, lines = false): string {
  return text.replace(lines ? TERMINAL_UNSAFE : TERMINAL_UNSAFE_LINE, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
}

/**
 * A refused value as an error line quotes it: cut to 100 characters (a 120,000-digit one made a 120 KB error line,
 * outside attack atk43 F4) and made one safe line (an environment variable's value can hold an escape sequence).
 */
export function quoted(raw: string): string {
  return `'${shown(raw.length > 100 ? `${raw.slice(0, 100)}…` : raw)}'`;
}
