/**
 * `makeDirs` (src/make-dirs.ts), `mkdir -p` one directory at a time: it makes
 * every missing directory, accepts existing ones, and throws the first
 * refusal as it is (a file in the way, a file system that makes nothing).
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDirs } from '../../src/make-dirs.js';

const made: string[] = [];
afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('makeDirs', () => {
  it('makes every missing directory, and again is a no-op', () => {
    const root = mkdtempSync(join(tmpdir(), 'llr-dirs-'));
    made.push(root);
    const deep = join(root, 'a', 'b', 'c');
    makeDirs(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    makeDirs(deep);
    makeDirs(root);
    expect(statSync(deep).isDirectory()).toBe(true);
  });

  it('throws ENOTDIR when a file stands in the way', () => {
    const root = mkdtempSync(join(tmpdir(), 'llr-dirs-'));
    made.push(root);
    writeFileSync(join(root, 'file'), 'x');
    expect(() => makeDirs(join(root, 'file', 'sub'))).toThrow(expect.objectContaining({ code: 'ENOTDIR' }));
  });

  it('throws what a file system that makes nothing answers (procfs: ENOENT), at once', () => {
    expect(() => makeDirs('/proc/llr-nope/deeper')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
