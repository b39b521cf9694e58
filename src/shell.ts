/**
 * The shell commands `llr run` (the example agent) runs for the model: each
 * in a process group of its own, so that stopping it stops everything it
 * started. With `exec`, a command past its 60 s, or `llr run` ended by
 * SIGINT / SIGTERM, killed (or left) only `bash`: what bash had started
 * (`sleep 300`, a server, a build) went on, orphaned, with nobody to stop it.
 */
import { spawn, type ChildProcess } from 'node:child_process';

/** The process groups of the commands running now. */
const running = new Set<ChildProcess>();

/**
 * Kill every running command's whole process group (SIGKILL: a command's
 * trap must not keep it alive). Resolves, with how many there were, once
 * each command's output pipes have closed: every process of the group that
 * held them has exited.
 */
export function killRunningCommands(): Promise<number> {
  const children = [...running];
  // A command leaves the set at its 'close', so each one here has that still to come.
  const closed = children.map((c) => new Promise((resolve) => c.once('close', resolve)));
  for (const child of children) killGroup(child);
  return Promise.all(closed).then(() => children.length);
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/**
 * Run `cmd` with bash, its stdin empty (a command reading stdin got a pipe
 * nobody wrote to, and waited out its 60 s): stdout then stderr, and
 * `(exit code N)` when it failed. Past `timeoutMs`, or past `maxBytes` of
 * output, its process group is killed.
 */
export function runShell(cmd: string, timeoutMs = 60_000, maxBytes = 1 << 20): Promise<string> {
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn('/bin/bash', ['-c', cmd], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      // Refused before any process (a command line past the kernel's 128 KiB per argument: E2BIG): said as its output,
      // which `llr run` prints and answers; the rejection was answered but printed nothing (outside attack atk59).
      resolve(`(could not start: ${(e as Error).message})`);
      return;
    }
    running.add(child);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = 0;
    let why = '';
    const collect = (into: Buffer[]) => (chunk: Buffer) => {
      if (bytes >= maxBytes) return;
      into.push(chunk.subarray(0, maxBytes - bytes));
      bytes += chunk.length;
      if (bytes >= maxBytes) {
        why = `output past ${maxBytes} bytes, stopped`;
        killGroup(child);
      }
    };
    child.stdout!.on('data', collect(out));
    child.stderr!.on('data', collect(err));
    const timer = setTimeout(() => {
      why = `still running after ${timeoutMs} ms, stopped`;
      killGroup(child);
    }, timeoutMs);
    let ended = false;
    const done = (code: number | null, signal: NodeJS.Signals | null) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      running.delete(child);
      const status = why ? `(${why})` : code ? `(exit code ${code})` : signal ? `(killed by ${signal})` : '';
      const text = `${Buffer.concat(out).toString()}${Buffer.concat(err).toString()}`;
      resolve(`${text}${status ? `\n${status}` : ''}`);
    };
    child.once('error', (e) => {
      why = e.message;
      done(1, null);
    });
    child.once('close', done);
  });
}

/** The one tool `llr run` offers. */
export const RUN_TOOL = 'exec_command';

/**
 * `llr run`'s tool call as a command line, or why it is not run: a call of another tool (a replayed recording's
 * `shell`), or arguments that are not `{"cmd": string}`. Such calls ran `/bin/bash -c undefined` (outside attack atk57 F4).
 */
export function commandOf(call: { name: string; arguments: string }): { line: string; refused?: undefined } | { refused: string } {
  if (call.name !== RUN_TOOL) return { refused: `unsupported call: ${call.name.slice(0, 200)} (this client offers only ${RUN_TOOL})` };
  let args: unknown;
  try {
    args = JSON.parse(call.arguments);
  } catch {
    return { refused: `${RUN_TOOL}: its arguments are not JSON (expected {"cmd": "..."})` };
  }
  const cmd = typeof args === 'object' && args !== null && !Array.isArray(args) ? (args as { cmd?: unknown }).cmd : undefined;
  if (typeof cmd !== 'string') return { refused: `${RUN_TOOL}: its arguments have no string \`cmd\` (expected {"cmd": "..."})` };
  return { line: cmd };
}
