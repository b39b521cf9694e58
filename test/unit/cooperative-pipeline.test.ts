/**
 * The cooperative forms of the pipeline give exactly the results of the
 * straightforward ones: a large body tokenized in place equals the joined
 * text tokenized at once, the sliced safety scan finds (and only finds) what
 * a whole-text scan finds, the sliced JSON check agrees with JSON.parse, the
 * conversation digest hashed in pieces equals the hash of the joined text,
 * and the async forms really yield to the event loop on large inputs.
 */
import { describe, expect, it } from 'vitest';
import { conversationDigest } from '../../src/model/conversation.js';
import { hashString } from '../../src/model/rng.js';
import { encodeText } from '../../src/model/tokenizer.js';
import { RunMetrics } from '../../src/pipeline/metrics.js';
import { JOIN_LIMIT_CHARS, itemText, renderFull, renderFullAsync } from '../../src/pipeline/render.js';
import { SAFETY_PATTERNS, SCAN_SLICE_CHARS, safetyScan, safetyScanAsync } from '../../src/pipeline/safety.js';
import type { InputItem } from '../../src/protocol/objects.js';

const user = (content: string): InputItem => ({ type: 'message', role: 'user', content }) as InputItem;
const big = (start: string) => start + 'lorem ipsum dolor sit amet, '.repeat(Math.ceil(JOIN_LIMIT_CHARS / 28) + 10);

describe('render of a large body in place', () => {
  it.each([
    ['letters', 'Hello'],
    ['leading newlines', '\n\n\nHello'],
    ['leading spaces', '    Hello'],
    ['leading digits', '12345 Hello'],
    ['a huge first pre-token', 'x'.repeat(10_000)],
    ['newline then space', '\n Hello'],
  ])('gives the tokens of the joined text when the body starts with %s', (_name, start) => {
    const item = user(big(start));
    const ctx = renderFull(null, [], [item], new RunMetrics());
    const expected = encodeText(itemText(item).text);
    const got = Array.from(ctx.tokens.view());
    expect(got.length).toBe(expected.length + 2);
    expect(got.slice(1, -1)).toEqual(expected);
  });

  it.each([
    ['one long pre-token', 'x'.repeat(1_200_000)],
    ['many pre-tokens', 'ab '.repeat(400_000)],
    ['lone surrogates', '\ud800'.repeat(600_000)],
  ])('gives the tokens of the joined text when an unknown item names its type by %s (a long prefix, tokenised in slices)', (_name, type) => {
    const item = { type } as unknown as InputItem;
    const ctx = renderFull(null, [], [item], new RunMetrics());
    const expected = encodeText(itemText(item).text);
    const got = Array.from(ctx.tokens.view());
    expect(got.length).toBe(expected.length + 2);
    expect(got.slice(1, -1)).toEqual(expected);
  });

  it('the cooperative render equals the synchronous one and yields on a large input', async () => {
    const items = [user(big('Once')), user('short'), user(big(' again'))];
    const sync = renderFull('Be brief.', [], items, new RunMetrics());
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    const coop = await renderFullAsync('Be brief.', [], items, new RunMetrics());
    clearInterval(ticker);
    expect(Array.from(coop.tokens.view())).toEqual(Array.from(sync.tokens.view()));
    expect(turns).toBeGreaterThan(0);
  });
});

describe('sliced safety scan', () => {
  const filler = (n: number) => 'word '.repeat(Math.ceil(n / 5)).slice(0, n);
  const secrets = {
    aws: 'AKIAABCDEFGHIJKLMNOP',
    github: `ghp_${'a1'.repeat(20)}`,
    google: `AIza${'b'.repeat(35)}`,
    key: `-----BEGIN RSA PRIVATE KEY-----\n${'QUJD'.repeat(20)}`,
  };

  it.each(Object.entries(secrets))('finds a %s credential straddling every slice edge', (_name, secret) => {
    for (const offset of [SCAN_SLICE_CHARS - 3, SCAN_SLICE_CHARS - secret.length + 1, 2 * SCAN_SLICE_CHARS - 1]) {
      const text = `${filler(offset)} ${secret} ${filler(SCAN_SLICE_CHARS)}`;
      expect(() => safetyScan([user(text)], new RunMetrics()), `offset ${offset}`).toThrow(/flagged/);
    }
  });

  it('does not invent a match at a slice edge (a \\b that the whole text does not have)', () => {
    // A GitHub-looking run glued to an underscore: no word boundary after it in the whole text.
    const run = `ghp_${'a'.repeat(SCAN_SLICE_CHARS)}_tail`;
    const text = `${filler(100)} ${run}`;
    expect(SAFETY_PATTERNS.find((p) => p.name === 'GitHub token')!.re.test(text)).toBe(false);
    expect(() => safetyScan([user(text)], new RunMetrics())).not.toThrow();
  });

  it('a candidate at a slice start is confirmed with the character before it (its leading \\b)', () => {
    // The slice starts at the AKIA (the scanned text is the prompt's `user\n` then this): its global match sees a
    // boundary there, the whole text (an x before it) does not.
    const text = `${filler(SCAN_SLICE_CHARS - 2 - 'user\n'.length)} x${secrets.aws} ${filler(SCAN_SLICE_CHARS)}`;
    expect(itemText(user(text)).text.indexOf('AKIA')).toBe(SCAN_SLICE_CHARS);
    expect(() => safetyScan([user(text)], new RunMetrics())).not.toThrow();
    expect(() => safetyScan([user(text.replace('xAKIA', ' AKIA'))], new RunMetrics())).toThrow(/flagged/);
  });

  it('a candidate followed by 8 M characters of its open tail is flagged, not a RangeError of the regex engine', () => {
    // Confirmed against the whole text, `[0-9A-Za-z-]{8,}` ran through every character and overflowed its backtrack stack.
    expect(() => safetyScan([user('xoxa-12345678-'.repeat(580_000))], new RunMetrics())).toThrow(/flagged/);
  });

  it('the cooperative scan agrees and yields', async () => {
    const clean = user(filler(4 * SCAN_SLICE_CHARS));
    const dirty = user(`${filler(3 * SCAN_SLICE_CHARS)} ${secrets.aws}`);
    await expect(safetyScanAsync([clean], new RunMetrics())).resolves.toBeUndefined();
    await expect(safetyScanAsync([clean, dirty], new RunMetrics())).rejects.toThrow(/input\[1\]/);
  });
});

describe('conversation digest in pieces', () => {
  it('equals the hash of the joined strings', () => {
    const items = [
      user(big('Hi')),
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'one' }, { type: 'output_text', text: 'two' }] } as InputItem,
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{"a":1}' } as InputItem,
      { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'x' }, { type: 'input_text', text: 'y' }] } as InputItem,
    ];
    let h = hashString(String(7));
    h = hashString(`\u0001user\u0002${(items[0] as { content: string }).content}`, h);
    h = hashString('\u0001assistant\u0002one\ntwo', h);
    h = hashString('\u0003f\u0002{"a":1}', h);
    h = hashString('\u0004x\ny', h);
    expect(conversationDigest(items, 7)).toBe(h);
  });
});
