/**
 * `mkdir -p`, one directory at a time. Node 20's `mkdirSync(path, {recursive:
 * true})` never returns for a path under a file system that refuses to create
 * anything and answers `ENOENT` for it (`/proc/nope`): it spins at full CPU in
 * one synchronous call, so `llr bench --out /proc/nope` and `llr serve --store
 * /proc/nope/db.sqlite` ignored SIGTERM until killed (outside attack). Here
 * each missing directory is made alone, from the nearest existing one down,
 * and the first refusal is thrown as it is (`ENOENT`, `EACCES`, `ENOTDIR`…).
 * Used by the store and the benchmarks' output directories.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

export function makeDirs(path: string): void {
  const missing: string[] = [];
  let dir = resolve(path);
  for (;;) {
    let isDir: boolean | null;
    try {
      isDir = statSync(dir).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      isDir = null;
    }
    if (isDir === true) break;
    if (isDir === false) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR', path: dir });
    missing.push(dir);
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (err) {
      // Made meanwhile by another process: fine if it is a directory now.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(d).isDirectory()) throw err;
    }
  }
}
