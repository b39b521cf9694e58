/**
 * `exitWithParent`: a child process started by a benchmark (the server, the
 * echo and frame servers) ends itself when the process that started it is
 * gone, so a benchmark killed with SIGKILL — which cannot clean up — leaves
 * no servers behind. The parent passes its pid in `LLR_PARENT_PID`; the
 * check is a signal-0 probe once a second on an unref'd timer, so it never
 * keeps a process alive and costs nothing measurable.
 */
export function exitWithParent(onOrphaned: () => void): void {
  const pid = Number(process.env['LLR_PARENT_PID']);
  if (!Number.isInteger(pid) || pid <= 0) return;
  const timer = setInterval(() => {
    try {
      process.kill(pid, 0);
    } catch {
      clearInterval(timer);
      onOrphaned();
    }
  }, 1000);
  timer.unref();
}
