/**
 * A workload file's bytes to text: UTF-8 only, refused with a message that
 * says what the file is instead, never decoded with U+FFFD in place of what
 * it could not read.
 *
 * - A UTF-8 BOM is accepted (the readers drop it).
 * - UTF-16 or UTF-32 (told by its BOM, or by the NUL bytes every ASCII
 *   character of UTF-16 text carries: JSON starts with ASCII) is refused as
 *   such: "the file is UTF-16 …; convert it to UTF-8".
 * - A compressed file (gzip, zstd, xz, bzip2, zip: told by its magic number)
 *   is refused as such, with the command that decompresses it.
 * - Invalid UTF-8 is refused at its line, with the byte, its column in the
 *   line and its offset in the file.
 *
 * The check is `buffer.isUtf8` (a vectorised scan, well under the cost of the
 * decode that follows it); the offending byte is searched for only once the
 * file is known to be bad. Line endings are the readers' business (load.ts).
 * Used by `readWorkload` (load.ts).
 */
import { isUtf8 } from 'node:buffer';
import { WorkloadError } from './types.js';

/** The file's text (its BOM, if any, kept: the readers drop it); a WorkloadError when it is not UTF-8. */
export function decodeWorkload(bytes: Buffer, name: string): string {
  const packed = compressed(bytes);
  if (packed !== null) throw new WorkloadError(0, `${name}: the file is ${packed[0]}-compressed, not text; decompress it first: ${packed[1]} FILE > rollout.jsonl, or pass <(${packed[1]} FILE) as the file`);
  const wide = wideEncoding(bytes);
  if (wide !== null) throw new WorkloadError(0, `${name}: the file is ${wide}; convert it to UTF-8 (e.g. iconv -f ${wide.split(' ')[0]} -t UTF-8)`);
  if (isUtf8(bytes)) return bytes.toString('utf8');
  const at = firstInvalidUtf8(bytes);
  if (at < 0) throw new WorkloadError(0, `${name}: not valid UTF-8; a workload file must be UTF-8 text`);
  // Lines as the readers count them: LF, or CR in a file without any LF (load.ts).
  const eol = bytes.includes(0x0a) ? 0x0a : 0x0d;
  let line = 1;
  let start = 0;
  for (let i = bytes.indexOf(eol); i >= 0 && i < at; i = bytes.indexOf(eol, i + 1)) {
    line++;
    start = i + 1;
  }
  const byte = bytes[at]!.toString(16).toUpperCase().padStart(2, '0');
  throw new WorkloadError(
    line,
    `${name}:${line}: not valid UTF-8: byte 0x${byte} at byte ${at - start + 1} of the line (offset ${at} in the file); a workload file must be UTF-8 text, convert it to UTF-8`,
  );
}

/**
 * The compression format and its decompressing command when the bytes start with one's magic number, else null. Read
 * as text, a `.jsonl.gz` (a rollout archived or sent compressed) was refused as "not valid UTF-8: byte 0x8B at byte
 * 2 of the line", which says nothing of what to do. None of these magic numbers starts JSON text.
 */
function compressed(b: Buffer): [string, string] | null {
  const starts = (...m: number[]) => m.every((x, i) => b[i] === x);
  if (starts(0x1f, 0x8b)) return ['gzip', 'zcat'];
  if (starts(0x28, 0xb5, 0x2f, 0xfd)) return ['zstd', 'zstdcat'];
  if (starts(0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00)) return ['xz', 'xzcat'];
  if (starts(0x42, 0x5a, 0x68) && b[3]! >= 0x31 && b[3]! <= 0x39) return ['bzip2', 'bzcat'];
  if (starts(0x50, 0x4b, 0x03, 0x04)) return ['zip', 'unzip -p'];
  return null;
}

/** 'UTF-16 (little-endian)' and the like when the bytes are UTF-16 or UTF-32 text, else null. */
function wideEncoding(b: Buffer): string | null {
  if (b[0] === 0xff && b[1] === 0xfe) return b[2] === 0 && b[3] === 0 ? 'UTF-32LE (little-endian, with a BOM)' : 'UTF-16LE (little-endian, with a BOM)';
  if (b[0] === 0xfe && b[1] === 0xff) return 'UTF-16BE (big-endian, with a BOM)';
  if (b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff) return 'UTF-32BE (big-endian, with a BOM)';
  // No BOM: UTF-16 text whose first characters are ASCII (as JSON's are) has a NUL in every other byte. JSON text
  // holds no NUL byte at all (a NUL in a string is escaped), so a UTF-8 workload never shows this pattern.
  const n = Math.min(b.length, 64) & ~1;
  if (n < 4) return null;
  let evenNul = 0;
  let oddNul = 0;
  for (let i = 0; i < n; i += 2) {
    if (b[i] === 0) evenNul++;
    if (b[i + 1] === 0) oddNul++;
  }
  const half = n / 4;
  if (oddNul >= half && evenNul === 0) return 'UTF-16LE (little-endian, no BOM)';
  if (evenNul >= half && oddNul === 0) return 'UTF-16BE (big-endian, no BOM)';
  return null;
}

/** Offset of the first byte that starts an invalid UTF-8 sequence (Unicode 15, table 3-7), or -1. */
export function firstInvalidUtf8(b: Uint8Array): number {
  const n = b.length;
  let i = 0;
  while (i < n) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      if (c === 0xe0) lo = 0xa0; // overlong
      else if (c === 0xed) hi = 0x9f; // surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      if (c === 0xf0) lo = 0x90; // overlong
      else if (c === 0xf4) hi = 0x8f; // past U+10FFFF
    } else return i;
    for (let k = 1; k <= need; k++) {
      const x = b[i + k];
      if (x === undefined || x < (k === 1 ? lo : 0x80) || x > (k === 1 ? hi : 0xbf)) return i;
    }
    i += need + 1;
  }
  return -1;
}
