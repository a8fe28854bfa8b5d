import type { EngineEvent } from "../r/engine/engine.js";
import type { Logger } from "./logger.js";

/** The R server's and sessions' lifecycle in the service log (what R prints stays in the console log). */
export function engineLog(logger: Logger): (event: EngineEvent) => void {
  return (e) => {
    switch (e.kind) {
      case "server-started":
        return logger.info(e.restart ? "R server restarted" : "R server started", { version: e.version });
      case "server-start-failed":
        return logger.error(e.restart ? "R server restart failed" : "R server start failed", { error: e.error });
      case "server-stopped":
        return logger.info("R server stopped");
      case "server-crashed":
        return logger.error("R server exited unexpectedly", { autoRestart: e.autoRestart });
      case "session-opened":
        return logger.info("R session opened", { session: e.id, user: e.user });
      case "session-closed":
        return logger.info("R session closed", { session: e.id, user: e.user });
      case "session-reaped":
        return logger.info("R session idle, closing", { session: e.id, user: e.user });
      case "session-out-of-memory":
        return logger.warn(e.reason, { session: e.id, user: e.user });
      case "session-suspended":
        return logger.info(
          e.why === "stop" ? "R session suspended for the stop" : e.why === "idle" ? "R session idle, suspended" : "R session suspended",
          {
            session: e.id,
            user: e.user,
            ms: e.ms,
            bytes: e.bytes,
            ...(e.lost.length > 0 ? { notSaved: e.lost } : {}),
          },
        );
      case "session-checkpointed":
        return logger.info("R session checkpointed", { session: e.id, user: e.user, ms: e.ms, bytes: e.bytes });
      case "session-resumed":
        return logger.info("R session resumed", { session: e.id, user: e.user, ms: e.ms });
      case "session-save-failed":
        return logger.warn("R session could not be saved", { session: e.id, user: e.user, error: e.error });
      case "session-resume-failed":
        return logger.error("R session could not be resumed", { session: e.id, user: e.user, error: e.error });
      case "session-evicted":
        return logger.warn(e.reason, { session: e.id, user: e.user });
      case "sessions-restored":
        return logger.info(
          `R sessions of the previous run: ${e.restored.length} back from their saved state (suspended), ${e.ended.length} ended (no saved state)`,
          { restored: e.restored, ended: e.ended },
        );
      case "spare-died":
        return logger.warn("spare R session process died; another is forked at the next session or check");
    }
  };
}
