/**
 * The workload reader on a non-blocking descriptor with nothing to read yet
 * (a pipe whose writer has not written: reads fail with EAGAIN). It spun on
 * EAGAIN, a core at 100% and a fresh 16 MiB buffer per try, until data came;
 * it now waits between tries. Simulated: `readSync` answers EAGAIN for a
 * while (node:fs mocked for this file only), then reads the real file, in
 * short reads as a pipe gives them.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type * as Fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';

const fake = vi.hoisted(() => ({ busyUntil: 0, tries: 0, reads: 0, maxRead: Infinity, pipe: false }));

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof Fs>();
  const readSync = (fd: number, buffer: Buffer, offset: number, length: number, position: number | null): number => {
    fake.tries++;
    if (Date.now() < fake.busyUntil) throw Object.assign(new Error('EAGAIN: resource temporarily unavailable, read'), { code: 'EAGAIN', errno: -11, syscall: 'read' });
    fake.reads++;
    return fs.readSync(fd, buffer, offset, Math.min(length, fake.maxRead), position);
  };
  // A pipe has no size to check first: the cap is the read loop's.
  const fstatSync = ((fd: number) => {
    const st = fs.fstatSync(fd);
    return fake.pipe ? Object.assign(st, { isFile: () => false }) : st;
  }) as typeof fs.fstatSync;
  return { ...fs, default: { ...fs, readSync, fstatSync }, readSync, fstatSync };
});

const { EAGAIN_MAX_WAIT_MS, readWorkloadText } = await import('../../src/workload/load.js');
const { WorkloadError } = await import('../../src/workload/types.js');

const dir = mkdtempSync(join(tmpdir(), 'llr-workload-wait-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => Object.assign(fake, { busyUntil: 0, tries: 0, reads: 0, maxRead: Infinity, pipe: false }));

describe('reading a non-blocking pipe with nothing yet (EAGAIN)', () => {
  it('waits for the data instead of spinning, then reads it whole', () => {
    const file = join(dir, 'w.jsonl');
    const text = `${'{"timestamp":"t","type":"turn_context","payload":{}}\n'.repeat(20_000)}`;
    writeFileSync(file, text);
    const waitMs = 300;
    fake.busyUntil = Date.now() + waitMs;
    fake.maxRead = 65_536; // a pipe's worth a read
    fake.pipe = true;
    const t0 = Date.now();
    const read = readWorkloadText(file);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(waitMs - 5);
    expect(read.text).toBe(text);
    // 1, 2, 4, ... ms, then every EAGAIN_MAX_WAIT_MS: about a dozen tries in 300 ms (it spun: 352 here, each try making a 16 MiB buffer).
    const failed = fake.tries - fake.reads;
    expect(failed).toBeGreaterThan(0);
    expect(failed).toBeLessThanOrEqual(Math.ceil(waitMs / EAGAIN_MAX_WAIT_MS) + 10);
    // Short reads fill a chunk before the next is made: every byte, in order, and the end (a read of 0).
    expect(fake.reads).toBe(Math.ceil(text.length / 65_536) + 1);
  });

  it('keeps the size cap across short reads and waits', () => {
    const file = join(dir, 'big.jsonl');
    writeFileSync(file, 'x'.repeat(200_000));
    fake.busyUntil = Date.now() + 20;
    fake.maxRead = 10_000;
    fake.pipe = true;
    let err: unknown;
    try {
      readWorkloadText(file, 150_000);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WorkloadError);
    expect((err as Error).message).toMatch(/larger than 150000 bytes/);
    // Stopped one byte past the cap: 15 reads of 10,000 bytes, then one of 1.
    expect(fake.reads).toBe(16);
    fake.busyUntil = Date.now() + 20;
    expect(readWorkloadText(file, 200_000).text).toHaveLength(200_000);
  });
});
