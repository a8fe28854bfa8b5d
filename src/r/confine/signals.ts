/** Signals to processes the engine started; one that is already gone needs nothing more. */
export function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** The same to every process of the group led by `pid` (R started with `detached`). */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  signalProcess(-pid, signal);
}
