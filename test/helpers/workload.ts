/** What workload reader tests share. */
import { expect } from 'vitest';
import { WorkloadError } from '../../src/workload/load.js';

/** The message of the WorkloadError `f` throws; fails the test when it throws something else or nothing. */
export function refusalOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(WorkloadError);
    return (err as Error).message;
  }
  throw new Error('read without an error');
}
