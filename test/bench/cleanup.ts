/** Teardown callbacks that must run even when the run is interrupted (SIGINT/SIGTERM). */
const pending = new Set<() => Promise<void>>();

/** Registers `fn`; the returned function runs it once and unregisters it. */
export function onCleanup(fn: () => Promise<void>): () => Promise<void> {
  let done = false;
  const once = async () => {
    if (done) return;
    done = true;
    pending.delete(once);
    await fn();
  };
  pending.add(once);
  return once;
}

export async function cleanupAll(): Promise<void> {
  for (const fn of [...pending].reverse()) await fn().catch(() => {});
}
