import type { Rock } from "./compose.js";
import type { Logger } from "./server/logger.js";

/**
 * A graceful stop: health turns NOT_SERVING and new work is refused (503) at once, running calls get
 * the drain time (server.drainSeconds) to finish, then R (every session, every session uid reaped),
 * the catalogue and the listener are closed. Resolves once all is closed.
 */
export async function shutdown(rock: Rock, logger: Logger): Promise<void> {
  const started = Date.now();
  const outcome = await rock.lifecycle.drain();
  logger.info(outcome === "idle" ? "drained" : outcome === "timeout" ? "drain time over, stopping running calls" : "drain cut short", {
    ms: Date.now() - started,
  });
  await rock.close();
}

/**
 * SIGTERM or SIGINT (a service manager, Ctrl-C) stops gracefully and exits 0; a second one during the
 * drain cuts it short (the same clean close, without waiting). Later signals change nothing: the
 * close is bounded and must finish, or R's processes would outlive the service.
 */
export function installSignalHandlers(rock: Rock, logger: Logger): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.warn("second signal: stopping now", { signal });
      rock.lifecycle.cut();
      return;
    }
    stopping = true;
    logger.info("stopping", { signal });
    shutdown(rock, logger).then(
      () => process.exit(0),
      (error: Error) => {
        logger.error("could not stop cleanly", { error: error.message });
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}
