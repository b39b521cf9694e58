/**
 * Which process runs a response stored before its end (a background response is stored when it starts, `in_progress`,
 * so that a server restarted after a crash can say it failed rather than that it never existed), and whether that
 * process is still there. Used by the background mode (the identity it stores) and by the readers of a stored
 * response (an `in_progress` one whose runner is gone is answered `failed`). Leaves out other hosts: a SQLite file in
 * WAL mode is shared only on one host (its `-shm` index is shared memory).
 */
import { readFileSync } from 'node:fs';
import type { Response } from '../protocol/objects.js';

/**
 * A process's start time on Linux (`/proc/PID/stat`, field 22, clock ticks since boot), or '' where unknown; undefined
 * for a process gone, a zombie included (dead, not yet waited for by its parent: its pid and start time are still there).
 */
function startTime(pid: number | 'self'): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) may hold spaces and parentheses: the fields after it follow its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Field 3, its state: Z (zombie) or X (dead). A server killed under a parent that never waits (a script's
    // subprocess left unwaited, a shell that exec'd another program) stayed a zombie, and its response in_progress.
    if (pid !== 'self' && (fields[0] === 'Z' || fields[0] === 'X')) return undefined;
    return fields[19] ?? '';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' && pid !== 'self' ? undefined : '';
  }
}

/**
 * This boot of the machine (Linux: `/proc/sys/kernel/random/boot_id`), or '' where unknown: a start time counts clock
 * ticks since boot, so after a reboot another process may have a stored runner's pid and start time both (a service
 * started at boot gets much the same pid and tick each time), and its response was answered in_progress for that
 * process's life.
 */
function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim();
  } catch {
    return '';
  }
}
const BOOT = bootId();

/**
 * This process, as stored with a response it runs: its pid and, on Linux, its start time (a pid is reused) and the
 * machine's boot (`pid:start:boot`; a runner stored before the boot was, `pid:start`, is read as of an unknown boot).
 */
export const THIS_RUNNER = `${process.pid}:${startTime('self')}:${BOOT}`;

/**
 * Whether `runner` (a stored `THIS_RUNNER`) is another process still running: false for this process (a response it
 * stored as running and no longer runs ended without its final write: the write failed), for a process gone, and for a
 * pid now another process's (its start time differs, or the machine booted since). Without a start time to compare (not Linux), the pid alone.
 */
export function runnerElsewhere(runner: string | undefined): boolean {
  if (runner === undefined || runner === THIS_RUNNER) return false;
  const [pidText, started = '', boot = ''] = runner.split(':');
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  // Stored in another boot of the machine: its process is gone, whatever has its pid now.
  if (boot !== '' && BOOT !== '' && boot !== BOOT) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists, another user's.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const now = startTime(pid);
  if (now === undefined) return false;
  return started === '' || now === '' || now === started;
}

/** What a stored response whose run never ended (its runner gone) failed with, as its readers answer it. */
export const ORPHANED_MESSAGE =
  'The server stopped (it was restarted or crashed) before this background response ended, or could not store its end; its output is lost. Create it again.';

/**
 * `r`, stored before its run ended (`unfinished`), as it is answered once its runner is gone: `failed` with a
 * `server_error` saying so (the API ends a background response it cannot finish `failed`; it never stays
 * `in_progress`). Its items still marked `in_progress` are `incomplete`, as at any end.
 */
export function orphanedResponse(r: Response): Response {
  return {
    ...r,
    status: 'failed',
    completed_at: null,
    error: { code: 'server_error', message: ORPHANED_MESSAGE },
    output: r.output.map((i) => ('status' in i && i.status === 'in_progress' ? { ...i, status: 'incomplete' } : i)) as Response['output'],
  };
}
