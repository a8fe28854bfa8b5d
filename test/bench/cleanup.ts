/** Teardown callbacks that must run even when the run is interrupted (SIGINT/SIGTERM). */
const registered: { readonly run: () => Promise<void> }[] = [];

/**
 * Registers `fn`; the returned function runs it once. Every caller, including `cleanupAll` and
 * callers that arrive while it runs, waits for that one run to finish.
 */
export function onCleanup(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  const run = () => (running ??= fn());
  registered.push({ run });
  return run;
}

/** Runs (or waits for) every registered teardown, the latest registered first; never throws. */
export async function cleanupAll(): Promise<void> {
  for (const entry of [...registered].reverse()) await entry.run().catch(() => {});
}
